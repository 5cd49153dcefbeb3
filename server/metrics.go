package server

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/zkgate/zkgate/recipes"
)

// Metrics are the gateway's Prometheus metrics, on a registry of its own.
type Metrics struct {
	Registry *prometheus.Registry

	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	grants   *prometheus.CounterVec
	waitTime *prometheus.HistogramVec
	holdTime *prometheus.HistogramVec
	waiters  *prometheus.GaugeVec
	byName   *nameHistograms
}

// The buckets of the wait and hold histograms, by kind and by name.
var (
	waitBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	holdBuckets = []float64{.001, .01, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}
)

// NewMetrics registers the HTTP and recipe metrics; topNames is how many
// names have wait and hold histograms of their own (--metrics-names).
func NewMetrics(topNames int) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		Registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zkgate_http_requests_total", Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "zkgate_http_request_duration_seconds", Help: "HTTP request latency by route and method (waits included).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"route", "method"}),
		grants: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zkgate_grants_total", Help: "Grants made, by kind of primitive.",
		}, []string{"kind"}),
		waitTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "zkgate_wait_seconds", Help: "Time from request to grant, by kind.", Buckets: waitBuckets,
		}, []string{"kind"}),
		holdTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "zkgate_hold_seconds", Help: "Time from grant to release, by kind.", Buckets: holdBuckets,
		}, []string{"kind"}),
		waiters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "zkgate_waiters", Help: "Requests waiting for a grant now, by kind.",
		}, []string{"kind"}),
	}
	m.byName = newNameHistograms(topNames)
	reg.MustRegister(m.requests, m.latency, m.grants, m.waitTime, m.holdTime, m.waiters, m.byName)
	return m
}

// observeReadiness exports what /readyz says, for alerts: a gateway that is
// up but not ready (its session not live, or draining) gets no traffic.
func (m *Metrics) observeReadiness(sess *recipes.Session, dr *drain) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "zkgate_ready", Help: "1 while /readyz answers 200: the ZooKeeper session is live and the gateway is not draining.",
	}, func() float64 {
		st, _, _ := sess.Status()
		if _, draining := dr.until(); isReady(st, draining) {
			return 1
		}
		return 0
	}))
}

// Granted implements recipes.Metrics.
func (m *Metrics) Granted(kind string, waited time.Duration) {
	m.grants.WithLabelValues(kind).Inc()
	m.waitTime.WithLabelValues(kind).Observe(waited.Seconds())
}

// Released implements recipes.Metrics.
func (m *Metrics) Released(kind string, held time.Duration) {
	m.holdTime.WithLabelValues(kind).Observe(held.Seconds())
}

// Waited implements recipes.Metrics.
func (m *Metrics) Waited(kind, name string, d time.Duration) { m.byName.observe(kind, name, d, true) }

// Held implements recipes.Metrics.
func (m *Metrics) Held(kind, name string, d time.Duration) { m.byName.observe(kind, name, d, false) }

// Waiting implements recipes.Metrics.
func (m *Metrics) Waiting(kind string, delta int) {
	m.waiters.WithLabelValues(kind).Add(float64(delta))
}

// observeService exports the session and lease state of svc.
func (m *Metrics) observeService(svc *recipes.Service) {
	sess := svc.Session()
	for _, st := range []recipes.State{recipes.StateConnecting, recipes.StateLive, recipes.StateSuspended, recipes.StateLost, recipes.StateClosed} {
		st := st
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "zkgate_zk_session_state", Help: "1 for the ZooKeeper session's current state.",
			ConstLabels: prometheus.Labels{"state": st.String()},
		}, func() float64 {
			if cur, _, _ := sess.Status(); cur == st {
				return 1
			}
			return 0
		}))
	}
	counter := func(name, help string, fn func() int64) {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(fn()) }))
	}
	counter("zkgate_zk_reconnects_total", "Suspended ZooKeeper sessions that reconnected.", func() int64 { return sess.Stats().Reconnects })
	counter("zkgate_zk_sessions_total", "ZooKeeper sessions established.", func() int64 { return sess.Stats().NewSessions })
	counter("zkgate_zk_session_losses_total", "ZooKeeper sessions expired or given up.", func() int64 { return sess.Stats().Losses })
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "zkgate_zk_round_trip_seconds", Help: "How long ZooKeeper took to answer the latest heartbeat (sent a third of a session timeout apart).",
	}, func() float64 { return sess.Stats().RoundTrip.Seconds() }))
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "zkgate_leases", Help: "Live leases on this gateway.",
	}, func() float64 { return float64(svc.Leases.Count()) }))
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "zkgate_watched_paths", Help: "Paths the watch cache keeps one ZooKeeper watch on.",
	}, func() float64 { return float64(svc.WatchedPaths()) }))
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "zkgate_zk_watches", Help: "ZooKeeper watches the gateway's session keeps (and sets again after a reconnect).",
	}, func() float64 { return float64(svc.ZKWatches()) }))
	for reason, fn := range map[string]func(recipes.LeaseStats) int64{
		recipes.EndExpired:     func(s recipes.LeaseStats) int64 { return s.Expired },
		recipes.EndRevoked:     func(s recipes.LeaseStats) int64 { return s.Revoked },
		recipes.EndSessionLost: func(s recipes.LeaseStats) int64 { return s.Lost },
	} {
		fn := fn
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "zkgate_leases_ended_total", Help: "Leases ended, by reason.", ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 { return float64(fn(svc.Leases.Stats())) }))
	}
	counter("zkgate_leases_created_total", "Leases created.", func() int64 { return svc.Leases.Stats().Created })
	contention := svc.Contention()
	counter("zkgate_deadlocks_total", "Deadlocks this gateway broke, ending one wait of each (409 deadlock).", contention.DeadlocksBroken)
	m.byName.busiest = func() []recipes.NameFigures { return contention.Figures(nameWindow, nil) }
}

