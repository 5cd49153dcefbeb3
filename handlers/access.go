package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/auth/peers"
	"github.com/zkgate/zkgate/recipes"
)

// Who a request's caller is and what its token may do are the auth
// package's; these are the names of it the handlers use.
type Caller = auth.Caller

// LevelRead is the level of a permission to read.
const LevelRead = auth.LevelRead

// CallerOf returns the caller of a request, or nil when tokens are off.
func CallerOf(ctx context.Context) *Caller { return auth.CallerOf(ctx) }

// ownerOf is the owner to record on a lease made for a request.
func ownerOf(ctx context.Context) string {
	if c := CallerOf(ctx); c != nil {
		return c.Name
	}
	return ""
}

// Problem codes of authentication, authorization and limits.
const (
	CodeUnauthenticated = auth.CodeUnauthenticated
	CodeForbidden       = auth.CodeForbidden
	CodeTooMany         = peers.CodeTooMany
)

// Forbidden is the error of a token that may not do what it asked.
func Forbidden(format string, args ...any) error { return auth.Forbidden(format, args...) }

// peersOnly refuses a request that is not a proven call of another
// gateway, on a route of the gateways alone: only one may do what.
func peersOnly(r *http.Request, what string) error {
	if peers.CallOf(r.Context()) == nil {
		return Forbidden("only another gateway of this root may %s", what)
	}
	return nil
}

// mayUse says whether the request's caller may act with lease l (see
// auth.UseOfLease).
func (a *API) mayUse(ctx context.Context, l *recipes.Lease) error {
	return a.leaseAccess(ctx, l, auth.UseOfLease)
}

// mayRead says whether the caller may read lease l (see auth.ReadOfLease).
func (a *API) mayRead(ctx context.Context, l *recipes.Lease) error {
	return a.leaseAccess(ctx, l, auth.ReadOfLease)
}

// leaseAccess asks check about the caller and lease l, and writes an
// admin's action on another token's lease to the audit log.
func (a *API) leaseAccess(ctx context.Context, l *recipes.Lease, check func(*Caller, *recipes.Lease) (bool, error)) error {
	c := CallerOf(ctx)
	byAdmin, err := check(c, l)
	if byAdmin {
		a.audit(ctx, c, l)
	}
	return err
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
