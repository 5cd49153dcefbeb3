package gwtest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The calls of the HTTP API that tests of every package make, each
// failing the test when the gateway answers otherwise than it must.

// NewLease makes a lease of ttl for holder and returns its id.
func NewLease(t testing.TB, url, ttl, holder string) string {
	t.Helper()
	r := Do(t, "POST", url+"/v1/leases", map[string]any{"ttl": ttl, "holder": holder})
	if r.Status != http.StatusCreated {
		t.Fatalf("create lease: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)["id"].(string)
}

// Acquire asks for the lock name under lease, waiting up to wait.
func Acquire(t testing.TB, url, name, lease, wait string) Response {
	t.Helper()
	return Do(t, "POST", url+"/v1/locks/"+name+"/acquire?wait="+wait, map[string]any{"lease": lease})
}

// MustStatus fails the test unless r has the status want.
func MustStatus(t testing.TB, r Response, want int, what string) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("%s: status %d, want %d: %s", what, r.Status, want, r.Body)
	}
}

// Produce puts data on queue at priority and returns the item's id.
func Produce(t testing.TB, url, queue string, data []byte, priority int) string {
	t.Helper()
	r := Do(t, "POST", url+"/v1/queues/"+queue+"/items?priority="+strconv.Itoa(priority), data)
	MustStatus(t, r, 201, "produce")
	return r.JSON(t)["id"].(string)
}

// WaitsFor waits until lease waits for kind name, as its gateway tells.
func WaitsFor(t testing.TB, base, lease, kind, name string) {
	t.Helper()
	Eventually(t, 10*time.Second, func() error {
		r := Do(t, "GET", base+"/v1/leases/"+lease, nil)
		for _, h := range r.JSON(t)["holds"].([]any) {
			m := h.(map[string]any)
			if m["kind"] == kind && m["name"] == name && m["state"] == "waiting" && m["node"] != nil {
				return nil
			}
		}
		return fmt.Errorf("lease %s does not wait for %s %s yet: %s", lease, kind, name, r.Body)
	})
}

// GetPage reads a page of the dashboard.
func GetPage(t testing.TB, u string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Send(http.DefaultClient, req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return r.Status, r.Header, string(r.Body)
}

// Metric reads one series of /metrics, asked for with secret ("" for no
// token): name is the metric's name with its labels, as /metrics spells
// them.
func Metric(t testing.TB, base, secret, name string) float64 {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	r, err := Send(http.DefaultClient, req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	return MetricIn(t, r.Body, name)
}

// MetricIn reads one series, name with its labels, of a /metrics answer.
func MetricIn(t testing.TB, metrics []byte, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(string(metrics), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
