package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Lease is the liveness of this client at the gateway: everything it holds
// (locks, semaphore slots, candidacies, barrier memberships, queue claims)
// is released when the lease ends.
//
// A Lease keeps the deadline the gateway last confirmed (see Deadline) and
// keeps itself alive on a goroutine of its own, a third of the way from
// each keepalive's send time to that deadline, retrying transient failures
// (network errors, 503, 429). When the deadline comes without a newer
// confirmation the lease ends here at once: Done is closed, Err is
// ErrLeaseExpired, the calls made through the lease are cancelled, and the
// lease is revoked at the gateway in the background, so that what it held
// is freed rather than kept until its TTL. Done is closed too when the
// gateway says the lease ended, or after Revoke; Err says why.
//
// A handover of the lease to another gateway (its gateway drains) costs it
// nothing: once an answer says where the lease moved
// (X-Zkgate-Lease-Moved-To), every call made through the lease goes there,
// and back to the client's URL if that gateway cannot be connected to (see
// URL).
//
// One Lease is one holder: it refuses a second Lock, AcquireSemaphore or
// Campaign of a name it already holds or is acquiring (ErrAlreadyHeld),
// since the gateway would answer it with the first one's grant. Take a
// lease per concurrent holder.
type Lease struct {
	c         *Client
	id        string
	ttl       time.Duration
	holder    string
	lockDelay time.Duration

	// ctx ends, with the reason as its cause, when the lease is lost or
	// revoked: it is what Done, Err and the calls made through the lease
	// watch.
	ctx    context.Context
	end    context.CancelCauseFunc
	stop   context.CancelFunc // ends the keepalive loop
	looped chan struct{}      // closed when the keepalive loop has returned

	mu sync.Mutex
	// promised is the latest expires_at the gateway confirmed and drainEnd
	// the earliest end of a drain it announced (zero: none), both on this
	// process's clock; deadline is the earlier of the two. A promise made
	// before a drain began is cut short by the drain, so the two are kept
	// apart and answers may arrive in any order.
	promised, drainEnd, deadline time.Time
	changed                      chan struct{}    // closed, and replaced, when deadline changes
	expiry                       *time.Timer      // ends the lease at deadline
	lastErr                      error            // the latest keepalive's failure
	holding                      map[holdKey]bool // what the lease holds or is acquiring (see take)
	forgotten                    chan struct{}    // closed when the revoke after an expiry has ended
	revoked                      bool
	revoke                       sync.Mutex // one Revoke at a time
	// movedTo is the base URL of the gateway that keeps the lease after a
	// handover, as a draining gateway named it (X-Zkgate-Lease-Moved-To):
	// the lease's requests go there rather than to the client's base URL,
	// which may be the draining gateway's own address. Nil: the client's.
	movedTo *url.URL
}

// A LeaseOption sets something of a lease being made.
type LeaseOption func(*leaseSpec)

type leaseSpec struct {
	lockDelay *time.Duration
}

// LockDelay asks for a lock-delay: when the lease ends without releasing
// what it holds (it expired, its gateway's session was lost or its gateway
// went away, or an admin revoked it), no zkgate grant of its locks,
// semaphore slots and leaderships is made for d, through any gateway. It
// covers a holder paused or slow past its deadline. From 0s to the
// gateway's --max-lock-delay (default 1m); without it, the gateway's
// --lock-delay (default 0s).
func LockDelay(d time.Duration) LeaseOption {
	return func(s *leaseSpec) { s.lockDelay = &d }
}

// minKeepAlive is the shortest time between keepalives, however near the
// deadline is (as it is near the end of a drain).
const minKeepAlive = 100 * time.Millisecond

