package server_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

var handoverLeases = flag.Int("handover-leases", 10000, "BenchmarkHandoverOfManyLeases: leases, each holding a lock (a tenth as many more wait in line)")

// BenchmarkHandoverOfManyLeases: a gateway with -handover-leases leases,
// each holding a lock of its own, and a tenth as many more waiting in line
// for some of those locks, is stopped (SIGTERM) beside a peer: every lease
// moves to the peer, holding its lock with the same token, every waiter
// still in line, and nothing is saved to disk. Reported: the time from the
// SIGTERM until the peer answers for the last lease made, and until the
// gateway exited; a lease lost fails it.
//
//	go test -run '^$' -bench HandoverOfManyLeases -benchtime 1x ./server/
func BenchmarkHandoverOfManyLeases(b *testing.B) {
	n := *handoverLeases
	opts := gwtest.GatewayOptions{SessionTimeout: 10 * time.Second, DrainTimeout: 5 * time.Second, Handover: true, MaxTTL: 10 * time.Minute,
		Extra: []string{"--lease-rate", "1000000", "--max-leases-per-token", "1000000", "--max-leases", "1000000",
			"--max-waiters", "1000000", "--max-waiters-per-name", "1000000", "--max-requests-per-token", "1000000", "--log-level", "info"}}
	giver := gwtest.StartProcess(b, opts)
	opts.Root = giver.Root
	taker := gwtest.StartProcess(b, opts)
	forEach := func(n int, fn func(i int)) { inParallel(n, 16, fn) }
	made := time.Now()
	leases, tokens := holdLocks(b, giver.URL, n, 16, "10m", "many-%05d")
	waiters := make([]string, n/10)
	forEach(len(waiters), func(i int) { waiters[i] = gwtest.NewLease(b, giver.URL, "10m", "waiter") })
	// Each waiter's acquire waits in line until the handover cuts it (503);
	// its node stays in line, for its client's retry.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cut sync.WaitGroup
	for i, id := range waiters {
		cut.Go(func() {
			_, _ = gwtest.DoCtx(ctx, "POST", giver.URL+fmt.Sprintf("/v1/locks/many-%05d/acquire?wait=1m", i*10), map[string]any{"lease": id})
		})
	}
	gwtest.Eventually(b, 5*time.Minute, func() error {
		for _, i := range []int{0, len(waiters) - 1} {
			if h := leaseHolds(b, giver.URL, waiters[i])[fmt.Sprintf("lock many-%05d", i*10)]; h == nil || h["node"] == nil {
				return fmt.Errorf("waiter %d has no node in line yet", i)
			}
		}
		return nil
	})
	b.Logf("%d leases holding a lock and %d waiting in line, made in %s", n, len(waiters), time.Since(made).Round(time.Millisecond))

	// The taker keeps a lease once the lease reads as its own: until then
	// the taker forwards its requests to the giver.
	takerID := gwtest.Do(b, "GET", taker.URL+"/v1/leases/"+gwtest.NewLease(b, taker.URL, "1m", "the taker's"), nil).JSON(b)["gateway"]
	b.ResetTimer()
	stopped := time.Now()
	giver.Terminate()
	last := leases[n-1]
	gwtest.Eventually(b, 2*time.Minute, func() error {
		r := gwtest.Do(b, "GET", taker.URL+"/v1/leases/"+last, nil)
		if r.Status != http.StatusOK || r.JSON(b)["gateway"] != takerID {
			return fmt.Errorf("the last lease is not kept by the peer yet: %d %s", r.Status, r.Body)
		}
		return nil
	})
	moved := time.Since(stopped)
	gwtest.Receive(b, giver.Done(), 2*time.Minute, "the exit of the gateway that handed its leases over")
	exited := time.Since(stopped)
	b.StopTimer()
	cut.Wait()

	if !strings.Contains(giver.Logs(), "handed a session over") || strings.Contains(giver.Logs(), "saved a session for the next start") {
		b.Fatalf("the session was not handed to the peer:\n%s", tail(giver.Logs(), 3000))
	}
	var lost atomic.Int64
	forEach(n, func(i int) {
		if h := leaseHolds(b, taker.URL, leases[i])[fmt.Sprintf("lock many-%05d", i)]; h == nil || h["state"] != "held" || h["token"] != tokens[i] {
			lost.Add(1)
			b.Errorf("lease %d on the peer: %v, want its lock held with token %v", i, h, tokens[i])
		}
	})
	forEach(len(waiters), func(i int) {
		if h := leaseHolds(b, taker.URL, waiters[i])[fmt.Sprintf("lock many-%05d", i*10)]; h == nil || h["node"] == nil {
			b.Errorf("waiter %d on the peer: %v, want it in line", i, h)
		}
	})
	b.ReportMetric(moved.Seconds(), "s-to-moved")
	b.ReportMetric(exited.Seconds(), "s-to-exit")
	b.ReportMetric(float64(lost.Load()), "leases-lost")
	b.Logf("SIGTERM to the last lease answering through the peer: %s; to the giver's exit: %s; %d of %d leases and %d waiters checked on the peer",
		moved.Round(time.Millisecond), exited.Round(time.Millisecond), int64(n)-lost.Load(), n, len(waiters))
}
