//go:build linux

package faults

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zkgate/zkgate/internal/peer"
	"github.com/zkgate/zkgate/internal/proc"
	"github.com/zkgate/zkgate/zkserver"
)

// cluster is what the suite runs: a ZooKeeper ensemble and gateways, each
// gateway behind a link of proxies to the ensemble.
type cluster struct {
	cfg      Config
	ens      *zkserver.Ensemble
	gateways []*gateway
	logDir   string
}

// gateway is one zkgate process (restarted as a new process after a kill),
// reached through its current URL.
type gateway struct {
	index int
	bin   string
	args  []string
	link  *link
	logf  string

	mu     sync.Mutex
	url    string
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
	starts int
}

func startCluster(ctx context.Context, cfg Config, logDir string) (*cluster, error) {
	c := &cluster{cfg: cfg, logDir: logDir}
	ens, err := zkserver.StartEnsemble(ctx, 3, zkserver.Options{
		TickTime:          cfg.TickTime,
		MinSessionTimeout: 2 * cfg.TickTime,
		MaxSessionTimeout: time.Minute,
		DataDir:           filepath.Join(logDir, "zookeeper"),
		FastSync:          true,
	})
	if err != nil {
		return nil, fmt.Errorf("start the ZooKeeper ensemble: %w", err)
	}
	c.ens = ens
	// The gateways forward to each other: they share a peer secret.
	secret, err := peer.NewSecret()
	if err != nil {
		c.stop()
		return nil, err
	}
	secretFile := filepath.Join(logDir, "peer-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		c.stop()
		return nil, err
	}
	for i := 0; i < cfg.Gateways; i++ {
		l, err := newLink(ens.Addrs())
		if err != nil {
			c.stop()
			return nil, err
		}
		g := &gateway{index: i, bin: cfg.Binary, link: l, logf: filepath.Join(logDir, fmt.Sprintf("gateway-%d.log", i)),
			args: []string{"serve", "--listen", "127.0.0.1:0", "--zk", strings.Join(l.addrs(), ","), "--root", cfg.Root,
				"--session-timeout", cfg.SessionTimeout.String(), "--drain-timeout", cfg.GatewayDrain.String(),
				"--max-wait", "1m", "--max-ttl", "1h", "--log-level", "info", "--peer-secret-file", secretFile,
				// Its own, as on a machine of its own: what a drain saves for
				// the next start (no peer taking the handover) is its own
				// restart's, and nothing is written where the suite runs.
				"--data-dir", filepath.Join(logDir, fmt.Sprintf("gateway-%d-data", i)),
				// Every client of the suite comes from 127.0.0.1: the cap on
				// one address's new leases would refuse what are many clients
				// (a fault ends dozens of leases at once, and all are made
				// anew).
				"--lease-rate", "1000000"}}
		c.gateways = append(c.gateways, g)
	}
	errs := make([]error, len(c.gateways))
	var wg sync.WaitGroup
	for i, g := range c.gateways {
		wg.Go(func() { errs[i] = g.start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// stop ends every process and proxy the cluster started (the gateways
// drain at once, side by side).
func (c *cluster) stop() {
	var wg sync.WaitGroup
	for _, g := range c.gateways {
		wg.Go(func() {
			g.terminate()
			g.link.close()
		})
	}
	wg.Wait()
	if c.ens != nil {
		_ = c.ens.Stop()
	}
}

// start runs the gateway process on a free port and waits until /readyz
// answers 200.
func (g *gateway) start(ctx context.Context) error { return g.startOn(ctx, "127.0.0.1:0") }

// startOn is start listening on listen (host:port).
func (g *gateway) startOn(ctx context.Context, listen string) error {
	logf, err := os.OpenFile(g.logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := slices.Clone(g.args)
	if i := slices.Index(args, "--listen"); i >= 0 {
		args[i+1] = listen
	}
	cmd := exec.Command(g.bin, args...)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := proc.Start(cmd, true); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", g.bin, err)
	}
	done := make(chan struct{})
	addr := make(chan string, 1)
	go proc.AnnouncedURL(stdout, addr)
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	g.mu.Lock()
	g.cmd, g.done, g.paused = cmd, done, false
	g.starts++
	g.mu.Unlock()

	t := time.NewTimer(60 * time.Second)
	defer t.Stop()
	var url string
	select {
	case url = <-addr:
	case <-done:
		return fmt.Errorf("gateway %d exited before serving (log: %s)", g.index, g.logf)
	case <-ctx.Done():
		g.kill()
		return ctx.Err()
	case <-t.C:
		g.kill()
		return fmt.Errorf("gateway %d did not serve within 60s (log: %s)", g.index, g.logf)
	}
	g.mu.Lock()
	g.url = url
	g.mu.Unlock()
	return g.awaitReady(ctx, url, done, t.C)
}

// awaitReady polls url's /readyz until it answers 200; the gateway is
// killed if ctx ends or expired fires first, and is not waited for once
// its process ended (done).
func (g *gateway) awaitReady(ctx context.Context, url string, done <-chan struct{}, expired <-chan time.Time) error {
	probe := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := probe.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("gateway %d exited before it was ready (log: %s)", g.index, g.logf)
		case <-ctx.Done():
			g.kill()
			return ctx.Err()
		case <-expired:
			g.kill()
			return fmt.Errorf("gateway %d was not ready within 60s (log: %s)", g.index, g.logf)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// life tells the gateway's processes apart: the number of its starts.
func (g *gateway) life() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.starts
}

// URL is where the gateway serves now ("" before its first start).
func (g *gateway) URL() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.url
}

func (g *gateway) signal(sig syscall.Signal) {
	g.mu.Lock()
	cmd := g.cmd
	g.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// pause stops the process (SIGSTOP); resume lets it go on (SIGCONT).
func (g *gateway) pause() {
	g.mu.Lock()
	g.paused = true
	g.mu.Unlock()
	g.signal(syscall.SIGSTOP)
}

func (g *gateway) resume() {
	g.signal(syscall.SIGCONT)
	g.mu.Lock()
	g.paused = false
	g.mu.Unlock()
}

// kill sends SIGKILL and waits for the exit.
func (g *gateway) kill() {
	g.mu.Lock()
	cmd, done := g.cmd, g.done
	g.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// terminate stops the gateway gracefully (SIGTERM), SIGKILL after 20s.
func (g *gateway) terminate() {
	g.mu.Lock()
	cmd, done, paused := g.cmd, g.done, g.paused
	g.mu.Unlock()
	if cmd == nil {
		return
	}
	if paused {
		g.resume()
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}
