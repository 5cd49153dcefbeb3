//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zkgate/zkgate/internal/harness/restartload"
	"github.com/zkgate/zkgate/internal/peer"
)

// restartsPhase is section 8: rolling restarts under held locks and jobs.
var restartsPhase = phase{
	name: "restart",
	flags: func(fs *flag.FlagSet, c *config) {
		fs.IntVar(&c.restartGateways, "restart-gateways", 3, "restart test: gateways on one root, each restarted in turn")
		fs.IntVar(&c.restartRounds, "restart-rounds", 2, "restart test: times every gateway is restarted")
		fs.DurationVar(&c.restartGap, "restart-gap", 15*time.Second, "restart test: pause after each restart (the default spreads 6 restarts over the jobs' two minutes)")
		fs.DurationVar(&c.restartDrain, "restart-drain", 5*time.Second, "restart test: the gateways' --drain-timeout")
		fs.IntVar(&c.restartJobs, "restart-jobs", 20, "restart test: zkgate lock jobs, over 4/5 as many locks")
		fs.DurationVar(&c.restartJobHold, "restart-job-hold", time.Minute, "restart test: how long each job's command runs under its lock")
		fs.IntVar(&c.restartHolders, "restart-holders", 4, "restart test: Go clients of each kind (locks, semaphore slots, leaders, queue consumers)")
	},
	quick: map[string]func(c *config){
		"restart-jobs":     func(c *config) { c.restartJobs = 6 },
		"restart-job-hold": func(c *config) { c.restartJobHold = 15 * time.Second },
		"restart-gap":      func(c *config) { c.restartGap = time.Second },
	},
	check: func(c *config) error {
		if c.restartJobHold < time.Second || c.restartGap < 0 || c.restartDrain < 0 {
			return errors.New("-restart-job-hold must be at least 1s, -restart-gap and -restart-drain not negative")
		}
		return positive(c.restartGateways, c.restartRounds, c.restartJobs, c.restartHolders)
	},
	announce: func(c config) string {
		return fmt.Sprintf("8. restarts: %d gateways restarted in turn %d times under %d zkgate lock jobs of %s and %d Go clients of each kind",
			c.restartGateways, c.restartRounds, c.restartJobs, c.restartJobHold, c.restartHolders)
	},
	what: "restarts",
	run:  storeIn(func(r *report) *restartResult { return &r.restart }, restarts),
}

// restartRoot is the root of the restart phase's gateways: theirs alone.
const restartRoot = "/zkgate-bench-restart"

type restartResult struct {
	gateways int
	args     string
	rep      *restartload.Report
}

// restartGateways are the phase's gateways, each on an address and a data
// dir of its own that it keeps across its restarts.
type restartGateways struct {
	e    *env
	gws  []*gateway
	args [][]string
}

// start starts gateway i.
func (g *restartGateways) start(ctx context.Context, i int) error {
	gw, err := startGateway(ctx, g.e.bin, g.e.zkAddr, g.e.cfg.logLevel, filepath.Join(g.e.tmp, fmt.Sprintf("restart-%d.log", i)), nil, g.args[i]...)
	if err != nil {
		return fmt.Errorf("gateway %d: %w", i, err)
	}
	g.gws[i] = gw
	return nil
}

// restart stops gateway i with SIGTERM (it hands its leases over, drains,
// and exits) and starts it again on the same address and data dir.
func (g *restartGateways) restart(ctx context.Context, i int) error {
	if err := g.gws[i].stop(); err != nil {
		return fmt.Errorf("gateway %d: %w\n%s", i, err, g.gws[i].logTail(20))
	}
	return g.start(ctx, i)
}

func (g *restartGateways) stop() error {
	var errs []error
	for _, gw := range g.gws {
		if gw != nil {
			errs = append(errs, gw.stop())
		}
	}
	return errors.Join(errs...)
}

