package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/zkgate/zkgate/auth"
)

// keepAliveDoor is a router with the front door before one route, the
// keepalive's, whose handler answers 26 bytes; the access log goes to log.
func keepAliveDoor(log io.Writer) http.Handler {
	fd := &frontDoor{log: NewLogger(log, "json", "info"), m: NewMetrics(10), drain: &drain{}, auth: &auth.Store{}}
	r := chi.NewRouter()
	answer := []byte(`{"id":"x","ttl_ms":10000}` + "\n")
	routes(r, fd, []route{{method: http.MethodPost, pattern: "/v1/leases/{id}/keepalive", body: 1 << 10,
		access: leaseRule(auth.LevelWrite),
		handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer)
		})}})
	return r
}

// TestAccessLogLine: each request is one complete line of the access log,
// written as it ends, with every field and nothing else.
func TestAccessLogLine(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	h := keepAliveDoor(&log)
	for i := 0; i < 2; i++ {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/v1/leases/abc/keepalive", strings.NewReader(""))
		req.Header.Set("X-Request-Id", "req-1")
		req.RemoteAddr = "127.0.0.1:5555"
		h.ServeHTTP(httptest.NewRecorder(), req)
		lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
		if len(lines) != i+1 {
			t.Fatalf("after request %d the log has %d lines: %q", i+1, len(lines), log.String())
		}
		var line map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &line); err != nil {
			t.Fatalf("line %q: %v", lines[i], err)
		}
		want := map[string]any{"level": "INFO", "msg": "http", "method": "POST", "path": "/v1/leases/abc/keepalive",
			"route": "/v1/leases/{id}/keepalive", "status": 200.0, "bytes": 26.0, "request_id": "req-1", "remote": "127.0.0.1:5555"}
		for k, v := range want {
			if line[k] != v {
				t.Errorf("%s = %v, want %v (line %s)", k, line[k], v, lines[i])
			}
		}
		if _, ok := line["ms"].(float64); !ok {
			t.Errorf("no ms in %s", lines[i])
		}
		if _, ok := line["time"].(string); !ok {
			t.Errorf("no time in %s", lines[i])
		}
		if len(line) != len(want)+2 {
			t.Errorf("%d fields, want %d: %s", len(line), len(want)+2, lines[i])
		}
	}
}

// BenchmarkFrontDoor is the front door's own cost per request (its id, the
// headers, the access check, the metrics and the access log line, written
// as JSON to a discarding writer) around a handler that answers 26 bytes:
// run with -benchmem to see its allocations.
func BenchmarkFrontDoor(b *testing.B) {
	h := keepAliveDoor(io.Discard)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/v1/leases/abc/keepalive", strings.NewReader(""))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
