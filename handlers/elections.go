package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// ElectionService is what the handlers need of the elections.
type ElectionService interface {
	Campaign(ctx context.Context, lease *recipes.Lease, name, value string, wait time.Duration) (recipes.Campaign, error)
	Resign(ctx context.Context, lease *recipes.Lease, name string) error
	Proclaim(ctx context.Context, lease *recipes.Lease, name, value string) (recipes.Campaign, error)
	State(ctx context.Context, name string, index int64, wait time.Duration) (recipes.ElectionState, error)
	List(ctx context.Context, p recipes.Page) ([]recipes.ElectionSummary, string, error)
}

type campaignBody struct {
	leaseRef
	Value string `json:"value"`
}

// Campaign is POST /v1/elections/{name}/campaign?wait=: 200 when elected,
// 202 when the wait ends first (the candidacy stays).
func (a *API) Campaign() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var wait time.Duration
		var body campaignBody
		name, err := a.parse(r, &wait, &body)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		var c recipes.Campaign
		_, err = a.actFor(r.Context(), body.leaseRef, func(lease *recipes.Lease) (err error) {
			c, err = a.Elections.Campaign(r.Context(), lease, name, body.Value, wait)
			return err
		}, nil)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		status := http.StatusOK
		if !c.Elected {
			status = http.StatusAccepted
		}
		writeJSON(w, status, c)
	})
}

// Resign is POST /v1/elections/{name}/resign.
func (a *API) Resign() http.Handler { return a.leaseAction(a.Elections.Resign) }

// Proclaim is PUT /v1/elections/{name}/value: only the leader may.
func (a *API) Proclaim() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Lease string  `json:"lease"`
			Value *string `json:"value"`
		}
		name, err := a.parse(r, nil, &body)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		if body.Value == nil {
			WriteError(w, r, invalid("value is required"))
			return
		}
		lease, _, err := a.resolve(r.Context(), leaseRef{Lease: body.Lease}, false)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		c, err := a.Elections.Proclaim(r.Context(), lease, name, *body.Value)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, c)
	})
}

// ElectionState is GET /v1/elections/{name}, a blocking read.
func (a *API) ElectionState() http.Handler {
	return a.blockingRead(func(ctx context.Context, name string, index int64, wait time.Duration) (any, int64, error) {
		st, err := a.Elections.State(ctx, name, index, wait)
		return st, st.Index, err
	})
}

// ListElections is GET /v1/elections.
func (a *API) ListElections() http.Handler {
	return a.list("elections", func(ctx context.Context, p recipes.Page) (any, string, error) {
		return a.Elections.List(ctx, p)
	})
}

// leaseAction serves POST .../{name}/verb with a body of {"lease"}.
func (a *API) leaseAction(fn func(ctx context.Context, lease *recipes.Lease, name string) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Lease string `json:"lease"`
		}
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
		if err := fn(r.Context(), lease, name); err != nil {
			WriteError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// blockingRead serves GET .../{name}?index=&wait=.
func (a *API) blockingRead(read func(ctx context.Context, name string, index int64, wait time.Duration) (any, int64, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, err := nameParam(r)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		index, wait, err := blockingParams(r, a.Limits.MaxWait)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		st, idx, err := read(r.Context(), name, index, wait)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		writeIndexed(w, idx, st)
	})
}
