package server_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// handoverPair starts two zkgate processes under one root that hand their
// leases over when drained (--drain-timeout drain: 0 closes at once).
func handoverPair(t *testing.T, drain time.Duration) (a, b *gwtest.Proc) {
	t.Helper()
	opts := gwtest.GatewayOptions{SessionTimeout: 5 * time.Second, DrainTimeout: drain, Handover: true}
	a = gwtest.StartProcess(t, opts)
	opts.Root = a.Root
	return a, gwtest.StartProcess(t, opts)
}

// leaseHolds reads a lease's holds by kind and name: state, token, node.
func leaseHolds(t testing.TB, url, lease string) map[string]map[string]any {
	t.Helper()
	r := gwtest.Do(t, "GET", url+"/v1/leases/"+lease, nil)
	mustStatus(t, r, http.StatusOK, "read the lease")
	out := map[string]map[string]any{}
	for _, h := range r.JSON(t)["holds"].([]any) {
		m := h.(map[string]any)
		out[m["kind"].(string)+" "+m["name"].(string)] = m
	}
	return out
}

// On SIGTERM a gateway with peers hands its leases over: the holds go on
// through a peer with the same lease ids, nodes and tokens, the lease
// records name the peer, the draining gateway passes the leases' requests
// on (saying where they moved, and never that they end), and a wait cut by
// the handover rejoins its place in line when retried through the peer.
func TestHandoverToAPeer(t *testing.T) {
	t.Parallel()
	a, b := handoverPair(t, 3*time.Second)
	holder := newLease(t, a.URL, "1m", "holder")
	waiter := newLease(t, a.URL, "1m", "waiter")
	first := acquire(t, a.URL, "moving", holder, "0s")
	mustStatus(t, first, http.StatusOK, "acquire on the gateway that will stop")
	sem := gwtest.Do(t, "POST", a.URL+"/v1/semaphores/slots/acquire?wait=0s", map[string]any{"lease": holder, "limit": 2})
	mustStatus(t, sem, http.StatusOK, "a semaphore slot")
	cut := make(chan gwtest.Response, 1)
	go func() {
		r, _ := gwtest.DoCtx(context.Background(), "POST", a.URL+"/v1/locks/moving/acquire?wait=30s", map[string]any{"lease": waiter})
		cut <- r
	}()
	var waitNode string
	gwtest.Eventually(t, 10*time.Second, func() error {
		h := leaseHolds(t, a.URL, waiter)["lock moving"]
		if h == nil || h["node"] == nil {
			return fmt.Errorf("the waiter has no node yet: %v", h)
		}
		waitNode = h["node"].(string)
		return nil
	})
	before := leaseHolds(t, a.URL, holder)

	a.Terminate()
	if r := <-cut; r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("the wait cut by the handover: %d %s, want 503 with Retry-After", r.Status, r.Body)
	}
	var ka gwtest.Response
	gwtest.Eventually(t, 10*time.Second, func() error {
		if done, _ := a.Exited(); done {
			t.Fatalf("the draining gateway exited; its last answer to a keepalive: %d %s", ka.Status, ka.Body)
		}
		ka = gwtest.Do(t, "POST", a.URL+"/v1/leases/"+holder+"/keepalive", nil)
		if ka.Status != http.StatusOK || ka.Header.Get("X-Zkgate-Served-By") == "" {
			return fmt.Errorf("keepalive through the draining gateway: %d %v %s", ka.Status, ka.Header, ka.Body)
		}
		return nil
	})
	if ends := ka.Header.Get("X-Zkgate-Lease-Ends"); ends != "" {
		t.Fatalf("a lease handed over was said to end at %s", ends)
	}
	if moved := ka.Header.Get("X-Zkgate-Lease-Moved-To"); moved != b.URL {
		t.Fatalf("X-Zkgate-Lease-Moved-To %q, want the peer %s", moved, b.URL)
	}
	after := leaseHolds(t, b.URL, holder)
	for _, k := range []string{"lock moving", "semaphore slots"} {
		if after[k]["token"] != before[k]["token"] || after[k]["node"] != before[k]["node"] || after[k]["state"] != "held" {
			t.Fatalf("%s after the handover: %v, want as before %v", k, after[k], before[k])
		}
	}
	onB := gwtest.Do(t, "POST", b.URL+"/v1/leases", map[string]any{"ttl": "1m"}).JSON(t)
	if gw := gwtest.Do(t, "GET", b.URL+"/v1/leases/"+holder, nil).JSON(t)["gateway"]; gw != onB["gateway"] {
		t.Fatalf("the lease's gateway after the handover: %v, want the peer's %v", gw, onB["gateway"])
	}
	mustStatus(t, gwtest.Do(t, "DELETE", b.URL+"/v1/leases/"+onB["id"].(string), nil), http.StatusNoContent, "revoke")
	next := retryCutWait(t, b.URL, holder, waiter, waitNode)
	if tokenOf(t, next) <= tokenOf(t, first) {
		t.Fatal("the token did not grow")
	}
	gwtest.Receive(t, a.Done(), 20*time.Second, "the exit of the gateway that handed its leases over")
	revokeAll(t, b.URL, holder, waiter)
	conn := gwtest.Client(t, []string{gwtest.ZK(t).Addr()}, 5*time.Second)
	gwtest.NoZnodesLeft(t, conn, a.Root)
}

