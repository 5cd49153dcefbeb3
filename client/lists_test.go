package client_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
)

// The list calls read every page of the gateway's lists, following next,
// and keep their own query (a prefix) on every page; with Limit, only as
// many pages as they need. The proxy makes the gateway's pages 2 long.
func TestListsReadEveryPage(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	g, _ := gateway(t)
	p, c := proxiedClient(t, g.URL)
	p.set(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.Method == http.MethodGet && r.URL.Query().Get("limit") != "" {
			q := r.URL.Query()
			q.Set("limit", "2")
			r.URL.RawQuery = q.Encode()
		}
		next.ServeHTTP(w, r)
	})
	ctx := ctxFor(t, time.Minute)
	lease := grant(t, c, "pages")
	for i := range 5 {
		if _, err := lease.Lock(ctx, fmt.Sprintf("paged-%d", i), "", 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lease.Lock(ctx, "other", "", 0); err != nil {
		t.Fatal(err)
	}
	before := len(p.requests())
	locks, err := c.Locks(ctx, "paged-")
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != 5 || locks[0].Name != "paged-0" || locks[4].Name != "paged-4" {
		t.Fatalf("Locks listed %+v, want paged-0 to paged-4", locks)
	}
	reqs := p.requests()[before:]
	if len(reqs) != 3 {
		t.Fatalf("Locks sent %d requests for 5 locks in pages of 2, want 3", len(reqs))
	}
	for _, r := range reqs {
		if r.URL.Query().Get("prefix") != "paged-" {
			t.Fatalf("a page was asked for without the prefix: %s", r.URL)
		}
	}
	// A limit reads only what it needs.
	before = len(p.requests())
	first, err := c.Locks(ctx, "paged-", client.Limit(3))
	if err != nil || len(first) != 3 || first[2].Name != "paged-2" {
		t.Fatalf("Locks with Limit(3) listed %+v, %v; want paged-0 to paged-2", first, err)
	}
	if n := len(p.requests()) - before; n != 2 {
		t.Fatalf("Locks with Limit(3) sent %d requests, want 2 (pages of 2)", n)
	}
	for i := range 3 {
		if _, err := c.Produce(ctx, fmt.Sprintf("queue-%d", i), []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
	}
	queues, err := c.Queues(ctx)
	if err != nil || len(queues) != 3 {
		t.Fatalf("Queues listed %+v, %v; want 3", queues, err)
	}
	leases, err := c.Leases(ctx)
	if err != nil || len(leases) != 1 || leases[0].ID != lease.ID() {
		t.Fatalf("Leases listed %+v, %v; want the one lease", leases, err)
	}
}
