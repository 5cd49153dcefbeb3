package server_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestKilledGatewayLosesLocks: a gateway killed with SIGKILL takes its
// ZooKeeper session with it, and a waiter on another gateway gets the lock
// once the session expires.
func TestKilledGatewayLosesLocks(t *testing.T) {
	t.Parallel()
	p := gwtest.StartProcess(t, gwtest.GatewayOptions{SessionTimeout: time.Second})
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: p.Root})
	conn := gwtest.Client(t, g.ZK, 5*time.Second)

	lease := newLease(t, p.URL, "1h", "doomed")
	first := acquire(t, p.URL, "k", lease, "0s")
	mustStatus(t, first, 200, "acquire on the first gateway")

	waiter := newLease(t, g.URL, "1m", "survivor")
	got := make(chan gwtest.Response, 1)
	go func() {
		resp, _ := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/locks/k/acquire?wait=30s", map[string]any{"lease": waiter})
		got <- resp
	}()
	gwtest.Eventually(t, 10*time.Second, func() error {
		st := lockState(t, g.URL, "k")
		if len(st["waiters"].([]any)) != 1 {
			return fmt.Errorf("no waiter yet: %v", st)
		}
		return nil
	})
	killed := time.Now()
	p.Kill()
	second := <-got
	mustStatus(t, second, 200, "acquire on the second gateway after the first was killed")
	t.Logf("lock handed over %s after SIGKILL (session timeout 1s)", time.Since(killed).Round(time.Millisecond))
	if tokenOf(t, second) <= tokenOf(t, first) {
		t.Fatalf("token did not grow across the handover")
	}
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+waiter, nil), 204, "revoke")
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// TestEnsembleLeaderKill: contenders keep taking one lock through a gateway
// on a 3-node ensemble while its leader is killed. No grant overlaps
// another, tokens keep growing, and the lock keeps being granted after the
// failover.
func TestEnsembleLeaderKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ens := gwtest.Ensemble(t, ctx)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{ZK: ens.Addrs(), SessionTimeout: 10 * time.Second})
	conn := gwtest.Client(t, ens.Addrs(), 10*time.Second)

	h := &haContention{url: g.URL, register: gwtest.NewFencedRegister(), stop: make(chan struct{})}
	var wg sync.WaitGroup
	const contenders = 8
	leases := make([]string, contenders)
	for i := range leases {
		leases[i] = newLease(t, g.URL, "2m", fmt.Sprintf("c%d", i))
	}
	for i := 0; i < contenders; i++ {
		wg.Go(func() { h.contend(t, leases[i]) })
	}
	waitGrants := func(n int64) {
		gwtest.Eventually(t, 45*time.Second, func() error {
			if got := h.grants.Load(); got < n {
				return fmt.Errorf("%d grants of %d", got, n)
			}
			return nil
		})
	}
	waitGrants(50)
	leader := gwtest.Leader(t, ctx, ens)
	before := h.grants.Load()
	if err := ens.Kill(leader); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed leader %d after %d grants", leader, before)
	waitGrants(before + 50)
	close(h.stop)
	wg.Wait()
	t.Logf("%d grants, %d unavailable/timeout answers during failover", h.grants.Load(), h.unavailable.Load())
	if n := h.register.Check(t); n == 0 {
		t.Fatal("no grant was checked")
	}
	for _, l := range leases {
		gwtest.Eventually(t, 20*time.Second, func() error {
			r, err := gwtest.DoCtx(context.Background(), "DELETE", g.URL+"/v1/leases/"+l, nil)
			if err != nil || r.Status != http.StatusNoContent {
				return fmt.Errorf("revoke %d %s %v", r.Status, r.Body, err)
			}
			return nil
		})
	}
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// haContention is contenders taking the lock ha through the gateway at
// url, each hold checked by the fenced register, until stop is closed.
type haContention struct {
	url         string
	register    *gwtest.FencedRegister
	grants      atomic.Int64
	unavailable atomic.Int64 // 503 and 409 answers to an acquire
	stop        chan struct{}
}

