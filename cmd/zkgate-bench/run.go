//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/zkserver"
)

const (
	gatewayRoot = "/zkgate-bench"
	directRoot  = "/zkgate-bench-direct"
	zkTimeout   = 10 * time.Second // session timeout of the direct clients
)

// env is what every phase works with.
type env struct {
	cfg    config
	zkAddr string
	gw     *gateway
	zkPID  int      // ZooKeeper's JVM
	conn   *zk.Conn // a direct client for checks and the uncontended test
	bin    string   // the zkgate binary
	tmp    string   // the run's temp dir
}

// run sets everything up, runs the phases and tears everything down. The
// report holds whatever was measured, even when an error ends the run early.
func run(ctx context.Context, cfg config) (rep *report, err error) {
	rep = &report{cfg: cfg, started: time.Now()}
	rep.machine = machineInfo()

	need := uint64(4096)
	if cfg.phases["waiters"] {
		need += uint64(cfg.waiters)
	}
	if cfg.phases["dashboard"] {
		need = max(need, 2*uint64(cfg.dashClients)+4096)
	}
	if rep.nofile, err = raiseNoFile(need); err != nil {
		return rep, err
	}
	if err := checkPorts(cfg); err != nil {
		return rep, err
	}

	tmp, err := os.MkdirTemp("", "zkgate-bench-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(tmp)

	bin := cfg.gatewayBin
	var moduleDir string
	if bin == "" {
		progress("building ./cmd/zkgate")
		if bin, moduleDir, err = buildGateway(ctx, tmp); err != nil {
			return rep, err
		}
		rep.gatewayBuild = "built from this tree (go build ./cmd/zkgate)"
	} else {
		rep.gatewayBuild = "given binary " + bin
	}

	// The JVM's output goes to zookeeper.out in ZooKeeper's own temp data
	// dir, removed by Stop.
	zopts := zkserver.Options{TickTime: cfg.tickTime, ContainerCheckInterval: cfg.containerCheck}
	rep.zk.forceSync = "no"
	if cfg.forceSync {
		// zkserver sets forceSync=no in a temp dir; this puts ZooKeeper's
		// own default back.
		zopts.Config = map[string]string{"forceSync": "yes"}
		rep.zk.forceSync = "yes"
	}
	if err := zkserver.Check(zopts); err != nil {
		return rep, err
	}
	progress("starting ZooKeeper (tickTime %s, forceSync=%s)", cfg.tickTime, rep.zk.forceSync)
	zs, err := zkserver.Start(ctx, zopts)
	if err != nil {
		return rep, err
	}
	defer func() {
		if serr := zs.Stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop ZooKeeper: %w", serr))
		}
	}()
	rep.zk.addr = zs.Addr()
	rep.zk.pid = zs.PID()
	if srvr, ferr := zkserver.FourLetterWord(ctx, zs.Addr(), "srvr"); ferr == nil {
		rep.zk.version, rep.zk.mode = parseSrvr(srvr)
	}

	progress("starting the gateway")
	gw, err := startGateway(ctx, bin, zs.Addr(), cfg.logLevel, filepath.Join(tmp, "zkgate.log"), nil)
	if err != nil {
		return rep, err
	}
	defer func() {
		rep.gw.peakRSS = gw.peakRSS()
		if serr := gw.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "--- last lines of the gateway's log ---\n%s\n", gw.logTail(30))
		}
	}()
	rep.gw.pid = gw.cmd.Process.Pid
	if cfg.gatewayBin == "" {
		rep.gw.build = treeInfo(ctx, moduleDir)
	}
	stopGuard := gw.guardRSS(uint64(cfg.maxRSSGiB*(1<<30)), func(rss uint64) {
		rep.gw.killed = fmt.Sprintf("the bench killed the gateway: its VmRSS reached %s, above -max-gateway-rss %.1f GiB", mib(rss), cfg.maxRSSGiB)
		progress("%s", rep.gw.killed)
	})
	defer stopGuard()
	rep.gw.args = strings.Join(gw.cmd.Args[1:], " ")
	rep.gw.nofile, _ = procLimit(gw.pid(), "Max open files")
	if cfg.phases["waiters"] && rep.gw.nofile < uint64(cfg.waiters)+64 {
		return rep, fmt.Errorf("the gateway's open-file limit is %d, below the %d waiters", rep.gw.nofile, cfg.waiters)
	}
	if cfg.phases["dashboard"] && rep.gw.nofile < uint64(cfg.dashClients)+64 {
		return rep, fmt.Errorf("the gateway's open-file limit is %d, below the %d dashboard clients", rep.gw.nofile, cfg.dashClients)
	}

	conn, err := dialZK(ctx, zs.Addr())
	if err != nil {
		return rep, err
	}
	defer conn.Close()

	e := &env{cfg: cfg, zkAddr: zs.Addr(), zkPID: zs.PID(), gw: gw, conn: conn, bin: bin, tmp: tmp}
	if cfg.phases["latency"] {
		progress("1. uncontended latency: %d warm-up + %d iterations each", cfg.warmup, cfg.iterations)
		if rep.latency, err = e.latency(ctx); err != nil {
			return rep, fmt.Errorf("uncontended latency: %w", err)
		}
	}
	if cfg.phases["contention"] {
		progress("2. %d contenders, %s each for gateway and direct", cfg.contenders, cfg.contentionDur)
		if rep.contention, err = e.contention(ctx); err != nil {
			return rep, fmt.Errorf("contention: %w", err)
		}
	}
	if cfg.phases["distinct"] {
		progress("2b. %d workers on distinct locks, %s each for gateway and direct", cfg.distinctWorkers, cfg.distinctDur)
		if rep.distinct, err = e.distinct(ctx); err != nil {
			return rep, fmt.Errorf("distinct locks: %w", err)
		}
	}
	if cfg.phases["etcd"] {
		progress("1b. etcd comparison: %d iterations each", cfg.etcdIterations)
		if rep.etcd, err = e.etcdPhase(ctx); err != nil {
			return rep, fmt.Errorf("etcd comparison: %w", err)
		}
	}
	if cfg.phases["keepalive"] {
		progress("4. keepalives: %d workers, %s", cfg.kaWorkers, cfg.kaDur)
		if rep.keepalive, err = e.keepalives(ctx); err != nil {
			return rep, fmt.Errorf("keepalives: %w", err)
		}
	}
	if cfg.phases["queue-throughput"] {
		progress("5. queue throughput: %d items sequentially, then %d producers and %d consumers for %s, each for gateway and direct",
			cfg.qItems, cfg.qProducers, cfg.qConsumers, cfg.qDur)
		if rep.queue, err = e.queueThroughput(ctx); err != nil {
			return rep, fmt.Errorf("queue throughput: %w", err)
		}
	}
	if cfg.phases["queue-wakeup"] {
		progress("6. queue take wake-up: %d each for gateway and direct", cfg.qWakeups)
		if rep.wake, err = e.queueWakeup(ctx); err != nil {
			return rep, fmt.Errorf("queue wake-up: %w", err)
		}
	}
	if cfg.phases["dashboard"] {
		progress("7. dashboard fan-out: %d WebSocket clients, %d changes", cfg.dashClients, cfg.dashChanges)
		if rep.dash, err = e.dashboardPhase(ctx); err != nil {
			return rep, fmt.Errorf("dashboard fan-out: %w", err)
		}
	}
	if cfg.phases["restart"] {
		progress("8. restarts: %d gateways restarted in turn %d times under %d zkgate lock jobs of %s and %d Go clients of each kind",
			cfg.restartGateways, cfg.restartRounds, cfg.restartJobs, cfg.restartJobHold, cfg.restartHolders)
		if rep.restart, err = e.restartPhase(ctx); err != nil {
			return rep, fmt.Errorf("restarts: %w", err)
		}
	}
	if cfg.phases["churn"] {
		progress("9. churn: %d workers on fresh names for %s, then %d locks held", cfg.churnWorkers, cfg.churnDur, cfg.heldLocks)
		if rep.churn, err = e.churn(ctx); err != nil {
			return rep, fmt.Errorf("churn: %w", err)
		}
	}
	if cfg.phases["cpu"] {
		progress("10. CPU per operation: %d workers, %s of each workload for each binary", cfg.cpuWorkers, cfg.cpuDur)
		if rep.cpu, err = e.cpuPhase(ctx); err != nil {
			return rep, fmt.Errorf("CPU per operation: %w", err)
		}
	}
	if cfg.phases["waiters"] {
		for _, proto := range cfg.waiterProtocols {
			progress("3. %d waiting acquires over %s, on a fresh gateway", cfg.waiters, protoName(proto))
			wr, err := e.waitersOn(ctx, proto)
			rep.waiters = append(rep.waiters, wr)
			if err != nil {
				return rep, fmt.Errorf("waiters over %s: %w", protoName(proto), err)
			}
		}
	}
	return rep, nil
}

