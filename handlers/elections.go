package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/zkgate/zkgate/kinds"
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
	return leaseCall(a, func(ctx context.Context, lease *recipes.Lease, name string, b *campaignBody, wait time.Duration) (recipes.Campaign, error) {
		c, err := a.Elections.Campaign(ctx, lease, name, b.Value, wait)
		sessionsFor(ctx, name, &c)
		return c, err
	}, nil, func(w http.ResponseWriter, c recipes.Campaign, _ *recipes.Lease, err error) error {
		if err != nil {
			return err
		}
		status := http.StatusOK
		if !c.Elected {
			status = http.StatusAccepted
		}
		writeJSON(w, status, c)
		return nil
	})
}

// Resign is POST /v1/elections/{name}/resign.
func (a *API) Resign() http.Handler { return a.leaseAction(a.Elections.Resign) }

type proclaimBody struct {
	heldRef
	Value *string `json:"value"`
}

// check refuses a body without a value ("" is one).
func (b *proclaimBody) check() error {
	if b.Value == nil {
		return invalid("value is required")
	}
	return nil
}

// Proclaim is PUT /v1/elections/{name}/value: only the leader may.
func (a *API) Proclaim() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		var body proclaimBody
		name, lease, away, err := a.parseHeld(r, nil, &body)
		if err != nil {
			return err
		}
		if away != nil {
			return a.forward(w, r, away)
		}
		c, err := a.Elections.Proclaim(r.Context(), lease, name, *body.Value)
		return writeOK(w, c, err)
	})
}

// ElectionState is GET /v1/elections/{name}, a blocking read.
func (a *API) ElectionState() http.Handler {
	return blockingRead(a, a.Elections.State, func(st recipes.ElectionState) int64 { return st.Index })
}

// ListElections is GET /v1/elections.
func (a *API) ListElections() http.Handler { return list(kinds.Elections.Name, a.Elections.List) }