// Grant creates a lease of the given TTL (0: the gateway's default, 15s;
// it must be from 1s to the gateway's --max-ttl) with a holder label that
// other clients see, and keeps it alive until Revoke or its loss. The TTL
// is how long the gateway keeps a lease whose client went silent; the
// deadline (see Deadline) is often sooner.
func (c *Client) Grant(ctx context.Context, ttl time.Duration, holder string, opts ...LeaseOption) (*Lease, error) {
	info, resp, err := c.createLease(ctx, ttl, holder, opts)
	if err != nil {
		return nil, err
	}
	l := &Lease{c: c, id: info.ID, ttl: info.TTL, holder: info.Holder, lockDelay: info.LockDelay,
		looped: make(chan struct{}), changed: make(chan struct{}), holding: map[holdKey]bool{}}
	l.ctx, l.end = context.WithCancelCause(context.Background())
	loopCtx, stop := context.WithCancel(context.Background())
	l.stop = stop
	l.heard(resp.sent, resp.header)
	l.confirmed(resp.sent, resp.header, info.ExpiresAt)
	l.mu.Lock()
	l.expiry = time.AfterFunc(time.Until(l.deadline), l.expire)
	l.mu.Unlock()
	go l.keepAlive(loopCtx, resp.sent)
	return l, nil
}

// Lease is a handle of the existing lease id that this client does not keep
// alive: someone else does (another process, a script running
// "zkgate lease keepalive"), or the lease is short-lived. Its Done is
// closed only by Revoke, TTL is 0 and Deadline is the zero Time. Use it to
// act for a lease made elsewhere, such as acking an item another process
// claimed.
func (c *Client) Lease(id string) *Lease {
	l := &Lease{c: c, id: id, looped: make(chan struct{}), changed: make(chan struct{}), holding: map[holdKey]bool{}}
	l.ctx, l.end = context.WithCancelCause(context.Background())
	l.stop = func() {}
	close(l.looped)
	return l
}

// CreateLease creates a lease and returns it without keeping it alive (see
// Grant for one that keeps itself alive): for a client that sends its own
// keepalives, or work shorter than the TTL.
func (c *Client) CreateLease(ctx context.Context, ttl time.Duration, holder string, opts ...LeaseOption) (LeaseInfo, error) {
	info, _, err := c.createLease(ctx, ttl, holder, opts)
	return info, err
}

func (c *Client) createLease(ctx context.Context, ttl time.Duration, holder string, opts []LeaseOption) (LeaseInfo, *response, error) {
	if ttl < 0 {
		return LeaseInfo{}, nil, fmt.Errorf("%w: ttl %s is negative", ErrInvalid, ttl)
	}
	var spec leaseSpec
	for _, o := range opts {
		o(&spec)
	}
	body := map[string]string{}
	if ttl > 0 {
		body["ttl"] = ttl.String()
	}
	if holder != "" {
		body["holder"] = holder
	}
	if spec.lockDelay != nil {
		if *spec.lockDelay < 0 {
			return LeaseInfo{}, nil, fmt.Errorf("%w: lock delay %s is negative", ErrInvalid, *spec.lockDelay)
		}
		body["lock_delay"] = spec.lockDelay.String()
	}
	// A retried create may leave a lease whose answer was lost: nobody
	// keeps it alive, and it expires after its TTL holding nothing.
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/leases", body: body, retry: true})
	if err != nil {
		return LeaseInfo{}, nil, err
	}
	var info LeaseInfo
	if err := resp.decode(&info); err != nil {
		return LeaseInfo{}, nil, err
	}
	if info.ID == "" || info.TTL <= 0 {
		return LeaseInfo{}, nil, fmt.Errorf("zkgate: the gateway answered a lease without id or ttl: %s", resp.body)
	}
	return info, resp, nil
}

// ID is the lease's id, as the gateway knows it.
func (l *Lease) ID() string { return l.id }

// TTL is the lease's time to live: how long the gateway keeps it without a
// keepalive.
func (l *Lease) TTL() time.Duration { return l.ttl }

// LockDelay is the lease's lock-delay, as the gateway granted it (see the
// LockDelay option).
func (l *Lease) LockDelay() time.Duration { return l.lockDelay }

// Holder is the lease's holder label.
func (l *Lease) Holder() string { return l.holder }

// Client is the client the lease was granted through.
func (l *Lease) Client() *Client { return l.c }