// A gateway that handed its leases to a peer exits once no client has
// asked it about one for a second, not at the end of its --drain-timeout
// (a minute here): the holders are not waited for, their leases go on at
// the peer. Before, every SIGTERM took the whole drain.
func TestAHandoverToAPeerEndsTheDrainSoon(t *testing.T) {
	t.Parallel()
	a, b := handoverPair(t, time.Minute)
	lease := newLease(t, a.URL, "1m", "holder")
	first := acquire(t, a.URL, "quick", lease, "0s")
	mustStatus(t, first, http.StatusOK, "acquire")
	a.Terminate()
	gwtest.Receive(t, a.Done(), 30*time.Second, "the exit of a gateway whose leases went to its peer, long before its drain's end")
	mustStatus(t, gwtest.Do(t, "POST", b.URL+"/v1/leases/"+lease+"/keepalive", nil), http.StatusOK, "keepalive through the peer")
	if h := leaseHolds(t, b.URL, lease)["lock quick"]; h == nil || int64(h["token"].(float64)) != tokenOf(t, first) || h["state"] != "held" {
		t.Fatalf("the lock at the peer: %v, want the same hold (token %d)", h, tokenOf(t, first))
	}
	revokeAll(t, b.URL, lease)
}

// A gateway stops at once on SIGTERM though a client has a connection open
// that has sent no request yet (a transport dials one ahead of its next
// request): net/http's Shutdown counts one as idle only once it is 5 s old,
// so every such exit took 4 to 6 s. Before the exit comes, nothing holds it:
// no lease, a drain of 0.
func TestAFreshConnectionDoesNotHoldTheExit(t *testing.T) {
	t.Parallel()
	p := gwtest.StartProcess(t, gwtest.GatewayOptions{})
	c, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opened := time.Now()
	p.Terminate()
	gwtest.Receive(t, p.Done(), 30*time.Second, "the exit")
	if took := time.Since(opened); took >= 4*time.Second {
		t.Fatalf("the exit came %s after a connection that sent nothing was opened: Shutdown waited for it to be 5 s old", took)
	}
}

// retryCutWait: the wait of waiter cut by the handover, retried through
// the peer at url, rejoins its place in line with its node waitNode and
// is granted when holder releases; it returns the grant.
func retryCutWait(t *testing.T, url, holder, waiter, waitNode string) gwtest.Response {
	t.Helper()
	retried := make(chan gwtest.Response, 1)
	go func() {
		r, _ := gwtest.DoCtx(context.Background(), "POST", url+"/v1/locks/moving/acquire?wait=30s", map[string]any{"lease": waiter})
		retried <- r
	}()
	gwtest.Eventually(t, 10*time.Second, func() error {
		if n := len(lockState(t, url, "moving")["waiters"].([]any)); n != 1 {
			return fmt.Errorf("%d waiters", n)
		}
		return nil
	})
	mustStatus(t, gwtest.Do(t, "POST", url+"/v1/locks/moving/release", map[string]any{"lease": holder}), http.StatusNoContent, "release through the peer")
	next := <-retried
	mustStatus(t, next, http.StatusOK, "the retried wait")
	if got := next.JSON(t)["node"]; got != waitNode {
		t.Fatalf("the retried wait was granted on %v; its node before the handover was %s", got, waitNode)
	}
	return next
}

