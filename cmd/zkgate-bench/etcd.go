//go:build linux

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/zkgate/zkgate/internal/proc"
)

// etcdComparePhase is section 1b: the gateway against etcd's lock API.
var etcdComparePhase = phase{
	name: "etcd",
	flags: func(fs *flag.FlagSet, c *config) {
		fs.StringVar(&c.etcdBin, "etcd", "etcd", "the etcd binary of the etcd comparison (looked up on PATH; the phase is skipped without it)")
		fs.IntVar(&c.etcdIterations, "etcd-iterations", 1000, "etcd comparison: uncontended lock+unlock iterations, each for the gateway and for etcd (blocks of -block, ABBA)")
	},
	quick:    map[string]func(c *config){"etcd-iterations": func(c *config) { c.etcdIterations = 300 }},
	check:    func(c *config) error { return positive(c.etcdIterations) },
	announce: func(c config) string { return fmt.Sprintf("1b. etcd comparison: %d iterations each", c.etcdIterations) },
	what:     "etcd comparison",
	run:      storeIn(func(r *report) *etcdResult { return &r.etcd }, etcdCompare),
}

// etcdResult is the uncontended comparison with etcd's lock API.
type etcdResult struct {
	skipped    string // why the phase did not run
	version    string
	addr       string
	gw, etcd   summary // acquire+release, lock+unlock
	etcdLock   summary
	etcdUnlock summary
	blocks     int

	// 32 workers on distinct locks, gateway vs. etcd, ABBA halves: cycles,
	// and the CPU of the gateway (or etcd) and ZooKeeper meanwhile.
	workers                  int
	distinctGW, distinctEtcd cpuSide
}

func (r etcdResult) ratioP50() float64  { return float64(r.gw.p50) / float64(r.etcd.p50) }
func (r etcdResult) ratioMean() float64 { return float64(r.gw.mean) / float64(r.etcd.mean) }

