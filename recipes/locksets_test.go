package recipes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// lockNodes counts the nodes in the line of lock name.
func lockNodes(t *testing.T, s *testService, name string) int {
	t.Helper()
	children, _, err := s.sess.Conn().Children(kinds.Locks.Path(s.root, name))
	if errors.Is(err, zk.ErrNoNode) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(children)
}

// A set is taken in the order of its names, each lock in its mode, and
// each is an ordinary lock: a single-lock request waits behind it.
func TestALockSetIsTakenWhole(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	set, other := newLease(t, svc, "set"), newLease(t, svc, "other")
	grants, err := svc.Locks.AcquireAll(ctx, set, []LockRequest{{Name: "b", Mode: ModeWrite}, {Name: "a"}, {Name: "c", Mode: ModeRead}}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(grants) != 3 || grants[0].Name != "a" || grants[0].Mode != ModeExclusive || grants[1].Name != "b" || grants[1].Mode != ModeWrite ||
		grants[2].Name != "c" || grants[2].Mode != ModeRead {
		t.Fatalf("grants %+v, want a (exclusive), b (write), c (read) in that order", grants)
	}
	for _, g := range grants {
		if g.Token <= 0 || g.Lease != set.ID {
			t.Fatalf("grant %+v has no token of the lease", g)
		}
	}
	if _, err := svc.Locks.Acquire(ctx, other, "b", ModeRead, 0); ErrorCode(err) != CodeTimeout {
		t.Fatalf("a read of b while the set writes it: %v, want a timeout", err)
	}
	if _, err := svc.Locks.Acquire(ctx, other, "c", ModeRead, 0); err != nil {
		t.Fatalf("a read of c beside the set's read: %v", err)
	}
	// Asked again, the set gets the same grants.
	again, err := svc.Locks.AcquireAll(ctx, set, []LockRequest{{Name: "a"}, {Name: "c", Mode: ModeRead}, {Name: "b", Mode: ModeWrite}}, 0)
	if err != nil || len(again) != 3 || again[1].Token != grants[1].Token {
		t.Fatalf("the set asked again: %+v, %v; want the same grants", again, err)
	}
}

// A set whose last lock is held elsewhere times out holding none of the
// locks the call took (no node left in their lines), naming that lock; a
// lock its lease held before the call stays held.
func TestALockSetThatTimesOutHoldsNone(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	set, holder := newLease(t, svc, "set"), newLease(t, svc, "holder")
	lockNow(t, holder, "z")
	lockNow(t, set, "b")
	_, err := svc.Locks.AcquireAll(ctx, set, []LockRequest{{Name: "z"}, {Name: "a"}, {Name: "b"}}, 300*time.Millisecond)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeTimeout || e.Extra["lock"] != "z" {
		t.Fatalf("the set: %v, want a timeout on lock z", err)
	}
	if n := lockNodes(t, svc, "a"); n != 0 {
		t.Errorf("lock a has %d nodes after the set failed, want none", n)
	}
	if n := lockNodes(t, svc, "z"); n != 1 {
		t.Errorf("lock z has %d nodes, want its holder's alone", n)
	}
	if !set.holdsLock("b", ModeExclusive) {
		t.Error("the lock b, held before the set, was let go with it")
	}
	// A set cancelled while it waits lets go too.
	cctx, cancel := context.WithCancel(ctx)
	done := acquireLater(func() error {
		_, err := svc.Locks.AcquireAll(cctx, set, []LockRequest{{Name: "a"}, {Name: "z"}}, 30*time.Second)
		return err
	})
	waitingIn(t, svc, set, "lock", "z")
	cancel()
	if got := expect(t, done, 10*time.Second, "the cancelled set"); got.err == nil {
		t.Fatal("a cancelled set was granted")
	}
	if n := lockNodes(t, svc, "a"); n != 0 {
		t.Errorf("lock a has %d nodes after the set was cancelled, want none", n)
	}
}

// Sets that are not: none, too many, a name twice, a bad mode or name.
func TestLockSetsThatAreNotAreRefused(t *testing.T) {
	t.Parallel()
	many := make([]LockRequest, MaxLockSet+1)
	for i := range many {
		many[i].Name = fmt.Sprintf("l%d", i)
	}
	for _, set := range [][]LockRequest{nil, many, {{Name: "a"}, {Name: "a", Mode: ModeRead}}, {{Name: "a", Mode: "shared"}}, {{Name: ""}}} {
		if _, err := ValidLockSet(set); ErrorCode(err) != CodeInvalid {
			t.Errorf("set %v: %v, want invalid", set, err)
		}
	}
}

// Two leases through two gateways cross: one wants x then y, the other y
// then x. As single locks, each holding its first and waiting for its
// second, they deadlock (the detector ends one wait); as sets, taken in one
// order, they never do, however they interleave.
func TestCrossingLockSetsNeverDeadlock(t *testing.T) {
	t.Parallel()
	gws, a, b, aWaits, bWaits, _ := crossedLocks(t)
	deadlockOf(t, expect(t, bWaits, 10*time.Second, "b's single lock").err)
	unlock(t, b, "y")
	granted(t, aWaits, "a's single lock")
	unlock(t, a, "x")
	unlock(t, a, "y")

	const rounds = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds)
	for _, w := range []struct {
		lease *Lease
		set   []LockRequest
	}{{a, []LockRequest{{Name: "x"}, {Name: "y"}}}, {b, []LockRequest{{Name: "y"}, {Name: "x"}}}} {
		wg.Go(func() {
			for range rounds {
				if _, err := w.lease.service().Locks.AcquireAll(context.Background(), w.lease, w.set, 30*time.Second); err != nil {
					errs <- fmt.Errorf("%s's set: %w", w.lease.Holder, err)
					return
				}
				for _, r := range w.set {
					if err := w.lease.service().Locks.Release(context.Background(), w.lease, r.Name, ""); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var broken int64
	for _, gw := range gws {
		broken += int64(gw.Contention().DeadlocksBroken())
	}
	if broken != 1 {
		t.Errorf("the gateways broke %d deadlocks, want the single locks' one", broken)
	}
}
