//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zkgate/zkgate/internal/proc"
)

// gateway is zkgate running as a child process.
type gateway struct {
	cmd     *exec.Cmd
	url     string
	logPath string
	done    chan struct{}
	metrics *http.Client
	peak    atomic.Uint64 // the highest VmHWM seen
}

// startGateway runs `zkgate serve` against zkAddr (empty: on its embedded
// ZooKeeper) and waits until /readyz is 200 (see startServer).
//
// tlsFiles, when set, are the certificate and key the gateway serves HTTPS
// with (the metrics client then trusts the certificate); extra flags come
// last (and win).
func startGateway(ctx context.Context, bin, zkAddr, logLevel, logPath string, tlsFiles *tlsFiles, extra ...string) (*gateway, error) {
	// The benchmark measures what the gateway can carry, so its limits on
	// leases (and their rate), waiters and requests are lifted (-waiters may ask for more
	// than the defaults allow, and every client of the bench comes from
	// 127.0.0.1, one client address to a gateway without tokens).
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--root", gatewayRoot,
		"--log-level", logLevel, "--max-leases", "10000000", "--max-waiters", "10000000", "--max-waiters-per-name", "10000000",
		"--max-requests-per-token", "10000000", "--max-leases-per-token", "10000000", "--lease-rate", "1000000",
		"--data-dir", logPath+".data") // beside its log, not where the bench runs
	if zkAddr != "" {
		cmd.Args = append(cmd.Args, "--zk", zkAddr) // else its embedded ZooKeeper, in --data-dir
	}
	metrics := newTransport(2)
	if tlsFiles != nil {
		cmd.Args = append(cmd.Args, "--tls-cert", tlsFiles.cert, "--tls-key", tlsFiles.key)
		metrics.TLSClientConfig = tlsFiles.clientConfig()
	}
	cmd.Args = append(cmd.Args, extra...)
	return startServer(ctx, cmd, logPath, metrics)
}

// startServer runs cmd, a server that announces its URL on stdout as the
// gateway does ("zkgate listening on URL"), and waits until its /readyz is
// 200, asked through metrics. Its stderr goes to logPath. The child
// inherits our raised RLIMIT_NOFILE, is in its own process group (a
// terminal's Ctrl-C reaches only us, and we stop it in order), and is
// SIGKILLed by the kernel if we die.
func startServer(ctx context.Context, cmd *exec.Cmd, logPath string, metrics *http.Transport) (*gateway, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	cmd.WaitDelay = time.Second
	if err := proc.Start(cmd, true); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	g := &gateway{cmd: cmd, logPath: logPath, done: make(chan struct{}),
		metrics: &http.Client{Timeout: 30 * time.Second, Transport: metrics}}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(g.done)
	}()
	if err := g.awaitReady(ctx, stdout); err != nil {
		return nil, err
	}
	return g, nil
}

// awaitReady reads the address the gateway listens on from its stdout, then
// waits until its /readyz is 200, all within 60s.
func (g *gateway) awaitReady(ctx context.Context, stdout io.Reader) error {
	t := time.NewTimer(60 * time.Second)
	defer t.Stop()
	addr := make(chan string, 1)
	go proc.AnnouncedURL(stdout, addr)
	url, err := g.await(ctx, t.C, addr, "serving")
	if err != nil {
		return err
	}
	g.url = url
	pctx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	ready := make(chan string, 1)
	go func() {
		for pctx.Err() == nil {
			if resp, err := g.metrics.Get(url + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ready <- url
					return
				}
			}
			select {
			case <-pctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	_, err = g.await(ctx, t.C, ready, "ready")
	return err
}

// await is the value of ch, what the gateway's start waits for next,
// unless first the gateway exits, ctx ends or the start's deadline passes
// (the last two stop the gateway).
func (g *gateway) await(ctx context.Context, deadline <-chan time.Time, ch <-chan string, what string) (string, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-g.done:
		return "", fmt.Errorf("zkgate exited before %s:\n%s", what, g.logTail(20))
	case <-ctx.Done():
		_ = g.stop()
		return "", ctx.Err()
	case <-deadline:
		_ = g.stop()
		return "", fmt.Errorf("zkgate was not %s within 60s", what)
	}
}

func (g *gateway) pid() int { return g.cmd.Process.Pid }

// guardRSS kills the gateway if its VmRSS passes limit (0: never), and
// calls killed with the RSS seen. The returned func stops the guard.
func (g *gateway) guardRSS(limit uint64, killed func(rss uint64)) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if limit == 0 {
			return
		}
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-g.done:
				return
			case <-t.C:
			}
			g.peakRSS()
			if rss, err := procStatusKB(g.pid(), "VmRSS"); err == nil && rss > limit {
				_ = syscall.Kill(-g.pid(), syscall.SIGKILL)
				killed(rss)
				return
			}
		}
	}()
	return func() { close(stop); <-done }
}

