package recipes

import (
	"context"
	"testing"
	"time"
)

// A double barrier's enter or leave whose wait ends while it works answers
// the barrier's state if it got there, a timeout if not, never an internal
// error: a read cut short by the end of the wait was one (a 500), and a
// leave that had left read the state it answers on the ended wait. A wait
// of 1ns ends before anything is read.
func TestADoubleBarrierCallThatSucceedsAsItsWaitEndsAnswersItsState(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	lease := newLease(t, svc, "member")
	// Entered with a count of 1, a try-once: ready at once.
	st, err := svc.DoubleBarriers.Enter(ctx, lease, "quick", "a", 1, 0)
	if err != nil || !st.Ready {
		t.Fatalf("enter: %+v, %v", st, err)
	}
	st, err = svc.DoubleBarriers.Leave(ctx, lease, "quick", "a", time.Nanosecond)
	if err != nil {
		t.Fatalf("a leave that left, with a wait of 1ns: %v", err)
	}
	if len(st.Members) != 0 {
		t.Fatalf("after the leave the barrier has members %+v", st.Members)
	}
	for range 5 {
		st, err = svc.DoubleBarriers.Enter(ctx, lease, "quicker", "a", 1, time.Nanosecond)
		if err == nil {
			if !st.Ready {
				t.Fatalf("an enter that succeeded answered %+v", st)
			}
			break
		}
		if ErrorCode(err) != CodeTimeout {
			t.Fatalf("an enter with a wait of 1ns: %v; want the state or a timeout", err)
		}
	}
}
