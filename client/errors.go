package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Error is a failure the gateway answered: an RFC 9457 problem document, or
// an HTTP error status from something in front of the gateway (then Code is
// derived from the status). Check it with errors.Is against the sentinels
// below, or errors.As to read its fields.
type Error struct {
	Status     int                        // the HTTP status
	Code       string                     // the problem's code, such as "timeout" or "lease_expired"
	Title      string                     // the problem's title
	Detail     string                     // the problem's detail, written for people
	Instance   string                     // urn:zkgate:request:<X-Request-Id>
	RetryAfter time.Duration              // from Retry-After, when the answer had one
	Extra      map[string]json.RawMessage // every other member of the problem document (holders, reason, position...)
}

func (e *Error) Error() string {
	detail := e.Detail
	if detail == "" {
		detail = e.Title
	}
	if detail == "" {
		detail = http.StatusText(e.Status)
	}
	return fmt.Sprintf("%s (%d %s)", detail, e.Status, e.Code)
}

// Is makes errors.Is(err, ErrTimeout) and the like true for an *Error of
// that code.
func (e *Error) Is(target error) bool {
	s, ok := target.(*sentinel)
	return ok && s.code == e.Code
}

// Decode reads the extra member key of the problem document into v, for
// instance e.Decode("holders", &holders) after a timeout. It reports whether
// the member was there.
func (e *Error) Decode(key string, v any) (bool, error) {
	raw, ok := e.Extra[key]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(raw, v)
}

// Reason is why a lease ended, from a lease_expired problem: "expired",
// "revoked", "session_lost" or "gateway_shutdown"; "" for other problems.
func (e *Error) Reason() string {
	var r string
	_, _ = e.Decode("reason", &r)
	return r
}

// sentinel is the type of the Err* values: each stands for one problem code.
type sentinel struct{ code, text string }

func (s *sentinel) Error() string { return s.text }

// Code is the problem code the sentinel stands for.
func (s *sentinel) Code() string { return s.code }

func newSentinel(code, text string) *sentinel { return &sentinel{code: code, text: text} }

// Sentinels, one per problem code the gateway uses. errors.Is(err, ErrX) is
// true for an *Error of that code, and for the errors this package makes
// itself that mean the same (a lease found expired by the client is
// ErrLeaseExpired too).
var (
	ErrInvalid              = newSentinel("invalid_request", "invalid request")
	ErrLeaseNotFound        = newSentinel("lease_not_found", "lease not found")
	ErrNotFound             = newSentinel("not_found", "not found")
	ErrMethodNotAllowed     = newSentinel("method_not_allowed", "method not allowed")
	ErrTimeout              = newSentinel("timeout", "the wait ended first")
	ErrNotHeld              = newSentinel("not_held", "not held")
	ErrNotLeader            = newSentinel("not_leader", "not the leader")
	ErrNotClaimed           = newSentinel("not_claimed", "not claimed")
	ErrWouldDeadlock        = newSentinel("would_deadlock", "would deadlock")
	ErrDeadlock             = newSentinel("deadlock", "ended to break a deadlock")
	ErrLimitMismatch        = newSentinel("limit_mismatch", "semaphore limit mismatch")
	ErrCountMismatch        = newSentinel("count_mismatch", "barrier count mismatch")
	ErrNotEmpty             = newSentinel("not_empty", "not empty")
	ErrStaleToken           = newSentinel("stale_token", "stale fencing token")
	ErrLeaseExpired         = newSentinel("lease_expired", "lease expired")
	ErrTooLarge             = newSentinel("too_large", "request too large")
	ErrUnsupportedMediaType = newSentinel("unsupported_media_type", "unsupported media type")
	ErrUnauthenticated      = newSentinel("unauthenticated", "unauthenticated")
	ErrForbidden            = newSentinel("forbidden", "forbidden")
	ErrTooMany              = newSentinel("too_many", "too many requests")
	ErrQueueFull            = newSentinel("queue_full", "queue full")
	ErrUnavailable          = newSentinel("unavailable", "gateway unavailable")
	ErrInternal             = newSentinel("internal", "internal error")

	// The counters' (see SetCounter, AddCounter).
	ErrVersionMismatch = newSentinel("version_mismatch", "counter version mismatch")
	ErrFormatMismatch  = newSentinel("format_mismatch", "counter format mismatch")
	ErrOutOfRange      = newSentinel("out_of_range", "counter out of range")
)

// Errors of the client itself, with no problem document behind them.
var (
	// ErrRevoked is Lease.Err after Lease.Revoke.
	ErrRevoked = errors.New("lease revoked by its holder")
	// ErrEmpty is what Take and Claim return when the queue stayed empty
	// for the whole wait.
	ErrEmpty = errors.New("queue empty")
	// ErrAlreadyHeld is what Lock, AcquireSemaphore and Campaign return
	// when the same Lease already holds, or is acquiring, that name: the
	// gateway would answer the second call with the first one's grant (an
	// acquire is idempotent per lease), and two holders would share one
	// token.
	ErrAlreadyHeld = errors.New("one lease is one holder; take a lease per concurrent holder")
	// ErrUnreachable is what a call returns when no connection to the
	// gateway could be made (refused, no route, unknown host) in
	// 1+DefaultConnectRetries attempts (WithConnectRetries): nothing was
	// sent. The error names the gateway's URL and the last failure.
	ErrUnreachable = errors.New("gateway unreachable")
)

// codeOfStatus names the code of an error answer that is not a problem
// document (a proxy's page, say).
func codeOfStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request"
	case http.StatusUnauthorized:
		return "unauthenticated"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusGone:
		return "lease_expired"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusUnsupportedMediaType:
		return "unsupported_media_type"
	case http.StatusTooManyRequests:
		return "too_many"
	case http.StatusInsufficientStorage:
		return "queue_full"
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return "unavailable"
	}
	return "internal"
}

// problemOf reads an error answer into an *Error.
func problemOf(resp *http.Response, body []byte) *Error {
	e := &Error{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header)}
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) == nil && doc["code"] != nil {
		e.Extra = map[string]json.RawMessage{}
		for k, v := range doc {
			switch k {
			case "code":
				_ = json.Unmarshal(v, &e.Code)
			case "title":
				_ = json.Unmarshal(v, &e.Title)
			case "detail":
				_ = json.Unmarshal(v, &e.Detail)
			case "instance":
				_ = json.Unmarshal(v, &e.Instance)
			case "type", "status":
				// known members: the status is the answer's, the type is the code's
			default:
				e.Extra[k] = v
			}
		}
		if e.Code != "" {
			return e
		}
	}
	e.Code = codeOfStatus(resp.StatusCode)
	e.Title = http.StatusText(resp.StatusCode)
	text := strings.TrimSpace(string(body))
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	if len(text) > 200 {
		text = text[:200]
	}
	e.Detail = fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if text != "" {
		e.Detail += ": " + text
	}
	return e
}

// retryAfter reads Retry-After in seconds (the only form the gateway sends).
func retryAfter(h http.Header) time.Duration {
	s := h.Get("Retry-After")
	if s == "" {
		return 0
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
