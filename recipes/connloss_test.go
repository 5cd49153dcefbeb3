package recipes

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zkproxy"
	"github.com/zkgate/zkgate/internal/harness/zktest"
)

// Calls whose ZooKeeper connection stalls, is lost or lost with its
// session (each a case the fault-injection suite, internal/harness/faults, met),
// on real ZooKeeper behind a proxy.

// stallProxy is a proxy in front of ZooKeeper that, once armed, stalls
// the client's packets from the first request of a given opcode whose
// bytes contain match (that one included) until released: a connection
// that stalls at a chosen moment, as a partition does.
type stallProxy struct {
	*zkproxy.Proxy
	opcode  int32
	mu      sync.Mutex
	armed   bool
	match   []byte
	stalled chan struct{} // closed when a matching request is held
	// deleteHeld is closed when a delete of a node of the lock "stall"
	// comes in behind the held request.
	deleteHeld chan struct{}
}

func newStallProxy(t *testing.T, target string, opcode int32) *stallProxy {
	t.Helper()
	p := &stallProxy{Proxy: zkproxy.New(t, target), opcode: opcode,
		stalled: make(chan struct{}), deleteHeld: make(chan struct{})}
	p.OnRequest(p.onRequest)
	return p
}

// stalledService is a service whose connection to the shared ZooKeeper,
// with a session timeout of timeout, goes through a stallProxy of opcode.
// The proxy takes connections again and lets everything through before
// the service closes, on a failure too.
func stalledService(t *testing.T, opcode int32, timeout time.Duration) (*stallProxy, *testService) {
	t.Helper()
	proxy := newStallProxy(t, zktest.Shared(t).Addr(), opcode)
	svc := newService(t, serviceOptions{servers: []string{proxy.Addr()}, timeout: timeout})
	t.Cleanup(func() { proxy.Refuse(false); proxy.Release() })
	return proxy, svc
}

// Arm makes the proxy stall at the next request of its opcode for a path
// containing match.
func (p *stallProxy) Arm(match string) {
	p.mu.Lock()
	p.armed, p.match = true, []byte(match)
	p.mu.Unlock()
}

func (p *stallProxy) onRequest(r zkproxy.Request) zkproxy.Action {
	p.mu.Lock()
	defer p.mu.Unlock()
	body := r.Raw[4:]
	if p.armed && r.Op == p.opcode && bytes.Contains(body, p.match) {
		p.armed = false
		close(p.stalled)
		return zkproxy.Stall
	}
	if r.Op == opDelete && bytes.Contains(body, []byte("/locks/stall/")) && p.isStalled() && p.deleteHeld != nil {
		close(p.deleteHeld)
		p.deleteHeld = nil
	}
	return zkproxy.Pass
}

func (p *stallProxy) isStalled() bool {
	select {
	case <-p.stalled:
		return true
	default:
		return false
	}
}

// whenStalled runs fn once the armed request has stalled (not at all if it
// has not within 30s).
func (p *stallProxy) whenStalled(fn func()) {
	stalled := p.stalled
	go func() {
		select {
		case <-stalled:
		case <-time.After(30 * time.Second):
			return
		}
		fn()
	}()
}

// acquireWhileArming has waiter wait for the lock "stall", held by held,
// for wait, while the proxy (of getData) stalls the request that arms the
// waiter's watch on held's node until the waiter node's delete comes in
// behind it; the acquire must have armed its watch and answered a timeout.
func (p *stallProxy) acquireWhileArming(t *testing.T, svc *testService, held LockGrant, waiter *Lease, wait time.Duration) {
	t.Helper()
	deleteHeld := p.deleteHeld
	p.Arm(held.Node)
	go func() {
		select {
		case <-deleteHeld:
		case <-time.After(30 * time.Second):
		}
		p.Release()
	}()
	_, err := svc.Locks.Acquire(context.Background(), waiter, "stall", ModeExclusive, wait)
	if !p.isStalled() {
		t.Fatalf("the acquire never armed a watch (got %v)", err)
	}
	if code := ErrorCode(err); code != CodeTimeout {
		t.Fatalf("acquire whose wait ended while arming its watch: %v (code %q), want a timeout", err, code)
	}
}

