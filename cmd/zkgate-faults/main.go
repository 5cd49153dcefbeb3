//go:build linux

// Command zkgate-faults runs zkgate's fault-injection suite (package
// internal/harness/faults): a 3-node ZooKeeper ensemble and three gateway processes
// on loopback, dozens of HTTP clients sending each request to a random
// gateway, and faults injected at random for -duration (seeded by -seed):
// ZooKeeper leader and followers killed and restarted, a follower paused
// briefly, gateways paused past their session timeout, killed and
// restarted (half the time at once on their own address), drained
// (SIGTERM) and restarted, cut from ZooKeeper and healed, clients hanging
// up mid-wait, leases expiring mid-hold. Among the clients, holders without
// fencing work only before their lease's deadline, and the checker
// measures whether any two overlapped. It then heals everything, drains
// the queue and checks what every client saw.
//
// Usage, from the repository root:
//
//	go run ./cmd/zkgate-faults -duration 60s -seed 42 -json out.json
//	go run ./cmd/zkgate-faults -h     # every flag
//
// It prints its figures (clients, requests, grants, writes, faults by kind,
// answers by status, violations) to stdout, its progress (each fault as it
// happens) to stderr, and writes the figures as JSON with -json. The exit
// code is 0 when the history shows no violation, 1 when it shows some (the
// work dir with the gateways' and ZooKeeper's logs is then kept), 2 on a
// bad command line or a run that could not be made, 130 on an interrupt.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/zkgate/zkgate/internal/harness/faults"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zkgate-faults", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg faults.Config
	fs.DurationVar(&cfg.Duration, "duration", 60*time.Second, "how long clients run and faults are injected")
	fs.DurationVar(&cfg.MaxDuration, "max-duration", 0, "go on past -duration, up to this, until each of the four primitives without fencing was held (0: -duration alone)")
	fs.Int64Var(&cfg.Seed, "seed", 1, "seed of every random choice (faults, targets, lengths, clients)")
	fs.Int64Var(&cfg.MaxRequests, "max-requests", 1_000_000, "stop the clients after this many requests")
	fs.IntVar(&cfg.LockClients, "lock-clients", 24, "clients taking locks and writing under them")
	fs.IntVar(&cfg.Locks, "locks", 4, "lock names they share")
	fs.IntVar(&cfg.Producers, "producers", 3, "queue producers")
	fs.IntVar(&cfg.Consumers, "consumers", 6, "queue consumers (claim and ack)")
	fs.IntVar(&cfg.Adders, "adders", 4, "clients adding to one counter")
	fs.IntVar(&cfg.Vanishers, "vanishers", 3, "clients hanging up mid-wait")
	fs.IntVar(&cfg.WallClockWorkers, "wallclock-workers", 4, "holders without fencing, stopped by their lease's deadline, on each of a lock, a read/write lock, a semaphore and an election")
	fs.IntVar(&cfg.GroupMembers, "group-members", 4, "clients joining a group and leaving it, or going silent with their lease")
	fs.DurationVar(&cfg.SessionTimeout, "session-timeout", 2*time.Second, "the gateways' ZooKeeper session timeout")
	fs.DurationVar(&cfg.GatewayDrain, "drain-timeout", 2*time.Second, "the gateways' --drain-timeout (a drained gateway's holders have that long)")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", 2*time.Second, "the clients' lease TTL")
	fs.DurationVar(&cfg.FaultGap, "fault-gap", time.Second, "mean pause between two faults of the ZooKeeper loop and of the gateway loop")
	jsonOut := fs.String("json", "", "write the figures as JSON to this file")
	bin := fs.String("zkgate", "", "the zkgate binary to run (default: built from ./cmd/zkgate)")
	workDir := fs.String("work-dir", "", "where ZooKeeper's data and the gateways' logs go (default: a temp dir, removed unless there are violations)")
	keep := fs.Bool("keep", false, "keep the work dir")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "zkgate-faults: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg.WorkDir, cfg.Keep = *workDir, *keep
	if !*quiet {
		cfg.Log = stderr
	}
	cfg.Binary = *bin
	if cfg.Binary == "" {
		dir, err := os.MkdirTemp("", "zkgate-faults-bin-")
		if err != nil {
			fmt.Fprintf(stderr, "zkgate-faults: %v\n", err)
			return 2
		}
		defer os.RemoveAll(dir)
		cfg.Binary = filepath.Join(dir, "zkgate")
		fmt.Fprintln(stderr, "building ./cmd/zkgate")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", cfg.Binary, "./cmd/zkgate").CombinedOutput(); err != nil {
			fmt.Fprintf(stderr, "zkgate-faults: go build ./cmd/zkgate (run from the repository root, or give -zkgate): %v\n%s", err, out)
			return 2
		}
	}
	rep, err := faults.Run(ctx, cfg)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "zkgate-faults: interrupted")
		return 130
	}
	if err != nil {
		fmt.Fprintf(stderr, "zkgate-faults: %v\n", err)
		return 2
	}
	rep.Print(stdout)
	if *jsonOut != "" {
		if err := writeJSON(*jsonOut, rep); err != nil {
			fmt.Fprintf(stderr, "zkgate-faults: %v\n", err)
			return 2
		}
	}
	if rep.Violations > 0 {
		return 1
	}
	return 0
}

func writeJSON(path string, rep *faults.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
