package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Lock acquires the lock name in mode ("" is Exclusive) for the lease,
// waiting up to wait for it (0: try once, never block; at most the
// gateway's --max-wait). When the wait ends first the error is an *Error
// of code timeout (errors.Is(err, ErrTimeout)) whose extras carry the
// holders, the number of waiters and the former position in line.
//
// The call is bound by ctx and by the lease. A network failure or a 503 is
// retried with the same lease, with what is left of the wait: acquire is
// idempotent per lease at the gateway, so a retry after a lost answer gets
// the same grant (same token, same node), never a second node. For the same
// reason a lease is one holder: while it holds or acquires the lock name in
// mode, another Lock of it through the lease fails with ErrAlreadyHeld
// (until Release or Unlock, or the end of the failed acquire).
func (l *Lease) Lock(ctx context.Context, name string, mode LockMode, wait time.Duration) (*LockGrant, error) {
	mode, err := checkMode(mode)
	if err != nil {
		return nil, err
	}
	path, err := namePath("locks", name, "acquire")
	if err != nil {
		return nil, err
	}
	g := &LockGrant{lease: l}
	err = l.acquire(ctx, holdKey{kind: "lock", name: name, mode: mode}, path, wait,
		map[string]string{"lease": l.id, "mode": string(mode)}, g)
	if err != nil {
		return nil, err
	}
	return g, nil
}

// Release gives up the lock in the grant's mode. A repeat after a lost
// answer is recognised (the gateway's not_held is then success).
func (g *LockGrant) Release(ctx context.Context) error {
	if g.lease == nil {
		return fmt.Errorf("%w: this grant was not made by Lease.Lock", ErrInvalid)
	}
	return g.lease.Unlock(ctx, g.Name, g.Mode)
}

// Unlock gives up what the lease holds or waits for of the lock name: only
// mode, or every mode when mode is "". It is not bound to the lease (a lease
// that has ended holds nothing, and the gateway says so).
func (l *Lease) Unlock(ctx context.Context, name string, mode LockMode) error {
	path, err := namePath("locks", name, "release")
	if err != nil {
		return err
	}
	body := map[string]string{"lease": l.id}
	if mode != "" {
		body["mode"] = string(mode)
	}
	_, err = l.do(ctx, request{method: http.MethodPost, path: path, body: body, retry: true, okOnRetry: []string{"not_held"}})
	l.dropAll("lock", name, mode)
	return err
}

// LockRequest is one lock of a set (see LockAll): its name and mode (""
// is Exclusive).
type LockRequest struct {
	Name string   `json:"name"`
	Mode LockMode `json:"mode,omitempty"`
}

// MaxLockSet is the most locks one set may name.
const MaxLockSet = 32

// LockAll acquires every lock of set for the lease, all or nothing, as
// Curator's InterProcessMultiLock: the gateway takes them in one order (by
// name), so that two sets never deadlock each other, within wait for the
// whole set. When one cannot be had the error is that lock's (a timeout,
// a deadlock broken...), and the gateway has let go of the locks the call
// took. The grants come in the order they were taken. Retries and
// ErrAlreadyHeld are as for Lock, for each lock of the set; release them
// with UnlockAll (or each grant's Release).
func (l *Lease) LockAll(ctx context.Context, set []LockRequest, wait time.Duration) ([]*LockGrant, error) {
	body, keys, err := lockSetBody(l.id, set)
	if err != nil {
		return nil, err
	}
	var got struct {
		Locks []*LockGrant `json:"locks"`
	}
	if err := l.acquireAll(ctx, keys, "/v1/locks/acquire", wait, body, &got); err != nil {
		return nil, err
	}
	for _, g := range got.Locks {
		g.lease = l
	}
	return got.Locks, nil
}

// UnlockAll gives up every lock of set that the lease holds or waits for,
// each in its mode. A repeat after a lost answer is recognised.
func (l *Lease) UnlockAll(ctx context.Context, set []LockRequest) error {
	body, keys, err := lockSetBody(l.id, set)
	if err != nil {
		return err
	}
	_, err = l.do(ctx, request{method: http.MethodPost, path: "/v1/locks/release", body: body, retry: true, okOnRetry: []string{"not_held"}})
	l.drop(keys...)
	return err
}

