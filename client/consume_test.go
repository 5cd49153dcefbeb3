package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
)

// settles counts the acks and nacks the proxy saw, by item id.
func settles(p *proxy) (acks, nacks map[string]int) {
	acks, nacks = map[string]int{}, map[string]int{}
	for _, r := range p.requests() {
		parts := strings.Split(r.URL.Path, "/")
		if r.Method != http.MethodPost || len(parts) < 2 {
			continue
		}
		id := parts[len(parts)-2]
		switch parts[len(parts)-1] {
		case "ack":
			acks[id]++
		case "nack":
			nacks[id]++
		}
	}
	return acks, nacks
}

// produce adds items named data to the queue and returns their ids.
func produce(t *testing.T, c *client.Client, queue string, data ...string) []string {
	t.Helper()
	var ids []string
	for _, d := range data {
		info, err := c.Produce(ctxFor(t, 10*time.Second), queue, []byte(d), client.DefaultPriority)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	return ids
}

// queueEmpty fails the test unless the queue has no item and no claim.
func queueEmpty(t *testing.T, c *client.Client, queue string) {
	t.Helper()
	st, err := c.QueueState(ctxFor(t, 10*time.Second), queue, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Length != 0 || st.Claimed != 0 {
		t.Fatalf("queue %s: %d items, %d claimed; want none", queue, st.Length, st.Claimed)
	}
}

// TestConsumeAcksEachItemOnce: every item is run once and acked once after
// its body, an item the body acked itself is not acked again, and
// UntilEmpty ends the loop with nil.
func TestConsumeAcksEachItemOnce(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	g, _ := gateway(t)
	p, c := proxiedClient(t, g.URL)
	ids := produce(t, c, "consume-ack", "a", "self", "c")
	l := grant(t, c, "consumer")
	var seen []string
	err := l.Consume(ctxFor(t, 30*time.Second), "consume-ack", func(ctx context.Context, item *client.Item) error {
		seen = append(seen, string(item.Data))
		if string(item.Data) == "self" {
			return item.Ack(ctx)
		}
		return nil
	}, client.ConsumeWait(0), client.UntilEmpty())
	if err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if fmt.Sprint(seen) != "[a self c]" {
		t.Fatalf("bodies ran on %v, want [a self c]", seen)
	}
	acks, nacks := settles(p)
	for _, id := range ids {
		if acks[id] != 1 {
			t.Errorf("item %s acked %d times, want once (acks %v)", id, acks[id], acks)
		}
	}
	if len(nacks) != 0 {
		t.Errorf("nacks %v, want none", nacks)
	}
	queueEmpty(t, c, "consume-ack")
}

// TestConsumeNacksAFailingBody: a body's error ends the loop with that
// error and gives the item back, and so does a panic, which goes on up;
// another lease then claims the same item.
func TestConsumeNacksAFailingBody(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	_, c := gateway(t)
	ctx := ctxFor(t, 30*time.Second)
	boom := errors.New("boom")
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) {
			queue := "consume-fail-" + how
			ids := produce(t, c, queue, "x")
			l := grant(t, c, "failing")
			var err error
			func() {
				defer func() {
					if r := recover(); how == "panic" && r != boom {
						t.Errorf("recovered %v, want the body's panic", r)
					}
				}()
				err = l.Consume(ctx, queue, func(context.Context, *client.Item) error {
					if how == "panic" {
						panic(boom)
					}
					return boom
				})
			}()
			if how == "error" && !errors.Is(err, boom) {
				t.Fatalf("Consume returned %v, want the body's error", err)
			}
			other := grant(t, c, "other")
			again, err := other.Claim(ctx, queue, 0)
			if err != nil {
				t.Fatalf("the failed item was not given back: %v", err)
			}
			if again.ID != ids[0] {
				t.Fatalf("claimed %s, want the failed item %s", again.ID, ids[0])
			}
			if err := again.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			queueEmpty(t, c, queue)
		})
	}
}

// waitingClaim waits until the lease id waits for an item of queue.
func waitingClaim(t *testing.T, c *client.Client, id, queue string) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	for {
		info, err := c.LeaseInfo(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range info.Holds {
			if h.Kind == "claim" && h.Name == queue {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("lease %s never waited for %s", id, queue)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestConsumeEndsWithItsContext: a cancel during a claim's wait ends the
// loop with context.Canceled and leaves no claim; a cancel during a body
// lets it finish, acks its item and ends the loop.
func TestConsumeEndsWithItsContext(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	_, c := gateway(t)
	l := grant(t, c, "cancelled")

	ctx, cancel := context.WithCancel(ctxFor(t, 30*time.Second))
	done := make(chan error, 1)
	go func() {
		done <- l.Consume(ctx, "consume-cancel", func(context.Context, *client.Item) error {
			return errors.New("no item was produced")
		})
	}()
	waitingClaim(t, c, l.ID(), "consume-cancel")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume returned %v, want context.Canceled", err)
	}
	ids := produce(t, c, "consume-cancel", "after")
	other := grant(t, c, "other")
	item, err := other.Claim(ctxFor(t, 10*time.Second), "consume-cancel", 0)
	if err != nil || item.ID != ids[0] {
		t.Fatalf("the cancelled claim kept the item: %v, %v", item, err)
	}
	if err := item.Nack(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	ctx, cancel = context.WithCancel(ctxFor(t, 30*time.Second))
	err = l.Consume(ctx, "consume-cancel", func(bctx context.Context, item *client.Item) error {
		cancel()
		<-bctx.Done()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume returned %v, want context.Canceled", err)
	}
	queueEmpty(t, c, "consume-cancel")
}

// TestConsumeEndsWithTheLease: a lease revoked elsewhere while Consume
// waits ends the loop with the lease's error.
func TestConsumeEndsWithTheLease(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	_, c := gateway(t)
	l := grant(t, c, "revoked")
	done := make(chan error, 1)
	go func() {
		done <- l.Consume(ctxFor(t, 30*time.Second), "consume-lease", func(context.Context, *client.Item) error {
			return errors.New("no item was produced")
		})
	}()
	waitingClaim(t, c, l.ID(), "consume-lease")
	if err := c.RevokeLease(ctxFor(t, 10*time.Second), l.ID()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, client.ErrLeaseExpired) {
		t.Fatalf("Consume returned %v, want ErrLeaseExpired", err)
	}
}
