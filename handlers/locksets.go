package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/kinds"
	"github.com/zkgate/zkgate/recipes"
)

// lockSet is the part of a body that names a set of locks.
type lockSet struct {
	Locks []recipes.LockRequest `json:"locks"`
}

func (s *lockSet) check() error {
	_, err := recipes.ValidLockSet(s.Locks)
	return err
}

// names are the names of the set's locks.
func (s *lockSet) names() []string {
	out := make([]string, len(s.Locks))
	for i, r := range s.Locks {
		out[i] = r.Name
	}
	return out
}

// mayWrite checks that the caller may write each lock of the set (the
// front door checked only that it may write some lock, see rule.body).
func (s *lockSet) mayWrite(ctx context.Context) error {
	return CallerOf(ctx).MayAll(kinds.Locks.Permission(), auth.LevelWrite, s.names()...)
}

type acquireSetBody struct {
	leaseRef
	lockSet
}

func (b *acquireSetBody) check() error { return b.lockSet.check() }

// lockSetGrant answers a set's acquire: its grants, in the order they were
// taken (by name).
type lockSetGrant struct {
	Lease string              `json:"lease"`
	Locks []recipes.LockGrant `json:"locks"`
}

// NameWaits counts a waiting request against the per-name waiter cap
// (--max-waiters-per-name) of each of names, which its body gave: the front
// door, which counted it before the body was read, could not. done gives
// them back; an error is the cap's refusal.
type NameWaits func(names []string) (done func(), err error)

type nameWaitsKey struct{}

// WithNameWaits returns ctx carrying f, for the handler to call.
func WithNameWaits(ctx context.Context, f NameWaits) context.Context {
	return context.WithValue(ctx, nameWaitsKey{}, f)
}

// waitOnNames counts the request of ctx as waiting on names (see
// NameWaits); nothing when no cap was given.
func waitOnNames(ctx context.Context, names []string) (done func(), err error) {
	if f, _ := ctx.Value(nameWaitsKey{}).(NameWaits); f != nil {
		return f(names)
	}
	return func() {}, nil
}

// AcquireLocks is POST /v1/locks/acquire?wait=: a set of locks, all or
// nothing (see recipes.Locks.AcquireAll). A set that waits counts against
// each of its locks' waiter caps, as a single acquire does against its own.
func (a *API) AcquireLocks() http.Handler {
	return leaseCallOf[acquireSetBody](a, noName, func(ctx context.Context, lease *recipes.Lease, _ string, b *acquireSetBody, wait time.Duration) (lockSetGrant, error) {
		if err := b.mayWrite(ctx); err != nil {
			return lockSetGrant{}, err
		}
		if wait > 0 {
			done, err := waitOnNames(ctx, b.names())
			if err != nil {
				return lockSetGrant{}, err
			}
			defer done()
		}
		grants, err := a.Locks.AcquireAll(ctx, lease, b.Locks, wait)
		return lockSetGrant{Lease: lease.ID, Locks: grants}, err
	}, nil, replyJSON)
}

type releaseSetBody struct {
	heldRef
	lockSet
}

func (b *releaseSetBody) check() error { return b.lockSet.check() }

// ReleaseLocks is POST /v1/locks/release: every lock of the set.
func (a *API) ReleaseLocks() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		var body releaseSetBody
		_, lease, away, err := a.parseHeldOf(r, noName, nil, &body)
		if err != nil {
			return err
		}
		if away != nil {
			return a.forward(w, r, away)
		}
		if err := body.mayWrite(r.Context()); err != nil {
			return err
		}
		if err := a.Locks.ReleaseAll(r.Context(), lease, body.Locks); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}
