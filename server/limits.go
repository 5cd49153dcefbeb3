package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/zkgate/zkgate/handlers"
	"github.com/zkgate/zkgate/recipes"
)

// Limits are the caps that keep one client, or all of them, from taking the
// gateway down. Each is a flag; each is answered with 429 too_many and
// Retry-After, before anything is spent on the request.
type Limits struct {
	// MaxLeases caps the live leases of this gateway, and MaxLeasesPerToken
	// those of one token (tokens on only).
	MaxLeases, MaxLeasesPerToken int
	// LeaseRate caps the new leases of one token per second (tokens on
	// only), with bursts of as many.
	LeaseRate float64
	// MaxWaiters caps the requests waiting at once (any request with
	// ?wait= above 0, blocking reads included), and MaxWaitersPerName those
	// on one lock (or semaphore, election, barrier, queue).
	MaxWaiters, MaxWaitersPerName int
}

// retryCount is what Retry-After says of a count limit: a slot may free
// any moment.
const retryCount = time.Second

// limits enforces Limits on the requests of one gateway.
type limits struct {
	cfg Limits
	now func() time.Time

	// Entries that drop to zero are deleted, so perName and perOwner stay
	// bounded by the caps; buckets holds one entry per token name.
	mu       sync.Mutex
	waiting  int
	perName  map[string]int // "kind/name" -> waiting requests
	leases   int
	perOwner map[string]int // token name -> live leases
	buckets  map[string]*bucket

	refused *prometheus.CounterVec // 429s by limit
}

func newLimits(cfg Limits) *limits {
	return &limits{cfg: cfg, now: time.Now, perName: map[string]int{}, perOwner: map[string]int{}, buckets: map[string]*bucket{},
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
	} {
		caps.WithLabelValues(name).Set(v)
	}
	reg.MustRegister(caps, l.refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "zkgate_waiting_requests", Help: "Requests with ?wait= above 0 under way, counted against --max-waiters.",
	}, func() float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return float64(l.waiting)
	}))
}

// refuse counts e and returns it.
func (l *limits) refuse(e *handlers.LimitError) error {
	l.refused.WithLabelValues(e.Limit).Inc()
	return e
}

// admitWaiter counts a request that may wait (?wait= above 0) against the
// waiter caps; release uncounts it. Other requests pass uncounted.
func (l *limits) admitWaiter(r *http.Request, kind, name string) (release func(), err error) {
	w := r.URL.Query().Get("wait")
	if w == "" {
		return func() {}, nil
	}
	d, perr := time.ParseDuration(w)
	if perr != nil || d <= 0 {
		return func() {}, nil // the handler answers a bad wait
	}
	key := kind + "/" + name
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting >= l.cfg.MaxWaiters {
		return nil, l.refuse(&handlers.LimitError{Limit: "max-waiters", Max: float64(l.cfg.MaxWaiters), RetryAfter: retryCount,
			Detail: fmt.Sprintf("%d requests are waiting already, the most this gateway lets wait (--max-waiters); retry later or on another gateway", l.waiting)})
	}
	if name != "*" && l.perName[key] >= l.cfg.MaxWaitersPerName {
		return nil, l.refuse(&handlers.LimitError{Limit: "max-waiters-per-name", Max: float64(l.cfg.MaxWaitersPerName), RetryAfter: retryCount,
			Detail: fmt.Sprintf("%d requests are waiting on %s %q already, the most this gateway lets wait on one (--max-waiters-per-name)", l.perName[key], kind, name)})
	}
	l.waiting++
	l.perName[key]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.waiting--
		if l.perName[key]--; l.perName[key] <= 0 {
			delete(l.perName, key)
		}
	}, nil
}

// admitLease reserves a lease for owner against the lease caps and the
// owner's rate; release gives it back.
func (l *limits) admitLease(owner string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leases >= l.cfg.MaxLeases {
		return nil, l.refuse(&handlers.LimitError{Limit: "max-leases", Max: float64(l.cfg.MaxLeases), RetryAfter: retryCount,
			Detail: fmt.Sprintf("this gateway has %d live leases, its most (--max-leases); revoke leases you no longer need, or retry later", l.leases)})
	}
	if owner != "" {
		if n := l.perOwner[owner]; n >= l.cfg.MaxLeasesPerToken {
			return nil, l.refuse(&handlers.LimitError{Limit: "max-leases-per-token", Max: float64(l.cfg.MaxLeasesPerToken), RetryAfter: retryCount,
				Detail: fmt.Sprintf("token %q has %d live leases, the most one token may have (--max-leases-per-token); revoke leases it no longer needs", owner, n)})
		}
		b := l.buckets[owner]
		if b == nil {
			b = &bucket{tokens: burst(l.cfg.LeaseRate), at: l.now()}
			l.buckets[owner] = b
		}
		if wait := b.take(l.cfg.LeaseRate, l.now()); wait > 0 {
			return nil, l.refuse(&handlers.LimitError{Limit: "lease-rate", Max: l.cfg.LeaseRate, RetryAfter: wait,
				Detail: fmt.Sprintf("token %q makes leases faster than %g a second (--lease-rate); reuse a lease for many acquires", owner, l.cfg.LeaseRate)})
		}
		l.perOwner[owner]++
	}
	l.leases++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.leases--
		if owner != "" {
			if l.perOwner[owner]--; l.perOwner[owner] <= 0 {
				delete(l.perOwner, owner)
			}
		}
	}, nil
}

// bucket is a token bucket of rate tokens a second, holding at most
// burst(rate): a second's worth, and at least one.
type bucket struct {
	tokens float64
	at     time.Time
}

func burst(rate float64) float64 { return max(rate, 1) }

// take takes one token, or says how long until there is one.
func (b *bucket) take(rate float64, now time.Time) time.Duration {
	b.tokens = min(burst(rate), b.tokens+now.Sub(b.at).Seconds()*rate)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / rate * float64(time.Second))
}

// limitedLeases is the lease table with the lease limits in front of it.
type limitedLeases struct {
	*recipes.Leases
	lim *limits
}

// Grant reserves the lease against the limits first; the reservation is
// given back when the lease ends (its context is cancelled when it starts
// ending, whatever the reason), or at once if it is not made.
func (t limitedLeases) Grant(ctx context.Context, spec recipes.LeaseSpec) (*recipes.Lease, error) {
	release, err := t.lim.admitLease(spec.Owner)
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
