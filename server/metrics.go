package server

import (
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
}

// NewMetrics registers the HTTP and recipe metrics.
func NewMetrics() *Metrics {
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
			Name: "zkgate_wait_seconds", Help: "Time from request to grant, by kind.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"kind"}),
		holdTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "zkgate_hold_seconds", Help: "Time from grant to release, by kind.",
			Buckets: []float64{.001, .01, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"kind"}),
		waiters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "zkgate_waiters", Help: "Requests waiting for a grant now, by kind.",
		}, []string{"kind"}),
	}
	reg.MustRegister(m.requests, m.latency, m.grants, m.waitTime, m.holdTime, m.waiters)
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
}
