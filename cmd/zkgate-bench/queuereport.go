//go:build linux

package main

import (
	"fmt"
	"strings"
	"time"
)

// queueViolations counts queue items not taken exactly once, and takes out
// of FIFO order.
func (r *report) queueViolations() int {
	d := r.queue.delivery()
	n := d.duplicates + d.lost + d.unknown + r.queue.fifoViolations()
	if n == 0 && d.taken != d.produced {
		n = 1
	}
	return n
}

func ratioCell(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// printQueues writes sections 5 and 6 and adds their summary rows, then
// what removing the queues left.
func (r *report) printQueues(rw *reportWriter) {
	q, w := r.queue, r.wake
	var removed []string // queue paths the phases removed
	var problems, left []string
	if len(q.runs) > 0 || q.gw.segments > 0 || q.direct.segments > 0 {
		r.printQueueThroughput(rw)
		removed = append(removed, queueSeq, queueConc)
		problems, left = append(problems, q.cleanup...), append(left, q.left...)
	}
	if w.gw.n > 0 && w.direct.n > 0 {
		r.printWake(rw)
	}
	if w.gw.n > 0 || w.finished || len(w.cleanup) > 0 || len(w.left) > 0 {
		removed = append(removed, queueWake)
		problems, left = append(problems, w.cleanup...), append(left, w.left...)
	}
	if len(removed) > 0 {
		printQueueRemoval(rw, removed, problems, left)
	}
}

// printQueueThroughput writes section 5.
func (r *report) printQueueThroughput(rw *reportWriter) {
	q := r.queue
	rw.section("## 5. Queue throughput: produce + take, gateway vs. the same recipe direct",
		"Gateway: `POST /v1/queues/{q}/items` with a %d-byte raw item (201), then `POST /v1/queues/{q}/take` (200 with the item), on keep-alive connections; the gateway holds one ZooKeeper session. Direct: the gateway's own recipe (kazoo's LockingQueue layout) with go-zookeeper: produce = `Create entries/entry-100-` PERSISTENT_SEQUENTIAL; take = `Children(entries)`, sorted by priority then sequence number, `Create taken/<entry>` EPHEMERAL, `Get entries/<entry>`, `Multi(Delete entry, Delete claim)`: 1 + 4 ZooKeeper requests per item; each producer and each consumer has its own connection. \"ZK packets\" are ZooKeeper's `zk_packets_received` (mntr) over the same span divided by the items: client requests of everyone, the gateway's watch cache included, plus session pings (a few per second in all). The phase took %s.",
		q.size, q.took.Round(100*time.Millisecond))
	if len(q.runs) > 0 {
		r.printQueueSequential(rw)
	}
	if q.gw.segments > 0 || q.direct.segments > 0 {
		r.printQueueConcurrent(rw)
	}
	r.printQueueDelivery(rw)
}

// printQueueSequential writes section 5's sequential test.
func (r *report) printQueueSequential(rw *reportWriter) {
	p := rw.p
	q := r.queue
	rw.section("### Sequential: one producer fills the queue, then one consumer empties it",
		"%d items per client in %d runs, ABBA (after a warm-up run each); each run produces its items, then takes them all with plain takes (no wait). A take lists the whole queue, so its cost grows with the queue's length (%d items at the start of each take run here).",
		q.items, len(q.runs)/2, q.runs[0].items)
	p("| run | client | items | produce | produce items/s | ZK packets/produce | take | take items/s | ZK packets/take | items/s, produce then take |")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for i, run := range q.runs {
		n := int64(run.items)
		p("| %d | %s | %s | %s | %.0f | %.2f | %s | %.0f | %.2f | %.0f |", i+1, run.client, thousands(n),
			run.produce.Round(time.Millisecond), rate(n, run.produce), perItem(run.producePackets, n),
			run.take.Round(time.Millisecond), rate(n, run.take), perItem(run.takePackets, n), rate(n, run.produce+run.take))
	}
	side := func(name string, s queueSide) {
		n := int64(s.seqItems)
		p("| all | **%s** | %s | %s | **%.0f** | %.2f | %s | **%.0f** | %.2f | **%.0f** |", name, thousands(n),
			s.seqProduce.Round(time.Millisecond), s.seqProduceRate(), perItem(s.seqProducePackets, n),
			s.seqTake.Round(time.Millisecond), s.seqTakeRate(), perItem(s.seqTakePackets, n), s.seqRate())
	}
	if q.gw.seqItems > 0 && q.direct.seqItems > 0 {
		side("gateway", q.gw)
		side("direct", q.direct)
		p("| | **ratio gateway/direct** | | | **%s** | %s | | **%s** | %s | **%s** |",
			ratioCell(q.gw.seqProduceRate(), q.direct.seqProduceRate()),
			ratioCell(perItem(q.gw.seqProducePackets, int64(q.gw.seqItems)), perItem(q.direct.seqProducePackets, int64(q.direct.seqItems))),
			ratioCell(q.gw.seqTakeRate(), q.direct.seqTakeRate()),
			ratioCell(perItem(q.gw.seqTakePackets, int64(q.gw.seqItems)), perItem(q.direct.seqTakePackets, int64(q.direct.seqItems))),
			ratioCell(q.gw.seqRate(), q.direct.seqRate()))
		rw.add(ratioRow("5. queue items/s, 1 producer then 1 consumer, gateway/direct", q.seqRatio(),
			fmt.Sprintf("gateway %.0f/s, direct %.0f/s", q.gw.seqRate(), q.direct.seqRate()), targetQueue, false))
	}
	p("")
	if q.serverProduce > 0 {
		p("Inside the gateway (its own `zkgate_http_request_duration_seconds` over the measured runs): produce %s, take %s on average; the client saw %s and %s.",
			msf(q.serverProduce), msf(q.serverTake),
			msf(q.gw.seqProduce/time.Duration(max(q.gw.seqItems, 1))), msf(q.gw.seqTake/time.Duration(max(q.gw.seqItems, 1))))
		p("")
	}
}

// printQueueConcurrent writes section 5's concurrent test.
func (r *report) printQueueConcurrent(rw *reportWriter) {
	p := rw.p
	q := r.queue
	rw.section(fmt.Sprintf("### Concurrent: %d producers and %d consumers at once", q.producers, q.consumers),
		"Each producer and each consumer loops on its own (keep-alive connection / ZooKeeper connection). Producers wait while %d items are produced and not yet taken, so the queue stays short; a consumer that finds nothing to take waits (gateway: `take?wait=%s`; direct: a children watch of the entries). Answers received inside the measured windows count (ABBA halves, after a warm-up each); after each window the producers stop and the consumers drain the queue. ZK packets per item: over the whole segment, drain included, per item through the queue.",
		q.backlog, concurrentTakeWait)
	p("| client | window | produced | produced/s | taken | taken/s | ZK packets per item (produce + take) | longest drain |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range pair("gateway", q.gw, "direct", q.direct) {
		if s.s.segments == 0 {
			continue
		}
		p("| %s | %s | %s | %.0f | %s | **%.0f** | %.2f | %s |", s.name, s.s.elapsed, thousands(s.s.produced), s.s.concProduceRate(),
			thousands(s.s.taken), s.s.concRate(), perItem(s.s.segPackets, s.s.segItems), s.s.maxDrain.Round(time.Millisecond))
	}
	if q.gw.segments > 0 && q.direct.segments > 0 {
		p("| **ratio gateway/direct** | | | %s | | **%s** | %s | |", ratioCell(q.gw.concProduceRate(), q.direct.concProduceRate()),
			ratioCell(q.gw.concRate(), q.direct.concRate()),
			ratioCell(perItem(q.gw.segPackets, q.gw.segItems), perItem(q.direct.segPackets, q.direct.segItems)))
		rw.add(ratioRow(fmt.Sprintf("5. queue items/s, %d producers + %d consumers, gateway/direct", q.producers, q.consumers), q.concRatio(),
			fmt.Sprintf("gateway %.0f/s, direct %.0f/s", q.gw.concRate(), q.direct.concRate()), targetQueue, false))
	}
	p("")
}

// printQueueDelivery writes section 5's check that every item was taken
// exactly once.
func (r *report) printQueueDelivery(rw *reportWriter) {
	p := rw.p
	q := r.queue
	rw.section("### Every item taken exactly once",
		"Every item carries a unique id; the counts include the warm-ups. Lost: produced (201 / create acknowledged) and never taken; unknown: taken but never acknowledged as produced.")
	p("| client | test | produced | taken | duplicates | lost | unknown | |")
	p("|---|---|---:|---:|---:|---:|---:|---|")
	checked := false
	for _, row := range []struct {
		client, test string
		d            delivery
	}{{"gateway", "sequential", q.gw.seq}, {"direct", "sequential", q.direct.seq},
		{"gateway", "concurrent", q.gw.conc}, {"direct", "concurrent", q.direct.conc}} {
		if row.d.produced == 0 && row.d.taken == 0 {
			continue
		}
		checked = true
		p("| %s | %s | %s | %s | %d | %d | %d | %s |", row.client, row.test, thousands(int64(row.d.produced)), thousands(int64(row.d.taken)),
			row.d.duplicates, row.d.lost, row.d.unknown, verdict(row.d.exactlyOnce()))
	}
	p("")
	d := q.delivery()
	if checked {
		p("Sequential takes out of FIFO order (one producer, one consumer, one priority): gateway %d, direct %d %s.",
			q.gw.fifoViolations, q.direct.fifoViolations, verdict(q.fifoViolations() == 0))
		p("")
		rw.add(
			[4]string{"5. every queue item taken exactly once", fmt.Sprintf("%s produced, %s taken: %d duplicates, %d lost, %d unknown",
				thousands(int64(d.produced)), thousands(int64(d.taken)), d.duplicates, d.lost, d.unknown), "all, once", verdict(d.exactlyOnce())},
			[4]string{"5. FIFO order, sequential takes", fmt.Sprintf("%d out of order", q.fifoViolations()), "0", verdict(q.fifoViolations() == 0)})
	}
}

// printWake writes section 6.
func (r *report) printWake(rw *reportWriter) {
	p := rw.p
	w := r.wake
	rw.section("## 6. Queue take wake-up: produce to a waiting consumer",
		"Gateway: a consumer waits in `POST /v1/queues/%s/take?wait=%s` on the empty queue; %s after its request is written (%dx the p90 of the gateway's answer to a take of the empty queue, %s, within %s-%s: it does the same before it parks) the bench sends `POST /v1/queues/%s/items`. Direct: a consumer blocks on a `ChildrenW` watch of the entries on its own connection; the bench's `Create` goes on another. Time: from just before the produce is sent to the item taken (gateway: the take's answer read; direct: the consumer's `Children` + claim + `Get` + `Multi` done), so it includes the produce. %d samples each in %d ABBA block pairs; the phase took %s.",
		queueWake, takeWakeWait, w.settle.Round(time.Millisecond/10), settleFactor, msf(w.emptyTake.p90), settleFloor, settleCap, queueWake, w.gw.n, w.blocks, w.took.Round(100*time.Millisecond))
	rw.distTable("", "ratio gateway/direct", distLine{"gateway: produce, waiting take answered", w.gw}, distLine{"direct: Create, watch fired, item taken", w.direct})
	rw.distRow("gateway: the produce alone (201 received)", w.gwProduce)
	rw.distRow("direct: the Create alone", w.directProduce)
	rw.distRow("gateway: take?wait=0 of the empty queue (settle calibration)", w.emptyTake)
	p("")
	p("ZooKeeper packets received per wake-up (produce and take, pings included): gateway %.2f, direct %.2f (the direct recipe needs 1 + 1 + 4: the Create, the ChildrenW that parks the consumer, and the take).",
		w.gwPackets/float64(w.gw.n), w.directPackets/float64(w.direct.n))
	p("")
	rw.add(
		ratioRow("6. take wake-up p50, gateway/direct", w.ratioP50(), fmt.Sprintf("%s vs %s", msf(w.gw.p50), msf(w.direct.p50)), targetWake, true),
		ratioRow("6. take wake-up mean, gateway/direct", w.ratioMean(), fmt.Sprintf("%s vs %s", msf(w.gw.mean), msf(w.direct.mean)), targetWake, true))
}

// printQueueRemoval writes what removing the queues of sections 5 and 6
// left behind.
func printQueueRemoval(rw *reportWriter, removed, problems, left []string) {
	p := rw.p
	if len(problems) > 0 {
		p("Removing the queues: %s.", strings.Join(problems, "; "))
	} else {
		p("The queues (%s) were removed at the end: the gateway's with `DELETE /v1/queues/{q}` (204), the direct client's recursively.", strings.Join(removed, ", "))
	}
	what := "none"
	if len(left) > 0 {
		what = strings.Join(left, ", ")
	}
	p("Queue paths left in ZooKeeper afterwards: %s %s.", what, verdict(len(left) == 0 && len(problems) == 0))
	p("")
	rw.add([4]string{"5-6. queues removed, nothing left", what + " left", "none", verdict(len(left) == 0 && len(problems) == 0)})
}