// checkMode is mode made explicit ("" is Exclusive), or ErrInvalid for
// a mode the locks do not have.
func checkMode(mode LockMode) (LockMode, error) {
	switch mode {
	case "":
		return Exclusive, nil
	case Exclusive, Read, Write:
		return mode, nil
	}
	return "", fmt.Errorf("%w: lock mode %q is not exclusive, read or write", ErrInvalid, mode)
}

// lockSetBody is the body of a set's request, with the holds it takes;
// each mode is made explicit.
func lockSetBody(lease string, set []LockRequest) (map[string]any, []holdKey, error) {
	if len(set) == 0 || len(set) > MaxLockSet {
		return nil, nil, fmt.Errorf("%w: a set names from 1 to %d locks", ErrInvalid, MaxLockSet)
	}
	locks := make([]LockRequest, len(set))
	keys := make([]holdKey, len(set))
	seen := map[string]bool{}
	for i, r := range set {
		if err := ValidName(r.Name); err != nil {
			return nil, nil, err
		}
		mode, err := checkMode(r.Mode)
		if err != nil {
			return nil, nil, err
		}
		r.Mode = mode
		if seen[r.Name] {
			return nil, nil, fmt.Errorf("%w: lock %q is named twice in the set", ErrInvalid, r.Name)
		}
		seen[r.Name] = true
		locks[i], keys[i] = r, holdKey{kind: "lock", name: r.Name, mode: r.Mode}
	}
	return map[string]any{"lease": lease, "locks": locks}, keys, nil
}

// LockState reads who holds the lock name and who waits for it, fresh from
// ZooKeeper.
func (c *Client) LockState(ctx context.Context, name string) (LockState, error) {
	var st LockState
	return st, c.state(ctx, "locks", name, nil, &st)
}

// Locks lists the locks that have holders or waiters, whose name starts
// with prefix ("" for all), in name order, reading every page of the
// gateway's list (or as many as Limit allows).
func (c *Client) Locks(ctx context.Context, prefix string, opts ...ListOption) ([]LockSummary, error) {
	q := url.Values{}
	if prefix != "" {
		if err := ValidName(prefix); err != nil {
			return nil, err
		}
		q.Set("prefix", prefix)
	}
	return listAll[LockSummary](ctx, c, "locks", "locks", q, opts)
}

// Semaphores lists the semaphores that have holders or waiters, in name
// order, reading every page of the gateway's list (or as many as Limit
// allows).
func (c *Client) Semaphores(ctx context.Context, opts ...ListOption) ([]SemaphoreSummary, error) {
	return listAll[SemaphoreSummary](ctx, c, "semaphores", "semaphores", nil, opts)
}

// Fence checks a fencing token against the lock name: nil if token is a
// current holder's, an *Error of code stale_token (errors.Is(err,
// ErrStaleToken)) otherwise. The gateway reads after a sync with the
// ensemble's leader, so a released token is never reported current.
func (c *Client) Fence(ctx context.Context, name string, token int64) error {
	path, err := namePath("locks", name, "fence")
	if err != nil {
		return err
	}
	if token <= 0 {
		return fmt.Errorf("%w: a fencing token is a positive number", ErrInvalid)
	}
	_, err = c.do(ctx, request{method: http.MethodGet, path: path, retry: true,
		query: url.Values{"token": {strconv.FormatInt(token, 10)}}})
	return err
}

// AcquireSemaphore takes one of the limit slots of the semaphore name for
// the lease, waiting up to wait; as Lock for timeouts, retries, the token
// and ErrAlreadyHeld (a lease holds one slot of a semaphore). Every holder
// must give the same limit (ErrLimitMismatch otherwise).
func (l *Lease) AcquireSemaphore(ctx context.Context, name string, limit int, wait time.Duration) (*SemaphoreGrant, error) {
	path, err := namePath("semaphores", name, "acquire")
	if err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: a semaphore limit is at least 1", ErrInvalid)
	}
	g := &SemaphoreGrant{lease: l}
	err = l.acquire(ctx, holdKey{kind: "semaphore", name: name}, path, wait,
		map[string]any{"lease": l.id, "limit": limit}, g)
	if err != nil {
		return nil, err
	}
	return g, nil
}

