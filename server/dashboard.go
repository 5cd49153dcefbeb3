package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/a-h/templ"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/zkgate/zkgate/dashboard"
)

// newDashboard makes the dashboard of the gateway d serves: what it needs
// of the gateway, and nothing more.
func newDashboard(d Deps) *dashboard.Dashboard {
	cfg := dashboard.Config{Service: d.Service, ZooKeeper: d.ZooKeeper, Version: Version, Log: d.Log, Revoked: d.auth.revoked}
	if d.API != nil && d.API.ContentionFigures != nil {
		cfg.Contention = d.API
	}
	if d.Metrics != nil {
		cfg.Metrics, cfg.Counts = d.Metrics.Registry, d.Metrics.dashboardCounts
	}
	return dashboard.New(cfg)
}

// writePage answers with a page under the dashboard's
// Content-Security-Policy, as every page of the gateway is.
func writePage(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	dashboard.WritePage(w, r, status, c)
}

// revoked watches the token r carries, until ctx ends: the channel is
// closed once a reload of the tokens file removes the token or changes
// what it grants; nil while tokens are off. A dashboard's stream is closed
// then: it would otherwise show everything to a token no longer allowed
// to see it for as long as it stays open.
func (a *auth) revoked(ctx context.Context, r *http.Request) <-chan struct{} {
	if !a.enabled() {
		return nil
	}
	reloaded := a.changes() // before the check: no reload is missed
	secret, _ := secretOf(r)
	granted := a.tokens.Load().Authenticate(secret)
	out := make(chan struct{})
	go func() {
		for granted != nil {
			select {
			case <-ctx.Done():
				return
			case <-reloaded:
				reloaded = a.changes()
				if now := a.tokens.Load().Authenticate(secret); !sameGrant(granted, now) {
					granted = nil
				}
			}
		}
		close(out)
	}()
	return out
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
