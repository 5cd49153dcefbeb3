package server_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// peerRequests is how many requests gateway g answered on route, by its
// /metrics (every method and status).
func peerRequests(t *testing.T, g *secured, route string) int {
	t.Helper()
	r := g.as(t, "admin", "GET", "/metrics", nil)
	n := 0
	for _, line := range strings.Split(string(r.Body), "\n") {
		if strings.HasPrefix(line, "zkgate_http_requests_total{") && strings.Contains(line, `route="`+route+`"`) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			n += int(v)
		}
	}
	return n
}

// TestFanOutsCannotStarveThePeers: a token's reads that ask every gateway
// (the lease list, the contention figures) are paced by --fan-out-rate
// before anything is spent on them: past its rate and its turn a read is
// 429 fan-out-rate with Retry-After, at once, and nobody is asked; another
// token has its own rate. Reads of the figures share the others' answers
// for a second, and a token that may read none of the figures has nobody
// asked. Before, a token that may read nothing flooded them at will (each
// answered 200, its local work done and, for the lease list, the others
// asked ten times a second): 3,793 reads a second took both cores and
// another client's p99 went 3.6 times up (BenchmarkFanOutFlood).
// Forwarding works after the flood.
func TestFanOutsCannotStarveThePeers(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	s, err := auth.AddToken(file, "queues-only", []string{"queues:*:read"})
	if err != nil {
		t.Fatal(err)
	}
	secrets["queues-only"] = s
	root := gwtest.UniqueRoot(t)
	a := startSecured(t, gwtest.GatewayOptions{Root: root}, file, secrets)
	// b paces to one read in ten seconds, in bursts of one: the second read
	// of a token is more than a second from its turn, whatever the timing.
	b := startSecured(t, gwtest.GatewayOptions{Root: root, Extra: []string{"--fan-out-rate", "0.1"}}, file, secrets)
	flood := func(token string, n int, path func(i int) string) time.Duration {
		start := time.Now()
		inParallel(n, 4, func(i int) {
			mustStatus(t, a.as(t, token, "GET", path(i), nil), 200, token+" GET "+path(i))
		})
		return time.Since(start)
	}

	// Within the burst of a's rate (20): no read waits, none is refused.
	before := peerRequests(t, b, "/peer/v1/contention")
	flood("queues-only", 20, func(int) string { return "/v1/contention?window=1h" })
	if got := peerRequests(t, b, "/peer/v1/contention") - before; got != 0 {
		t.Errorf("a token that may read no figures had the other gateway asked %d times", got)
	}
	before = peerRequests(t, b, "/peer/v1/contention")
	took := flood("reader", 20, func(int) string { return "/v1/contention?window=1h" })
	if got, most := peerRequests(t, b, "/peer/v1/contention")-before, int(took/time.Second)+2; got > most {
		t.Errorf("20 identical reads in %s had the other gateway asked %d times, want at most %d (one a second)", took, got, most)
	}

	// Past b's burst, a read-nothing token's lease lists are refused at
	// once, and a is not asked for them.
	before = peerRequests(t, a, "/v1/leases")
	mustStatus(t, b.as(t, "queues-only", "GET", "/v1/leases", nil), 200, "the first list of the burst")
	for i := range 20 {
		r := b.as(t, "queues-only", "GET", "/v1/leases", nil)
		mustStatus(t, r, 429, fmt.Sprintf("list %d past the burst", i))
		if p := r.JSON(t); p["exceeded"] != "fan-out-rate" || p["max"] != 0.1 || r.Header.Get("Retry-After") == "" {
			t.Fatalf("list %d past the burst: %v (Retry-After %q), want fan-out-rate, max 0.1, and a Retry-After", i, p, r.Header.Get("Retry-After"))
		}
	}
	if got := peerRequests(t, a, "/v1/leases") - before; got != 1 {
		t.Errorf("one list answered and 20 refused had the other gateway asked %d times, want 1", got)
	}
	mustStatus(t, b.as(t, "reader", "GET", "/v1/leases", nil), 200, "another token's list, with its own rate")
	mustStatus(t, b.as(t, "reader", "GET", "/v1/contention", nil), 429, "the same token's next read of every gateway")

	// Forwarding between the gateways still works.
	lease := b.newLeaseAs(t, "writer")
	mustStatus(t, a.as(t, "writer", "POST", "/v1/locks/after-flood/acquire", map[string]any{"lease": lease}), 200, "an acquire forwarded to b")
	mustStatus(t, a.as(t, "writer", "DELETE", "/v1/leases/"+lease, nil), 204, "revoke through a")
}

// TestUnreachableGatewaysShownToReadersOfEverything: a list of every
// gateway's leases, or the contention figures, name a gateway that did not
// answer (its id, address and error: the deployment's topology) to a token
// that may read everything, and to any other token say only how many did
// not. Before, every token got each one's id, address and error.
func TestUnreachableGatewaysShownToReadersOfEverything(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	root := gwtest.UniqueRoot(t)
	a := startSecured(t, gwtest.GatewayOptions{Root: root, SessionTimeout: 10 * time.Second}, file, secrets)
	p := startSecured(t, gwtest.GatewayOptions{Root: root, SessionTimeout: 10 * time.Second}, file, secrets)
	mustStatus(t, p.as(t, "reader", "GET", "/readyz", nil), 200, "p ready")
	p.Pause(t) // registered, but silent
	defer p.Resume()
	for _, path := range []string{"/v1/leases", "/v1/contention"} {
		for tok, named := range map[string]bool{"reader": true, "billing": false} {
			r := a.as(t, tok, "GET", path, nil)
			mustStatus(t, r, 200, tok+" GET "+path)
			u, _ := r.JSON(t)["unreachable"].([]any)
			if len(u) != 1 {
				t.Fatalf("%s GET %s: unreachable %v, want one entry", tok, path, u)
			}
			g := u[0].(map[string]any)
			if got := g["gateway"] != "*" && strings.Contains(g["advertise"].(string), "127.0.0.1"); got != named {
				t.Errorf("%s GET %s: the silent gateway named: %v, want %v (%v)", tok, path, got, named, g)
			}
			if !named && !strings.Contains(g["error"].(string), "1 of the other gateways") {
				t.Errorf("%s GET %s: %q does not say how many did not answer", tok, path, g["error"])
			}
		}
	}
}
