package server

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/zkgate/zkgate/dashboard"
	"github.com/zkgate/zkgate/handlers"
)

// newDashboard makes the dashboard of the gateway d serves: what it needs
// of the gateway, and nothing more.
func newDashboard(d Deps) *dashboard.Dashboard {
	cfg := dashboard.Config{Service: d.Service, ZooKeeper: d.ZooKeeper, ZooKeeperTLS: d.ZooKeeperTLS, Version: Version, Log: d.Log, Revoked: d.auth.Revoked,
		HideSessions: d.auth.Enabled(), Problems: dashboard.Problems{Write: handlers.WriteError, StatusOf: handlers.StatusOf}}
	if d.API != nil && d.API.ContentionFigures != nil {
		cfg.Contention = d.API
	}
	if d.API != nil {
		// The API's own handlers: the dashboard adds no path of its own to
		// end a lease or a hold.
		api := d.API
		cfg.Actions = &dashboard.Actions{Revoke: api.RevokeLease(), Audit: api.Audit, Release: map[string]http.Handler{
			"lock": api.ReleaseLock(), "semaphore": api.ReleaseSemaphore(), "election": api.Resign(), "claim": api.Nack()}}
	}
	if d.Metrics != nil {
		cfg.Metrics, cfg.Counts = d.Metrics.Registry, d.Metrics.dashboardCounts
	}
	return dashboard.New(cfg)
}

// dashboardCounts reads the counters of the dashboard's rates: the API
// requests served (the routes under /v1/), and the grants by kind.
func (m *Metrics) dashboardCounts() (api float64, grants map[string]float64) {
	for _, s := range counterValues(m.requests) {
		if strings.HasPrefix(s.labels["route"], "/v1/") {
			api += s.value
		}
	}
	grants = map[string]float64{}
	for _, s := range counterValues(m.grants) {
		grants[s.labels["kind"]] += s.value
	}
	return api, grants
}

// series is one series of a counter vector.
type series struct {
	labels map[string]string
	value  float64
}

// counterValues reads every series of a counter vector.
func counterValues(c prometheus.Collector) []series {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var out []series
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) != nil || pb.Counter == nil {
			continue
		}
		s := series{labels: map[string]string{}, value: pb.Counter.GetValue()}
		for _, l := range pb.Label {
			s.labels[l.GetName()] = l.GetValue()
		}
		out = append(out, s)
	}
	return out
}
