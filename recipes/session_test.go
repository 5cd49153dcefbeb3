package recipes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zkproxy"
	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
)

// The session: redials, reconnects and the epoch its nodes belong to, on
// real ZooKeeper.

// A failed dial after a session loss is retried until the ensemble resolves,
// outside the session's lock, so that no request waits on it.
func TestSessionRedialsUntilTheEnsembleResolves(t *testing.T) {
	t.Parallel()
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

// A node made for a lease whose session has ended (a request go-zookeeper
// sent on the next session) is removed, and the lease told so.
func TestANodeOfAnEndedEpochIsNotReported(t *testing.T) {
	t.Parallel()
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

func (b *atomicBool) Load() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.v }

type atomicInt struct {
	mu sync.Mutex
	v  int
}

func (n *atomicInt) Add() { n.mu.Lock(); n.v++; n.mu.Unlock() }

func (n *atomicInt) Load() int { n.mu.Lock(); defer n.mu.Unlock(); return n.v }

func (h *flakyHosts) block() { h.mu.Lock(); h.gate = make(chan struct{}); h.mu.Unlock() }

func (h *flakyHosts) unblock() { h.mu.Lock(); close(h.gate); h.gate = nil; h.mu.Unlock() }

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

// A connection that drops and comes back within the session timeout keeps
// the session: leases and their locks survive, in the same epoch.
func TestSessionReconnectKeepsLeases(t *testing.T) {
	t.Parallel()
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
