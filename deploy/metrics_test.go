// Package deploy_test checks the operators' files of deploy/ against
// running gateways: every metric that the Prometheus rules and the Grafana
// dashboard query is one that /metrics exports, with the labels they match;
// and the Helm chart's rendered pods start, serve and roll out on loopback
// (chart_test.go).
package deploy_test

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

func TestMain(m *testing.M) { gwtest.Main(m) }

// exposition is what /metrics says: each series' name with its labels, and
// each family's type.
type exposition struct {
	series map[string][]map[string]string // series name -> label sets
	types  map[string]string              // family -> counter, gauge, histogram...
}

var (
	seriesLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
	// A metric in a query: zkgate's own, and the Go and process collectors'.
	selector = regexp.MustCompile(`\b((?:zkgate|go|process)_[a-zA-Z0-9_:]*)\b(\s*\{[^}]*\})?`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
)

func scrape(t *testing.T, base string) exposition {
	t.Helper()
	r := gwtest.Do(t, "GET", base+"/metrics", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /metrics: %d", r.Status)
	}
	e := exposition{series: map[string][]map[string]string{}, types: map[string]string{}}
	for _, line := range strings.Split(string(r.Body), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if name, typ, ok := strings.Cut(rest, " "); ok {
				e.types[name] = typ
			}
			continue
		}
		m := seriesLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[p[1]] = p[2]
		}
		e.series[m[1]] = append(e.series[m[1]], labels)
	}
	return e
}

// check reports each metric of expr that the exposition lacks, and each
// label matcher that no series of it could satisfy. The labels Prometheus
// adds at scrape time (instance, job) are not the gateway's to export; a
// regular expression needs only its label to exist (no healthy gateway
// answers a 5xx to show).
func (e exposition) check(t *testing.T, where, expr string) (checked int) {
	t.Helper()
	for _, sel := range selector.FindAllStringSubmatch(expr, -1) {
		name := sel[1]
		series, ok := e.series[name]
		if !ok {
			t.Errorf("%s: %s names %s, which /metrics does not export", where, expr, name)
			continue
		}
		checked++
		for _, m := range matcher.FindAllStringSubmatch(sel[2], -1) {
			label, op, value := m[1], m[2], m[3]
			if label == "instance" || label == "job" {
				continue
			}
			found := false
			for _, labels := range series {
				v, has := labels[label]
				if has && (op != "=" || v == value) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: no series of %s has %s%s%q", where, name, label, op, value)
			}
		}
	}
	return checked
}

// ruleExprs are the expr fields of a Prometheus rules file, block scalars
// included.
func ruleExprs(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
		rest, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "expr:")
		if !ok {
			continue
		}
		rest = strings.TrimSpace(rest)
		if rest == "|" || rest == ">" || rest == "|-" || rest == ">-" {
			var block []string
			for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " ")) > indent) {
				i++
				block = append(block, strings.TrimSpace(lines[i]))
			}
			rest = strings.Join(block, " ")
		}
		exprs = append(exprs, rest)
	}
	return exprs
}

// dashboardQueries are the PromQL strings of a Grafana dashboard: every
// panel target's expr, and the template variables' queries.
func dashboardQueries(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				walk(c, k)
			}
		case []any:
			for _, c := range v {
				walk(c, key)
			}
		case string:
			if key == "expr" || key == "query" || key == "definition" {
				out = append(out, v)
			}
		}
	}
	walk(doc, "")
	return out
}

// TestQueriesNameExportedMetrics: a gateway that served a little of
// everything (leases, a grant, a wait, a release, a 429) exports every
// metric that deploy/prometheus/zkgate-rules.yaml and
// deploy/grafana/zkgate.json query, with the label values they select.
func TestQueriesNameExportedMetrics(t *testing.T) {
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: []string{"--max-leases", "2"}})
	lease := func() gwtest.Response {
		return gwtest.Do(t, "POST", g.URL+"/v1/leases", map[string]any{"ttl": "30s", "holder": "metrics-test"})
	}
	a, b := lease(), lease()
	if a.Status != http.StatusCreated || b.Status != http.StatusCreated {
		t.Fatalf("leases: %d %d", a.Status, b.Status)
	}
	if r := lease(); r.Status != http.StatusTooManyRequests {
		t.Fatalf("a third lease past --max-leases 2: %d, want 429", r.Status)
	}
	idA, idB := a.JSON(t)["id"].(string), b.JSON(t)["id"].(string)
	if r := gwtest.Do(t, "POST", g.URL+"/v1/locks/m/acquire?wait=0s", map[string]any{"lease": idA}); r.Status != http.StatusOK {
		t.Fatalf("acquire: %d %s", r.Status, r.Body)
	}
	// A wait that times out behind the holder: the waiters' gauge of locks.
	gwtest.Do(t, "POST", g.URL+"/v1/locks/m/acquire?wait=50ms", map[string]any{"lease": idB})
	if r := gwtest.Do(t, "POST", g.URL+"/v1/locks/m/release", map[string]any{"lease": idA}); r.Status != http.StatusNoContent {
		t.Fatalf("release: %d %s", r.Status, r.Body)
	}
	e := scrape(t, g.URL)

	sources := map[string][]string{
		"prometheus/zkgate-rules.yaml": ruleExprs(t, "prometheus/zkgate-rules.yaml"),
		"grafana/zkgate.json":          dashboardQueries(t, "grafana/zkgate.json"),
	}
	for file, exprs := range sources {
		checked := 0
		for _, expr := range exprs {
			checked += e.check(t, file, expr)
		}
		// Guards against an extractor that finds nothing to check.
		if len(exprs) < 8 || checked < len(exprs) {
			t.Errorf("%s: %d queries naming %d metrics: the file was not read as it should be", file, len(exprs), checked)
		}
	}
}
