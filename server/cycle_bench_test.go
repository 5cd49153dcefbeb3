package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// BenchmarkLockCycle is one acquire and one release of a lock of its own
// through a gateway in this process, on one keep-alive connection: the
// bench's lock workload with one worker. Run with -benchmem: its
// allocations per cycle (the client's included, the same in every build)
// are what the gateway's own work per cycle allocates, without noise.
func BenchmarkLockCycle(b *testing.B) { lockCycles(b, gwtest.GatewayOptions{}) }

// BenchmarkLockCycleJournaled is BenchmarkLockCycle with --handover on,
// as a gateway runs by default: each cycle is also recorded in the
// session's journal (three lines: the node made, the grant, the release),
// and its difference from BenchmarkLockCycle is what that record costs.
func BenchmarkLockCycleJournaled(b *testing.B) {
	lockCycles(b, gwtest.GatewayOptions{Handover: true})
}

// lockCycles is BenchmarkLockCycle through a gateway of opts.
func lockCycles(b *testing.B, opts gwtest.GatewayOptions) {
	g := gwtest.StartGateway(b, opts)
	lease := gwtest.NewLease(b, g.URL, "10m", "bench")
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	body := `{"lease":"` + lease + `"}`
	call := func(path string, want int) {
		resp, err := c.Post(g.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			b.Fatalf("%s: %d %s", path, resp.StatusCode, got)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		call("/v1/locks/bench-cycle/acquire", http.StatusOK)
		call("/v1/locks/bench-cycle/release", http.StatusNoContent)
	}
}
