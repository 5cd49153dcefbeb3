package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// allowance is how late past a deadline a test still accepts the lease to
// be seen ended: the scheduling of a timer on a busy machine, not a
// measure of the client.
const allowance = 500 * time.Millisecond

// endsByDeadline polls until the lease's deadline (and the allowance) has
// passed, then requires the lease to have ended with ErrLeaseExpired.
func endsByDeadline(t *testing.T, l *client.Lease) {
	t.Helper()
	gwtest.Eventually(t, time.Minute, func() error {
		if d := l.Deadline(); time.Now().Before(d.Add(allowance)) {
			return fmt.Errorf("the deadline is %s away", time.Until(d).Round(time.Millisecond))
		}
		return nil
	})
	if err := l.Context().Err(); err == nil {
		t.Fatalf("lease %s still lives %s past its deadline", l.ID(), time.Since(l.Deadline()).Round(time.Millisecond))
	}
	if err := l.Err(); !errors.Is(err, client.ErrLeaseExpired) {
		t.Fatalf("Err: %v", err)
	}
}

// TestDeadlineFollowsExpiresAt: a lease's deadline is the gateway's
// expires_at, bounded by what its ZooKeeper session is known to keep (the
// test gateway's session timeout is 2s), not the TTL of 30s; keepalives
// move it on, and it stays within the session timeout of now.
func TestDeadlineFollowsExpiresAt(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	_, c := gateway(t)
	ctx := ctxFor(t, time.Minute)
	l := grant(t, c, "deadline")
	first := l.Deadline()
	if ahead := time.Until(first); ahead <= 0 || ahead > 2*time.Second {
		t.Fatalf("the deadline is %s ahead: want the gateway's promise, within its session timeout of 2s", ahead)
	}
	gwtest.Eventually(t, 10*time.Second, func() error {
		if !l.Deadline().After(first) {
			return errors.New("no keepalive moved the deadline")
		}
		return nil
	})
	if ahead := time.Until(l.Deadline()); ahead <= 0 || ahead > 2*time.Second {
		t.Fatalf("after a keepalive the deadline is %s ahead", ahead)
	}
	info, err := l.Info(ctx)
	if err != nil || info.TTL != 30*time.Second || !info.ExpiresAt.Before(time.Now().Add(2*time.Second)) {
		t.Fatalf("the gateway's view: %+v %v", info, err)
	}
	if l.Err() != nil {
		t.Fatalf("the lease ended: %v", l.Err())
	}
}

// TestLeaseEndsAtItsDeadlineWhenTheGatewayFreezes: with the gateway process
// stopped (SIGSTOP), no keepalive is confirmed, and the lease ends on the
// client's side once the deadline the gateway last confirmed has passed,
// long before its TTL of 30s would have; its context is done then. Once
// the gateway runs again the lease is gone there too (the client revoked
// it, or the gateway gave up its frozen session).
func TestLeaseEndsAtItsDeadlineWhenTheGatewayFreezes(t *testing.T) {
	// Serial: counts the binary's goroutines (NoGoroutinesLeft).
	gwtest.NoGoroutinesLeft(t)
	p := gwtest.StartProcess(t, gwtest.GatewayOptions{})
	c, err := client.New(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	granted := time.Now()
	l, err := c.Grant(ctx, 30*time.Second, "frozen")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Lock(ctx, "frozen", client.Exclusive, 0); err != nil {
		t.Fatal(err)
	}
	p.Pause(t)
	resumed := false
	defer func() {
		if !resumed {
			p.Resume()
		}
	}()
	endsByDeadline(t, l)
	if !strings.Contains(l.Err().Error(), "no keepalive was confirmed before the deadline") {
		t.Fatalf("Err should say that no keepalive was confirmed in time: %v", l.Err())
	}
	if lived := l.Deadline().Sub(granted); lived > 10*time.Second {
		t.Fatalf("the lease lived %s, as if its TTL of 30s counted", lived)
	}
	if _, err := l.Lock(ctx, "other", client.Exclusive, 0); !errors.Is(err, client.ErrLeaseExpired) {
		t.Fatalf("a call through the ended lease: %v", err)
	}
	p.Resume()
	resumed = true
	gwtest.Eventually(t, 30*time.Second, func() error {
		_, err := c.LeaseInfo(ctx, l.ID())
		if !errors.Is(err, client.ErrLeaseExpired) {
			return fmt.Errorf("the gateway still has the lease: %v", err)
		}
		return nil
	})
	if err := l.Revoke(ctx); err != nil {
		t.Fatalf("Revoke of the expired lease: %v", err)
	}
}

// TestDeadlineFollowsDrain: once the lease's gateway drains (without a
// handover, its leases end with the drain), the end of the drain
// (X-Zkgate-Lease-Ends, counted from X-Zkgate-Time) bounds the deadline as
// soon as any answer for the lease says so, an acquire's 503 included:
// here keepalives are held back at a proxy, and only the refused acquire
// tells the client. The gateway never ends the drain before a promise it
// made (the deadline the client had), and the lease ends by the drain's end.
func TestDeadlineFollowsDrain(t *testing.T) {
	// Serial: counts the binary's goroutines (NoGoroutinesLeft).
	gwtest.NoGoroutinesLeft(t)
	const drain = 3 * time.Second
	p := gwtest.StartProcess(t, gwtest.GatewayOptions{SessionTimeout: 10 * time.Second, DrainTimeout: drain})
	proxy := newProxy(t, p.URL)
	c, err := client.New(proxy.URL(), client.WithRetryWindow(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	l, err := c.Grant(ctx, 30*time.Second, "drained")
	if err != nil {
		t.Fatal(err)
	}
	proxy.set(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if strings.HasSuffix(r.URL.Path, "/keepalive") {
			<-r.Context().Done() // held until the client gives up on it
			return
		}
		next.ServeHTTP(w, r)
	})
	before := l.Deadline()
	p.Terminate()
	var ends time.Time // the drain's end as the gateway says it, on this clock
	gwtest.Eventually(t, 10*time.Second, func() error {
		sent := time.Now()
		r, err := http.Get(p.URL + "/readyz")
		if err != nil {
			return err
		}
		r.Body.Close()
		if r.StatusCode != http.StatusServiceUnavailable {
			return fmt.Errorf("readyz %d: not draining yet", r.StatusCode)
		}
		at, err1 := time.Parse(time.RFC3339Nano, r.Header.Get("X-Zkgate-Lease-Ends"))
		now, err2 := time.Parse(time.RFC3339Nano, r.Header.Get("X-Zkgate-Time"))
		if err1 != nil || err2 != nil {
			return fmt.Errorf("a draining answer without the drain's end: %v", r.Header)
		}
		ends = sent.Add(at.Sub(now))
		return nil
	})
	if ends.Add(50 * time.Millisecond).Before(before) {
		t.Fatalf("the drain ends %s before the deadline the gateway had promised", before.Sub(ends).Round(time.Millisecond))
	}
	if _, err := l.Lock(ctx, "during-drain", client.Exclusive, 0); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("an acquire through a draining gateway: %v", err)
	}
	if got := l.Deadline(); got.After(ends.Add(50 * time.Millisecond)) {
		t.Fatalf("after the drain's 503 the deadline is %s past the drain's end", got.Sub(ends).Round(time.Millisecond))
	}
	proxy.set(nil)
	endsByDeadline(t, l)
	if err := l.Revoke(context.Background()); err != nil {
		t.Fatalf("Revoke of the ended lease: %v", err)
	}
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not exit after its drain")
	}
}