// A lone gateway restarted within its session timeout keeps its leases:
// it saves its session on SIGTERM, and its next start resumes it. The
// session's password is never shown: not in a log, an answer, /metrics.
// A start after the session expired finds the leases gone: 410.
func TestHandoverToTheNextStart(t *testing.T) {
	t.Parallel()
	addr := gwtest.FreeAddr(t)
	dataDir := t.TempDir()
	opts := gwtest.GatewayOptions{SessionTimeout: 6 * time.Second, Handover: true, DataDir: dataDir, Extra: []string{"--listen", addr}}
	p := gwtest.StartProcess(t, opts)
	opts.Root = p.Root
	lease := newLease(t, p.URL, "1m", "kept")
	first := acquire(t, p.URL, "restart", lease, "0s")
	mustStatus(t, first, http.StatusOK, "acquire")
	p.Signal(t, os.Interrupt, 20*time.Second)

	files, _ := filepath.Glob(filepath.Join(dataDir, "handover", "*", "*.json"))
	if len(files) != 1 {
		t.Fatalf("saved sessions: %v, want one", files)
	}
	info, err := os.Stat(files[0])
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the saved session's file: %v %v, want mode 0600", info.Mode(), err)
	}
	var saved struct {
		Session struct{ Password []byte }
	}
	raw, _ := os.ReadFile(files[0])
	if err := json.Unmarshal(raw, &saved); err != nil || len(saved.Session.Password) == 0 {
		t.Fatalf("the saved session: %v", err)
	}

	q := gwtest.StartProcess(t, opts)
	if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
		t.Fatalf("the saved session is still there after the restart: %v", err)
	}
	mustStatus(t, gwtest.Do(t, "POST", q.URL+"/v1/leases/"+lease+"/keepalive", nil), http.StatusOK, "keepalive after the restart")
	h := leaseHolds(t, q.URL, lease)["lock restart"]
	if h == nil || int64(h["token"].(float64)) != tokenOf(t, first) || h["state"] != "held" {
		t.Fatalf("the lock after the restart: %v, want the same hold (token %d)", h, tokenOf(t, first))
	}
	metrics := gwtest.Do(t, "GET", q.URL+"/metrics", nil)
	secretForms := []string{base64.StdEncoding.EncodeToString(saved.Session.Password), base64.RawURLEncoding.EncodeToString(saved.Session.Password),
		hex.EncodeToString(saved.Session.Password), string(saved.Session.Password)}
	for where, text := range map[string]string{"the first run's log": p.Logs(), "the second run's log": q.Logs(),
		"/metrics": string(metrics.Body), "the lease": string(gwtest.Do(t, "GET", q.URL+"/v1/leases/"+lease, nil).Body)} {
		for _, f := range secretForms {
			if strings.Contains(text, f) {
				t.Fatalf("%s shows the session's password", where)
			}
		}
	}

	// Stopped for longer than the session timeout: the leases are gone.
	q.Signal(t, os.Interrupt, 20*time.Second)
	conn := gwtest.Client(t, []string{gwtest.ZK(t).Addr()}, 5*time.Second)
	gwtest.Eventually(t, 30*time.Second, func() error {
		if ok, _, _ := conn.Exists(p.Root + "/leases/" + lease); ok {
			return fmt.Errorf("the lease record is still there")
		}
		return nil
	})
	z := gwtest.StartProcess(t, opts)
	r := gwtest.Do(t, "POST", z.URL+"/v1/leases/"+lease+"/keepalive", nil)
	if r.Status != http.StatusGone || r.JSON(t)["reason"] != "session_lost" {
		t.Fatalf("keepalive after the session expired: %d %s, want 410 session_lost", r.Status, r.Body)
	}
}

// A lease handed over is found through every gateway, not only through the
// one that gave it: the taker's rewritten record checks out with the
// gateways' secret, so a third gateway forwards the lease's requests to
// the taker.
func TestAHandedOverLeaseIsServedThroughEveryGateway(t *testing.T) {
	t.Parallel()
	a, b := handoverPair(t, 0)
	c := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: a.Root, SessionTimeout: 5 * time.Second})
	lease := newLease(t, a.URL, "1m", "moved")
	first := acquire(t, a.URL, "everywhere", lease, "0s")
	mustStatus(t, first, http.StatusOK, "acquire")
	a.Signal(t, syscall.SIGTERM, 20*time.Second)

	ka := gwtest.Do(t, "POST", c.URL+"/v1/leases/"+lease+"/keepalive", nil)
	if ka.Status != http.StatusOK || ka.Header.Get("X-Zkgate-Served-By") == "" {
		t.Fatalf("keepalive of the handed-over lease through a third gateway: %d %s", ka.Status, ka.Body)
	}
	h := leaseHolds(t, c.URL, lease)["lock everywhere"]
	if h == nil || int64(h["token"].(float64)) != tokenOf(t, first) || h["state"] != "held" {
		t.Fatalf("the lock through a third gateway: %v, want the hold of token %d", h, tokenOf(t, first))
	}
	mustStatus(t, gwtest.Do(t, "DELETE", c.URL+"/v1/leases/"+lease, nil), http.StatusNoContent, "revoke through a third gateway")
	mustStatus(t, gwtest.Do(t, "GET", b.URL+"/v1/leases/"+lease, nil), http.StatusGone, "the revoked lease at its keeper")
}

