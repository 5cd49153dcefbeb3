package client_test

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestCounters: read, add, set and compare-and-set a counter, its typed
// errors, a watch of it and the list, on a real gateway.
func TestCounters(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	c, err := client.New(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	if st, err := c.Counter(ctx, "hits", ""); err != nil || st.Value != 0 || st.Version != -1 {
		t.Fatalf("absent: %+v, %v", st, err)
	}
	w, err := c.WatchCounter(ctx, "hits", client.FormatDecimal)
	if err != nil {
		t.Fatal(err)
	}
	if st := <-w.C; st.Version != -1 {
		t.Fatalf("the watch's first state: %+v", st)
	}
	st, err := c.AddCounter(ctx, "hits", "", 3)
	if err != nil || st.Value != 3 || st.Version != 0 || st.Index == 0 {
		t.Fatalf("add: %+v, %v", st, err)
	}
	gwtest.Eventually(t, 10*time.Second, func() error {
		if got := <-w.C; got.Value != 3 {
			return fmt.Errorf("watched %+v (%v)", got, w.Err())
		}
		return nil
	})
	_, err = c.CompareAndSetCounter(ctx, "hits", "", 10, 5)
	e := wantCode(t, err, client.ErrVersionMismatch, http.StatusConflict)
	var value int64
	var version int32
	if _, err := e.Decode("value", &value); err != nil || value != 3 {
		t.Fatalf("version_mismatch value %d, %v", value, err)
	}
	if _, err := e.Decode("version", &version); err != nil || version != 0 {
		t.Fatalf("version_mismatch version %d, %v", version, err)
	}
	if st, err = c.CompareAndSetCounter(ctx, "hits", "", 10, version); err != nil || st.Value != 10 || st.Version != 1 {
		t.Fatalf("compare-and-set: %+v, %v", st, err)
	}
	if st, err = c.SetCounter(ctx, "shared", client.FormatInt32, math.MaxInt32); err != nil {
		t.Fatal(err)
	}
	_, err = c.AddCounter(ctx, "shared", client.FormatInt32, 1)
	wantCode(t, err, client.ErrOutOfRange, http.StatusConflict)
	_, err = c.Counter(ctx, "shared", client.FormatDecimal)
	wantCode(t, err, client.ErrFormatMismatch, http.StatusConflict)
	list, err := c.Counters(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "hits" || list[0].Values[client.FormatDecimal] != 10 ||
		list[1].Values[client.FormatInt32] != math.MaxInt32 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	for _, n := range []string{"hits", "shared"} {
		if err := c.DeleteCounter(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
}
