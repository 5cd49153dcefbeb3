package recipes

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
)

// The watch cache: entries shared, let go, loaded again after an error or a
// change, on real ZooKeeper.

// A load error other than a lost connection does not stick in the watch
// cache: the entry loads again while read, and arms its watch.
func TestWatchCacheRecoversFromALoadError(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	raw := rawClient(t)
	if err := raw.AddAuth("digest", []byte("owner:secret")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	parent := svc.root + "/locks/guarded"
	acl := zk.DigestACL(zk.PermAll, "owner", "secret")
	if _, err := raw.Create(parent, nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Delete(parent, -1) })
	_, err := svc.Locks.State(ctx, "guarded", 1, 50*time.Millisecond)
	if err == nil {
		t.Fatal("a read of an unreadable lock succeeded")
	}
	if _, err := raw.SetACL(parent, zk.WorldACL(zk.PermAll), -1); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, 15*time.Second, func() error {
		_, err := svc.Locks.State(ctx, "guarded", 1, 50*time.Millisecond)
		return err
	})
}

// A double-barrier member named like a sequential node (host-0000000001) is
// read again when it is made anew, not shown with the data of an earlier
// member of that name.
func TestMemberWithASequentialLookingNameIsReadAgain(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	raw := rawClient(t)
	ctx := context.Background()
	dir := svc.root + "/double-barriers/b"
	if _, err := raw.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	member := dir + "/host-0000000001"
	data := func(holder string) []byte {
		return nodeData{Lease: "l-" + holder, Holder: holder, Gateway: "gw", Member: "host-0000000001", Count: 2}.bytes()
	}
	if _, err := raw.Create(member, data("first"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	st, err := svc.DoubleBarriers.State(ctx, "b", 1, time.Second) // loads the cache entry
	if err != nil || len(st.Members) != 1 || st.Members[0].Holder != "first" {
		t.Fatalf("state %+v, %v", st, err)
	}
	// Replaced in one transaction: the cache sees the new node under the
	// old name, never the name missing.
	if _, err := raw.Multi(&zk.DeleteRequest{Path: member, Version: -1},
		&zk.CreateRequest{Path: member, Data: data("second"), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeral}); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, 10*time.Second, func() error {
		st, err := svc.DoubleBarriers.State(ctx, "b", st.Index, 100*time.Millisecond)
		if err != nil {
			return err
		}
		if len(st.Members) != 1 || st.Members[0].Holder != "second" {
			return fmt.Errorf("members %+v, want the second", st.Members)
		}
		return nil
	})
}

// Hundreds of blocked readers of one path share one cache entry; once the
// last has gone and the linger has passed, the entry stops.
func TestWatchCacheSharesAnEntryAndLetsItGo(t *testing.T) {
	t.Parallel()
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