// Deadline is when the lease ends on this side unless a newer keepalive is
// confirmed first: the earlier of the latest expires_at the gateway
// confirmed and the end of a drain it announced (X-Zkgate-Lease-Ends), each
// counted on this process's clock from when its request was sent (their
// distance from the answer's X-Zkgate-Time; sent + TTL from a gateway
// without that header). Until then what the lease holds is certainly its
// own. It moves with every keepalive; stop the work the lease guards by
// then (see Ending). Zero for a lease from Client.Lease.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Ending returns a channel that is closed once the lease's deadline is less
// than before away without a newer confirmation, or the lease has ended: a
// signal to stop the work the lease guards early enough to be done by the
// deadline. It follows every keepalive (a confirmed keepalive moves the
// moment on; the end of a drain brings it forward).
func (l *Lease) Ending(before time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			l.mu.Lock()
			deadline, changed := l.deadline, l.changed
			l.mu.Unlock()
			// A lease from Client.Lease has no deadline: it ends by Revoke.
			t := time.NewTimer(time.Hour)
			if !deadline.IsZero() {
				left := time.Until(deadline) - before
				if left <= 0 {
					t.Stop()
					return
				}
				t.Reset(left)
			}
			select {
			case <-t.C: // look again: a confirmation may have come meanwhile
			case <-changed:
			case <-l.ctx.Done():
				t.Stop()
				return
			}
			t.Stop()
		}
	}()
	return ch
}

// Done is closed when the lease is lost or revoked.
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Err is nil while the lease lives, and then why it ended:
//   - an error that is ErrLeaseExpired, saying that no keepalive was
//     confirmed before the deadline (and what the last failure was), when
//     the deadline came first;
//   - an *Error of code lease_expired (errors.Is(err, ErrLeaseExpired)) when
//     the gateway says the lease ended; its Reason() is "expired", "revoked"
//     (by someone else), "session_lost" or "gateway_shutdown";
//   - an *Error of code lease_not_found when the gateway does not know it;
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

// Info reads the lease from the gateway, with what it holds; its expires_at
// counts as a confirmation of the deadline.
func (l *Lease) Info(ctx context.Context) (LeaseInfo, error) {
	info, resp, err := readLease(ctx, l.do, l.id)
	if err != nil {
		return LeaseInfo{}, err
	}
	l.confirmed(resp.sent, resp.header, info.ExpiresAt)
	return info, nil
}

// Revoke stops the keepalives and ends the lease at the gateway, which
// releases everything it held before answering. Afterwards Done is closed
// and Err is ErrRevoked (or the loss that came first). Revoking a lease the
// gateway already ended is not an error; revoking twice is a no-op. If the
// gateway cannot be reached the error is returned, and the lease, no longer
// kept alive, ends by itself within its TTL. After a deadline that came
// without a confirmation, Revoke waits (within ctx) for the revoke the
// lease sent by itself.
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
	if l.expiry != nil {
		l.expiry.Stop()
	}
	forgotten := l.forgotten
	l.mu.Unlock()
	lost := l.ctx.Err() != nil
	l.end(ErrRevoked)
	if lost {
		if forgotten != nil {
			select {
			case <-forgotten:
			case <-ctx.Done():
			}
		}
		return nil
	}
	err := l.revokeAtGateway(ctx)
	if errors.Is(err, ErrLeaseExpired) || errors.Is(err, ErrLeaseNotFound) {
		return nil
	}
	return err
}

// revokeAtGateway is RevokeLease sent for the lease (to its keeper).
func (l *Lease) revokeAtGateway(ctx context.Context) error { return revokeLease(ctx, l.do, l.id) }

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

// do sends a call made for the lease: what its answers say of the lease's
// end (a draining gateway's X-Zkgate-Lease-Ends) moves the deadline, and
// where they say it moved (X-Zkgate-Lease-Moved-To) is where its requests
// go from then on. A grant (r.grant) answered as or after the lease ended
// fails with the lease's end instead: what it granted is the lease's and
// ends with it at the gateway, so the caller must not act on it.
func (l *Lease) do(ctx context.Context, r request) (*response, error) {
	r.seen = l.heard
	r.target = l.target
	r.unreachable = l.unreachable
	r.alive = l.Deadline
	resp, err := l.c.do(ctx, r)
	if err == nil && r.grant {
		if end := l.live(); end != nil {
			return nil, end
		}
	}
	return resp, err
}

