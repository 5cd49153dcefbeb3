package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// twoGateways starts two gateways on one root, with the default
// --deadlock-check (1s).
func twoGateways(t *testing.T) (g1, g2 *gwtest.Gateway) {
	t.Helper()
	root := gwtest.UniqueRoot(t)
	return gwtest.StartGateway(t, gwtest.GatewayOptions{Root: root}), gwtest.StartGateway(t, gwtest.GatewayOptions{Root: root})
}

// waitsFor waits until lease waits for kind name, as its gateway tells.
func waitsFor(t *testing.T, base, lease, kind, name string) {
	t.Helper()
	gwtest.WaitsFor(t, base, lease, kind, name)
}

// later sends a call through the spec checker in the background.
func later(s *specChecker, c specCall) <-chan specSent {
	done := make(chan specSent, 1)
	go func() { done <- s.send(context.Background(), c, nil) }()
	return done
}

// deadlockTake is a hold or a wait of a deadlock case: lease takes path
// (under /v1) through gateway, with body besides its lease.
type deadlockTake struct {
	gateway, lease, path string
	body                 map[string]any
}

// deadlockCase is a deadlock through two gateways: its leases (holder ->
// gateway) take their holds, then wait in order, the last wait closing the
// cycle, whose steps the victim's 409 must name.
type deadlockCase struct {
	name   string
	leases map[string]string
	holds  []deadlockTake
	waits  []deadlockTake
	steps  []string
}

// deadlockCases: two leases over two locks, a semaphore and a read/write
// lock, and three leases.
func deadlockCases() []deadlockCase {
	return []deadlockCase{{
		name:   "two leases, two locks",
		leases: map[string]string{"a": "g1", "b": "g2"},
		holds:  []deadlockTake{{"g1", "a", "locks/x/acquire", nil}, {"g2", "b", "locks/y/acquire", nil}},
		waits:  []deadlockTake{{"g1", "a", "locks/y/acquire", nil}, {"g2", "b", "locks/x/acquire", nil}},
		steps:  []string{"b lock x exclusive exclusive", "a lock y exclusive exclusive"},
	}, {
		name:   "a semaphore and a read/write lock",
		leases: map[string]string{"a": "g1", "b": "g2"},
		holds:  []deadlockTake{{"g1", "a", "semaphores/pool/acquire", map[string]any{"limit": 1}}, {"g2", "b", "locks/catalog/acquire", map[string]any{"mode": "read"}}},
		waits:  []deadlockTake{{"g1", "a", "locks/catalog/acquire", map[string]any{"mode": "write"}}, {"g2", "b", "semaphores/pool/acquire", map[string]any{"limit": 1}}},
		steps:  []string{"b semaphore pool  ", "a lock catalog write read"},
	}, {
		name:   "three leases",
		leases: map[string]string{"a": "g1", "b": "g2", "c": "g1"},
		holds:  []deadlockTake{{"g1", "a", "locks/x3/acquire", nil}, {"g2", "b", "locks/y3/acquire", nil}, {"g1", "c", "locks/z3/acquire", nil}},
		waits:  []deadlockTake{{"g1", "a", "locks/y3/acquire", nil}, {"g2", "b", "locks/z3/acquire", nil}, {"g1", "c", "locks/x3/acquire", nil}},
		steps:  []string{"c lock x3 exclusive exclusive", "a lock y3 exclusive exclusive", "b lock z3 exclusive exclusive"},
	}}
}

