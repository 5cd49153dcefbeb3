// Package handlers turns HTTP requests into calls of the recipes and their
// results into JSON or RFC 9457 problem documents. It never touches
// ZooKeeper itself. Each route is a handler that returns its error
// (handler.go), written by WriteError, whose statusOf is the one map of
// error codes to statuses. A route whose lease another gateway keeps learns
// so when it looks the lease up (lookup), and passes the request on to that
// gateway as a step of its own (forward.go).
// A request reaches the other gateways only with this gateway's proof
// (auth/peers).
package handlers

import (
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"strconv"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/auth/peers"
	"github.com/zkgate/zkgate/recipes"
)

// statusOf is the one place where error codes become HTTP statuses.
var statusOf = map[recipes.Code]int{
	recipes.CodeInvalid:       http.StatusBadRequest,
	recipes.CodeLeaseNotFound: http.StatusNotFound,
	recipes.CodeNotFound:      http.StatusNotFound,
	recipes.CodeTimeout:       http.StatusConflict,
	recipes.CodeNotHeld:       http.StatusConflict,
	recipes.CodeNotLeader:     http.StatusConflict,
	recipes.CodeNotClaimed:    http.StatusConflict,
	recipes.CodeLimitMismatch: http.StatusConflict,
	recipes.CodeCountMismatch: http.StatusConflict,
	recipes.CodeStaleToken:    http.StatusConflict,
	recipes.CodeWouldDeadlock: http.StatusConflict,
	recipes.CodeDeadlock:      http.StatusConflict,
	recipes.CodeNotEmpty:      http.StatusConflict,
	recipes.CodeLeaseExpired:  http.StatusGone,
	recipes.CodeTooLarge:      http.StatusRequestEntityTooLarge,
	recipes.CodeQueueFull:     http.StatusInsufficientStorage,
	recipes.CodeUnavailable:   http.StatusServiceUnavailable,
	recipes.CodeInternal:      http.StatusInternalServerError,
	codeMethod:                http.StatusMethodNotAllowed,
	CodeMediaType:             http.StatusUnsupportedMediaType,
	codeBodyTimeout:           http.StatusRequestTimeout,
	CodeUnauthenticated:       http.StatusUnauthorized,
	CodeForbidden:             http.StatusForbidden,
	CodeTooMany:               http.StatusTooManyRequests,
	peers.CodeMisdirected:     http.StatusMisdirectedRequest,

	recipes.CodeVersionMismatch: http.StatusConflict,
	recipes.CodeFormatMismatch:  http.StatusConflict,
	recipes.CodeOutOfRange:      http.StatusConflict,
}

const (
	codeMethod recipes.Code = "method_not_allowed"
	// CodeMediaType is a body of a type the route does not read.
	CodeMediaType   recipes.Code = "unsupported_media_type"
	codeBodyTimeout              = peers.CodeBodyTimeout
)

var titles = map[recipes.Code]string{
	recipes.CodeInvalid:       "Invalid request",
	recipes.CodeLeaseNotFound: "Lease not found",
	recipes.CodeNotFound:      "Not found",
	recipes.CodeTimeout:       "Wait timed out",
	recipes.CodeNotHeld:       "Not held",
	recipes.CodeNotLeader:     "Not the leader",
	recipes.CodeNotClaimed:    "Not claimed",
	recipes.CodeLimitMismatch: "Semaphore limit mismatch",
	recipes.CodeCountMismatch: "Barrier count mismatch",
	recipes.CodeStaleToken:    "Stale fencing token",
	recipes.CodeWouldDeadlock: "Would deadlock",
	recipes.CodeDeadlock:      "Deadlock",
	recipes.CodeNotEmpty:      "Not empty",
	recipes.CodeLeaseExpired:  "Lease expired",
	recipes.CodeTooLarge:      "Request too large",
	recipes.CodeQueueFull:     "Queue full",
	recipes.CodeUnavailable:   "Unavailable", // ZooKeeper, a peer, a drain: the detail says which
	recipes.CodeInternal:      "Internal error",
	codeMethod:                "Method not allowed",
	CodeMediaType:             "Unsupported media type",
	codeBodyTimeout:           "Body too slow",
	CodeUnauthenticated:       "Unauthenticated",
	CodeForbidden:             "Forbidden",
	CodeTooMany:               "Too many",
	peers.CodeMisdirected:     "Misdirected",

	recipes.CodeVersionMismatch: "Version mismatch",
	recipes.CodeFormatMismatch:  "Format mismatch",
	recipes.CodeOutOfRange:      "Out of range",
}

