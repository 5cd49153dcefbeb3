package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// promised reads what an answer about a lease promises: its expires_at, and
// the gateway's clock when it answered (X-Zkgate-Time).
func promised(t testing.TB, r gwtest.Response) (expiresAt, now time.Time) {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, r.JSON(t)["expires_at"].(string))
	if err != nil {
		t.Fatalf("expires_at: %v in %s", err, r.Body)
	}
	now, err = time.Parse(time.RFC3339Nano, r.Header.Get("X-Zkgate-Time"))
	if err != nil {
		t.Fatalf("X-Zkgate-Time %q: %v", r.Header.Get("X-Zkgate-Time"), err)
	}
	return at, now
}

// queuedAcquire starts an acquire of lock name by lease, waiting up to
// 30s, on the gateway at url, and returns once the lock lists it as its
// one waiter; the answer comes on the channel.
func queuedAcquire(t *testing.T, url, name, lease string) <-chan gwtest.Response {
	t.Helper()
	got := make(chan gwtest.Response, 1)
	go func() {
		r, _ := gwtest.DoCtx(context.Background(), "POST", url+"/v1/locks/"+name+"/acquire?wait=30s", map[string]any{"lease": lease})
		got <- r
	}()
	gwtest.Eventually(t, 10*time.Second, func() error {
		if n := len(lockState(t, url, name)["waiters"].([]any)); n != 1 {
			return fmt.Errorf("%d waiters", n)
		}
		return nil
	})
	return got
}

// A draining gateway answered a keepalive with X-Zkgate-Lease-Ends at the
// drain's end and, in the same answer, an expires_at a whole TTL later,
// which the CLI believed. No answer promises a lease past the drain.
func TestADrainingGatewayPromisesNoLeasePastItsEnd(t *testing.T) {
	t.Parallel()
	a := gwtest.StartProcess(t, gwtest.GatewayOptions{DrainTimeout: 5 * time.Second})
	lease := newLease(t, a.URL, "1m", "drained")
	mustStatus(t, acquire(t, a.URL, "promise", lease, "0s"), http.StatusOK, "acquire")
	a.Drain(t)
	for _, r := range []gwtest.Response{
		gwtest.Do(t, "POST", a.URL+"/v1/leases/"+lease+"/keepalive", nil),
		gwtest.Do(t, "GET", a.URL+"/v1/leases/"+lease, nil),
	} {
		mustStatus(t, r, http.StatusOK, "the lease while draining")
		ends, err := time.Parse(time.RFC3339Nano, r.Header.Get("X-Zkgate-Lease-Ends"))
		if err != nil {
			t.Fatalf("X-Zkgate-Lease-Ends %q: %v", r.Header.Get("X-Zkgate-Lease-Ends"), err)
		}
		if at, _ := promised(t, r); at.After(ends) {
			t.Fatalf("expires_at %s is after the drain's end %s", at.Format(time.RFC3339Nano), ends.Format(time.RFC3339Nano))
		}
	}
	list := gwtest.Do(t, "GET", a.URL+"/v1/leases?scope=gateway", nil)
	mustStatus(t, list, http.StatusOK, "list while draining")
	ends, _ := time.Parse(time.RFC3339Nano, list.Header.Get("X-Zkgate-Lease-Ends"))
	for _, l := range list.JSON(t)["leases"].([]any) {
		at, _ := time.Parse(time.RFC3339Nano, l.(map[string]any)["expires_at"].(string))
		if at.After(ends) {
			t.Fatalf("the list promises %s past the drain's end %s", at, ends)
		}
	}
}