// restarts runs restartload's rolling restart on gateways of their own
// root (a peer secret in common, --handover on as by default): `zkgate
// lock` jobs and Go clients holding locks, slots, leaderships and claims
// through all of them while each is restarted in turn.
func restarts(ctx context.Context, e *env) (res restartResult, err error) {
	c := e.cfg
	res.gateways = c.restartGateways
	secret, err := peer.NewSecret()
	if err != nil {
		return res, err
	}
	secretFile := filepath.Join(e.tmp, "restart-peer-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		return res, err
	}
	g := &restartGateways{e: e, gws: make([]*gateway, c.restartGateways), args: make([][]string, c.restartGateways)}
	defer func() { err = errors.Join(err, g.stop()) }()
	urls := make([]string, c.restartGateways)
	for i := range c.restartGateways {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return res, err
		}
		addr := ln.Addr().String()
		ln.Close()
		dir := filepath.Join(e.tmp, fmt.Sprintf("restart-data-%d", i))
		// The jobs that share a lock wait in line for whole jobs: the
		// gateways' --max-wait covers it.
		g.args[i] = []string{"--listen", addr, "--root", restartRoot, "--data-dir", dir, "--peer-secret-file", secretFile,
			"--handover=true", "--drain-timeout", c.restartDrain.String(), "--max-wait", "1h"}
		if err := g.start(ctx, i); err != nil {
			return res, err
		}
		urls[i] = g.gws[i].url
	}
	res.args = strings.Join(g.args[0], " ")
	jobLocks := max(c.restartJobs*4/5, 1)
	res.rep, err = restartload.Run(ctx, restartload.Config{URLs: urls, Restart: g.restart, Rounds: c.restartRounds, Gap: c.restartGap,
		Binary: e.bin, Jobs: c.restartJobs, JobLocks: jobLocks, JobHold: c.restartJobHold,
		JobWait: c.restartJobHold*time.Duration((c.restartJobs+jobLocks-1)/jobLocks) + 10*time.Minute,
		Holders: c.restartHolders, Hold: 500 * time.Millisecond, TTL: 30 * time.Second,
		Dir: e.tmp, Log: progressWriter{}})
	return res, err
}

// progressWriter sends what is written to it to progress, a line at a time.
type progressWriter struct{}

func (progressWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		progress("%s", line)
	}
	return len(b), nil
}

// restartViolations are what the restarts cost, which must be nothing.
func (r *report) restartViolations() int {
	x := r.restart.rep
	if x == nil {
		return 0
	}
	return x.Jobs - x.JobsOK + len(x.JobFailures) + len(x.LeasesEnded) + len(x.Overlaps) + len(x.TokensChanged)
}

// printRestart writes section 8 and adds its summary rows.
func (r *report) printRestart(rw *reportWriter) {
	p := rw.p
	x := r.restart.rep
	if x == nil {
		return
	}
	c := r.cfg
	rw.section("## 8. Restarts cost nothing: a rolling restart under load",
		"%d gateways on one root (`zkgate %s`, on addresses of their own), each restarted in turn (SIGTERM: it hands its sessions to a peer, drains for %s, exits; then started again on the same address), %d times, %s apart. Meanwhile %d `zkgate lock` jobs (%s each, over %d locks, so some wait for another job's whole run) and %d Go clients of each kind (locks, slots of a semaphore of 2, leaders of an election, consumers of a queue fed as they go), each on its own lease, each holding %s at a time, all spread over the gateways (internal/harness/restartload). After each restart every hold's token is asked of the gateways.",
		r.restart.gateways, r.restart.args, c.restartDrain, c.restartRounds, c.restartGap, c.restartJobs, c.restartJobHold,
		max(c.restartJobs*4/5, 1), c.restartHolders, "500ms")
	p("| restarts | jobs exited 0 | leases ended | overlaps | tokens changed | holds granted | items | requests that waited on a handover | wait p50 | p99 | max |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	p("| %d | %d of %d | %d | %d | %d of %d checked | %s | %s | %d | %s | %s | %s |", x.Restarts, x.JobsOK, x.Jobs, len(x.LeasesEnded),
		len(x.Overlaps), len(x.TokensChanged), x.TokenChecks, thousands(int64(x.Grants)), thousands(int64(x.Items)), len(x.Waits),
		msf(x.Wait(0.5)), msf(x.Wait(0.99)), msf(x.Wait(1)))
	p("")
	p("A request waited on a handover from its first `503` (or refused connection) to the answer that got through (to the sending of the attempt that got through, for a wait in line). The gateways answer a request for a moving lease `503` with `Retry-After: 1`, so most such waits are that second. The longest: %s.", x.Slowest)
	p("")
	for _, list := range [][]string{x.JobFailures, x.LeasesEnded, x.Overlaps, x.TokensChanged} {
		for i, s := range list {
			if i == 10 {
				p("- … and %d more", len(list)-10)
				break
			}
			p("- %s", s)
		}
	}
	v := r.restartViolations()
	rw.add(
		[4]string{"8. rolling restart: jobs ok, leases ended, overlaps, tokens changed", fmt.Sprintf("%d/%d, %d, %d, %d", x.JobsOK, x.Jobs,
			len(x.LeasesEnded), len(x.Overlaps), len(x.TokensChanged)), "all ok, 0, 0, 0", verdict(v == 0)},
		[4]string{"8. wait on a handover, p50 / p99 / max", fmt.Sprintf("%s / %s / %s (%d requests)", msf(x.Wait(0.5)), msf(x.Wait(0.99)),
			msf(x.Wait(1)), len(x.Waits)), "report", "—"})
}
