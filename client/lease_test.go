package client_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// alive asserts that the gateway still has the lease, with an expiry in
// the future.
func alive(t *testing.T, c *client.Client, l *client.Lease) {
	t.Helper()
	info, err := c.LeaseInfo(ctxFor(t, 10*time.Second), l.ID())
	if err != nil {
		t.Fatalf("lease %s at the gateway: %v", l.ID(), err)
	}
	if !info.ExpiresAt.After(time.Now()) {
		t.Fatalf("lease %s expires at %s, in the past", l.ID(), info.ExpiresAt)
	}
}

// outlives waits for d and fails if the lease ends meanwhile.
func outlives(t *testing.T, l *client.Lease, d time.Duration) {
	t.Helper()
	select {
	case <-l.Done():
		t.Fatalf("lease lost after less than %s: %v", d, l.Err())
	case <-time.After(d):
	}
}

// TestLeaseKeepsItselfAlive: a 1s lease lives through several TTLs, then
// Revoke ends it at the gateway, closes Done with ErrRevoked and leaves no
// goroutine behind (checked at the end of the test).
func TestLeaseKeepsItselfAlive(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	_, c := gateway(t)
	ctx := ctxFor(t, time.Minute)
	l, err := c.Grant(ctx, time.Second, "keepalive-test")
	if err != nil {
		t.Fatal(err)
	}
	if l.TTL() != time.Second || l.Holder() != "keepalive-test" || len(l.ID()) != 36 {
		t.Fatalf("lease %s ttl %s holder %q", l.ID(), l.TTL(), l.Holder())
	}
	outlives(t, l, 3500*time.Millisecond)
	alive(t, c, l)
	if err := l.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is open after Revoke")
	}
	if !errors.Is(l.Err(), client.ErrRevoked) {
		t.Fatalf("Err after Revoke: %v", l.Err())
	}
	_, err = c.LeaseInfo(ctx, l.ID())
	var e *client.Error
	if !errors.As(err, &e) || !errors.Is(err, client.ErrLeaseExpired) || e.Reason() != "revoked" || e.Status != 410 {
		t.Fatalf("the gateway should say revoked: %v", err)
	}
	if err := l.Revoke(ctx); err != nil {
		t.Fatalf("a second Revoke: %v", err)
	}
}

// TestLeaseLostWhenRevokedElsewhere: a lease revoked by someone else is
// lost at the next keepalive: Done closes, Err is the gateway's 410 with
// its reason, and a lock wait made through the lease ends with that error.
func TestLeaseLostWhenRevokedElsewhere(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	g, c := gateway(t)
	ctx := ctxFor(t, time.Minute)
	holder := grant(t, c, "holder")
	if _, err := holder.Lock(ctx, "lost", client.Exclusive, 0); err != nil {
		t.Fatal(err)
	}
	l, err := c.Grant(ctx, 3*time.Second, "victim")
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := l.Lock(ctx, "lost", client.Exclusive, 50*time.Second)
		waited <- err
	}()
	waitForWaiters(t, ctx, c, "lost", 1)
	start := time.Now()
	if r := gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+l.ID(), nil); r.Status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed within 10s of the revoke")
	}
	t.Logf("lease loss seen %s after the revoke", time.Since(start).Round(time.Millisecond))
	var e *client.Error
	if err := l.Err(); !errors.As(err, &e) || !errors.Is(err, client.ErrLeaseExpired) || e.Reason() != "revoked" {
		t.Fatalf("Err: %v", err)
	}
	select {
	case err := <-waited:
		// The gateway ends the wait of a revoked lease itself; either its
		// answer or the lease's loss ends the call.
		if !errors.Is(err, client.ErrLeaseExpired) && !errors.Is(err, client.ErrNotHeld) {
			t.Fatalf("the wait ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lock wait did not end with the lease")
	}
	if err := l.Revoke(ctx); err != nil {
		t.Fatalf("Revoke of a lost lease: %v", err)
	}
	if err := l.Err(); !errors.Is(err, client.ErrLeaseExpired) {
		t.Fatalf("Revoke after the loss must keep the loss as Err: %v", err)
	}
	// A call through a lost lease fails at once with the loss.
	if _, err := l.Lock(ctx, "other", client.Exclusive, 0); !errors.Is(err, client.ErrLeaseExpired) {
		t.Fatalf("Lock through a lost lease: %v", err)
	}
}

