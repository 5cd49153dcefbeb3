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

// frontDoor is the way in of every request, in one stack frame: its id,
// its log line and metrics, a panic turned into a 500, the drain's header,
// the security headers, and the access check (see admit). One layer where
// there were six: a request that waits parks its goroutine under every
// frame above it, and the six layers' frames took the stack of a waiting
// acquire from 8 KiB to 16 KiB, most of what a waiter costs (make bench,
// the waiters' memory).
type frontDoor struct {
	log    *slog.Logger
	m      *Metrics
	drain  *drain
	mux    *chi.Mux
	auth   *auth
	limits *limits
	peers  *handlers.Peers // checks forwarded requests and signs their answers (nil: none taken)
}

func (fd *frontDoor) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		start := time.Now()
		defer fd.done(ww, r, start)
		if _, forwarded := r.Header[handlers.ForwardedHeader]; forwarded {
			fd.servePeer(ww, r, next)
			return
		}
		r, release, ok := fd.enter(ww, r)
		if !ok {
			return
		}
		if release != nil {
			defer release()
		}
		next.ServeHTTP(ww, r)
	})
}

// servePeer serves a request that says another gateway forwarded it: the
// front door proves it (see admit), and whatever answers it, the route or
// a refusal, is held until whole and sent with this gateway's proof when
// the request proved itself with the shared secret.
//
//go:noinline
func (fd *frontDoor) servePeer(w http.ResponseWriter, r *http.Request, next http.Handler) {
	held := handlers.Hold(w)
	r, release, ok := fd.enter(held, r)
	if ok {
		func() {
			if release != nil {
				defer release()
			}
			next.ServeHTTP(held, r)
		}()
	}
	// Not deferred: after a panic, done answers 500 in its place.
	fd.peers.Release(held, r)
}

// enter sets the headers every answer carries and checks access; it
// answers the request itself when ok is false.
//
//go:noinline
func (fd *frontDoor) enter(w http.ResponseWriter, r *http.Request) (_ *http.Request, release func(), ok bool) {
	h := w.Header()
	// A sane X-Request-Id from the client, or one of ours, on the answer.
	id := r.Header.Get("X-Request-Id")
	if !saneID(id) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	h.Set("X-Request-Id", id)
	if ends, ok := fd.drain.until(); ok {
		h.Set(handlers.LeaseEndsHeader, ends.UTC().Format(time.RFC3339Nano))
		h.Set(handlers.TimeHeader, time.Now().UTC().Format(time.RFC3339Nano))
	}
	// No MIME sniffing, no framing.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", apiCSP)
	return fd.admit(w, r)
}

// done turns a panic into a 500, then logs the request and counts it in the
// metrics, labelled by its route pattern (never the raw path, which would
// explode the label set). It is deferred: recover works only there.
func (fd *frontDoor) done(ww middleware.WrapResponseWriter, r *http.Request, start time.Time) {
	if rec := recover(); rec != nil {
		if rec == http.ErrAbortHandler {
			panic(rec)
		}
		fd.log.Error("panic", "err", rec, "stack", string(debug.Stack()), "request_id", ww.Header().Get("X-Request-Id"))
		handlers.WriteError(ww, r, &recipes.Error{Code: recipes.CodeInternal, Err: fmt.Errorf("panic: %v", rec)})
	}
	route := "unmatched"
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
		route = rc.RoutePattern()
	}
	status := ww.Status()
	if status == 0 {
		status = http.StatusOK
	}
	elapsed := time.Since(start)
	fd.m.requests.WithLabelValues(route, r.Method, strconv.Itoa(status)).Inc()
	fd.m.latency.WithLabelValues(route, r.Method).Observe(elapsed.Seconds())
	level := slog.LevelInfo
	if route == "/metrics" || route == "/healthz" || route == "/readyz" {
		level = slog.LevelDebug
	}
	fd.log.LogAttrs(r.Context(), level, "http",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("route", route),
		slog.Int("status", status), slog.Int("bytes", ww.BytesWritten()),
		slog.Float64("ms", float64(elapsed.Microseconds())/1000),
		slog.String("request_id", ww.Header().Get("X-Request-Id")), slog.String("remote", r.RemoteAddr))
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
