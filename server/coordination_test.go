package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

func campaign(t testing.TB, url, name, lease, value, wait string) gwtest.Response {
	t.Helper()
	return gwtest.Do(t, "POST", url+"/v1/elections/"+name+"/campaign?wait="+wait, map[string]any{"lease": lease, "value": value})
}

func leaderOf(st map[string]any) string {
	l, ok := st["leader"].(map[string]any)
	if !ok {
		return ""
	}
	return l["holder"].(string)
}

//zkgate:race
func TestElection(t *testing.T) {
	// Serial: counts the binary's goroutines (StartChecked).
	g, conn := gwtest.StartChecked(t, gwtest.GatewayOptions{})
	a, b := newLease(t, g.URL, "30s", "node-a"), newLease(t, g.URL, "30s", "node-b")

	// An observer sees "no leader" first.
	r := gwtest.Do(t, "GET", g.URL+"/v1/elections/svc", nil)
	mustStatus(t, r, 200, "state")
	if !strings.Contains(string(r.Body), `"leader":null`) {
		t.Fatalf("no leader yet should say so: %s", r.Body)
	}
	first := campaign(t, g.URL, "svc", a, "10.0.0.1:80", "0s")
	mustStatus(t, first, 200, "a campaigns")
	if first.JSON(t)["elected"] != true || first.JSON(t)["token"] == nil {
		t.Fatalf("a should lead: %s", first.Body)
	}
	again := campaign(t, g.URL, "svc", a, "10.0.0.1:80", "0s")
	if again.JSON(t)["node"] != first.JSON(t)["node"] {
		t.Fatalf("a repeated campaign must keep the same candidacy")
	}
	second := campaign(t, g.URL, "svc", b, "10.0.0.2:80", "100ms")
	mustStatus(t, second, 202, "b campaigns")
	if body := second.JSON(t); body["elected"] != false || body["position"] != float64(1) || leaderOf(body) != "node-a" {
		t.Fatalf("b should be next in line behind a: %s", second.Body)
	}
	mustStatus(t, gwtest.Do(t, "PUT", g.URL+"/v1/elections/svc/value", map[string]any{"lease": b, "value": "x"}), 409, "proclaim by a follower")
	mustStatus(t, gwtest.Do(t, "PUT", g.URL+"/v1/elections/svc/value", map[string]any{"lease": a, "value": "10.0.0.1:81"}), 200, "proclaim")
	gwtest.Eventually(t, 5*time.Second, func() error {
		st := gwtest.Do(t, "GET", g.URL+"/v1/elections/svc", nil).JSON(t)
		if v := st["leader"].(map[string]any)["value"]; v != "10.0.0.1:81" {
			return fmt.Errorf("value %v", v)
		}
		return nil
	})

	// An observer blocked on the current index sees the leader change as
	// soon as a's lease ends.
	st := gwtest.Do(t, "GET", g.URL+"/v1/elections/svc", nil)
	index := st.Header.Get("X-Zkgate-Index")
	observed := make(chan gwtest.Response, 1)
	go func() {
		resp, _ := gwtest.DoCtx(context.Background(), "GET", g.URL+"/v1/elections/svc?index="+index+"&wait=30s", nil)
		observed <- resp
	}()
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+a, nil), 204, "revoke a")
	obs := <-observed
	mustStatus(t, obs, 200, "observer")
	if leaderOf(obs.JSON(t)) != "node-b" {
		t.Fatalf("the observer should see b lead: %s", obs.Body)
	}
	won := campaign(t, g.URL, "svc", b, "10.0.0.2:80", "0s")
	mustStatus(t, won, 200, "b is leader")
	if won.JSON(t)["token"].(float64) <= first.JSON(t)["token"].(float64) {
		t.Fatalf("leadership tokens must grow")
	}
	// Resigning leaves no leader, and observers are told.
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/elections/svc/resign", map[string]any{"lease": b}), 204, "resign")
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/elections/svc/resign", map[string]any{"lease": b}), 409, "second resign")
	gwtest.Eventually(t, 5*time.Second, func() error {
		if l := leaderOf(gwtest.Do(t, "GET", g.URL+"/v1/elections/svc", nil).JSON(t)); l != "" {
			return fmt.Errorf("leader %q", l)
		}
		return nil
	})
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+b, nil), 204, "revoke b")
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// TestOneShotElection: campaign with wait 0 and resign if not elected, as in
// the classic recipe: exactly one of many wins.
//
//zkgate:race
func TestOneShotElection(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	conn := gwtest.Client(t, g.ZK, 5*time.Second)
	const n = 8
	var mu sync.Mutex
	winners := 0
	var leases []string
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		l := newLease(t, g.URL, "30s", fmt.Sprintf("p%d", i))
		leases = append(leases, l)
		wg.Add(1)
		go func(l string) {
			defer wg.Done()
			r, err := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/elections/once/campaign", map[string]any{"lease": l})
			if err != nil {
				t.Error(err)
				return
			}
			if r.Status == http.StatusOK {
				mu.Lock()
				winners++
				mu.Unlock()
				return
			}
			if r.Status != http.StatusAccepted {
				t.Errorf("campaign: %d %s", r.Status, r.Body)
				return
			}
			rr, err := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/elections/once/resign", map[string]any{"lease": l})
			if err != nil || rr.Status != http.StatusNoContent {
				t.Errorf("resign: %v %d", err, rr.Status)
			}
		}(l)
	}
	wg.Wait()
	if winners != 1 {
		t.Fatalf("%d winners, want exactly 1", winners)
	}
	st := gwtest.Do(t, "GET", g.URL+"/v1/elections/once", nil).JSON(t)
	if len(st["candidates"].([]any)) != 1 {
		t.Fatalf("only the winner should remain a candidate: %v", st)
	}
	revokeAll(t, g.URL, leases...)
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// TestElectionFailover: the leader's gateway is killed; the candidate on
// another gateway becomes leader once the session expires.
func TestElectionFailover(t *testing.T) {
	t.Parallel()
	p := gwtest.StartProcess(t, gwtest.GatewayOptions{SessionTimeout: time.Second})
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: p.Root})
	conn := gwtest.Client(t, g.ZK, 5*time.Second)
	mustStatus(t, campaign(t, p.URL, "ha", newLease(t, p.URL, "1h", "primary"), "", "0s"), 200, "primary leads")
	standby := newLease(t, g.URL, "1m", "standby")
	mustStatus(t, campaign(t, g.URL, "ha", standby, "", "0s"), 202, "standby waits")
	won := make(chan gwtest.Response, 1)
	go func() {
		r, _ := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/elections/ha/campaign?wait=30s", map[string]any{"lease": standby})
		won <- r
	}()
	p.Kill()
	r := <-won
	mustStatus(t, r, 200, "standby elected after the primary's gateway died")
	if leaderOf(gwtest.Do(t, "GET", g.URL+"/v1/elections/ha", nil).JSON(t)) != "standby" {
		t.Fatal("the state should name the standby as leader")
	}
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+standby, nil), 204, "revoke")
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

