package client_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// freeAddr is a loopback address nothing listens on, for a gateway that is
// started again on it.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A lease follows a handover: once a draining gateway's answer names the
// lease's keeper (X-Zkgate-Lease-Moved-To), the lease's requests go there,
// so they are served after the draining gateway has gone; and when that
// keeper cannot be reached in turn (it handed the lease on and stopped at
// once, with no drain to name the next keeper), they go to the client's
// own URL again, whose gateway (started again on the same address) keeps
// the lease now. The hold keeps its token all along.
func TestLeaseFollowsAHandover(t *testing.T) {
	// Serial: counts the binary's goroutines (NoGoroutinesLeft).
	gwtest.NoGoroutinesLeft(t)
	addr := freeAddr(t)
	opts := gwtest.GatewayOptions{SessionTimeout: 5 * time.Second, DrainTimeout: 2 * time.Second, Handover: true,
		Extra: []string{"--listen", addr}}
	a := gwtest.StartProcess(t, opts)
	opts.Root, opts.Extra, opts.DrainTimeout = a.Root, nil, 0
	b := gwtest.StartProcess(t, opts)
	c, err := client.New(a.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 2*time.Minute)
	lease, err := c.Grant(ctx, time.Minute, "follower")
	if err != nil {
		t.Fatal(err)
	}
	g, err := lease.Lock(ctx, "moving", client.Exclusive, 0)
	if err != nil {
		t.Fatal(err)
	}
	heldToken := func() int64 {
		t.Helper()
		info, err := lease.Info(ctx)
		if err != nil {
			t.Fatalf("the lease: %v", err)
		}
		for _, h := range info.Holds {
			if h.Kind == "lock" && h.Name == "moving" && h.State == "held" {
				return h.Token
			}
		}
		t.Fatalf("the lease no longer holds the lock: %+v", info.Holds)
		return 0
	}

	a.Terminate()
	gwtest.Eventually(t, 10*time.Second, func() error {
		heldToken()
		if got := lease.URL(); got != b.URL {
			return fmt.Errorf("the lease's URL is %s, want %s", got, b.URL)
		}
		return nil
	})
	<-a.Done()
	// Nothing listens at the client's URL now: the lease's requests reach
	// the keeper it was told of.
	second, err := lease.Lock(ctx, "second", client.Exclusive, 0)
	if err != nil {
		t.Fatalf("a lock through the lease after its first gateway stopped: %v", err)
	}
	if tok := heldToken(); tok != g.Token {
		t.Fatalf("the lock's token after the handover: %d, want %d", tok, g.Token)
	}

	// The client's address serves again; the keeper hands the lease to it
	// and stops.
	opts.Extra = []string{"--listen", addr}
	a2 := gwtest.StartProcess(t, opts)
	b.Signal(t, syscall.SIGTERM, 30*time.Second)
	if err := second.Release(ctx); err != nil {
		t.Fatalf("a release through the lease after its keeper stopped: %v", err)
	}
	if got := lease.URL(); got != a2.URL {
		t.Fatalf("the lease's URL after its keeper went away: %s, want the client's %s", got, a2.URL)
	}
	if tok := heldToken(); tok != g.Token {
		t.Fatalf("the lock's token after the second handover: %d, want %d", tok, g.Token)
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("the lease ended: %v", err)
	}
	if err := lease.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
}

// A keeper whose address this client cannot reach (a connection attempt
// that is never answered, as to a gateway's own address behind a load
// balancer) costs a lease's request a moment, not its deadline: the
// request goes to the client's URL once the connection has not come
// within a bound, and so do the lease's requests after it.
func TestLeaseLeavesAnUnreachableKeeper(t *testing.T) {
	// Serial: counts the binary's goroutines (NoGoroutinesLeft).
	gwtest.NoGoroutinesLeft(t)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{SessionTimeout: 10 * time.Second})
	p := newProxy(t, g.URL)
	unreachable := freeAddr(t)
	var moving atomic.Bool
	p.set(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if moving.Load() {
			w.Header().Set("X-Zkgate-Lease-Moved-To", "http://"+unreachable)
		}
		next.ServeHTTP(w, r)
	})
	transport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == unreachable {
			<-ctx.Done() // never answered
			return nil, ctx.Err()
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	defer transport.CloseIdleConnections()
	c, err := client.New(p.URL(), client.WithHTTPClient(&http.Client{Transport: transport}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	lease, err := c.Grant(ctx, time.Minute, "stranded")
	if err != nil {
		t.Fatal(err)
	}
	moving.Store(true)
	if _, err := lease.Lock(ctx, "first", client.Exclusive, 0); err != nil {
		t.Fatal(err)
	}
	moving.Store(false)
	if got := lease.URL(); got != "http://"+unreachable {
		t.Fatalf("the lease's URL after an answer named its keeper: %s", got)
	}
	// Well within the lease's deadline (6s or more ahead at a session
	// timeout of 10s), which a connection attempt left to the system
	// would outlast.
	bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := lease.Lock(bounded, "second", client.Exclusive, 0); err != nil {
		t.Fatalf("a lock through the lease whose keeper is out of reach: %v", err)
	}
	if got := lease.URL(); got != p.URL() {
		t.Fatalf("the lease's URL after its keeper could not be reached: %s, want the client's %s", got, p.URL())
	}
	if err := lease.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
}