// run makes the deadlock d through the gateways gw (checked by checkers)
// and checks that the newest wait is its victim, within 2 s, and the wait
// behind it is granted once the victim lets its hold go.
func (d deadlockCase) run(t *testing.T, gw map[string]*gwtest.Gateway, checkers map[string]*specChecker) {
	ids, holders := map[string]string{}, map[string]string{}
	for h, g := range d.leases {
		ids[h] = newLease(t, gw[g].URL, "1m", h)
		holders[ids[h]] = h
		t.Cleanup(func() { gwtest.Do(t, "DELETE", gw[g].URL+"/v1/leases/"+ids[h], nil) })
	}
	call := func(tk deadlockTake, wait string) specCall {
		body := map[string]any{"lease": ids[tk.lease]}
		for k, v := range tk.body {
			body[k] = v
		}
		return specReq("POST", "/v1/"+tk.path+"?wait="+wait, body)
	}
	for _, h := range d.holds {
		checkers[h.gateway].do(t, 200, call(h, "0s"))
	}
	var pending []<-chan specSent
	var closedAt time.Time
	for i, w := range d.waits {
		if i == len(d.waits)-1 {
			closedAt = time.Now()
		}
		pending = append(pending, later(checkers[w.gateway], call(w, "30s")))
		if i < len(d.waits)-1 {
			kind, rest, _ := strings.Cut(w.path, "/")
			waitsFor(t, gw[w.gateway].URL, ids[w.lease], strings.TrimSuffix(kind, "s"), strings.TrimSuffix(rest, "/acquire"))
		}
	}
	victim := d.waits[len(d.waits)-1]
	got := gwtest.Receive(t, pending[len(pending)-1], 10*time.Second, "the wait that closes the cycle")
	took := time.Since(closedAt)
	if took > 2*time.Second {
		t.Errorf("the deadlock was broken %s after the cycle closed, want within 2s", took)
	}
	t.Logf("broken %s after the cycle closed", took.Round(time.Millisecond))
	checkers[victim.gateway].check(t, 409, call(victim, "30s"), got)
	p := specWantCode(t, got.resp, "deadlock")
	var steps []string
	for _, s := range p["cycle"].([]any) {
		m := s.(map[string]any)
		steps = append(steps, fmt.Sprintf("%s %s %s %v %v", holders[m["lease"].(string)], m["kind"], m["name"], m["mode"], m["blocker_mode"]))
		if m["holder"] != holders[m["lease"].(string)] || m["gateway"] == "" {
			t.Errorf("a step of the cycle names %v as its holder, gateway %v", m["holder"], m["gateway"])
		}
	}
	if want := strings.ReplaceAll(strings.Join(d.steps, "; "), "  ", " <nil> <nil>"); strings.Join(steps, "; ") != want {
		t.Errorf("cycle %q, want %q", strings.Join(steps, "; "), want)
	}
	for i, ch := range pending[:len(pending)-1] {
		select {
		case r := <-ch:
			t.Fatalf("wait %d (not the newest) ended: %d %s", i, r.resp.Status, r.resp.Body)
		default:
		}
	}
	// The victim lets its hold go: the wait behind it is granted.
	vh := slices.IndexFunc(d.holds, func(h deadlockTake) bool { return h.lease == victim.lease })
	release := strings.TrimSuffix(d.holds[vh].path, "/acquire") + "/release"
	mustStatus(t, gwtest.Do(t, "POST", gw[victim.gateway].URL+"/v1/"+release, map[string]any{"lease": ids[victim.lease]}), 204, "the victim's release")
	next := gwtest.Receive(t, pending[len(pending)-2], 10*time.Second, "the wait behind the victim")
	if next.resp.Status != http.StatusOK {
		t.Errorf("the wait behind the victim: %d %s", next.resp.Status, next.resp.Body)
	}
}

// TestDeadlocksAcrossGateways: deadlocks through two gateways with the
// default --deadlock-check, of two leases over two locks, of a semaphore
// and a read/write lock, and of three leases, are each broken within 2 s of
// the wait that closes the cycle: that wait, the newest, answers 409
// deadlock naming the cycle (as openapi.yaml says), the others wait on, and
// get what they wait for once the victim lets its own hold go.
func TestDeadlocksAcrossGateways(t *testing.T) {
	// Serial: times each deadlock's breaking (within 2s).
	g1, g2 := twoGateways(t)
	gw := map[string]*gwtest.Gateway{"g1": g1, "g2": g2}
	checkers := map[string]*specChecker{"g1": newSpecChecker(t, g1.URL, specLoad(t, zkgate.OpenAPI)),
		"g2": newSpecChecker(t, g2.URL, specLoad(t, zkgate.OpenAPI))}

	cases := deadlockCases()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, gw, checkers) })
	}
	// Each broken deadlock is counted where it was broken.
	counted := 0.0
	for _, g := range []*gwtest.Gateway{g1, g2} {
		counted += metricValue(t, g.URL, "zkgate_deadlocks_total")
	}
	if counted != float64(len(cases)) {
		t.Errorf("zkgate_deadlocks_total adds up to %v over the gateways, want %d", counted, len(cases))
	}
	// And listed with its cycle.
	rep := gwtest.Do(t, "GET", g1.URL+"/v1/contention?window=15m", nil).JSON(t)
	if d := rep["deadlocks"].([]any); len(d) != len(cases) {
		t.Errorf("GET /v1/contention lists %d deadlocks, want %d: %v", len(d), len(cases), d)
	}
}

