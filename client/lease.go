package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Lease is the liveness of this client at the gateway: everything it holds
// (locks, semaphore slots, candidacies, barrier memberships, queue claims)
// is released when the lease ends. A Lease keeps itself alive on a
// goroutine of its own, sending a keepalive about every third of its TTL and
// retrying transient failures (network errors, 503, 429) until the lease
// would have expired. Done is closed when the lease is lost or revoked, and
// Err says why; the calls made through a Lease are cancelled at that moment
// and return that same error.
type Lease struct {
	c      *Client
	id     string
	ttl    time.Duration
	holder string

	// ctx ends, with the reason as its cause, when the lease is lost or
	// revoked: it is what Done, Err and the calls made through the lease
	// watch.
	ctx    context.Context
	end    context.CancelCauseFunc
	stop   context.CancelFunc // ends the keepalive loop
	looped chan struct{}      // closed when the keepalive loop has returned

	mu      sync.Mutex
	expiry  time.Time // when the lease ends at the latest if no keepalive gets through
	revoked bool
	revoke  sync.Mutex // one Revoke at a time
}

// Grant creates a lease of the given TTL (0: the gateway's default, 15s;
// it must be from 1s to the gateway's --max-ttl) with a holder label that
// other clients see, and keeps it alive until Revoke or its loss.
func (c *Client) Grant(ctx context.Context, ttl time.Duration, holder string) (*Lease, error) {
	sent := time.Now()
	info, err := c.CreateLease(ctx, ttl, holder)
	if err != nil {
		return nil, err
	}
	l := &Lease{c: c, id: info.ID, ttl: info.TTL, holder: info.Holder, expiry: sent.Add(info.TTL),
		looped: make(chan struct{})}
	l.ctx, l.end = context.WithCancelCause(context.Background())
	loopCtx, stop := context.WithCancel(context.Background())
	l.stop = stop
	go l.keepAlive(loopCtx)
	return l, nil
}

// Lease is a handle of the existing lease id that this client does not keep
// alive: someone else does (another process, a script running
// "zkgate lease keepalive"), or the lease is short-lived. Its Done is
// closed only by Revoke, and TTL is 0. Use it to act for a lease made
// elsewhere, such as acking an item another process claimed.
func (c *Client) Lease(id string) *Lease {
	l := &Lease{c: c, id: id, looped: make(chan struct{})}
	l.ctx, l.end = context.WithCancelCause(context.Background())
	l.stop = func() {}
	close(l.looped)
	return l
}

// CreateLease creates a lease and returns it without keeping it alive (see
// Grant for one that keeps itself alive): for a client that sends its own
// keepalives, or work shorter than the TTL.
func (c *Client) CreateLease(ctx context.Context, ttl time.Duration, holder string) (LeaseInfo, error) {
	if ttl < 0 {
		return LeaseInfo{}, fmt.Errorf("%w: ttl %s is negative", ErrInvalid, ttl)
	}
	body := map[string]string{}
	if ttl > 0 {
		body["ttl"] = ttl.String()
	}
	if holder != "" {
		body["holder"] = holder
	}
	// A retried create may leave a lease whose answer was lost: nobody
	// keeps it alive, and it expires after its TTL holding nothing.
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/leases", body: body, retry: true})
	if err != nil {
		return LeaseInfo{}, err
	}
	var info LeaseInfo
	if err := resp.decode(&info); err != nil {
		return LeaseInfo{}, err
	}
	if info.ID == "" || info.TTL <= 0 {
		return LeaseInfo{}, fmt.Errorf("zkgate: the gateway answered a lease without id or ttl: %s", resp.body)
	}
	return info, nil
}

// ID is the lease's id, as the gateway knows it.
func (l *Lease) ID() string { return l.id }

// TTL is the lease's time to live.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Holder is the lease's holder label.
func (l *Lease) Holder() string { return l.holder }

// Client is the client the lease was granted through.
func (l *Lease) Client() *Client { return l.c }

// Done is closed when the lease is lost or revoked.
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Err is nil while the lease lives, and then why it ended:
//   - an *Error of code lease_expired (errors.Is(err, ErrLeaseExpired)) when
//     the gateway says the lease ended; its Reason() is "expired", "revoked"
//     (by someone else), "session_lost" or "gateway_shutdown";
//   - an *Error of code lease_not_found when the gateway does not know it;
//   - an error that is ErrLeaseExpired, wrapping the last failure, when no
//     keepalive got through for a whole TTL;
//   - ErrRevoked after Revoke;
//   - any other *Error the gateway answered a keepalive with (forbidden...).
func (l *Lease) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Context is a context that ends, with Err as its cause, when the lease
// ends: give it to work that must stop then.
func (l *Lease) Context() context.Context { return l.ctx }

// Info reads the lease from the gateway, with what it holds.
func (l *Lease) Info(ctx context.Context) (LeaseInfo, error) {
	return l.c.LeaseInfo(ctx, l.id)
}

