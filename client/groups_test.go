package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
)

// TestGroups: members join (one again, idempotently), are listed with
// their data and watched, leave, and go with their lease.
func TestGroups(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	_, c := gateway(t)
	ctx := ctxFor(t, time.Minute)
	wctx, stop := context.WithCancel(ctx)
	w, err := c.WatchGroup(wctx, "workers")
	if err != nil {
		t.Fatal(err)
	}
	if first := <-w.C; len(first.Members) != 0 {
		t.Fatalf("first %+v", first)
	}
	a, b := grant(t, c, "a"), grant(t, c, "b")
	st, err := a.Join(ctx, "workers", "w1", "10.0.0.1:80")
	if err != nil || st.Member != "w1" || st.Lease != a.ID() || len(st.Members) != 1 {
		t.Fatalf("join: %+v %v", st, err)
	}
	if _, err := a.Join(ctx, "workers", "w1", "10.0.0.1:80"); err != nil {
		t.Fatalf("the same join again: %v", err)
	}
	if joined := <-w.C; len(joined.Members) != 1 || joined.Members[0].Value != "10.0.0.1:80" || joined.Members[0].Holder != "a" {
		t.Fatalf("watched after the join: %+v", joined)
	}
	if _, err := b.Join(ctx, "workers", "w1", ""); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("another lease's join as w1: %v", err)
	}
	st, err = b.Join(ctx, "workers", "", "")
	if err != nil || st.Member != b.ID() {
		t.Fatalf("a join with no member id: %+v %v", st, err)
	}
	groups, err := c.Groups(ctx)
	if err != nil || len(groups) != 1 || len(groups[0].Members) != 2 {
		t.Fatalf("groups: %+v %v", groups, err)
	}
	if err := a.LeaveGroup(ctx, "workers", "w1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := c.GroupState(ctx, "workers"); err != nil || len(st.Members) != 0 {
		t.Fatalf("after the leave and the revoke: %+v %v", st, err)
	}
	stop()
	for range w.C {
	}
}