// loseReply lets the stalled request through and loses the connection
// before its reply: new connections are refused (until the test allows
// them again) and the server's answers dropped until applied reports the
// request applied (polled for up to 10s); then hangUp, if not nil, and
// the connection is dropped.
func (p *stallProxy) loseReply(applied func() bool, hangUp func()) {
	p.Refuse(true)
	p.Mute(true)
	p.Release()
	for deadline := time.Now().Add(10 * time.Second); !applied() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond) // polling ZooKeeper for the applied request
	}
	if hangUp != nil {
		hangUp()
	}
	p.Drop()
	p.Mute(false)
}

// An acquire whose wait ended while it was setting the watch on the node
// before it (the getData that sets it found no answer in time: a stalled
// connection) answered 500 internal ("ZooKeeper request: wait elapsed"),
// and 500 too when its client hung up then; and the waiter that armed the
// watch ignored its wait's end until the connection was given up, seconds
// later. It is the wait's end, then and there: 409 timeout, the waiter node
// gone.
func TestAcquireWhoseWaitEndsWhileSettingAWatch(t *testing.T) {
	t.Parallel()
	proxy, svc := stalledService(t, opGetData, 20*time.Second)
	held := holdLock(t, svc, "stall")
	// The acquire gives up its wait, then deletes its waiter node: that
	// delete queues behind the stalled getData, so it is let through then.
	proxy.acquireWhileArming(t, svc, held, newLease(t, svc, "waiter"), 500*time.Millisecond)
	// The wait ended by itself, not when the stalled connection was given
	// up (after two thirds of the session timeout) and made again.
	if st := svc.sess.Stats(); st.Reconnects != 0 || st.NewSessions != 1 {
		t.Fatalf("the acquire outlived its wait until the connection was replaced: %+v", st)
	}
	zktest.Eventually(t, 10*time.Second, holderAlone(t, svc, "stall"))
}

// holderAlone returns a check, for zktest.Eventually, that the line of
// the lock name on s is its holder's node alone.
func holderAlone(t *testing.T, s *testService, name string) func() error {
	conn := rawClient(t)
	return func() error {
		kids, _, err := conn.Children(s.Locks.parent(name))
		if err != nil {
			return err
		}
		if len(kids) != 1 {
			return fmt.Errorf("the lock's line: %v, want the holder's node alone", kids)
		}
		return nil
	}
}

// A claim whose create of its claim node reached ZooKeeper while the
// connection was lost, and whose wait ended before the session was back,
// answered 409 timeout (not a claim answer: 204 says no item came in the
// wait) and left the claim node behind, owned by the gateway's session and
// tracked by no lease: the item stayed hidden from every consumer until the
// gateway's session ended. The claim node is ours (session and lease), so
// it is dropped once the session is back.
func TestClaimWhoseCreateIsLostWithItsWait(t *testing.T) {
	t.Parallel()
	proxy, svc := stalledService(t, opCreate, 20*time.Second)
	conn := rawClient(t)
	ctx := context.Background()
	item, err := svc.Queues.Produce(ctx, "jobs", []byte("job"), DefaultPriority)
	if err != nil {
		t.Fatal(err)
	}
	lease := newLease(t, svc, "consumer")
	claimNode := svc.root + "/queues/jobs/taken/" + item.ID
	proxy.Arm("/queues/jobs/taken/")
	// The create goes through, then the connection is lost before its
	// reply, and no new one can be made for now.
	proxy.whenStalled(func() {
		proxy.loseReply(func() bool {
			ok, _, err := conn.Exists(claimNode)
			return err == nil && ok
		}, nil)
	})
	_, err = svc.Queues.Claim(ctx, lease, "jobs", 500*time.Millisecond)
	if !IsEmpty(err) {
		t.Fatalf("claim whose wait ended with its create unanswered: %v (code %q), want no item", err, ErrorCode(err))
	}
	proxy.Refuse(false)
	zktest.Eventually(t, 15*time.Second, func() error {
		if ok, _, err := conn.Exists(claimNode); err != nil || ok {
			return fmt.Errorf("claim node %s still there (%v)", claimNode, err)
		}
		return nil
	})
	other := newLease(t, svc, "other")
	got, err := svc.Queues.Claim(ctx, other, "jobs", 5*time.Second)
	if err != nil || got.ID != item.ID {
		t.Fatalf("the item could not be claimed again: %v %v", got.ID, err)
	}
}

