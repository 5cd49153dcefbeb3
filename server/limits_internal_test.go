package server

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/zkgate/zkgate/handlers"
	"github.com/zkgate/zkgate/recipes"
)

// TestLeaseBucketsOfGoneAddressesAreSwept: every client address that makes
// a lease gets a bucket for --lease-rate; once they have filled up again
// (a second at the default rate) they are dropped, so addresses that come
// and go do not pile up buckets.
func TestLeaseBucketsOfGoneAddressesAreSwept(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	l := newLimits(Limits{MaxLeases: 1 << 20, MaxLeasesPerToken: 10, LeaseRate: 100})
	l.now = func() time.Time { return now }
	for i := range 5000 {
		release, err := l.admitLease(client{addr: "10.0." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250)})
		if err != nil {
			t.Fatalf("lease %d: %v", i, err)
		}
		release()
	}
	if n := len(l.leaseRates.buckets); n < 5000-minSweep {
		t.Fatalf("%d buckets within the same second, want them kept (they are not full)", n)
	}
	now = now.Add(2 * time.Second)
	if _, err := l.admitLease(client{addr: "10.1.0.1"}); err != nil {
		t.Fatal(err)
	}
	if n := len(l.leaseRates.buckets); n > minSweep {
		t.Errorf("%d buckets two seconds after 5,000 addresses made a lease each, want at most %d", n, minSweep)
	}
	// A bucket still draining is kept: its client's rate still holds.
	var err error
	for range 200 {
		var release func()
		if release, err = l.admitLease(client{addr: "10.1.0.2"}); err != nil {
			break
		}
		release()
	}
	for i := range 2 * minSweep {
		release, _ := l.admitLease(client{addr: "10.2." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250)})
		release()
	}
	if _, err = l.admitLease(client{addr: "10.1.0.2"}); err == nil || err.(*handlers.LimitError).Limit != "lease-rate" {
		t.Errorf("a client at its rate, after other clients' buckets were swept: %v, want lease-rate", err)
	}
}

// TestFanOutsWaitTheirTurnThenAreRefused: --fan-out-rate gives a client
// bursts of twice its rate; past them, each read takes the next turn, a
// tenth of a second apart at 10 a second, up to maxPace ahead; the one
// after is refused (fan-out-rate, Retry-After until a turn is within
// maxPace), and another client has its own burst.
func TestFanOutsWaitTheirTurnThenAreRefused(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	l := newLimits(Limits{FanOutRate: 10})
	l.now = func() time.Time { return now }
	c := client{token: "flood"}
	for i := range 20 {
		if wait, ok := l.fanOuts.take(c, now, maxPace); !ok || wait != 0 {
			t.Fatalf("read %d of the burst: wait %s, %v; want none", i, wait, ok)
		}
	}
	for i := 1; i <= 10; i++ {
		wait, ok := l.fanOuts.take(c, now, maxPace)
		if want := time.Duration(i) * 100 * time.Millisecond; !ok || (wait-want).Abs() > time.Millisecond {
			t.Fatalf("read %d past the burst: wait %s, %v; want its turn %s ahead", i, wait, ok, want)
		}
	}
	err := l.pace(context.Background(), c)
	var le *handlers.LimitError
	if !errors.As(err, &le) || le.Limit != "fan-out-rate" || (le.RetryAfter-100*time.Millisecond).Abs() > time.Millisecond {
		t.Fatalf("a read with ten waiting: %v, want fan-out-rate with Retry-After 100ms", err)
	}
	if err := l.pace(context.Background(), client{token: "other"}); err != nil {
		t.Fatalf("another token's read: %v", err)
	}
	// Half a second on, five turns have gone: five more may queue.
	now = now.Add(500 * time.Millisecond)
	for i := range 5 {
		if _, ok := l.fanOuts.take(c, now, maxPace); !ok {
			t.Fatalf("read %d half a second on: refused", i)
		}
	}
	if _, ok := l.fanOuts.take(c, now, maxPace); ok {
		t.Fatal("a sixth read half a second on was given a turn more than a second ahead")
	}
	// A wait that its request's end cuts short answers at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	now = now.Add(10 * time.Second)
	for range 20 {
		l.fanOuts.take(c, now, maxPace)
	}
	if err := l.pace(ctx, c); recipes.ErrorCode(err) != recipes.CodeTimeout {
		t.Fatalf("a wait whose request ended: %v, want timeout", err)
	}
}