// live is nil while the lease lives, and then why it ended. It reads the
// clock: a deadline passed ends the lease here, though its timer may not
// have run yet.
func (l *Lease) live() error {
	l.mu.Lock()
	passed := !l.deadline.IsZero() && !time.Now().Before(l.deadline)
	l.mu.Unlock()
	if passed {
		l.expire()
	}
	return l.Err()
}

// URL is the base URL the lease's requests go to: the client's, or the
// gateway that keeps the lease since a handover, once an answer named it
// with X-Zkgate-Lease-Moved-To (and until it cannot be reached).
func (l *Lease) URL() string {
	if t := l.target(); t != nil {
		return t.String()
	}
	return l.c.URL()
}

func (l *Lease) target() *url.URL {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.movedTo
}

// unreachable forgets u as the lease's keeper: it may itself have gone,
// and the client's base URL passes the lease's requests on to wherever the
// lease is kept now.
func (l *Lease) unreachable(u *url.URL) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.movedTo == u {
		l.movedTo = nil
	}
}

// movedTo parses an X-Zkgate-Lease-Moved-To: an http or https base URL with
// a host, and nothing more; nil for anything else.
func movedTo(v string) *url.URL {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u
}

// onOurClock is the time t of the gateway's clock, from the answer with
// headers h to a request sent at sent, on this process's (monotonic) clock:
// sent plus t's distance from the answer's X-Zkgate-Time. Counted from the
// send time, never later than the truth, whatever the clocks' offset. ok is
// false when the answer has no X-Zkgate-Time.
func onOurClock(sent time.Time, h http.Header, t time.Time) (_ time.Time, ok bool) {
	now, err := time.Parse(time.RFC3339Nano, h.Get("X-Zkgate-Time"))
	if err != nil {
		return time.Time{}, false
	}
	return sent.Add(t.Sub(now)), true
}

// heard takes the end of a drain, and where the lease moved, from an
// answer to a call made for the lease. A gateway without X-Zkgate-Time is
// taken to share this clock.
func (l *Lease) heard(sent time.Time, h http.Header) {
	if u := movedTo(h.Get("X-Zkgate-Lease-Moved-To")); u != nil {
		l.mu.Lock()
		if u.String() == l.c.base.String() {
			u = nil
		}
		l.movedTo = u
		l.mu.Unlock()
	}
	v := h.Get("X-Zkgate-Lease-Ends")
	if v == "" {
		return
	}
	ends, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return
	}
	at, ok := onOurClock(sent, h, ends)
	if !ok {
		at = sent.Add(ends.Sub(sent))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.drainEnd.IsZero() || at.Before(l.drainEnd) {
		l.drainEnd = at
		l.settle()
	}
}