// buildGateway builds ./cmd/zkgate of the module this bench belongs to and
// returns the binary and the module's directory.
func buildGateway(ctx context.Context, dir string) (string, string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", "", errors.New("run zkgate-bench from inside the zkgate module (go run ./cmd/zkgate-bench)")
	}
	bin := filepath.Join(dir, "zkgate")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/zkgate")
	cmd.Dir = filepath.Dir(gomod)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build ./cmd/zkgate: %v\n%s", err, b)
	}
	return bin, cmd.Dir, nil
}

// parseSrvr reads the version and mode from a `srvr` reply.
func parseSrvr(s string) (version, mode string) {
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(line, "Zookeeper version: "); ok {
			version = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "Mode: "); ok {
			mode = strings.TrimSpace(v)
		}
	}
	return version, mode
}

// dialZK opens a go-zookeeper connection and waits for its session.
func dialZK(ctx context.Context, addr string) (*zk.Conn, error) {
	live := make(chan struct{}, 1)
	conn, _, err := zk.Connect([]string{addr}, zkTimeout, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.State == zk.StateHasSession {
				select {
				case live <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("zk connect: %w", err)
	}
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-live:
		return conn, nil
	case <-ctx.Done():
		conn.Close()
		return nil, ctx.Err()
	case <-t.C:
		conn.Close()
		return nil, fmt.Errorf("no ZooKeeper session with %s within 30s", addr)
	}
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// mntr returns the numeric fields of ZooKeeper's `mntr`.
func mntr(ctx context.Context, addr string) (map[string]float64, error) {
	s, err := zkserver.FourLetterWord(ctx, addr, "mntr")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok {
			continue
		}
		var f float64
		if _, err := fmt.Sscan(v, &f); err == nil {
			out[k] = f
		}
	}
	return out, nil
}

// treeInfo tells which commit the gateway was built from, and whether the
// working tree differs from it. Read-only git commands only, without
// optional locks: other people work in this tree.
func treeInfo(ctx context.Context, dir string) string {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	rev, err := git("rev-parse", "--short=12", "HEAD")
	if err != nil {
		return ""
	}
	s := "commit " + rev
	changed, _ := git("diff", "--name-only", "HEAD", "--", ".", ":(exclude)cmd/zkgate-bench")
	untracked, _ := git("ls-files", "--others", "--exclude-standard", "--", ".", ":(exclude)cmd/zkgate-bench")
	if n := countLines(changed) + countLines(untracked); n > 0 {
		s += fmt.Sprintf(" plus %d changed or new files in the working tree", n)
	}
	return s
}

func countLines(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(s, "\n") + 1
}
