package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// RaiseBarrier puts the barrier name up; raised is false if it was up
// already.
func (c *Client) RaiseBarrier(ctx context.Context, name string) (raised bool, err error) {
	path, err := namePath("barriers", name)
	if err != nil {
		return false, err
	}
	resp, err := c.do(ctx, request{method: http.MethodPut, path: path, retry: true})
	if err != nil {
		return false, err
	}
	return resp.status == http.StatusCreated, nil
}

// LowerBarrier takes the barrier name down, releasing every waiter.
// Lowering a barrier that is down is not an error.
func (c *Client) LowerBarrier(ctx context.Context, name string) error {
	return c.deleteNamed(ctx, "barriers", name)
}

// WaitBarrier waits up to wait until the barrier name is down (or does not
// exist): nil then, an *Error of code timeout (ErrTimeout) if it is still
// up when the wait ends.
func (c *Client) WaitBarrier(ctx context.Context, name string, wait time.Duration) error {
	path, err := namePath("barriers", name, "wait")
	if err != nil {
		return err
	}
	_, err = c.do(ctx, request{method: http.MethodPost, path: path, wait: wait, sendWait: true, retry: true})
	return err
}

// BarrierState reads whether the barrier name is up.
func (c *Client) BarrierState(ctx context.Context, name string) (BarrierState, error) {
	var st BarrierState
	return st, c.state(ctx, "barriers", name, nil, &st)
}

// Barriers lists the barriers that are up, in name order, reading every
// page of the gateway's list (or as many as Limit allows).
func (c *Client) Barriers(ctx context.Context, opts ...ListOption) ([]BarrierState, error) {
	return listAll[BarrierState](ctx, c, "barriers", "barriers", nil, opts)
}

// Enter makes member a member of the double barrier name for the lease and
// waits up to wait until count members have entered (every member must
// give the same count: ErrCountMismatch otherwise). When the wait ends
// first the error is ErrTimeout and the membership is kept: Enter again
// resumes the wait. Idempotent per lease; network failures are retried.
func (l *Lease) Enter(ctx context.Context, name, member string, count int, wait time.Duration) (*DoubleBarrierState, error) {
	path, err := namePath("double-barriers", name, "enter")
	if err != nil {
		return nil, err
	}
	if err := ValidName(member); err != nil {
		return nil, err
	}
	if count < 1 {
		return nil, fmt.Errorf("%w: a double barrier's count is at least 1", ErrInvalid)
	}
	ctx, cancel := l.bind(ctx)
	defer cancel()
	resp, err := l.do(ctx, request{method: http.MethodPost, path: path, wait: wait, sendWait: true, retry: true,
		grant: true, body: map[string]any{"lease": l.id, "member": member, "count": count}})
	if err != nil {
		return nil, err
	}
	var st DoubleBarrierState
	return &st, resp.decode(&st)
}

// Leave takes member out of the double barrier name and waits up to wait
// until every member has left (ErrTimeout if some are still in then; Leave
// again resumes the wait).
func (l *Lease) Leave(ctx context.Context, name, member string, wait time.Duration) (*DoubleBarrierState, error) {
	path, err := namePath("double-barriers", name, "leave")
	if err != nil {
		return nil, err
	}
	if err := ValidName(member); err != nil {
		return nil, err
	}
	ctx, cancel := l.bind(ctx)
	defer cancel()
	resp, err := l.do(ctx, request{method: http.MethodPost, path: path, wait: wait, sendWait: true, retry: true,
		okOnRetry: []string{"not_held"}, body: map[string]string{"lease": l.id, "member": member}})
	if err != nil {
		return nil, err
	}
	if resp.status == http.StatusNoContent {
		// A repeat found the member gone: the lost answer was the success.
		st, err := l.c.DoubleBarrierState(ctx, name)
		if err != nil {
			return nil, err
		}
		return &st, nil
	}
	var st DoubleBarrierState
	return &st, resp.decode(&st)
}

// DoubleBarrierState reads the members of the double barrier name and
// whether it is ready.
func (c *Client) DoubleBarrierState(ctx context.Context, name string) (DoubleBarrierState, error) {
	var st DoubleBarrierState
	return st, c.state(ctx, "double-barriers", name, nil, &st)
}

// DoubleBarriers lists the double barriers that have members, in name
// order, reading every page of the gateway's list (or as many as Limit
// allows).
func (c *Client) DoubleBarriers(ctx context.Context, opts ...ListOption) ([]DoubleBarrierState, error) {
	return listAll[DoubleBarrierState](ctx, c, "double-barriers", "double_barriers", nil, opts)
}
