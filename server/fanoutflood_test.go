package server_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/internal/gwtest"
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

// TestFanOutsCannotStarveThePeers: one token has the other gateways asked
// at most about ten times a second by reads that ask every gateway (the
// contention figures, the lease list); reads of the figures share the
// others' answers for a second; a token that may read none of the figures
// has nobody asked. Before, each
// read asked every other gateway with a fresh proof: a flood of them filled
// the others' memory of proofs, and every call between gateways
// (forwarding, handovers) answered 503. Forwarding works after the flood.
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
	b := startSecured(t, gwtest.GatewayOptions{Root: root}, file, secrets)
	flood := func(token string, n int, path func(i int) string) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < n; i += 8 {
					mustStatus(t, a.as(t, token, "GET", path(i), nil), 200, token+" GET "+path(i))
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}

	before := peerRequests(t, b, "/peer/v1/contention")
	flood("queues-only", 200, func(int) string { return "/v1/contention?window=1h" })
	if got := peerRequests(t, b, "/peer/v1/contention") - before; got != 0 {
		t.Errorf("a token that may read no figures had the other gateway asked %d times", got)
	}

	before = peerRequests(t, b, "/peer/v1/contention")
	took := flood("reader", 400, func(int) string { return "/v1/contention?window=1h" })
	if got, most := peerRequests(t, b, "/peer/v1/contention")-before, int(took/time.Second)+2; got > most {
		t.Errorf("400 identical reads in %s had the other gateway asked %d times, want at most %d (one a second)", took, got, most)
	}

	before = peerRequests(t, b, "/v1/leases")
	took = flood("reader", 200, func(i int) string { return fmt.Sprintf("/v1/leases?limit=%d", i+1) })
	if got, most := peerRequests(t, b, "/v1/leases")-before, 20+int(10*took.Seconds())+10; got > most {
		t.Errorf("200 lease lists of one token in %s had the other gateway asked %d times, want at most %d", took, got, most)
	}
	r := a.as(t, "reader", "GET", "/v1/leases?limit=999", nil)
	mustStatus(t, r, 200, "one more list")

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
