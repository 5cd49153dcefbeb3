//go:build linux

package main

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// printWaiters writes section 3 for one protocol.
func (r *report) printWaiters(rw *reportWriter, wr waitersResult) {
	p := rw.p
	c := r.cfg
	if wr.n > 0 {
		target := wr.target()
		rw.section(fmt.Sprintf("## 3%s. Gateway memory with %s waiting acquires over %s", wr.letter, thousands(int64(wr.n)), protoName(wr.proto)),
			"A fresh gateway process (pid %d, `zkgate %s`) for this protocol alone, so its memory starts from its own baseline; it is stopped afterwards. One lease holds `%s`; %s more, each with its own lease, send `acquire?wait=%s` and park. %s The waiters added **%d TCP connections** on the gateway's port (established sockets in /proc/net/tcp with them parked, less those of the bench's setup client before them; the table below); the waiters' client dialed %d in all (Go's client may dial a few at once while the streams of a full connection wait, and drop the spares). Memory is the child's own: VmRSS from /proc/%d/status, the Go figures from its /metrics (lowest of several samples). The heap in use includes garbage not yet collected (GOGC=100 lets the heap grow to twice what is live).",
			wr.pid, wr.args, memLock, thousands(int64(wr.n)), c.waiterWait, protoHow(wr.proto), wr.waiterConns(), wr.dials, wr.pid)
		printWaiterMemory(rw, wr)
		p("Leases: %s made in %s (%s per lease, RSS). Waiters: the gateway counted %s (most seen), ZooKeeper held %s lock nodes and %s watches, %s after the first was sent. This gateway's peak RSS (VmHWM): %s.",
			thousands(int64(wr.n+1)), wr.leasesTook.Round(time.Millisecond), kib(perWaiter(wr.leased.rss, wr.idle.rss, wr.n+1)),
			thousands(int64(wr.reached)), thousands(int64(wr.zkChildren)), thousands(int64(wr.zkWatches)), wr.arrival.Round(time.Millisecond), mib(wr.peakRSS))
		p("")
		if wr.arrival > c.waiterWait {
			p("**Parking the waiters took longer than their ?wait=%s: the first waits ended before the queue was complete.**", c.waiterWait)
			p("")
		}
		if wr.chain > 0 {
			p("Then the holder released, and every waiter, once granted, released at once. %s of %s were granted, the last %s after the holder's release (%.0f grants/s through the queue); the last answer of any kind came %s after it.",
				thousands(int64(wr.granted)), thousands(int64(wr.n)), wr.lastGrant.Round(time.Millisecond),
				float64(wr.granted)/max(wr.lastGrant.Seconds(), 1e-9), wr.chain.Round(time.Millisecond))
			p("")
		}
		p("| acquire answer | count |")
		p("|---|---:|")
		for _, k := range slices.Sorted(maps.Keys(wr.acquire)) {
			p("| %s | %s |", k, thousands(int64(wr.acquire[k])))
		}
		p("| **answered / sent** | **%s / %s** |", thousands(int64(wr.answered)), thousands(int64(wr.n)))
		p("")
		p("| release answer (of the granted) | count |")
		p("|---|---:|")
		for _, k := range slices.Sorted(maps.Keys(wr.release)) {
			p("| %s | %s |", k, thousands(int64(wr.release[k])))
		}
		p("")
		p("Answered before the holder released: %d. Lock nodes left afterwards: %d. Exclusion violations: %d (token order: %d). Revoking the %s leases took %s.",
			wr.early, wr.leftover, wr.excl.violations.Load(), wr.excl.tokenViolations.Load(), thousands(int64(wr.n+1)), wr.revokeTook.Round(time.Millisecond))
		p("")
		rw.add(
			[4]string{fmt.Sprintf("3%s. %s: gateway memory per waiter, VmRSS (headline)", wr.letter, wr.proto), fmt.Sprintf("%s (%d TCP connections)", kib(wr.rssPerWaiter()), wr.waiterConns()), "< " + kib(float64(target)), verdict(wr.rssPerWaiter() < float64(target) && wr.reached >= wr.n)},
			[4]string{fmt.Sprintf("3%s. %s: gateway memory per waiter, Go heap+stack in use", wr.letter, wr.proto), kib(wr.heapStackPerWaiter()), "< " + kib(float64(target)), verdict(wr.heapStackPerWaiter() < float64(target) && wr.reached >= wr.n)},
			[4]string{fmt.Sprintf("3%s. %s: every waiter answered", wr.letter, wr.proto), fmt.Sprintf("%s / %s", thousands(int64(wr.answered)), thousands(int64(wr.n))), "all", verdict(wr.answered == wr.n)},
			[4]string{fmt.Sprintf("3%s. %s: every waiter granted (200)", wr.letter, wr.proto), fmt.Sprintf("%s / %s", thousands(int64(wr.granted)), thousands(int64(wr.n))), "all", verdict(wr.granted == wr.n)},
			[4]string{fmt.Sprintf("3%s. %s: mutual exclusion", wr.letter, wr.proto), fmt.Sprintf("%d violations", wr.excl.violations.Load()+wr.excl.tokenViolations.Load()), "0",
				verdict(wr.excl.violations.Load()+wr.excl.tokenViolations.Load() == 0)})
	}
}