// TestContentionAcrossGateways: the figures of a scripted workload through
// two gateways are what it did, read through either gateway (each answers
// for its own leases, and the one asked merges them): a grant, a wait that
// timed out, a wait granted when the holder let go, each hold with its
// holder, token and times; a semaphore's grant; the names with the most time
// waited first.
func TestContentionAcrossGateways(t *testing.T) {
	t.Parallel()
	g1, g2 := twoGateways(t)
	s1 := newSpecChecker(t, g1.URL, specLoad(t, zkgate.OpenAPI))
	s2 := newSpecChecker(t, g2.URL, specLoad(t, zkgate.OpenAPI))
	a, b, c := newLease(t, g1.URL, "1m", "ledger-a"), newLease(t, g2.URL, "1m", "ledger-b"), newLease(t, g1.URL, "1m", "ledger-c")
	gatewayOf := func(base, lease string) string {
		return gwtest.Do(t, "GET", base+"/v1/leases/"+lease, nil).JSON(t)["gateway"].(string)
	}
	gw1, gw2 := gatewayOf(g1.URL, a), gatewayOf(g2.URL, b)
	start := time.Now()

	ta := specInt(t, s1.do(t, 200, specReq("POST", "/v1/locks/ledger/acquire", map[string]any{"lease": a})), "token")
	specWantCode(t, s2.do(t, 409, specReq("POST", "/v1/locks/ledger/acquire?wait=300ms", map[string]any{"lease": b})), "timeout")
	cWaits := later(s1, specReq("POST", "/v1/locks/ledger/acquire?wait=10s", map[string]any{"lease": c}))
	waitsFor(t, g1.URL, c, "lock", "ledger")
	aReleasing := time.Now()
	s1.do(t, 204, specReq("POST", "/v1/locks/ledger/release", map[string]any{"lease": a}))
	got := gwtest.Receive(t, cWaits, 10*time.Second, "c's wait")
	if got.resp.Status != 200 {
		t.Fatalf("c's wait: %d %s", got.resp.Status, got.resp.Body)
	}
	tc := specInt(t, got.resp, "token")
	s1.do(t, 204, specReq("POST", "/v1/locks/ledger/release", map[string]any{"lease": c}))
	s2.do(t, 200, specReq("POST", "/v1/semaphores/ledger-pool/acquire", map[string]any{"lease": b, "limit": 2}))
	s2.do(t, 204, specReq("POST", "/v1/semaphores/ledger-pool/release", map[string]any{"lease": b}))
	end := time.Now()

	for _, s := range []*specChecker{s1, s2} {
		st := specJSON(t, s.do(t, 200, specReq("GET", "/v1/locks/ledger/stats?window=1m", nil)))
		if st["grants"] != 2.0 || st["timeouts"] != 1.0 || st["deadlocks"] != 0.0 || st["waits"] != 3.0 || st["holds"] != 2.0 ||
			st["waiting"] != 0.0 || st["holding"] != 0.0 || st["longest_line"].(float64) < 1 {
			t.Errorf("ledger's figures through %s: %v", s.base, st)
		}
		if ws := st["wait_seconds"].(map[string]any); ws["max"].(float64) < 0.3 || ws["total"].(float64) < 0.3 {
			t.Errorf("ledger's waits through %s: %v, want b's 300ms at least", s.base, ws)
		}
		holds := st["recent_holds"].([]any)
		if len(holds) != 2 {
			t.Fatalf("ledger's holds through %s: %v", s.base, holds)
		}
		for i, want := range []struct {
			lease, holder, gateway string
			token                  int64
		}{{a, "ledger-a", gw1, ta}, {c, "ledger-c", gw1, tc}} {
			h := holds[i].(map[string]any)
			from, _ := time.Parse(time.RFC3339Nano, h["from"].(string))
			until, _ := time.Parse(time.RFC3339Nano, h["until"].(string))
			if h["lease"] != want.lease || h["holder"] != want.holder || h["gateway"] != want.gateway || int64(h["token"].(float64)) != want.token ||
				from.Before(start.Add(-time.Millisecond)) || until.After(end) || until.Before(from) {
				t.Errorf("hold %d through %s: %v, want %s's token %d between %s and %s", i, s.base, h, want.holder, want.token, start, end)
			}
		}
		if until, _ := time.Parse(time.RFC3339Nano, holds[0].(map[string]any)["until"].(string)); until.Before(aReleasing) {
			t.Errorf("a's hold ended at %s, before its release was sent at %s", until, aReleasing)
		}
		var outcomes []string
		for _, w := range st["recent_waits"].([]any) {
			m := w.(map[string]any)
			outcomes = append(outcomes, fmt.Sprintf("%s %s %s", m["holder"], m["gateway"], m["outcome"]))
		}
		if want := []string{"ledger-a " + gw1 + " granted", "ledger-b " + gw2 + " timeout", "ledger-c " + gw1 + " granted"}; !slices.Equal(outcomes, want) {
			t.Errorf("ledger's waits through %s: %q, want %q", s.base, outcomes, want)
		}
	}
	pool := specJSON(t, s1.do(t, 200, specReq("GET", "/v1/semaphores/ledger-pool/stats?window=1m", nil)))
	if pool["grants"] != 1.0 || pool["holds"] != 1.0 || len(pool["recent_holds"].([]any)) != 1 {
		t.Errorf("ledger-pool's figures: %v", pool)
	}
	checkContentionNames(t, s1, s2)
}

