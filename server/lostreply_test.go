package server_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/harness/zkproxy"
)

// replyDropper is a proxy in front of ZooKeeper that, once armed, lets
// the first create whose path contains match reach the server, then cuts
// the connection before the reply gets back: the client cannot know whether
// its create happened.
type replyDropper struct {
	*zkproxy.Proxy
	match   []byte
	armed   atomic.Bool
	dropped atomic.Int32
	creates atomic.Int32 // matching creates sent to the server
	// applied reports whether the server has applied the create: the
	// connection is cut only then, so that the create surely happened.
	applied func() bool
}

func newReplyDropper(t *testing.T, target, match string) *replyDropper {
	p := &replyDropper{Proxy: zkproxy.New(t, target), match: []byte(match)}
	p.OnRequest(p.onRequest)
	return p
}

// Opcode 1 is create, 15 create2 (a create answered with the node's stat).
func (p *replyDropper) onRequest(r zkproxy.Request) zkproxy.Action {
	if (r.Op != 1 && r.Op != 15) || !bytes.Contains(r.Raw[4:], p.match) {
		return zkproxy.Pass
	}
	p.creates.Add(1)
	if !p.armed.CompareAndSwap(true, false) {
		return zkproxy.Pass
	}
	go func() {
		for deadline := time.Now().Add(10 * time.Second); !p.applied() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond) // polling ZooKeeper for the node
		}
		p.Drop()
		p.dropped.Add(1)
	}()
	return zkproxy.LoseReply
}

// TestLostCreateReply: the reply to the create of a lock node is lost with
// the connection. The gateway reconnects to the same session, finds its
// node by the lease-derived prefix, and grants the lock with that one node
// (no second node, no self-deadlock).
//
//zkgate:race
func TestLostCreateReply(t *testing.T) {
	t.Parallel()
	zs := gwtest.ZK(t)
	proxy := newReplyDropper(t, zs.Addr(), "/locks/lost/")
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{ZK: []string{proxy.Addr()}, SessionTimeout: 10 * time.Second})
	conn := gwtest.Client(t, []string{zs.Addr()}, 5*time.Second)
	// A holder keeps the lock's parent in place, so that the create of the
	// next node reaches the server and succeeds there.
	holder := newLease(t, g.URL, "1m", "holder")
	mustStatus(t, acquire(t, g.URL, "lost", holder, "0s"), 200, "holder")
	lease := newLease(t, g.URL, "1m", "unlucky")
	proxy.applied = func() bool {
		kids, _, err := conn.Children(g.Root + "/locks/lost")
		return err == nil && len(kids) == 2
	}

	proxy.creates.Store(0)
	proxy.armed.Store(true)
	got := make(chan gwtest.Response, 1)
	go func() {
		r, _ := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/locks/lost/acquire?wait=30s", map[string]any{"lease": lease})
		got <- r
	}()
	gwtest.Eventually(t, 20*time.Second, func() error {
		if proxy.dropped.Load() != 1 {
			return fmt.Errorf("no reply dropped yet")
		}
		if n := len(lockState(t, g.URL, "lost")["waiters"].([]any)); n != 1 {
			return fmt.Errorf("%d waiters", n)
		}
		return nil
	})
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/locks/lost/release", map[string]any{"lease": holder}), 204, "holder releases")
	r := <-got
	mustStatus(t, r, 200, "acquire through a lost create reply")
	// One create in all: the node was found again by its prefix, not made
	// a second time.
	if n := proxy.creates.Load(); n != 1 {
		t.Fatalf("%d creates reached ZooKeeper, want 1", n)
	}
	kids, _, err := conn.Children(g.Root + "/locks/lost")
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != 1 || g.Root+"/locks/lost/"+kids[0] != r.JSON(t)["node"] {
		t.Fatalf("want exactly the granted node, got %v (granted %v)", kids, r.JSON(t)["node"])
	}
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+holder, nil), 204, "revoke holder")
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
	gwtest.NoZnodesLeft(t, conn, g.Root)
}
