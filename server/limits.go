package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/handlers"
	"github.com/zkgate/zkgate/recipes"
)

// Limits are the caps that keep one client, or all of them, from taking the
// gateway down. Each is a flag; each is answered with 429 too_many and
// Retry-After, before anything is spent on the request.
//
// The caps "per token" are per client (see client): per token with tokens
// on, per client address with tokens off.
type Limits struct {
	// MaxLeases caps the live leases of this gateway, and MaxLeasesPerToken
	// those of one client.
	MaxLeases, MaxLeasesPerToken int
	// LeaseRate caps the new leases of one client per second, with bursts
	// of as many.
	LeaseRate float64
	// MaxWaiters caps the requests waiting at once (any request with
	// ?wait= above 0, blocking reads included), MaxWaitersPerToken those of
	// one client, and MaxWaitersPerName those on one lock (or semaphore,
	// election, barrier, queue).
	MaxWaiters, MaxWaitersPerToken, MaxWaitersPerName int
	// MaxRequestsPerToken caps the other requests under way at once of one
	// client.
	MaxRequestsPerToken int
	// FanOutRate paces the reads of one client that ask every gateway (the
	// lease list, the contention figures; see rule.fansOut): so many a
	// second, in bursts of twice as many. One past that waits its turn, up
	// to maxPace; past that, 429.
	FanOutRate float64
}

// maxPace is the longest a read that asks every gateway waits for its turn
// (see Limits.FanOutRate): so one client has at most FanOutRate of them
// waiting, each a goroutine and a timer, and the rest get 429 at once.
const maxPace = time.Second

// retryCount is what Retry-After says of a count limit: a slot may free
// any moment.
const retryCount = time.Second

// client is who a request counts against: the token it carries, or, with
// no token (tokens off, or an open route), the address it comes from. One
// address may be many clients (a NAT, a reverse proxy: X-Forwarded-For is
// not believed, anyone can send it). The zero client is nobody's: no
// per-client cap applies to it.
type client struct {
	token string // the token's name
	addr  string // the client's IP address, when token is ""
}

// clientOf is the client of a request: its caller's token, or its address.
func clientOf(r *http.Request, caller *auth.Caller) client {
	if caller != nil {
		return client{token: caller.Name}
	}
	return client{addr: hostOf(r.RemoteAddr)}
}

// String names the client in a problem's detail.
func (c client) String() string {
	if c.token != "" {
		return "token " + strconv.Quote(c.token)
	}
	return "client address " + c.addr
}

// limits enforces Limits on the requests of one gateway.
type limits struct {
	cfg Limits
	now func() time.Time

	// Entries that drop to zero are deleted, so the maps of counts stay
	// bounded by the caps; buckets that have filled up again are swept
	// (see bucketOf).
	mu         sync.Mutex
	waiting    int
	perName    map[string]int // "kind/name" -> waiting requests
	perClient  map[client]int // waiting requests
	requests   map[client]int // requests under way that do not wait
	busy       int            // the sum of requests
	leases     int
	perOwner   map[client]int // live leases
	leaseRates rates          // --lease-rate
	fanOuts    rates          // --fan-out-rate

	refused *prometheus.CounterVec // 429s by limit
}

func newLimits(cfg Limits) *limits {
	return &limits{cfg: cfg, now: time.Now, perName: map[string]int{}, perClient: map[client]int{}, requests: map[client]int{},
		perOwner: map[client]int{}, leaseRates: newRates(cfg.LeaseRate, max(cfg.LeaseRate, 1)),
		fanOuts: newRates(cfg.FanOutRate, max(2*cfg.FanOutRate, 1)),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zkgate_limited_total", Help: "Requests refused with 429 too_many, by the limit reached.",
		}, []string{"limit"})}
}

