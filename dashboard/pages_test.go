package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/dashtest"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// A dashboard of many locks shows them a page at a time, filtered by the
// gateway, and reads and watches only the page it shows: the page is small
// whatever the number of locks, and a live page follows its own part of
// the list (a lock released on it is replaced by the next one). It used to
// read, watch and render every lock.
func TestADashboardOfManyLocksShowsAPageAndWatchesIt(t *testing.T) {
	// Serial: counts the binary's goroutines (NoGoroutinesLeft).
	gwtest.NoGoroutinesLeft(t)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	lease := gwtest.NewLease(t, g.URL, "1m", "many")
	const n = 520 // more than the dashboard reads whole
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				gwtest.MustStatus(t, gwtest.Acquire(t, g.URL, fmt.Sprintf("many-%03d", i), lease, "0s"), 200, "acquire")
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()

	status, _, body := gwtest.GetPage(t, g.URL+"/ui/locks")
	if status != 200 {
		t.Fatalf("GET /ui/locks: %d", status)
	}
	if got := strings.Count(body, `class="item lock"`); got != 50 {
		t.Fatalf("the first page shows %d locks, want 50", got)
	}
	if !strings.Contains(body, `id="lock-many-049"`) || strings.Contains(body, `id="lock-many-050"`) {
		t.Errorf("the first page is not many-000 to many-049")
	}
	if !strings.Contains(body, `rel="next" href="/ui/locks?after=many-049"`) {
		t.Errorf("the first page has no link to the next")
	}
	if !strings.Contains(body, fmt.Sprintf(`id="count-locks">%d<`, n)) {
		t.Errorf("the navigation does not count %d locks", n)
	}
	if len(body) > 100<<10 {
		t.Errorf("the first page of %d locks is %d bytes", n, len(body))
	}
	_, _, second := gwtest.GetPage(t, g.URL+"/ui/locks?after=many-049")
	if !strings.Contains(second, `id="lock-many-050"`) || strings.Contains(second, `id="lock-many-049"`) || strings.Count(second, `class="item lock"`) != 50 {
		t.Errorf("the second page is not many-050 to many-099")
	}
	_, _, filtered := gwtest.GetPage(t, g.URL+"/ui/locks?q=MANY-51")
	if got := strings.Count(filtered, `class="item lock"`); got != 10 || !strings.Contains(filtered, `id="lock-many-519"`) || strings.Contains(filtered, `rel="next"`) {
		t.Errorf("?q=MANY-51 shows %d locks, want many-510 to many-519 on one page", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dashtest.Dial(t, ctx, g.URL, "locks", nil)
	var view dashtest.View
	view.Until(t, ctx, c, "the snapshot", func(v *dashtest.View) bool { return strings.Count(v.HTML["locks-list"], `class="item lock"`) == 50 })
	if watched := gwtest.Metric(t, g.URL, "", "zkgate_watched_paths"); watched > 100 {
		t.Errorf("a dashboard of a page of 50 of %d locks watches %v paths", n, watched)
	}
	gwtest.MustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/locks/many-000/release", map[string]any{"lease": lease}), 204, "release")
	removed, added := false, false
	for !removed || !added {
		m, err := dashtest.Read(ctx, c)
		if err != nil {
			t.Fatalf("waiting for many-000 to be replaced by many-050: %v", err)
		}
		for _, f := range m.Frags {
			removed = removed || f.Op == "remove" && f.ID == "lock-many-000"
			added = added || f.Op == "upsert" && f.ID == "lock-many-050"
		}
	}
	gwtest.MustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}

// TestDashboardLeasesReadAsRenewing: a lease of TTL 5m on a gateway of a
// 10 s session timeout is shown with its TTL, its last renewal and its
// deadline labelled "confirmed until", where the page counted that
// deadline down as "expires in 9s" and the lease read as one about to end.
func TestDashboardLeasesReadAsRenewing(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{SessionTimeout: 10 * time.Second})
	lease := gwtest.NewLease(t, g.URL, "5m", "renewing")
	gwtest.MustStatus(t, gwtest.Acquire(t, g.URL, "renewing-lock", lease, "0s"), 200, "acquire")
	_, _, page := gwtest.GetPage(t, g.URL+"/ui/leases")
	start := strings.Index(page, `id="lease-`+lease+`"`)
	if start < 0 {
		t.Fatalf("the leases page does not show the lease:\n%s", page)
	}
	row := page[start:]
	row = row[:strings.Index(row, "</tr>")]
	for _, want := range []string{"ttl 5m0s", `data-prefix="renewed "`, "confirmed until", " UTC</time>"} {
		if !strings.Contains(row, want) {
			t.Errorf("the lease's row lacks %q:\n%s", want, row)
		}
	}
	if strings.Contains(row, "expires in") || strings.Contains(row, "data-until") {
		t.Errorf("the lease's row counts its confirmed deadline down as an end:\n%s", row)
	}
	_, _, overview := gwtest.GetPage(t, g.URL+"/")
	if !strings.Contains(overview, "ttl 5m0s") || !strings.Contains(overview, `data-prefix="renewed "`) || strings.Contains(overview, "expires in") {
		t.Errorf("the overview's lease does not read as renewing")
	}
	gwtest.MustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}
