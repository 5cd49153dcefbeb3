//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// The targets of issue 11.
const (
	targetLatencyRatio = 1.2 // uncontended, gateway/zk.Lock, at most (p50 and mean)
	targetEtcdRatio    = 1.0 // uncontended, gateway/etcd lock API, at most (a stretch)
	targetContention   = 0.8 // grants/s, 32 contenders on one lock, gateway/direct, at least
	targetDistinct     = 0.8 // cycles/s, workers on distinct locks, gateway/direct, at least
	targetQueue        = 0.8 // queue items/s, gateway/direct, at least
	targetWake         = 1.2 // queue take wake-up, gateway/direct, at most (p50 and mean)
	targetPerWaiterH2  = 16 * 1024
	targetPerWaiterH1  = 24 * 1024
	targetFanoutLast   = 250 * time.Millisecond
)

// ratioRow is a summary row of a ratio against a target: at most (latency)
// or at least (throughput).
func ratioRow(name string, ratio float64, detail string, target float64, atMost bool) [4]string {
	if atMost {
		return [4]string{name, fmt.Sprintf("%.2fx (%s)", ratio, detail), fmt.Sprintf("<= %.2fx", target), verdict(ratio <= target)}
	}
	return [4]string{name, fmt.Sprintf("%.2fx (%s)", ratio, detail), fmt.Sprintf(">= %.2fx", target), verdict(ratio >= target)}
}

type report struct {
	cfg          config
	started      time.Time
	total        time.Duration
	machine      machine
	nofile       uint64
	gatewayBuild string
	zk           struct {
		addr, version, mode string
		pid                 int
		forceSync           string
	}
	gw struct {
		pid     int
		args    string
		build   string
		nofile  uint64
		peakRSS uint64
		killed  string
	}
	latency    latencyResult
	contention contentionResult
	keepalive  keepaliveResult
	distinct   distinctResult
	etcd       etcdResult
	waiters    []waitersResult
	queue      queueResult
	wake       wakeResult
	dash       dashResult
	restart    restartResult
	churn      churnResult
	cpu        cpuResult
}

func (r *report) violations() int64 {
	var v int64
	xs := []*exclusion{r.contention.gw.excl, r.contention.direct.excl}
	for _, w := range r.waiters {
		xs = append(xs, w.excl)
	}
	for _, x := range xs {
		if x != nil {
			v += x.violations.Load() + x.tokenViolations.Load()
		}
	}
	v += r.distinct.gw.bad
	return v
}

func verdict(ok bool) string {
	if ok {
		return "**PASS**"
	}
	return "**MISS**"
}

func msf(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }

func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// reportWriter renders the report: its markdown lines, and the summary
// rows each section adds on the way.
type reportWriter struct {
	w   io.Writer
	sum [][4]string
}

// p writes one line.
func (w *reportWriter) p(format string, args ...any) { fmt.Fprintf(w.w, format+"\n", args...) }

// add adds rows to the summary.
func (w *reportWriter) add(rows ...[4]string) { w.sum = append(w.sum, rows...) }

// section writes a heading and its paragraph, each followed by a blank
// line.
func (w *reportWriter) section(heading, format string, args ...any) {
	w.p("%s", heading)
	w.p("")
	w.p(format, args...)
	w.p("")
}

// distRow is a table row of a sample: p50, p90, p99, mean, max.
func (w *reportWriter) distRow(name string, s summary) {
	w.p("| %s | %s | %s | %s | %s | %s |", name, msf(s.p50), msf(s.p90), msf(s.p99), msf(s.mean), msf(s.worst))
}

// named is the figures of one row of a table, and the row's name.
type named[S any] struct {
	name string
	s    S
}

// pair is the rows of a table's two sides (the gateway and the direct
// client, say), in that order.
func pair[S any](aName string, a S, bName string, b S) []named[S] {
	return []named[S]{{aName, a}, {bName, b}}
}

// distLine is a named sample of a distTable.
type distLine = named[summary]

// distTable starts a table of samples, first the heading of the names'
// column, with two rows and the ratio of a over b, named ratio; the
// table's other rows follow by distRow.
func (w *reportWriter) distTable(first, ratio string, a, b distLine) {
	if first != "" {
		first += " "
	}
	w.p("| %s| p50 | p90 | p99 | mean | max |", first)
	w.p("|---|---:|---:|---:|---:|---:|")
	w.distRow(a.name, a.s)
	w.distRow(b.name, b.s)
	w.ratioDistRow(ratio, a.s, b.s)
}