// printWaiterMemory writes the table of the gateway's memory and counts
// before, with and after the waiters.
func printWaiterMemory(rw *reportWriter, wr waitersResult) {
	p := rw.p
	p("| | idle | + %s leases, 1 holder | + %s waiters | per waiter | after (all released, leases revoked) |", thousands(int64(wr.n+1)), thousands(int64(wr.n)))
	p("|---|---:|---:|---:|---:|---:|")
	cell := func(m mem, f func(mem) uint64) string {
		if m.rss == 0 {
			return "—"
		}
		return mib(f(m))
	}
	mrow := func(name string, f func(mem) uint64) {
		per := "—"
		if wr.with.rss > 0 && wr.leased.rss > 0 {
			per = kib(perWaiter(f(wr.with), f(wr.leased), wr.n))
		}
		p("| %s | %s | %s | %s | **%s** | %s |", name, cell(wr.idle, f), cell(wr.leased, f), cell(wr.with, f), per, cell(wr.after, f))
	}
	mrow("VmRSS", func(m mem) uint64 { return m.rss })
	mrow("Go heap in use + stacks in use", func(m mem) uint64 { return m.heapStack() })
	mrow("  heap in use", func(m mem) uint64 { return m.heapInuse })
	mrow("  heap allocated (live + not yet collected)", func(m mem) uint64 { return m.heapAlloc })
	mrow("  stacks in use", func(m mem) uint64 { return m.stackInuse })
	mrow("Go runtime total (sys)", func(m mem) uint64 { return m.sys })
	count := func(m mem, v float64) string {
		if m.rss == 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f", v)
	}
	crow := func(name string, f func(mem) float64, per bool) {
		pw := ""
		if per && wr.with.rss > 0 && wr.leased.rss > 0 {
			pw = fmt.Sprintf("%.2f", (f(wr.with)-f(wr.leased))/float64(wr.n))
		}
		p("| %s | %s | %s | %s | %s | %s |", name, count(wr.idle, f(wr.idle)), count(wr.leased, f(wr.leased)),
			count(wr.with, f(wr.with)), pw, count(wr.after, f(wr.after)))
	}
	crow("goroutines", func(m mem) float64 { return float64(m.goroutines) }, true)
	crow("open fds", func(m mem) float64 { return float64(m.fds) }, true)
	crow("TCP connections on the gateway's port", func(m mem) float64 { return float64(m.conns) }, true)
	crow("zkgate_waiters{kind=\"lock\"}", func(m mem) float64 { return m.waiters }, false)
	p("")
}
