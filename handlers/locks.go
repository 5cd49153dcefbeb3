package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/zkgate/zkgate/kinds"
	"github.com/zkgate/zkgate/recipes"
)

// LockService is what the handlers need of the locks.
type LockService interface {
	Acquire(ctx context.Context, lease *recipes.Lease, name, mode string, wait time.Duration) (recipes.LockGrant, error)
	Release(ctx context.Context, lease *recipes.Lease, name, mode string) error
	State(ctx context.Context, name string, index int64, wait time.Duration) (recipes.LockState, error)
	List(ctx context.Context, prefix string, p recipes.Page) ([]recipes.LockSummary, string, error)
	Fence(ctx context.Context, name string, token int64) (bool, error)
	// The sets of locks, all or nothing (see locksets.go).
	AcquireAll(ctx context.Context, lease *recipes.Lease, set []recipes.LockRequest, wait time.Duration) ([]recipes.LockGrant, error)
	ReleaseAll(ctx context.Context, lease *recipes.Lease, set []recipes.LockRequest) error
}

type acquireBody struct {
	leaseRef
	Mode string `json:"mode"`
}

// check refuses a mode the locks do not have.
func (b *acquireBody) check() error {
	_, err := recipes.ValidMode(b.Mode)
	return err
}

// AcquireLock is POST /v1/locks/{name}/acquire?wait=.
func (a *API) AcquireLock() http.Handler {
	return leaseCall(a, func(ctx context.Context, lease *recipes.Lease, name string, b *acquireBody, wait time.Duration) (recipes.LockGrant, error) {
		return a.Locks.Acquire(ctx, lease, name, b.Mode, wait)
	}, nil, replyJSON)
}

type releaseBody struct {
	heldRef
	Mode string `json:"mode"`
}

// ReleaseLock is POST /v1/locks/{name}/release.
func (a *API) ReleaseLock() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		var body releaseBody
		name, lease, away, err := a.parseHeld(r, nil, &body)
		if err != nil {
			return err
		}
		if away != nil {
			return a.forward(w, r, away)
		}
		if err := a.Locks.Release(r.Context(), lease, name, body.Mode); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

// LockState is GET /v1/locks/{name}, a blocking read.
func (a *API) LockState() http.Handler {
	return blockingRead(a, a.Locks.State, func(st recipes.LockState) int64 { return st.Index })
}

// ListLocks is GET /v1/locks?prefix=, a page at a time.
func (a *API) ListLocks() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		prefix := r.URL.Query().Get("prefix")
		if prefix != "" {
			if err := recipes.ValidName(prefix); err != nil {
				return invalid("prefix: %s", err.(*recipes.Error).Detail)
			}
		}
		list(kinds.Locks.Name, func(ctx context.Context, p recipes.Page) ([]recipes.LockSummary, string, error) {
			return a.Locks.List(ctx, prefix, p)
		}).ServeHTTP(w, r)
		return nil
	})
}

// Fence is GET /v1/locks/{name}/fence?token=N.
func (a *API) Fence() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		name, err := nameParam(r)
		if err != nil {
			return err
		}
		token, err := strconv.ParseInt(r.URL.Query().Get("token"), 10, 64)
		if err != nil || token <= 0 {
			return invalid("token must be a positive integer")
		}
		ok, err := a.Locks.Fence(r.Context(), name, token)
		if err != nil {
			return err
		}
		if !ok {
			return &recipes.Error{Code: recipes.CodeStaleToken,
				Detail: "token " + strconv.FormatInt(token, 10) + " is not held on lock " + strconv.Quote(name),
				Extra:  map[string]any{"token": token}}
		}
		writeJSON(w, http.StatusOK, map[string]any{"name": name, "token": token, "current": true})
		return nil
	})
}
