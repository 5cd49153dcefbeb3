package server

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/zkgate/zkgate/recipes"
)

// nameSeriesOf reads the per-name histograms of a scrape: name -> count,
// per metric.
func nameSeriesOf(t *testing.T, m *Metrics) map[string]map[string]uint64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "zkgate_name_wait_seconds" && f.GetName() != "zkgate_name_hold_seconds" {
			continue
		}
		out[f.GetName()] = map[string]uint64{}
		for _, s := range f.GetMetric() {
			out[f.GetName()][labelOf(s, "kind")+" "+labelOf(s, "name")] = s.GetHistogram().GetSampleCount()
		}
	}
	return out
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// With 100,000 names, /metrics has wait and hold histograms of the
// --metrics-names busiest only, and one of all the others per kind: its size
// does not grow with the names. Every series only grows: a name picked
// counts from then on, and what came before stays under "*".
func TestNameMetricsStaySmall(t *testing.T) {
	t.Parallel()
	const names, top = 100_000, 20
	m := NewMetrics(top)
	var figures []recipes.NameFigures
	for i := range names {
		name := fmt.Sprintf("lock-%06d", i)
		waited := time.Duration(i) * time.Millisecond // the last are the busiest
		m.Waited(recipes.KindLock, name, waited)
		m.Held(recipes.KindLock, name, time.Second)
		f := recipes.NameFigures{Kind: recipes.KindLock, Name: name}
		f.Waited.Add(waited)
		f.Held.Add(time.Second)
		figures = append(figures, f)
	}
	m.byName.busiest = func() []recipes.NameFigures { return figures }

	series := nameSeriesOf(t, m)
	for _, metric := range []string{"zkgate_name_wait_seconds", "zkgate_name_hold_seconds"} {
		got := series[metric]
		if len(got) != top+2 {
			t.Errorf("%s has %d series, want %d names and * for each kind", metric, len(got), top)
		}
		if got["lock *"] != names || got["semaphore *"] != 0 {
			t.Errorf("%s: every name's count is under *, as none had its own when it came: %d", metric, got["lock *"])
		}
		if n, ok := got[fmt.Sprintf("lock lock-%06d", names-1)]; !ok || n != 0 {
			t.Errorf("%s: the busiest name has no series of its own, or one that counts what came before it was picked (%d)", metric, n)
		}
		if _, ok := got[fmt.Sprintf("lock lock-%06d", names-top-1)]; ok {
			t.Errorf("%s: a name below the top %d has a series of its own", metric, top)
		}
	}
	m.Waited(recipes.KindLock, fmt.Sprintf("lock-%06d", names-1), time.Second)
	m.Waited(recipes.KindLock, "lock-000000", time.Second)
	series = nameSeriesOf(t, m)
	if got := series["zkgate_name_wait_seconds"]; got[fmt.Sprintf("lock lock-%06d", names-1)] != 1 || got["lock *"] != names+1 {
		t.Errorf("after one more wait each of a name picked and of another: %v", got)
	}

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if size := rec.Body.Len(); size > 128<<10 {
		t.Errorf("/metrics is %d bytes with %d names", size, names)
	}
	t.Logf("/metrics: %d bytes with %d names, %d of them with histograms of their own", rec.Body.Len(), names, top)
}
