package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestDrainedRestart: on SIGTERM a gateway drains. /readyz answers 503, new
// leases and new waits answer 503 with Retry-After, answers for its leases
// say when they end, every answer closes its connection, and a holder
// releases normally; the gateway exits as soon as no lease is left. Then a rolling restart of two gateways under
// load: no answer is a 5xx other than the documented 503s, and no two
// holders ever overlap.
func TestDrainedRestart(t *testing.T) {
	t.Parallel()
	// The load's six clients make a lease a cycle, all from 127.0.0.1: on a
	// quiet machine more than the default --lease-rate (100 a second), whose
	// 429s are not what this test is about.
	opts := gwtest.GatewayOptions{Root: gwtest.UniqueRoot(t), DrainTimeout: 4 * time.Second, Extra: []string{"--lease-rate", "100000"}}
	drainOne(t, opts)
	restartUnderLoad(t, opts)
}

// drainOne: a gateway started with opts drains on SIGTERM (503s with
// Retry-After for new leases and holds, the end of its leases in
// answers, each answer closing its connection, releases served) and exits
// 0 once no lease is left.
func drainOne(t *testing.T, opts gwtest.GatewayOptions) {
	t.Helper()
	a := gwtest.StartProcess(t, opts)

	holder := newLease(t, a.URL, "1m", "holder")
	mustStatus(t, acquire(t, a.URL, "drained", holder, "0s"), http.StatusOK, "acquire before the drain")
	a.Drain(t)
	// A connection that a load balancer keeps on this gateway (kube-proxy
	// keeps a terminating pod's) is closed after its answer: the client's
	// next request reconnects and goes to a ready gateway, instead of
	// meeting this one's 503s for the whole drain.
	resp, err := http.Get(a.URL + "/v1/leases/" + holder)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !resp.Close {
		t.Errorf("an answer of a draining gateway (%d) keeps its connection open: no Connection: close", resp.StatusCode)
	}
	r := gwtest.Do(t, "POST", a.URL+"/v1/leases", map[string]any{"ttl": "10s"})
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a new lease on a draining gateway: %d %v %s, want 503 with Retry-After", r.Status, r.Header, r.Body)
	}
	mustStatus(t, acquire(t, a.URL, "other", holder, "0s"), http.StatusServiceUnavailable, "a new hold while draining")
	r = gwtest.Do(t, "POST", a.URL+"/v1/leases/"+holder+"/keepalive", nil)
	if r.Status != http.StatusOK || r.Header.Get("X-Zkgate-Lease-Ends") == "" {
		t.Fatalf("a keepalive while draining: %d %v, want 200 saying when the lease ends", r.Status, r.Header)
	}
	mustStatus(t, gwtest.Do(t, "POST", a.URL+"/v1/locks/drained/release", map[string]any{"lease": holder}), http.StatusNoContent, "release while draining")
	mustStatus(t, gwtest.Do(t, "DELETE", a.URL+"/v1/leases/"+holder, nil), http.StatusNoContent, "revoke while draining")
	gwtest.Receive(t, a.Done(), 3*time.Second, "the draining gateway's exit with no lease left")
	if _, code := a.Exited(); code != 0 {
		t.Fatalf("a drained gateway exited %d", code)
	}
}

// restartUnderLoad: a rolling restart of two gateways started with opts,
// under six clients taking a lock: no answer other than the documented
// ones, and no two holders overlap.
func restartUnderLoad(t *testing.T, opts gwtest.GatewayOptions) {
	t.Helper()
	var mu sync.Mutex
	gws := []*gwtest.Proc{gwtest.StartProcess(t, opts), gwtest.StartProcess(t, opts)}
	pick := func() string {
		mu.Lock()
		defer mu.Unlock()
		return gws[rand.IntN(len(gws))].URL
	}
	register := gwtest.NewFencedRegister()
	var grants, refused atomic.Int64
	unexpected := make(chan string, 100)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for c := range 6 {
		wg.Go(func() {
			for ctx.Err() == nil {
				n, err := drainCycle(ctx, pick(), fmt.Sprintf("c%d", c), register)
				switch {
				case err != nil && ctx.Err() == nil:
					select {
					case unexpected <- err.Error():
					default:
					}
				case n > 0:
					grants.Add(1)
				default:
					refused.Add(1)
				}
			}
		})
	}
	waitGrants := func(n int64) {
		gwtest.Eventually(t, 60*time.Second, func() error {
			if g := grants.Load(); g < n {
				return fmt.Errorf("%d grants of %d", g, n)
			}
			return nil
		})
	}
	waitGrants(20)
	for i := range gws {
		mu.Lock()
		old := gws[i]
		mu.Unlock()
		old.Terminate()
		gwtest.Receive(t, old.Done(), 20*time.Second, "the draining gateway's exit")
		fresh := gwtest.StartProcess(t, opts)
		mu.Lock()
		gws[i] = fresh
		mu.Unlock()
		waitGrants(grants.Load() + 20)
	}
	stop()
	wg.Wait()
	close(unexpected)
	for u := range unexpected {
		t.Error(u)
	}
	t.Logf("%d grants, %d cycles refused (503) or timed out during the rolling restart", grants.Load(), refused.Load())
	register.Check(t)
}

// drainCycle takes a lease on gw, the lock "rolling" with it, writes, and
// gives both back. It answers 1 for a grant, 0 for a cycle cut short by a
// documented answer (503, a lease that ended with its gateway, a timeout,
// a gateway gone), and an error for anything else.
func drainCycle(ctx context.Context, gw, who string, register *gwtest.FencedRegister) (int, error) {
	do := func(method, path string, body any) (gwtest.Response, bool, error) {
		r, err := gwtest.DoCtx(ctx, method, gw+path, body)
		if err != nil {
			return r, false, nil // the gateway is gone: try another
		}
		switch {
		case r.Status == http.StatusServiceUnavailable, r.Status == http.StatusGone,
			r.Status == http.StatusNotFound, r.Status == http.StatusConflict:
			return r, false, nil
		case r.Status >= 500:
			return r, false, fmt.Errorf("%s %s: %d %s", method, path, r.Status, r.Body)
		}
		return r, true, nil
	}
	r, ok, err := do("POST", "/v1/leases", map[string]any{"ttl": "10s", "holder": who})
	if !ok {
		return 0, err
	}
	var created struct{ ID string }
	_ = json.Unmarshal(r.Body, &created)
	lease := created.ID
	if lease == "" {
		return 0, errors.New("a lease without an id: " + string(r.Body))
	}
	defer func() { _, _, _ = do("DELETE", "/v1/leases/"+lease, nil) }()
	r, ok, err = do("POST", "/v1/locks/rolling/acquire?wait=5s", map[string]any{"lease": lease})
	if !ok {
		return 0, err
	}
	var grant struct{ Token int64 }
	if err := json.Unmarshal(r.Body, &grant); err != nil {
		return 0, fmt.Errorf("a grant that is not JSON: %s", r.Body)
	}
	register.Enter("rolling", lease, grant.Token)
	time.Sleep(time.Millisecond) // the holder's work
	register.Exit("rolling", lease)
	_, _, err = do("POST", "/v1/locks/rolling/release", map[string]any{"lease": lease})
	return 1, err
}
