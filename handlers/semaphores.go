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
func (a *API) ListSemaphores() http.Handler { return list("semaphores", a.Semaphores.List) }

type semAcquireBody struct {
	leaseRef
	Limit *int `json:"limit"`
}

// AcquireSemaphore is POST /v1/semaphores/{name}/acquire?wait=.
func (a *API) AcquireSemaphore() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		var wait time.Duration
		var body semAcquireBody
		name, err := a.parse(r, &wait, &body)
		if err != nil {
			return err
		}
		if body.Limit == nil {
			return invalid("limit is required")
		}
		if *body.Limit < 1 || *body.Limit > recipes.MaxSemaphoreLimit {
			return invalid("limit must be between 1 and %d", recipes.MaxSemaphoreLimit)
		}
		grant, _, err := actFor(a, r.Context(), body.leaseRef, func(lease *recipes.Lease) (recipes.SemaphoreGrant, error) {
			return a.Semaphores.Acquire(r.Context(), lease, name, *body.Limit, wait)
		}, nil)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, grant)
		return nil
	})
}

// ReleaseSemaphore is POST /v1/semaphores/{name}/release.
func (a *API) ReleaseSemaphore() http.Handler { return a.leaseAction(a.Semaphores.Release) }

// SemaphoreState is GET /v1/semaphores/{name}, a blocking read.
func (a *API) SemaphoreState() http.Handler {
	return blockingRead(a, a.Semaphores.State, func(st recipes.SemaphoreState) int64 { return st.Index })
}
