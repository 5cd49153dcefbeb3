package server_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

var (
	floodFor     = flag.Duration("flood-for", 20*time.Second, "BenchmarkFanOutFlood: how long the flood lasts (a quiet run of a tenth of it, at least 10 s, comes first)")
	floodClients = flag.Int("flood-clients", 16, "BenchmarkFanOutFlood: the flood's clients, each sending its next read as soon as the last is answered")
)

// BenchmarkFanOutFlood: a token that may read nothing floods the reads that
// ask every gateway (GET /v1/contention?window=1h and GET /v1/leases, 16
// clients or -flood-clients, through both gateways of a root) for
// -flood-for, while another client takes and releases a lock through the
// gateway that does not keep its lease (each cycle forwarded); then the gateway that keeps the lease is
// stopped (SIGTERM) and hands it over while the flood goes on. Reported: the
// cycle's p50 and p99 before and during the flood and their ratio, the
// flood's reads a second, and its 429s. Forwarding that fails, or a lease
// lost in the handover, fails the benchmark; the times are measured only.
//
//	go test -run '^$' -bench FanOutFlood -benchtime 1x ./server/ -flood-for 10m
func BenchmarkFanOutFlood(b *testing.B) {
	file, secrets := gwtest.NewTokensFile(b)
	s, err := auth.AddToken(file, "nothing", []string{"queues:no-such-queue:read"})
	if err != nil {
		b.Fatal(err)
	}
	secrets["nothing"] = s
	root := gwtest.UniqueRoot(b)
	opts := gwtest.GatewayOptions{Root: root, SessionTimeout: 10 * time.Second, DrainTimeout: 5 * time.Second, Handover: true}
	keeper := gwtest.StartSecured(b, opts, file, secrets)
	front := gwtest.StartSecured(b, opts, file, secrets)
	lease := keeper.NewLeaseAs(b, "writer")

	var failures atomic.Int64
	cycle := func() time.Duration {
		// The lease kept alive (untimed): acquires and releases renew nothing.
		if r := front.As(b, "writer", "POST", "/v1/leases/"+lease+"/keepalive", nil); r.Status != 200 {
			failures.Add(1)
			b.Errorf("keepalive through the other gateway: %d %s", r.Status, r.Body)
		}
		start := time.Now()
		for _, path := range []string{"/v1/locks/flood-probe/acquire?wait=10s", "/v1/locks/flood-probe/release"} {
			if r := front.As(b, "writer", "POST", path, map[string]any{"lease": lease}); r.Status/100 != 2 {
				failures.Add(1)
				b.Errorf("%s through the other gateway: %d %s", path, r.Status, r.Body)
			}
		}
		return time.Since(start)
	}
	measure := func(ctx context.Context) []time.Duration {
		var took []time.Duration
		for ctx.Err() == nil {
			took = append(took, cycle())
		}
		return took
	}

	quiet, stop := context.WithTimeout(context.Background(), max(*floodFor/10, 10*time.Second))
	before := measure(quiet)
	stop()

	flooding, stopFlood := context.WithCancel(context.Background())
	var reads, tooMany atomic.Int64
	var wg sync.WaitGroup
	for w := range *floodClients {
		wg.Go(func() {
			gws := []*gwtest.Secured{keeper, front}
			for i := 0; flooding.Err() == nil; i++ {
				path := "/v1/contention?window=1h"
				if i%2 == 1 {
					path = "/v1/leases"
				}
				r, err := gwtest.SendAs(flooding, gws[(w+i)%2].URL, secrets["nothing"], "GET", path, nil)
				if err != nil {
					continue // the keeper's stop, or the flood's end
				}
				reads.Add(1)
				if r.Status == 429 {
					tooMany.Add(1)
				}
			}
		})
	}
	began := time.Now()
	during, stop := context.WithTimeout(context.Background(), *floodFor)
	after := measure(during)
	stop()

	// The handover under the flood: the lease lives on at the other
	// gateway, once it reads as the other's (until then the keeper answers
	// for it, and while it hands its session over, 503 with Retry-After).
	frontID := front.As(b, "writer", "GET", "/v1/leases/"+front.NewLeaseAs(b, "writer"), nil).JSON(b)["gateway"]
	keeper.Terminate()
	gwtest.Eventually(b, 30*time.Second, func() error {
		r := front.As(b, "writer", "GET", "/v1/leases/"+lease, nil)
		if r.Status != 200 || r.JSON(b)["gateway"] != frontID {
			return fmt.Errorf("the lease after its gateway's handover, under the flood: %d %s", r.Status, r.Body)
		}
		return nil
	})
	flood := time.Since(began)
	stopFlood()
	wg.Wait()
	after = append(after, cycle()) // forwarding to nobody now: the lease is the front's own

	quantile := func(d []time.Duration, q float64) float64 {
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[min(int(q*float64(len(d))), len(d)-1)]) / float64(time.Millisecond)
	}
	q50, q99 := quantile(before, 0.5), quantile(before, 0.99)
	f50, f99 := quantile(after, 0.5), quantile(after, 0.99)
	b.ReportMetric(q50, "quiet-p50-ms")
	b.ReportMetric(q99, "quiet-p99-ms")
	b.ReportMetric(f50, "flood-p50-ms")
	b.ReportMetric(f99, "flood-p99-ms")
	b.ReportMetric(f99/q99, "p99-ratio")
	b.ReportMetric(float64(reads.Load())/flood.Seconds(), "flood-reads/s")
	b.ReportMetric(float64(tooMany.Load()), "flood-429s")
	b.Logf("lock cycles forwarded: %d quiet (p50 %.2f ms, p99 %.2f ms), %d in %s of flood (p50 %.2f ms, p99 %.2f ms: %.2fx); "+
		"%d flood reads (%.0f/s, %d answered 429); %d forwarding failures; the lease lived through its gateway's handover",
		len(before), q50, q99, len(after), flood.Round(time.Second), f50, f99, f99/q99,
		reads.Load(), float64(reads.Load())/flood.Seconds(), tooMany.Load(), failures.Load())
}
