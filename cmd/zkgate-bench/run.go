//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/internal/zkdial"
	"github.com/zkgate/zkgate/zkserver"
)

const (
	gatewayRoot = "/zkgate-bench"
	directRoot  = "/zkgate-bench-direct"
	zkTimeout   = 10 * time.Second // session timeout of the direct clients
)

// env is the run's shared context, what every phase works with: each
// phase is a function of it (see phase.run), with its helpers and types in
// its own file.
type env struct {
	cfg    config
	zkAddr string
	gw     *gateway
	zkPID  int      // ZooKeeper's JVM
	conn   *zk.Conn // a direct client for checks and the uncontended test
	bin    string   // the zkgate binary
	tmp    string   // the run's temp dir
}

// leasedClient is a client of the gateway with a lease of 10 minutes for
// holder; done revokes the lease and closes the client.
func (e *env) leasedClient(ctx context.Context, holder string) (c *client, lease string, done func(), err error) {
	c = newClient(e.gw.url, 2, time.Minute)
	if lease, err = c.createLease(ctx, 10*time.Minute, holder); err != nil {
		c.close()
		return nil, "", nil, err
	}
	return c, lease, func() {
		_ = c.revokeLease(context.Background(), lease)
		c.close()
	}, nil
}

// packets is ZooKeeper's count of packets received (client requests and
// pings), from mntr.
func (e *env) packets(ctx context.Context) (float64, error) {
	m, err := mntr(ctx, e.zkAddr)
	if err != nil {
		return 0, err
	}
	v, ok := m["zk_packets_received"]
	if !ok {
		return 0, errors.New("mntr has no zk_packets_received")
	}
	return v, nil
}

// phase is one part of the bench: the name -phases knows it by, the flags
// only it reads (with their -quick values and their checks), and how it
// runs into the report. The phases run in the order of phases; the report
// has its own order (report.print).
type phase struct {
	name string
	// flags registers the flags only this phase reads.
	flags func(fs *flag.FlagSet, c *config)
	// quick sets, by flag name, the -quick value of its flags.
	quick map[string]func(c *config)
	// check rejects values of its flags it cannot run with, and parses
	// the lists among them.
	check func(c *config) error
	// announce is its progress line (nil: it announces its own).
	announce func(c config) string
	// what names it in an error ("": its errors say it themselves).
	what string
	run  func(ctx context.Context, e *env, rep *report) error
}

// storeIn is a phase's run: measure, its result kept in the report's field
// at, also when it fails (the report shows what was measured).
func storeIn[R any](at func(*report) *R, measure func(context.Context, *env) (R, error)) func(context.Context, *env, *report) error {
	return func(ctx context.Context, e *env, rep *report) error {
		r, err := measure(ctx, e)
		*at(rep) = r
		return err
	}
}

// phases are every phase, in run order.
var phases = []phase{latencyPhase, contentionPhase, distinctPhase, etcdComparePhase, keepalivePhase, queueThroughputPhase,
	queueWakeupPhase, dashboardFanoutPhase, restartsPhase, churnPhase, cpuUsePhase, waitersMemoryPhase}

// allPhases are their names.
var allPhases = func() []string {
	var names []string
	for _, p := range phases {
		names = append(names, p.name)
	}
	return names
}()

// run sets everything up, runs the phases and tears everything down. The
// report holds whatever was measured, even when an error ends the run early.
func run(ctx context.Context, cfg config) (rep *report, err error) {
	rep = &report{cfg: cfg, started: time.Now()}
	rep.machine = machineInfo()
	if err := checkLimits(cfg, rep); err != nil {
		return rep, err
	}
	tmp, err := os.MkdirTemp("", "zkgate-bench-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(tmp)

	bin, moduleDir, err := gatewayBinary(ctx, cfg, tmp, rep)
	if err != nil {
		return rep, err
	}
	zs, err := startZK(ctx, cfg, rep)
	if err != nil {
		return rep, err
	}
	defer func() {
		if serr := zs.Stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop ZooKeeper: %w", serr))
		}
	}()

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
	stopGuard := guardGateway(ctx, gw, cfg, rep, moduleDir)
	defer stopGuard()
	if err := checkGatewayLimit(cfg, rep); err != nil {
		return rep, err
	}

	conn, err := dialZK(ctx, zs.Addr())
	if err != nil {
		return rep, err
	}
	defer conn.Close()

	e := &env{cfg: cfg, zkAddr: zs.Addr(), zkPID: zs.PID(), gw: gw, conn: conn, bin: bin, tmp: tmp}
	for _, p := range phases {
		if !cfg.phases[p.name] {
			continue
		}
		if p.announce != nil {
			progress("%s", p.announce(cfg))
		}
		if err := p.run(ctx, e, rep); err != nil {
			if p.what != "" {
				err = fmt.Errorf("%s: %w", p.what, err)
			}
			return rep, err
		}
	}
	return rep, nil
}

