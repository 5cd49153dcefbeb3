package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/harness/restartload"
)

// A gateway killed with SIGKILL (as the OOM killer does) and started again
// on its data dir within the session timeout resumes its ZooKeeper session
// from the write-ahead record it kept of it: every lease answers with the
// same id, holding its lock, semaphore slot and leadership with the same
// tokens; a waiter cut by the kill is still in line and is granted, with
// its node from before, when the lock is released; keepalives go on; the
// lock stays exclusive; no expires_at promises past what the session
// keeps. With an external ensemble, and with the embedded ZooKeeper (a
// child of the gateway, killed with it, that reloads its sessions from the
// data dir). Before, every lease answered 410 session_lost after a kill.
func TestAKilledGatewayResumesItsLeases(t *testing.T) {
	t.Parallel()
	for _, embedded := range []bool{false, true} {
		name := map[bool]string{false: "external ZooKeeper", true: "embedded ZooKeeper"}[embedded]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			timeout := 10 * time.Second
			opts := gwtest.GatewayOptions{SessionTimeout: timeout, Handover: true, Embedded: embedded, DataDir: t.TempDir(),
				Extra: []string{"--listen", gwtest.FreeAddr(t)}}
			p := gwtest.StartProcess(t, opts)
			opts.Root = p.Root
			holder := newLease(t, p.URL, "1m", "holder")
			waiter := newLease(t, p.URL, "1m", "waiter")
			lock := acquire(t, p.URL, "moving", holder, "0s")
			mustStatus(t, lock, http.StatusOK, "acquire")
			mustStatus(t, gwtest.Do(t, "POST", p.URL+"/v1/semaphores/slots/acquire?wait=0s", map[string]any{"lease": holder, "limit": 1}),
				http.StatusOK, "a semaphore slot")
			mustStatus(t, campaign(t, p.URL, "leader", holder, "v1", "0s"), http.StatusOK, "campaign")
			cut := make(chan gwtest.Response, 1)
			go func() {
				r, _ := gwtest.DoCtx(context.Background(), "POST", p.URL+"/v1/locks/moving/acquire?wait=1m", map[string]any{"lease": waiter})
				cut <- r
			}()
			var waitNode string
			gwtest.Eventually(t, 10*time.Second, func() error {
				h := leaseHolds(t, p.URL, waiter)["lock moving"]
				if h == nil || h["node"] == nil {
					return fmt.Errorf("the waiter has no node yet: %v", h)
				}
				waitNode = h["node"].(string)
				return nil
			})
			mustStatus(t, gwtest.Do(t, "POST", p.URL+"/v1/leases/"+holder+"/keepalive", nil), http.StatusOK, "keepalive")
			before := leaseHolds(t, p.URL, holder)

			p.Kill()
			<-cut
			files, _ := filepath.Glob(filepath.Join(opts.DataDir, "handover", "*", "*.wal"))
			if len(files) != 1 {
				t.Fatalf("the killed gateway's journals: %v, want one", files)
			}
			if info, err := os.Stat(files[0]); err != nil || info.Mode().Perm() != 0o600 {
				t.Fatalf("the journal: %v %v, want mode 0600", info, err)
			}
			q := gwtest.StartProcess(t, opts)
			ka := gwtest.Do(t, "POST", q.URL+"/v1/leases/"+holder+"/keepalive", nil)
			mustStatus(t, ka, http.StatusOK, "keepalive after the restart")
			if ends, err := time.Parse(time.RFC3339Nano, ka.JSON(t)["expires_at"].(string)); err != nil || ends.After(time.Now().Add(timeout)) {
				t.Fatalf("expires_at after the restart: %v %v, past what the session keeps (%s)", ends, err, timeout)
			}
			after := leaseHolds(t, q.URL, holder)
			for _, k := range []string{"lock moving", "semaphore slots", "election leader"} {
				if after[k] == nil || after[k]["token"] != before[k]["token"] || after[k]["state"] != "held" {
					t.Fatalf("%s after the restart: %v, want as before %v", k, after[k], before[k])
				}
			}
			if w := leaseHolds(t, q.URL, waiter)["lock moving"]; w == nil || w["node"] != waitNode || w["state"] != "waiting" {
				t.Fatalf("the waiter after the restart: %v, want still in line on %s", w, waitNode)
			}
			other := newLease(t, q.URL, "1m", "other")
			if r := acquire(t, q.URL, "moving", other, "0s"); r.Status == http.StatusOK {
				t.Fatalf("another lease took the resumed lock: %s", r.Body)
			}
			next := retryCutWait(t, q.URL, holder, waiter, waitNode)
			if tokenOf(t, next) <= tokenOf(t, lock) {
				t.Fatal("the token did not grow")
			}
			revokeAll(t, q.URL, holder, waiter, other)
		})
	}
}

// startHoldingALock starts a gateway process with handover, of the session
// timeout given, on a data dir of its own, and a lease ("holder") that holds
// the lock name on it. The options it returns, with the process's root,
// start another gateway on the same root and data dir.
func startHoldingALock(t *testing.T, timeout time.Duration, name string) (gwtest.GatewayOptions, *gwtest.Proc, string) {
	t.Helper()
	opts := gwtest.GatewayOptions{SessionTimeout: timeout, Handover: true, DataDir: t.TempDir()}
	p := gwtest.StartProcess(t, opts)
	opts.Root = p.Root
	lease := newLease(t, p.URL, "1m", "holder")
	mustStatus(t, acquire(t, p.URL, name, lease, "0s"), http.StatusOK, "acquire")
	return opts, p, lease
}