// stop sends SIGTERM (a graceful shutdown), then SIGKILL after 20s.
func (g *gateway) stop() error {
	select {
	case <-g.done:
		return nil
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
		return nil
	case <-time.After(20 * time.Second):
	}
	_ = syscall.Kill(-g.pid(), syscall.SIGKILL)
	select {
	case <-g.done:
		return errors.New("zkgate did not stop within 20s of SIGTERM: killed")
	case <-time.After(10 * time.Second):
		return fmt.Errorf("zkgate pid %d still running after SIGKILL", g.pid())
	}
}

// logTail returns the last n lines of the gateway's log.
func (g *gateway) logTail(n int) string {
	b, err := os.ReadFile(g.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// scrape reads /metrics into "name{labels}" -> value.
func (g *gateway) scrape(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := g.metrics.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %d", resp.StatusCode)
	}
	return parseMetrics(b), nil
}

// parseMetrics reads the Prometheus text format, keyed by the sample's name
// and labels exactly as written.
func parseMetrics(b []byte) map[string]float64 {
	out := map[string]float64{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		i := bytes.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(string(line[i+1:]), 64)
		if err != nil {
			continue
		}
		out[string(line[:i])] = v
	}
	return out
}

// mem is the gateway's memory at one moment.
type mem struct {
	rss        uint64 // VmRSS from /proc
	promRSS    uint64 // process_resident_memory_bytes
	heapInuse  uint64 // go_memstats_heap_inuse_bytes
	heapAlloc  uint64 // go_memstats_heap_alloc_bytes
	stackInuse uint64 // go_memstats_stack_inuse_bytes
	sys        uint64 // go_memstats_sys_bytes
	goroutines uint64
	fds        uint64
	conns      uint64  // established TCP connections on the gateway's listening port
	waiters    float64 // zkgate_waiters{kind="lock"}
	leases     float64 // zkgate_leases
}

func (m mem) heapStack() uint64 { return m.heapInuse + m.stackInuse }

func (g *gateway) memory(ctx context.Context) (mem, error) {
	ms, err := g.scrape(ctx)
	if err != nil {
		return mem{}, err
	}
	m := mem{
		promRSS:    uint64(ms["process_resident_memory_bytes"]),
		heapInuse:  uint64(ms["go_memstats_heap_inuse_bytes"]),
		heapAlloc:  uint64(ms["go_memstats_heap_alloc_bytes"]),
		stackInuse: uint64(ms["go_memstats_stack_inuse_bytes"]),
		sys:        uint64(ms["go_memstats_sys_bytes"]),
		goroutines: uint64(ms["go_goroutines"]),
		waiters:    ms[`zkgate_waiters{kind="lock"}`],
		leases:     ms["zkgate_leases"],
	}
	m.rss, _ = procStatusKB(g.pid(), "VmRSS")
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", g.pid())); err == nil {
		m.fds = uint64(len(ents))
	}
	m.conns = g.tcpConns()
	return m, nil
}

// tcpConns counts the established TCP connections whose local port is the
// gateway's listening port (/proc/net/tcp and tcp6: its side of every
// client connection; all are on loopback).
func (g *gateway) tcpConns() uint64 {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(g.url, "http://"), "https://"))
	if err != nil {
		return 0
	}
	pn, err := strconv.Atoi(port)
	if err != nil {
		return 0
	}
	want := fmt.Sprintf(":%04X", pn)
	var n uint64
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			// sl local_address rem_address st ...; st 01 is ESTABLISHED
			if len(fs) > 3 && strings.HasSuffix(fs[1], want) && fs[3] == "01" {
				n++
			}
		}
	}
	return n
}

