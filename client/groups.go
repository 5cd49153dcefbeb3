package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// GroupMember is one member of a group. Foreign marks a member another
// client made (kazoo's Party or ShallowParty, Curator's GroupMember), with
// what that client wrote as Value.
type GroupMember struct {
	Member  string    `json:"member"`
	Node    string    `json:"node"` // its znode under the group
	Lease   string    `json:"lease,omitempty"`
	Holder  string    `json:"holder,omitempty"`
	Gateway string    `json:"gateway,omitempty"`
	Value   string    `json:"value,omitempty"`
	Since   time.Time `json:"since"`
	Foreign bool      `json:"foreign"`
}

// GroupState is a group's members, sorted by member id.
type GroupState struct {
	Name    string        `json:"name"`
	Members []GroupMember `json:"members"`
	Member  string        `json:"member,omitempty"` // join only: the member joined
	Lease   string        `json:"lease,omitempty"`  // join only: the lease of the membership
	Index   int64         `json:"-"`
}

func (s *GroupState) setIndex(i int64) { s.Index = i }

// Join makes member (the lease's id for "") a member of the group name,
// with value as its data, until it leaves or the lease ends. Joining again
// with the same member and value finds the same member, so network
// failures are retried.
func (l *Lease) Join(ctx context.Context, name, member, value string) (*GroupState, error) {
	path, err := namePath("groups", name, "join")
	if err != nil {
		return nil, err
	}
	if member != "" {
		if err := ValidName(member); err != nil {
			return nil, err
		}
	}
	ctx, cancel := l.bind(ctx)
	defer cancel()
	body := map[string]any{"lease": l.id}
	if member != "" {
		body["member"] = member
	}
	if value != "" {
		body["value"] = value
	}
	resp, err := l.do(ctx, request{method: http.MethodPost, path: path, retry: true, grant: true, body: body})
	if err != nil {
		return nil, err
	}
	var st GroupState
	return &st, resp.decode(&st)
}

// LeaveGroup takes member (the lease's id for "") out of the group name. A
// repeat that finds the member gone is the success it repeats.
func (l *Lease) LeaveGroup(ctx context.Context, name, member string) error {
	path, err := namePath("groups", name, "leave")
	if err != nil {
		return err
	}
	body := map[string]any{"lease": l.id}
	if member != "" {
		if err := ValidName(member); err != nil {
			return err
		}
		body["member"] = member
	}
	ctx, cancel := l.bind(ctx)
	defer cancel()
	resp, err := l.do(ctx, request{method: http.MethodPost, path: path, retry: true, okOnRetry: []string{"not_held"}, body: body})
	if err != nil {
		return err
	}
	if resp.status != http.StatusNoContent {
		return fmt.Errorf("leave group %s: status %d", name, resp.status)
	}
	return nil
}

// GroupState reads the members of the group name (none for a group no one
// is in).
func (c *Client) GroupState(ctx context.Context, name string) (GroupState, error) {
	var st GroupState
	return st, c.state(ctx, "groups", name, nil, &st)
}

// Groups lists the groups that have members, in name order, reading every
// page of the gateway's list (or as many as Limit allows).
func (c *Client) Groups(ctx context.Context, opts ...ListOption) ([]GroupState, error) {
	return listAll[GroupState](ctx, c, "groups", "groups", nil, opts)
}

// WatchGroup watches the members of the group name: a state each time a
// member joins or leaves.
func (c *Client) WatchGroup(ctx context.Context, name string) (*Watcher[GroupState], error) {
	return watch[GroupState](ctx, c, "groups", name, nil, nil)
}