// contend takes and releases ha for lease until stop is closed, or an
// answer no failover explains.
func (h *haContention) contend(t *testing.T, lease string) {
	for {
		select {
		case <-h.stop:
			return
		default:
		}
		resp, err := gwtest.DoCtx(context.Background(), "POST", h.url+"/v1/locks/ha/acquire?wait=20s", map[string]any{"lease": lease})
		if err != nil {
			t.Errorf("acquire: %v", err)
			return
		}
		switch resp.Status {
		case http.StatusOK:
		case http.StatusServiceUnavailable, http.StatusConflict:
			h.unavailable.Add(1)
			time.Sleep(50 * time.Millisecond) // a client's back-off, not a wait for a condition
			continue
		default:
			t.Errorf("acquire: %d %s", resp.Status, resp.Body)
			return
		}
		var grant struct{ Token int64 }
		_ = jsonUnmarshal(resp.Body, &grant)
		h.register.Enter("ha", lease, grant.Token)
		time.Sleep(time.Millisecond) // the holder's work: a hold of real length
		h.register.Exit("ha", lease)
		h.grants.Add(1)
		if !h.release(t, lease) {
			return
		}
	}
}

// release releases ha for lease, again while the gateway answers 503;
// false (the test failed) on another answer.
func (h *haContention) release(t *testing.T, lease string) bool {
	for {
		rel, err := gwtest.DoCtx(context.Background(), "POST", h.url+"/v1/locks/ha/release", map[string]any{"lease": lease})
		if err != nil {
			t.Errorf("release: %v", err)
			return false
		}
		if rel.Status == http.StatusNoContent {
			return true
		}
		if rel.Status != http.StatusServiceUnavailable {
			t.Errorf("release: %d %s", rel.Status, rel.Body)
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestZooKeeperOutage: /readyz follows the session; while suspended, grants
// answer 503; once the session is given up, its leases are lost for good,
// and after ZooKeeper is back the gateway serves again on a new session.
func TestZooKeeperOutage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	zs := gwtest.OwnZK(t)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{ZK: []string{zs.Addr()}, SessionTimeout: 2 * time.Second})
	lease := newLease(t, g.URL, "1h", "through-the-outage")
	mustStatus(t, acquire(t, g.URL, "o", lease, "0s"), 200, "acquire")

	if err := zs.Kill(); err != nil {
		t.Fatal(err)
	}
	gwtest.Eventually(t, 10*time.Second, func() error {
		r, err := gwtest.DoCtx(ctx, "GET", g.URL+"/readyz", nil)
		if err != nil {
			return err
		}
		if r.Status != http.StatusServiceUnavailable {
			return fmt.Errorf("readyz %d", r.Status)
		}
		return nil
	})
	// Suspended or already lost: either way no grant is vouched for.
	r := gwtest.Do(t, "POST", g.URL+"/v1/locks/o/acquire", map[string]any{"lease": lease})
	if r.Status != http.StatusServiceUnavailable && r.Status != http.StatusGone {
		t.Fatalf("acquire while ZooKeeper is down: %d %s", r.Status, r.Body)
	}
	// After a whole session timeout the session is given up: the lease is lost.
	gwtest.Eventually(t, 15*time.Second, func() error {
		r, err := gwtest.DoCtx(ctx, "POST", g.URL+"/v1/leases/"+lease+"/keepalive", nil)
		if err != nil {
			return err
		}
		if r.Status != http.StatusGone {
			return fmt.Errorf("keepalive %d %s", r.Status, r.Body)
		}
		return nil
	})
	if err := zs.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	gwtest.WaitReady(t, g.URL, 30*time.Second)
	r = gwtest.Do(t, "GET", g.URL+"/v1/leases/"+lease, nil)
	mustStatus(t, r, http.StatusGone, "the lost lease stays lost")
	if r.JSON(t)["reason"] != "session_lost" {
		t.Fatalf("want reason session_lost: %s", r.Body)
	}
	// The old session's node expires; a new lease gets the lock.
	fresh := newLease(t, g.URL, "1m", "after")
	mustStatus(t, acquire(t, g.URL, "o", fresh, "20s"), 200, "acquire after the outage")
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+fresh, nil), 204, "revoke")
}
