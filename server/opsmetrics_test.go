package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestOperatorMetrics: /metrics carries what the alert rules of
// deploy/prometheus need beside the counters: the caps of the limits, a
// readiness that follows /readyz (0 while draining), and the round trip of
// the session's heartbeat to ZooKeeper.
func TestOperatorMetrics(t *testing.T) {
	t.Parallel()
	g := gwtest.StartProcess(t, gwtest.GatewayOptions{DrainTimeout: 20 * time.Second, Extra: []string{
		"--max-leases", "7", "--max-leases-per-token", "3", "--lease-rate", "2.5", "--max-waiters", "11", "--max-waiters-per-name", "5"}})
	for limit, want := range map[string]float64{"max-leases": 7, "max-leases-per-token": 3, "lease-rate": 2.5, "max-waiters": 11, "max-waiters-per-name": 5} {
		if v := metricValue(t, g.URL, `zkgate_limit{limit="`+limit+`"}`); v != want {
			t.Errorf("zkgate_limit for %s: %v, want %v", limit, v, want)
		}
	}
	if v := metricValue(t, g.URL, "zkgate_ready"); v != 1 {
		t.Fatalf("zkgate_ready of a ready gateway: %v", v)
	}
	// The heartbeat asks ZooKeeper every third of the 2s session timeout.
	gwtest.Eventually(t, 10*time.Second, func() error {
		if v := metricValue(t, g.URL, "zkgate_zk_round_trip_seconds"); v <= 0 || v > 5 {
			return fmt.Errorf("zkgate_zk_round_trip_seconds %v", v)
		}
		return nil
	})

	// A held lease keeps the gateway draining until it is revoked.
	holder := newLease(t, g.URL, "1m", "holder")
	g.Drain(t)
	if v := metricValue(t, g.URL, "zkgate_ready"); v != 0 {
		t.Errorf("zkgate_ready of a draining gateway: %v", v)
	}
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+holder, nil), http.StatusNoContent, "revoke while draining")
	gwtest.Receive(t, g.Done(), 10*time.Second, "the draining gateway's exit with no lease left")
}
