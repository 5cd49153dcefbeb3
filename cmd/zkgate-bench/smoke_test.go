//go:build linux

package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/benchfloor"
	"github.com/zkgate/zkgate/zkserver"
)

// smokeFlags are the smoke run's tiny sizes.
var smokeFlags = []string{
	"-iterations", "20", "-warmup", "5", "-block", "10",
	"-contention-duration", "300ms", "-contenders", "4", "-distinct-duration", "300ms", "-distinct-workers", "4",
	"-etcd-iterations", "20", "-waiters", "5", "-waiter-wait", "30s", "-keepalive-duration", "200ms", "-keepalive-workers", "4",
	"-queue-items", "10", "-queue-duration", "300ms", "-queue-wakeups", "3",
	"-dashboard-clients", "10", "-dashboard-changes", "1",
	"-restart-gateways", "2", "-restart-rounds", "1", "-restart-gap", "0s", "-restart-drain", "1s", "-restart-jobs", "2",
	"-restart-job-hold", "3s", "-restart-holders", "1",
	"-churn-duration", "300ms", "-churn-workers", "2", "-churn-settle", "2s", "-held-locks", "30",
	"-cpu-duration", "400ms", "-cpu-workers", "2", "-cpu-floors", "nethttp-zk,nethttp-nozk,net-zk"}

// TestSmoke runs every phase at tiny sizes (a few seconds each), so that
// none of them can rot: a real ZooKeeper, the gateway built from this tree,
// etcd if it is installed, 5 waiters over each protocol, 10 dashboard
// clients. The figures mean nothing at these sizes; the checks are that
// every phase ran, answered everything and kept its invariants, and that
// the report has every section.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the smoke test starts ZooKeeper and builds the gateway")
	}
	if err := zkserver.Check(zkserver.Options{}); err != nil {
		t.Fatalf("no ZooKeeper to run the bench on: %v", err) // Check's error says how to install it
	}
	cfg, err := parseFlags(smokeFlags)
	if err != nil {
		t.Fatal(err)
	}
	cfg.settleScale = 0.05
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := run(ctx, cfg)
	if rep != nil {
		rep.total = time.Since(start)
	}
	var out bytes.Buffer
	if rep != nil {
		rep.print(&out)
	}
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Logf("the smoke run took %s", rep.total.Round(time.Millisecond))
	checkSmokeLocks(t, rep)
	checkSmokeOthers(t, rep, cfg)
	s := out.String()
	for _, h := range []string{"## 1. ", "## 1b. ", "## 2. ", "## 2b. ", "## 3a. ", "## 3b. ", "## 3c. ", "## 4. ", "## 5. ", "## 6. ", "## 7. ", "## 8. ", "## 9. ", "### 9b. ", "## 10. ", "## Summary", "forceSync=yes"} {
		if !strings.Contains(s, h) {
			t.Errorf("the report has no %q", h)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", s)
	}
}

// checkSmokeLocks checks the smoke run's lock, etcd, CPU and waiter phases.
func checkSmokeLocks(t *testing.T, rep *report) {
	t.Helper()
	if v := rep.violations(); v != 0 {
		t.Errorf("%d mutual-exclusion violations", v)
	}
	if v := rep.queueViolations(); v != 0 {
		t.Errorf("%d queue items not taken exactly once", v)
	}
	if rep.latency.create.n == 0 || rep.latency.del.n == 0 {
		t.Errorf("no write floor: %+v", rep.latency)
	}
	if rep.distinct.gw.cycles == 0 || rep.distinct.direct.cycles == 0 {
		t.Errorf("distinct locks: %+v", rep.distinct)
	}
	_, lerr := exec.LookPath("etcd")
	switch {
	case lerr != nil && rep.etcd.skipped == "":
		t.Errorf("no etcd on PATH, yet the etcd phase was not skipped")
	case lerr == nil && (rep.etcd.gw.n == 0 || rep.etcd.etcd.n == 0):
		t.Errorf("etcd comparison: %+v", rep.etcd)
	}
	if lerr == nil && (rep.etcd.distinctGW.ops == 0 || rep.etcd.distinctEtcd.ops == 0) {
		t.Errorf("etcd on distinct locks: %+v, %+v", rep.etcd.distinctGW, rep.etcd.distinctEtcd)
	}
	for _, w := range cpuWorkloads {
		if s := rep.cpu.this[w]; s == nil || s.ops == 0 || s.elapsed == 0 {
			t.Errorf("cpu phase, %s: %+v", w, s)
		}
	}
	for _, kind := range benchfloor.Kinds {
		if s := rep.cpu.floors[kind]; s == nil || s.ops == 0 || s.elapsed == 0 {
			t.Errorf("cpu phase, floor %s: %+v", kind, s)
		}
	}
	if len(rep.waiters) != len(waiterProtos) {
		t.Fatalf("waiters over %d protocols, want %d", len(rep.waiters), len(waiterProtos))
	}
	for _, w := range rep.waiters {
		if w.answered != w.n || w.granted != w.n || w.reached != w.n {
			t.Errorf("waiters over %s: %d sent, %d counted, %d answered, %d granted", w.proto, w.n, w.reached, w.answered, w.granted)
		}
		if c := w.waiterConns(); (w.proto == "h1") != (c == int64(w.n)) {
			t.Errorf("waiters over %s: %d TCP connections for %d waiters", w.proto, c, w.n)
		}
	}
}

// checkSmokeOthers checks the smoke run's restart, dashboard and churn
// phases.
func checkSmokeOthers(t *testing.T, rep *report, cfg config) {
	t.Helper()
	if x := rep.restart.rep; x == nil || !x.OK() || x.Restarts != 2 || x.Jobs != 2 {
		t.Errorf("restarts: %v", x)
	}
	if rep.dash.connected != cfg.dashClients || len(rep.dash.changes) != 2*cfg.dashChanges {
		t.Errorf("dashboard: %d of %d connected, %d changes", rep.dash.connected, cfg.dashClients, len(rep.dash.changes))
	}
	for _, c := range rep.dash.changes {
		if c.missing != 0 {
			t.Errorf("dashboard: %s missed by %d clients", c.what, c.missing)
		}
	}
	if k := rep.churn; k.names == 0 || k.failures != 0 || len(k.samples) == 0 {
		t.Errorf("churn: %d names, %d failed (%s), %d samples", k.names, k.failures, k.firstErr, len(k.samples))
	}
	if h := rep.churn.held; h.listed != 30 || h.pages != 1 || h.locksPageBytes == 0 {
		t.Errorf("held locks: %+v", h)
	}
}
