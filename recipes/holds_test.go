package recipes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zkproxy"
	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
)

// The hold lifecycle's guarantees where a hold meets a failure, each on real
// ZooKeeper.

// Two concurrent claims by one lease claim one item: a second item, which the
// lease would not track, would stay claimed after the lease ended.
func TestConcurrentClaimsOfOneLeaseShareOneItem(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	for i := range 4 {
		produce(t, svc, "jobs", []byte(fmt.Sprint("item ", i)), DefaultPriority)
	}
	lease := newLease(t, svc, "consumer")
	const calls = 8
	ids := make([]string, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := svc.Queues.Claim(ctx, lease, "jobs", time.Second)
			if err != nil {
				t.Errorf("claim %d: %v", i, err)
				return
			}
			ids[i] = got.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent claims of one lease got different items: %v", ids)
		}
	}
	holds := lease.Info().Holds
	if len(holds) != 1 || holds[0].Item != ids[0] {
		t.Fatalf("the lease lists %+v, want one claim of %s", holds, ids[0])
	}
	st, _ := svc.Queues.State(ctx, "jobs", 10, 0, 0)
	if st.Claimed != 1 {
		t.Fatalf("queue reports %d claimed, want 1", st.Claimed)
	}
	if err := svc.Leases.Revoke(lease.ID); err != nil {
		t.Fatal(err)
	}
	st, _ = svc.Queues.State(ctx, "jobs", 10, 0, 0)
	if st.Claimed != 0 || st.Length != 4 {
		t.Fatalf("after the lease ended: %d claimed of %d, want 0 of 4", st.Claimed, st.Length)
	}
}

