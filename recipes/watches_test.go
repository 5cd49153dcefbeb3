package recipes

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zkproxy"
	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
)

// clientWatches counts the watch channels go-zookeeper keeps, of every
// path.
func clientWatches(t testing.TB, conn *zk.Conn) int {
	t.Helper()
	return watchChannels(t, conn, func(string) bool { return true })
}

// watchersOf counts the watch channels go-zookeeper keeps for p.
func watchersOf(t testing.TB, conn *zk.Conn, p string) int {
	t.Helper()
	return watchChannels(t, conn, func(path string) bool { return path == p })
}

// watchChannels counts the watch channels go-zookeeper keeps for the paths
// that match. It reads the client's unexported table, which only a test
// may do: the pile-up it checks for lives nowhere else. A request may be
// under way, so it takes the table's lock.
func watchChannels(t testing.TB, conn *zk.Conn, match func(path string) bool) int {
	t.Helper()
	v := reflect.ValueOf(conn).Elem()
	table := v.FieldByName("watchers")
	lock := v.FieldByName("watchersLock")
	if !table.IsValid() || !lock.IsValid() {
		t.Fatal("go-zookeeper's watcher table moved: update watchChannels")
	}
	mu := (*sync.Mutex)(lock.Addr().UnsafePointer())
	mu.Lock()
	defer mu.Unlock()
	n := 0
	iter := table.MapRange()
	for iter.Next() {
		if match(iter.Key().Field(0).String()) {
			n += iter.Value().Len()
		}
	}
	return n
}

// useOnce uses name the way a client with a lock per thing does: holds it,
// has a second lease wait for it in vain, reads it with a blocking read, and
// lets it go. Every kind of name, each with its own recipe.
func useOnce(t testing.TB, svc *testService, kind, name string) {
	ctx := context.Background()
	a, err := svc.Leases.Create(ctx, time.Minute, "holder", "")
	if err != nil {
		t.Error(err)
		return
	}
	defer func() { _ = svc.Leases.Revoke(a.ID) }()
	b, err := svc.Leases.Create(ctx, time.Minute, "waiter", "")
	if err != nil {
		t.Error(err)
		return
	}
	defer func() { _ = svc.Leases.Revoke(b.ID) }()
	u := nameUse{t: t, ctx: ctx, svc: svc, a: a, b: b, kind: kind, name: name}
	nameUses[kind](u)
}

// nameUse is one use of a name by useOnce: a holds, b waits in vain.
type nameUse struct {
	t          testing.TB
	ctx        context.Context
	svc        *testService
	a, b       *Lease
	kind, name string
}

// short is the wait that useOnce's waits and blocking reads give up after.
const short = 20 * time.Millisecond

// check fails the test for an error of what but a timeout.
func (u nameUse) check(what string, err error) {
	if err != nil && ErrorCode(err) != CodeTimeout {
		u.t.Errorf("%s %s %s: %v", u.kind, u.name, what, err)
	}
}

