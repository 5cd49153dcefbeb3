package client_test

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestLeaseCallsRideThroughARestart: while a lease is known to live, a call
// made for it rides through a gateway that refuses connections for a while
// (a restart, a crash resumed from its journal): a Lock sent while nothing
// listens at the gateway's address is granted once it listens again, 1.5 s
// later, with its lease kept alive. Before, it failed with ErrUnreachable
// after DefaultConnectRetries retries, in under a second, and zkgate lock
// exited 69 through a gateway's restart. A call made for no lease still
// fails at once (TestUnreachableGateway).
func TestLeaseCallsRideThroughARestart(t *testing.T) {
	t.Parallel()
	// The lease's deadline is bounded by what the gateway's session is known
	// to keep: 10 s of session timeout keep it seconds ahead of the gap.
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{SessionTimeout: 10 * time.Second})
	u, err := url.Parse(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	front := newTCPFront(t, u.Host)
	c, err := client.New(front.addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	lease, err := c.Grant(ctx, 30*time.Second, "through a restart")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Revoke(ctx)

	front.stop()
	time.AfterFunc(1500*time.Millisecond, front.start) // the gateway's restart takes that long
	grant, err := lease.Lock(ctx, "ride", client.Exclusive, 10*time.Second)
	if err != nil {
		t.Fatalf("a lock asked for through a restart: %v", err)
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("the lease ended through the restart: %v", err)
	}
	if err := grant.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// tcpFront passes the connections made to its address on to a target;
// stopped, it refuses them (nothing listens there), as a gateway's
// address does while it restarts.
type tcpFront struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func newTCPFront(t *testing.T, target string) *tcpFront {
	f := &tcpFront{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	f.serve(ln)
	t.Cleanup(f.stop)
	return f
}

// start listens at the front's address again.
func (f *tcpFront) start() {
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		f.t.Errorf("listen at %s again: %v", f.addr, err)
		return
	}
	f.serve(ln)
}

func (f *tcpFront) serve(ln net.Listener) {
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", f.target)
			if err != nil {
				in.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, in, out)
			f.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

// stop closes the listener and every connection through the front.
func (f *tcpFront) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		f.ln.Close()
		f.ln = nil
	}
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}