//zkgate:race
func TestBarrier(t *testing.T) {
	// Serial: counts the binary's goroutines (StartChecked).
	g, conn := gwtest.StartChecked(t, gwtest.GatewayOptions{})
	// A barrier that was never raised does not hold anyone.
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/barriers/gate/wait?wait=10s", nil), 200, "wait on a lowered barrier")
	mustStatus(t, gwtest.Do(t, "PUT", g.URL+"/v1/barriers/gate", nil), 201, "raise")
	mustStatus(t, gwtest.Do(t, "PUT", g.URL+"/v1/barriers/gate", nil), 200, "raise again")
	r := gwtest.Do(t, "POST", g.URL+"/v1/barriers/gate/wait?wait=100ms", nil)
	mustStatus(t, r, 409, "wait on a raised barrier")
	const waiters = 20
	released := make(chan gwtest.Response, waiters)
	for i := 0; i < waiters; i++ {
		go func() {
			resp, _ := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/barriers/gate/wait?wait=30s", nil)
			released <- resp
		}()
	}
	gwtest.Eventually(t, 10*time.Second, func() error {
		if n := gwtest.Do(t, "GET", g.URL+"/metrics", nil); !bytes.Contains(n.Body, []byte(`zkgate_http_requests_total{code="409"`)) {
			return fmt.Errorf("no metrics yet")
		}
		return nil
	})
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/barriers/gate", nil), 204, "lower")
	for i := 0; i < waiters; i++ {
		resp := <-released
		mustStatus(t, resp, 200, "released waiter")
		if resp.JSON(t)["raised"] != false {
			t.Fatalf("waiter released while raised: %s", resp.Body)
		}
	}
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/barriers/gate", nil), 204, "lower again")
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// TestDoubleBarrierAcrossGateways: three members, two gateways; nobody
// starts before all entered, nobody finishes before all left.
//
//zkgate:race
func TestDoubleBarrierAcrossGateways(t *testing.T) {
	t.Parallel()
	g1 := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	g2 := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: g1.Root})
	conn := gwtest.Client(t, g1.ZK, 5*time.Second)
	type member struct{ url, lease, name string }
	members := []member{
		{g1.URL, newLease(t, g1.URL, "30s", "a"), "a"},
		{g1.URL, newLease(t, g1.URL, "30s", "b"), "b"},
		{g2.URL, newLease(t, g2.URL, "30s", "c"), "c"},
	}
	// Two members in: not ready yet.
	r := gwtest.Do(t, "POST", g1.URL+"/v1/double-barriers/job/enter?wait=100ms", map[string]any{"lease": members[0].lease, "member": "a", "count": 3})
	mustStatus(t, r, 409, "enter before the count")
	mustStatus(t, gwtest.Do(t, "POST", g2.URL+"/v1/double-barriers/job/enter", map[string]any{"lease": members[2].lease, "member": "c", "count": 4}), 409, "count mismatch")
	st := gwtest.Do(t, "GET", g2.URL+"/v1/double-barriers/job", nil).JSON(t)
	if st["ready"] != false || len(st["members"].([]any)) != 1 {
		t.Fatalf("one member (kept after the timeout), not ready: %v", st)
	}
	phase := func(verb string) {
		var wg sync.WaitGroup
		for _, m := range members {
			wg.Add(1)
			go func(m member) {
				defer wg.Done()
				resp, err := gwtest.DoCtx(context.Background(), "POST", m.url+"/v1/double-barriers/job/"+verb+"?wait=30s",
					map[string]any{"lease": m.lease, "member": m.name, "count": 3})
				if verb == "leave" {
					resp, err = gwtest.DoCtx(context.Background(), "POST", m.url+"/v1/double-barriers/job/leave?wait=30s",
						map[string]any{"lease": m.lease, "member": m.name})
				}
				if err != nil || resp.Status != http.StatusOK {
					t.Errorf("%s %s: %v %d %s", verb, m.name, err, resp.Status, resp.Body)
				}
			}(m)
		}
		wg.Wait()
	}
	phase("enter")
	st = gwtest.Do(t, "GET", g1.URL+"/v1/double-barriers/job", nil).JSON(t)
	if st["ready"] != true || len(st["members"].([]any)) != 3 {
		t.Fatalf("all three in and ready: %v", st)
	}
	phase("leave")
	for _, m := range members {
		mustStatus(t, gwtest.Do(t, "DELETE", m.url+"/v1/leases/"+m.lease, nil), 204, "revoke")
	}
	gwtest.NoZnodesLeft(t, conn, g1.Root)
}

