package recipes

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/internal/zkproxy"
	"github.com/zkgate/zkgate/internal/zktest"
)

// The hold lifecycle's guarantees where a hold meets a failure, each on real
// ZooKeeper.

// Two concurrent claims by one lease claim one item: a second item, which the
// lease would not track, would stay claimed after the lease ended.
func TestConcurrentClaimsOfOneLeaseShareOneItem(t *testing.T) {
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	for i := range 4 {
		if _, err := svc.Queues.Produce(ctx, "jobs", []byte(fmt.Sprint("item ", i)), DefaultPriority); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := svc.Leases.Create(ctx, time.Minute, "consumer", "")
	if err != nil {
		t.Fatal(err)
	}
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
	zks := zktest.Shared(t)
	px := zkproxy.New(t, zks.Addr())
	svc := newService(t, serviceOptions{servers: []string{px.Addr()}, timeout: 4 * time.Second})
	raw := rawClient(t)
	ctx := context.Background()
	lease, err := svc.Leases.Create(ctx, time.Minute, "holder", "")
	if err != nil {
		t.Fatal(err)
	}
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
	svc := newService(t, serviceOptions{})
	raw := rawClient(t)
	ctx := context.Background()
	lease, err := svc.Leases.Create(ctx, time.Minute, "candidate", "")
	if err != nil {
		t.Fatal(err)
	}
	key := electionKey("e")
	fresh := func() *candidacy {
		return &candidacy{hold: newHold(svc.Service, lease, "election", key, "e")}
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
	svc := newService(t, serviceOptions{})
	raw := rawClient(t)
	ctx := context.Background()
	if _, err := svc.Queues.Produce(ctx, "q", []byte("x"), DefaultPriority); err != nil {
		t.Fatal(err)
	}
	lease, err := svc.Leases.Create(ctx, time.Minute, "busy", "")
	if err != nil {
		t.Fatal(err)
	}
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

// A failed dial after a session loss is retried until the ensemble resolves,
// outside the session's lock, so that no request waits on it.
func TestSessionRedialsUntilTheEnsembleResolves(t *testing.T) {
	zks := zktest.Own(t)
	hosts := &flakyHosts{}
	hosts.fail.Store(true)
	svcCh := make(chan *testService, 1)
	go func() {
		svcCh <- newService(t, serviceOptions{servers: []string{zks.Addr()}, timeout: time.Second,
			hosts: func() zk.HostProvider { return hosts.provider() }})
	}()
	// Connect keeps trying while the name does not resolve.
	zktest.Eventually(t, 10*time.Second, func() error {
		if hosts.attempts.Load() < 3 {
			return fmt.Errorf("%d dials so far", hosts.attempts.Load())
		}
		return nil
	})
	hosts.fail.Store(false)
	var svc *testService
	select {
	case svc = <-svcCh:
	case <-time.After(30 * time.Second):
		t.Fatal("no session once the name resolved")
	}
	_, epoch, _ := svc.sess.Status()

	// Lose the session: the server goes away for longer than the timeout,
	// and the name stops resolving.
	hosts.fail.Store(true)
	if err := zks.Kill(); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, 20*time.Second, func() error {
		if st, _, _ := svc.sess.Status(); st != StateLost {
			return fmt.Errorf("session is %s", st)
		}
		return nil
	})
	// Dials fail and are retried; the session's state answers meanwhile.
	before := hosts.attempts.Load()
	hosts.block()
	zktest.Eventually(t, 10*time.Second, func() error {
		if hosts.attempts.Load() <= before {
			return errors.New("no redial yet")
		}
		return nil
	})
	answered := make(chan State, 1)
	go func() { st, _, _ := svc.sess.Status(); answered <- st }()
	select {
	case st := <-answered:
		if st == StateLive {
			t.Fatal("live with no server")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Status waited for a dial")
	}
	hosts.unblock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := zks.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	hosts.fail.Store(false)
	zktest.Eventually(t, 30*time.Second, func() error {
		st, e, _ := svc.sess.Status()
		if st != StateLive || e == epoch {
			return fmt.Errorf("session %s in epoch %d (was %d)", st, e, epoch)
		}
		return nil
	})
	if _, err := svc.Leases.Create(ctx, time.Minute, "after", ""); err != nil {
		t.Fatalf("a lease after the new session: %v", err)
	}
}

// A node has one armed watch, however many waits retry on it: a watch of its
// own per wait, kept by go-zookeeper until the node changes, would pile up
// without bound from clients retrying against a lock held for long.
func TestRetriedWaitsShareOneWatch(t *testing.T) {
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	holder, _ := svc.Leases.Create(ctx, time.Minute, "holder", "")
	g, err := svc.Locks.Acquire(ctx, holder, "busy", ModeExclusive, 0)
	if err != nil {
		t.Fatal(err)
	}
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

// watchersOf counts the watch channels go-zookeeper keeps for p. It reads
// the client's unexported table, which only a test may do: the pile-up it
// checks for lives nowhere else.
func watchersOf(t *testing.T, conn *zk.Conn, p string) int {
	t.Helper()
	v := reflect.ValueOf(conn).Elem()
	lock := v.FieldByName("watchersLock")
	table := v.FieldByName("watchers")
	if !lock.IsValid() || !table.IsValid() {
		t.Fatal("go-zookeeper's watcher table moved: update watchersOf")
	}
	// The table is read under its own lock: watches may come and go.
	mu := (*sync.Mutex)(lock.Addr().UnsafePointer())
	mu.Lock()
	defer mu.Unlock()
	n := 0
	iter := table.MapRange()
	for iter.Next() {
		if iter.Key().Field(0).String() == p {
			n += iter.Value().Len()
		}
	}
	return n
}

// A load error other than a lost connection does not stick in the watch
// cache: the entry loads again while read, and arms its watch.
func TestWatchCacheRecoversFromALoadError(t *testing.T) {
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

// A keepalive of a lease listed before its timer was set dereferenced nil.
func TestKeepAliveRacingLeaseCreation(t *testing.T) {
	svc := newService(t, serviceOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			for _, l := range svc.Leases.List() {
				_, _ = svc.Leases.KeepAlive(l.ID)
			}
		}
	}()
	for range 200 {
		if _, err := svc.Leases.Create(context.Background(), time.Minute, "racer", ""); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
}

// A keepalive of a lease that ended between its first look and the
// extension (its TTL ran out that moment: the fault suite saw it) answered
// 200 without extending anything, so its client counted on a lease that had
// let its semaphore slot go.
func TestKeepAliveOfALeaseEndingMeanwhileAnswersEnded(t *testing.T) {
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	l, err := svc.Leases.Create(ctx, time.Minute, "racer", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Semaphores.Acquire(ctx, l, "slots", 1, time.Second); err != nil {
		t.Fatal(err)
	}
	keepAliveChecked = func(x *Lease) { x.end(EndExpired) }
	t.Cleanup(func() { keepAliveChecked = nil })
	got, err := svc.Leases.KeepAlive(l.ID)
	if ErrorCode(err) != CodeLeaseExpired {
		t.Fatalf("a keepalive of a lease that ended meanwhile answered %v, %v; want lease_expired", got, err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Extra["reason"] != EndExpired {
		t.Fatalf("reason: %v", err)
	}
}

// A double-barrier member named like a sequential node (host-0000000001) is
// read again when it is made anew, not shown with the data of an earlier
// member of that name.
func TestMemberWithASequentialLookingNameIsReadAgain(t *testing.T) {
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

// A node made for a lease whose session has ended (a request go-zookeeper
// sent on the next session) is removed, and the lease told so.
func TestANodeOfAnEndedEpochIsNotReported(t *testing.T) {
	svc := newService(t, serviceOptions{})
	raw := rawClient(t)
	ctx := context.Background()
	_, epoch, _ := svc.sess.Status()
	p := svc.root + "/leases/stray"
	if _, err := svc.sess.Conn().Create(p, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	// As if the create had been made for a lease of the epoch before.
	if _, _, err := svc.sess.ownedBy(p, nil, epoch-1); !errors.Is(err, errSessionLost) {
		t.Fatalf("a node of an ended epoch answered %v, want the session lost", err)
	}
	if ok, _, _ := raw.Exists(p); ok {
		t.Fatal("the stray node is still there")
	}
	// A create's stat that names another session as the owner (the create
	// went out on a session the gateway has not heard of yet) is not ours
	// either, though the epoch is current.
	other := svc.root + "/leases/other"
	if _, err := raw.Create(other, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, st, err := raw.Exists(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.sess.ownedBy(other, st, epoch); !errors.Is(err, errSessionLost) {
		t.Fatalf("a node of another session answered %v, want the session lost", err)
	}
	if ok, _, _ := raw.Exists(other); !ok {
		t.Fatal("another session's node was deleted")
	}
	if _, err := svc.sess.createOwned(ctx, svc.root+"/leases/old", epoch-1, ownedNode{flags: zk.FlagEphemeral}); !errors.Is(err, errSessionLost) {
		t.Fatalf("a create for an ended epoch answered %v", err)
	}
}

// flakyHosts is a host provider whose names do not resolve while fail is
// set, and whose resolution can be held up (block) to show that nobody
// waits for it.
type flakyHosts struct {
	fail     atomicBool
	attempts atomicInt
	mu       sync.Mutex
	gate     chan struct{}
}

type atomicBool struct {
	mu sync.Mutex
	v  bool
}

func (b *atomicBool) Store(v bool) { b.mu.Lock(); b.v = v; b.mu.Unlock() }
func (b *atomicBool) Load() bool   { b.mu.Lock(); defer b.mu.Unlock(); return b.v }

type atomicInt struct {
	mu sync.Mutex
	v  int
}

func (n *atomicInt) Add()                       { n.mu.Lock(); n.v++; n.mu.Unlock() }
func (n *atomicInt) Load() int                  { n.mu.Lock(); defer n.mu.Unlock(); return n.v }
func (h *flakyHosts) block()                    { h.mu.Lock(); h.gate = make(chan struct{}); h.mu.Unlock() }
func (h *flakyHosts) unblock()                  { h.mu.Lock(); close(h.gate); h.gate = nil; h.mu.Unlock() }
func (h *flakyHosts) provider() zk.HostProvider { return &flakyProvider{hosts: h} }

type flakyProvider struct {
	hosts *flakyHosts
	zk.DNSHostProvider
}

func (p *flakyProvider) Init(servers []string) error {
	p.hosts.attempts.Add()
	p.hosts.mu.Lock()
	gate := p.hosts.gate
	p.hosts.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if p.hosts.fail.Load() {
		return fmt.Errorf("lookup %s: no such host", strings.Join(servers, ","))
	}
	return p.DNSHostProvider.Init(servers)
}

// A wait whose context ends while it arms the shared watch of its
// predecessor answers as a wait that ended (it answered internal: the
// cancelled context went on as if ZooKeeper had failed).
func TestAWaitCancelledWhileArmingItsWatchIsNoInternalError(t *testing.T) {
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	holder, _ := svc.Leases.Create(ctx, time.Minute, "holder", "")
	if _, err := svc.Locks.Acquire(ctx, holder, "busy", ModeExclusive, 0); err != nil {
		t.Fatal(err)
	}
	waiter, _ := svc.Leases.Create(ctx, time.Minute, "waiter", "")
	parent := svc.root + "/locks/busy"
	node, _, _, err := svc.sess.createProtected(ctx, parent, waiter.ID, "lock-", nil, waiter.epoch, false)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 40 {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := svc.waitTurn(cctx, waiter, parent, node, nil, lockMarkers, lockBlocks, false)
		if code := ErrorCode(err); code == CodeInternal {
			t.Fatalf("round %d: a cancelled wait answered %v", round, err)
		}
	}
}

// A wait ended by its lease's end answers lease_expired, whichever call was
// under way when the lease's end cancelled it (it answered internal when
// that was the arming of a shared watch).
func TestWaitEndedByItsLeaseAnswersLeaseExpired(t *testing.T) {
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	holder, _ := svc.Leases.Create(ctx, time.Minute, "holder", "")
	if _, err := svc.Locks.Acquire(ctx, holder, "busy", ModeExclusive, 0); err != nil {
		t.Fatal(err)
	}
	for round := range 30 {
		waiter, _ := svc.Leases.Create(ctx, time.Minute, "waiter", "")
		done := make(chan error, 1)
		go func() {
			_, err := svc.Locks.Acquire(ctx, waiter, "busy", ModeExclusive, time.Minute)
			done <- err
		}()
		if round%2 == 0 {
			zktest.Eventually(t, 10*time.Second, func() error {
				if len(waiter.Info().Holds) == 0 {
					return errors.New("not waiting yet")
				}
				return nil
			})
		}
		if err := svc.Leases.Revoke(waiter.ID); err != nil {
			t.Fatal(err)
		}
		if err := <-done; ErrorCode(err) != CodeLeaseExpired {
			t.Fatalf("round %d: a wait whose lease was revoked answered %v, want lease_expired", round, err)
		}
	}
}