// Release gives the slot back.
func (g *SemaphoreGrant) Release(ctx context.Context) error {
	if g.lease == nil {
		return fmt.Errorf("%w: this grant was not made by Lease.AcquireSemaphore", ErrInvalid)
	}
	return g.lease.ReleaseSemaphore(ctx, g.Name)
}

// ReleaseSemaphore gives up the lease's slot of the semaphore name, or its
// place in line for one.
func (l *Lease) ReleaseSemaphore(ctx context.Context, name string) error {
	err := l.leaseAction(ctx, "semaphores", name, "release")
	l.dropAll("semaphore", name, "")
	return err
}

// SemaphoreState reads who holds the semaphore's slots and who waits.
func (c *Client) SemaphoreState(ctx context.Context, name string) (SemaphoreState, error) {
	var st SemaphoreState
	return st, c.state(ctx, "semaphores", name, nil, &st)
}

// leaseAction posts {"lease"} to /v1/<kind>/<name>/<verb>; a repeat after a
// lost answer takes not_held as success.
func (l *Lease) leaseAction(ctx context.Context, kind, name, verb string) error {
	path, err := namePath(kind, name, verb)
	if err != nil {
		return err
	}
	_, err = l.do(ctx, request{method: http.MethodPost, path: path, body: map[string]string{"lease": l.id},
		retry: true, okOnRetry: []string{"not_held"}})
	return err
}

// state reads GET /v1/<kind>/<name> into st (a pointer to a *State type)
// and sets its index.
func (c *Client) state(ctx context.Context, kind, name string, q url.Values, st interface{ setIndex(int64) }) error {
	path, err := namePath(kind, name)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, path: path, query: q, retry: true})
	if err != nil {
		return err
	}
	if err := resp.decode(st); err != nil {
		return err
	}
	idx, _ := strconv.ParseInt(resp.header.Get("X-Zkgate-Index"), 10, 64)
	st.setIndex(idx)
	return nil
}

// ListOption changes what a list call reads.
type ListOption func(*listOptions)

type listOptions struct{ max int }

// Limit makes a list call read no more than n items (the first n, in the
// list's order), so that a long list costs a page or a few; n <= 0 reads
// every item, the default.
func Limit(n int) ListOption { return func(o *listOptions) { o.max = max(n, 0) } }

// listAll reads the list of kind, whose items come under key, page after
// page following each page's next cursor, until its end or as many items as
// the options allow. q is the list's own query (a prefix), kept on every
// page.
func listAll[T any](ctx context.Context, c *Client, kind, key string, q url.Values, opts []ListOption) ([]T, error) {
	var o listOptions
	for _, opt := range opts {
		opt(&o)
	}
	path, err := pathOf(kind)
	if err != nil {
		return nil, err
	}
	out := []T{}
	query := url.Values{}
	for k, v := range q {
		query[k] = v
	}
	for {
		limit := pageSize
		if o.max > 0 {
			limit = min(limit, o.max-len(out))
		}
		query.Set("limit", strconv.Itoa(limit))
		resp, err := c.do(ctx, request{method: http.MethodGet, path: path, query: query, retry: true})
		if err != nil {
			return nil, err
		}
		var page map[string]json.RawMessage
		if err := resp.decode(&page); err != nil {
			return nil, err
		}
		var items []T
		if err := json.Unmarshal(page[key], &items); err != nil {
			return nil, fmt.Errorf("zkgate: unexpected answer: %s: %v", key, err)
		}
		out = append(out, items...)
		var next string
		if raw, ok := page["next"]; ok {
			if err := json.Unmarshal(raw, &next); err != nil {
				return nil, fmt.Errorf("zkgate: unexpected answer: next: %v", err)
			}
		}
		if o.max > 0 && len(out) >= o.max {
			return out[:o.max], nil // a gateway may give more than asked
		}
		if next == "" {
			return out, nil
		}
		if next == query.Get("after") {
			return nil, fmt.Errorf("zkgate: the gateway answered the same page of %s twice", kind)
		}
		query.Set("after", next)
	}
}

// pageSize is how many items the list calls ask for a page: the most a
// gateway gives.
const pageSize = 1000
