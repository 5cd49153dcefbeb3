package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/zkgate/zkgate/kinds"
	"github.com/zkgate/zkgate/recipes"
)

// GroupService is what the handlers need of the groups.
type GroupService interface {
	Join(ctx context.Context, lease *recipes.Lease, name, member, value string) (recipes.GroupState, string, error)
	Leave(ctx context.Context, lease *recipes.Lease, name, member string) error
	State(ctx context.Context, name string, index int64, wait time.Duration) (recipes.GroupState, error)
	List(ctx context.Context, p recipes.Page) ([]recipes.GroupState, string, error)
}

type joinBody struct {
	leaseRef
	Member string `json:"member"`
	Value  string `json:"value"`
}

// joinAnswer is a join's answer: the group, the member id joined (the
// lease's id when the body named none) and the lease it is bound to.
type joinAnswer struct {
	recipes.GroupState
	Member string `json:"member"`
	Lease  string `json:"lease"`
}

// JoinGroup is POST /v1/groups/{name}/join: the lease's member joins at
// once (nothing to wait for), and stays until it leaves or the lease ends.
func (a *API) JoinGroup() http.Handler {
	type joined struct {
		st     recipes.GroupState
		member string
	}
	return leaseCall(a, func(ctx context.Context, lease *recipes.Lease, name string, b *joinBody, _ time.Duration) (joined, error) {
		// leaseCall's ?wait= is parsed, and not used: a join waits for no one.
		st, member, err := a.Groups.Join(ctx, lease, name, b.Member, b.Value)
		return joined{st, member}, err
	}, nil, func(w http.ResponseWriter, got joined, lease *recipes.Lease, err error) error {
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, joinAnswer{GroupState: got.st, Member: got.member, Lease: lease.ID})
		return nil
	})
}

type groupLeaveBody struct {
	heldRef
	Member string `json:"member"`
}

// LeaveGroup is POST /v1/groups/{name}/leave: 204 once the member's node is
// gone.
func (a *API) LeaveGroup() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		var body groupLeaveBody
		name, lease, away, err := a.parseHeld(r, nil, &body)
		if err != nil {
			return err
		}
		if away != nil {
			return a.forward(w, r, away)
		}
		if err := a.Groups.Leave(r.Context(), lease, name, body.Member); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

// GroupState is GET /v1/groups/{name}, a blocking read.
func (a *API) GroupState() http.Handler {
	return blockingRead(a, a.Groups.State, func(st recipes.GroupState) int64 { return st.Index })
}

// ListGroups is GET /v1/groups: the groups that have members.
func (a *API) ListGroups() http.Handler { return list(kinds.Groups.Name, a.Groups.List) }
