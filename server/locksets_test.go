package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// ioAcquireSetAsync asks, in a goroutine, for the set of locks names (each
// exclusive) for lease, waiting up to 20s.
func ioAcquireSetAsync(g *gwtest.Gateway, lease string, names ...string) <-chan ioAsync {
	var set []map[string]string
	for _, n := range names {
		set = append(set, map[string]string{"name": n})
	}
	ch := make(chan ioAsync, 1)
	go func() {
		r, err := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/locks/acquire?wait=20s", map[string]any{"lease": lease, "locks": set})
		ch <- ioAsync{r, err}
	}()
	return ch
}

// A set's locks are ordinary locks: a Curator InterProcessMutex holding one
// keeps the set waiting, holding none of the others for it past the set's
// answer; a Curator mutex waits behind a lock of the set until the set is
// released; and a lock named "acquire" is a lock like any other.
func TestInteropCuratorMutexBesideALockSet(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	g, conn, p := interopStart(t, startCuratorPeer)
	a := ioLease(t, g, "30s", "zkgate-set")
	p.acquire(1, "mutex", g.Root+"/locks/b")
	p.acquired(1)
	set := ioAcquireSetAsync(g, a, "b", "a")
	// The set takes a, then waits in b's line behind Curator.
	ioWaitState(t, g.URL+"/v1/locks/b", func(st ioState) error {
		if len(st.Waiters) != 1 || st.Waiters[0].Lease != a {
			return fmt.Errorf("want the set's lease %s waiting for b", a)
		}
		return nil
	})
	ioWaitState(t, g.URL+"/v1/locks/a", func(st ioState) error {
		if len(st.Holders) != 1 || st.Holders[0].Lease != a {
			return fmt.Errorf("want the set's lease %s holding a, the first lock of its order", a)
		}
		return nil
	})
	ioNotYet(t, set, "the set")
	p.release(1)
	res := gwtest.Receive(t, set, interopWait, "the set granted")
	if res.err != nil || res.r.Status != http.StatusOK {
		t.Fatalf("the set: %v %d %s", res.err, res.r.Status, res.r.Body)
	}
	var got struct {
		Lease string `json:"lease"`
		Locks []struct {
			Name  string `json:"name"`
			Token int64  `json:"token"`
		} `json:"locks"`
	}
	if err := json.Unmarshal(res.r.Body, &got); err != nil || got.Lease != a || len(got.Locks) != 2 || got.Locks[0].Name != "a" || got.Locks[1].Name != "b" || got.Locks[1].Token <= 0 {
		t.Fatalf("the set's grants: %s, want a then b", res.r.Body)
	}
	// Curator waits behind the set's a until the set is released.
	p.acquire(2, "mutex", g.Root+"/locks/a")
	ioWaitState(t, g.URL+"/v1/locks/a", ioOneForeignWaiter("exclusive"))
	p.blocked(2)
	ioPost204(t, g.URL+"/v1/locks/release", map[string]any{"lease": a, "locks": []map[string]string{{"name": "a"}, {"name": "b"}}})
	p.acquired(2)
	p.release(2)

	// A lock named acquire is read and taken as any lock.
	if r := gwtest.Do(t, "GET", g.URL+"/v1/locks/acquire", nil); r.Status != http.StatusOK {
		t.Fatalf("GET /v1/locks/acquire: %d %s, want the state of the lock named acquire", r.Status, r.Body)
	}
	ioMustAcquireLock(t, g, "acquire", a, "")
	ioPost204(t, g.URL+"/v1/locks/acquire/release", map[string]any{"lease": a})
	// Releasing a set the lease does not hold names what it did not hold.
	if r := gwtest.Do(t, "POST", g.URL+"/v1/locks/release", map[string]any{"lease": a, "locks": []map[string]string{{"name": "a"}}}); r.Status != http.StatusConflict {
		t.Fatalf("releasing a set not held: %d %s, want 409 not_held", r.Status, r.Body)
	}
	p.exit()
	ioRevoke(t, g, a)
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// A set that waits counts against the per-name waiter cap of each of its
// locks, as a single acquire does against its own: with
// --max-waiters-per-name 1, a set naming a lock that has its waiter already
// is refused 429, and a set let in to wait keeps single waits off each of
// its locks. Before, the front door counted a set once, under no name, and
// any number of sets waited on one lock.
func TestALockSetCountsAgainstEachLocksWaiterCap(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: []string{"--max-waiters-per-name", "1"}})
	holder := ioLease(t, g, "1m", "holder")
	for _, name := range []string{"a", "b"} {
		mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/locks/"+name+"/acquire", map[string]any{"lease": holder}), 200, "hold "+name)
	}
	single := ioAcquireLockAsync(g, "a", ioLease(t, g, "1m", "single"), "")
	waitersOn := func(name string, n int) {
		t.Helper()
		ioWaitState(t, g.URL+"/v1/locks/"+name, func(st ioState) error {
			if len(st.Waiters) != n {
				return fmt.Errorf("%d waiters on %s, want %d", len(st.Waiters), name, n)
			}
			return nil
		})
	}
	waitersOn("a", 1)
	setLease := ioLease(t, g, "1m", "set")
	r := gwtest.Do(t, "POST", g.URL+"/v1/locks/acquire?wait=20s", map[string]any{"lease": setLease,
		"locks": []map[string]string{{"name": "c"}, {"name": "a"}}})
	wantTooMany(t, r, "max-waiters-per-name", "a set naming a lock with its waiter already")
	set := ioAcquireSetAsync(g, setLease, "c", "b")
	waitersOn("b", 1)
	other := ioLease(t, g, "1m", "other")
	for _, name := range []string{"b", "c"} {
		r := gwtest.Do(t, "POST", g.URL+"/v1/locks/"+name+"/acquire?wait=20s", map[string]any{"lease": other})
		wantTooMany(t, r, "max-waiters-per-name", "a wait on "+name+", which a waiting set names")
	}
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+holder, nil), 204, "revoke the holder")
	if res := <-single; res.err != nil || res.r.Status != http.StatusOK {
		t.Fatalf("the single waiter: %v %d %s", res.err, res.r.Status, res.r.Body)
	}
	if res := <-set; res.err != nil || res.r.Status != http.StatusOK {
		t.Fatalf("the set: %v %d %s", res.err, res.r.Status, res.r.Body)
	}
	// Their slots are back: a wait on c is let in (and times out at once).
	r = gwtest.Do(t, "POST", g.URL+"/v1/locks/c/acquire?wait=10ms", map[string]any{"lease": other})
	mustStatus(t, r, http.StatusConflict, "a short wait on c, held by the set")
}