// checkContentionNames: the names of the ledger workload, read through
// s1 and s2, come with the most time waited first, from every gateway.
func checkContentionNames(t *testing.T, s1, s2 *specChecker) {
	t.Helper()
	rep := specJSON(t, s1.do(t, 200, specReq("GET", "/v1/contention?window=1m", nil)))
	var names []string
	for _, n := range rep["names"].([]any) {
		m := n.(map[string]any)
		names = append(names, m["kind"].(string)+" "+m["name"].(string))
	}
	if !slices.Equal(names, []string{"lock ledger", "semaphore ledger-pool"}) {
		t.Errorf("GET /v1/contention: %q, want ledger (the most time waited), then ledger-pool", names)
	}
	if top := specJSON(t, s2.do(t, 200, specReq("GET", "/v1/contention?window=1m&limit=1", nil)))["names"].([]any); len(top) != 1 ||
		top[0].(map[string]any)["name"] != "ledger" {
		t.Errorf("GET /v1/contention?limit=1: %v", top)
	}
	if _, ok := rep["unreachable"]; ok {
		t.Errorf("a gateway did not answer: %v", rep["unreachable"])
	}
}

// TestContentionShowsATokenWhatItMayRead: with tokens, GET /v1/contention
// lists the names the caller's token may read and no other, whatever
// token asks; one name's figures need read on it.
func TestContentionShowsATokenWhatItMayRead(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	g := startSecured(t, gwtest.GatewayOptions{}, file, secrets)
	lease := g.newLeaseAs(t, "writer")
	for path, body := range map[string]map[string]any{
		"/v1/locks/billing-x/acquire": {"lease": lease}, "/v1/locks/orders/acquire": {"lease": lease},
		"/v1/semaphores/pool/acquire": {"lease": lease, "limit": 2},
	} {
		mustStatus(t, g.as(t, "writer", "POST", path, body), 200, path)
	}
	for token, want := range map[string][]string{
		"billing": {"lock billing-x"},
		"locker":  {"lock billing-x", "lock orders"},
		"reader":  {"lock billing-x", "lock orders", "semaphore pool"},
	} {
		r := g.as(t, token, "GET", "/v1/contention?window=1m", nil)
		mustStatus(t, r, 200, "contention as "+token)
		var got []string
		for _, n := range r.JSON(t)["names"].([]any) {
			m := n.(map[string]any)
			got = append(got, m["kind"].(string)+" "+m["name"].(string))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s sees %q, want %q", token, got, want)
		}
	}
	wantProblem(t, g.as(t, "billing", "GET", "/v1/locks/orders/stats", nil), 403, "forbidden", "billing reading orders' figures")
	mustStatus(t, g.as(t, "billing", "GET", "/v1/locks/billing-x/stats", nil), 200, "billing reading billing-x's figures")
}
