package recipes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// A list reads a bounded number of names a page, however many have nobody
// in them (containers ZooKeeper has not removed yet; here persistent nodes
// another client made): such a page is short, even empty, and its next
// name goes on past them. Every held lock comes on some page, once.
func TestAListPagesPastNamesWithNobodyInThem(t *testing.T) {
	t.Parallel()
	px, svc := proxiedService(t)
	raw := rawClient(t)
	ctx := context.Background()
	for i := range 60 {
		if _, err := raw.Create(fmt.Sprintf("%s/locks/empty-%02d", svc.root, i), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	lease, _ := svc.Leases.Create(ctx, time.Minute, "holder", "")
	want := []string{"empty-30-held", "held-a", "held-b"}
	for _, name := range want {
		if _, err := svc.Locks.Acquire(ctx, lease, name, ModeExclusive, 0); err != nil {
			t.Fatal(err)
		}
	}
	const limit = 2
	var got []string
	pages := 0
	for p := (Page{Limit: limit}); ; pages++ {
		mark := len(px.Requests(svc.root + "/locks"))
		items, next, err := svc.Locks.List(ctx, "", p)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) > limit {
			t.Fatalf("a page of %d for a limit of %d", len(items), limit)
		}
		read := 0 // the names listed, each a lock's children
		for _, r := range px.Requests(svc.root + "/locks")[mark:] {
			if r.Op == opGetChildren2 && r.Path != svc.root+"/locks" {
				read++
			}
		}
		if read > pageChunks*limit {
			t.Fatalf("a page read %d names, want at most %d", read, pageChunks*limit)
		}
		for _, it := range items {
			got = append(got, it.Name)
		}
		if next == "" {
			break
		}
		if next <= p.After {
			t.Fatalf("the next page starts after %q, not past %q", next, p.After)
		}
		p.After = next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the pages listed %v, want %v", got, want)
	}
	if pages < 60/(pageChunks*limit) {
		t.Fatalf("%d pages for 63 names read at most %d a page", pages, pageChunks*limit)
	}
}