// confirmed takes a lease's expires_at from an answer to a request sent at
// sent (sent + TTL from a gateway without X-Zkgate-Time).
func (l *Lease) confirmed(sent time.Time, h http.Header, expiresAt time.Time) {
	at, ok := onOurClock(sent, h, expiresAt)
	if !ok {
		at = sent.Add(l.ttl)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if at.After(l.promised) {
		l.promised = at
		l.settle()
	}
}

// settle sets the deadline from what the gateway said, and tells whoever
// follows it. l.mu is held.
func (l *Lease) settle() {
	d := l.promised
	if !l.drainEnd.IsZero() && l.drainEnd.Before(d) {
		d = l.drainEnd
	}
	if d.Equal(l.deadline) {
		return
	}
	l.deadline = d
	close(l.changed)
	l.changed = make(chan struct{})
	if l.expiry != nil {
		l.expiry.Reset(time.Until(d))
	}
}

// expire ends the lease when its deadline has come without a newer
// confirmation: it stops the keepalives and revokes the lease at the
// gateway in the background, so that what it held is freed now rather
// than after its TTL.
func (l *Lease) expire() {
	l.mu.Lock()
	last := l.lastErr
	if l.revoked || l.ctx.Err() != nil {
		l.mu.Unlock()
		return
	}
	if left := time.Until(l.deadline); left > 0 {
		if l.expiry != nil {
			l.expiry.Reset(left) // moved by a confirmation meanwhile
		}
		l.mu.Unlock()
		return
	}
	err := fmt.Errorf("%w: lease %s: no keepalive was confirmed before the deadline the gateway promised",
		ErrLeaseExpired, l.id)
	if last != nil {
		// Only its text: the end is the client's own, not an answer.
		err = fmt.Errorf("%w; the last failure: %v", err, last)
	}
	// Ended under l.mu: a second expire (the timer's, a grant's check of
	// the clock) finds it ended, and its caller sees Err set.
	l.end(err)
	forgotten := make(chan struct{})
	l.forgotten = forgotten
	l.mu.Unlock()
	l.stop()
	go func() {
		defer close(forgotten)
		// The gateway ends a silent lease after its TTL anyway.
		ctx, cancel := context.WithTimeout(context.Background(), max(l.ttl, time.Second))
		defer cancel()
		_ = l.revokeAtGateway(ctx)
	}()
}

// keepAlive extends the lease a third of the way from each keepalive's
// send time to the deadline it confirmed, until stopped or lost. sent is
// when the lease's creation was sent.
func (l *Lease) keepAlive(ctx context.Context, sent time.Time) {
	defer close(l.looped)
	for {
		l.mu.Lock()
		next := sent.Add(max(l.deadline.Sub(sent)/3, minKeepAlive))
		l.mu.Unlock()
		if !sleep(ctx, time.Until(next)) {
			return
		}
		var err error
		sent, err = l.extend(ctx)
		if ctx.Err() != nil {
			return // Revoke or the deadline stopped us, and end the lease themselves
		}
		if err != nil {
			l.end(err)
			return
		}
	}
}

// extend sends keepalives until one is confirmed (it returns its send
// time), the gateway says the lease is gone, or ctx ends (as it does at the
// deadline). A 503 confirms nothing: the gateway's ZooKeeper session is
// suspended, and what the lease holds is not vouched for.
func (l *Lease) extend(ctx context.Context) (time.Time, error) {
	path, err := pathOf("leases", l.id, "keepalive")
	if err != nil {
		return time.Time{}, err
	}
	for attempt := 0; ; attempt++ {
		deadline := l.Deadline()
		if !time.Now().Before(deadline) {
			l.expire() // its timer may not have run yet
			<-ctx.Done()
			return time.Time{}, ctx.Err()
		}
		actx, cancel := context.WithDeadline(ctx, deadline)
		resp, err := l.do(actx, request{method: http.MethodPost, path: path})
		cancel()
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
		if err == nil {
			var info LeaseInfo
			if err = resp.decode(&info); err == nil {
				l.confirmed(resp.sent, resp.header, info.ExpiresAt)
				return resp.sent, nil
			}
		}
		var problem *Error
		if errors.As(err, &problem) && problem.Code != "unavailable" && problem.Code != "too_many" {
			return time.Time{}, err // gone, not found, forbidden: final
		}
		l.mu.Lock()
		l.lastErr = err
		l.mu.Unlock()
		pause := backoff(attempt)
		if problem != nil && problem.RetryAfter > 0 {
			pause = problem.RetryAfter
		}
		if !sleep(ctx, max(min(pause, time.Until(deadline)), 0)) {
			return time.Time{}, ctx.Err()
		}
	}
}

// holdKey is what of a name a lease holds or is acquiring.
type holdKey struct {
	kind, name string
	mode       LockMode // a lock's
}

func (k holdKey) String() string {
	if k.mode != "" && k.mode != Exclusive {
		return fmt.Sprintf("%s %q (%s)", k.kind, k.name, k.mode)
	}
	return fmt.Sprintf("%s %q", k.kind, k.name)
}

// take marks k as held or being acquired by the lease, unless it already
// is: ErrAlreadyHeld then. A retry inside one call is not a second call.
func (l *Lease) take(k holdKey) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holding[k] {
		return fmt.Errorf("zkgate: lease %s already holds (or is acquiring) %s: %w", l.id, k, ErrAlreadyHeld)
	}
	l.holding[k] = true
	return nil
}