// register adds the limits' metrics to reg: the refusals, the waiting
// requests, and the caps themselves, so that alerts can say "near the cap".
func (l *limits) register(reg prometheus.Registerer) {
	caps := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "zkgate_limit", Help: "The caps, by limit (named as in zkgate_limited_total); lease-rate is new leases a second.",
	}, []string{"limit"})
	for name, v := range map[string]float64{
		"max-leases": float64(l.cfg.MaxLeases), "max-leases-per-token": float64(l.cfg.MaxLeasesPerToken), "lease-rate": l.cfg.LeaseRate,
		"max-waiters": float64(l.cfg.MaxWaiters), "max-waiters-per-name": float64(l.cfg.MaxWaitersPerName),
		"fan-out-rate": l.cfg.FanOutRate,
	} {
		caps.WithLabelValues(name).Set(v)
	}
	reg.MustRegister(caps, l.refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "zkgate_waiting_requests", Help: "Requests with ?wait= above 0 under way, counted against --max-waiters.",
	}, func() float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return float64(l.waiting)
	}), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "zkgate_requests_under_way", Help: "Other requests under way (a scrape counts itself), counted against --max-requests-per-token.",
	}, func() float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return float64(l.busy)
	}))
}

// refuse counts e and returns it.
func (l *limits) refuse(e *handlers.LimitError) error {
	l.refused.WithLabelValues(e.Limit).Inc()
	return e
}

// slot is what a request holds of the limits while it runs; release gives
// it back. A value, not a closure: every request takes one.
type slot struct {
	held    bool
	client  client
	waiting string // "kind/name" of a waiting request; "" for any other
}

