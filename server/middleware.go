package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/auth/peers"
	"github.com/zkgate/zkgate/handlers"
	"github.com/zkgate/zkgate/recipes"
	"go.opentelemetry.io/otel/trace"
)

// frontDoor is the way in of every request, in one stack frame: the
// deadline of its body, its id, its log line and metrics, a panic turned
// into a 500, the drain's header, the security headers, the browser check,
// the access check and the limits (see admit), and, with tracing on, the
// request's span (see tracing.go). One frame, not a chain of
// middlewares: a request that waits parks its goroutine under every frame
// above it, and six such frames take the stack of a waiting acquire from
// 8 KiB to 16 KiB, most of what a waiter costs (make bench, the waiters'
// memory). It stands between the router and each route (see routes), so
// that it checks a request by the rule of the route the router matched.
type frontDoor struct {
	log    *slog.Logger
	m      *Metrics
	drain  *drain
	auth   *auth.Store
	limits *limits
	peers  *peers.Credential // checks forwarded requests and signs their answers (nil: none taken)
	// bodyTimeout bounds the reading of a request's body (0: no bound).
	bodyTimeout time.Duration
	// hosts says which Host headers a gateway without tokens answers.
	hosts hostCheck
	// proxies are --trusted-proxies: from them, the client's address is
	// the forwarded one.
	proxies trustedProxies
	// tracer makes each request's server span (nil: tracing off).
	tracer trace.Tracer

	refusedLog refusedLog
}

// serve puts the front door before next, the handler of rt (nil: of the
// requests no route serves).
func (fd *frontDoor) serve(rt *route, next http.Handler) *door {
	return &door{fd: fd, rt: rt, next: next}
}

// door is the front door of one route: the router hands it the requests
// of its route, so it knows their rule without routing them again.
type door struct {
	fd   *frontDoor
	rt   *route
	next http.Handler
}

func (d *door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fd := d.fd
	if len(fd.proxies) > 0 {
		if addr, ok := fd.proxies.client(r); ok {
			r = r.WithContext(context.WithValue(r.Context(), viaKey{}, r.RemoteAddr))
			r.RemoteAddr = addr // the client's, for the caps and the logs
		}
	}
	if r.ContentLength != 0 && fd.bodyTimeout > 0 {
		bodyDeadline(w, fd.bodyTimeout)
	}
	ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
	start := time.Now()
	if fd.tracer != nil {
		r = fd.startSpan(r, d.rt)
	}
	defer fd.done(ww, r, start)
	if _, forwarded := r.Header[peers.ForwardedHeader]; forwarded {
		fd.servePeer(ww, r, d.rt, d.next)
		return
	}
	r, held, ok := fd.enter(ww, r, d.rt)
	if !ok {
		return
	}
	if held.held {
		defer fd.limits.release(held)
	}
	d.next.ServeHTTP(ww, r)
}

// servePeer serves a request that says another gateway forwarded it: the
// front door proves it (see admit), and whatever answers it, the route or
// a refusal, is held until whole and sent with this gateway's proof when
// the request proved itself with the shared secret.
//
//go:noinline
func (fd *frontDoor) servePeer(w http.ResponseWriter, r *http.Request, rt *route, next http.Handler) {
	answer := peers.Hold(w)
	r, held, ok := fd.enter(answer, r, rt)
	if ok {
		func() {
			if held.held {
				defer fd.limits.release(held)
			}
			next.ServeHTTP(answer, r)
		}()
	}
	// Not deferred: after a panic, done answers 500 in its place.
	fd.peers.Release(answer, r)
}

// enter sets the headers every answer carries and checks access; it
// answers the request itself when ok is false.
//
//go:noinline
func (fd *frontDoor) enter(w http.ResponseWriter, r *http.Request, rt *route) (_ *http.Request, _ slot, ok bool) {
	h := w.Header()
	// A sane X-Request-Id from the client, or one of ours, on the answer.
	id := r.Header.Get("X-Request-Id")
	if !saneID(id) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	h.Set("X-Request-Id", id)
	if ends, ok := fd.drain.leaseEnds(); ok {
		h.Set(handlers.LeaseEndsHeader, ends.UTC().Format(time.RFC3339Nano))
		h.Set(handlers.TimeHeader, time.Now().UTC().Format(time.RFC3339Nano))
	}
	// No MIME sniffing, no framing.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", apiCSP)
	r, held, ok := fd.admit(w, r, rt)
	if ok && fd.tracer != nil {
		r = withSpanReader(r)
	}
	return r, held, ok
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
	if fd.tracer != nil {
		endSpan(r, status, ww.Header().Get("X-Request-Id"))
	}
	elapsed := time.Since(start)
	method := methodLabel(r.Method)
	fd.m.requests.WithLabelValues(route, method, statusLabel(status)).Inc()
	fd.m.latency.WithLabelValues(route, method).Observe(elapsed.Seconds())
	level := slog.LevelInfo
	if route == "/metrics" || route == "/healthz" || route == "/readyz" {
		level = slog.LevelDebug
	}
	ctx := r.Context()
	if !fd.log.Enabled(ctx, level) {
		return
	}
	second := start.Add(elapsed).Unix()
	if refused(status) && !fd.refusedLog.take(second) {
		return
	}
	if n := fd.refusedLog.flush(second); n > 0 {
		fd.log.LogAttrs(ctx, slog.LevelWarn, "refused requests not logged",
			slog.Int("count", n), slog.Int("most_a_second", refusedLogsPerSecond))
	}
	// The record is made here rather than by LogAttrs, which takes a stack
	// trace for the line's source on every call: the gateway's logger
	// writes no source.
	line := slog.NewRecord(time.Now(), level, "http", 0)
	line.AddAttrs(
		slog.String("method", handlers.Clip(r.Method, maxLoggedMethod)), slog.String("path", handlers.Clip(r.URL.Path, maxLoggedPath)),
		slog.String("route", route), slog.Int("status", status), slog.Int("bytes", ww.BytesWritten()),
		slog.Float64("ms", float64(elapsed.Microseconds())/1000),
		slog.String("request_id", ww.Header().Get("X-Request-Id")), slog.String("remote", r.RemoteAddr))
	if via, ok := r.Context().Value(viaKey{}).(string); ok {
		line.AddAttrs(slog.String("via", via))
	}
	_ = fd.log.Handler().Handle(ctx, line)
}

