package server_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/harness/restartload"
)

// restartable starts n gateways of one root, each on an address of its
// own that it keeps across restarts (and its own data dir), and returns
// their URLs and a restart: SIGTERM, the exit, a start on the same address.
func restartable(t testing.TB, n int, opts gwtest.GatewayOptions) ([]string, func(ctx context.Context, i int) error) {
	t.Helper()
	procs := make([]*gwtest.Proc, n)
	all := make([]gwtest.GatewayOptions, n)
	urls := make([]string, n)
	for i := range n {
		addr := gwtest.FreeAddr(t)
		o := opts
		o.DataDir = t.TempDir()
		o.Extra = append([]string{"--listen", addr}, opts.Extra...)
		procs[i] = gwtest.StartProcess(t, o)
		opts.Root = procs[0].Root
		o.Root = opts.Root
		all[i], urls[i] = o, procs[i].URL
	}
	return urls, func(_ context.Context, i int) error {
		procs[i].Signal(t, syscall.SIGTERM, 30*time.Second)
		procs[i] = gwtest.StartProcess(t, all[i])
		return nil
	}
}

// checkRestarts is gwtest.CheckRestarts: the load of restartload through
// cfg's restarts, which must cost nothing.
func checkRestarts(t *testing.T, cfg restartload.Config) *restartload.Report {
	t.Helper()
	return gwtest.CheckRestarts(t, cfg)
}

// A rolling restart, every gateway of three in turn, twice, under CLI
// lock jobs and Go clients holding locks, read-write locks, slots,
// leaderships, double barriers and claims, and waiting on barriers,
// through all of them, costs nothing: every job exits 0, no lease ends, no
// two holders overlap, every hold keeps its token. How long requests
// waited on a handover is logged.
func TestRollingRestartCostsNothing(t *testing.T) {
	t.Parallel()
	urls, restart := restartable(t, 3, gwtest.GatewayOptions{SessionTimeout: 8 * time.Second, DrainTimeout: time.Second, Handover: true})
	checkRestarts(t, restartload.Config{URLs: urls, Restart: restart, Rounds: 2, Gap: 500 * time.Millisecond,
		Jobs: 6, JobLocks: 4, JobHold: 8 * time.Second, JobWait: time.Minute, JobArgs: []string{"--kill-grace", "1s"},
		Holders: 2, Hold: 300 * time.Millisecond, TTL: 30 * time.Second})
}

// A lone gateway restarted within its session timeout (no peer: it saves
// its sessions and resumes them) keeps every lease, hold and job.
func TestLoneRestartCostsNothing(t *testing.T) {
	t.Parallel()
	urls, restart := restartable(t, 1, gwtest.GatewayOptions{SessionTimeout: 10 * time.Second, Handover: true})
	checkRestarts(t, restartload.Config{URLs: urls, Restart: restart, Rounds: 2, Gap: time.Second,
		Jobs: 2, JobLocks: 1, JobHold: 5 * time.Second, JobWait: time.Minute, JobArgs: []string{"--kill-grace", "1s"},
		Holders: 1, Hold: 300 * time.Millisecond, TTL: 30 * time.Second})
}

// A rolling restart of two gateways with short leases (a 5 s TTL, a 3 s
// session timeout, --drain-timeout 5s), four rounds, under Go clients of
// every kind, costs nothing, and each SIGTERM exits soon after its
// handover rather than at its drain's end (the time of each stop and start
// again is logged: about 1.3 s on the 2-core machine, most of it the
// second with no request for a moved lease that ends the drain).
func TestShortLeasesRollingRestartCostsNothing(t *testing.T) {
	t.Parallel()
	urls, restart := restartable(t, 2, gwtest.GatewayOptions{SessionTimeout: 3 * time.Second, DrainTimeout: 5 * time.Second, Handover: true})
	timed := func(ctx context.Context, i int) error {
		start := time.Now()
		err := restart(ctx, i)
		t.Logf("gateway %d stopped and started again in %s", i, time.Since(start).Round(10*time.Millisecond))
		return err
	}
	checkRestarts(t, restartload.Config{URLs: urls, Restart: timed, Rounds: 4, Gap: 500 * time.Millisecond,
		Holders: 3, Hold: 300 * time.Millisecond, TTL: 5 * time.Second})
}
