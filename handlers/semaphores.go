package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// SemaphoreService is what the handlers need of the semaphores.
type SemaphoreService interface {
	Acquire(ctx context.Context, lease *recipes.Lease, name string, limit int, wait time.Duration) (recipes.SemaphoreGrant, error)
	Release(ctx context.Context, lease *recipes.Lease, name string) error
	State(ctx context.Context, name string, index int64, wait time.Duration) (recipes.SemaphoreState, error)
	List(ctx context.Context, p recipes.Page) ([]recipes.SemaphoreSummary, string, error)
}

// ListSemaphores is GET /v1/semaphores.
func (a *API) ListSemaphores() http.Handler {
	return a.list("semaphores", func(ctx context.Context, p recipes.Page) (any, string, error) {
		return a.Semaphores.List(ctx, p)
	})
}

type semAcquireBody struct {
	leaseRef
	Limit *int `json:"limit"`
}

// AcquireSemaphore is POST /v1/semaphores/{name}/acquire?wait=.
func (a *API) AcquireSemaphore() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var wait time.Duration
		var body semAcquireBody
		name, err := a.parse(r, &wait, &body)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		if body.Limit == nil {
			WriteError(w, r, invalid("limit is required"))
			return
		}
		if *body.Limit < 1 || *body.Limit > recipes.MaxSemaphoreLimit {
			WriteError(w, r, invalid("limit must be between 1 and %d", recipes.MaxSemaphoreLimit))
			return
		}
		var grant recipes.SemaphoreGrant
		_, err = a.actFor(r.Context(), body.leaseRef, func(lease *recipes.Lease) (err error) {
			grant, err = a.Semaphores.Acquire(r.Context(), lease, name, *body.Limit, wait)
			return err
		}, nil)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, grant)
	})
}

// ReleaseSemaphore is POST /v1/semaphores/{name}/release.
func (a *API) ReleaseSemaphore() http.Handler { return a.leaseAction(a.Semaphores.Release) }

// SemaphoreState is GET /v1/semaphores/{name}, a blocking read.
func (a *API) SemaphoreState() http.Handler {
	return a.blockingRead(func(ctx context.Context, name string, index int64, wait time.Duration) (any, int64, error) {
		st, err := a.Semaphores.State(ctx, name, index, wait)
		return st, st.Index, err
	})
}
