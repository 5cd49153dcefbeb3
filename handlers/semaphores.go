package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/zkgate/zkgate/kinds"
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
func (a *API) ListSemaphores() http.Handler { return list(kinds.Semaphores.Name, a.Semaphores.List) }

type semAcquireBody struct {
	leaseRef
	Limit *int `json:"limit"`
}

// check refuses a limit that is missing or out of range.
func (b *semAcquireBody) check() error {
	return between("limit", b.Limit, recipes.MaxSemaphoreLimit)
}

// AcquireSemaphore is POST /v1/semaphores/{name}/acquire?wait=.
func (a *API) AcquireSemaphore() http.Handler {
	return leaseCall(a, func(ctx context.Context, lease *recipes.Lease, name string, b *semAcquireBody, wait time.Duration) (recipes.SemaphoreGrant, error) {
		return a.Semaphores.Acquire(ctx, lease, name, *b.Limit, wait)
	}, nil, replyJSON)
}

// ReleaseSemaphore is POST /v1/semaphores/{name}/release.
func (a *API) ReleaseSemaphore() http.Handler { return a.leaseAction(a.Semaphores.Release) }

// SemaphoreState is GET /v1/semaphores/{name}, a blocking read.
func (a *API) SemaphoreState() http.Handler {
	return blockingRead(a, a.Semaphores.State, func(st recipes.SemaphoreState) int64 { return st.Index })
}
