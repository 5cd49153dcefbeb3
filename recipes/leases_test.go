package recipes

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// Leases: keepalives racing a lease's creation and its end.

// A keepalive of a lease listed before its timer was set dereferenced nil.
func TestKeepAliveRacingLeaseCreation(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			for _, l := range svc.Leases.List() {
				_, _ = svc.Leases.KeepAlive(l.ID)
			}
		}
	}()
	for range 200 {
		if _, err := svc.Leases.Create(context.Background(), time.Minute, "racer", ""); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
}

// A keepalive of a lease that ended between its first look and the
// extension (its TTL ran out that moment: the fault suite saw it) answered
// 200 without extending anything, so its client counted on a lease that had
// let its semaphore slot go.
func TestKeepAliveOfALeaseEndingMeanwhileAnswersEnded(t *testing.T) {
	// Not parallel: it sets keepAliveChecked, which every lease calls.
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	l := newLease(t, svc, "racer")
	if _, err := svc.Semaphores.Acquire(ctx, l, "slots", 1, time.Second); err != nil {
		t.Fatal(err)
	}
	keepAliveChecked = func(x *Lease) { x.end(EndExpired) }
	t.Cleanup(func() { keepAliveChecked = nil })
	got, err := svc.Leases.KeepAlive(l.ID)
	if ErrorCode(err) != CodeLeaseExpired {
		t.Fatalf("a keepalive of a lease that ended meanwhile answered %v, %v; want lease_expired", got, err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Extra["reason"] != EndExpired {
		t.Fatalf("reason: %v", err)
	}
}

// Looking up a lease of the gateway's own session, which every request
// that names a lease does, allocates nothing (the leases of adopted
// sessions are found too: TestHandOverKeepsLeasesAndHolds).
func TestLeaseLookupAllocatesNothing(t *testing.T) {
	svc := newService(t, serviceOptions{})
	l := newLease(t, svc, "looker")
	if n := testing.AllocsPerRun(100, func() {
		if got, err := svc.Leases.Get(l.ID); err != nil || got != l {
			t.Fatalf("Get: %v, %v", got, err)
		}
	}); n != 0 {
		t.Errorf("%.0f allocations per lookup, want none", n)
	}
	if _, ok := svc.Leases.Lookup("no-such-lease"); ok {
		t.Errorf("a lease that does not exist was found")
	}
}
