//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

const queueName = "jobs"

type itemBody struct {
	ID string `json:"id"`
}

// producer puts items with unique body ids into the queue. An item whose
// answer is lost is never sent again (its id might be in the queue).
func (r *runner) producer(ctx context.Context, i int) {
	c := r.newLeaseClient(fmt.Sprintf("producer-%d", i), uint64(600+i))
	for n := 0; ctx.Err() == nil; n++ {
		body := fmt.Sprintf("p%d-%d", i, n)
		data, _ := json.Marshal(itemBody{ID: body})
		p := &Produced{BodyID: body, Sent: time.Now()}
		r.hist.record(func(h *History) { h.Produced[body] = p })
		a := r.send(ctx, c.rng, request{kind: "produce", method: "POST", path: "/v1/queues/" + queueName + "/items", body: data, gateway: -1})
		switch a.Status {
		case http.StatusCreated:
			var item struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(a.Body, &item)
			r.hist.record(func(h *History) { p.Confirmed, p.ItemID = true, item.ID })
		case 0, http.StatusServiceUnavailable:
		default:
			r.unexpectedAnswer("produce", a)
		}
		sleepCtx(ctx, between(c.rng, 20*time.Millisecond, 100*time.Millisecond))
	}
}

// consumer claims items and acks them; now and then its lease dies with
// the claim (revoked, or left to expire), and the item must be served
// again.
func (r *runner) consumer(ctx context.Context, i int) {
	c := r.newLeaseClient(fmt.Sprintf("consumer-%d", i), uint64(700+i))
	defer c.dropAtEnd()
	for ctx.Err() == nil {
		if !r.consumeOne(ctx, c, true) {
			c.backoff(ctx)
		}
	}
}

// consumeOne claims one item (waiting up to a second) and acks it, or lets
// its lease die with it when mayDie and chance say so. It reports false
// when nothing could be done (no lease, no answer).
func (r *runner) consumeOne(ctx context.Context, c *leaseClient, mayDie bool) bool {
	id := c.lease(ctx)
	if id == "" {
		return false
	}
	wait := time.Second
	a := c.sendLease(ctx, id, request{kind: "claim", method: "POST", path: "/v1/queues/" + queueName + "/claim?wait=" + wait.String(),
		body: map[string]any{"lease": id}, wait: wait, gateway: -1})
	switch {
	case a.Status == http.StatusOK:
	case a.Status == http.StatusNoContent, leaseOver(a):
		return true
	case a.Status == 0 || a.Status == http.StatusServiceUnavailable:
		return false
	default:
		r.unexpectedAnswer("claim", a)
		return false
	}
	var body itemBody
	_ = json.Unmarshal(a.Body, &body)
	item := a.Header.Get("X-Zkgate-Item-Id")
	r.hist.record(func(h *History) {
		h.Claims = append(h.Claims, Claim{BodyID: body.ID, ItemID: item, Lease: id, Sent: a.Sent, Recv: a.Recv})
	})
	if mayDie && c.rng.Float64() < r.cfg.DeathChance {
		r.fault(FConsumerDied)
		if c.rng.IntN(2) == 0 {
			c.drop(ctx) // revoked with the claim
		} else {
			c.stopKeepAlive() // left to expire with the claim
			c.mu.Lock()
			c.id = ""
			c.mu.Unlock()
		}
		return true
	}
	time.Sleep(between(c.rng, 2*time.Millisecond, 20*time.Millisecond)) // the consumer's work
	ack := Ack{BodyID: body.ID, ItemID: item, Lease: id}
	for {
		a := c.sendLease(context.Background(), id, request{kind: "ack", method: "POST",
			path: "/v1/queues/" + queueName + "/items/" + item + "/ack", body: map[string]any{"lease": id}, gateway: -1})
		if ack.Sent.IsZero() {
			ack.Sent = a.Sent
		}
		ack.Recv, ack.Status = a.Recv, a.Status
		switch {
		case a.Status == http.StatusNoContent, leaseOver(a), a.Status == http.StatusConflict && a.Code == "not_claimed":
		case a.Status == 0 || a.Status == http.StatusServiceUnavailable:
			ack.Ambiguous = true
			if c.valid() {
				c.backoff(context.Background())
				continue
			}
		default:
			r.unexpectedAnswer("ack", a)
		}
		break
	}
	r.hist.record(func(h *History) { h.Acks = append(h.Acks, ack) })
	return true
}

// drain consumes what is left once every fault has healed, until the queue
// shows no item and no claim (claims of lost sessions go when those
// sessions expire).
func (r *runner) drain(ctx context.Context) error {
	if r.cfg.Producers == 0 {
		r.hist.record(func(h *History) { h.Drained = true })
		return nil
	}
	r.logf("draining the queue")
	c := r.newLeaseClient("drainer", 900)
	defer c.dropAtEnd()
	deadline := time.Now().Add(r.cfg.DrainTimeout)
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a := r.send(ctx, c.rng, request{kind: "queue_state", method: "GET", path: "/v1/queues/" + queueName, gateway: -1})
		if a.Status == http.StatusOK {
			var st struct {
				Length  int `json:"length"`
				Claimed int `json:"claimed"`
			}
			_ = json.Unmarshal(a.Body, &st)
			if st.Length == 0 && st.Claimed == 0 {
				r.hist.record(func(h *History) { h.Drained = true })
				r.logf("queue drained")
				return nil
			}
		} else if a.Status != 0 && a.Status != http.StatusServiceUnavailable {
			r.unexpectedAnswer("queue_state", a)
		}
		if !r.consumeOne(ctx, c, false) {
			c.backoff(ctx)
		}
	}
	r.logf("the queue did not drain within %s", r.cfg.DrainTimeout)
	return nil
}
