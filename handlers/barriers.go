package handlers

import (
	"context"
	"net/http"
	"time"

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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, err := nameParam(r)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		created, err := a.Barriers.Raise(r.Context(), name)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		writeJSON(w, status, recipes.BarrierState{Name: name, Raised: true})
	})
}

// LowerBarrier is DELETE /v1/barriers/{name}.
func (a *API) LowerBarrier() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, err := nameParam(r)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		if err := a.Barriers.Lower(r.Context(), name); err != nil {
			WriteError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// WaitBarrier is POST /v1/barriers/{name}/wait?wait=.
func (a *API) WaitBarrier() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var wait time.Duration
		name, err := a.parse(r, &wait, nil)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		st, err := a.Barriers.Wait(r.Context(), name, wait)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
}

// BarrierState is GET /v1/barriers/{name}, a blocking read.
func (a *API) BarrierState() http.Handler {
	return a.blockingRead(func(ctx context.Context, name string, index int64, wait time.Duration) (any, int64, error) {
		st, err := a.Barriers.State(ctx, name, index, wait)
		return st, st.Index, err
	})
}

// ListBarriers is GET /v1/barriers: the barriers that are up.
func (a *API) ListBarriers() http.Handler {
	return a.list("barriers", func(ctx context.Context, p recipes.Page) (any, string, error) {
		return a.Barriers.List(ctx, p)
	})
}

type enterBody struct {
	leaseRef
	Member string `json:"member"`
	Count  *int   `json:"count"`
}

// EnterDoubleBarrier is POST /v1/double-barriers/{name}/enter?wait=.
func (a *API) EnterDoubleBarrier() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var wait time.Duration
		var body enterBody
		name, err := a.parse(r, &wait, &body)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		if body.Member == "" || body.Count == nil {
			WriteError(w, r, invalid("member and count are required"))
			return
		}
		if *body.Count < 1 || *body.Count > recipes.MaxBarrierCount {
			WriteError(w, r, invalid("count must be between 1 and %d", recipes.MaxBarrierCount))
			return
		}
		var st recipes.DoubleBarrierState
		// A timed-out enter keeps its membership for a later enter to
		// resume: a lease made for it stays too.
		lease, err := a.actFor(r.Context(), body.leaseRef, func(lease *recipes.Lease) (err error) {
			st, err = a.DoubleBarriers.Enter(r.Context(), lease, name, body.Member, *body.Count, wait)
			return err
		}, func(err error) bool { return recipes.ErrorCode(err) == recipes.CodeTimeout })
		if err != nil {
			WriteError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, enterAnswer{DoubleBarrierState: st, Lease: lease.ID})
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

// LeaveDoubleBarrier is POST /v1/double-barriers/{name}/leave?wait=.
func (a *API) LeaveDoubleBarrier() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var wait time.Duration
		var body struct {
			Lease  string `json:"lease"`
			Member string `json:"member"`
		}
		name, err := a.parse(r, &wait, &body)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		if body.Member == "" {
			WriteError(w, r, invalid("member is required"))
			return
		}
		lease, _, err := a.resolve(r.Context(), leaseRef{Lease: body.Lease}, false)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		st, err := a.DoubleBarriers.Leave(r.Context(), lease, name, body.Member, wait)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
}

// DoubleBarrierState is GET /v1/double-barriers/{name}, a blocking read.
func (a *API) DoubleBarrierState() http.Handler {
	return a.blockingRead(func(ctx context.Context, name string, index int64, wait time.Duration) (any, int64, error) {
		st, err := a.DoubleBarriers.State(ctx, name, index, wait)
		return st, st.Index, err
	})
}

// ListDoubleBarriers is GET /v1/double-barriers.
func (a *API) ListDoubleBarriers() http.Handler {
	return a.list("double_barriers", func(ctx context.Context, p recipes.Page) (any, string, error) {
		return a.DoubleBarriers.List(ctx, p)
	})
}