// TestKeepAliveSlowServer: every request takes a sixth of the TTL to get
// through and 503s from a proxy come and go; the lease lives on.
func TestKeepAliveSlowServer(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	g, _ := gateway(t)
	p, c := proxiedClient(t, g.URL)
	ctx := ctxFor(t, time.Minute)
	const ttl = 1500 * time.Millisecond
	l, err := c.Grant(ctx, ttl, "slow")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	p.set(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		// Every third request first meets a bare 503, as from a load
		// balancer; every one is slow.
		if n.Add(1)%3 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		select {
		case <-time.After(ttl / 6):
		case <-r.Context().Done():
			return
		}
		next.ServeHTTP(w, r)
	})
	outlives(t, l, 4*ttl)
	p.set(nil)
	alive(t, c, l)
	if n.Load() < 4 {
		t.Fatalf("only %d keepalives went through the proxy", n.Load())
	}
	if err := l.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseLostWhenUnreachable: when no keepalive gets through before the
// confirmed deadline the lease is lost on the client's side, then and not
// before, as ErrLeaseExpired wrapping the last failure, although the
// gateway never answered 410.
func TestLeaseLostWhenUnreachable(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	g, _ := gateway(t)
	p, c := proxiedClient(t, g.URL)
	ctx := ctxFor(t, time.Minute)
	l, err := c.Grant(ctx, 2*time.Second, "cut-off")
	if err != nil {
		t.Fatal(err)
	}
	p.set(func(w http.ResponseWriter, r *http.Request, next http.Handler) { cut(w) })
	select {
	case <-l.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("Done not closed within 15s of losing the gateway")
	}
	if early := time.Until(l.Deadline()); early > 0 {
		t.Fatalf("lost %s before the deadline the gateway confirmed", early)
	}
	err = l.Err()
	var e *client.Error
	if !errors.Is(err, client.ErrLeaseExpired) || errors.As(err, &e) {
		t.Fatalf("Err should be the client's own ErrLeaseExpired: %v", err)
	}
	t.Logf("Err: %v", err)
	if err := l.Revoke(ctx); err != nil {
		t.Fatalf("Revoke of a lost lease: %v", err)
	}
}

// TestKeepAliveUnavailableConfirmsNothing: a 503 problem from the gateway
// itself (its ZooKeeper session is suspended) vouches for nothing, so the
// deadline the creation confirmed stays: the lease ends at it, as the
// client's own ErrLeaseExpired, and is revoked at the gateway. Before, a 503
// extended the lease here for as long as the gateway kept answering it.
func TestKeepAliveUnavailableConfirmsNothing(t *testing.T) {
	t.Parallel()
	const id = "0b5c6f7e-1a2b-4c3d-8e9f-001122334455"
	var keepalives atomic.Int32
	revoked := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().UTC()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/leases":
			// A TTL of a minute, a promise of 1.5s.
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Zkgate-Time", now.Format(time.RFC3339Nano))
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":%q,"ttl":"1m","holder":"h","lock_delay":"0s","expires_at":%q,"created_at":%q,"holds":[]}`,
				id, now.Add(1500*time.Millisecond).Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
		case r.Method == http.MethodPost && r.URL.Path == "/v1/leases/"+id+"/keepalive":
			keepalives.Add(1)
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"type":"urn:zkgate:problem:unavailable","title":"ZooKeeper unavailable","status":503,"detail":"suspended","code":"unavailable"}`))
		case r.Method == http.MethodDelete && r.URL.Path == "/v1/leases/"+id:
			close(revoked)
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	start := time.Now()
	l, err := c.Grant(ctx, time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	if d := l.Deadline().Sub(start); d <= 0 || d > 1500*time.Millisecond+time.Second {
		t.Fatalf("deadline %s after the grant was asked for, want the promise of 1.5s", d)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the lease outlived its deadline by 10s on %d keepalives answered 503", keepalives.Load())
	}
	var e *client.Error
	if err := l.Err(); !errors.Is(err, client.ErrLeaseExpired) || errors.As(err, &e) ||
		!strings.Contains(err.Error(), "no keepalive was confirmed before the deadline") {
		t.Fatalf("Err: %v", err)
	}
	if keepalives.Load() < 1 {
		t.Fatal("no keepalive was sent")
	}
	select {
	case <-revoked:
	case <-time.After(10 * time.Second):
		t.Fatal("the expired lease was not revoked at the gateway")
	}
	if err := l.Revoke(ctx); err != nil {
		t.Fatalf("Revoke after the expiry: %v", err)
	}
}
