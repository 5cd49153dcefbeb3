package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
)

// Item is a queue item with its bytes. A claimed item (from Lease.Claim)
// is hidden from other consumers until Ack, Nack or the end of the lease.
type Item struct {
	Queue    string
	ID       string
	Priority int
	Data     []byte

	lease *Lease // the claim's lease; nil for taken or peeked items
	// settled is set once Ack or Nack was called, so that Lease.Consume
	// does not settle the item a second time.
	settled atomic.Bool
}

// Ack consumes a claimed item: it is deleted with the claim.
func (i *Item) Ack(ctx context.Context) error {
	if i.lease == nil {
		return fmt.Errorf("%w: item %s is not claimed", ErrNotClaimed, i.ID)
	}
	i.settled.Store(true)
	return i.lease.Ack(ctx, i.Queue, i.ID)
}

// Nack gives a claimed item back: it is served again.
func (i *Item) Nack(ctx context.Context) error {
	if i.lease == nil {
		return fmt.Errorf("%w: item %s is not claimed", ErrNotClaimed, i.ID)
	}
	i.settled.Store(true)
	return i.lease.Nack(ctx, i.Queue, i.ID)
}

// Produce adds data to the queue name with priority (0 to 999, lower
// first; DefaultPriority when in doubt). It is not retried: after a lost
// answer the item may or may not be in the queue, and a repeat could add it
// twice.
func (c *Client) Produce(ctx context.Context, name string, data []byte, priority int) (ItemInfo, error) {
	return c.ProduceWith(ctx, name, data, ProduceOptions{Priority: priority})
}

// ProduceOptions are the options of ProduceWith.
type ProduceOptions struct {
	Priority int // 0 to 999, lower first; 0 here is 0, not DefaultPriority
	// Delay, or NotBefore (not both), delays the item: nobody takes or
	// claims it before then (at most 30 days ahead). Its ItemInfo.ID is
	// then a due-… id, replaced by an entry-… id when it comes due.
	Delay     time.Duration
	NotBefore time.Time
}

// ProduceWith is Produce with options: a delay, or a time before which the
// item is not served.
func (c *Client) ProduceWith(ctx context.Context, name string, data []byte, o ProduceOptions) (ItemInfo, error) {
	path, err := namePath("queues", name, "items")
	if err != nil {
		return ItemInfo{}, err
	}
	priority := o.Priority
	if priority < 0 || priority > 999 {
		return ItemInfo{}, fmt.Errorf("%w: priority %d is not from 0 to 999", ErrInvalid, priority)
	}
	query := url.Values{"priority": {strconv.Itoa(priority)}}
	switch {
	case o.Delay < 0:
		return ItemInfo{}, fmt.Errorf("%w: delay %s is negative", ErrInvalid, o.Delay)
	case o.Delay > 0 && !o.NotBefore.IsZero():
		return ItemInfo{}, fmt.Errorf("%w: give Delay or NotBefore, not both", ErrInvalid)
	case o.Delay > 0:
		query.Set("delay", o.Delay.String())
	case !o.NotBefore.IsZero():
		query.Set("not_before", o.NotBefore.UTC().Format(time.RFC3339Nano))
	}
	if data == nil {
		data = []byte{}
	}
	resp, err := c.do(ctx, request{method: http.MethodPost, path: path, raw: data, rawBody: true, query: query})
	if err != nil {
		return ItemInfo{}, err
	}
	var info ItemInfo
	return info, resp.decode(&info)
}

// Take removes the next item of the queue name and returns it, waiting up
// to wait for one; ErrEmpty if there was none. At most once: the item is
// deleted before the answer, so an answer lost on the way is an item lost.
func (c *Client) Take(ctx context.Context, name string, wait time.Duration) (*Item, error) {
	path, err := namePath("queues", name, "take")
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, request{method: http.MethodPost, path: path, wait: wait, sendWait: true, retry: true})
	if err != nil {
		return nil, err
	}
	return itemOf(name, resp, nil)
}

// Claim claims the next unclaimed item of the queue name for the lease,
// waiting up to wait for one; ErrEmpty if there was none. The item is served
// again if it is neither acked nor nacked before the lease ends (at least
// once). A lease has one claim per queue at a time: claiming again returns
// the same item, which makes the retry of a lost answer safe.
func (l *Lease) Claim(ctx context.Context, name string, wait time.Duration) (*Item, error) {
	path, err := namePath("queues", name, "claim")
	if err != nil {
		return nil, err
	}
	ctx, cancel := l.bind(ctx)
	defer cancel()
	resp, err := l.do(ctx, request{method: http.MethodPost, path: path, wait: wait, sendWait: true, retry: true,
		grant: true, body: map[string]string{"lease": l.id}})
	if err != nil {
		return nil, err
	}
	return itemOf(name, resp, l)
}

// Ack consumes the item id that the lease claimed from the queue name.
func (l *Lease) Ack(ctx context.Context, name, id string) error {
	return l.itemAction(ctx, name, id, "ack")
}

// Nack gives back the item id that the lease claimed from the queue name.
func (l *Lease) Nack(ctx context.Context, name, id string) error {
	return l.itemAction(ctx, name, id, "nack")
}

