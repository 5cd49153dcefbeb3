package client_test

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// readPast waits until a client reading through p has asked for a state
// past index.
func readPast(t *testing.T, p *proxy, index int64) {
	t.Helper()
	gwtest.Eventually(t, 10*time.Second, func() error {
		for _, r := range p.requests() {
			if n, _ := strconv.ParseInt(r.URL.Query().Get("index"), 10, 64); n >= index {
				return nil
			}
		}
		return fmt.Errorf("the observer has not read past index %d: it holds a state to deliver, or is slow", index)
	})
}

// nextLeader is the leader in the next state obs delivers.
func nextLeader(t *testing.T, obs *client.Watcher[client.ElectionState]) *client.Holder {
	t.Helper()
	st, ok := <-obs.C
	if !ok {
		t.Fatalf("Observe ended: %v", obs.Err())
	}
	return st.Leader
}

// TestCampaignResignsAndObserveSeesLeaders: a Campaign resigns and
// proclaims by itself; Observe delivers the leader now and each change of
// leader or of its value, and not the candidates that join or leave the
// line behind it.
func TestCampaignResignsAndObserveSeesLeaders(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	g, c := gateway(t)
	ctx := ctxFor(t, time.Minute)
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	a, b, d := grant(t, c, "a"), grant(t, c, "b"), grant(t, c, "d")
	// The observer reads through a proxy, to tell when it has read a state.
	p, oc := proxiedClient(t, g.URL)
	obs, err := oc.Observe(ctx, "scheduler")
	if err != nil {
		t.Fatal(err)
	}
	next := func() *client.Holder { return nextLeader(t, obs) }
	if l := next(); l != nil {
		t.Fatalf("leader of a new election: %+v", l)
	}
	ca, err := a.Campaign(ctx, "scheduler", "a1", 0)
	if err != nil || !ca.Elected {
		t.Fatalf("a: %+v %v", ca, err)
	}
	if l := next(); l == nil || l.Lease != a.ID() || l.Value != "a1" {
		t.Fatalf("leader %+v, want a (a1)", l)
	}
	// b and d join the line and d leaves it: the leader stays a, and the
	// next thing Observe delivers is a's new value.
	for _, l := range []*client.Lease{b, d} {
		if cl, err := l.Campaign(ctx, "scheduler", l.Holder(), 0); err != nil || cl.Elected {
			t.Fatalf("%s: %+v %v", l.Holder(), cl, err)
		}
	}
	if err := d.Resign(ctx, "scheduler"); err != nil {
		t.Fatal(err)
	}
	st, err := c.ElectionState(ctx, "scheduler")
	if err != nil || len(st.Candidates) != 2 {
		t.Fatalf("state %+v %v", st, err)
	}
	readPast(t, p, st.Index) // it read the line's changes before the proclaim
	if err := ca.Proclaim(ctx, "a2"); err != nil || ca.Value != "a2" {
		t.Fatalf("Campaign.Proclaim: %v (value %q)", err, ca.Value)
	}
	if l := next(); l == nil || l.Lease != a.ID() || l.Value != "a2" {
		t.Fatalf("leader %+v, want a (a2)", l)
	}
	if err := ca.Resign(ctx); err != nil {
		t.Fatalf("Campaign.Resign: %v", err)
	}
	if l := next(); l == nil || l.Lease != b.ID() {
		t.Fatalf("leader %+v after a resigned, want b", l)
	}
	// a may campaign again (Resign freed the name), and the gateway says it
	// is in line, not leading.
	if again, err := a.Campaign(ctx, "scheduler", "a3", 0); err != nil || again.Elected || again.Position != 1 {
		t.Fatalf("a again: %+v %v", again, err)
	}
	if err := (&client.Campaign{Name: "scheduler"}).Resign(ctx); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("Resign of a Campaign no lease made: %v", err)
	}
}
