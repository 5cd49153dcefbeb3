package client

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Watcher delivers the states of one primitive on C: the current state
// first, then each new one, read with the gateway's blocking reads
// (GET ...?index=N&wait=..., N being the X-Zkgate-Index of the state last
// read). A consumer slower than the changes gets the latest state, not a
// backlog. Transient failures (network errors, 503, 429) are retried until
// the watch's context ends. C is closed when the context ends or the gateway
// answers an error that retrying cannot mend; Err then says which.
type Watcher[T any] struct {
	C <-chan T

	done chan struct{}
	err  error
}

// Err is nil while C is open; afterwards the context's error, or the error
// that ended the watch.
func (w *Watcher[T]) Err() error {
	select {
	case <-w.done:
		return w.err
	default:
		return nil
	}
}

// stateOf is a *State type of this package.
type stateOf[T any] interface {
	*T
	setIndex(int64)
}

// WatchLock watches the holders and waiters of the lock name.
func (c *Client) WatchLock(ctx context.Context, name string) (*Watcher[LockState], error) {
	return watch[LockState](ctx, c, "locks", name, nil, nil)
}

// WatchSemaphore watches the holders and waiters of the semaphore name.
func (c *Client) WatchSemaphore(ctx context.Context, name string) (*Watcher[SemaphoreState], error) {
	return watch[SemaphoreState](ctx, c, "semaphores", name, nil, nil)
}

// WatchElection watches the leader and candidates of the election name.
func (c *Client) WatchElection(ctx context.Context, name string) (*Watcher[ElectionState], error) {
	return watch[ElectionState](ctx, c, "elections", name, nil, nil)
}

// Observe watches the leader of the election name: the state now, then
// each state whose leader differs from the one last delivered (another
// candidate leads, the leader proclaims a new value, or there is none),
// skipping changes of the candidates in line. As with every Watcher, a
// consumer slower than the changes gets the latest leader, not a backlog.
func (c *Client) Observe(ctx context.Context, name string) (*Watcher[ElectionState], error) {
	return watch[ElectionState](ctx, c, "elections", name, nil, func(prev, next ElectionState) bool {
		return leaderOf(prev) != leaderOf(next)
	})
}

// leaderOf is what Observe compares of an election's state: the leader's
// node and value ("", "" when there is none).
func leaderOf(st ElectionState) [2]string {
	if st.Leader == nil {
		return [2]string{}
	}
	return [2]string{st.Leader.Node, st.Leader.Value}
}

// WatchBarrier watches whether the barrier name is up.
func (c *Client) WatchBarrier(ctx context.Context, name string) (*Watcher[BarrierState], error) {
	return watch[BarrierState](ctx, c, "barriers", name, nil, nil)
}

// WatchDoubleBarrier watches the members of the double barrier name.
func (c *Client) WatchDoubleBarrier(ctx context.Context, name string) (*Watcher[DoubleBarrierState], error) {
	return watch[DoubleBarrierState](ctx, c, "double-barriers", name, nil, nil)
}

// WatchQueue watches the length, claims and first head items of the queue
// name (head < 0: the gateway's default, 10).
func (c *Client) WatchQueue(ctx context.Context, name string, head int) (*Watcher[QueueState], error) {
	return watch[QueueState](ctx, c, "queues", name, headQuery(head), nil)
}

// watch reads the state once (so that a bad name or a refused token is an
// error here), then follows it on a goroutine that ends with ctx. With
// changed, a new state is delivered only if changed(the state delivered or
// pending last, it) is true.
func watch[T any, PT stateOf[T]](ctx context.Context, c *Client, kind, name string, q url.Values,
	changed func(prev, next T) bool) (*Watcher[T], error) {
	path, err := namePath(kind, name)
	if err != nil {
		return nil, err
	}
	r := stateReader[T, PT]{c: c, path: path, query: q}
	resp, index, err := r.read(ctx, 0, 0)
	if err != nil {
		return nil, err
	}
	first, err := r.decode(resp, index)
	if err != nil {
		return nil, err
	}
	ch := make(chan T)
	w := &Watcher[T]{C: ch, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer close(ch)
		w.err = r.follow(ctx, ch, first, resp.body, index, changed)
	}()
	return w, nil
}

// stateReader reads the state of one primitive at path, with query.
type stateReader[T any, PT stateOf[T]] struct {
	c     *Client
	path  string
	query url.Values
}

// read reads the state, blocking until it is past index (when index > 0)
// or wait has passed, and returns it with its X-Zkgate-Index.
func (r stateReader[T, PT]) read(ctx context.Context, index int64, wait time.Duration) (*response, int64, error) {
	q := url.Values{}
	for k, v := range r.query {
		q[k] = v
	}
	if index > 0 {
		q.Set("index", strconv.FormatInt(index, 10))
		q.Set("wait", wait.String())
	}
	resp, err := r.c.do(ctx, request{method: http.MethodGet, path: r.path, query: q, retry: true})
	if err != nil {
		return nil, 0, err
	}
	idx, _ := strconv.ParseInt(resp.header.Get("X-Zkgate-Index"), 10, 64)
	return resp, idx, nil
}

// decode decodes the state in resp, read at index idx.
func (r stateReader[T, PT]) decode(resp *response, idx int64) (T, error) {
	var st T
	if err := resp.decode(&st); err != nil {
		return st, err
	}
	PT(&st).setIndex(idx)
	return st, nil
}

// follow delivers pending, then each new state read after index on ch,
// last being the body of the state read last, until ctx ends or an error
// that retrying cannot mend, which it returns (ctx's error when ctx ended).
func (r stateReader[T, PT]) follow(ctx context.Context, ch chan<- T, pending T, last []byte, index int64,
	changed func(prev, next T) bool) error {
	havePending := true
	for attempt := 0; ; {
		if havePending {
			select {
			case ch <- pending:
				havePending = false
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		resp, idx, err := r.read(ctx, max(index, 1), r.c.pollWait)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			var problem *Error
			if errors.As(err, &problem) && problem.Code != "unavailable" && problem.Code != "too_many" {
				return err
			}
			// c.do gave up after its retry window: keep trying, slower.
			if !sleep(ctx, backoff(attempt+5)) {
				return ctx.Err()
			}
			attempt++
			continue
		}
		attempt = 0
		index = idx
		// The index can move with no visible change; deliver changes only.
		if bytes.Equal(resp.body, last) {
			continue
		}
		st, err := r.decode(resp, idx)
		if err != nil {
			return err
		}
		last = resp.body
		if changed != nil && !changed(pending, st) {
			continue
		}
		pending, havePending = st, true
	}
}
