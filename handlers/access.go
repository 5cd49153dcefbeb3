package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// Level is what a permission allows, each level including the ones below.
type Level int

// The levels of a permission.
const (
	LevelNone Level = iota
	// LevelRead: GETs, blocking reads, waiting for a barrier, the dashboard.
	LevelRead
	// LevelWrite: acquire, release, campaign, produce, take, claim...
	LevelWrite
	// LevelAdmin: write, and act with leases that other tokens made.
	LevelAdmin
)

func (l Level) String() string {
	switch l {
	case LevelRead:
		return "read"
	case LevelWrite:
		return "write"
	case LevelAdmin:
		return "admin"
	}
	return "none"
}

// Caller is the client token behind a request when tokens are on; without
// tokens there is none, and anyone may do anything, as before.
type Caller struct {
	// Name is the token's name: the owner of the leases it makes.
	Name string
	// Kind and Target are what the route acts on (a primitive kind and
	// name, or "leases" and a lease id); Route is its method and pattern.
	Kind, Target, Route string
	// RequestID names the request in the audit log.
	RequestID string
	// Granted says whether the token holds the route's own permission. It
	// is false only on routes of one lease, which its owner may use anyway.
	Granted bool
	// Permits reports whether the token holds level on kind and name.
	Permits func(kind, name string, level Level) bool
}

// May reports whether the caller holds level on kind and name.
func (c *Caller) May(kind, name string, level Level) bool {
	return c.Permits != nil && c.Permits(kind, name, level)
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the caller of a request, or nil when tokens are off.
func CallerOf(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

// ownerOf is the owner to record on a lease made for a request.
func ownerOf(ctx context.Context) string {
	if c := CallerOf(ctx); c != nil {
		return c.Name
	}
	return ""
}

// Problem codes of authentication, authorization and limits.
const (
	CodeUnauthenticated recipes.Code = "unauthenticated"
	CodeForbidden       recipes.Code = "forbidden"
	CodeTooMany         recipes.Code = "too_many"
)

// Forbidden is the error of a token that may not do what it asked.
func Forbidden(format string, args ...any) error {
	return &recipes.Error{Code: CodeForbidden, Detail: fmt.Sprintf(format, args...)}
}

// mayUse says whether the request's caller may act with lease l: the token
// that made it may, and a token with admin on what the route acts on. Such
// an admin action on another token's lease is written to the audit log.
func (a *API) mayUse(ctx context.Context, l *recipes.Lease) error {
	c := CallerOf(ctx)
	if c == nil || l.Owner == c.Name {
		return nil
	}
	if c.May(c.Kind, c.Target, LevelAdmin) {
		a.audit(ctx, c, l)
		return nil
	}
	return &recipes.Error{Code: CodeForbidden, Detail: "lease " + strconv.Quote(l.ID) + " belongs to another token",
		Extra: map[string]any{"lease": l.ID}}
}

// mayRead says whether the caller may read lease l: its owner, a token with
// read on it, or an admin.
func (a *API) mayRead(ctx context.Context, l *recipes.Lease) error {
	if c := CallerOf(ctx); c != nil && c.Granted {
		return nil
	}
	return a.mayUse(ctx, l)
}

// audit records an admin's action on another token's lease: the acting
// token by name (never its secret), the lease and its owner.
func (a *API) audit(ctx context.Context, c *Caller, l *recipes.Lease) {
	log := a.Audit
	if log == nil {
		log = slog.Default()
	}
	log.LogAttrs(ctx, slog.LevelInfo, "audit: admin acts on another token's lease",
		slog.String("audit", "admin_lease_action"), slog.String("actor", c.Name),
		slog.String("lease", l.ID), slog.String("owner", l.Owner), slog.String("route", c.Route),
		slog.String("target", c.Target), slog.String("request_id", c.RequestID))
}

// LimitError is a limit reached: 429 too_many with Retry-After, the body
// naming the limit.
type LimitError struct {
	Limit      string        // the flag that sets it, such as "max-leases-per-token"
	Max        float64       // its value
	RetryAfter time.Duration // rounded up to whole seconds, at least 1
	Detail     string
}

func (e *LimitError) Error() string { return e.Detail }

// problem is the problem document of the limit.
func (e *LimitError) problem() *recipes.Error {
	return &recipes.Error{Code: CodeTooMany, Detail: e.Detail,
		Extra: map[string]any{"exceeded": e.Limit, "max": e.Max}}
}

// retryAfterSeconds is what Retry-After says: whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}

// Unauthenticated answers 401 with the challenge of RFC 6750.
func Unauthenticated(w http.ResponseWriter, r *http.Request, invalidToken bool, detail string) {
	challenge := `Bearer realm="zkgate"`
	if invalidToken {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	Problem(w, r, CodeUnauthenticated, detail)
}