func (l *Lease) itemAction(ctx context.Context, name, id, verb string) error {
	path, err := namePath("queues", name, "items", id, verb)
	if err != nil {
		return err
	}
	_, err = l.do(ctx, request{method: http.MethodPost, path: path, body: map[string]string{"lease": l.id},
		retry: true, okOnRetry: []string{"not_claimed"}})
	return err
}

// A ConsumeOption sets something of Lease.Consume.
type ConsumeOption func(*consumeSpec)

type consumeSpec struct {
	wait       time.Duration
	untilEmpty bool
}

// ConsumeWait sets how long each claim of Lease.Consume waits for an item
// (default 30s; the gateway's --max-wait at most).
func ConsumeWait(d time.Duration) ConsumeOption {
	return func(s *consumeSpec) { s.wait = d }
}

// UntilEmpty makes Lease.Consume return nil when a claim finds no item
// within its wait, rather than claim again.
func UntilEmpty() ConsumeOption {
	return func(s *consumeSpec) { s.untilEmpty = true }
}

// settleTimeout bounds the ack or nack Consume sends after the body: it is
// sent even when ctx has ended, since the body's work is done.
const settleTimeout = 10 * time.Second

// Consume claims the items of the queue name one at a time and runs body
// on each, until ctx ends, the lease ends or body fails (the Go form of
// the Python and Node clients' lease.consume):
//   - body returns nil: the item is acked, unless body acked or nacked it
//     itself (Item.Ack, Item.Nack); a failed ack ends the loop with its
//     error;
//   - body returns an error, or panics: the item is nacked, so that it is
//     served again (a failure of that nack is not reported: the lease's
//     end gives the item back anyway), and Consume returns the error, or
//     panics on;
//   - a claim finds nothing within its wait (ConsumeWait, 30s): Consume
//     claims again, or returns nil with UntilEmpty.
//
// body's context ends with ctx or with the lease (its cause is then the
// lease's Err). The ack or nack after body is sent even if ctx has ended
// meanwhile. When ctx ends Consume returns its cause (errors.Is
// context.Canceled or DeadlineExceeded); a claim cut short leaves no claim
// at the gateway. When the lease ends it returns the lease's error
// (ErrLeaseExpired, ...).
func (l *Lease) Consume(ctx context.Context, name string, body func(ctx context.Context, item *Item) error, opts ...ConsumeOption) error {
	spec := consumeSpec{wait: 30 * time.Second}
	for _, o := range opts {
		o(&spec)
	}
	if body == nil {
		return fmt.Errorf("%w: Consume needs a body", ErrInvalid)
	}
	for {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		item, err := l.Claim(ctx, name, spec.wait)
		if errors.Is(err, ErrEmpty) {
			if spec.untilEmpty {
				return nil
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return err
		}
		if err := l.consumeOne(ctx, item, body); err != nil {
			return err
		}
	}
}

// consumeOne runs body on item, then acks it, or nacks it if body failed,
// panicked or exited its goroutine (runtime.Goexit, as t.FailNow does).
func (l *Lease) consumeOne(ctx context.Context, item *Item, body func(context.Context, *Item) error) (err error) {
	finished := false
	defer func() {
		if finished || item.settled.Load() {
			return
		}
		nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
		_ = item.Nack(nctx)
	}()
	bctx, cancel := l.bind(ctx)
	err = body(bctx, item)
	cancel()
	if err != nil {
		return err
	}
	finished = true
	if item.settled.Load() {
		return nil
	}
	actx, cancelAck := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancelAck()
	return item.Ack(actx)
}

// Peek reads the item id of the queue name without taking it.
func (c *Client) Peek(ctx context.Context, name, id string) (*Item, error) {
	path, err := namePath("queues", name, "items", id)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, path: path, retry: true})
	if err != nil {
		return nil, err
	}
	return itemOf(name, resp, nil)
}

// QueueState reads the length, the claims and the first head items of the
// queue name (head < 0: the gateway's default, 10).
func (c *Client) QueueState(ctx context.Context, name string, head int) (QueueState, error) {
	var st QueueState
	return st, c.state(ctx, "queues", name, headQuery(head), &st)
}

func headQuery(head int) url.Values {
	if head < 0 {
		return nil
	}
	return url.Values{"head": {strconv.Itoa(head)}}
}

// Queues lists every queue with its length and claims, in name order,
// reading every page of the gateway's list (or as many as Limit allows).
func (c *Client) Queues(ctx context.Context, opts ...ListOption) ([]QueueState, error) {
	return listAll[QueueState](ctx, c, "queues", "queues", nil, opts)
}

// DeleteQueue removes the queue name, which must be empty (ErrNotEmpty
// otherwise). Deleting a queue that does not exist is not an error.
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	return c.deleteNamed(ctx, "queues", name)
}

// itemOf reads an item answer: 204 is an empty queue.
func itemOf(queue string, resp *response, lease *Lease) (*Item, error) {
	if resp.status == http.StatusNoContent {
		return nil, ErrEmpty
	}
	id := resp.header.Get("X-Zkgate-Item-Id")
	if id == "" {
		return nil, fmt.Errorf("zkgate: the gateway answered an item without X-Zkgate-Item-Id")
	}
	prio, err := strconv.Atoi(resp.header.Get("X-Zkgate-Item-Priority"))
	if err != nil {
		prio = -1
	}
	return &Item{Queue: queue, ID: id, Priority: prio, Data: resp.body, lease: lease}, nil
}