// A gateway killed and started again only after its session expired finds
// its leases gone: 410 session_lost, as before. A start on another root,
// sharing the data dir, resumes nothing of it.
func TestAKilledGatewaysLeasesEndWithItsSession(t *testing.T) {
	t.Parallel()
	opts, p, lease := startHoldingALock(t, 2*time.Second, "gone")
	p.Kill()
	files, _ := filepath.Glob(filepath.Join(opts.DataDir, "handover", "*", "*.wal"))
	if len(files) != 1 {
		t.Fatalf("the killed gateway's journals: %v, want one", files)
	}

	other := opts
	other.Root = gwtest.UniqueRoot(t)
	o := gwtest.StartProcess(t, other)
	if _, err := os.Stat(files[0]); err != nil {
		t.Fatalf("a start on another root took the journal: %v", err)
	}
	if r := gwtest.Do(t, "POST", o.URL+"/v1/leases/"+lease+"/keepalive", nil); r.Status == http.StatusOK {
		t.Fatalf("a start on another root keeps the killed gateway's lease: %s", r.Body)
	}
	o.Kill()

	conn := gwtest.Client(t, []string{gwtest.ZK(t).Addr()}, 5*time.Second)
	gwtest.Eventually(t, 30*time.Second, func() error {
		if ok, _, _ := conn.Exists(p.Root + "/leases/" + lease); ok {
			return fmt.Errorf("the lease record is still there")
		}
		return nil
	})
	q := gwtest.StartProcess(t, opts)
	r := gwtest.Do(t, "POST", q.URL+"/v1/leases/"+lease+"/keepalive", nil)
	if r.Status != http.StatusGone || r.JSON(t)["reason"] != "session_lost" {
		t.Fatalf("keepalive after the session expired: %d %s, want 410 session_lost", r.Status, r.Body)
	}
	if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
		t.Fatalf("the journal of an expired session is still there: %v", err)
	}
}

// A gateway killed (SIGKILL) and started again on its address and data
// dir, twice, under 20 `zkgate lock` jobs (four to a lock: some wait in
// line through the kills) and Go clients holding locks, slots, leaderships
// and claims, costs nothing: every job exits 0, no lease ends, no two
// holders overlap, every hold keeps its token. The time each restart took
// is logged (restartload's "restarted in").
func TestAKillCostsNothing(t *testing.T) {
	t.Parallel()
	opts := gwtest.GatewayOptions{SessionTimeout: 10 * time.Second, Handover: true, DataDir: t.TempDir(),
		Extra: []string{"--listen", gwtest.FreeAddr(t)}}
	p := gwtest.StartProcess(t, opts)
	opts.Root = p.Root
	restarts := 0
	restart := func(context.Context, int) error {
		if restarts++; restarts == 1 {
			// A job that has not reached the gateway once refuses to start
			// (exit 69): the first kill waits for every job's lease.
			// (The Go holders, whose lease is taken before the restarts
			// begin, are named <kind>-holder-<n>.)
			gwtest.Eventually(t, 30*time.Second, func() error {
				jobs := 0
				for _, l := range gwtest.Do(t, "GET", p.URL+"/v1/leases", nil).JSON(t)["leases"].([]any) {
					if holder, _ := l.(map[string]any)["holder"].(string); !strings.Contains(holder, "-holder-") {
						jobs++
					}
				}
				if jobs < 20 {
					return fmt.Errorf("%d leases of jobs", jobs)
				}
				return nil
			})
		}
		p.Kill()
		p = gwtest.StartProcess(t, opts)
		return nil
	}
	checkRestarts(t, restartload.Config{URLs: []string{p.URL}, Restart: restart, Rounds: 2, Gap: time.Second,
		Jobs: 20, JobLocks: 5, JobHold: time.Second, JobWait: time.Minute, JobArgs: []string{"--kill-grace", "1s"},
		Holders: 1, Hold: 300 * time.Millisecond, TTL: 30 * time.Second})
}

// Two gateways of one root that share a data dir (two on one machine,
// started from one folder): a start of the second leaves the first's live
// session alone, though its record is there; the first keeps its leases.
func TestAGatewayLeavesALiveNeighboursSessionAlone(t *testing.T) {
	t.Parallel()
	opts, a, lease := startHoldingALock(t, 10*time.Second, "shared-dir")
	keeper := gwtest.Do(t, "GET", a.URL+"/v1/leases/"+lease, nil).JSON(t)["gateway"]

	b := gwtest.StartProcess(t, opts)
	if got := gwtest.Do(t, "GET", b.URL+"/v1/leases/"+lease, nil).JSON(t)["gateway"]; got != keeper {
		t.Fatalf("the lease's gateway, asked of the second: %v, want the first's %v (the second took its session)", got, keeper)
	}
	b.Signal(t, os.Interrupt, 20*time.Second)
	mustStatus(t, gwtest.Do(t, "POST", a.URL+"/v1/leases/"+lease+"/keepalive", nil), http.StatusOK, "keepalive on the first")
	if h := leaseHolds(t, a.URL, lease)["lock shared-dir"]; h == nil || h["state"] != "held" {
		t.Fatalf("the lock on the first: %v", h)
	}
}
