package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// wantTooMany checks a 429: Retry-After, and a problem naming the limit.
func wantTooMany(t *testing.T, r gwtest.Response, limit string, what string) {
	t.Helper()
	p := wantProblem(t, r, 429, "too_many", what)
	if p == nil {
		return
	}
	if p["exceeded"] != limit {
		t.Errorf("%s: the problem names %v, want %s: %s", what, p["exceeded"], limit, r.Body)
	}
	if n, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("%s: Retry-After %q, want whole seconds", what, r.Header.Get("Retry-After"))
	}
}

// flood sends n requests at once and returns their answers.
func flood(t *testing.T, n int, send func(i int) (gwtest.Response, error)) []gwtest.Response {
	t.Helper()
	out := make([]gwtest.Response, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			out[i], errs[i] = send(i)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	return out
}

func countStatus(rs []gwtest.Response) map[int]int {
	m := map[int]int{}
	for _, r := range rs {
		m[r.Status]++
	}
	return m
}

// stillServes checks what must answer at every cap: readiness, and a
// try-once acquire with a lease made before.
func stillServes(t *testing.T, g *secured, lease, lock string) {
	t.Helper()
	mustStatus(t, gwtest.Do(t, "GET", g.URL+"/readyz", nil), 200, "readyz at the cap")
	mustStatus(t, g.as(t, "writer", "POST", "/v1/locks/"+lock+"/acquire", map[string]any{"lease": lease}), 200, "a normal acquire at the cap")
	mustStatus(t, g.as(t, "writer", "POST", "/v1/locks/"+lock+"/release", map[string]any{"lease": lease}), 204, "release")
}

// TestLimitsLeases floods the lease caps: per token, then in all. Each
// answer over a cap is 429 with Retry-After naming the limit, made leases
// never pass the caps, the gateway stays ready and serves, and a revoked
// lease gives its slot back.
func TestLimitsLeases(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	g := startSecured(t, gwtest.GatewayOptions{Extra: []string{"--max-leases", "6", "--max-leases-per-token", "3",
		"--lease-rate", "1000", "--max-waiters", "4", "--max-waiters-per-name", "2"}}, file, secrets)
	conn := gwtest.Client(t, []string{gwtest.ZK(t).Addr()}, 5*time.Second)

	base := g.newLeaseAs(t, "writer") // for the normal acquire at the caps
	rs := flood(t, 40, func(int) (gwtest.Response, error) {
		return sendAs(context.Background(), g.URL, secrets["other"], "POST", "/v1/leases", map[string]any{"ttl": "1m"})
	})
	if c := countStatus(rs); c[201] != 3 || c[429] != 37 {
		t.Fatalf("40 leases at once for one token with a cap of 3: %v, want 3 made and 37 refused", c)
	}
	var others []string
	for _, r := range rs {
		if r.Status == 429 {
			wantTooMany(t, r, "max-leases-per-token", "a lease over the token's cap")
		} else {
			others = append(others, r.JSON(t)["id"].(string))
		}
	}
	// A lease made on the fly by an acquire counts the same.
	wantTooMany(t, g.as(t, "other", "POST", "/v1/locks/implicit/acquire", map[string]any{"ttl": "30s"}), "max-leases-per-token", "an implicit lease over the cap")
	stillServes(t, g, base, "free-1")

	// In all: writer has 1, other 3; admin fills the last 2 of 6.
	rs = flood(t, 20, func(int) (gwtest.Response, error) {
		return sendAs(context.Background(), g.URL, secrets["admin"], "POST", "/v1/leases", map[string]any{"ttl": "1m"})
	})
	if c := countStatus(rs); c[201] != 2 || c[429] != 18 {
		t.Fatalf("20 leases at once with 2 left of the gateway's 6: %v", c)
	}
	for _, r := range rs {
		if r.Status == 429 {
			wantTooMany(t, r, "max-leases", "a lease over the gateway's cap")
		}
	}
	if n := len(g.as(t, "reader", "GET", "/v1/leases", nil).JSON(t)["leases"].([]any)); n != 6 {
		t.Errorf("%d live leases, want the cap of 6", n)
	}
	kids, _, err := conn.Children(g.Root + "/leases")
	if err != nil || len(kids) != 6 {
		t.Errorf("%d lease records in ZooKeeper (%v), want 6", len(kids), err)
	}
	stillServes(t, g, base, "free-2")

	// A revoked lease gives its slot back, to its own token and in all.
	mustStatus(t, g.as(t, "other", "DELETE", "/v1/leases/"+others[0], nil), 204, "revoke")
	gwtest.Eventually(t, 10*time.Second, func() error {
		if r := g.as(t, "other", "POST", "/v1/leases", map[string]any{"ttl": "1m"}); r.Status != 201 {
			return fmt.Errorf("a lease after a revoke: %d %s", r.Status, r.Body)
		}
		return nil
	})
}

// TestLimitsLeaseRate: a token that makes leases faster than --lease-rate
// is told when to come back.
func TestLimitsLeaseRate(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	g := startSecured(t, gwtest.GatewayOptions{Extra: []string{"--lease-rate", "0.01"}}, file, secrets)
	base := g.newLeaseAs(t, "writer")
	r := g.as(t, "writer", "POST", "/v1/leases", map[string]any{"ttl": "1m"})
	wantTooMany(t, r, "lease-rate", "a second lease at 0.01 a second")
	if n, _ := strconv.Atoi(r.Header.Get("Retry-After")); n < 50 || n > 100 {
		t.Errorf("Retry-After %q, want the time until the next lease (about 100s)", r.Header.Get("Retry-After"))
	}
	// Other tokens have buckets of their own.
	g.newLeaseAs(t, "other")
	stillServes(t, g, base, "free")
}

// TestLimitsWaiters floods the waiter caps with blocking reads and waiting
// acquires: per name, then in all (one token may take them all here). The
// gateway stays ready and serves try-once requests, and an ended wait
// gives its slot back.
func TestLimitsWaiters(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	g := startSecured(t, gwtest.GatewayOptions{Extra: []string{"--max-waiters", "4", "--max-waiters-per-token", "5",
		"--max-waiters-per-name", "2"}}, file, secrets)
	base := g.newLeaseAs(t, "writer")
	holder := g.newLeaseAs(t, "other")
	mustStatus(t, g.as(t, "other", "POST", "/v1/locks/w/acquire", map[string]any{"lease": holder}), 200, "hold w")

	reads := newLockReads(t, g, secrets["reader"])
	index, block, waiting := reads.index, reads.block, reads.waiting

	// Two blocking reads of w are let in; more are refused at once.
	w1, w2 := block("w"), block("w")
	waiting(2)
	wantTooMany(t, g.as(t, "reader", "GET", "/v1/locks/w?index="+index("w")+"&wait=1m", nil), "max-waiters-per-name", "a third wait on one lock")
	rs := flood(t, 20, func(int) (gwtest.Response, error) {
		return sendAs(context.Background(), g.URL, secrets["writer"], "POST", "/v1/locks/w/acquire?wait=1m", map[string]any{"lease": base})
	})
	if c := countStatus(rs); c[429] != 20 {
		t.Fatalf("20 waiting acquires on a lock with 2 waiters already: %v, want all refused", c)
	}
	for _, r := range rs {
		wantTooMany(t, r, "max-waiters-per-name", "a waiting acquire over the cap")
	}
	// In all: 2 more on x, then nothing anywhere.
	x1, x2 := block("x"), block("x")
	waiting(4)
	wantTooMany(t, g.as(t, "reader", "GET", "/v1/locks/y?index="+index("y")+"&wait=1m", nil), "max-waiters", "a fifth wait")
	wantTooMany(t, g.as(t, "writer", "POST", "/v1/locks/y/acquire?wait=1m", map[string]any{"lease": base}), "max-waiters", "a waiting acquire over the cap")
	if v := g.metric(t, `zkgate_limited_total{limit="max-waiters-per-name"}`); v != 21 {
		t.Errorf("zkgate_limited_total for max-waiters-per-name: %v, want 21", v)
	}
	stillServes(t, g, base, "free")
	for _, ch := range []chan gwtest.Response{w1, w2, x1, x2} {
		select {
		case r := <-ch:
			t.Fatalf("a blocking read that was let in answered early: %d %s", r.Status, r.Body)
		default:
		}
	}

	slotsComeBack(t, g, reads, x1, x2)
}

// slotsComeBack: a change ends the waits x1 and x2 on x: their slots come
// back, and a blocking read of y is let in again.
func slotsComeBack(t *testing.T, g *secured, reads *lockReads, x1, x2 chan gwtest.Response) {
	t.Helper()
	lx := g.newLeaseAs(t, "writer")
	mustStatus(t, g.as(t, "writer", "POST", "/v1/locks/x/acquire", map[string]any{"lease": lx}), 200, "change x")
	for _, ch := range []chan gwtest.Response{x1, x2} {
		mustStatus(t, gwtest.Receive(t, ch, 30*time.Second, "a blocking read of x ending on its change"), 200, "a blocking read ended by a change")
	}
	reads.waiting(2)
	y := reads.block("y")
	reads.waiting(3)
	ly := g.newLeaseAs(t, "writer")
	mustStatus(t, g.as(t, "writer", "POST", "/v1/locks/y/acquire", map[string]any{"lease": ly}), 200, "change y")
	mustStatus(t, <-y, 200, "a blocking read let in once slots came back")
}

// lockReads makes blocking reads of locks through g with secret, each
// ended with the test.
type lockReads struct {
	t      *testing.T
	g      *secured
	secret string
	ctx    context.Context
	wg     sync.WaitGroup
}

func newLockReads(t *testing.T, g *secured, secret string) *lockReads {
	ctx, cancel := context.WithCancel(context.Background())
	r := &lockReads{t: t, g: g, secret: secret, ctx: ctx}
	t.Cleanup(func() { cancel(); r.wg.Wait() })
	return r
}

// index is the X-Zkgate-Index of the lock name now.
func (r *lockReads) index(name string) string {
	r.t.Helper()
	resp := r.g.as(r.t, "reader", "GET", "/v1/locks/"+name, nil)
	mustStatus(r.t, resp, 200, "state of "+name)
	return resp.Header.Get("X-Zkgate-Index")
}

// block starts a blocking read of the lock name at its index now; its
// answer comes on the channel (599 if it could not be sent).
func (r *lockReads) block(name string) chan gwtest.Response {
	ch := make(chan gwtest.Response, 1)
	idx := r.index(name)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		resp, err := sendAs(r.ctx, r.g.URL, r.secret, "GET", "/v1/locks/"+name+"?index="+idx+"&wait=1m", nil)
		if err != nil {
			resp = gwtest.Response{Status: 599}
		}
		ch <- resp
	}()
	return ch
}