// After a handover, the holders of a lock and a semaphore, the leader of an
// election and the members of a double barrier name the gateway that keeps their lease now, as its record
// does, through the taker and through a third gateway: their nodes' data
// still names the gateway that made them, and is not rewritten.
func TestHoldersNameTheGatewayThatKeepsTheLease(t *testing.T) {
	t.Parallel()
	a, b := handoverPair(t, 0)
	c := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: a.Root, SessionTimeout: 5 * time.Second})
	lease := newLease(t, a.URL, "1m", "moved")
	mustStatus(t, acquire(t, a.URL, "kept", lease, "0s"), http.StatusOK, "acquire")
	mustStatus(t, gwtest.Do(t, "POST", a.URL+"/v1/semaphores/kept/acquire?wait=0s", map[string]any{"lease": lease, "limit": 2}),
		http.StatusOK, "a semaphore slot")
	mustStatus(t, campaign(t, a.URL, "kept", lease, "v", "0s"), http.StatusOK, "campaign")
	mustStatus(t, gwtest.Do(t, "POST", a.URL+"/v1/double-barriers/kept/enter?wait=0s", map[string]any{"lease": lease, "member": "m1", "count": 2}),
		http.StatusConflict, "a member of a double barrier")
	giver := gwtest.Do(t, "GET", a.URL+"/v1/leases/"+lease, nil).JSON(t)["gateway"]
	gateways := func(url string) []any {
		lock := gwtest.Do(t, "GET", url+"/v1/locks/kept", nil).JSON(t)
		sem := gwtest.Do(t, "GET", url+"/v1/semaphores/kept", nil).JSON(t)
		elect := gwtest.Do(t, "GET", url+"/v1/elections/kept", nil).JSON(t)
		barrier := gwtest.Do(t, "GET", url+"/v1/double-barriers/kept", nil).JSON(t)
		return []any{lock["holders"].([]any)[0].(map[string]any)["gateway"], sem["holders"].([]any)[0].(map[string]any)["gateway"],
			elect["leader"].(map[string]any)["gateway"], elect["candidates"].([]any)[0].(map[string]any)["gateway"],
			barrier["members"].([]any)[0].(map[string]any)["gateway"]}
	}
	if got := gateways(c.URL); fmt.Sprint(got) != fmt.Sprint([]any{giver, giver, giver, giver, giver}) {
		t.Fatalf("before the handover: lock, semaphore, leader, candidate, member of %v, want %v", got, giver)
	}
	a.Signal(t, syscall.SIGTERM, 20*time.Second)

	keeper := gwtest.Do(t, "GET", b.URL+"/v1/leases/"+lease, nil).JSON(t)["gateway"]
	if keeper == giver || keeper == nil {
		t.Fatalf("the lease's record names %v after the handover, the giver was %v", keeper, giver)
	}
	for _, url := range []string{b.URL, c.URL} {
		if got := gateways(url); fmt.Sprint(got) != fmt.Sprint([]any{keeper, keeper, keeper, keeper, keeper}) {
			t.Errorf("through %s after the handover: lock, semaphore, leader, candidate, member of %v, want the keeper %v", url, got, keeper)
		}
	}
	mustStatus(t, gwtest.Do(t, "DELETE", c.URL+"/v1/leases/"+lease, nil), http.StatusNoContent, "revoke")
}

// leaseRow is the row of lease id on a dashboard's leases page.
func leaseRow(t *testing.T, url, id string) string {
	t.Helper()
	_, _, page := getPage(t, url+"/ui/leases")
	return excerpt(page, `id="lease-`+id+`"`, "</tr>")
}

// excerpt is the part of page from the first from up to the to after it
// (to its end without one), or "" when from is not in page.
func excerpt(page, from, to string) string {
	start := strings.Index(page, from)
	if start < 0 {
		return ""
	}
	end := strings.Index(page[start:], to)
	if end < 0 {
		return page[start:]
	}
	return page[start : start+end]
}

