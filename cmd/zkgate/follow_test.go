package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
)

// TestFollowingALeadershipStopsByTheDeadlineWhileItsGatewayHangs: the
// deadline stops CMD even while the election's first read hangs, as it does
// when the gateway is frozen (SIGSTOP, a stalled machine) just as zkgate
// elect starts following its election. Following blocked in that read
// until it gave up, so that CMD worked seconds past the deadline beside the
// next leader.
func TestFollowingALeadershipStopsByTheDeadlineWhileItsGatewayHangs(t *testing.T) {
	t.Parallel()
	hung := make(chan struct{})
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // a frozen gateway: the request is read, never answered
		case <-hung:
		case <-r.Context().Done():
		}
	}))
	defer gw.Close()
	defer close(hung)
	c, err := client.New(gw.URL)
	if err != nil {
		t.Fatal(err)
	}
	ending := make(chan struct{})
	close(ending) // the deadline, less the grace, has come
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- followLeadership(ctx, c, c.Lease("a-lease"), ending, "held") }()
	select {
	case err := <-done:
		if !errors.Is(err, errUnconfirmed) {
			t.Fatalf("following ended with %v, want %v", err, errUnconfirmed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("following did not end within 10s of its deadline while the gateway hung")
	}
}
