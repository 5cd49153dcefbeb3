package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/zkgate/zkgate/handlers"
	"github.com/zkgate/zkgate/recipes"
)

// requestID takes a sane X-Request-Id from the client or makes one, and
// returns it on the response.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !saneID(id) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r)
	})
}

func saneID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// observe logs each request and counts it in the metrics, labelled by its
// route pattern (never the raw path, which would explode the label set).
func observe(log *slog.Logger, m *Metrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			next.ServeHTTP(ww, r)
			route := "unmatched"
			if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
				route = rc.RoutePattern()
			}
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			elapsed := time.Since(start)
			m.requests.WithLabelValues(route, r.Method, strconv.Itoa(status)).Inc()
			m.latency.WithLabelValues(route, r.Method).Observe(elapsed.Seconds())
			level := slog.LevelInfo
			if route == "/metrics" || route == "/healthz" || route == "/readyz" {
				level = slog.LevelDebug
			}
			log.LogAttrs(r.Context(), level, "http",
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("route", route),
				slog.Int("status", status), slog.Int("bytes", ww.BytesWritten()),
				slog.Float64("ms", float64(elapsed.Microseconds())/1000),
				slog.String("request_id", w.Header().Get("X-Request-Id")), slog.String("remote", r.RemoteAddr))
		})
	}
}

// recoverPanics turns a panic into a logged stack and a 500 problem.
func recoverPanics(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				rec := recover()
				if rec == nil {
					return
				}
				if rec == http.ErrAbortHandler {
					panic(rec)
				}
				log.Error("panic", "err", rec, "stack", string(debug.Stack()), "request_id", w.Header().Get("X-Request-Id"))
				handlers.WriteError(w, r, &recipes.Error{Code: recipes.CodeInternal, Err: fmt.Errorf("panic: %v", rec)})
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// limitBody caps request bodies at n bytes.
func limitBody(n int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > n {
				handlers.Problem(w, r, recipes.CodeTooLarge, fmt.Sprintf("the body is larger than %d bytes", n))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, n)
			next.ServeHTTP(w, r)
		})
	}
}

// apiCSP is the Content-Security-Policy of every response that is not a
// dashboard page (those send dashboardCSP): nothing may load, and nothing
// may frame it.
const apiCSP = "default-src 'none'; frame-ancestors 'none'"

// securityHeaders sets what every response carries: no MIME sniffing, no
// framing.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", apiCSP)
		next.ServeHTTP(w, r)
	})
}
