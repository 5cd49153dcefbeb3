package faults

import (
	"net/http"
	"testing"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// A vanished client's waiter is looked for vanishWait after the hang-up;
// once the lease is seen moving (a 503, another keeper), for the grace in
// which the gateway that took it over keeps the waiter for a retry, from
// then on: a waiter handed over as its client hung up leaves only after
// that grace, and is no violation before (a seed-7 run judged one so).
func TestVanishedWaiterIsLookedForPastAHandoversGrace(t *testing.T) {
	t.Parallel()
	hungUp := time.Date(2026, 11, 26, 0, 15, 47, 0, time.UTC)
	at := func(d time.Duration) time.Time { return hungUp.Add(d) }
	margin := vanishWait / 2

	w := newVanishWatch(hungUp)
	w.saw(http.StatusOK, "gw-a", at(100*time.Millisecond))
	w.saw(http.StatusOK, "gw-a", at(5*time.Second))
	if want := at(vanishWait); !w.deadline.Equal(want) {
		t.Fatalf("answers from one keeper: looked for until %v, want %v", w.deadline, want)
	}

	w = newVanishWatch(hungUp)
	w.saw(http.StatusServiceUnavailable, "", at(time.Millisecond))
	if want := at(time.Millisecond + recipes.HandoverGrace + margin); !w.deadline.Equal(want) {
		t.Fatalf("after a 503: looked for until %v, want %v", w.deadline, want)
	}

	w = newVanishWatch(hungUp)
	w.saw(http.StatusOK, "gw-a", at(time.Second))
	w.saw(http.StatusOK, "gw-b", at(2*time.Second))
	if want := at(2*time.Second + recipes.HandoverGrace + margin); !w.deadline.Equal(want) {
		t.Fatalf("after the keeper changed: looked for until %v, want %v", w.deadline, want)
	}

	// However long the lease keeps moving (or its gateway unreachable),
	// the waiter is looked for a bounded time.
	w = newVanishWatch(hungUp)
	for d := time.Duration(0); d < time.Minute; d += time.Second {
		w.saw(http.StatusServiceUnavailable, "", at(d))
	}
	if want := at(vanishWait + recipes.HandoverGrace + margin); !w.deadline.Equal(want) {
		t.Fatalf("503s for a minute: looked for until %v, want at most %v", w.deadline, want)
	}
}