// Revoke stops the keepalives and ends the lease at the gateway, which
// releases everything it held before answering. Afterwards Done is closed
// and Err is ErrRevoked (or the loss that came first). Revoking a lease the
// gateway already ended is not an error; revoking twice is a no-op. If the
// gateway cannot be reached the error is returned, and the lease, no longer
// kept alive, ends by itself within its TTL.
func (l *Lease) Revoke(ctx context.Context) error {
	l.revoke.Lock()
	defer l.revoke.Unlock()
	if l.isRevoked() {
		return nil
	}
	l.stop()
	<-l.looped
	l.mu.Lock()
	l.revoked = true
	l.mu.Unlock()
	lost := l.ctx.Err() != nil
	l.end(ErrRevoked)
	if lost {
		return nil
	}
	err := l.c.RevokeLease(ctx, l.id)
	if errors.Is(err, ErrLeaseExpired) || errors.Is(err, ErrLeaseNotFound) {
		return nil
	}
	return err
}

func (l *Lease) isRevoked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.revoked
}

// bind returns ctx, also cancelled with the lease's end as its cause when
// the lease ends, so that a call made for the lease stops with it.
func (l *Lease) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.ctx, func() { cancel(context.Cause(l.ctx)) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// keepAlive extends the lease about every third of its TTL until stopped
// or lost.
func (l *Lease) keepAlive(ctx context.Context) {
	defer close(l.looped)
	interval := l.ttl / 3
	next := time.Now().Add(interval)
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		sent, err := l.extend(ctx)
		if ctx.Err() != nil {
			return // Revoke stopped us: it ends the lease itself
		}
		if err != nil {
			l.end(err)
			return
		}
		next = sent.Add(interval)
	}
}

// extend sends keepalives until one gets through, the gateway says the
// lease is gone, or the lease would have expired. It returns when the
// successful keepalive was sent.
func (l *Lease) extend(ctx context.Context) (time.Time, error) {
	var last error
	for attempt := 0; ; attempt++ {
		l.mu.Lock()
		deadline := l.expiry
		l.mu.Unlock()
		if !time.Now().Before(deadline) {
			return time.Time{}, fmt.Errorf("%w: lease %s: no keepalive got through within its TTL of %s: %w",
				ErrLeaseExpired, l.id, l.ttl, last)
		}
		sent := time.Now()
		actx, cancel := context.WithDeadline(ctx, deadline)
		_, err := l.c.keepAlive(actx, l.id)
		cancel()
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
		var problem *Error
		isProblem := errors.As(err, &problem)
		switch {
		case err == nil,
			// The gateway extends a lease while its ZooKeeper session is
			// suspended, and says so with a 503 problem: a ZooKeeper blip
			// must not cost the lease. A 503 from something in front of the
			// gateway proves nothing and is retried.
			isProblem && problem.Code == "unavailable" && problem.fromGateway:
			l.mu.Lock()
			l.expiry = sent.Add(l.ttl)
			l.mu.Unlock()
			return sent, nil
		case isProblem && problem.Code != "unavailable" && problem.Code != "too_many":
			return time.Time{}, err // gone, not found, forbidden: final
		}
		last = err
		pause := backoff(attempt)
		if isProblem && problem.RetryAfter > 0 {
			pause = problem.RetryAfter
		}
		pause = min(pause, time.Until(deadline))
		t := time.NewTimer(max(pause, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return time.Time{}, ctx.Err()
		case <-t.C:
		}
	}
}

// keepAlive sends one keepalive.
func (c *Client) keepAlive(ctx context.Context, id string) (LeaseInfo, error) {
	path, err := pathOf("leases", id, "keepalive")
	if err != nil {
		return LeaseInfo{}, err
	}
	resp, err := c.do(ctx, request{method: http.MethodPost, path: path})
	if err != nil {
		return LeaseInfo{}, err
	}
	var info LeaseInfo
	return info, resp.decode(&info)
}

// KeepAlive extends the lease id once, for clients that keep a lease alive
// themselves (a Lease from Grant does it on its own).
func (c *Client) KeepAlive(ctx context.Context, id string) (LeaseInfo, error) {
	return c.keepAlive(ctx, id)
}

// LeaseInfo reads the lease id, with what it holds.
func (c *Client) LeaseInfo(ctx context.Context, id string) (LeaseInfo, error) {
	path, err := pathOf("leases", id)
	if err != nil {
		return LeaseInfo{}, err
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, path: path, retry: true})
	if err != nil {
		return LeaseInfo{}, err
	}
	var info LeaseInfo
	return info, resp.decode(&info)
}

// Leases lists the live leases of the gateway that answers, oldest first.
func (c *Client) Leases(ctx context.Context) ([]LeaseInfo, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/leases", retry: true})
	if err != nil {
		return nil, err
	}
	var list struct {
		Leases []LeaseInfo `json:"leases"`
	}
	return list.Leases, resp.decode(&list)
}

// RevokeLease ends the lease id at the gateway, which releases all it held
// before answering. A repeat after a lost answer is recognised: the
// gateway's "revoked" is success.
func (c *Client) RevokeLease(ctx context.Context, id string) error {
	path, err := pathOf("leases", id)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, request{method: http.MethodDelete, path: path, retry: true, okOnRetry: []string{"lease_expired"}})
	return err
}
