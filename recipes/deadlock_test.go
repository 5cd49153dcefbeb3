package recipes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
)

// Deadlock checks on real ZooKeeper, with gateways played by services of
// their own sessions on one root, each asking the others for their leases'
// holds as peers.Credential does over HTTP.

// checkEvery is the check interval of these tests.
const checkEvery = 300 * time.Millisecond

// servicePeers are the other services of a test, as a deadlock check asks
// them.
type servicePeers struct {
	self *testService
	all  *[]*testService
}

func (p servicePeers) Holds(_ context.Context, leases []string) (map[string]PartyHolds, error) {
	out := map[string]PartyHolds{}
	for _, s := range *p.all {
		if s != p.self {
			for _, ph := range s.PartyHolds(leases) {
				out[ph.Lease] = ph
			}
		}
	}
	return out, nil
}

// gateways starts n services on one root, each checking its waits every
// checkEvery.
func gateways(t *testing.T, n int) []*testService {
	t.Helper()
	root := zktest.UniqueRoot(t)
	all := make([]*testService, n)
	for i := range all {
		all[i] = newService(t, serviceOptions{root: root, gateway: fmt.Sprintf("gw-%d", i)})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(func() { s.CheckDeadlocks(ctx, checkEvery, servicePeers{self: s, all: &all}) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return all
}

// acquired is the end of an acquire run in the background.
type acquired struct {
	err error
	at  time.Time
}

// acquireLater runs acquire in the background.
func acquireLater(acquire func() error) <-chan acquired {
	done := make(chan acquired, 1)
	go func() {
		err := acquire()
		done <- acquired{err, time.Now()}
	}()
	return done
}

// waitingIn waits until lease waits in the line of the lock or semaphore
// name (a semaphore's admission line, or its slots).
func waitingIn(t *testing.T, s *testService, lease *Lease, kind, name string) {
	t.Helper()
	zktest.Eventually(t, 10*time.Second, func() error {
		for _, h := range lease.Info().Holds {
			if h.Kind == kind && h.Name == name && h.State == "waiting" && h.Node != "" {
				return nil
			}
		}
		return fmt.Errorf("lease %s does not wait for %s %s yet: %+v", lease.Holder, kind, name, lease.Info().Holds)
	})
}

// deadlockOf returns the error's cycle, failing unless err is a deadlock.
func deadlockOf(t *testing.T, err error) []CycleStep {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeDeadlock {
		t.Fatalf("want a deadlock, got %v", err)
	}
	cycle, _ := e.Extra["cycle"].([]CycleStep)
	return cycle
}

func stepsOf(cycle []CycleStep) string {
	var b []string
	for _, s := range cycle {
		who := s.Holder
		if who == "" {
			who = s.Session
		}
		b = append(b, fmt.Sprintf("%s waits %s %s %s", who, s.Kind, s.Name, s.Mode))
	}
	return strings.Join(b, "; ")
}

func expect(t *testing.T, ch <-chan acquired, within time.Duration, what string) acquired {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(within):
		t.Fatalf("%s: no answer within %s", what, within)
	}
	return acquired{}
}

// granted waits up to 10s for the answer on ch, what, and fails the test
// unless it is a grant.
func granted(t *testing.T, ch <-chan acquired, what string) {
	t.Helper()
	if got := expect(t, ch, 10*time.Second, what); got.err != nil {
		t.Fatalf("%s: %v", what, got.err)
	}
}

// grantedOnRelease checks that the wait on ch, what, still waits, and is
// granted once holder releases the lock name.
func grantedOnRelease(t *testing.T, ch <-chan acquired, what string, holder *Lease, name string) {
	t.Helper()
	pending(t, ch, what)
	unlock(t, holder, name)
	granted(t, ch, what)
}

// lockNow has l take the lock name, exclusive, on l's gateway, with no
// wait.
func lockNow(t *testing.T, l *Lease, name string) {
	t.Helper()
	if _, err := l.service().Locks.Acquire(context.Background(), l, name, ModeExclusive, 0); err != nil {
		t.Fatal(err)
	}
}

// lockLater has l wait up to 30s, in the background, for the lock name,
// exclusive, on l's gateway.
func lockLater(l *Lease, name string) <-chan acquired {
	return acquireLater(func() error {
		_, err := l.service().Locks.Acquire(context.Background(), l, name, ModeExclusive, 30*time.Second)
		return err
	})
}

// unlock has l release the lock name on l's gateway.
func unlock(t *testing.T, l *Lease, name string) {
	t.Helper()
	if err := l.service().Locks.Release(context.Background(), l, name, ""); err != nil {
		t.Fatal(err)
	}
}

// joinLine has conn, another client, make an ephemeral sequential node
// prefix under parent, with data, making parent as a container first if
// it is missing.
func joinLine(t *testing.T, conn *zk.Conn, parent, prefix string, data []byte) {
	t.Helper()
	for {
		_, err := conn.Create(parent+"/"+prefix, data, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
		if err == nil {
			return
		}
		if _, err := conn.CreateContainer(parent, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
}

// crossedLocks makes the deadlock of two leases through two gateways
// (checking for deadlocks): a (worker-a, on the first) holds x and waits
// for y, then b (worker-b, on the second) holds y and waits for x, from
// closed on.
func crossedLocks(t *testing.T) (gws []*testService, a, b *Lease, aWaits, bWaits <-chan acquired, closed time.Time) {
	t.Helper()
	gws = gateways(t, 2)
	a, b = newLease(t, gws[0], "worker-a"), newLease(t, gws[1], "worker-b")
	lockNow(t, a, "x")
	lockNow(t, b, "y")
	aWaits = lockLater(a, "y")
	waitingIn(t, gws[0], a, "lock", "y")
	closed = time.Now()
	return gws, a, b, aWaits, lockLater(b, "x"), closed
}

func pending(t *testing.T, ch <-chan acquired, what string) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("%s ended (%v), want it still waiting", what, a.err)
	default:
	}
}

// Two leases through two gateways, each holding the lock the other waits
// for: the newest wait (b's) is ended with the cycle within two check
// intervals; a's goes on, and gets the lock once b lets its own go.
func TestADeadlockOfTwoLeasesThroughTwoGatewaysIsBroken(t *testing.T) {
	t.Parallel()
	gws, a, b, aWaits, bWaits, closed := crossedLocks(t)

	got := expect(t, bWaits, 10*time.Second, "b's wait")
	if took := got.at.Sub(closed); took > 2*checkEvery+time.Second {
		t.Errorf("the deadlock was broken %s after it formed, want within about two check intervals", took)
	}
	cycle := deadlockOf(t, got.err)
	if len(cycle) != 2 || cycle[0].Lease != b.ID || cycle[0].Name != "x" || cycle[0].Holder != "worker-b" || cycle[0].Gateway != "gw-1" ||
		cycle[1].Lease != a.ID || cycle[1].Name != "y" || cycle[1].Mode != ModeExclusive || cycle[1].BlockerMode != ModeExclusive {
		t.Errorf("cycle %+v, want b waiting for x then a waiting for y", cycle)
	}
	pending(t, aWaits, "a's wait")
	if n := gws[1].Contention().DeadlocksBroken(); n != 1 {
		t.Errorf("b's gateway broke %d deadlocks, want 1", n)
	}
	if n := gws[0].Contention().DeadlocksBroken(); n != 0 {
		t.Errorf("a's gateway broke %d deadlocks, want 0: the victim was not its", n)
	}
	unlock(t, b, "y")
	granted(t, aWaits, "a's wait")
	if d := gws[1].Contention().Deadlocks(time.Hour); len(d) != 1 || len(d[0].Cycle) != 2 {
		t.Errorf("deadlocks kept: %+v", d)
	}
}

// A semaphore (one slot) and a read/write lock in the cycle: a holds the
// slot and asks to write, b reads and waits for the slot.
func TestADeadlockThroughASemaphoreAndAReadWriteLockIsBroken(t *testing.T) {
	t.Parallel()
	gws := gateways(t, 2)
	ctx := context.Background()
	a, b := newLease(t, gws[0], "worker-a"), newLease(t, gws[1], "worker-b")
	if _, err := gws[0].Semaphores.Acquire(ctx, a, "pool", 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := gws[1].Locks.Acquire(ctx, b, "catalog", ModeRead, 0); err != nil {
		t.Fatal(err)
	}
	aWaits := acquireLater(func() error { _, err := gws[0].Locks.Acquire(ctx, a, "catalog", ModeWrite, 30*time.Second); return err })
	waitingIn(t, gws[0], a, "lock", "catalog")
	bWaits := acquireLater(func() error { _, err := gws[1].Semaphores.Acquire(ctx, b, "pool", 1, 30*time.Second); return err })

	cycle := deadlockOf(t, expect(t, bWaits, 10*time.Second, "b's wait").err)
	if len(cycle) != 2 || cycle[0].Lease != b.ID || cycle[0].Kind != "semaphore" || cycle[0].Name != "pool" ||
		cycle[1].Lease != a.ID || cycle[1].Kind != "lock" || cycle[1].Mode != ModeWrite || cycle[1].BlockerMode != ModeRead {
		t.Errorf("cycle %s, want b waiting for the slot, a to write behind b's read", stepsOf(cycle))
	}
	grantedOnRelease(t, aWaits, "a's wait", b, "catalog")
}

// Three leases through three gateways: a holds x and waits for y, b holds y
// and waits for z, c holds z and waits for x. Only c, the newest, is ended.
func TestADeadlockOfThreeLeasesIsBroken(t *testing.T) {
	t.Parallel()
	gws := gateways(t, 3)
	names := []string{"x", "y", "z"}
	leases := make([]*Lease, 3)
	for i := range leases {
		leases[i] = newLease(t, gws[i], fmt.Sprintf("worker-%d", i))
		lockNow(t, leases[i], names[i])
	}
	waits := make([]<-chan acquired, 3)
	for i := range leases {
		next := names[(i+1)%3]
		waits[i] = lockLater(leases[i], next)
		waitingIn(t, gws[i], leases[i], "lock", next)
	}
	cycle := deadlockOf(t, expect(t, waits[2], 10*time.Second, "the newest wait").err)
	if len(cycle) != 3 || cycle[0].Lease != leases[2].ID || cycle[1].Lease != leases[0].ID || cycle[2].Lease != leases[1].ID {
		t.Errorf("cycle %s, want worker-2, worker-0, worker-1", stepsOf(cycle))
	}
	pending(t, waits[0], "worker-0's wait")
	pending(t, waits[1], "worker-1's wait")
	for i, g := range gws {
		want := int64(0)
		if i == 2 {
			want = 1
		}
		if n := g.Contention().DeadlocksBroken(); n != want {
			t.Errorf("gateway %d broke %d deadlocks, want %d", i, n, want)
		}
	}
}

// A session of another client (a Curator or kazoo process, played by a
// plain ZooKeeper client) takes part as itself: it holds x and waits for y
// behind the lease that holds y, which then waits for x. The lease's wait
// is ended: the foreign one cannot be.
func TestADeadlockThroughAForeignSessionIsBroken(t *testing.T) {
	t.Parallel()
	gws := gateways(t, 1)
	svc := gws[0]
	conn := rawClient(t)
	foreign := func(name string) {
		t.Helper()
		joinLine(t, conn, svc.Locks.parent(name), "lock-", []byte("10.0.0.9"))
	}
	foreign("x")
	a := newLease(t, svc, "worker-a")
	lockNow(t, a, "y")
	foreign("y") // the foreign session waits for y, behind a
	aWaits := lockLater(a, "x")
	cycle := deadlockOf(t, expect(t, aWaits, 10*time.Second, "a's wait").err)
	session := fmt.Sprintf("0x%x", uint64(conn.SessionID()))
	if len(cycle) != 2 || cycle[0].Lease != a.ID || cycle[0].Name != "x" || cycle[1].Session != session || cycle[1].Holder != "10.0.0.9" || cycle[1].Name != "y" {
		t.Errorf("cycle %+v, want a waiting for x, then session %s waiting for y", cycle, session)
	}
}

// No wait outside a cycle is ever ended: a wait behind a holder that waits
// for nothing (it times out); a wait for a semaphore whose other slot
// holder gets on, although the first is in a cycle with the waiter; and a
// wait behind a deadlock it is not part of (the cycle's own newest wait is
// ended instead, although this one is newer).
func TestNoWaitOutsideACycleIsEnded(t *testing.T) {
	t.Parallel()
	gws := gateways(t, 2)
	ctx := context.Background()

	t.Run("behind a holder", func(t *testing.T) {
		h, w := newLease(t, gws[0], "holder"), newLease(t, gws[1], "waiter")
		lockNow(t, h, "busy")
		_, err := gws[1].Locks.Acquire(ctx, w, "busy", ModeExclusive, 5*checkEvery)
		if ErrorCode(err) != CodeTimeout {
			t.Fatalf("a wait behind a holder that waits for nothing ended with %v, want a timeout", err)
		}
	})

	t.Run("a semaphore with a slot holder that gets on", func(t *testing.T) {
		a, b, c := newLease(t, gws[0], "a"), newLease(t, gws[1], "b"), newLease(t, gws[1], "c")
		for _, l := range []*Lease{a, c} {
			if _, err := l.service().Semaphores.Acquire(ctx, l, "two", 2, 0); err != nil {
				t.Fatal(err)
			}
		}
		lockNow(t, b, "m")
		aWaits := lockLater(a, "m")
		waitingIn(t, gws[0], a, "lock", "m")
		// b waits for a slot of "two": held by a (stuck behind b) and c
		// (who waits for nothing and will let go).
		_, err := gws[1].Semaphores.Acquire(ctx, b, "two", 2, 6*checkEvery)
		if ErrorCode(err) != CodeTimeout {
			t.Fatalf("b's wait for a slot ended with %v, want a timeout: c's slot gets free some day", err)
		}
		grantedOnRelease(t, aWaits, "a's wait", b, "m")
	})

	t.Run("behind a deadlock", func(t *testing.T) { waitBehindADeadlock(t, gws) })
	for i, g := range gws {
		if n := g.Contention().DeadlocksBroken(); n > 1 || n == 1 && i != 1 {
			t.Errorf("gateway %d broke %d deadlocks: only b's gateway should have, once", i, n)
		}
	}
}

// waitBehindADeadlock: p waits behind the cycle of a and b, in none; the
// cycle's own newest wait (b's) is ended, not p's, although p's is newer.
func waitBehindADeadlock(t *testing.T, gws []*testService) {
	a, b, p := newLease(t, gws[0], "a"), newLease(t, gws[1], "b"), newLease(t, gws[0], "p")
	lockNow(t, a, "x1")
	lockNow(t, b, "y1")
	aWaits := lockLater(a, "y1")
	waitingIn(t, gws[0], a, "lock", "y1")
	bWaits := lockLater(b, "x1")
	waitingIn(t, gws[1], b, "lock", "x1")
	// p, the newest, waits behind the cycle, in none: nobody waits
	// for it.
	pWaits := lockLater(p, "x1")
	deadlockOf(t, expect(t, bWaits, 10*time.Second, "b's wait").err)
	pending(t, pWaits, "p's wait")
	grantedOnRelease(t, aWaits, "a's wait", b, "y1")
	grantedOnRelease(t, pWaits, "p's wait", a, "x1")
}

// A node of a lease that the lease's gateway no longer counts among its
// holds (a hold given up, its node on its way out) is waited for as a node
// that goes by itself, not as the lease's: a lease that waits elsewhere is
// not in a cycle through it. (The fault suite met one: a wait for a
// semaphore that timed out was retried at once, and the admission line's
// head still saw the old slot node, being deleted, of the lease now behind
// it.)
func TestANodeOnItsWayOutIsNotItsLeases(t *testing.T) {
	t.Parallel()
	gws := gateways(t, 2)
	ctx := context.Background()
	x, y := newLease(t, gws[0], "x"), newLease(t, gws[1], "y")
	lockNow(t, y, "a2")
	xWaits := lockLater(x, "a2")
	waitingIn(t, gws[0], x, "lock", "a2")
	// A node of x in b2 that no hold of x counts: as a released hold's
	// node is until its delete is answered.
	conn := rawClient(t)
	parent := gws[0].Locks.parent("b2")
	data := nodeData{Lease: x.ID, Holder: x.Holder, Gateway: "gw-0"}.bytes()
	joinLine(t, conn, parent, "_c_"+x.ID+"-lock-", data)
	_, err := gws[1].Locks.Acquire(ctx, y, "b2", ModeExclusive, 6*checkEvery)
	if ErrorCode(err) != CodeTimeout {
		t.Fatalf("y's wait behind x's node on its way out ended with %v, want a timeout: x is in no cycle with it", err)
	}
	grantedOnRelease(t, xWaits, "x's wait", y, "a2")
}