// nameUses use a name of each kind once.
var nameUses = map[string]func(nameUse){
	"lock": useLock, "rwlock": useLock,
	"semaphore": func(u nameUse) {
		ctx, svc := u.ctx, u.svc
		_, err := svc.Semaphores.Acquire(ctx, u.a, u.name, 1, 0)
		u.check("acquire", err)
		_, err = svc.Semaphores.Acquire(ctx, u.b, u.name, 1, short)
		u.check("wait", err)
		st, err := svc.Semaphores.State(ctx, u.name, 0, 0)
		u.check("read", err)
		_, err = svc.Semaphores.State(ctx, u.name, st.Index, short)
		u.check("blocking read", err)
		u.check("release", svc.Semaphores.Release(ctx, u.a, u.name))
	},
	"election": func(u nameUse) {
		ctx, svc := u.ctx, u.svc
		_, err := svc.Elections.Campaign(ctx, u.a, u.name, "a", 0)
		u.check("campaign", err)
		_, err = svc.Elections.Campaign(ctx, u.b, u.name, "b", short)
		u.check("wait", err)
		st, err := svc.Elections.State(ctx, u.name, 0, 0)
		u.check("read", err)
		_, err = svc.Elections.State(ctx, u.name, st.Index, short)
		u.check("blocking read", err)
		u.check("resign", svc.Elections.Resign(ctx, u.a, u.name))
		u.check("resign", svc.Elections.Resign(ctx, u.b, u.name))
	},
	"queue": func(u nameUse) {
		ctx, svc := u.ctx, u.svc
		_, err := svc.Queues.Produce(ctx, u.name, []byte("x"), 1)
		u.check("produce", err)
		_, err = svc.Queues.Take(ctx, u.name, 0)
		u.check("take", err)
		if _, err := svc.Queues.Take(ctx, u.name, short); !IsEmpty(err) {
			u.t.Errorf("queue %s: a take of the empty queue: %v", u.name, err)
		}
		st, err := svc.Queues.State(ctx, u.name, 0, 0, 0)
		u.check("read", err)
		_, err = svc.Queues.State(ctx, u.name, 0, st.Index, short)
		u.check("blocking read", err)
		u.check("delete", svc.Queues.Delete(ctx, u.name))
	},
	"barrier": func(u nameUse) {
		ctx, svc := u.ctx, u.svc
		_, err := svc.Barriers.Raise(ctx, u.name)
		u.check("raise", err)
		_, err = svc.Barriers.Wait(ctx, u.name, short)
		u.check("wait", err)
		u.check("lower", svc.Barriers.Lower(ctx, u.name))
		_, err = svc.Barriers.Wait(ctx, u.name, short)
		u.check("wait", err)
	},
	"double-barrier": func(u nameUse) {
		ctx, svc := u.ctx, u.svc
		_, err := svc.DoubleBarriers.Enter(ctx, u.a, u.name, "a", 2, short)
		u.check("enter", err)
		st, err := svc.DoubleBarriers.State(ctx, u.name, 0, 0)
		u.check("read", err)
		_, err = svc.DoubleBarriers.State(ctx, u.name, st.Index, short)
		u.check("blocking read", err)
		_, err = svc.DoubleBarriers.Leave(ctx, u.a, u.name, "a", 0)
		u.check("leave", err)
	},
}

// useLock uses a lock (exclusive) or a read/write lock (a writer holds it,
// a reader waits).
func useLock(u nameUse) {
	ctx, svc := u.ctx, u.svc
	mode, other := ModeExclusive, ModeExclusive
	if u.kind == "rwlock" {
		mode, other = ModeWrite, ModeRead
	}
	_, err := svc.Locks.Acquire(ctx, u.a, u.name, mode, 0)
	u.check("acquire", err)
	_, err = svc.Locks.Acquire(ctx, u.b, u.name, other, short)
	u.check("wait", err)
	st, err := svc.Locks.State(ctx, u.name, 0, 0)
	u.check("read", err)
	_, err = svc.Locks.State(ctx, u.name, st.Index, short)
	u.check("blocking read", err)
	u.check("release", svc.Locks.Release(ctx, u.a, u.name, mode))
}

var nameKinds = []string{"lock", "rwlock", "semaphore", "election", "queue", "barrier", "double-barrier"}