// waiting waits until the gateway counts n waiting requests.
func (r *lockReads) waiting(n float64) {
	r.t.Helper()
	gwtest.Eventually(r.t, 10*time.Second, func() error {
		if v := r.g.metric(r.t, "zkgate_waiting_requests"); v != n {
			return fmt.Errorf("%v waiting requests, want %v", v, n)
		}
		return nil
	})
}

// metric reads one metric of /metrics, with a token that may.
func (s *secured) metric(t *testing.T, name string) float64 {
	t.Helper()
	r := s.as(t, "reader", "GET", "/metrics", nil)
	mustStatus(t, r, 200, "metrics")
	return gwtest.MetricIn(t, r.Body, name)
}

// postWith sends a JSON body with c ("" secret: no token).
// sendWith sends a request through c, with secret's token if it is not
// empty and body as JSON if it is not nil.
func sendWith(t *testing.T, c *http.Client, method, url, secret string, body any) gwtest.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	return gwtest.MustSend(t, c, req)
}

// TestLimitsWaitersPerToken: one token's blocking reads take at most its
// share of the waiting slots (half of --max-waiters by default), so
// another's waits are let in; without tokens, one client address's
// (--max-waiters-per-token). 20 blocking reads of one read-only token under
// --max-waiters 20 left the admin's waits nothing but 429.
func TestLimitsWaitersPerToken(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	for _, tc := range []struct {
		name              string
		extra             []string
		greedy, other     string // token names, or client addresses
		share, tries, cap int
	}{
		{"tokens on, the default share", []string{"--auth-file", file, "--max-waiters", "20"}, "reader", "admin", 10, 20, 20},
		{"tokens off", []string{"--max-waiters", "100", "--max-waiters-per-token", "3"}, "127.0.0.2", "127.0.0.3", 3, 6, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: tc.extra})
			greedy, other, secret, otherSecret := http.DefaultClient, http.DefaultClient, secrets[tc.greedy], secrets[tc.other]
			if secret == "" {
				greedy, _ = fromAddr(tc.greedy)
				other, _ = fromAddr(tc.other)
			}
			idx := sendWith(t, greedy, "GET", g.URL+"/v1/locks/w", secret, nil).Header.Get("X-Zkgate-Index")
			blocking := g.URL + "/v1/locks/w?index=" + idx + "&wait=1m"
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer func() { cancel(); wg.Wait() }()
			refused := make(chan gwtest.Response, tc.tries)
			for range tc.tries {
				wg.Go(func() { getUntilEnded(ctx, greedy, blocking, secret, refused) })
			}
			for range tc.tries - tc.share {
				r := gwtest.Receive(t, refused, 30*time.Second, fmt.Sprintf("%d of %d waits refused", tc.tries-tc.share, tc.tries))
				wantTooMany(t, r, "max-waiters-per-token", "a wait past the token's share")
			}
			gwtest.Eventually(t, 10*time.Second, func() error {
				if n := metricValueAs(t, g.URL, secrets["reader"], "zkgate_waiting_requests"); n != float64(tc.share) {
					return fmt.Errorf("%v waiting, want %d", n, tc.share)
				}
				return nil
			})
			// Another token (address) still waits.
			req, _ := http.NewRequestWithContext(ctx, "GET", blocking, nil)
			if otherSecret != "" {
				req.Header.Set("Authorization", "Bearer "+otherSecret)
			}
			wg.Go(func() {
				if resp, err := other.Do(req); err == nil {
					resp.Body.Close()
					refused <- gwtest.Response{Status: resp.StatusCode}
				}
			})
			gwtest.Eventually(t, 10*time.Second, func() error {
				if n := metricValueAs(t, g.URL, secrets["reader"], "zkgate_waiting_requests"); n != float64(tc.share+1) {
					return fmt.Errorf("%v waiting, want %d", n, tc.share+1)
				}
				return nil
			})
			select {
			case r := <-refused:
				t.Fatalf("a wait answered early: %d %s", r.Status, r.Body)
			default:
			}
		})
	}
}

