package recipes

import (
	"errors"
	"fmt"
)

// Code names a class of failure that a client can act on.
type Code string

// The codes of the problem documents (docs/api.md, openapi.yaml). The HTTP
// layer maps each to one status, in one place (handlers/problem.go).
const (
	CodeInvalid       Code = "invalid_request"
	CodeLeaseNotFound Code = "lease_not_found"
	CodeNotFound      Code = "not_found"
	CodeTimeout       Code = "timeout"
	CodeNotHeld       Code = "not_held"
	CodeNotLeader     Code = "not_leader"
	CodeNotClaimed    Code = "not_claimed"
	CodeLeaseExpired  Code = "lease_expired"
	CodeTooLarge      Code = "too_large"
	CodeUnavailable   Code = "unavailable"
	CodeLimitMismatch Code = "limit_mismatch"
	CodeCountMismatch Code = "count_mismatch"
	CodeStaleToken    Code = "stale_token"
	CodeWouldDeadlock Code = "would_deadlock"
	CodeDeadlock      Code = "deadlock"
	CodeNotEmpty      Code = "not_empty"
	CodeQueueFull     Code = "queue_full"
	CodeInternal      Code = "internal"

	// The counters' own (recipes/counters.go).
	CodeVersionMismatch Code = "version_mismatch"
	CodeFormatMismatch  Code = "format_mismatch"
	CodeOutOfRange      Code = "out_of_range"
)

// Error is the one error type of the recipes. Extra carries state that helps
// the client (current holders, its former position...) and is merged into the
// problem document by the HTTP layer.
type Error struct {
	Code   Code
	Detail string
	Extra  map[string]any
	Err    error // the underlying cause, logged but never shown to clients for CodeInternal
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Detail, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches an *Error target with no detail by code alone (errUnavailable),
// and any other *Error target by identity.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Detail == "" && t.Extra == nil && t.Err == nil && t.Code == e.Code
}

// Errorf builds an *Error with a formatted detail.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the Code of err, CodeInternal for errors that carry none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

func internal(err error, what string) *Error {
	return &Error{Code: CodeInternal, Detail: what, Err: err}
}

// ErrMoving answers a request for a lease that is being handed over to
// another gateway: retry, shortly, through any gateway.
var ErrMoving = &Error{Code: CodeUnavailable, Detail: "the lease is moving to another gateway; retry"}

var errWaitElapsed = errors.New("wait elapsed")