// ratioDistRow is the ratio row of two samples: a over b at p50, p90, p99
// and mean, the p50 and mean in bold.
func (w *reportWriter) ratioDistRow(name string, a, b summary) {
	w.p("| **%s** | **%.2fx** | %.2fx | %.2fx | **%.2fx** | |", name, float64(a.p50)/float64(b.p50),
		float64(a.p90)/float64(b.p90), float64(a.p99)/float64(b.p99), float64(a.mean)/float64(b.mean))
}

// print writes the report: the run's setting, every section in the order of
// the targets (which is not the run's), then the summary.
func (r *report) print(out io.Writer) {
	w := &reportWriter{w: out}
	r.printHeader(w)
	sections := []func(*reportWriter){r.printLatency, r.printEtcd, r.printContention, r.printDistinct}
	for _, wr := range r.waiters {
		sections = append(sections, func(w *reportWriter) { r.printWaiters(w, wr) })
	}
	sections = append(sections, r.printKeepalive, r.printQueues, r.printDash, r.printRestart, r.printChurn, r.printCPU)
	for _, s := range sections {
		s(w)
	}
	if len(w.sum) > 0 {
		w.p("## Summary")
		w.p("")
		w.p("| measure | result | target | verdict |")
		w.p("|---|---|---|---|")
		for _, s := range w.sum {
			w.p("| %s | %s | %s | %s |", s[0], s[1], s[2], s[3])
		}
		w.p("")
	}
	w.p("Total run time %s.", r.total.Round(time.Second))
}

// printHeader writes the title and the table of the run's setting.
func (r *report) printHeader(rw *reportWriter) {
	p := rw.p
	c := r.cfg
	m := r.machine
	p("# zkgate-bench: the lock and queue paths through zkgate vs. go-zookeeper direct")
	p("")
	p("| | |")
	p("|---|---|")
	p("| run | %s, took %s |", r.started.UTC().Format(time.RFC3339), r.total.Round(time.Second))
	p("| machine | %d CPUs (nproc), %s, %s RAM, %s, kernel %s |", m.nproc, m.cpu, mib(m.memory), m.goos, m.kernel)
	p("| Go | %s |", m.goVer)
	sync := "forceSync=yes (ZooKeeper's default: each transaction is fsynced before it is answered)"
	if r.zk.forceSync == "no" {
		sync = "forceSync=no (-force-sync=false: transactions are not fsynced)"
	}
	p("| ZooKeeper | %s, %s on %s (pid %d), tickTime %s, container check %s, %s, data in a temp dir under %s, JVM -Xmx256m SerialGC |",
		r.zk.version, r.zk.mode, r.zk.addr, r.zk.pid, c.tickTime, c.containerCheck, sync, os.TempDir())
	build := r.gatewayBuild
	if r.gw.build != "" {
		build += " at " + r.gw.build
	}
	p("| gateway | child process pid %d, %s: `zkgate %s` |", r.gw.pid, build, r.gw.args)
	p("| direct client | go-zookeeper v1.0.4 with the patch zkgate carries (internal/zk: batched writes, buffered reads, create2, a create with a listing behind it; `zk.Lock` itself unchanged), the same library the gateway uses: locks `zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))`; queues the gateway's recipe (kazoo LockingQueue layout) by hand; session timeout %s |", zkTimeout)
	p("| limits | open files: bench %d, gateway %d; ephemeral ports %s; somaxconn %s |", r.nofile, r.gw.nofile, m.portLo, m.somaxcn)
	p("| settings | iterations %d (warm-up %d, blocks of %d, ABBA); etcd iterations %d; contenders %d for %s each (wait %s); distinct locks %d workers for %s each; waiters %d per protocol over %s (wait %s, ramp %d); keepalives %d workers for %s; queues: %d items sequentially, %d producers + %d consumers for %s (backlog %d), %d-byte items, %d wake-ups; dashboard %d WebSocket clients (ramp %d), %d changes; churn %d workers for %s (wait %s, settle %s), %d held locks |",
		c.iterations, c.warmup, c.block, c.etcdIterations, c.contenders, c.contentionDur, c.contentionWait, c.distinctWorkers, c.distinctDur,
		c.waiters, strings.Join(c.waiterProtocols, ", "), c.waiterWait, c.ramp, c.kaWorkers, c.kaDur,
		c.qItems, c.qProducers, c.qConsumers, c.qDur, c.qBacklog, c.qBytes, c.qWakeups, c.dashClients, c.dashRamp, c.dashChanges,
		c.churnWorkers, c.churnDur, c.churnWait, c.churnSettle, c.heldLocks)
	p("")
	if r.gw.killed != "" {
		p("**%s.**", r.gw.killed)
		p("")
	}
	p("All clients run in this process on the same machine as the gateway and ZooKeeper, so they share its %d CPUs.", m.nproc)
	p("")
}

