package recipes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/internal/zkproxy"
	"github.com/zkgate/zkgate/internal/zktest"
)

// A connection that drops and comes back within the session timeout keeps
// the session: leases and their locks survive, in the same epoch.
func TestSessionReconnectKeepsLeases(t *testing.T) {
	zks := zktest.Shared(t)
	px := zkproxy.New(t, zks.Addr())
	svc := newService(t, serviceOptions{servers: []string{px.Addr()}, timeout: 4 * time.Second})
	ctx := context.Background()
	lease, _ := svc.Leases.Create(ctx, time.Minute, "steady", "")
	g, err := svc.Locks.Acquire(ctx, lease, "l", ModeExclusive, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, epoch, id := svc.sess.Status()
	before := svc.sess.Stats().Reconnects
	px.Drop()
	zktest.Eventually(t, 20*time.Second, func() error {
		st, e, sid := svc.sess.Status()
		if st != StateLive || svc.sess.Stats().Reconnects == before {
			return fmt.Errorf("session %s, %d reconnects", st, svc.sess.Stats().Reconnects)
		}
		if e != epoch || sid != id {
			return fmt.Errorf("a new session (epoch %d, was %d)", e, epoch)
		}
		return nil
	})
	again, err := svc.Locks.Acquire(ctx, lease, "l", ModeExclusive, 0)
	if err != nil || again.Token != g.Token {
		t.Fatalf("after a reconnect: %+v, %v; want the same grant %d", again, err, g.Token)
	}
}

// Hundreds of blocked readers of one path share one cache entry; once the
// last has gone and the linger has passed, the entry stops.
func TestWatchCacheSharesAnEntryAndLetsItGo(t *testing.T) {
	svc := newService(t, serviceOptions{})
	svc.cache.linger = 200 * time.Millisecond
	ctx := context.Background()
	st, err := svc.Locks.State(ctx, "shared", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	const readers = 200
	var wg sync.WaitGroup
	results := make(chan LockState, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := svc.Locks.State(ctx, "shared", st.Index, 20*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			results <- got
		}()
	}
	zktest.Eventually(t, 10*time.Second, func() error {
		svc.cache.mu.Lock()
		e := svc.cache.entries[svc.root+"/locks/shared"]
		refs := 0
		if e != nil {
			refs = e.refs
		}
		svc.cache.mu.Unlock()
		if refs != readers {
			return fmt.Errorf("%d readers on the entry", refs)
		}
		return nil
	})
	if n := svc.cache.Watching(); n != 1 {
		t.Fatalf("%d cache entries for one path", n)
	}
	// One change wakes every reader.
	lease, _ := svc.Leases.Create(ctx, time.Minute, "writer", "")
	if _, err := svc.Locks.Acquire(ctx, lease, "shared", ModeExclusive, 0); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(results)
	for got := range results {
		// The first change may be the lock's parent being made.
		if got.Index <= st.Index {
			t.Fatalf("a reader woke with index %d, not past %d", got.Index, st.Index)
		}
	}
	zktest.Eventually(t, 10*time.Second, func() error {
		if n := svc.cache.Watching(); n != 0 {
			return fmt.Errorf("%d entries still watched", n)
		}
		return nil
	})
}

// The lister answers each caller with a listing made after it asked: a
// change made before the call is always in it, however many share it.
func TestListerAnswersWithAFreshListing(t *testing.T) {
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

// The lease history: a lease whose gateway died (its record went with the
// session, no reason written) is stamped session_lost by a sweep; an entry
// ended longer than Remember ago is removed.
func TestLeaseHistorySweep(t *testing.T) {
	const remember = 300 * time.Millisecond
	svc := newService(t, serviceOptions{leases: LeaseConfig{Remember: remember}})
	raw := rawClient(t)
	ctx := context.Background()
	revoked, _ := svc.Leases.Create(ctx, time.Minute, "revoked", "")
	if err := svc.Leases.Revoke(revoked.ID); err != nil {
		t.Fatal(err)
	}
	// A lease of a gateway that died: its history, and no record.
	dead := "0123abcd-0000-4000-8000-000000000000"
	if _, err := raw.Create(svc.root+"/history/01", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	if _, err := raw.Create(svc.root+"/history/01/"+dead, historyEntry{Gateway: "gw-dead"}.bytes(), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Leases.Locate(dead); ErrorCode(err) != CodeLeaseExpired || !strings.Contains(err.Error(), EndSessionLost) {
		t.Fatalf("a dead gateway's lease: %v, want lease_expired session_lost", err)
	}
	if err := svc.Leases.SweepHistory(ctx); err != nil {
		t.Fatal(err)
	}
	raw1, _, err := raw.Get(svc.Leases.historyPath(dead))
	if err != nil || !strings.Contains(string(raw1), `"reason":"session_lost"`) {
		t.Fatalf("after a sweep the dead gateway's lease reads %s, %v", raw1, err)
	}
	if _, err := svc.Leases.Locate(revoked.ID); ErrorCode(err) != CodeLeaseExpired || !strings.Contains(err.Error(), EndRevoked) {
		t.Fatalf("a revoked lease: %v", err)
	}
	zktest.Eventually(t, 10*time.Second, func() error {
		if err := svc.Leases.SweepHistory(ctx); err != nil {
			return err
		}
		for _, id := range []string{revoked.ID, dead} {
			if ok, _, _ := raw.Exists(svc.Leases.historyPath(id)); ok {
				return fmt.Errorf("the history of %s is still there", id)
			}
		}
		return nil
	})
	if owner, err := svc.Leases.Locate(revoked.ID); owner != (Keeper{}) || err != nil {
		t.Fatalf("a swept lease: %+v %v, want nothing known", owner, err)
	}
}

// A listing offered to the cache (a produce's, see offer) may overtake the
// cache's own load of an older state; that load, published late, must not
// take the snapshot back, nor wake the readers with it. The watch it armed
// brings the next load.
func TestAnOfferedListingIsNotTakenBackByAnOlderLoad(t *testing.T) {
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
