package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Campaign makes the lease a candidate of the election name with value
// (shown to everyone, at most 64 KiB) and waits up to wait to be elected.
// Elected is true, with a fencing Token, when the lease leads; otherwise
// the wait ended first and Position and Leader say where it stands. The
// candidacy stays until Resign or the end of the lease, so calling
// Campaign again resumes the wait; it is idempotent per lease, and network
// failures are retried as for Lock. A candidacy made by a call whose
// context ends before the answer is withdrawn by the gateway. While a
// Campaign of name is under way, or the lease leads name, another Campaign
// of it through the lease fails with ErrAlreadyHeld (until Resign).
func (l *Lease) Campaign(ctx context.Context, name, value string, wait time.Duration) (*Campaign, error) {
	path, err := namePath("elections", name, "campaign")
	if err != nil {
		return nil, err
	}
	k := holdKey{kind: "election", name: name}
	c := Campaign{lease: l}
	if err := l.acquire(ctx, k, path, wait, map[string]string{"lease": l.id, "value": value}, &c); err != nil {
		return nil, err
	}
	if !c.Elected {
		// A candidate in line holds nothing yet: Campaign again resumes.
		l.drop(k)
	}
	return &c, nil
}

// Lead campaigns in rounds of round (the gateway's --max-wait at most)
// until the lease is elected or ctx ends, and returns the leadership. If
// ctx ends first the candidacy is withdrawn (Resign) before returning
// ctx's error.
func (l *Lease) Lead(ctx context.Context, name, value string, round time.Duration) (*Campaign, error) {
	if round <= 0 {
		return nil, fmt.Errorf("%w: the round of Lead must be positive", ErrInvalid)
	}
	for {
		c, err := l.Campaign(ctx, name, value, round)
		if err == nil && c.Elected {
			return c, nil
		}
		if ctx.Err() != nil || l.ctx.Err() != nil {
			if l.ctx.Err() == nil {
				rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_ = l.Resign(rctx, name)
				cancel()
			}
			if err == nil {
				err = context.Cause(ctx)
			}
			return nil, err
		}
		if err != nil {
			return nil, err
		}
	}
}

// Resign withdraws the lease's candidacy (and its leadership) of the
// election name.
func (l *Lease) Resign(ctx context.Context, name string) error {
	err := l.leaseAction(ctx, "elections", name, "resign")
	l.dropAll("election", name, "")
	return err
}

// Resign withdraws the candidacy (and the leadership) c stands for, as
// Lease.Resign of its election does.
func (c *Campaign) Resign(ctx context.Context) error {
	if c.lease == nil {
		return fmt.Errorf("%w: this campaign was not made by Lease.Campaign", ErrInvalid)
	}
	return c.lease.Resign(ctx, c.Name)
}

// Proclaim sets the value the leader shows, as Lease.Proclaim of its
// election does, and keeps it in c.Value.
func (c *Campaign) Proclaim(ctx context.Context, value string) error {
	if c.lease == nil {
		return fmt.Errorf("%w: this campaign was not made by Lease.Campaign", ErrInvalid)
	}
	if _, err := c.lease.Proclaim(ctx, c.Name, value); err != nil {
		return err
	}
	c.Value = value
	return nil
}

// Proclaim sets the value the leader shows. Only the current leader may:
// ErrNotLeader otherwise.
func (l *Lease) Proclaim(ctx context.Context, name, value string) (*Campaign, error) {
	path, err := namePath("elections", name, "value")
	if err != nil {
		return nil, err
	}
	resp, err := l.do(ctx, request{method: http.MethodPut, path: path, retry: true,
		body: map[string]string{"lease": l.id, "value": value}})
	if err != nil {
		return nil, err
	}
	c := Campaign{lease: l}
	return &c, resp.decode(&c)
}

// ElectionState reads the leader and the candidates of the election name.
func (c *Client) ElectionState(ctx context.Context, name string) (ElectionState, error) {
	var st ElectionState
	return st, c.state(ctx, "elections", name, nil, &st)
}

// Elections lists the elections that have candidates, in name order,
// reading every page of the gateway's list (or as many as Limit allows).
func (c *Client) Elections(ctx context.Context, opts ...ListOption) ([]ElectionSummary, error) {
	return listAll[ElectionSummary](ctx, c, "elections", "elections", nil, opts)
}
