package zkserver

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

var (
	cpuFor     = flag.Duration("zk-cpu-for", 8*time.Second, "BenchmarkEmbeddedCPUPerCycle: the run of each setting in each round")
	cpuRounds  = flag.Int("zk-cpu-rounds", 2, "BenchmarkEmbeddedCPUPerCycle: ABBA rounds (each setting once forward, once back)")
	cpuWorkers = flag.Int("zk-cpu-workers", 32, "BenchmarkEmbeddedCPUPerCycle: workers, each on a lock of its own")
	cpuRate    = flag.Float64("zk-cpu-rate", 2000, "BenchmarkEmbeddedCPUPerCycle: cycles a second offered (all workers together), so that each setting batches alike; 0: as fast as they go")
	cpuOnly    = flag.String("zk-cpu-settings", "", "BenchmarkEmbeddedCPUPerCycle: comma-separated settings to compare with the embedded default (empty: all)")
)

// cpuSettings are what BenchmarkEmbeddedCPUPerCycle compares with the
// embedded ZooKeeper's default: zoo.cfg lines and JVM flags, each with what
// it trades.
var cpuSettings = []struct {
	name   string
	config map[string]string
	jvm    []string
	// Not candidates, but what the default's CPU is made of: plain gives
	// up the TLS that keeps other local users out (a plain port, NIO),
	// noSync the fsync before each write is answered.
	plain, noSync bool
}{
	{name: "default"},
	// Snapshots (and a new transaction log) every 100k transactions,
	// ZooKeeper's default, not 10k: a restart replays more of the log.
	{name: "snapCount=100000", config: map[string]string{"snapCount": "100000"}},
	// No digest of the data tree kept per transaction: a divergence
	// between servers, or a corrupt log, is no longer detected by it.
	{name: "digest.enabled=false", jvm: []string{"-Dzookeeper.digest.enabled=false"}},
	// Writes wait up to 2 ms for others to share their fsync: each is
	// still fsynced before it is answered, up to 2 ms later.
	{name: "flushDelay=2ms", jvm: []string{"-Dzookeeper.flushDelay=2", "-Dzookeeper.maxWriteQueuePollTime=1"}},
	// Netty's sampling of buffers for leaks off (a diagnostic).
	{name: "netty.leakDetection=disabled", jvm: []string{"-Dio.netty.leakDetection.level=disabled"}},
	// What TLS (and Netty) cost, and what the fsyncs cost: not candidates.
	{name: "plain-not-tls", plain: true},
	{name: "forceSync=no", noSync: true},
	// Both that give nothing up.
	{name: "leakDetection+snapCount", config: map[string]string{"snapCount": "100000"}, jvm: []string{"-Dio.netty.leakDetection.level=disabled"}},
}