// gatewayItem is the entry of gateway id in a dashboard overview's list of
// gateways ("" when it is not listed).
func gatewayItem(t *testing.T, url, id string) string {
	t.Helper()
	_, _, page := getPage(t, url+"/")
	from := strings.Index(page, `<ul class="plain">`)
	if from < 0 {
		t.Fatalf("no list of gateways in the overview: %s", page)
	}
	page = page[from : from+strings.Index(page[from:], "</ul>")]
	return excerpt(page, "<code>"+id+"</code>", "</li>")
}

// The dashboard shows a handover as it happens: the overview lists the
// giver as handing over while it drains, and no more once it has gone; the
// leases page names the lease's new gateway.
func TestTheDashboardShowsAHandover(t *testing.T) {
	t.Parallel()
	a, b := handoverPair(t, 4*time.Second)
	c := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: a.Root, SessionTimeout: 5 * time.Second})
	lease := newLease(t, a.URL, "1m", "watched")
	mustStatus(t, acquire(t, a.URL, "shown", lease, "0s"), http.StatusOK, "acquire")
	gatewayOf := func(url, lease string) string {
		return gwtest.Do(t, "GET", url+"/v1/leases/"+lease, nil).JSON(t)["gateway"].(string)
	}
	aID := gatewayOf(a.URL, lease)
	onB := newLease(t, b.URL, "1m", "marker")
	bID := gatewayOf(b.URL, onB)
	// The row's key holds the lease's age: a handover does not change it.
	key := func(row string) string {
		_, rest, _ := strings.Cut(row, `data-key="`)
		k, _, _ := strings.Cut(rest, `"`)
		return k
	}
	var keyBefore string
	gwtest.Eventually(t, 10*time.Second, func() error {
		row := leaseRow(t, c.URL, lease)
		if !strings.Contains(row, "<code>"+aID+"</code>") {
			return fmt.Errorf("the lease's row before the handover: %q", row)
		}
		keyBefore = key(row)
		return nil
	})

	a.Terminate()
	var last error
	gwtest.Eventually(t, 10*time.Second, func() (err error) {
		defer func() { last = err }()
		if done, _ := a.Exited(); done {
			t.Fatalf("the giver exited before its handover was seen: %v", last)
		}
		item := gatewayItem(t, c.URL, aID)
		if !strings.Contains(item, "handing over") {
			return fmt.Errorf("the giver in the overview: %q", item)
		}
		row := leaseRow(t, c.URL, lease)
		if !strings.Contains(row, "<code>"+bID+"</code>") {
			return fmt.Errorf("the lease's row after the handover: %q", row)
		}
		if k := key(row); k != keyBefore {
			return fmt.Errorf("the lease's key after the handover: %s, before %s", k, keyBefore)
		}
		return nil
	})
	if done, _ := a.Exited(); done {
		t.Fatal("the giver exited before its drain ended")
	}
	<-a.Done()
	gwtest.Eventually(t, 10*time.Second, func() error {
		if item := gatewayItem(t, c.URL, aID); item != "" {
			return fmt.Errorf("the giver, gone, is still listed: %q", item)
		}
		return nil
	})
}