// etcdServer is a single-member etcd run as a child process.
type etcdServer struct {
	cmd  *exec.Cmd
	dir  string
	url  string
	done chan struct{}
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startEtcd runs bin on two free loopback ports with a fresh data dir
// under parent, and waits until /health says true.
func startEtcd(ctx context.Context, bin, parent string) (*etcdServer, error) {
	dir, err := os.MkdirTemp(parent, "etcd-")
	if err != nil {
		return nil, err
	}
	cp, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	pp, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", cp)
	peer := fmt.Sprintf("http://127.0.0.1:%d", pp)
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(bin, "--name", "default", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "default="+peer, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := proc.Start(cmd, true); err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &etcdServer{cmd: cmd, dir: dir, url: client, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(s.done) }()
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(client + "/health")
		if err == nil {
			var h struct {
				Health string `json:"health"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h.Health == "true" {
				return s, nil
			}
		}
		select {
		case <-s.done:
			b, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			s.stop()
			return nil, fmt.Errorf("etcd exited before it was healthy: %s", truncate(b, 2000))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("etcd was not healthy within 30s")
		}
	}
}

// stop kills etcd (its data is thrown away) and removes its dir.
func (s *etcdServer) stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
	os.RemoveAll(s.dir)
}

// etcdCompare times uncontended lock+unlock through etcd's HTTP JSON gateway
// against the gateway's acquire+release, in ABBA blocks.
func etcdCompare(ctx context.Context, e *env) (res etcdResult, err error) {
	bin, lerr := exec.LookPath(e.cfg.etcdBin)
	if lerr != nil {
		res.skipped = "etcd not installed (Debian: apt-get install etcd-server)"
		progress("etcd comparison skipped: %s", res.skipped)
		return res, nil
	}
	if out, verr := exec.CommandContext(ctx, bin, "--version").Output(); verr == nil {
		first, _, _ := strings.Cut(string(out), "\n")
		res.version = strings.TrimSpace(strings.TrimPrefix(first, "etcd Version:"))
	}
	es, err := startEtcd(ctx, bin, e.tmp)
	if err != nil {
		return res, err
	}
	defer es.stop()
	res.addr = es.url

	ec := newClient(es.url, 2, time.Minute)
	defer ec.close()
	lease, err := etcdGrant(ctx, ec)
	if err != nil {
		return res, err
	}
	etcdOnce := etcdLockCycle(ctx, ec, "bench-e", lease)

	c, gl, done, err := e.leasedClient(ctx, "bench-etcd-compare")
	if err != nil {
		return res, err
	}
	defer done()
	var gw, et cycleTimes
	r := cycleRunner(ctx, []string{"gateway", "etcd"}, [2]cycle{lockCycle(ctx, c, "bench-e", leaseBody(gl)), etcdOnce}, [2]*cycleTimes{&gw, &et})
	if err := r.warm(min(e.cfg.warmup, e.cfg.etcdIterations)); err != nil {
		return res, err
	}
	if res.blocks, err = r.blocks(e.cfg.etcdIterations, e.cfg.block); err != nil {
		return res, err
	}
	res.gw, res.etcd, res.etcdLock, res.etcdUnlock = summarize(gw.both), summarize(et.both), summarize(et.acq), summarize(et.rel)
	res.workers = e.cfg.distinctWorkers
	err = etcdDistinct(ctx, e, es, &res)
	return res, err
}

// etcdGrant grants a lease of 600 s through etcd's HTTP gateway.
func etcdGrant(ctx context.Context, ec *client) (string, error) {
	st, b, err := ec.do(ctx, http.MethodPost, "/v3/lease/grant", []byte(`{"TTL":600}`))
	if err := expect("etcd lease grant", st, b, err, http.StatusOK); err != nil {
		return "", err
	}
	return idIn("etcd lease grant", b)
}

// etcdLockCycle locks and unlocks name through etcd's lock API with a
// lease granted before.
func etcdLockCycle(ctx context.Context, ec *client, name, lease string) cycle {
	lockBody, _ := json.Marshal(map[string]string{"name": base64.StdEncoding.EncodeToString([]byte(name)), "lease": lease})
	return func() (time.Duration, time.Duration, error) {
		t0 := time.Now()
		st, b, err := ec.do(ctx, http.MethodPost, "/v3/lock/lock", lockBody)
		if err := expect("etcd lock", st, b, err, http.StatusOK); err != nil {
			return 0, 0, err
		}
		var k struct {
			Key string `json:"key"`
		}
		if err := json.Unmarshal(b, &k); err != nil || k.Key == "" {
			return 0, 0, fmt.Errorf("etcd lock: no key in %s", truncate(b, 300))
		}
		t1 := time.Now()
		ub, _ := json.Marshal(map[string]string{"key": k.Key})
		st, b, err = ec.do(ctx, http.MethodPost, "/v3/lock/unlock", ub)
		if err := expect("etcd unlock", st, b, err, http.StatusOK); err != nil {
			return 0, 0, err
		}
		return t1.Sub(t0), time.Since(t1), nil
	}
}

// etcdDistinct runs cfg.distinctWorkers workers, each locking and unlocking
// a lock of its own with a lease of its own, through the gateway and
// through etcd's lock API, in ABBA halves of cfg.distinctDur after a
// warm-up each; it reads the CPU time of the gateway (or etcd) and of
// ZooKeeper around each half.
func etcdDistinct(ctx context.Context, e *env, es *etcdServer, res *etcdResult) error {
	n := e.cfg.distinctWorkers
	ec := newClient(es.url, 2*n, time.Minute)
	defer ec.close()
	eops := make([]func(context.Context) error, n)
	for i := range eops {
		lease, err := etcdGrant(ctx, ec)
		if err != nil {
			return err
		}
		once := etcdLockCycle(ctx, ec, fmt.Sprintf("bench-ed-%d", i), lease)
		eops[i] = func(context.Context) error { _, _, err := once(); return err }
	}
	c := newClient(e.gw.url, 2*n, time.Minute)
	defer c.close()
	leases, err := c.createLeases(ctx, n, 8, 10*time.Minute, "bench-etcd-distinct")
	defer func() { _ = c.revokeLeases(context.Background(), leases, 8) }()
	if err != nil {
		return err
	}
	gops := make([]func(context.Context) error, n)
	for i, id := range leases {
		gops[i] = lockOp(c, fmt.Sprintf("bench-ed-%d", i), leaseBody(id))
	}
	// The gateway's or etcd's CPU, and ZooKeeper's, around each run.
	sums, warm := [2]*cpuSide{&res.distinctGW, &res.distinctEtcd}, [2]*cpuSide{{}, {}}
	ops, pids := [2][]func(context.Context) error{gops, eops}, [2]int{e.gw.pid(), es.cmd.Process.Pid}
	return ab[time.Duration]{sides: []string{"gateway", "etcd"}, run: intoSides(sums, warm, func(s abRun[time.Duration], into *cpuSide) error {
		r, err := runOps(ctx, ops[s.side], s.n, pids[s.side], e.zkPID)
		return addRun(into, r, err)
	})}.warmHalves(warmUp(e.cfg.distinctDur), e.cfg.distinctDur)
}

// printEtcd writes section 1b and adds its summary rows.
func (r *report) printEtcd(rw *reportWriter) {
	p := rw.p
	x := r.etcd
	if x.skipped != "" {
		rw.section("## 1b. Uncontended, gateway vs. etcd's lock API (stretch target)",
			"skipped: %s", x.skipped)
		rw.add([4]string{"1b. uncontended, gateway/etcd lock API (stretch)", "skipped: " + x.skipped, fmt.Sprintf("<= %.2fx", targetEtcdRatio), "skipped"})
		return
	}
	if x.gw.n == 0 || x.etcd.n == 0 {
		return
	}
	rw.section("## 1b. Uncontended, gateway vs. etcd's lock API (stretch target)",
		"etcd %s, a single member started by the bench on %s with a fresh data dir in the run's temp dir (etcd fsyncs its WAL on every commit; it has no switch to turn that off in 3.4), killed and removed at the end. One lease granted once (`POST /v3/lease/grant {\"TTL\":600}`), then per cycle `POST /v3/lock/lock {\"name\": base64(\"bench-e\"), \"lease\": ID}` (answers the key) and `POST /v3/lock/unlock {\"key\": ...}`, through etcd's HTTP/JSON gateway (grpc-gateway) on one keep-alive HTTP/1.1 connection. Gateway: acquire + release of `bench-e` as in section 1, one lease, one keep-alive connection. %d samples each in %d ABBA block pairs, after %d warm-up cycles each. Both run on the same machine as everything else.",
		x.version, x.addr, x.gw.n, x.blocks, min(r.cfg.warmup, r.cfg.etcdIterations))
	rw.distTable("client", "ratio gateway/etcd", distLine{"gateway acquire+release", x.gw}, distLine{"etcd lock+unlock", x.etcd})
	rw.distRow("etcd lock only", x.etcdLock)
	rw.distRow("etcd unlock only", x.etcdUnlock)
	p("")
	p("Stretch target: gateway at most %.2fx etcd. p50: %.2fx %s; mean: %.2fx %s.", targetEtcdRatio,
		x.ratioP50(), verdict(x.ratioP50() <= targetEtcdRatio), x.ratioMean(), verdict(x.ratioMean() <= targetEtcdRatio))
	p("")
	if g, et := x.distinctGW, x.distinctEtcd; g.ops > 0 && et.ops > 0 {
		p("%d workers on distinct locks: each worker its own lease and lock (`bench-ed-N`), acquire + release through the gateway, lock + unlock through etcd's lock API, on keep-alive connections, ABBA halves after a warm-up each (%s of each in all). CPU: the server's utime+stime (the gateway's or etcd's) and ZooKeeper's from /proc/<pid>/stat around each half, per cycle.", x.workers, g.elapsed.Round(time.Millisecond))
		p("")
		p("| server | cycles | cycles/s | its CPU per cycle | ZooKeeper CPU per cycle |")
		p("|---|---:|---:|---:|---:|")
		p("| gateway | %s | %.0f | %s | %s |", thousands(g.ops), g.rate(), msf(g.gwPerOp()), msf(g.zkPerOp()))
		p("| etcd | %s | %.0f | %s | — |", thousands(et.ops), et.rate(), msf(et.gwPerOp()))
		p("| **ratio gateway/etcd** | | **%.2fx** | | |", g.rate()/et.rate())
		p("")
		rw.add(ratioRow(fmt.Sprintf("1b. cycles/s, %d workers on distinct locks, gateway/etcd lock API", x.workers), g.rate()/et.rate(),
			fmt.Sprintf("gateway %.0f/s, etcd %.0f/s", g.rate(), et.rate()), 1.0, false))
	}
	rw.add(
		stretch(ratioRow("1b. uncontended p50, gateway/etcd lock API (stretch)", x.ratioP50(), fmt.Sprintf("%s vs %s", msf(x.gw.p50), msf(x.etcd.p50)), targetEtcdRatio, true)),
		stretch(ratioRow("1b. uncontended mean, gateway/etcd lock API (stretch)", x.ratioMean(), fmt.Sprintf("%s vs %s", msf(x.gw.mean), msf(x.etcd.mean)), targetEtcdRatio, true)))
}

func stretch(row [4]string) [4]string {
	row[3] += " (stretch)"
	return row
}
