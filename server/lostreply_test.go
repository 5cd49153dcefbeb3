package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/gwtest"
)

// replyDropper is a TCP proxy in front of ZooKeeper that, once armed, lets
// the first create whose path contains match reach the server, then cuts
// the connection before the reply gets back: the client cannot know whether
// its create happened.
type replyDropper struct {
	ln      net.Listener
	target  string
	match   []byte
	armed   atomic.Bool
	dropped atomic.Int32
	creates atomic.Int32 // matching creates sent to the server
	// applied reports whether the server has applied the create: the
	// connection is cut only then, so that the create surely happened.
	applied func() bool
	wg      sync.WaitGroup
}

func newReplyDropper(t *testing.T, target, match string) *replyDropper {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &replyDropper{ln: ln, target: target, match: []byte(match)}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *replyDropper) Addr() string { return p.ln.Addr().String() }

func (p *replyDropper) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		var mute atomic.Bool
		closeBoth := func() { client.Close(); server.Close() }
		p.wg.Add(2)
		go func() { // server to client, muted once the create is on its way
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 && !mute.Load() {
					if _, werr := client.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			closeBoth()
		}()
		go func() { // client to server, packet by packet
			defer p.wg.Done()
			defer closeBoth()
			first := true
			for {
				var size [4]byte
				if _, err := io.ReadFull(client, size[:]); err != nil {
					return
				}
				body := make([]byte, binary.BigEndian.Uint32(size[:]))
				if _, err := io.ReadFull(client, body); err != nil {
					return
				}
				// After the connect request, a request starts with xid and
				// opcode; opcode 1 is create, 15 create2 (a create answered
				// with the node's stat).
				op := uint32(0)
				if len(body) >= 8 {
					op = binary.BigEndian.Uint32(body[4:8])
				}
				isCreate := !first && (op == 1 || op == 15) && bytes.Contains(body, p.match)
				first = false
				if isCreate {
					p.creates.Add(1)
				}
				if isCreate && p.armed.CompareAndSwap(true, false) {
					mute.Store(true)
					_, _ = server.Write(append(size[:], body...))
					for deadline := time.Now().Add(10 * time.Second); !p.applied() && time.Now().Before(deadline); {
						time.Sleep(5 * time.Millisecond) // polling ZooKeeper for the node
					}
					p.dropped.Add(1)
					return
				}
				if _, err := server.Write(append(size[:], body...)); err != nil {
					return
				}
			}
		}()
	}
}

// TestLostCreateReply: the reply to the create of a lock node is lost with
// the connection. The gateway reconnects to the same session, finds its
// node by the lease-derived prefix, and grants the lock with that one node
// (no second node, no self-deadlock).
func TestLostCreateReply(t *testing.T) {
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
