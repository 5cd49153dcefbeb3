package server_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/zkserver"
)

func newLease(t testing.TB, url, ttl, holder string) string {
	t.Helper()
	return gwtest.NewLease(t, url, ttl, holder)
}

func acquire(t testing.TB, url, name, lease, wait string) gwtest.Response {
	t.Helper()
	return gwtest.Acquire(t, url, name, lease, wait)
}

func mustStatus(t testing.TB, r gwtest.Response, want int, what string) {
	t.Helper()
	gwtest.MustStatus(t, r, want, what)
}

// revokeAll revokes each of leases through the gateway at url.
func revokeAll(t testing.TB, url string, leases ...string) {
	t.Helper()
	for _, l := range leases {
		mustStatus(t, gwtest.Do(t, "DELETE", url+"/v1/leases/"+l, nil), 204, "revoke "+l)
	}
}

func tokenOf(t testing.TB, r gwtest.Response) int64 {
	t.Helper()
	return int64(r.JSON(t)["token"].(float64))
}

func lockState(t testing.TB, url, name string) map[string]any {
	t.Helper()
	r := gwtest.Do(t, "GET", url+"/v1/locks/"+name, nil)
	mustStatus(t, r, 200, "lock state")
	return r.JSON(t)
}

// hangUpWhileWaiting POSTs a blocking wait of lease to url, and hangs up
// once waiting says the gateway has it waiting; it returns when the
// request has ended.
func hangUpWhileWaiting(t *testing.T, url, lease string, waiting func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = gwtest.DoCtx(ctx, "POST", url, map[string]any{"lease": lease})
	}()
	gwtest.Eventually(t, 10*time.Second, waiting)
	cancel()
	<-done
}

