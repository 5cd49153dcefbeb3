//go:build linux

package faults

import (
	"context"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// oneGateway is a runner whose clients reach one in-process gateway (on the
// shared ZooKeeper, session timeout 2 s) with leases of ttl, watched by an
// observer.
func oneGateway(t *testing.T, ttl time.Duration) *runner {
	t.Helper()
	zk := gwtest.ZK(t)
	gw := gwtest.StartGateway(t, gwtest.GatewayOptions{SessionTimeout: 2 * time.Second})
	cfg := Config{Binary: "unused", Seed: 1, LeaseTTL: ttl}.withDefaults()
	r := newRunner(cfg)
	r.cl = &cluster{gateways: []*gateway{{url: gw.URL}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obs, err := startObserver(ctx, []string{zk.Addr()}, gw.Root, r.hist)
	if err != nil {
		t.Fatalf("observer: %v", err)
	}
	r.obs = obs
	t.Cleanup(func() {
		obs.close()
		r.http.CloseIdleConnections()
	})
	return r
}

// A holder acts under its lease only until the deadline its gateway last
// confirmed: with a TTL of an hour and a session timeout of 2 s, that is
// what the session is known to keep (under 2 s after the last answer), not
// the TTL's end.
func TestLeaseClientStopsAtTheConfirmedDeadline(t *testing.T) {
	r := oneGateway(t, time.Hour)
	c := r.newLeaseClient("holder", 1)
	ctx := context.Background()
	id := c.lease(ctx)
	if id == "" {
		t.Fatal("no lease made")
	}
	c.stopKeepAlive()
	if !c.valid() {
		t.Fatal("a lease just made is not valid")
	}
	madeAt := r.hist.Leases[id].Created
	for deadline := time.Now().Add(10 * time.Second); c.valid(); {
		if time.Now().After(deadline) {
			t.Fatalf("the client still acts under lease %s %s after making it (TTL 1h, session timeout 2s): its deadline is not the one its gateway confirmed",
				id, time.Since(madeAt).Round(time.Millisecond))
		}
		time.Sleep(10 * time.Millisecond) // polling valid, bounded by the deadline
	}
	c.drop(ctx)
}

// A silent lease whose expires_at (bounded by the session) comes before its
// TTL's end is still alive in between: the zombie check reads it only once
// the TTL has run out since its last extension, and the checker finds no
// lease that outlived its TTL.
func TestZombieCheckWaitsForTheTTL(t *testing.T) {
	r := oneGateway(t, 3*time.Second)
	c := r.newLeaseClient("zombie", 1)
	id := c.lease(context.Background())
	if id == "" {
		t.Fatal("no lease made")
	}
	c.stopKeepAlive()
	c.zombieCheck(id)
	r.hist.mu.Lock()
	zombies := r.hist.Zombies
	r.hist.mu.Unlock()
	if len(zombies) != 1 || zombies[0].Status == 0 || zombies[0].Skipped {
		t.Fatalf("zombie checks %+v, want one read answered", zombies)
	}
	if _, counts := Check(r.hist); counts[VOutlivedTTL] != 0 {
		t.Fatalf("%s reported for a lease read before its TTL ran out: %+v", VOutlivedTTL, zombies[0])
	}
	if zombies[0].Status != 410 {
		t.Fatalf("the read after its TTL answered %d, want 410", zombies[0].Status)
	}
}