// checkLimits raises the bench's open-file limit to what the phases need,
// and checks the loopback ports.
func checkLimits(cfg config, rep *report) (err error) {
	need := uint64(4096)
	if cfg.phases["waiters"] {
		need += uint64(cfg.waiters)
	}
	if cfg.phases["dashboard"] {
		need = max(need, 2*uint64(cfg.dashClients)+4096)
	}
	if rep.nofile, err = raiseNoFile(need); err != nil {
		return err
	}
	return checkPorts(cfg)
}

// gatewayBinary builds ./cmd/zkgate into dir, or takes -gateway-bin, and
// returns the binary and the module's directory ("" for a given binary).
func gatewayBinary(ctx context.Context, cfg config, dir string, rep *report) (bin, moduleDir string, err error) {
	if cfg.gatewayBin != "" {
		rep.gatewayBuild = "given binary " + cfg.gatewayBin
		return cfg.gatewayBin, "", nil
	}
	progress("building ./cmd/zkgate")
	if bin, moduleDir, err = buildGateway(ctx, dir); err != nil {
		return "", "", err
	}
	rep.gatewayBuild = "built from this tree (go build ./cmd/zkgate)"
	return bin, moduleDir, nil
}

// startZK starts the standalone ZooKeeper every phase works on. The JVM's
// output goes to zookeeper.out in ZooKeeper's own temp data dir, removed by
// Stop.
func startZK(ctx context.Context, cfg config, rep *report) (*zkserver.Server, error) {
	zopts := zkserver.Options{TickTime: cfg.tickTime, ContainerCheckInterval: cfg.containerCheck}
	rep.zk.forceSync = "no"
	if cfg.forceSync {
		// zkserver sets forceSync=no in a temp dir; this puts ZooKeeper's
		// own default back.
		zopts.Config = map[string]string{"forceSync": "yes"}
		rep.zk.forceSync = "yes"
	}
	if err := zkserver.Check(zopts); err != nil {
		return nil, err
	}
	progress("starting ZooKeeper (tickTime %s, forceSync=%s)", cfg.tickTime, rep.zk.forceSync)
	zs, err := zkserver.Start(ctx, zopts)
	if err != nil {
		return nil, err
	}
	rep.zk.addr = zs.Addr()
	rep.zk.pid = zs.PID()
	if srvr, ferr := zkserver.FourLetterWord(ctx, zs.Addr(), "srvr"); ferr == nil {
		rep.zk.version, rep.zk.mode = parseSrvr(srvr)
	}
	return zs, nil
}

// guardGateway records the main gateway in the report and kills it if its
// memory runs away; the returned func stops the guard.
func guardGateway(ctx context.Context, gw *gateway, cfg config, rep *report, moduleDir string) func() {
	rep.gw.pid = gw.cmd.Process.Pid
	if cfg.gatewayBin == "" {
		rep.gw.build = treeInfo(ctx, moduleDir)
	}
	stop := gw.guardRSS(uint64(cfg.maxRSSGiB*(1<<30)), func(rss uint64) {
		rep.gw.killed = fmt.Sprintf("the bench killed the gateway: its VmRSS reached %s, above -max-gateway-rss %.1f GiB", mib(rss), cfg.maxRSSGiB)
		progress("%s", rep.gw.killed)
	})
	rep.gw.args = strings.Join(gw.cmd.Args[1:], " ")
	rep.gw.nofile, _ = procLimit(gw.pid(), "Max open files")
	return stop
}

// checkGatewayLimit checks that the gateway may open a file for every
// waiter and every dashboard client.
func checkGatewayLimit(cfg config, rep *report) error {
	if cfg.phases["waiters"] && rep.gw.nofile < uint64(cfg.waiters)+64 {
		return fmt.Errorf("the gateway's open-file limit is %d, below the %d waiters", rep.gw.nofile, cfg.waiters)
	}
	if cfg.phases["dashboard"] && rep.gw.nofile < uint64(cfg.dashClients)+64 {
		return fmt.Errorf("the gateway's open-file limit is %d, below the %d dashboard clients", rep.gw.nofile, cfg.dashClients)
	}
	return nil
}

// buildGateway builds ./cmd/zkgate of the module this bench belongs to and
// returns the binary and the module's directory.
func buildGateway(ctx context.Context, dir string) (string, string, error) {
	return buildCommand(ctx, dir, "./cmd/zkgate", "zkgate")
}

// buildCommand builds the command pkg of the module this bench belongs to
// into dir/name and returns the binary and the module's directory.
func buildCommand(ctx context.Context, dir, pkg, name string) (string, string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", "", errors.New("run zkgate-bench from inside the zkgate module (go run ./cmd/zkgate-bench)")
	}
	bin := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Dir(gomod)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
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
	return zkdial.Dial(ctx, []string{addr}, zkTimeout)
}

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