func TestLockAcquireReleaseLeavesNothing(t *testing.T) {
	// Serial: counts the binary's goroutines (StartChecked).
	g, conn := gwtest.StartChecked(t, gwtest.GatewayOptions{})
	lease := newLease(t, g.URL, "30s", "a")
	r := acquire(t, g.URL, "db", lease, "0s")
	mustStatus(t, r, 200, "acquire")
	again := acquire(t, g.URL, "db", lease, "0s")
	if again.JSON(t)["token"] != r.JSON(t)["token"] || again.JSON(t)["node"] != r.JSON(t)["node"] {
		t.Fatalf("a retried acquire must return the same grant: %s vs %s", r.Body, again.Body)
	}
	st := lockState(t, g.URL, "db")
	if n := len(st["holders"].([]any)); n != 1 {
		t.Fatalf("want 1 holder, got %d: %v", n, st)
	}
	info := gwtest.Do(t, "GET", g.URL+"/v1/leases/"+lease, nil).JSON(t)
	holds := info["holds"].([]any)
	if len(holds) != 1 || holds[0].(map[string]any)["state"] != "held" {
		t.Fatalf("lease should list one held lock: %v", info)
	}
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/locks/db/release", map[string]any{"lease": lease}), 204, "release")
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/locks/db/release", map[string]any{"lease": lease}), 409, "second release")
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
	r = gwtest.Do(t, "GET", g.URL+"/v1/leases/"+lease, nil)
	mustStatus(t, r, 410, "revoked lease")
	if r.JSON(t)["code"] != "lease_expired" {
		t.Fatalf("want lease_expired: %s", r.Body)
	}
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// TestLockContention runs 32 HTTP contenders on one lock: holders never
// overlap, and tokens strictly grow in grant order.
//
//zkgate:race
func TestLockContention(t *testing.T) {
	// Serial: counts the binary's goroutines (StartChecked).
	g, conn := gwtest.StartChecked(t, gwtest.GatewayOptions{})
	const contenders, rounds = 32, 4
	var (
		register  = gwtest.NewFencedRegister()
		wg        sync.WaitGroup
		errs      = make(chan error, contenders)
		leaseList = make([]string, contenders)
	)
	for i := range leaseList {
		leaseList[i] = newLease(t, g.URL, "60s", fmt.Sprintf("c%d", i))
	}
	for i := 0; i < contenders; i++ {
		wg.Add(1)
		go func(lease string) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				resp, err := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/locks/hot/acquire?wait=60s", map[string]any{"lease": lease})
				if err != nil || resp.Status != 200 {
					errs <- fmt.Errorf("acquire: %v %d %s", err, resp.Status, resp.Body)
					return
				}
				var grant struct{ Token int64 }
				if err := jsonUnmarshal(resp.Body, &grant); err != nil {
					errs <- err
					return
				}
				register.Enter("hot", lease, grant.Token)
				time.Sleep(time.Millisecond) // the holder's work: a hold of real length
				register.Exit("hot", lease)
				resp, err = gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/locks/hot/release", map[string]any{"lease": lease})
				if err != nil || resp.Status != 204 {
					errs <- fmt.Errorf("release: %v %d %s", err, resp.Status, resp.Body)
					return
				}
			}
		}(leaseList[i])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := register.Check(t); n != contenders*rounds {
		t.Fatalf("%d grants, want %d", n, contenders*rounds)
	}
	revokeAll(t, g.URL, leaseList...)
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// TestLeaseExpiryHandsLockToNextWaiter: a holder that stops keeping its
// lease alive loses the lock to the waiter, and hears lease_expired.
func TestLeaseExpiryHandsLockToNextWaiter(t *testing.T) {
	// Serial: counts the binary's goroutines (StartChecked).
	g, conn := gwtest.StartChecked(t, gwtest.GatewayOptions{})
	a := newLease(t, g.URL, "1s", "a")
	b := newLease(t, g.URL, "30s", "b")
	first := acquire(t, g.URL, "x", a, "0s")
	mustStatus(t, first, 200, "acquire a")
	start := time.Now()
	second := acquire(t, g.URL, "x", b, "20s")
	mustStatus(t, second, 200, "acquire b after a expires")
	if waited := time.Since(start); waited > 15*time.Second {
		t.Fatalf("b waited %s for a 1s lease", waited)
	}
	if tokenOf(t, second) <= tokenOf(t, first) {
		t.Fatalf("later grant has a smaller token")
	}
	r := gwtest.Do(t, "POST", g.URL+"/v1/leases/"+a+"/keepalive", nil)
	mustStatus(t, r, 410, "keepalive of an expired lease")
	if r.JSON(t)["reason"] != "expired" {
		t.Fatalf("want reason expired: %s", r.Body)
	}
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/locks/x/release", map[string]any{"lease": a}), 410, "release by an expired lease")
	// The fence sees b's token as current and a's as stale.
	mustStatus(t, gwtest.Do(t, "GET", g.URL+"/v1/locks/x/fence?token="+strconv.FormatInt(tokenOf(t, second), 10), nil), 200, "fence b")
	mustStatus(t, gwtest.Do(t, "GET", g.URL+"/v1/locks/x/fence?token="+strconv.FormatInt(tokenOf(t, first), 10), nil), 409, "fence a")
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+b, nil), 204, "revoke b")
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// TestTimeoutAndDisconnectLeaveNoWaiter: a wait that times out answers 409
// with the holders and the caller's position, and a client that hangs up
// while waiting leaves no node behind.
//
//zkgate:race
func TestTimeoutAndDisconnectLeaveNoWaiter(t *testing.T) {
	// Serial: counts the binary's goroutines (StartChecked).
	g, conn := gwtest.StartChecked(t, gwtest.GatewayOptions{})
	holder := newLease(t, g.URL, "30s", "holder")
	mustStatus(t, acquire(t, g.URL, "q", holder, "0s"), 200, "holder")

	r := gwtest.Do(t, "POST", g.URL+"/v1/locks/q/acquire?wait=300ms", map[string]any{"ttl": "30s", "holder": "impatient"})
	mustStatus(t, r, 409, "timed-out acquire")
	body := r.JSON(t)
	if body["code"] != "timeout" || body["position"] != float64(1) {
		t.Fatalf("want a timeout at position 1: %s", r.Body)
	}
	holders := body["holders"].([]any)
	if len(holders) != 1 || holders[0].(map[string]any)["holder"] != "holder" {
		t.Fatalf("timeout must name the holder: %s", r.Body)
	}
	try := gwtest.Do(t, "POST", g.URL+"/v1/locks/q/acquire", map[string]any{"ttl": "30s"})
	mustStatus(t, try, 409, "try-once acquire")

	// A client that goes away while waiting.
	waiter := newLease(t, g.URL, "30s", "leaver")
	hangUpWhileWaiting(t, g.URL+"/v1/locks/q/acquire?wait=50s", waiter, func() error {
		if n := len(lockState(t, g.URL, "q")["waiters"].([]any)); n != 1 {
			return fmt.Errorf("%d waiters", n)
		}
		return nil
	})
	gwtest.Eventually(t, 10*time.Second, func() error {
		kids, _, err := conn.Children(g.Root + "/locks/q")
		if err != nil {
			return err
		}
		if len(kids) != 1 {
			return fmt.Errorf("children %v", kids)
		}
		return nil
	})
	info := gwtest.Do(t, "GET", g.URL+"/v1/leases/"+waiter, nil).JSON(t)
	if len(info["holds"].([]any)) != 0 {
		t.Fatalf("the leaver's lease still lists a hold: %v", info)
	}
	// Leases made implicitly for failed acquires were revoked.
	leases := gwtest.Do(t, "GET", g.URL+"/v1/leases", nil).JSON(t)["leases"].([]any)
	if len(leases) != 2 {
		t.Fatalf("want the holder's and the leaver's leases only, got %d", len(leases))
	}
	revokeAll(t, g.URL, holder, waiter)
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

//zkgate:race
func TestReadWriteLock(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	conn := gwtest.Client(t, g.ZK, 5*time.Second)
	r1, r2, w := newLease(t, g.URL, "30s", "r1"), newLease(t, g.URL, "30s", "r2"), newLease(t, g.URL, "30s", "w")
	read := func(lease, wait string) gwtest.Response {
		return gwtest.Do(t, "POST", g.URL+"/v1/locks/rw/acquire?wait="+wait, map[string]any{"lease": lease, "mode": "read"})
	}
	mustStatus(t, read(r1, "0s"), 200, "reader 1")
	mustStatus(t, read(r2, "0s"), 200, "reader 2")
	got := make(chan gwtest.Response, 1)
	go func() {
		resp, _ := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/locks/rw/acquire?wait=30s", map[string]any{"lease": w, "mode": "write"})
		got <- resp
	}()
	gwtest.Eventually(t, 10*time.Second, func() error {
		st := lockState(t, g.URL, "rw")
		if len(st["holders"].([]any)) != 2 || len(st["waiters"].([]any)) != 1 {
			return fmt.Errorf("state %v", st)
		}
		return nil
	})
	// A reader arriving behind a waiting writer waits too (no writer starvation).
	late := newLease(t, g.URL, "30s", "late")
	mustStatus(t, read(late, "0s"), 409, "reader behind a waiting writer")
	// A lease that reads may not also ask to write: it would wait for itself.
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/locks/rw/acquire", map[string]any{"lease": r1, "mode": "write"}), 409, "upgrade")
	for _, l := range []string{r1, r2} {
		mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/locks/rw/release", map[string]any{"lease": l}), 204, "release reader")
	}
	mustStatus(t, <-got, 200, "writer after the readers")
	// The writer may also read (reentrant read under its own write lock).
	mustStatus(t, read(w, "0s"), 200, "writer reads")
	revokeAll(t, g.URL, r1, r2, w, late)
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

//zkgate:race
func TestSemaphore(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	conn := gwtest.Client(t, g.ZK, 5*time.Second)
	acq := func(lease, wait string, limit int) gwtest.Response {
		return gwtest.Do(t, "POST", g.URL+"/v1/semaphores/pool/acquire?wait="+wait, map[string]any{"lease": lease, "limit": limit})
	}
	a, b, c := newLease(t, g.URL, "30s", "a"), newLease(t, g.URL, "30s", "b"), newLease(t, g.URL, "30s", "c")
	mustStatus(t, acq(a, "0s", 2), 200, "a")
	mustStatus(t, acq(b, "0s", 2), 200, "b")
	mustStatus(t, acq(c, "200ms", 2), 409, "c while full")
	mustStatus(t, acq(c, "0s", 3), 409, "c with another limit")
	got := make(chan gwtest.Response, 1)
	go func() {
		resp, _ := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/semaphores/pool/acquire?wait=30s", map[string]any{"lease": c, "limit": 2})
		got <- resp
	}()
	gwtest.Eventually(t, 10*time.Second, func() error {
		r := gwtest.Do(t, "GET", g.URL+"/v1/semaphores/pool", nil).JSON(t)
		if len(r["holders"].([]any)) != 2 || len(r["waiters"].([]any)) != 1 {
			return fmt.Errorf("state %v", r)
		}
		return nil
	})
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+a, nil), 204, "revoke a")
	mustStatus(t, <-got, 200, "c after a")
	for _, l := range []string{b, c} {
		mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/semaphores/pool/release", map[string]any{"lease": l}), 204, "release")
		mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+l, nil), 204, "revoke")
	}
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// TestBlockingRead: a GET with the current index waits for the next change.
func TestBlockingRead(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	r := gwtest.Do(t, "GET", g.URL+"/v1/locks/br", nil)
	mustStatus(t, r, 200, "state")
	index := r.Header.Get("X-Zkgate-Index")
	if index == "" {
		t.Fatal("no X-Zkgate-Index")
	}
	// With the index unchanged, a short wait returns the same state.
	same := gwtest.Do(t, "GET", g.URL+"/v1/locks/br?index="+index+"&wait=100ms", nil)
	mustStatus(t, same, 200, "unchanged")
	if same.Header.Get("X-Zkgate-Index") != index {
		t.Fatalf("index moved without a change")
	}
	got := make(chan gwtest.Response, 1)
	go func() {
		resp, _ := gwtest.DoCtx(context.Background(), "GET", g.URL+"/v1/locks/br?index="+index+"&wait=30s", nil)
		got <- resp
	}()
	lease := newLease(t, g.URL, "30s", "writer")
	mustStatus(t, acquire(t, g.URL, "br", lease, "0s"), 200, "acquire")
	changed := <-got
	before, _ := strconv.ParseInt(index, 10, 64)
	// A blocking read answers at the first change it sees, which may be the
	// lock's parent appearing before the holder's node: follow the index
	// until the holder shows, as a client does.
	for {
		mustStatus(t, changed, 200, "blocking read")
		after, _ := strconv.ParseInt(changed.Header.Get("X-Zkgate-Index"), 10, 64)
		if after <= before {
			t.Fatalf("a blocking read answered before its wait without a newer index: %d -> %d", before, after)
		}
		if len(changed.JSON(t)["holders"].([]any)) == 1 {
			break
		}
		before = after
		changed = gwtest.Do(t, "GET", g.URL+"/v1/locks/br?index="+strconv.FormatInt(after, 10)+"&wait=30s", nil)
	}
	// An index that is not the current one answers at once.
	mustStatus(t, gwtest.Do(t, "GET", g.URL+"/v1/locks/br?index=1&wait=30s", nil), 200, "stale index")
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}

