package recipes

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
)

// The line of sequential nodes: waits that end while arming a watch or
// with their lease.

// A wait whose context ends while it arms the shared watch of its
// predecessor answers as a wait that ended (it answered internal: the
// cancelled context went on as if ZooKeeper had failed).
func TestAWaitCancelledWhileArmingItsWatchIsNoInternalError(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	holdLock(t, svc, "busy")
	waiter, _ := svc.Leases.Create(ctx, time.Minute, "waiter", "")
	parent := svc.root + "/locks/busy"
	node, _, _, err := svc.sess.createProtected(ctx, parent, waiter.ID, "lock-", nil, waiter.epoch, false)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 40 {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := svc.waitTurn(cctx, waiter, parent, node, nil, lockMarkers, lockBlocks, false, nil)
		if code := ErrorCode(err); code == CodeInternal {
			t.Fatalf("round %d: a cancelled wait answered %v", round, err)
		}
	}
}

// A wait ended by its lease's end answers lease_expired, whichever call was
// under way when the lease's end cancelled it (it answered internal when
// that was the arming of a shared watch).
func TestWaitEndedByItsLeaseAnswersLeaseExpired(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	holdLock(t, svc, "busy")
	for round := range 30 {
		waiter, _ := svc.Leases.Create(ctx, time.Minute, "waiter", "")
		done := make(chan error, 1)
		go func() {
			_, err := svc.Locks.Acquire(ctx, waiter, "busy", ModeExclusive, time.Minute)
			done <- err
		}()
		if round%2 == 0 {
			zktest.Eventually(t, 10*time.Second, func() error {
				if len(waiter.Info().Holds) == 0 {
					return errors.New("not waiting yet")
				}
				return nil
			})
		}
		if err := svc.Leases.Revoke(waiter.ID); err != nil {
			t.Fatal(err)
		}
		if err := <-done; ErrorCode(err) != CodeLeaseExpired {
			t.Fatalf("round %d: a wait whose lease was revoked answered %v, want lease_expired", round, err)
		}
	}
}
