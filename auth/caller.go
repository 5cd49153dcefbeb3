package auth

import (
	"context"
	"fmt"
	"strconv"

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
// tokens there is none, and anyone may do anything.
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
	// PermitsSome reports whether it holds level on some name of kind.
	PermitsSome func(kind string, level Level) bool
}

// MaySome reports whether the caller holds level on some name of kind.
func (c *Caller) MaySome(kind string, level Level) bool {
	return c.PermitsSome != nil && c.PermitsSome(kind, level)
}

// May reports whether the caller holds level on kind and name.
func (c *Caller) May(kind, name string, level Level) bool {
	return c.Permits != nil && c.Permits(kind, name, level)
}

// MayAll is nil when the caller holds level on kind for each of names, or
// the refusal naming the first it lacks (a route that names its targets in
// its body, see Need.Body). A nil caller (tokens off) may do anything.
func (c *Caller) MayAll(kind string, level Level, names ...string) error {
	if c == nil {
		return nil
	}
	for _, name := range names {
		if !c.May(kind, name, level) {
			return Forbidden("token %q lacks the permission %s", c.Name, Permission{Kind: kind, Prefix: name, Level: level})
		}
	}
	return nil
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

// Problem codes of authentication and authorization.
const (
	CodeUnauthenticated recipes.Code = "unauthenticated"
	CodeForbidden       recipes.Code = "forbidden"
)

// Clip bounds what a log line or a problem carries of client input (a
// method, a path): at most n bytes of s, then how long s was. Log
// handlers escape control characters; Clip bounds the size.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// Forbidden is the error of a token that may not do what it asked.
func Forbidden(format string, args ...any) error {
	return &recipes.Error{Code: CodeForbidden, Detail: fmt.Sprintf(format, args...)}
}

// UseOfLease says whether caller c (nil: tokens are off) may act with the
// lease l: the token that made it may, and a token with admin on what the
// route acts on. byAdmin reports the latter, an action on another token's
// lease, which the caller writes to the audit log.
func UseOfLease(c *Caller, l *recipes.Lease) (byAdmin bool, err error) {
	if c == nil || l.Owner == c.Name {
		return false, nil
	}
	if c.May(c.Kind, c.Target, LevelAdmin) {
		return true, nil
	}
	return false, &recipes.Error{Code: CodeForbidden, Detail: "lease " + strconv.Quote(l.ID) + " belongs to another token",
		Extra: map[string]any{"lease": l.ID}}
}

// ReadOfLease is UseOfLease for reading l: a token with read on it may
// too.
func ReadOfLease(c *Caller, l *recipes.Lease) (byAdmin bool, err error) {
	if c != nil && c.Granted {
		return false, nil
	}
	return UseOfLease(c, l)
}