// admit counts a request of c against the caps: one that may wait (a
// route that takes ?wait=, with a wait above 0) against the waiter caps,
// any other against c's cap on requests under way.
func (l *limits) admit(r *http.Request, c client, waiter bool, kind, name string) (slot, error) {
	if waiter {
		if w := r.URL.Query().Get("wait"); w != "" {
			if d, err := time.ParseDuration(w); err == nil && d > 0 {
				return l.admitWaiter(c, kind, name)
			} // else: the handler answers a bad wait
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.requests[c]; n >= l.cfg.MaxRequestsPerToken {
		return slot{}, l.refuse(&handlers.LimitError{Limit: "max-requests-per-token", Max: float64(l.cfg.MaxRequestsPerToken), RetryAfter: retryCount,
			Detail: fmt.Sprintf("%s has %d requests under way, the most one may have (--max-requests-per-token); wait for them to end", c, n)})
	}
	l.requests[c]++
	l.busy++
	return slot{held: true, client: c}, nil
}

// admitWaiter counts a request that waits against the waiter caps.
func (l *limits) admitWaiter(c client, kind, name string) (slot, error) {
	key := kind + "/" + name
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.perClient[c]; c != (client{}) && n >= l.cfg.MaxWaitersPerToken {
		return slot{}, l.refuse(&handlers.LimitError{Limit: "max-waiters-per-token", Max: float64(l.cfg.MaxWaitersPerToken), RetryAfter: retryCount,
			Detail: fmt.Sprintf("%s has %d requests waiting already, the most one may have (--max-waiters-per-token)", c, n)})
	}
	if l.waiting >= l.cfg.MaxWaiters {
		return slot{}, l.refuse(&handlers.LimitError{Limit: "max-waiters", Max: float64(l.cfg.MaxWaiters), RetryAfter: retryCount,
			Detail: fmt.Sprintf("%d requests are waiting already, the most this gateway lets wait (--max-waiters); retry later or on another gateway", l.waiting)})
	}
	if name != "*" && l.perName[key] >= l.cfg.MaxWaitersPerName {
		return slot{}, l.refuse(&handlers.LimitError{Limit: "max-waiters-per-name", Max: float64(l.cfg.MaxWaitersPerName), RetryAfter: retryCount,
			Detail: fmt.Sprintf("%d requests are waiting on %s %q already, the most this gateway lets wait on one (--max-waiters-per-name)", l.perName[key], kind, name)})
	}
	l.waiting++
	l.perName[key]++
	l.perClient[c]++
	return slot{held: true, client: c, waiting: key}, nil
}

// admitNames counts a waiting request, admitted already (its slot counts
// it against the other caps), against the per-name cap of each of names of
// kind: all of them, or none when one is full. done gives them back.
func (l *limits) admitNames(kind string, names []string) (done func(), err error) {
	keys := make([]string, 0, len(names))
	seen := map[string]bool{}
	for _, name := range names {
		if key := kind + "/" + name; !seen[key] {
			seen[key] = true
			keys = append(keys, key)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, key := range keys {
		if n := l.perName[key]; n >= l.cfg.MaxWaitersPerName {
			return nil, l.refuse(&handlers.LimitError{Limit: "max-waiters-per-name", Max: float64(l.cfg.MaxWaitersPerName), RetryAfter: retryCount,
				Detail: fmt.Sprintf("%d requests are waiting on %s %q already, the most this gateway lets wait on one (--max-waiters-per-name)", n, kind, strings.TrimPrefix(key, kind+"/"))})
		}
	}
	for _, key := range keys {
		l.perName[key]++
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, key := range keys {
			if l.perName[key]--; l.perName[key] <= 0 {
				delete(l.perName, key)
			}
		}
	}, nil
}

// release gives s back.
func (l *limits) release(s slot) {
	if !s.held {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.waiting != "" {
		l.waiting--
		if l.perName[s.waiting]--; l.perName[s.waiting] <= 0 {
			delete(l.perName, s.waiting)
		}
		if l.perClient[s.client]--; l.perClient[s.client] <= 0 {
			delete(l.perClient, s.client)
		}
		return
	}
	l.busy--
	if l.requests[s.client]--; l.requests[s.client] <= 0 {
		delete(l.requests, s.client)
	}
}

// admitLease reserves a lease for c against the lease caps and c's rate;
// release gives it back.
func (l *limits) admitLease(c client) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leases >= l.cfg.MaxLeases {
		return nil, l.refuse(&handlers.LimitError{Limit: "max-leases", Max: float64(l.cfg.MaxLeases), RetryAfter: retryCount,
			Detail: fmt.Sprintf("this gateway has %d live leases, its most (--max-leases); revoke leases you no longer need, or retry later", l.leases)})
	}
	if c != (client{}) {
		if n := l.perOwner[c]; n >= l.cfg.MaxLeasesPerToken {
			return nil, l.refuse(&handlers.LimitError{Limit: "max-leases-per-token", Max: float64(l.cfg.MaxLeasesPerToken), RetryAfter: retryCount,
				Detail: fmt.Sprintf("%s has %d live leases, the most one may have (--max-leases-per-token); revoke leases it no longer needs", c, n)})
		}
		now := l.now()
		if wait, _ := l.leaseRates.take(c, now, 0); wait > 0 {
			return nil, l.refuse(&handlers.LimitError{Limit: "lease-rate", Max: l.cfg.LeaseRate, RetryAfter: wait,
				Detail: fmt.Sprintf("%s makes leases faster than %g a second (--lease-rate); reuse a lease for many acquires", c, l.cfg.LeaseRate)})
		}
		l.perOwner[c]++
	}
	l.leases++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.leases--
		if c != (client{}) {
			if l.perOwner[c]--; l.perOwner[c] <= 0 {
				delete(l.perOwner, c)
			}
		}
	}, nil
}

// pace waits for c's turn at a read that asks every gateway (see
// Limits.FanOutRate), or refuses it: 429 fan-out-rate, when its turn is
// more than maxPace away. Counted before anything is spent on the read; a
// wait that ctx ends answers the end.
func (l *limits) pace(ctx context.Context, c client) error {
	l.mu.Lock()
	wait, ok := l.fanOuts.take(c, l.now(), maxPace)
	l.mu.Unlock()
	if !ok {
		return l.refuse(&handlers.LimitError{Limit: "fan-out-rate", Max: l.cfg.FanOutRate, RetryAfter: wait - maxPace,
			Detail: fmt.Sprintf("%s reads the lists of every gateway faster than %g a second (--fan-out-rate), and %s are waiting their turn already; "+
				"read this gateway's own (?scope=gateway), or less often", c, l.cfg.FanOutRate, waitingOf(l.cfg.FanOutRate))})
	}
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return &recipes.Error{Code: recipes.CodeTimeout, Detail: "the request ended while it waited its turn (--fan-out-rate)", Err: context.Cause(ctx)}
	}
}

// waitingOf says how many reads a client has waiting at most at rate.
func waitingOf(rate float64) string {
	if n := rate * maxPace.Seconds(); n >= 2 {
		return fmt.Sprintf("%g", n)
	}
	return "some"
}

// rates are the token buckets of one rate, one per client.
type rates struct {
	rate, burst float64
	buckets     map[client]*bucket
	sweepAbove  int       // sweep buckets when they are more
	sweptAt     time.Time // or a second after the last sweep
}

func newRates(rate, burst float64) rates {
	return rates{rate: rate, burst: burst, buckets: map[client]*bucket{}, sweepAbove: minSweep}
}

// take spends one of c's tokens at now and says how long until it is
// there: 0 when c has one. A token up to ahead in the future is taken too
// (ok; the caller waits for it), so that the waits of one client queue up;
// one further is not (!ok), and wait says how far it is.
func (rs *rates) take(c client, now time.Time, ahead time.Duration) (wait time.Duration, ok bool) {
	b := rs.bucketOf(c, now)
	b.tokens = min(rs.burst, b.tokens+now.Sub(b.at).Seconds()*rs.rate)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	wait = time.Duration((1 - b.tokens) / rs.rate * float64(time.Second))
	if wait > ahead {
		return wait, false
	}
	b.tokens--
	return wait, true
}

// minSweep is the number of buckets below which none is swept.
const minSweep = 1024

// bucketOf returns c's bucket. A bucket that has filled up again is the
// same as a new one, so those are dropped once there are more than
// minSweep buckets, at most once a second unless they double: buckets stay
// about as many as the clients that used them within the last second or
// so (burst/rate), however many addresses come and go.
func (rs *rates) bucketOf(c client, now time.Time) *bucket {
	if b := rs.buckets[c]; b != nil {
		return b
	}
	if n := len(rs.buckets); n >= rs.sweepAbove || n > minSweep && now.Sub(rs.sweptAt) >= time.Second {
		for k, b := range rs.buckets {
			if b.tokens+now.Sub(b.at).Seconds()*rs.rate >= rs.burst {
				delete(rs.buckets, k)
			}
		}
		rs.sweptAt, rs.sweepAbove = now, max(minSweep, 2*len(rs.buckets))
	}
	b := &bucket{tokens: rs.burst, at: now}
	rs.buckets[c] = b
	return b
}

// bucket is a token bucket: tokens (below 0 while waits are queued on it)
// as of at.
type bucket struct {
	tokens float64
	at     time.Time
}

// limitedLeases is the lease table with the lease limits in front of it.
type limitedLeases struct {
	*recipes.Leases
	lim *limits
}

// leaseClientKey carries, in the context of a request without a token
// that may make a lease, its client (see withLeaseClient).
type leaseClientKey struct{}

// withLeaseClient tells Grant who a request without a token is.
func withLeaseClient(ctx context.Context, c client) context.Context {
	return context.WithValue(ctx, leaseClientKey{}, c)
}

// Grant reserves the lease against the limits of its owner (the token;
// without one, the client the front door put in ctx) first; the
// reservation is given back when the lease ends (its context is cancelled
// when it starts ending, whatever the reason), or at once if it is not
// made.
func (t limitedLeases) Grant(ctx context.Context, spec recipes.LeaseSpec) (*recipes.Lease, error) {
	c := client{token: spec.Owner}
	if spec.Owner == "" {
		c, _ = ctx.Value(leaseClientKey{}).(client)
	}
	release, err := t.lim.admitLease(c)
	if err != nil {
		return nil, err
	}
	l, err := t.Leases.Grant(ctx, spec)
	if err != nil {
		release()
		return nil, err
	}
	context.AfterFunc(l.Context(), release)
	return l, nil
}