// zkgate lock's default TTL (15s) was longer than the gateway's session
// timeout (10s): when the gateway was SIGKILLed, ZooKeeper handed its locks
// on when the session expired while its holders still counted down their
// TTL. A lease is never promised past what its session keeps: the last
// keepalive's expires_at comes before any grant to another holder. (One
// machine, one clock: the two gateways' times compare directly.)
func TestALeaseIsPromisedNoLongerThanItsSession(t *testing.T) {
	t.Parallel()
	p := gwtest.StartProcess(t, gwtest.GatewayOptions{SessionTimeout: 2 * time.Second})
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: p.Root})
	lease := newLease(t, p.URL, "15s", "doomed")
	mustStatus(t, acquire(t, p.URL, "promise", lease, "0s"), http.StatusOK, "acquire on the doomed gateway")
	ka := gwtest.Do(t, "POST", p.URL+"/v1/leases/"+lease+"/keepalive", nil)
	mustStatus(t, ka, http.StatusOK, "keepalive")
	at, now := promised(t, ka)
	if ahead := at.Sub(now); ahead > 2*time.Second {
		t.Fatalf("a keepalive promised %s ahead; the session (2s) keeps the lock for less", ahead)
	}
	waiter := newLease(t, g.URL, "1m", "next")
	got := queuedAcquire(t, g.URL, "promise", waiter)
	p.Kill()
	next := <-got
	mustStatus(t, next, http.StatusOK, "the lock after its holder's gateway died")
	granted, err := time.Parse(time.RFC3339Nano, next.JSON(t)["acquired_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if !granted.After(at) {
		t.Fatalf("the lock went to another holder at %s, before the end %s promised to its holder", granted.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
	}
	t.Logf("promised until %s; granted to the next holder %s later", at.Format(time.RFC3339Nano), granted.Sub(at).Round(time.Millisecond))
}

// Through a gateway whose ZooKeeper server lags the leader, keepalives of a
// lease made a moment before through another gateway answered 404 (and
// 410 session_lost): the lookup read the lease's record and history without
// a sync. Every lookup that could say 404 or 410 syncs first.
func TestALeaseMadeElsewhereIsFoundAtOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ens := gwtest.Ensemble(t, ctx)
	leader := gwtest.Leader(t, ctx, ens)
	addrs := ens.Addrs()
	follower := addrs[(leader+1)%len(addrs)]
	root := gwtest.UniqueRoot(t)
	// All the leases come from one address: lift its lease rate.
	opts := gwtest.GatewayOptions{ZK: []string{addrs[leader]}, Root: root, SessionTimeout: 10 * time.Second, Extra: []string{"--lease-rate", "100000"}}
	maker := gwtest.StartProcess(t, opts)
	opts.ZK = []string{follower}
	reader := gwtest.StartProcess(t, opts)

	const leases = 600
	var wrong atomic.Int64
	var first sync.Once
	var example string
	note := func(what string, r gwtest.Response) {
		wrong.Add(1)
		first.Do(func() { example = fmt.Sprintf("%s: %d %s", what, r.Status, r.Body) })
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			ctx := context.Background()
			for range work {
				r, _ := gwtest.DoCtx(ctx, "POST", maker.URL+"/v1/leases", map[string]any{"ttl": "30s", "holder": "elsewhere"})
				var lease struct{ ID string }
				if r.Status != http.StatusCreated || json.Unmarshal(r.Body, &lease) != nil {
					note("create", r)
					continue
				}
				if r, _ := gwtest.DoCtx(ctx, "POST", reader.URL+"/v1/leases/"+lease.ID+"/keepalive", nil); r.Status != http.StatusOK {
					note("keepalive through the follower's gateway", r)
				}
				_, _ = gwtest.DoCtx(ctx, "DELETE", maker.URL+"/v1/leases/"+lease.ID, nil)
			}
		})
	}
	for i := range leases {
		work <- i
	}
	close(work)
	wg.Wait()
	if n := wrong.Load(); n > 0 {
		t.Fatalf("%d of %d leases made through one gateway were not found alive through another, e.g. %s", n, leases, example)
	}
}

// After a SIGKILL and an immediate restart on the same address, every
// gateway answered 404 lease_not_found for the old process's leases (the
// request was forwarded to the new process, which did not know them) until
// ZooKeeper expired the old session. A lease whose gateway is gone answers
// 410 with its reason at once, on every gateway.
func TestARestartedGatewayDisownsNoLeaseWith404(t *testing.T) {
	t.Parallel()
	addr := gwtest.FreeAddr(t)
	opts := gwtest.GatewayOptions{SessionTimeout: 20 * time.Second, Extra: []string{"--listen", addr}}
	old := gwtest.StartProcess(t, opts)
	opts.Root = old.Root
	other := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: old.Root, SessionTimeout: 20 * time.Second})
	lease := newLease(t, old.URL, "1m", "orphan")
	mustStatus(t, acquire(t, old.URL, "restart", lease, "0s"), http.StatusOK, "acquire on the old process")
	old.Kill()
	restarted := gwtest.StartProcess(t, opts)
	for _, url := range []string{restarted.URL, other.URL} {
		r := gwtest.Do(t, "POST", url+"/v1/leases/"+lease+"/keepalive", nil)
		if r.Status != http.StatusGone || r.JSON(t)["reason"] != "session_lost" {
			t.Fatalf("keepalive of the dead process's lease through %s: %d %s, want 410 session_lost", url, r.Status, r.Body)
		}
		mustStatus(t, gwtest.Do(t, "GET", url+"/v1/leases/"+lease, nil), http.StatusGone, "the dead process's lease")
	}
}

// Lock-delay across gateways: a lease with a lock_delay whose gateway is
// SIGKILLed holds its lock back from everyone, through any gateway, until
// that delay after its session ended; a lock_delay above the cap is a 400.
func TestLockDelayAcrossGateways(t *testing.T) {
	t.Parallel()
	p := gwtest.StartProcess(t, gwtest.GatewayOptions{SessionTimeout: 2 * time.Second})
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: p.Root})
	r := gwtest.Do(t, "POST", p.URL+"/v1/leases", map[string]any{"ttl": "1m", "holder": "delayed", "lock_delay": "4s"})
	mustStatus(t, r, http.StatusCreated, "a lease with a lock_delay")
	if got := r.JSON(t)["lock_delay"]; got != "4s" {
		t.Fatalf("lock_delay answered %v, want 4s", got)
	}
	lease := r.JSON(t)["id"].(string)
	mustStatus(t, acquire(t, p.URL, "delayed", lease, "0s"), http.StatusOK, "acquire")
	waiter := newLease(t, g.URL, "1m", "next")
	got := queuedAcquire(t, g.URL, "delayed", waiter)
	killed := time.Now()
	p.Kill()
	next := <-got
	mustStatus(t, next, http.StatusOK, "the lock after its holder's gateway died")
	if held := time.Since(killed); held < 4*time.Second {
		t.Fatalf("the lock was granted %s after its holder's gateway died; its lock_delay is 4s", held)
	}
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/leases", map[string]any{"lock_delay": "2m"}), http.StatusBadRequest, "a lock_delay above --max-lock-delay")
}
