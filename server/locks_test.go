package server_test

import (
	"net/http"
	"testing"

	"github.com/zkgate/zkgate/internal/gwtest"
)

func newLease(t *testing.T, g *gwtest.Gateway, ttl, holder string) string {
	t.Helper()
	r := gwtest.Do(t, "POST", g.URL+"/v1/leases", map[string]any{"ttl": ttl, "holder": holder})
	if r.Status != http.StatusCreated {
		t.Fatalf("create lease: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)["id"].(string)
}

func TestLockAcquireReleaseLeavesNothing(t *testing.T) {
	gwtest.NoGoroutinesLeft(t)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	conn := gwtest.Client(t, g.ZK, 5e9)
	lease := newLease(t, g, "30s", "a")
	r := gwtest.Do(t, "POST", g.URL+"/v1/locks/db/acquire", map[string]any{"lease": lease})
	if r.Status != 200 {
		t.Fatalf("acquire: %d %s", r.Status, r.Body)
	}
	again := gwtest.Do(t, "POST", g.URL+"/v1/locks/db/acquire", map[string]any{"lease": lease})
	if again.JSON(t)["token"] != r.JSON(t)["token"] || again.JSON(t)["node"] != r.JSON(t)["node"] {
		t.Fatalf("a retried acquire must return the same grant: %s vs %s", r.Body, again.Body)
	}
	if r := gwtest.Do(t, "POST", g.URL+"/v1/locks/db/release", map[string]any{"lease": lease}); r.Status != 204 {
		t.Fatalf("release: %d %s", r.Status, r.Body)
	}
	if r := gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil); r.Status != 204 {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	gwtest.NoZnodesLeft(t, conn, g.Root)
}