// BenchmarkEmbeddedCPUPerCycle: ZooKeeper's CPU per lock cycle (a
// sequential ephemeral create, the listing of its parent, the delete: what
// the gateway sends for an uncontended acquire and release) on a server set
// up as zkgate's embedded one (TLS to one client certificate, fsync on, a
// data dir on disk), for each setting of cpuSettings, in ABBA rounds of
// fresh servers; reported as ms of ZooKeeper CPU (user and system, from
// /proc) per cycle and cycles a second. The cycles come at a fixed rate
// (-zk-cpu-rate): ZooKeeper's CPU per cycle falls as its load rises (more
// writes share an fsync and a read of the socket), so settings compare
// only at the same rate. It measures ZooKeeper alone: no gateway.
//
//	go test -run '^$' -bench EmbeddedCPUPerCycle -benchtime 1x ./zkserver/ -zk-cpu-for 10s
func BenchmarkEmbeddedCPUPerCycle(b *testing.B) {
	var settings []int
	for i, s := range cpuSettings {
		if i == 0 || *cpuOnly == "" || strings.Contains(","+*cpuOnly+",", ","+s.name+",") {
			settings = append(settings, i)
		}
	}
	type total struct {
		cpu    time.Duration
		cycles int64
		took   time.Duration
	}
	totals := make([]total, len(cpuSettings))
	for round := range *cpuRounds {
		order := append([]int(nil), settings...)
		for _, back := range []bool{false, true} {
			if back {
				for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
					order[i], order[j] = order[j], order[i]
				}
			}
			for _, i := range order {
				cpu, cycles, took := cpuRun(b, i)
				totals[i].cpu += cpu
				totals[i].cycles += cycles
				totals[i].took += took
				fmt.Fprintf(os.Stderr, "round %d: %s: %.3f ms of ZooKeeper CPU a cycle, %.0f cycles/s", round, cpuSettings[i].name,
					float64(cpu)/float64(time.Millisecond)/float64(cycles), float64(cycles)/took.Seconds())
				fmt.Fprintln(os.Stderr)
			}
		}
	}
	base := float64(totals[0].cpu) / float64(totals[0].cycles)
	for _, i := range settings {
		t := totals[i]
		per := float64(t.cpu) / float64(t.cycles)
		b.ReportMetric(per/float64(time.Millisecond), "ms/cycle:"+cpuSettings[i].name)
		fmt.Fprintf(os.Stderr, "%-30s %.3f ms of ZooKeeper CPU a cycle (%.2fx the default), %.0f cycles/s\n", cpuSettings[i].name,
			per/float64(time.Millisecond), per/base, float64(t.cycles)/t.took.Seconds())
	}
}

// cpuRun runs the workers on a fresh server of setting i for *cpuFor, and
// returns the server's CPU and the cycles done meanwhile.
func cpuRun(b *testing.B, i int) (time.Duration, int64, time.Duration) {
	set := cpuSettings[i]
	s, err := Start(b.Context(), Options{ClientAuth: !set.plain, FastSync: set.noSync, DataDir: filepath.Join(b.TempDir(), "zookeeper"), TickTime: 500 * time.Millisecond,
		MinSessionTimeout: time.Second, MaxSessionTimeout: 10 * time.Minute, Config: set.config, JVMArgs: set.jvm})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	cfg := s.ClientTLS()
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		if set.plain {
			return net.DialTimeout(network, addr, timeout)
		}
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, cfg)
	}
	conn, _, err := zk.Connect([]string{s.Addr()}, 10*time.Second, zk.WithDialer(dial), zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	createEventually(b, conn, "/locks", 15*time.Second)
	acl := zk.WorldACL(zk.PermAll)
	cycle := func(w int) error {
		parent := fmt.Sprintf("/locks/w%d", w)
		p, _, l, err := conn.CreateWithStatThenChildren(parent+"/_c_lock-", nil, zk.FlagEphemeral|zk.FlagSequence, acl, parent)
		if err != nil {
			return err
		}
		if l.Err != nil {
			return l.Err
		}
		return conn.Delete(p, -1)
	}
	for w := range *cpuWorkers {
		if _, err := conn.Create(fmt.Sprintf("/locks/w%d", w), nil, 0, acl); err != nil {
			b.Fatal(err)
		}
	}
	run := func(d time.Duration) (int64, time.Duration) {
		var n atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		every := time.Duration(0)
		if *cpuRate > 0 {
			every = time.Duration(float64(*cpuWorkers) / *cpuRate * float64(time.Second))
		}
		for w := range *cpuWorkers {
			wg.Go(func() {
				next := start.Add(every * time.Duration(w) / time.Duration(*cpuWorkers))
				for time.Since(start) < d {
					if every > 0 {
						time.Sleep(time.Until(next))
						next = next.Add(every)
					}
					if err := cycle(w); err != nil {
						b.Error(err)
						return
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return n.Load(), time.Since(start)
	}
	run(2 * time.Second) // the JIT's warm-up
	before := procCPU(b, s.PID())
	cycles, took := run(*cpuFor)
	return procCPU(b, s.PID()) - before, cycles, took
}

// procCPU is the user and system time of process pid so far.
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ: 100
}