// acquire takes k for the lease (take) and posts body to path, waiting up
// to wait and retrying as Lock does, decoding the answer into grant; k is
// dropped again when that fails.
func (l *Lease) acquire(ctx context.Context, k holdKey, path string, wait time.Duration, body, grant any) error {
	return l.acquireAll(ctx, []holdKey{k}, path, wait, body, grant)
}

// acquireAll is acquire of every one of keys in one request (a set of
// locks): all are taken, or none.
func (l *Lease) acquireAll(ctx context.Context, keys []holdKey, path string, wait time.Duration, body, grant any) error {
	for i, k := range keys {
		if err := l.take(k); err != nil {
			l.drop(keys[:i]...)
			return err
		}
	}
	ctx, cancel := l.bind(ctx)
	defer cancel()
	resp, err := l.do(ctx, request{method: http.MethodPost, path: path, wait: wait, sendWait: true, retry: true, grant: true,
		body: body})
	if err == nil {
		err = resp.decode(grant)
	}
	if err != nil {
		l.drop(keys...)
	}
	return err
}

// drop frees keys once their acquire failed.
func (l *Lease) drop(keys ...holdKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		delete(l.holding, k)
	}
}

// dropAll frees what of name the lease held (every mode of a lock when mode
// is ""), once a release of it was sent: whatever its answer, the caller is
// done with the hold.
func (l *Lease) dropAll(kind, name string, mode LockMode) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.holding {
		if k.kind == kind && k.name == name && (mode == "" || k.mode == mode) {
			delete(l.holding, k)
		}
	}
}

// KeepAlive extends the lease id once, for clients that keep a lease alive
// themselves (a Lease from Grant does it on its own).
func (c *Client) KeepAlive(ctx context.Context, id string) (LeaseInfo, error) {
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

// LeaseInfo reads the lease id, with what it holds.
func (c *Client) LeaseInfo(ctx context.Context, id string) (LeaseInfo, error) {
	info, _, err := readLease(ctx, c.do, id)
	return info, err
}

// readLease reads the lease id through do (the client's, or the lease's
// own, which goes to its keeper), with the answer it came in.
func readLease(ctx context.Context, do func(context.Context, request) (*response, error), id string) (LeaseInfo, *response, error) {
	var info LeaseInfo
	path, err := pathOf("leases", id)
	if err != nil {
		return info, nil, err
	}
	resp, err := do(ctx, request{method: http.MethodGet, path: path, retry: true})
	if err != nil {
		return info, nil, err
	}
	return info, resp, resp.decode(&info)
}

// Leases lists the live leases of every gateway, oldest first, reading
// every page of the gateway's list (or as many as Limit allows).
func (c *Client) Leases(ctx context.Context, opts ...ListOption) ([]LeaseInfo, error) {
	return listAll[LeaseInfo](ctx, c, "leases", "leases", nil, opts)
}

// RevokeLease ends the lease id at the gateway, which releases all it held
// before answering. A repeat after a lost answer is recognised: the
// gateway's "revoked" is success.
func (c *Client) RevokeLease(ctx context.Context, id string) error { return revokeLease(ctx, c.do, id) }

// revokeLease ends the lease id through do (the client's, or the lease's
// own, which goes to its keeper); the gateway's lease_expired for a repeat
// after a lost answer is success.
func revokeLease(ctx context.Context, do func(context.Context, request) (*response, error), id string) error {
	path, err := pathOf("leases", id)
	if err != nil {
		return err
	}
	_, err = do(ctx, request{method: http.MethodDelete, path: path, retry: true, okOnRetry: []string{"lease_expired"}})
	return err
}