// WriteError writes err as application/problem+json. Internal errors are
// logged with the request id, and the client sees only "internal error".
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	var limit *LimitError
	if errors.As(err, &limit) {
		w.Header().Set("Retry-After", retryAfterSeconds(limit.RetryAfter))
		err = limit.problem()
	}
	var e *recipes.Error
	if !errors.As(err, &e) {
		e = &recipes.Error{Code: recipes.CodeInternal, Err: err}
	}
	if e.Code == recipes.CodeDeadlock {
		e = deadlockFor(CallerOf(r.Context()), e)
	}
	status := StatusOf(e.Code)
	detail := e.Detail
	if e.Code == recipes.CodeInternal {
		slog.ErrorContext(r.Context(), "internal error", "err", err, "request_id", w.Header().Get("X-Request-Id"),
			"method", Clip(r.Method, 32), "path", Clip(r.URL.Path, 320))
		detail = "internal error"
	}
	doc := map[string]any{}
	for k, v := range e.Extra {
		doc[k] = v
	}
	doc["type"] = "urn:zkgate:problem:" + string(e.Code)
	doc["title"] = titles[e.Code]
	doc["status"] = status
	doc["detail"] = detail
	doc["code"] = string(e.Code)
	if id := w.Header().Get("X-Request-Id"); id != "" {
		doc["instance"] = "urn:zkgate:request:" + id
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(doc)
}

// Problem writes a problem of the given code and detail.
func Problem(w http.ResponseWriter, r *http.Request, code recipes.Code, detail string) {
	WriteError(w, r, &recipes.Error{Code: code, Detail: detail})
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeIndexed writes a state with its X-Zkgate-Index.
func writeIndexed(w http.ResponseWriter, index int64, v any) {
	w.Header().Set("X-Zkgate-Index", strconv.FormatInt(index, 10))
	writeJSON(w, http.StatusOK, v)
}

// Clip bounds what a log line or a problem carries of client input (see
// auth.Clip).
func Clip(s string, n int) string { return auth.Clip(s, n) }

// StatusOf is the HTTP status a problem of code is answered with (500 for a
// code the table does not know).
func StatusOf(code recipes.Code) int {
	if status, ok := statusOf[code]; ok {
		return status
	}
	return http.StatusInternalServerError
}

// deadlockFor is the 409 deadlock e as caller may see it (nil: tokens off,
// all of it): a step of the cycle on a name it may not read shows its kind
// alone, and a session id only to an admin of the name, as
// /v1/contention's cycles do.
func deadlockFor(c *Caller, e *recipes.Error) *recipes.Error {
	cycle, ok := e.Extra["cycle"].([]recipes.CycleStep)
	if c == nil || !ok || len(cycle) == 0 {
		return e
	}
	shown := make([]recipes.CycleStep, len(cycle))
	for i, st := range cycle {
		k := permKind(st.Kind)
		shown[i] = st.Shown(c.May(k, st.Name, LevelRead), c.May(k, st.Name, auth.LevelAdmin))
	}
	out := *e
	out.Extra = maps.Clone(e.Extra)
	out.Extra["cycle"] = shown
	out.Detail = recipes.DeadlockDetail(cycle[0].Kind, cycle[0].Name, shown)
	return &out
}