// TestSavedSessionsAreKeyedByEnsembleAndRoot: a session saved on SIGTERM is
// resumed only by a start on the same ZooKeeper ensemble and root, though
// another shares the data dir: a start on another root, or on another
// ensemble, leaves it (and its leases) alone; the right one resumes it.
// Before, any start on the data dir resumed every session saved there,
// kept its leases alive and handed them on.
func TestSavedSessionsAreKeyedByEnsembleAndRoot(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	opts := gwtest.GatewayOptions{SessionTimeout: 20 * time.Second, Handover: true, DataDir: dataDir}
	p := gwtest.StartProcess(t, opts)
	opts.Root = p.Root
	lease := newLease(t, p.URL, "1m", "kept")
	mustStatus(t, acquire(t, p.URL, "keyed", lease, "0s"), http.StatusOK, "acquire")
	p.Signal(t, os.Interrupt, 20*time.Second)
	files, _ := filepath.Glob(filepath.Join(dataDir, "handover", "*", "*.json"))
	if len(files) != 1 {
		t.Fatalf("saved sessions: %v, want one", files)
	}

	other := opts
	other.Root = gwtest.UniqueRoot(t)
	elsewhere := opts
	elsewhere.ZK = []string{gwtest.OwnZK(t).Addr()}
	for what, o := range map[string]gwtest.GatewayOptions{"another root": other, "another ensemble": elsewhere} {
		// At info, where a resumed session is logged.
		o.Extra = append(slices.Clone(o.Extra), "--log-level", "info")
		q := gwtest.StartProcess(t, o)
		if _, err := os.Stat(files[0]); err != nil {
			t.Fatalf("a start on %s took the saved session: %v", what, err)
		}
		if strings.Contains(q.Logs(), "resumed a session") {
			t.Fatalf("a start on %s resumed a session:\n%s", what, q.Logs())
		}
		q.Signal(t, os.Interrupt, 20*time.Second)
	}

	same := opts
	same.Extra = append(slices.Clone(opts.Extra), "--log-level", "info")
	r := gwtest.StartProcess(t, same)
	if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
		t.Fatalf("the start on the same ensemble and root left the saved session: %v", err)
	}
	if !strings.Contains(r.Logs(), "resumed a session saved by the previous run") {
		// The line the starts elsewhere are checked not to print.
		t.Fatalf("the start on the same ensemble and root did not log its resumed session:\n%s", r.Logs())
	}
	mustStatus(t, gwtest.Do(t, "POST", r.URL+"/v1/leases/"+lease+"/keepalive", nil), http.StatusOK, "keepalive after the restart")
	mustStatus(t, gwtest.Do(t, "DELETE", r.URL+"/v1/leases/"+lease, nil), http.StatusNoContent, "revoke")
}

// TestHandoverLongerThanAMegabyte: a gateway with 2,200 leases, each
// holding a lock (a handover of more than a megabyte), hands every one
// over to its peer on SIGTERM: each lease answers through the peer, holding
// its lock with the same token, and nothing is saved to disk. Before, the
// peer read at most 1 MiB of a forwarded body before checking its proof and
// answered 413, and the sessions went to disk instead of to the live peer.
func TestHandoverLongerThanAMegabyte(t *testing.T) {
	t.Parallel()
	const n = 2200
	opts := gwtest.GatewayOptions{SessionTimeout: 10 * time.Second, DrainTimeout: 5 * time.Second, Handover: true,
		Extra: []string{"--lease-rate", "100000", "--max-leases-per-token", "100000", "--log-level", "info"}}
	a := gwtest.StartProcess(t, opts)
	opts.Root = a.Root
	b := gwtest.StartProcess(t, opts)
	leases, tokens := holdLocks(t, a.URL, n, 8, "2m", "big-%04d")
	a.Terminate()
	gwtest.Receive(t, a.Done(), 60*time.Second, "the exit of the gateway that handed its leases over")
	if !strings.Contains(a.Logs(), "handed a session over") || strings.Contains(a.Logs(), "saved a session for the next start") {
		t.Fatalf("the session was not handed to the peer:\n%s", tail(a.Logs(), 3000))
	}
	for i, id := range leases {
		h := leaseHolds(t, b.URL, id)[fmt.Sprintf("lock big-%04d", i)]
		if h == nil || h["state"] != "held" || h["token"] != tokens[i] {
			t.Fatalf("lease %d on the peer: %v, want its lock held with token %v", i, h, tokens[i])
		}
	}
}

// holdLocks makes n leases of ttl on the gateway at url, lease i holding
// the lock fmt.Sprintf(nameFormat, i), on workers goroutines: their ids and
// tokens, by i. It stops tb if any lock is not granted.
func holdLocks(tb testing.TB, url string, n, workers int, ttl, nameFormat string) ([]string, []float64) {
	tb.Helper()
	leases, tokens := make([]string, n), make([]float64, n)
	inParallel(n, workers, func(i int) {
		r := gwtest.Do(tb, "POST", url+"/v1/locks/"+fmt.Sprintf(nameFormat, i)+"/acquire", map[string]any{"ttl": ttl})
		if r.Status != http.StatusOK {
			tb.Errorf("acquire %d: %d %s", i, r.Status, r.Body)
			return
		}
		g := r.JSON(tb)
		leases[i], tokens[i] = g["lease"].(string), g["token"].(float64)
	})
	if tb.Failed() {
		tb.FailNow()
	}
	return leases, tokens
}

// inParallel calls fn(i) for each i below n, on workers goroutines, and
// returns once every call has.
func inParallel(n, workers int, fn func(i int)) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				fn(i)
			}
		})
	}
	wg.Wait()
}