// getUntilEnded GETs url with c (and secret, if not ""), sending the
// answer to answers; nothing when ctx ended the request.
func getUntilEnded(ctx context.Context, c *http.Client, url, secret string, answers chan<- gwtest.Response) {
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if r, _ := gwtest.Send(c, req); r.Status != 0 {
		answers <- r
	}
}

// TestLimitsLeasesPerAddress: without tokens, --lease-rate and
// --max-leases-per-token apply per client address (2,528 leases a second
// from one address left 502,266 znodes in ZooKeeper); other addresses have
// their own.
func TestLimitsLeasesPerAddress(t *testing.T) {
	t.Parallel()
	greedy, _ := fromAddr("127.0.0.2")
	other, _ := fromAddr("127.0.0.3")
	lease := map[string]any{"ttl": "1m"}

	slow := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: []string{"--lease-rate", "0.01"}})
	mustStatus(t, sendWith(t, greedy, "POST", slow.URL+"/v1/leases", "", lease), 201, "a first lease")
	r := sendWith(t, greedy, "POST", slow.URL+"/v1/leases", "", lease)
	wantTooMany(t, r, "lease-rate", "a second lease at 0.01 a second")
	if n, _ := strconv.Atoi(r.Header.Get("Retry-After")); n < 50 || n > 100 {
		t.Errorf("Retry-After %q, want the time until the next lease (about 100s)", r.Header.Get("Retry-After"))
	}
	wantTooMany(t, sendWith(t, greedy, "POST", slow.URL+"/v1/locks/l/acquire", "", lease), "lease-rate", "a lease made by an acquire")
	mustStatus(t, sendWith(t, other, "POST", slow.URL+"/v1/leases", "", lease), 201, "a lease from another address")

	few := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: []string{"--max-leases-per-token", "2"}})
	var ids []string
	for range 2 {
		r := sendWith(t, greedy, "POST", few.URL+"/v1/leases", "", lease)
		mustStatus(t, r, 201, "a lease under the cap")
		ids = append(ids, r.JSON(t)["id"].(string))
	}
	wantTooMany(t, sendWith(t, greedy, "POST", few.URL+"/v1/leases", "", lease), "max-leases-per-token", "a third lease of one address")
	mustStatus(t, sendWith(t, other, "POST", few.URL+"/v1/leases", "", lease), 201, "a lease from another address")
	mustStatus(t, gwtest.Do(t, "DELETE", few.URL+"/v1/leases/"+ids[0], nil), 204, "revoke")
	gwtest.Eventually(t, 10*time.Second, func() error {
		if r := sendWith(t, greedy, "POST", few.URL+"/v1/leases", "", lease); r.Status != 201 {
			return fmt.Errorf("a lease after a revoke: %d %s", r.Status, r.Body)
		}
		return nil
	})
}