// Names used once and never again (a lock per invoice) leave nothing
// behind: once each is released and the linger has passed, ZooKeeper keeps
// no watch of the gateway's session, go-zookeeper none in its table, and the
// goroutines are back where they were; a reconnect sets again only the
// watches of a name still read, not about seven watches of each name on
// both sides for good, set again at every reconnect.
func TestNamesUsedOnceLeaveNoWatches(t *testing.T) {
	// Not parallel: it counts the goroutines of the whole test binary.
	zks := zktest.Own(t)
	px := zkproxy.New(t, zks.Addr())
	svc := newService(t, serviceOptions{servers: []string{px.Addr()}, timeout: 4 * time.Second})
	svc.cache.linger = 100 * time.Millisecond
	svc.watches.linger = 100 * time.Millisecond
	ctx := context.Background()
	_, _, id := svc.sess.Status()
	conn := svc.sess.Conn()
	baseServer, baseClient := zktest.WatchCount(t, zks.Addr()), clientWatches(t, conn)
	baseGoroutines := runtime.NumGoroutine()

	keeper, keptDone := keepOneName(t, svc, baseClient)
	const perKind = 40 // 280 names in all
	useNamesOnce(t, svc, perKind)
	kept := svc.root + "/locks/kept"
	zktest.Eventually(t, 30*time.Second, func() error {
		server, client := zktest.WatchCount(t, zks.Addr())-baseServer, clientWatches(t, conn)-baseClient
		data := zktest.DataWatches(t, zks.Addr(), id)
		if server != 2 || client != 2 || len(data) != 1 || data[0] != kept {
			return fmt.Errorf("after %d names used once: ZooKeeper keeps %d watches of the gateway (data: %d, %s), go-zookeeper %d; want 2 each, those of %s",
				perKind*len(nameKinds), server, len(data), head(data, 5), client, kept)
		}
		if g := runtime.NumGoroutine(); g > baseGoroutines+2 {
			return fmt.Errorf("%d goroutines, %d before the names were used", g, baseGoroutines)
		}
		return nil
	})

	// A reconnect sets again the watches of the kept name, and no other.
	reconnects := svc.sess.Stats().Reconnects
	px.Drop()
	zktest.Eventually(t, 20*time.Second, func() error {
		if st, _, _ := svc.sess.Status(); st != StateLive || svc.sess.Stats().Reconnects == reconnects {
			return fmt.Errorf("session %s", st)
		}
		if data := zktest.DataWatches(t, zks.Addr(), id); len(data) != 1 || data[0] != kept {
			return fmt.Errorf("after a reconnect ZooKeeper keeps data watches %s, want [%s]", head(data, 5), kept)
		}
		if n := zktest.WatchCount(t, zks.Addr()) - baseServer; n != 2 {
			return fmt.Errorf("after a reconnect ZooKeeper keeps %d watches of the gateway, want 2", n)
		}
		return nil
	})
	// The kept read still sees a change.
	if err := svc.Locks.Release(ctx, keeper, "kept", ""); err != nil {
		t.Fatal(err)
	}
	if err := <-keptDone; err != nil {
		t.Fatalf("the kept blocking read: %v", err)
	}
}

