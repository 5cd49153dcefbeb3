package auth_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/zk"
)

// TestLeaseOwnership: a lease is its maker's. Another token, even one that
// may write everything, can neither keep it alive, revoke it, nor acquire or
// release with it; a token limited to billing- locks makes and uses its own;
// an admin may act on any lease, and each such act is in the audit log with
// the admin's name, never its secret. Listings show a token its own leases.
func TestLeaseOwnership(t *testing.T) {
	t.Parallel()
	file, secrets := gwtest.NewTokensFile(t)
	g := gwtest.StartSecured(t, gwtest.GatewayOptions{}, file, secrets)
	conn := gwtest.Client(t, []string{gwtest.ZK(t).Addr()}, 5*time.Second)

	mine := g.NewLeaseAs(t, "billing")
	ownerIsRecorded(t, g, conn, mine)
	othersCannotUse(t, g, mine)

	// A lease made on the fly by an acquire is its caller's.
	r := g.As(t, "other", "POST", "/v1/locks/o1/acquire", map[string]any{"ttl": "30s", "holder": "cron"})
	gwtest.MustStatus(t, r, 200, "acquire with a lease made for it")
	implicit := r.JSON(t)["lease"].(string)
	gwtest.WantProblem(t, g.As(t, "writer", "DELETE", "/v1/leases/"+implicit, nil), 403, "forbidden", "revoke the implicit lease of another")

	lockers := listingsShowOwnLeases(t, g)

	// The admin may: audited.
	gwtest.MustStatus(t, g.As(t, "admin", "POST", "/v1/locks/billing-invoices/release", map[string]any{"lease": mine}), 204, "admin releases")
	gwtest.MustStatus(t, g.As(t, "admin", "DELETE", "/v1/leases/"+mine, nil), 204, "admin revokes")
	gwtest.MustStatus(t, g.As(t, "other", "DELETE", "/v1/leases/"+implicit, nil), 204, "owner revokes")
	gwtest.MustStatus(t, g.As(t, "locker", "DELETE", "/v1/leases/"+lockers, nil), 204, "an owner without permissions on leases revokes its own")
	adminActsAudited(t, g, mine)
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// ownerIsRecorded: the lease's owner is its maker, in its answer and in
// its record in ZooKeeper (for the other gateways).
func ownerIsRecorded(t *testing.T, g *gwtest.Secured, conn *zk.Conn, lease string) {
	info := g.As(t, "billing", "GET", "/v1/leases/"+lease, nil)
	gwtest.MustStatus(t, info, 200, "own lease")
	if info.JSON(t)["owner"] != "billing" {
		t.Errorf("the lease's owner: %s", info.Body)
	}
	raw, _, err := conn.Get(g.Root + "/leases/" + lease)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil || rec["owner"] != "billing" {
		t.Errorf("lease record %s: want owner billing", raw)
	}
}

// othersCannotUse: billing uses its lease within its prefix only, and
// another token, even one that may write everything, can neither keep it
// alive, revoke it, nor acquire or release with it.
func othersCannotUse(t *testing.T, g *gwtest.Secured, mine string) {
	gwtest.MustStatus(t, g.As(t, "billing", "POST", "/v1/locks/billing-invoices/acquire", map[string]any{"lease": mine}), 200, "acquire own")
	gwtest.WantProblem(t, g.As(t, "billing", "POST", "/v1/locks/orders/acquire", map[string]any{"lease": mine}), 403, "forbidden", "a lock outside its prefix")
	for _, r := range []struct{ method, path string }{
		{"POST", "/v1/leases/" + mine + "/keepalive"},
		{"DELETE", "/v1/leases/" + mine},
	} {
		gwtest.WantProblem(t, g.As(t, "other", r.method, r.path, nil), 403, "forbidden", "other on "+r.path)
	}
	gwtest.WantProblem(t, g.As(t, "other", "POST", "/v1/locks/billing-invoices/release", map[string]any{"lease": mine}), 403, "forbidden", "release with another's lease")
	gwtest.WantProblem(t, g.As(t, "other", "POST", "/v1/locks/billing-x/acquire", map[string]any{"lease": mine}), 403, "forbidden", "acquire with another's lease")

	// The lock is still held by its owner after all that.
	st := g.As(t, "reader", "GET", "/v1/locks/billing-invoices", nil)
	gwtest.MustStatus(t, st, 200, "lock state")
	if !strings.Contains(string(st.Body), mine) {
		t.Fatalf("the lock lost its holder: %s", st.Body)
	}
}

// listingsShowOwnLeases: each token lists its own leases; read on leases
// shows all. It returns the lease it makes for locker.
func listingsShowOwnLeases(t *testing.T, g *gwtest.Secured) (lockers string) {
	ids := func(who string) []string {
		var out []string
		for _, l := range g.As(t, who, "GET", "/v1/leases", nil).JSON(t)["leases"].([]any) {
			out = append(out, l.(map[string]any)["id"].(string))
		}
		sort.Strings(out)
		return out
	}
	r := g.As(t, "locker", "POST", "/v1/locks/l1/acquire", map[string]any{"ttl": "30s"})
	gwtest.MustStatus(t, r, 200, "locker acquires with a lease made for it")
	lockers = r.JSON(t)["lease"].(string)
	if got := ids("locker"); len(got) != 1 || got[0] != lockers {
		t.Errorf("locker (no permission on leases) lists %v, want only its own %s", got, lockers)
	}
	if got := ids("reader"); len(got) != 3 {
		t.Errorf("reader (read on every lease) lists %v, want all 3 leases", got)
	}
	return lockers
}

// adminActsAudited: the admin's two acts on billing's lease are in the
// audit log with its name; an owner's own act is no admin act.
func adminActsAudited(t *testing.T, g *gwtest.Secured, lease string) {
	gwtest.Eventually(t, 10*time.Second, func() error {
		n := 0
		for _, line := range strings.Split(g.Logs(), "\n") {
			if strings.Contains(line, "audit=admin_lease_action") && strings.Contains(line, "actor=admin") &&
				strings.Contains(line, "owner=billing") && strings.Contains(line, "lease="+lease) {
				n++
			}
		}
		if n != 2 {
			return fmt.Errorf("%d audit records of the admin's acts on %s, want 2", n, lease)
		}
		return nil
	})
	if strings.Contains(g.Logs(), "actor=other") {
		t.Errorf("an owner's own act is not an admin act: %s", g.Logs())
	}
}

// TestOwnershipAcrossGateways: a request for a lease of another gateway is
// forwarded with its token, and the lease's gateway checks the owner: the
// answer is the same whichever gateway the request reaches.
func TestOwnershipAcrossGateways(t *testing.T) {
	t.Parallel()
	file, secrets := gwtest.NewTokensFile(t)
	a := gwtest.StartSecured(t, gwtest.GatewayOptions{}, file, secrets)
	b := gwtest.StartSecured(t, gwtest.GatewayOptions{Root: a.Root}, file, secrets)

	lease := a.NewLeaseAs(t, "writer")
	r := b.As(t, "other", "POST", "/v1/locks/x/acquire", map[string]any{"lease": lease})
	gwtest.WantProblem(t, r, 403, "forbidden", "another token's lease through the other gateway")
	if r.Header.Get("X-Zkgate-Served-By") == "" {
		t.Errorf("the refusal should come from the lease's gateway (forwarded): %v", r.Header)
	}
	gwtest.WantProblem(t, b.As(t, "other", "POST", "/v1/leases/"+lease+"/keepalive", nil), 403, "forbidden", "keepalive through b")
	gwtest.WantProblem(t, b.As(t, "other", "DELETE", "/v1/leases/"+lease, nil), 403, "forbidden", "revoke through b")
	gwtest.WantProblem(t, b.As(t, "", "POST", "/v1/locks/x/acquire", map[string]any{"lease": lease}), 401, "unauthenticated", "no token through b")

	r = b.As(t, "writer", "POST", "/v1/locks/x/acquire", map[string]any{"lease": lease})
	gwtest.MustStatus(t, r, 200, "the owner through b")
	if r.Header.Get("X-Zkgate-Served-By") == "" {
		t.Errorf("the acquire should have been forwarded to a")
	}
	gwtest.MustStatus(t, b.As(t, "admin", "DELETE", "/v1/leases/"+lease, nil), 204, "an admin through b")
	gwtest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(a.Logs(), "actor=admin") {
			return fmt.Errorf("no audit record on the lease's gateway")
		}
		return nil
	})
}