// settledMemory samples the memory n times, interval apart, and keeps the
// lowest of each figure: the Go heap in use swings with garbage not yet
// collected, and the lowest sample is the closest to what is live.
func (g *gateway) settledMemory(ctx context.Context, n int, interval time.Duration) (mem, error) {
	var best mem
	for i := 0; i < n; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return best, ctx.Err()
			case <-time.After(interval):
			}
		}
		m, err := g.memory(ctx)
		if err != nil {
			return best, err
		}
		if i == 0 {
			best = m
			continue
		}
		best.rss = min(best.rss, m.rss)
		best.promRSS = min(best.promRSS, m.promRSS)
		best.heapInuse = min(best.heapInuse, m.heapInuse)
		best.heapAlloc = min(best.heapAlloc, m.heapAlloc)
		best.stackInuse = min(best.stackInuse, m.stackInuse)
		best.sys = min(best.sys, m.sys)
		best.goroutines, best.fds, best.conns, best.waiters, best.leases = m.goroutines, m.fds, m.conns, m.waiters, m.leases
	}
	return best, nil
}

// peakRSS is the gateway's peak RSS (VmHWM) as last seen while it ran.
func (g *gateway) peakRSS() uint64 {
	if v, err := procStatusKB(g.pid(), "VmHWM"); err == nil {
		for {
			old := g.peak.Load()
			if v <= old || g.peak.CompareAndSwap(old, v) {
				break
			}
		}
	}
	return g.peak.Load()
}

// procStatusKB reads a "Name:   123 kB" line of /proc/PID/status, in bytes.
func procStatusKB(pid int, name string) (uint64, error) {
	return procStatusKBFile(fmt.Sprintf("/proc/%d/status", pid), name)
}

// procLimit reads the soft limit of a /proc/PID/limits line.
func procLimit(pid int, name string) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				if f[0] == "unlimited" {
					return 1 << 62, nil
				}
				return strconv.ParseUint(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no %q in /proc/%d/limits", name, pid)
}

// raiseNoFile raises RLIMIT_NOFILE to at least need (the hard limit too, if
// we may). Setting it explicitly also makes children inherit it: Go restores
// the original soft limit in children only when the program never set it.
func raiseNoFile(need uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	want := lim
	want.Cur = max(lim.Cur, need)
	want.Max = max(lim.Max, want.Cur)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		// Not allowed to raise the hard limit: take all of it.
		want = lim
		want.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return 0, fmt.Errorf("setrlimit NOFILE: %w", err)
		}
	}
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < need {
		return lim.Cur, fmt.Errorf("open-file limit %d (hard %d) is below the %d needed: lower -waiters or raise `ulimit -Hn`", lim.Cur, lim.Max, need)
	}
	return lim.Cur, nil
}

// checkPorts makes sure the waiters' connections fit in the ephemeral port
// range (all go from 127.0.0.1 to one gateway port).
func checkPorts(cfg config) error {
	if !cfg.phases["waiters"] {
		return nil
	}
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return nil
	}
	lo, _ := strconv.Atoi(f[0])
	hi, _ := strconv.Atoi(f[1])
	if n := hi - lo + 1; n < cfg.waiters+2000 {
		return fmt.Errorf("the ephemeral port range %d-%d has %d ports, too few for %d waiters: lower -waiters", lo, hi, n, cfg.waiters)
	}
	return nil
}

// machine describes where the bench ran.
type machine struct {
	nproc   int
	cpu     string
	memory  uint64
	kernel  string
	goVer   string
	goos    string
	portLo  string
	somaxcn string
}

func machineInfo() machine {
	m := machine{nproc: runtime.NumCPU(), goVer: runtime.Version(), goos: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "model name"); ok {
				_, v, _ := strings.Cut(rest, ":")
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if v, err := procStatusKBFile("/proc/meminfo", "MemTotal"); err == nil {
		m.memory = v
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("go", "version").Output(); err == nil {
		m.goVer = strings.TrimSpace(strings.TrimPrefix(string(out), "go version "))
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		m.portLo = strings.Join(strings.Fields(string(b)), "-")
	}
	if b, err := os.ReadFile("/proc/sys/net/core/somaxconn"); err == nil {
		m.somaxcn = strings.TrimSpace(string(b))
	}
	return m
}

// procStatusKBFile reads a "Name:   123 kB" line of a /proc file, in bytes.
func procStatusKBFile(path, name string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, err := strconv.ParseUint(f[0], 10, 64)
				return v * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no %s in %s", name, path)
}
