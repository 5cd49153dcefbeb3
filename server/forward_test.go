package server_test

import (
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestLeaseOnAnotherGateway: behind a load balancer a client's requests
// reach any gateway; those for a lease another gateway owns are forwarded
// to it, so the client never sees which gateway holds its lease.
//
//zkgate:race
func TestLeaseOnAnotherGateway(t *testing.T) {
	t.Parallel()
	a := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	b := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: a.Root})
	conn := gwtest.Client(t, a.ZK, 5*time.Second)
	lease := newLease(t, a.URL, "30s", "roaming")

	r := acquire(t, b.URL, "shared", lease, "0s")
	mustStatus(t, r, 200, "acquire through the other gateway")
	if r.Header.Get("X-Zkgate-Served-By") == "" {
		t.Fatalf("the answer should say which gateway served it")
	}
	mustStatus(t, gwtest.Do(t, "POST", b.URL+"/v1/leases/"+lease+"/keepalive", nil), 200, "keepalive through b")
	info := gwtest.Do(t, "GET", b.URL+"/v1/leases/"+lease, nil)
	mustStatus(t, info, 200, "lease through b")
	if len(info.JSON(t)["holds"].([]any)) != 1 {
		t.Fatalf("the lease should show its lock: %s", info.Body)
	}
	mustStatus(t, gwtest.Do(t, "POST", b.URL+"/v1/locks/shared/release", map[string]any{"lease": lease}), 204, "release through b")
	mustStatus(t, gwtest.Do(t, "DELETE", b.URL+"/v1/leases/"+lease, nil), 204, "revoke through b")
	mustStatus(t, gwtest.Do(t, "GET", a.URL+"/v1/leases/"+lease, nil), 410, "revoked on its own gateway")
	mustStatus(t, gwtest.Do(t, "GET", b.URL+"/v1/leases/"+lease, nil), 410, "ended for the other gateway too")
	gwtest.NoZnodesLeft(t, conn, a.Root)
}