// viaKey holds, for a request that came through a trusted proxy, the
// proxy's address.
type viaKey struct{}

// What of a request's method and path a log line carries: enough to tell
// any route of the gateway, never the megabyte a client may send.
const (
	maxLoggedMethod = 32
	maxLoggedPath   = 320
)

// methodLabel is the method label of the request metrics: one of the
// methods of RFC 9110 (and PATCH), or "other", so that made-up methods,
// which any caller may send before any token is checked, cannot grow the
// label set. The label is the constant, not m, so that what the metrics
// keep is never a piece of a request.
func methodLabel(m string) string {
	for _, known := range labelledMethods {
		if m == known {
			return known
		}
	}
	return "other"
}

// labelledMethods are the methods methodLabel names.
var labelledMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
	http.MethodPatch, http.MethodOptions, http.MethodConnect, http.MethodTrace}

// statusLabel is the code label: the common ones without an allocation.
func statusLabel(status int) string {
	switch status {
	case http.StatusOK:
		return "200"
	case http.StatusCreated:
		return "201"
	case http.StatusNoContent:
		return "204"
	case http.StatusConflict:
		return "409"
	}
	return strconv.Itoa(status)
}

// refused says whether an answer refuses the request outright (a bad
// request, no or a wrong token, no such route or method, too large, too
// slow, too many): what a caller can have answered as often as it likes,
// so its log lines are capped. 409 and 410 are answers about the state of
// a primitive or lease, logged as any other.
func refused(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusConflict && status != http.StatusGone
}

// refusedLogsPerSecond caps the log lines of refused requests.
const refusedLogsPerSecond = 20

// refusedLog counts the log lines of refused requests in the current
// second, and those left out; the number left out in a second is logged
// with the first line logged after it.
type refusedLog struct {
	mu     sync.Mutex
	second int64
	logged int
	// dropped (this second) and pending (seconds gone by, not reported
	// yet) are read without the lock on every logged line.
	dropped, pending atomic.Int64
}

// rollLocked starts second, if it is a new one.
func (c *refusedLog) rollLocked(second int64) {
	if second != c.second {
		c.pending.Add(c.dropped.Swap(0))
		c.second, c.logged = second, 0
	}
}

// take reports whether a refused request's line may be logged in second.
func (c *refusedLog) take(second int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rollLocked(second)
	if c.logged >= refusedLogsPerSecond {
		c.dropped.Add(1)
		return false
	}
	c.logged++
	return true
}

// flush returns, once, the number of lines left out in the seconds before
// second.
func (c *refusedLog) flush(second int64) int {
	if c.pending.Load() == 0 && c.dropped.Load() == 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rollLocked(second)
	return int(c.pending.Swap(0))
}

func saneID(id string) bool { return peers.PlainName(id, 64) }

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
// dashboard page (dashboard.WritePage sends its own): nothing may load, and nothing
// may frame it.
const apiCSP = "default-src 'none'; frame-ancestors 'none'"

// bodyDeadline bounds the reading of a request's body (--body-timeout),
// set before anything else happens to the request: a client that sends its
// body slowly, or never, holds a handler (or, once the handler has
// answered, the connection that net/http reads the rest of the body from)
// for no longer. It covers the body only, never a wait after it: over
// HTTP/1.1 net/http lifts the connection's read deadline once the body is
// read to its end (it reads on, to notice a hang-up, and a deadline would
// end the request); over HTTP/2 it is the deadline of the stream's body.
// Both of net/http's writers have the method, so no ResponseController is
// made for it.
func bodyDeadline(w http.ResponseWriter, timeout time.Duration) {
	if d, ok := w.(interface{ SetReadDeadline(time.Time) error }); ok {
		_ = d.SetReadDeadline(time.Now().Add(timeout))
	}
}