// TestLeaseLockDelay: the lock-delay asked for is granted and shown; a
// negative one is refused before sending, one above --max-lock-delay by the
// gateway.
func TestLeaseLockDelay(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	_, c := gateway(t)
	ctx := ctxFor(t, time.Minute)
	l, err := c.Grant(ctx, 10*time.Second, "delayed", client.LockDelay(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Revoke(ctx)
	if l.LockDelay() != 3*time.Second {
		t.Fatalf("LockDelay %s", l.LockDelay())
	}
	if info, err := l.Info(ctx); err != nil || info.LockDelay != 3*time.Second {
		t.Fatalf("the gateway's view: %+v %v", info, err)
	}
	if plain, err := c.Grant(ctx, 10*time.Second, "plain"); err != nil || plain.LockDelay() != 0 {
		t.Fatalf("a lease without lock-delay: %v", err)
	} else {
		plain.Revoke(ctx)
	}
	if _, err := c.Grant(ctx, 10*time.Second, "", client.LockDelay(-time.Second)); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("a negative lock-delay: %v", err)
	}
	wantCode(t, errOf(c.Grant(ctx, 10*time.Second, "", client.LockDelay(time.Hour))), client.ErrInvalid, 400)
}

// TestGrantReadAsTheLeaseEndsIsItsEnd: a lock's grant whose answer was read
// as the lease ended (its goroutine, answer in hand, ran again only after
// the deadline) is not handed to the caller: the acquire fails with the
// lease's end, since what it granted ends with the lease at the gateway.
// The gateway is a fake promising the lease 1s and never answering a
// keepalive; a transport reads the acquire's answer whole, then holds it
// until the lease has ended.
func TestGrantReadAsTheLeaseEndsIsItsEnd(t *testing.T) {
	t.Parallel()
	const leaseID = "7a6b5c4d-1a2b-4c3d-8e9f-001122334455"
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Zkgate-Time", stamp(now))
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/leases":
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":%q,"gateway":"g","ttl":"2s","holder":"h","lock_delay":"0s","expires_at":%q,"created_at":%q,"holds":[]}`,
				leaseID, stamp(now.Add(time.Second)), stamp(now))
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/keepalive"):
			<-r.Context().Done() // never confirmed: the lease ends at its deadline
		case r.Method == http.MethodPost && r.URL.Path == "/v1/locks/invoices/acquire":
			fmt.Fprintf(w, `{"name":"invoices","mode":"exclusive","lease":%q,"token":7,"node":"/zkgate/locks/invoices/_c_1-lock-0000000000","acquired_at":%q}`,
				leaseID, stamp(now))
		case r.Method == http.MethodDelete && r.URL.Path == "/v1/leases/"+leaseID:
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Error(w, "unexpected", http.StatusTeapot)
		}
	}))
	defer fake.Close()
	leased := make(chan *client.Lease, 1)
	holding := roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil || !strings.HasSuffix(r.URL.Path, "/acquire") {
			return resp, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		l := <-leased
		<-l.Done()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	})
	c, err := client.New(fake.URL, client.WithHTTPClient(&http.Client{Transport: holding}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	l, err := c.Grant(ctx, 30*time.Second, "h")
	if err != nil {
		t.Fatal(err)
	}
	leased <- l
	lock, err := l.Lock(ctx, "invoices", client.Exclusive, 30*time.Second)
	if err == nil {
		t.Fatalf("the lock was handed over under a lease that had ended (%v): %+v", l.Err(), lock)
	}
	if !errors.Is(err, client.ErrLeaseExpired) || err.Error() != l.Err().Error() {
		t.Fatalf("the acquire failed with %v; want the lease's end: %v", err, l.Err())
	}
	if err := l.Revoke(ctx); err != nil {
		t.Fatalf("Revoke of the expired lease: %v", err)
	}
}

// roundTripper is an http.RoundTripper of a function.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