// TestBlockingReadsShareOneWatch: hundreds of clients blocked on one lock's
// state cost the gateway one cache entry and ZooKeeper one watch, and all of
// them are answered by one change.
//
//zkgate:race
func TestBlockingReadsShareOneWatch(t *testing.T) {
	// Serial: counts the watches of the whole shared ZooKeeper (wchs).
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	r := gwtest.Do(t, "GET", g.URL+"/v1/locks/watched", nil)
	index := r.Header.Get("X-Zkgate-Index")
	const readers = 300
	answers := make(chan gwtest.Response, readers)
	for i := 0; i < readers; i++ {
		go func() {
			resp, err := gwtest.DoCtx(context.Background(), "GET", g.URL+"/v1/locks/watched?index="+index+"&wait=60s", nil)
			if err != nil {
				t.Error(err)
			}
			answers <- resp
		}()
	}
	gwtest.Eventually(t, 30*time.Second, func() error {
		m := string(gwtest.Do(t, "GET", g.URL+"/metrics", nil).Body)
		if !strings.Contains(m, `zkgate_http_requests_total{code="200",method="GET",route="/metrics"}`) {
			return fmt.Errorf("no metrics yet")
		}
		if !strings.Contains(m, "zkgate_watched_paths 1\n") {
			return fmt.Errorf("watched paths: %s", grepLine(m, "zkgate_watched_paths "))
		}
		return nil
	})
	wchs, err := zkserver.FourLetterWord(context.Background(), gwtest.ZK(t).Addr(), "wchs")
	if err != nil {
		t.Fatal(err)
	}
	// The gateway's own session holds this one watch (plus the parent
	// data watch the cache arms beside it); earlier tests' sessions are closed.
	if n := totalWatches(t, wchs); n > 4 {
		t.Fatalf("%d ZooKeeper watches for %d blocked readers:\n%s", n, readers, wchs)
	}
	lease := newLease(t, g.URL, "30s", "w")
	mustStatus(t, acquire(t, g.URL, "watched", lease, "0s"), 200, "acquire")
	for i := 0; i < readers; i++ {
		a := <-answers
		mustStatus(t, a, 200, "blocked reader")
		if a.Header.Get("X-Zkgate-Index") == index {
			t.Fatalf("a reader was answered without a change")
		}
	}
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}

