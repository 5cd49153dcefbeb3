package server

import (
	"fmt"

	"github.com/zkgate/zkgate/recipes"
)

// The embedded ZooKeeper's heap (-Xmx) is derived from the caps, so that no
// sequence of requests they let through runs it out of memory: it exits on
// an OutOfMemoryError (-XX:+ExitOnOutOfMemoryError), and its data, reloaded
// at the restart into the same heap, would take it down again.
//
// ZooKeeper keeps in its heap every znode, with its data and its keeping
// (its path, stat and ACL reference, and its name in its parent), and the
// last 500 transactions (zookeeper.commitLogCount, which it will not lower)
// for followers that fall behind, standalone too, each about twice over
// (the client's request and the serialized transaction). Measured on
// ZooKeeper 3.8 with Java 17 (a full GC, then the heap used):
//
//   - 100,000 empty items with short names: 395 bytes each; history nodes
//     with 120 bytes of data: 549 bytes each. znodeKeeping (1 KiB) leaves
//     room for names of 200 characters under a long root.
//   - 500 creates of 512 KiB items in a row: 1.07 MiB each in the log of
//     transactions, 2.14 times the item (logCopies: 2.5).
//
// What the caps let the gateway's users keep is in heapTerms. What they do
// not cap (a lease's holds: lock, semaphore and election nodes, a
// candidacy's value of up to 64 KiB; barriers) is not counted, nor are
// other gateways pointed at this ZooKeeper: each adds its leases and its
// produces under way, and may pass the queue caps by a sixteenth.
const (
	// zooKeeperItself is ZooKeeper's own heap, idle and under load, with
	// nothing stored: 5 MiB idle, 35 MiB after a load of large writes.
	zooKeeperItself = 64 << 20
	// znodeKeeping is what a znode costs beyond its data.
	znodeKeeping = 1 << 10
	// recordBytes bounds the data of a lease's record, its history node, a
	// lock or claim node: JSON with a lease id, a holder of 200 bytes (each
	// escaped to up to 6) and a gateway id.
	recordBytes = 1536
	// logWrites and logCopies: the last 500 transactions, each kept about
	// twice over.
	logWrites = 500
	logCopies = 2.5
	// bodyBytes bounds every write but a queue item: a request body is at
	// most 64 KiB (an election's value).
	bodyBytes = 65 << 10
	// outstandingRequests is how many requests ZooKeeper reads before it
	// stops reading (globalOutstandingLimit), each held twice (the request
	// and its transaction) until it is written.
	outstandingRequests = 1000
	// historyOvershoot: the history may pass its cap by the leases ended
	// between two counts of it (a second apart once full), counted as a
	// quarter of the cap.
	historyOvershoot = 4
)

// heapTerm is one term of the embedded ZooKeeper's heap: what it is, and
// its bytes.
type heapTerm struct {
	what  string
	bytes int64
}

// heapTerms is the arithmetic of the embedded ZooKeeper's heap for cfg, for
// the one gateway it serves.
func heapTerms(cfg Config) []heapTerm {
	q := cfg.Queues
	largestWrite := max(cfg.MaxItemBytes, bodyBytes) + znodeKeeping
	history := int64(cfg.MaxLeaseHistory + cfg.MaxLeaseHistory/historyOvershoot)
	return []heapTerm{
		{"ZooKeeper itself", zooKeeperItself},
		{fmt.Sprintf("its log of the last %d writes, %.1f times the largest (--max-item-bytes)", logWrites, logCopies),
			int64(logWrites * logCopies * float64(largestWrite))},
		{"requests read and not yet written: the gateway's produces under way, and other writes up to ZooKeeper's outstanding limit, twice over",
			2 * (recipes.MaxProducingBytes + outstandingRequests*bodyBytes)},
		{"queue items and directories (--max-queues-bytes, --max-queues-items)",
			q.MaxTotalBytes + int64(q.MaxTotalItems)*znodeKeeping},
		{"claims, one per item at most (--max-queues-items)", int64(q.MaxTotalItems) * (znodeKeeping + recordBytes)},
		{"lease records (--max-leases)", int64(cfg.Limits.MaxLeases) * (znodeKeeping + recordBytes)},
		{"lease history (--max-lease-history, and a quarter more ended between two counts)", history * (znodeKeeping + recordBytes)},
	}
}

// embeddedHeap is the -Xmx of the embedded ZooKeeper: the sum of
// heapTerms, rounded up to 64 MiB.
func embeddedHeap(cfg Config) int64 {
	var sum int64
	for _, t := range heapTerms(cfg) {
		sum += t.bytes
	}
	const step = 64 << 20
	return (sum + step - 1) / step * step
}
