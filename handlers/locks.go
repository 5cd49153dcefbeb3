package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// LockService is what the handlers need of the locks.
type LockService interface {
	Acquire(ctx context.Context, lease *recipes.Lease, name, mode string, wait time.Duration) (recipes.LockGrant, error)
	Release(ctx context.Context, lease *recipes.Lease, name, mode string) error
	State(ctx context.Context, name string, index int64, wait time.Duration) (recipes.LockState, error)
	List(ctx context.Context, prefix string, p recipes.Page) ([]recipes.LockSummary, string, error)
	Fence(ctx context.Context, name string, token int64) (bool, error)
}

type acquireBody struct {
	leaseRef
	Mode string `json:"mode"`
}

// AcquireLock is POST /v1/locks/{name}/acquire?wait=.
func (a *API) AcquireLock() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var wait time.Duration
		var body acquireBody
		name, err := a.parse(r, &wait, &body)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		if _, err := recipes.ValidMode(body.Mode); err != nil {
			WriteError(w, r, err)
			return
		}
		var grant recipes.LockGrant
		_, err = a.actFor(r.Context(), body.leaseRef, func(lease *recipes.Lease) (err error) {
			grant, err = a.Locks.Acquire(r.Context(), lease, name, body.Mode, wait)
			return err
		}, nil)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, grant)
	})
}

type releaseBody struct {
	Lease string `json:"lease"`
	Mode  string `json:"mode"`
}

// ReleaseLock is POST /v1/locks/{name}/release.
func (a *API) ReleaseLock() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body releaseBody
		name, err := a.parse(r, nil, &body)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		lease, _, err := a.resolve(r.Context(), leaseRef{Lease: body.Lease}, false)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		if err := a.Locks.Release(r.Context(), lease, name, body.Mode); err != nil {
			WriteError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// LockState is GET /v1/locks/{name}, a blocking read.
func (a *API) LockState() http.Handler {
	return a.blockingRead(func(ctx context.Context, name string, index int64, wait time.Duration) (any, int64, error) {
		st, err := a.Locks.State(ctx, name, index, wait)
		return st, st.Index, err
	})
}

// ListLocks is GET /v1/locks?prefix=, a page at a time.
func (a *API) ListLocks() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prefix := r.URL.Query().Get("prefix")
		if prefix != "" {
			if err := recipes.ValidName(prefix); err != nil {
				WriteError(w, r, invalid("prefix: %s", err.(*recipes.Error).Detail))
				return
			}
		}
		a.list("locks", func(ctx context.Context, p recipes.Page) (any, string, error) {
			return a.Locks.List(ctx, prefix, p)
		}).ServeHTTP(w, r)
	})
}

// Fence is GET /v1/locks/{name}/fence?token=N.
func (a *API) Fence() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, err := nameParam(r)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		token, err := strconv.ParseInt(r.URL.Query().Get("token"), 10, 64)
		if err != nil || token <= 0 {
			WriteError(w, r, invalid("token must be a positive integer"))
			return
		}
		ok, err := a.Locks.Fence(r.Context(), name, token)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		if !ok {
			WriteError(w, r, &recipes.Error{Code: recipes.CodeStaleToken,
				Detail: "token " + strconv.FormatInt(token, 10) + " is not held on lock " + strconv.Quote(name),
				Extra:  map[string]any{"token": token}})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"name": name, "token": token, "current": true})
	})
}