// keepOneName keeps the lock "kept" in use, held by the lease it returns
// and watched by a blocking read, which answers on the channel it
// returns; base is go-zookeeper's count of watches before.
func keepOneName(t *testing.T, svc *testService, base int) (*Lease, <-chan error) {
	t.Helper()
	ctx := context.Background()
	conn := svc.sess.Conn()
	keeper := newLease(t, svc, "keeper")
	if _, err := svc.Locks.Acquire(ctx, keeper, "kept", ModeExclusive, 0); err != nil {
		t.Fatal(err)
	}
	st, err := svc.Locks.State(ctx, "kept", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	keptDone := make(chan error, 1)
	keptCtx, stopKept := context.WithCancel(ctx)
	t.Cleanup(stopKept)
	go func() {
		_, err := svc.Locks.State(keptCtx, "kept", st.Index, time.Minute)
		keptDone <- err
	}()
	zktest.Eventually(t, 10*time.Second, func() error {
		if n := clientWatches(t, conn) - base; n != 2 {
			return fmt.Errorf("%d watches for the kept lock, want 2 (its children, its data)", n)
		}
		return nil
	})
	return keeper, keptDone
}

// useNamesOnce uses perKind names of every kind once each, on 8 workers.
func useNamesOnce(t *testing.T, svc *testService, perKind int) {
	t.Helper()
	work := make(chan [2]string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range work {
				useOnce(t, svc, w[0], w[1])
			}
		}()
	}
	for i := range perKind {
		for _, kind := range nameKinds {
			work <- [2]string{kind, fmt.Sprintf("%s-%d", kind, i)}
		}
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// A line watched for long (a lock a dashboard or a blocking read follows)
// keeps one watch of each kind, however often it changes, and a change of
// its children reads the listing and the new nodes, not the parent's data
// again: a reload that read the parent's data with a new watch would have
// go-zookeeper keep a channel more for every change of the line, as long as
// the lock lived.
func TestAWatchedLineKeepsOneWatchOfEachKind(t *testing.T) {
	t.Parallel()
	px, svc := proxiedService(t)
	ctx := context.Background()
	holdLock(t, svc, "watched")
	st, err := svc.Locks.State(ctx, "watched", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	seen := make(chan int64, 100)
	go func() {
		index := st.Index
		for readCtx.Err() == nil {
			got, err := svc.Locks.State(readCtx, "watched", index, time.Minute)
			if err != nil {
				return
			}
			index = got.Index
			seen <- index
		}
	}()
	parent := svc.Locks.parent("watched")
	zktest.Eventually(t, 10*time.Second, func() error {
		if n := watchersOf(t, svc.sess.Conn(), parent); n != 2 {
			return fmt.Errorf("%d watches on the line", n)
		}
		return nil
	})
	mark := len(px.Requests(parent))
	waiter, _ := svc.Leases.Create(ctx, time.Minute, "waiter", "")
	const tries = 30 // each a node made, then deleted: two changes
	for range tries {
		if _, err := svc.Locks.Acquire(ctx, waiter, "watched", ModeExclusive, 0); ErrorCode(err) != CodeTimeout {
			t.Fatalf("a try-once acquire of a held lock: %v", err)
		}
	}
	final, err := svc.Locks.State(ctx, "watched", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for index := int64(0); index < final.Index; {
		select {
		case index = <-seen:
		case <-time.After(30 * time.Second):
			t.Fatalf("the blocking read never saw index %d", final.Index)
		}
	}
	if n := watchersOf(t, svc.sess.Conn(), parent); n != 2 {
		t.Fatalf("go-zookeeper keeps %d watches on the line after %d changes, want 2 (its children, its data)", n, 2*tries)
	}
	reloads := 0
	for _, r := range px.Requests(parent)[mark:] {
		if r.Path != parent {
			continue
		}
		switch r.Op {
		case opGetChildren2:
			reloads++
		case opGetData:
			t.Fatalf("a reload read the parent's data, which did not change: %v", px.Sent(parent)[mark:])
		}
	}
	if reloads == 0 {
		t.Fatalf("the line was never listed again: %v", px.Sent(parent)[mark:])
	}
}

// A wait given up while the answer that arms its watch is still on its way
// leaves no watch either: armed with nobody left to wait on it, the watch
// lingers and is removed like any other, not kept until the node changes.
func TestAWaitGivenUpWhileArmingItsWatchLeavesNoWatch(t *testing.T) {
	t.Parallel()
	proxy, svc := stalledService(t, opGetData, 20*time.Second)
	svc.watches.linger = 100 * time.Millisecond
	held := holdLock(t, svc, "stall")
	// The wait ends while its watch is armed; its waiter node's delete
	// queues behind the stalled getData, which both go on then.
	proxy.acquireWhileArming(t, svc, held, newLease(t, svc, "waiter"), 200*time.Millisecond)
	zktest.Eventually(t, 10*time.Second, func() error {
		if n := watchersOf(t, svc.sess.Conn(), held.Node); n != 0 {
			return fmt.Errorf("go-zookeeper keeps %d watches on the holder's node", n)
		}
		if n := svc.watches.Armed(); n != 0 {
			return fmt.Errorf("%d shared watches armed", n)
		}
		return nil
	})
}

// A wait given up on a node that stays (a lock held for hours) leaves its
// watch on that node for the linger, to the waits that retry, then removes
// it from go-zookeeper and ZooKeeper, rather than keeping it, and a
// goroutine waiting for its event, until the node changes.
func TestAWaitGivenUpLeavesNoWatch(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	svc.watches.linger = 100 * time.Millisecond
	ctx := context.Background()
	g := holdLock(t, svc, "held")
	waiter, _ := svc.Leases.Create(ctx, time.Minute, "waiter", "")
	if _, err := svc.Locks.Acquire(ctx, waiter, "held", ModeExclusive, 20*time.Millisecond); ErrorCode(err) != CodeTimeout {
		t.Fatalf("want a timeout, got %v", err)
	}
	_, _, id := svc.sess.Status()
	zktest.Eventually(t, 10*time.Second, func() error {
		if n := watchersOf(t, svc.sess.Conn(), g.Node); n != 0 {
			return fmt.Errorf("go-zookeeper keeps %d watches on the holder's node", n)
		}
		for _, p := range zktest.DataWatches(t, zktest.Shared(t).Addr(), id) {
			if p == g.Node {
				return fmt.Errorf("ZooKeeper keeps the watch on the holder's node")
			}
		}
		if n := svc.watches.Armed(); n != 0 {
			return fmt.Errorf("%d shared watches armed", n)
		}
		return nil
	})
}

// A ZooKeeper too old to remove watches (before 3.5) is refused at start,
// with the version the gateway needs: it would keep a watch of every name
// it ever served. The proxy answers removeWatches as such a server does.
func TestAZooKeeperThatCannotRemoveWatchesIsRefused(t *testing.T) {
	t.Parallel()
	px := zkproxy.New(t, zktest.Shared(t).Addr())
	px.Unknown(opRemoveWatches)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := Connect(ctx, SessionConfig{Servers: []string{px.Addr()}, Timeout: time.Second, Root: zktest.UniqueRoot(t),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		sess.Close()
		t.Fatal("a session on a ZooKeeper that cannot remove watches")
	}
	if want := "zkgate needs ZooKeeper 3.5 or later"; !strings.Contains(err.Error(), want) {
		t.Fatalf("the error says %q; want it to say %q", err, want)
	}
}

// A shared watch armed on a node that was there, and then let go of, kept
// answering "there" after the node was deleted, until the sweep took its
// event (half a linger, 15 s, later): a double barrier entered again just
// after every member had left, its ready node deleted, answered ready at
// once, alone (the Python client's test saw it under load).
func TestASharedWatchAnswersAfterItsNodeWent(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	conn := svc.sess.Conn()
	p := svc.root + "/ready-probe"
	if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	ok, nw, err := svc.watches.appears(ctx, p)
	if err != nil || !ok || nw != nil {
		t.Fatalf("appears on a node that is there: %v, %v, %v", ok, nw, err)
	}
	if err := conn.Delete(p, -1); err != nil {
		t.Fatal(err)
	}
	// ZooKeeper sends the watch's event before the delete's answer: what
	// this session did is seen at once.
	ok, nw, err = svc.watches.appears(ctx, p)
	if err != nil || ok {
		t.Fatalf("appears after the node was deleted: %v, %v", ok, err)
	}
	svc.watches.release(nw)

	// The same through the recipe: two members enter and leave, and a third
	// entering alone right after is not let through.
	name := "again"
	var wg sync.WaitGroup
	for _, member := range []string{"a", "b"} {
		l, err := svc.Leases.Create(ctx, time.Minute, member, "")
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := svc.DoubleBarriers.Enter(ctx, l, name, member, 2, 10*time.Second); err != nil {
				t.Errorf("enter %s: %v", member, err)
				return
			}
			if _, err := svc.DoubleBarriers.Leave(ctx, l, name, member, 10*time.Second); err != nil {
				t.Errorf("leave %s: %v", member, err)
			}
		}()
	}
	wg.Wait()
	third := newLease(t, svc, "c")
	if st, err := svc.DoubleBarriers.Enter(ctx, third, name, "c", 2, 0); ErrorCode(err) != CodeTimeout {
		t.Fatalf("a member entering alone after the others left: %+v, %v; want a timeout", st, err)
	}
}

// A node has one armed watch, however many waits retry on it: a watch of its
// own per wait, kept by go-zookeeper until the node changes, would pile up
// without bound from clients retrying against a lock held for long.
func TestRetriedWaitsShareOneWatch(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	g := holdLock(t, svc, "busy")
	waiter, _ := svc.Leases.Create(ctx, time.Minute, "waiter", "")
	for range 40 {
		_, err := svc.Locks.Acquire(ctx, waiter, "busy", ModeExclusive, 20*time.Millisecond)
		if ErrorCode(err) != CodeTimeout {
			t.Fatalf("want a timeout, got %v", err)
		}
	}
	if n := watchersOf(t, svc.sess.Conn(), g.Node); n > 1 {
		t.Fatalf("go-zookeeper keeps %d watches on the holder's node after 40 timed-out waits, want at most 1", n)
	}
	if n := svc.watches.Armed(); n > 1 {
		t.Fatalf("%d shared watches armed, want at most 1", n)
	}
	svc.handoffs.mu.Lock()
	left := len(svc.handoffs.waiting)
	svc.handoffs.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d nodes still have hand-over registrations after the waits ended", left)
	}
}