func grepLine(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// totalWatches reads "Total watches:N" from the wchs four-letter word.
func totalWatches(t *testing.T, wchs string) int {
	t.Helper()
	_, rest, ok := strings.Cut(wchs, "Total watches:")
	if !ok {
		t.Fatalf("wchs: %q", wchs)
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
	if err != nil {
		t.Fatalf("wchs: %q", wchs)
	}
	return n
}

// A lease that releases the lock it waits for (resigns the election it
// campaigns in) ends that wait at once: the acquire (campaign) answers 409
// not_held, as openapi.yaml says, instead of waiting on to its end and
// answering timeout (202 not elected) with the place in line it gave up.
// Nothing else wakes such a wait: it watches the node before its own.
func TestReleaseEndsTheWaitForIt(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	for _, c := range []struct{ kind, acquire, release, value string }{
		{"locks", "acquire", "release", ""},
		{"elections", "campaign", "resign", "v"},
	} {
		holder, waiter := newLease(t, g.URL, "1m", "holder"), newLease(t, g.URL, "1m", "waiter")
		body := func(lease string) map[string]any {
			b := map[string]any{"lease": lease}
			if c.value != "" {
				b["value"] = c.value
			}
			return b
		}
		base := g.URL + "/v1/" + c.kind + "/given-up/"
		mustStatus(t, gwtest.Do(t, "POST", base+c.acquire, body(holder)), 200, c.acquire+" of the holder")
		answer := make(chan gwtest.Response, 1)
		go func() {
			r, _ := gwtest.DoCtx(context.Background(), "POST", base+c.acquire+"?wait=1m", body(waiter))
			answer <- r
		}()
		gwtest.WaitsFor(t, g.URL, waiter, strings.TrimSuffix(c.kind, "s"), "given-up")
		mustStatus(t, gwtest.Do(t, "POST", base+c.release, map[string]any{"lease": waiter}), 204, c.release+" of the waiter")
		r := gwtest.Receive(t, answer, 30*time.Second, "the answer to the wait given up")
		if r.Status != 409 || r.JSON(t)["code"] != "not_held" {
			t.Errorf("%s given up while it waited: %d %s, want 409 not_held", c.acquire, r.Status, r.Body)
		}
		revokeAll(t, g.URL, holder, waiter)
	}
}
