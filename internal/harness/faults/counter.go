//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// counterName is the one counter the adders share.
const counterName = "hits"

// CounterAdd is one add of an adder, its delta and its answer.
type CounterAdd struct {
	Delta int64
	// Acked is a 200: the add applied once, and Value is what it made.
	// Otherwise (no answer, 503) it may or may not have applied.
	Acked      bool
	Value      int64
	Sent, Recv time.Time
}

// adder adds small positive deltas to the counter, each to a random
// gateway, and records every add with its answer. An add whose answer was
// lost is not sent again: whether it applied is the question the check
// leaves open, and only acknowledged adds must all be in the sum once.
func (r *runner) adder(ctx context.Context, i int) {
	c := r.newLeaseClient(fmt.Sprintf("adder-%d", i), uint64(1100+i))
	for ctx.Err() == nil {
		delta := int64(1 + c.rng.IntN(9))
		a := r.send(ctx, c.rng, request{kind: "add", method: "POST", path: "/v1/counters/" + counterName + "/add?format=int64",
			body: map[string]any{"delta": delta}, gateway: -1})
		add := CounterAdd{Delta: delta, Sent: a.Sent, Recv: a.Recv}
		switch a.Status {
		case http.StatusOK:
			var st struct {
				Value int64 `json:"value"`
			}
			_ = json.Unmarshal(a.Body, &st)
			add.Acked, add.Value = true, st.Value
		case 0, http.StatusServiceUnavailable:
		default:
			r.unexpectedAnswer("add", a)
		}
		if add.Acked || a.Status == 0 || a.Status == http.StatusServiceUnavailable {
			r.hist.record(func(h *History) { h.Adds = append(h.Adds, add) })
		}
		sleepCtx(ctx, between(c.rng, 5*time.Millisecond, 40*time.Millisecond))
	}
}

// readCounter reads the counter once every fault has healed, for the check
// of its sum.
func (r *runner) readCounter(ctx context.Context) error {
	if r.cfg.Adders == 0 {
		return nil
	}
	c := r.newLeaseClient("counter-reader", 1190)
	deadline := time.Now().Add(r.cfg.DrainTimeout)
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a := r.send(ctx, c.rng, request{kind: "counter_state", method: "GET", path: "/v1/counters/" + counterName + "?format=int64", gateway: -1})
		if a.Status == http.StatusOK {
			var st struct {
				Value int64 `json:"value"`
			}
			_ = json.Unmarshal(a.Body, &st)
			r.hist.record(func(h *History) { h.CounterFinal, h.CounterRead = st.Value, true })
			r.logf("counter %s is %d", counterName, st.Value)
			return nil
		} else if a.Status != 0 && a.Status != http.StatusServiceUnavailable {
			r.unexpectedAnswer("counter_state", a)
		}
		c.backoff(ctx)
	}
	r.logf("the counter could not be read within %s", r.cfg.DrainTimeout)
	return nil
}

// checkCounter: the counter is the sum of the acknowledged adds plus some
// of the unacknowledged ones (each either applied once or not at all), and
// no two acknowledged adds made the same value (the deltas are positive,
// so each applied add makes a value of its own; two alike would be one
// update lost under another).
func checkCounter(h *History, add func(kind, format string, args ...any)) {
	if len(h.Adds) == 0 {
		return
	}
	if !h.CounterRead {
		add(VCounterUnread, "the counter could not be read once the faults had healed")
		return
	}
	var acked, unknown int64
	made := map[int64]CounterAdd{}
	for _, a := range h.Adds {
		if !a.Acked {
			unknown += a.Delta
			continue
		}
		acked += a.Delta
		if b, ok := made[a.Value]; ok {
			add(VCounterSameValue, "two adds answered %d: +%d answered at %s and +%d at %s", a.Value, b.Delta, ts(b.Recv), a.Delta, ts(a.Recv))
		}
		made[a.Value] = a
	}
	switch v := h.CounterFinal; {
	case v < acked:
		add(VCounterLostAdd, "the counter is %d, below the %d of its acknowledged adds: an acknowledged add was lost", v, acked)
	case v > acked+unknown:
		add(VCounterDoubleAdd, "the counter is %d, above the %d of its acknowledged adds and the %d of those unanswered: an add applied twice",
			v, acked, unknown)
	}
}