// A release deletes its node with a context of its own, not the request's: a
// client that hangs up while ZooKeeper is briefly out of reach would
// otherwise leave the lock held by a node no lease tracks, until the
// gateway's session ended.
func TestReleaseDeletesTheNodeWhenTheClientHangsUp(t *testing.T) {
	t.Parallel()
	zks := zktest.Shared(t)
	px := zkproxy.New(t, zks.Addr())
	svc := newService(t, serviceOptions{servers: []string{px.Addr()}, timeout: 4 * time.Second})
	raw := rawClient(t)
	ctx := context.Background()
	lease := newLease(t, svc, "holder")
	g, err := svc.Locks.Acquire(ctx, lease, "db", ModeExclusive, 0)
	if err != nil {
		t.Fatal(err)
	}
	px.Pause()
	rctx, cancel := context.WithCancel(ctx)
	released := make(chan error, 1)
	go func() { released <- svc.Locks.Release(rctx, lease, "db", "") }()
	// The delete is on its way; the client hangs up; the connection drops
	// before ZooKeeper sees the delete, and comes back within the session.
	zktest.Eventually(t, 10*time.Second, func() error {
		if !px.Held(g.Node) {
			return errors.New("the delete has not been sent")
		}
		return nil
	})
	cancel()
	px.Drop()
	px.Resume()
	select {
	case err := <-released:
		t.Logf("release answered %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("release never returned")
	}
	zktest.Eventually(t, 10*time.Second, func() error {
		if ok, _, err := raw.Exists(g.Node); err != nil || ok {
			return fmt.Errorf("the released lock's node %s is still there (err %v)", g.Node, err)
		}
		return nil
	})
	if holds := lease.Info().Holds; len(holds) != 0 {
		t.Fatalf("the lease still lists %+v", holds)
	}
}

// A hold that a caller still uses stays attached, even when its first create
// failed: detached without being marked gone, a concurrent call of the same
// lease would make a node no lease tracks.
func TestAHoldStaysAttachedWhileACallerUsesIt(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	raw := rawClient(t)
	ctx := context.Background()
	lease := newLease(t, svc, "candidate")
	key := electionKey("e")
	fresh := func() *candidacy {
		return &candidacy{hold: newHold(svc.lines, lease, "election", key, "e")}
	}
	first, err := joinHold(lease, key, fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := joinHold(lease, key, fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Fatal("two calls of one lease got two holds")
	}
	_, _, err = first.ensureNode(latchRole, func() (string, *zk.Stat, error) { return "", nil, errors.New("create failed") })
	if err == nil {
		t.Fatal("the failing create succeeded")
	}
	first.leave(false) // the failed call goes; the other still waits
	node, _, err := second.ensureNode(latchRole, func() (string, *zk.Stat, error) {
		p, st, _, err := svc.sess.createProtected(ctx, svc.root+"/elections/e", lease.ID, "latch-", second.dataLocked(), lease.epoch, false)
		return p, st, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := heldBy[*candidacy](lease, key); !ok || got != second {
		t.Fatal("the hold with a node is not the lease's")
	}
	second.leave(true)
	if err := svc.Elections.Resign(ctx, lease, "e"); err != nil {
		t.Fatalf("resign: %v", err)
	}
	if ok, _, _ := raw.Exists(node); ok {
		t.Fatalf("resign left %s", node)
	}
}

// Many concurrent calls of one lease, in every primitive, make one node and
// share one answer; ending the lease leaves nothing.
func TestConcurrentCallsOfOneLeaseInEveryPrimitive(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	raw := rawClient(t)
	ctx := context.Background()
	produce(t, svc, "q", []byte("x"), DefaultPriority)
	lease := newLease(t, svc, "busy")
	const calls = 6
	kinds := map[string]func() (string, error){
		"lock": func() (string, error) {
			g, err := svc.Locks.Acquire(ctx, lease, "l", ModeWrite, time.Second)
			return fmt.Sprint(g.Token, g.Node), err
		},
		"semaphore": func() (string, error) {
			g, err := svc.Semaphores.Acquire(ctx, lease, "s", 2, time.Second)
			return fmt.Sprint(g.Token, g.Node), err
		},
		"election": func() (string, error) {
			c, err := svc.Elections.Campaign(ctx, lease, "e", "v", time.Second)
			return fmt.Sprint(c.Token, c.Node), err
		},
		"double-barrier": func() (string, error) {
			_, err := svc.DoubleBarriers.Enter(ctx, lease, "d", "m1", 1, time.Second)
			return "entered", err
		},
		"claim": func() (string, error) {
			it, err := svc.Queues.Claim(ctx, lease, "q", time.Second)
			return it.ID, err
		},
	}
	for kind, call := range kinds {
		got := make([]string, calls)
		var wg sync.WaitGroup
		for i := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				got[i], err = call()
				if err != nil {
					t.Errorf("%s call %d: %v", kind, i, err)
				}
			}()
		}
		wg.Wait()
		for _, g := range got {
			if g != got[0] {
				t.Fatalf("%s: concurrent calls of one lease answered differently: %v", kind, got)
			}
		}
	}
	holds := lease.Info().Holds
	if len(holds) != len(kinds) {
		t.Fatalf("the lease lists %d holds, want %d: %+v", len(holds), len(kinds), holds)
	}
	if eph := ephemeralsUnder(t, raw, svc.root); len(eph) != len(kinds)+1 { // + the lease record
		t.Fatalf("ZooKeeper holds %d ephemeral nodes, want %d: %v", len(eph), len(kinds)+1, eph)
	}
	if err := svc.Leases.Revoke(lease.ID); err != nil {
		t.Fatal(err)
	}
	if eph := ephemeralsUnder(t, raw, svc.root); len(eph) != 0 {
		t.Fatalf("the ended lease left %v", eph)
	}
}

// A release or a resign by another call of the lease ends a call of that
// lease waiting on the same hold, with not_held, at once: the hold ends its
// waiters' contexts itself as it goes (no goroutine per wait watches it).
func TestAWaitEndsWhenItsHoldIsReleased(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	holder, waiter := newLease(t, svc, "holder"), newLease(t, svc, "waiter")
	if _, err := svc.Locks.Acquire(ctx, holder, "db", ModeExclusive, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Elections.Campaign(ctx, holder, "leader", "h", 0); err != nil {
		t.Fatal(err)
	}
	type result struct {
		what string
		err  error
	}
	done := make(chan result, 2)
	go func() {
		_, err := svc.Locks.Acquire(ctx, waiter, "db", ModeExclusive, time.Minute)
		done <- result{"acquire", err}
	}()
	go func() {
		_, err := svc.Elections.Campaign(ctx, waiter, "leader", "w", time.Minute)
		done <- result{"campaign", err}
	}()
	zktest.Eventually(t, 10*time.Second, func() error {
		if n := len(waiter.Info().Holds); n != 2 {
			return fmt.Errorf("the waiter's lease has %d holds, want the lock's and the candidacy's", n)
		}
		return nil
	})
	if err := svc.Locks.Release(ctx, waiter, "db", ModeExclusive); err != nil {
		t.Fatal(err)
	}
	if err := svc.Elections.Resign(ctx, waiter, "leader"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case r := <-done:
			if ErrorCode(r.err) != CodeNotHeld {
				t.Fatalf("the %s whose hold was let go answered %v, want not_held", r.what, r.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a wait went on for 30 s after its hold was let go")
		}
	}
	if n := len(waiter.Info().Holds); n != 0 {
		t.Fatalf("the waiter's lease keeps %d holds", n)
	}
}