// printLatency writes section 1 and adds its summary rows.
func (r *report) printLatency(rw *reportWriter) {
	p := rw.p
	if l := r.latency; l.gw.n > 0 && l.direct.n > 0 {
		rw.section("## 1. Uncontended acquire + release, one client",
			"Gateway: `POST /v1/locks/bench-u/acquire {\"lease\":id}` then `POST /v1/locks/bench-u/release`, one lease, one keep-alive connection. Direct: `zk.Lock.Lock()` then `Unlock()` on its own connection. %d samples each, in %d ABBA block pairs.", l.gw.n, l.blocks)
		rw.distTable("client", "ratio gateway/direct", distLine{"gateway acquire+release", l.gw}, distLine{"direct zk.Lock Lock+Unlock", l.direct})
		rw.distRow("gateway acquire only", l.gwAcq)
		rw.distRow("gateway release only", l.gwRel)
		rw.distRow("direct Lock only", l.directLock)
		rw.distRow("direct Unlock only", l.directUnlk)
		rw.distRow("floor: gateway keepalive (one HTTP exchange, no ZooKeeper)", l.keepalive)
		rw.distRow("floor: direct zk Exists (one ZooKeeper read round trip)", l.exists)
		rw.distRow("floor: direct zk Create, ephemeral sequential (a write)", l.create)
		rw.distRow("floor: direct zk Children (a read)", l.children)
		rw.distRow("floor: direct zk Delete (a write)", l.del)
		rw.distRow("floor: direct zk CreateWithStatThenChildren (the gateway's acquire: a write, the listing behind it)", l.createThenList)
		p("")
		if l.serverAcq > 0 {
			p("Inside the gateway (mean of its own `zkgate_http_request_duration_seconds`, handler and middleware, over the measured blocks): acquire %s, release %s, keepalive %s; the rest of the client-side mean (acquire %s, release %s, keepalive %s) is HTTP transport and scheduling.",
				msf(l.serverAcq), msf(l.serverRel), msf(l.serverKA), msf(l.gwAcq.mean), msf(l.gwRel.mean), msf(l.keepalive.mean))
			p("")
		}
		p("`zk.Lock` sends 2 ZooKeeper requests per Lock (a Create of an ephemeral sequential node, a write, then Children, a read, once the Create is answered) and 1 per Unlock (a Delete, a write): %s + %s + %s = %s timed raw (means). The gateway sends the same requests, but its listing goes right behind its create (`CreateWithStatThenChildren`: ZooKeeper runs a session's requests in order, so the listing shows the new node), which makes an acquire one round trip; plus one HTTP exchange per call. The floor rows (%d samples each, interleaved with the blocks, on the direct client's connection) time those requests raw and one HTTP exchange (a keepalive, served without ZooKeeper). A gateway with no cost of its own would be at (create with listing + Delete + 2 x keepalive) / direct Lock+Unlock = (%s + %s + 2 x %s) / %s = **%.2fx** at the means, and %.2fx with the p50s (a sum of p50s, an estimate). With ZooKeeper's forceSync=%s, the writes cost %s and %s (mean) against %s for a read.",
			msf(l.create.mean), msf(l.children.mean), msf(l.del.mean), msf(l.create.mean+l.children.mean+l.del.mean),
			l.keepalive.n, msf(l.createThenList.mean), msf(l.del.mean), msf(l.keepalive.mean), msf(l.direct.mean),
			l.floorRatio(meanOf), l.floorRatio(p50Of), r.zk.forceSync, msf(l.create.mean), msf(l.del.mean), msf(l.exists.mean))
		p("")
		p("Target: gateway at most %.2fx the direct client. p50: %.2fx %s; mean: %.2fx %s.", targetLatencyRatio,
			l.ratioP50(), verdict(l.ratioP50() <= targetLatencyRatio), l.ratioMean(), verdict(l.ratioMean() <= targetLatencyRatio))
		p("")
		rw.add(
			ratioRow("1. uncontended p50, gateway/direct", l.ratioP50(), fmt.Sprintf("%s vs %s", msf(l.gw.p50), msf(l.direct.p50)), targetLatencyRatio, true),
			ratioRow("1. uncontended mean, gateway/direct", l.ratioMean(), fmt.Sprintf("%s vs %s; floor %.2fx", msf(l.gw.mean), msf(l.direct.mean), l.floorRatio(meanOf)), targetLatencyRatio, true))
	}
}

