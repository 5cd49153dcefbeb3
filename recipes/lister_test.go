package recipes

import (
	"fmt"
	"sync"
	"testing"

	"github.com/zkgate/zkgate/internal/zk"
)

// The lister: listings shared by concurrent callers, each made after its
// caller asked.

// The lister answers each caller with a listing made after it asked: a
// change made before the call is always in it, however many share it.
func TestListerAnswersWithAFreshListing(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	raw := rawClient(t)
	parent := svc.root + "/locks/listed"
	if _, err := raw.Create(parent, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	l := newLister()
	for round := range 20 {
		if _, err := raw.Create(fmt.Sprintf("%s/n-lock-%010d", parent, round), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f := l.list(svc.sess.Conn(), parent)
				if f.err != nil {
					t.Error(f.err)
					return
				}
				cs, _ := f.contenders(lockMarkers)
				if len(cs) != round+1 {
					t.Errorf("round %d: a listing with %d contenders", round, len(cs))
				}
			}()
		}
		wg.Wait()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.paths) != 0 {
		t.Fatalf("the lister keeps state for %d paths when idle", len(l.paths))
	}
}

// A listing offered to the cache (a produce's, see offer) may overtake the
// cache's own load of an older state; that load, published late, must not
// take the snapshot back, nor wake the readers with it. The watch it armed
// brings the next load.
func TestAnOfferedListingIsNotTakenBackByAnOlderLoad(t *testing.T) {
	t.Parallel()
	c := &watchCache{entries: map[string]*cacheEntry{}}
	const p = "/q/entries"
	e := &cacheEntry{path: p, opts: entryOpts{namesOnly: true}, ready: make(chan struct{}), changed: make(chan struct{}), refs: 1}
	c.entries[p] = e
	c.publish(e, &Snapshot{Path: p, Exists: true, Index: 5, Stat: zk.Stat{Pzxid: 5}}, nil)
	if !c.waited(p) {
		t.Fatal("an entry with a reader is not waited on")
	}
	changed := e.changed
	c.offer(p, []string{"entry-000-0000000001"}, &zk.Stat{Pzxid: 9})
	select {
	case <-changed:
	default:
		t.Fatal("the offered listing woke nobody")
	}
	changed = e.changed
	c.publish(e, &Snapshot{Path: p, Exists: true, Index: 7, Stat: zk.Stat{Pzxid: 7}}, nil)
	if got := e.snap; got.Index != 9 || len(got.Children) != 1 {
		t.Fatalf("an older load replaced the offered listing: %+v", got)
	}
	select {
	case <-changed:
		t.Fatal("an older load woke the readers")
	default:
	}
	// An offer no newer than the snapshot is dropped too.
	c.offer(p, nil, &zk.Stat{Pzxid: 8})
	if e.snap.Index != 9 || len(e.snap.Children) != 1 {
		t.Fatalf("an older offer replaced the snapshot: %+v", e.snap)
	}
	// A newer load replaces it.
	c.publish(e, &Snapshot{Path: p, Exists: true, Index: 12, Stat: zk.Stat{Pzxid: 12}}, nil)
	if e.snap.Index != 12 || len(e.snap.Children) != 0 {
		t.Fatalf("a newer load did not replace the snapshot: %+v", e.snap)
	}
}