// A lease create whose request ends (the client hangs up) while the
// transaction that makes its record is unanswered answers unavailable, not
// 500 internal, and the record it may have made is ended once the session
// is back, not left, known to no lease, until the session ends.
func TestLeaseCreateWhoseRequestEndsUnanswered(t *testing.T) {
	t.Parallel()
	proxy, svc := stalledService(t, opMulti, 20*time.Second)
	conn := rawClient(t)
	proxy.Arm("/leases/")
	ctx, cancel := context.WithCancel(context.Background())
	// The transaction goes through, the client hangs up, and the
	// connection is lost before the reply.
	proxy.whenStalled(func() {
		proxy.loseReply(func() bool {
			kids, _, err := conn.Children(svc.root + "/leases")
			return err == nil && len(kids) > 0
		}, cancel)
	})
	_, err := svc.Leases.Create(ctx, time.Minute, "hung-up", "")
	if code := ErrorCode(err); err == nil || code == CodeInternal {
		t.Fatalf("a create whose request ended unanswered: %v (code %q), want no internal error", err, code)
	}
	proxy.Refuse(false)
	zktest.Eventually(t, 30*time.Second, func() error {
		kids, _, err := conn.Children(svc.root + "/leases")
		if err != nil || len(kids) != 0 {
			return fmt.Errorf("lease records left: %v (%v)", kids, err)
		}
		return nil
	})
	if n := svc.Leases.Count(); n != 0 {
		t.Fatalf("%d leases live", n)
	}
}

// A gateway cut from ZooKeeper answered 404 lease_not_found for a lease of
// another gateway: it could not read the lease's record or history, and
// took that for "no such lease". It cannot tell now: unavailable.
func TestLocateWithoutZooKeeperIsUnavailable(t *testing.T) {
	t.Parallel()
	zks := zktest.Shared(t)
	px := zkproxy.New(t, zks.Addr())
	cut := newService(t, serviceOptions{servers: []string{px.Addr()}, timeout: 10 * time.Second})
	other := newService(t, serviceOptions{root: cut.root})
	lease := newLease(t, other, "elsewhere")
	if owner, err := cut.Leases.Locate(lease.ID); err != nil || owner != (Keeper{}) {
		// Both services share the gateway id of the test harness: the
		// record is "ours", and no forwarding is possible; that is fine here.
		t.Logf("before the cut: %+v %v", owner, err)
	}
	px.Pause()
	px.Drop()
	zktest.Eventually(t, 20*time.Second, func() error {
		if st, _, _ := cut.sess.Status(); st != StateSuspended {
			return fmt.Errorf("session %s", st)
		}
		return nil
	})
	for _, id := range []string{lease.ID, "00000000-0000-4000-8000-000000000000"} {
		if _, err := cut.Leases.Locate(id); ErrorCode(err) != CodeUnavailable {
			t.Fatalf("Locate(%s) cut from ZooKeeper: %v, want unavailable", id, err)
		}
	}
	px.Resume()
}

// A lease create during which the session was lost answered 410
// lease_expired ("the gateway's ZooKeeper session was lost") for a lease
// that never was. It answers unavailable: retry, on a new session.
func TestLeaseCreateWhoseSessionIsLostIsUnavailable(t *testing.T) {
	t.Parallel()
	proxy, svc := stalledService(t, opMulti, time.Second)
	proxy.Arm("/leases/")
	// The connection goes, and none can be made until the session is
	// given up.
	proxy.whenStalled(func() {
		proxy.Refuse(true)
		proxy.Drop()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if st, _, _ := svc.sess.Status(); st == StateLost || st == StateConnecting {
				break // polling the session for its loss
			}
		}
		proxy.Refuse(false)
		proxy.Release()
	})
	_, err := svc.Leases.Create(context.Background(), time.Minute, "unlucky", "")
	if code := ErrorCode(err); code != CodeUnavailable {
		t.Fatalf("a create during which the session was lost: %v (code %q), want unavailable", err, code)
	}
}

// withoutLease: a call with no lease never answers lease_expired for its
// session's end.
func TestCallsWithoutALeaseNeverAnswerLeaseExpired(t *testing.T) {
	t.Parallel()
	if code := ErrorCode(withoutLease(errSessionLost)); code != CodeUnavailable {
		t.Fatalf("the session's end for a call without a lease: %s", code)
	}
	other := Errorf(CodeInvalid, "x")
	if withoutLease(other) != error(other) {
		t.Fatal("withoutLease changed another error")
	}
}