// printContention writes section 2 and adds its summary rows.
func (r *report) printContention(rw *reportWriter) {
	p := rw.p
	c := r.cfg
	if k := r.contention; k.gw.segments > 0 || k.direct.segments > 0 {
		rw.section(fmt.Sprintf("## 2. %d contenders on one lock", k.contenders),
			"Each contender loops acquire, then release at once. Gateway: each its own lease, `acquire?wait=%s`; direct: each its own `zk.Lock` on its own connection. Grants received inside the measured windows count (ABBA halves, after a warm-up).", c.contentionWait)
		p("| client | window | grants | grants/s | acquire timeouts | max holders seen | exclusion violations | token order violations |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, s := range pair("gateway", k.gw, "direct zk.Lock", k.direct) {
			if s.s.elapsed == 0 {
				continue
			}
			tok := "n/a"
			if s.name == "gateway" {
				tok = fmt.Sprint(s.s.excl.tokenViolations.Load())
			}
			p("| %s | %s | %s | %.0f | %d | %d | %d | %s |", s.name, s.s.elapsed, thousands(s.s.grants), s.s.rate(), s.s.timeouts,
				s.s.excl.maxHolders.Load(), s.s.excl.violations.Load(), tok)
		}
		if k.gw.elapsed > 0 && k.direct.elapsed > 0 {
			p("| **ratio gateway/direct** | | | **%.2fx** | | | | |", k.ratio())
			rw.add(ratioRow(fmt.Sprintf("2. grants/s, %d contenders on one lock, gateway/direct", k.contenders), k.ratio(),
				fmt.Sprintf("gateway %.0f/s, direct %.0f/s", k.gw.rate(), k.direct.rate()), targetContention, false))
		}
		v := k.gw.excl.violations.Load() + k.gw.excl.tokenViolations.Load() + k.direct.excl.violations.Load()
		rw.add([4]string{"2. mutual exclusion (holders > 1, token order)", fmt.Sprintf("%d violations in %s grants", v,
			thousands(k.gw.excl.entered.Load()+k.direct.excl.entered.Load())), "0", verdict(v == 0)})
		p("")
	}
}

// printKeepalive writes section 4 and adds its summary rows.
func (r *report) printKeepalive(rw *reportWriter) {
	p := rw.p
	c := r.cfg
	if ka := r.keepalive; ka.count > 0 {
		rw.section("## 4. Keepalives",
			"%d goroutines each `POST /v1/leases/{id}/keepalive` in a loop for %s, on keep-alive connections.", ka.workers, c.kaDur)
		p("| keepalives | keepalives/s | p50 | p99 | ZooKeeper packets received, idle %s | ... during the keepalives |", c.kaDur)
		p("|---:|---:|---:|---:|---:|---:|")
		p("| %s | **%.0f** | %s | %s | %.0f | %.0f |", thousands(ka.count), ka.rate(), msf(ka.lat.p50), msf(ka.lat.p99), ka.idlePackets, ka.kaPackets)
		p("")
		p("ZooKeeper saw %+.0f packets more during %s keepalives than in an idle window of the same length (session pings): keepalives are served from memory %s.",
			ka.extraPackets(), thousands(ka.count), verdict(ka.keepalivesFree()))
		p("")
		rw.add(
			[4]string{"4. keepalives/s", fmt.Sprintf("%.0f/s (%d workers)", ka.rate(), ka.workers), "report", "—"},
			[4]string{"4. keepalives reach ZooKeeper", fmt.Sprintf("%+.0f packets for %s keepalives", ka.extraPackets(), thousands(ka.count)), "~0 (< 1%)", verdict(ka.keepalivesFree())})
	}
}