func produce(t testing.TB, url, queue string, data []byte, priority int) string {
	t.Helper()
	return gwtest.Produce(t, url, queue, data, priority)
}

func TestQueueOrderTakeAndPeek(t *testing.T) {
	// Serial: counts the binary's goroutines (StartChecked).
	g, conn := gwtest.StartChecked(t, gwtest.GatewayOptions{Extra: []string{"--max-item-bytes", "1KiB"}})
	produce(t, g.URL, "jobs", []byte("low-1"), 500)
	produce(t, g.URL, "jobs", []byte("high-1"), 1)
	id := produce(t, g.URL, "jobs", []byte("low-2"), 500)
	produce(t, g.URL, "jobs", []byte("high-2"), 1)
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/queues/jobs/items", bytes.Repeat([]byte("x"), 1025)), 413, "oversized item")
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/queues/jobs/items?priority=1000", []byte("x")), 400, "priority out of range")
	peek := gwtest.Do(t, "GET", g.URL+"/v1/queues/jobs/items/"+id, nil)
	mustStatus(t, peek, 200, "peek")
	if string(peek.Body) != "low-2" {
		t.Fatalf("peek: %q", peek.Body)
	}
	st := gwtest.Do(t, "GET", g.URL+"/v1/queues/jobs", nil).JSON(t)
	if st["length"] != float64(4) {
		t.Fatalf("length: %v", st)
	}
	var got []string
	for i := 0; i < 4; i++ {
		r := gwtest.Do(t, "POST", g.URL+"/v1/queues/jobs/take", nil)
		mustStatus(t, r, 200, "take")
		if r.Header.Get("X-Zkgate-Item-Id") == "" {
			t.Fatal("no X-Zkgate-Item-Id")
		}
		got = append(got, string(r.Body))
	}
	if strings.Join(got, ",") != "high-1,high-2,low-1,low-2" {
		t.Fatalf("order: %v", got)
	}
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/queues/jobs/take", nil), 204, "take from an empty queue")
	mustStatus(t, gwtest.Do(t, "GET", g.URL+"/v1/queues/jobs/items/"+id, nil), 404, "peek a taken item")

	// A waiting take wakes as soon as an item arrives.
	taken := make(chan gwtest.Response, 1)
	go func() {
		r, _ := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/queues/jobs/take?wait=30s", nil)
		taken <- r
	}()
	gwtest.Eventually(t, 5*time.Second, func() error {
		if !bytes.Contains(gwtest.Do(t, "GET", g.URL+"/metrics", nil).Body, []byte(`route="/v1/queues/{name}/take"`)) {
			return fmt.Errorf("take not yet seen")
		}
		return nil
	})
	produce(t, g.URL, "jobs", []byte("late"), 100)
	r := <-taken
	mustStatus(t, r, 200, "waiting take")
	if string(r.Body) != "late" {
		t.Fatalf("took %q", r.Body)
	}
	// Queues are persistent (as kazoo's): an empty one is deleted by hand.
	produce(t, g.URL, "jobs", []byte("left"), 100)
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/queues/jobs", nil), 409, "delete a queue with an item")
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/queues/jobs/take", nil), 200, "take the last item")
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/queues/jobs", nil), 204, "delete the empty queue")
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/queues/jobs", nil), 204, "delete it again")
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// TestQueueClaimsSurviveDyingConsumers: 8 consumers claim and ack 2,000
// items while their leases are killed at random; every item is acked
// exactly once and none is lost.
//
//zkgate:race
func TestQueueClaimsSurviveDyingConsumers(t *testing.T) {
	// Serial: counts the binary's goroutines (StartChecked).
	g, conn := gwtest.StartChecked(t, gwtest.GatewayOptions{})
	const items, consumers = 2000, 8
	for i := 0; i < items; i++ {
		produce(t, g.URL, "work", []byte(strconv.Itoa(i)), 100)
	}
	var mu sync.Mutex
	acked := map[string]int{}
	kills := 0
	var wg sync.WaitGroup
	for c := 0; c < consumers; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			lease := newLease(t, g.URL, "10m", fmt.Sprintf("consumer-%d", c))
			for n := 0; ; n++ {
				r, err := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/queues/work/claim?wait=300ms", map[string]any{"lease": lease})
				if err != nil {
					t.Error(err)
					return
				}
				if r.Status == http.StatusNoContent {
					mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
					return
				}
				if r.Status != http.StatusOK {
					t.Errorf("claim: %d %s", r.Status, r.Body)
					return
				}
				id := r.Header.Get("X-Zkgate-Item-Id")
				if (n*7+c)%23 == 5 {
					// The consumer dies holding the claim: its lease ends and
					// the item must be served again.
					mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "kill lease")
					mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/queues/work/items/"+id+"/ack", map[string]any{"lease": lease}), 410, "ack by a dead lease")
					mu.Lock()
					kills++
					mu.Unlock()
					lease = newLease(t, g.URL, "10m", fmt.Sprintf("consumer-%d-%d", c, n))
					continue
				}
				a, err := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/queues/work/items/"+id+"/ack", map[string]any{"lease": lease})
				if err != nil || a.Status != http.StatusNoContent {
					t.Errorf("ack: %v %d %s", err, a.Status, a.Body)
					return
				}
				mu.Lock()
				acked[string(r.Body)]++
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d items acked, %d consumer deaths", len(acked), kills)
	for i := 0; i < items; i++ {
		if n := acked[strconv.Itoa(i)]; n != 1 {
			t.Fatalf("item %d acked %d times", i, n)
		}
	}
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/queues/work", nil), 204, "delete the drained queue")
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// TestQueueNackAndDisconnect: a nacked item is served again; a claim whose
// client hangs up while waiting leaves nothing behind.
//
//zkgate:race
func TestQueueNackAndDisconnect(t *testing.T) {
	// Serial: counts the binary's goroutines (StartChecked).
	g, conn := gwtest.StartChecked(t, gwtest.GatewayOptions{})
	lease := newLease(t, g.URL, "30s", "w")
	hangUpWhileWaiting(t, g.URL+"/v1/queues/nq/claim?wait=50s", lease, func() error {
		if !bytes.Contains(gwtest.Do(t, "GET", g.URL+"/metrics", nil).Body, []byte(`zkgate_waiters{kind="claim"} 1`)) {
			return fmt.Errorf("claim not waiting yet")
		}
		return nil
	})
	gwtest.Eventually(t, 5*time.Second, func() error {
		if !bytes.Contains(gwtest.Do(t, "GET", g.URL+"/metrics", nil).Body, []byte(`zkgate_waiters{kind="claim"} 0`)) {
			return fmt.Errorf("claim still waiting")
		}
		return nil
	})
	// A waiting take whose client goes away is no server error either.
	tctx, tcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, _ = gwtest.DoCtx(tctx, "POST", g.URL+"/v1/queues/nq/take?wait=30s", nil)
	tcancel()
	gwtest.Eventually(t, 5*time.Second, func() error {
		m := gwtest.Do(t, "GET", g.URL+"/metrics", nil).Body
		if !bytes.Contains(m, []byte(`route="/v1/queues/{name}/take"`)) {
			return fmt.Errorf("the take is not counted yet")
		}
		if bytes.Contains(m, []byte(`code="500"`)) {
			return errors.New("a cancelled take was answered 500")
		}
		return nil
	})
	id := produce(t, g.URL, "nq", []byte("again"), 100)
	r := gwtest.Do(t, "POST", g.URL+"/v1/queues/nq/claim", map[string]any{"lease": lease})
	mustStatus(t, r, 200, "claim")
	retry := gwtest.Do(t, "POST", g.URL+"/v1/queues/nq/claim", map[string]any{"lease": lease})
	if retry.Header.Get("X-Zkgate-Item-Id") != id {
		t.Fatalf("a retried claim must return the same item")
	}
	other := newLease(t, g.URL, "30s", "other")
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/queues/nq/claim", map[string]any{"lease": other}), 204, "claimed items are hidden")
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/queues/nq/items/"+id+"/ack", map[string]any{"lease": other}), 409, "ack without the claim")
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/queues/nq/items/"+id+"/nack", map[string]any{"lease": lease}), 204, "nack")
	again := gwtest.Do(t, "POST", g.URL+"/v1/queues/nq/claim", map[string]any{"lease": other})
	mustStatus(t, again, 200, "claim after nack")
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/queues/nq/items/"+id+"/ack", map[string]any{"lease": other}), 204, "ack")
	revokeAll(t, g.URL, lease, other)
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/queues/nq", nil), 204, "delete the drained queue")
	gwtest.NoZnodesLeft(t, conn, g.Root)
}
