package server_test

import (
	"io"
	"testing"

	"github.com/zkgate/zkgate/recipes"
	"github.com/zkgate/zkgate/server"
)

// What ZooKeeper 3.8 on Java 17 was measured to keep in its heap (heap.go
// says how): the arithmetic of the embedded heap must cover these, with
// every cap filled.
const (
	measuredItself      = 40 << 20 // idle, and after a load of large writes
	measuredKeeping     = 549      // a znode beyond its data, at most (history nodes)
	measuredLogPerWrite = 2.14     // a create in the log of the last 500, per byte of its data
	measuredRecord      = 400      // a lease record or history node of a 200-byte holder
)

// requiredHeap is what the measurements say a ZooKeeper with every cap of
// cfg filled needs, for one gateway.
func requiredHeap(cfg server.Config) int64 {
	q := cfg.Queues
	largest := max(cfg.MaxItemBytes, recipes.MaxValueBytes)
	return measuredItself +
		int64(500*measuredLogPerWrite*float64(largest)) +
		recipes.MaxProducingBytes + // the produces under way, read at least once
		q.MaxTotalBytes + int64(q.MaxTotalItems)*measuredKeeping + // items and queues
		int64(q.MaxTotalItems)*(measuredKeeping+measuredRecord) + // a claim of each item
		int64(cfg.Limits.MaxLeases)*(measuredKeeping+measuredRecord) + // lease records
		int64(cfg.MaxLeaseHistory)*(measuredKeeping+measuredRecord) // the lease history
}

func configOf(t *testing.T, args ...string) server.Config {
	t.Helper()
	cfg, err := server.ParseConfig(append([]string{"--zk", "127.0.0.1:2181"}, args...), func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The embedded ZooKeeper's heap holds every cap filled, as measured, with
// the default caps and others; it grows with each cap; and the defaults
// need more than the 256 MiB it had (a few hundred produces of 512 KiB
// filled that with ZooKeeper's log of its last writes alone).
// docs/security.md (Limits) says what the defaults come to.
func TestEmbeddedHeapCoversTheCaps(t *testing.T) {
	t.Parallel()
	const documented = 1600 << 20 // docs/security.md, Limits
	def := configOf(t)
	if got := server.EmbeddedHeap(def); got != documented {
		t.Fatalf("the default caps give a heap of %d MiB; docs/security.md says %d MiB", got>>20, documented>>20)
	}
	if need := requiredHeap(def); documented < need || documented <= 256<<20 {
		t.Fatalf("the default heap of %d MiB is below the %d MiB measured with every default cap filled", documented>>20, need>>20)
	}
	for _, args := range [][]string{
		{"--max-item-bytes", "1000KiB"},
		{"--max-item-bytes", "1KiB", "--max-queues-items", "10", "--max-leases", "1", "--max-lease-history", "1"},
		{"--max-queues-bytes", "1GiB", "--max-queues-items", "1000000"},
		{"--max-leases", "200000", "--max-lease-history", "1000000"},
	} {
		cfg := configOf(t, args...)
		if got, need := server.EmbeddedHeap(cfg), requiredHeap(cfg); got < need {
			t.Errorf("%v: a heap of %d MiB, below the %d MiB measured with every cap filled", args, got>>20, need>>20)
		}
	}
	base := server.EmbeddedHeap(def)
	for _, args := range [][]string{
		{"--max-item-bytes", "1000KiB"},
		{"--max-queues-bytes", "256MiB"},
		{"--max-queues-items", "400000"},
		{"--max-leases", "80000"},
		{"--max-lease-history", "400000"},
	} {
		if got := server.EmbeddedHeap(configOf(t, args...)); got <= base {
			t.Errorf("%v: a heap of %d MiB, no more than the default %d MiB", args, got>>20, base>>20)
		}
	}
}