// nameWindow is the window over which the names with histograms of their
// own are the busiest.
const nameWindow = 15 * time.Minute

// otherNames is the name label of the histograms of every name without
// its own: no name of a lock or semaphore is "*".
const otherNames = "*"

// nameHistograms are the wait and hold histograms of locks and semaphores
// by name: the top names by time waited over the last 15 minutes (picked
// again at each scrape) have their own, and the others add up under
// name="*", so that /metrics stays small however many names there are. A
// name picked has its series from then on, counting from 0; one dropped
// has none, and counts under "*" again. Every series only grows.
type nameHistograms struct {
	top      int
	waitDesc *prometheus.Desc
	holdDesc *prometheus.Desc
	busiest  func() []recipes.NameFigures // nil: no name has its own

	mu    sync.Mutex
	shown map[nameLabel]*nameSeries
	other map[string]*nameSeries // by kind
}

type nameLabel struct{ kind, name string }

type nameSeries struct{ wait, hold histogramCounts }

// histogramCounts are a Prometheus histogram's counts: per upper bound
// (not cumulative), count and sum.
type histogramCounts struct {
	buckets []uint64
	count   uint64
	sum     float64
}

func (h *histogramCounts) observe(v float64, bounds []float64) {
	if h.buckets == nil {
		h.buckets = make([]uint64, len(bounds))
	}
	if i, _ := slices.BinarySearch(bounds, v); i < len(bounds) {
		h.buckets[i]++
	}
	h.count++
	h.sum += v
}

func (h *histogramCounts) metric(desc *prometheus.Desc, bounds []float64, labels ...string) prometheus.Metric {
	cumulative := make(map[float64]uint64, len(bounds))
	var n uint64
	for i, b := range bounds {
		if h.buckets != nil {
			n += h.buckets[i]
		}
		cumulative[b] = n
	}
	return prometheus.MustNewConstHistogram(desc, h.count, h.sum, cumulative, labels...)
}

func newNameHistograms(top int) *nameHistograms {
	return &nameHistograms{top: top,
		waitDesc: prometheus.NewDesc("zkgate_name_wait_seconds",
			"Time waited for a lock or a semaphore, whatever the outcome, by name: the busiest names (--metrics-names) each, the others under name=\"*\".",
			[]string{"kind", "name"}, nil),
		holdDesc: prometheus.NewDesc("zkgate_name_hold_seconds",
			"Time a lock or a semaphore was held, by name: the busiest names (--metrics-names) each, the others under name=\"*\".",
			[]string{"kind", "name"}, nil),
		shown: map[nameLabel]*nameSeries{},
		other: map[string]*nameSeries{recipes.KindLock: {}, recipes.KindSemaphore: {}}}
}

func (n *nameHistograms) observe(kind, name string, d time.Duration, wait bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s, ok := n.shown[nameLabel{kind, name}]
	if !ok {
		if s, ok = n.other[kind]; !ok {
			return
		}
	}
	if wait {
		s.wait.observe(d.Seconds(), waitBuckets)
	} else {
		s.hold.observe(d.Seconds(), holdBuckets)
	}
}

// Describe implements prometheus.Collector.
func (n *nameHistograms) Describe(ch chan<- *prometheus.Desc) {
	ch <- n.waitDesc
	ch <- n.holdDesc
}

// Collect implements prometheus.Collector: it picks the names shown, then
// sends their series and the others'.
func (n *nameHistograms) Collect(ch chan<- prometheus.Metric) {
	var top []recipes.NameFigures
	if n.busiest != nil && n.top > 0 {
		top = slices.DeleteFunc(n.busiest(), func(f recipes.NameFigures) bool { return f.Waited.Count+f.Held.Count == 0 })
		slices.SortFunc(top, func(a, b recipes.NameFigures) int {
			return cmp.Or(-cmp.Compare(a.Waited.Sum, b.Waited.Sum), -cmp.Compare(a.Held.Sum, b.Held.Sum), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
		})
		top = top[:min(len(top), n.top)]
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	picked := map[nameLabel]bool{}
	for _, f := range top {
		k := nameLabel{f.Kind, f.Name}
		picked[k] = true
		if _, ok := n.shown[k]; !ok {
			n.shown[k] = &nameSeries{}
		}
	}
	for k := range n.shown {
		if !picked[k] {
			delete(n.shown, k)
		}
	}
	send := func(k nameLabel, s *nameSeries) {
		ch <- s.wait.metric(n.waitDesc, waitBuckets, k.kind, k.name)
		ch <- s.hold.metric(n.holdDesc, holdBuckets, k.kind, k.name)
	}
	for k, s := range n.shown {
		send(k, s)
	}
	for kind, s := range n.other {
		send(nameLabel{kind, otherNames}, s)
	}
}
