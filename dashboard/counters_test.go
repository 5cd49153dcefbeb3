package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/dashtest"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestCountersPageShowsLiveValues: the counters' page shows each counter
// in every format its bytes fit, and the value an add makes is pushed to
// it without asking.
func TestCountersPageShowsLiveValues(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	gwtest.MustStatus(t, gwtest.Do(t, "PUT", g.URL+"/v1/counters/hits", map[string]any{"value": 1234}), 200, "set")
	gwtest.MustStatus(t, gwtest.Do(t, "PUT", g.URL+"/v1/counters/wide?format=int64", map[string]any{"value": -5}), 200, "set int64")
	_, _, body := gwtest.GetPage(t, g.URL+"/ui/counters")
	// 1234 in ASCII is 4 bytes: an int32 reading too (0x31323334).
	for _, want := range []string{`id="counter-hits"`, ">1234<", ">825373492<", `id="counter-wide"`, ">-5<", "2 counters"} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /ui/counters has no %s:\n%s", want, body)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dashtest.Dial(t, ctx, g.URL, "counters", nil)
	snap, err := dashtest.Read(ctx, c)
	if err != nil || !snap.Snapshot {
		t.Fatalf("first message: %+v, %v", snap, err)
	}
	var view dashtest.View
	view.Apply(snap)
	gwtest.MustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/counters/hits/add", map[string]any{"delta": 100000}), 200, "add")
	f := view.WaitFrag(t, ctx, c, "the added value", func(f dashtest.Frag) bool {
		return f.ID == "counter-hits" && strings.Contains(f.HTML, ">101234<")
	})
	if f.Op != "upsert" || f.Parent != "counters-list" || strings.Contains(f.HTML, "825373492") {
		t.Errorf("the counter should be upserted with its one reading: %+v", f)
	}
	gwtest.MustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/counters/hits", nil), 204, "delete")
	view.WaitFrag(t, ctx, c, "the counter to go", func(f dashtest.Frag) bool { return f.ID == "counter-hits" && f.Op == "remove" })
}
