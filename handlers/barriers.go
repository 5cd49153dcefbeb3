package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/zkgate/zkgate/kinds"
	"github.com/zkgate/zkgate/recipes"
)

// BarrierService is what the handlers need of the barriers.
type BarrierService interface {
	Raise(ctx context.Context, name string) (bool, error)
	Lower(ctx context.Context, name string) error
	Wait(ctx context.Context, name string, wait time.Duration) (recipes.BarrierState, error)
	State(ctx context.Context, name string, index int64, wait time.Duration) (recipes.BarrierState, error)
	List(ctx context.Context, p recipes.Page) ([]recipes.BarrierState, string, error)
}

// DoubleBarrierService is what the handlers need of the double barriers.
type DoubleBarrierService interface {
	Enter(ctx context.Context, lease *recipes.Lease, name, member string, count int, wait time.Duration) (recipes.DoubleBarrierState, error)
	Leave(ctx context.Context, lease *recipes.Lease, name, member string, wait time.Duration) (recipes.DoubleBarrierState, error)
	State(ctx context.Context, name string, index int64, wait time.Duration) (recipes.DoubleBarrierState, error)
	List(ctx context.Context, p recipes.Page) ([]recipes.DoubleBarrierState, string, error)
}

// RaiseBarrier is PUT /v1/barriers/{name}: 201 when raised now, 200 if it was up.
func (a *API) RaiseBarrier() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		name, err := nameParam(r)
		if err != nil {
			return err
		}
		created, err := a.Barriers.Raise(r.Context(), name)
		if err != nil {
			return err
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		writeJSON(w, status, recipes.BarrierState{Name: name, Raised: true})
		return nil
	})
}

// LowerBarrier is DELETE /v1/barriers/{name}.
func (a *API) LowerBarrier() http.Handler { return a.nameAction(a.Barriers.Lower) }

// WaitBarrier is POST /v1/barriers/{name}/wait?wait=.
func (a *API) WaitBarrier() http.Handler { return waitCall(a, a.Barriers.Wait, writeOK) }

// BarrierState is GET /v1/barriers/{name}, a blocking read.
func (a *API) BarrierState() http.Handler {
	return blockingRead(a, a.Barriers.State, func(st recipes.BarrierState) int64 { return st.Index })
}

// ListBarriers is GET /v1/barriers: the barriers that are up.
func (a *API) ListBarriers() http.Handler { return list(kinds.Barriers.Name, a.Barriers.List) }

type enterBody struct {
	leaseRef
	Member string `json:"member"`
	Count  *int   `json:"count"`
}

// check refuses a body without a member, or with a count out of range.
func (b *enterBody) check() error {
	if b.Member == "" || b.Count == nil {
		return invalid("member and count are required")
	}
	return between("count", b.Count, recipes.MaxBarrierCount)
}

// EnterDoubleBarrier is POST /v1/double-barriers/{name}/enter?wait=. A
// timed-out enter keeps its membership for a later enter to resume: a
// lease made for it stays too.
func (a *API) EnterDoubleBarrier() http.Handler {
	return leaseCall(a, func(ctx context.Context, lease *recipes.Lease, name string, b *enterBody, wait time.Duration) (recipes.DoubleBarrierState, error) {
		return a.DoubleBarriers.Enter(ctx, lease, name, b.Member, *b.Count, wait)
	}, func(err error) bool { return recipes.ErrorCode(err) == recipes.CodeTimeout },
		func(w http.ResponseWriter, st recipes.DoubleBarrierState, lease *recipes.Lease, err error) error {
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, enterAnswer{DoubleBarrierState: st, Lease: lease.ID})
			return nil
		})
}

type enterAnswer struct {
	recipes.DoubleBarrierState
	Lease string `json:"lease"`
}

// withLease names in a problem the lease made for the request.
func withLease(err error, lease *recipes.Lease) error {
	if e, ok := err.(*recipes.Error); ok {
		if e.Extra == nil {
			e.Extra = map[string]any{}
		}
		e.Extra["lease"] = lease.ID
	}
	return err
}

type leaveBody struct {
	heldRef
	Member string `json:"member"`
}

// check refuses a body without a member.
func (b *leaveBody) check() error {
	if b.Member == "" {
		return invalid("member is required")
	}
	return nil
}

// LeaveDoubleBarrier is POST /v1/double-barriers/{name}/leave?wait=.
func (a *API) LeaveDoubleBarrier() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		var wait time.Duration
		var body leaveBody
		name, lease, away, err := a.parseHeld(r, &wait, &body)
		if err != nil {
			return err
		}
		if away != nil {
			return a.forward(w, r, away)
		}
		st, err := a.DoubleBarriers.Leave(r.Context(), lease, name, body.Member, wait)
		return writeOK(w, st, err)
	})
}

// DoubleBarrierState is GET /v1/double-barriers/{name}, a blocking read.
func (a *API) DoubleBarrierState() http.Handler {
	return blockingRead(a, a.DoubleBarriers.State, func(st recipes.DoubleBarrierState) int64 { return st.Index })
}

// ListDoubleBarriers is GET /v1/double-barriers.
func (a *API) ListDoubleBarriers() http.Handler {
	return list("double_barriers", a.DoubleBarriers.List)
}
