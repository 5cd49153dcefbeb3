package server

import (
	"strconv"
	"testing"
	"time"

	"github.com/zkgate/zkgate/handlers"
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
	if n := len(l.buckets); n < 5000-minSweep {
		t.Fatalf("%d buckets within the same second, want them kept (they are not full)", n)
	}
	now = now.Add(2 * time.Second)
	if _, err := l.admitLease(client{addr: "10.1.0.1"}); err != nil {
		t.Fatal(err)
	}
	if n := len(l.buckets); n > minSweep {
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
