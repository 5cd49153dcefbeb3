package server_test

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/harness/restartload"
)

var rollingRounds = flag.Int("rolling-rounds", 10, "BenchmarkRollingRestartOnAnEnsemble: times each gateway is restarted")

// BenchmarkRollingRestartOnAnEnsemble: issue 31's rolling restart, on a
// 3-node ensemble: two gateways (a 3 s session timeout, --drain-timeout
// 5s), each stopped with SIGTERM and started again in turn, -rolling-rounds
// times, under Go clients of every kind (leases of 5 s kept alive, which
// follow 503 and Retry-After and go back to their gateway's address when
// the lease's keeper does not answer). It fails on any lease ended, overlap
// or token changed; reported: the restarts' mean stop-and-start time and the
// longest a request waited on a handover.
//
//	go test -run '^$' -bench RollingRestartOnAnEnsemble -benchtime 1x ./server/
func BenchmarkRollingRestartOnAnEnsemble(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ens := gwtest.Ensemble(b, ctx)
	urls, restart := restartable(b, 2, gwtest.GatewayOptions{ZK: ens.Addrs(), SessionTimeout: 3 * time.Second,
		DrainTimeout: 5 * time.Second, Handover: true})
	var took []time.Duration
	timed := func(ctx context.Context, i int) error {
		start := time.Now()
		err := restart(ctx, i)
		took = append(took, time.Since(start))
		return err
	}
	b.ResetTimer()
	rep := gwtest.CheckRestarts(b, restartload.Config{URLs: urls, Restart: timed, Rounds: *rollingRounds, Gap: 500 * time.Millisecond,
		Holders: 3, Hold: 300 * time.Millisecond, TTL: 5 * time.Second})
	b.StopTimer()
	var sum, longest time.Duration
	for _, d := range took {
		sum += d
		longest = max(longest, d)
	}
	b.ReportMetric(float64(len(rep.LeasesEnded)), "leases-ended")
	b.ReportMetric((sum / time.Duration(max(len(took), 1))).Seconds(), "s-per-restart")
	b.ReportMetric(longest.Seconds(), "s-longest-restart")
	b.ReportMetric(rep.Wait(1).Seconds(), "s-longest-handover-wait")
	b.Logf("%d restarts of 2 gateways on a 3-node ensemble: %s", len(took), rep.Summary())
}
