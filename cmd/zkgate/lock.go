//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/zkgate/zkgate/client"
)

const lockUsage = "zkgate lock [--gateway URL] [--token T] [--wait 30s] [--ttl 15s] [--mode exclusive|read|write] [--semaphore N] [--kill-grace 5s] [--holder H] NAME -- CMD [ARGS...]"

// lockCommand is `zkgate lock`: CMD runs while this process holds the lock
// NAME (or a slot of the semaphore NAME), on a lease kept alive meanwhile.
func lockCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("lock")
	var gw gatewayFlags
	gw.register(fs, getenv)
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for the lock; 0 tries once")
	ttl := fs.Duration("ttl", 15*time.Second, "the lease's TTL: how soon the lock is freed if zkgate dies")
	mode := fs.String("mode", "exclusive", "exclusive, read or write (a read/write lock)")
	semaphore := fs.Int("semaphore", 0, "take one of N slots of the semaphore NAME instead of a lock")
	grace := fs.Duration("kill-grace", 5*time.Second, "between SIGTERM and SIGKILL when the lock is lost")
	holder := fs.String("holder", "", "how other clients see this holder (default: host[pid] CMD)")
	pos, argv, err := parseArgs(fs, args, true, lockUsage, stderr)
	if err != nil {
		return err
	}
	name, err := nameAndCommand("lock", lockUsage, pos, argv)
	if err != nil {
		return err
	}
	modeSet := false
	fs.Visit(func(f *flag.Flag) { modeSet = modeSet || f.Name == "mode" })
	switch {
	case *semaphore < 0:
		return usageErr("--semaphore %d: a semaphore has at least 1 slot", *semaphore)
	case *semaphore > 0 && modeSet:
		return usageErr("--mode is for locks, --semaphore for semaphores: give one")
	case client.LockMode(*mode) != client.Exclusive && client.LockMode(*mode) != client.Read && client.LockMode(*mode) != client.Write:
		return usageErr("--mode %q is not exclusive, read or write", *mode)
	}
	if err := checkRunFlags(*wait, *grace, *ttl); err != nil {
		return err
	}
	relay := newSignalRelay()
	defer relay.stop()
	c, lease, err := leaseForCommand(ctx, &gw, *ttl, *holder, argv)
	if err != nil {
		return err
	}
	defer revoke(lease, stderr)

	what := fmt.Sprintf("lock %q", name)
	if *semaphore > 0 {
		what = fmt.Sprintf("semaphore %q", name)
	}
	wctx, stopWait := relay.waitCtx(ctx)
	var token int64
	var release func(context.Context) error
	if *semaphore > 0 {
		g, aerr := lease.AcquireSemaphore(wctx, name, *semaphore, *wait)
		if aerr == nil {
			token, release = g.Token, g.Release
		}
		err = aerr
	} else {
		g, aerr := lease.Lock(wctx, name, client.LockMode(*mode), *wait)
		if aerr == nil {
			token, release = g.Token, g.Release
		}
		err = aerr
	}
	if sig := stopWait(); sig != nil {
		return exitWith(sig.exitCode(), "%s while waiting for %s", sig, what)
	}
	if err != nil {
		return waitFailed(what, *wait, err)
	}

	env := []string{"ZKGATE_LOCK=" + name, "ZKGATE_LEASE=" + lease.ID(),
		"ZKGATE_FENCING_TOKEN=" + strconv.FormatInt(token, 10), "ZKGATE_URL=" + c.URL()}
	ch := &child{argv: argv, env: env, stdout: stdout, stderr: stderr, grace: *grace}
	out, err := ch.run(ctx, relay, lease.Done())
	if err != nil {
		return err
	}
	if out.stopped {
		why := lease.Err()
		if why == nil {
			why = context.Cause(ctx)
		}
		return exitWith(exitLost, "%s lost while %s ran (%v): it was stopped", what, argv[0], why)
	}
	if lease.Err() == nil {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := release(rctx); err != nil && !errors.Is(err, client.ErrLeaseExpired) {
			fmt.Fprintf(stderr, "zkgate: release %s: %v\n", what, oneLine(err.Error()))
		}
		cancel()
	}
	return &exitStatus{code: out.code}
}

// waitFailed is the exit of a wait for a lock or leadership that failed.
func waitFailed(what string, wait time.Duration, err error) error {
	var e *client.Error
	if errors.Is(err, client.ErrTimeout) && errors.As(err, &e) {
		var holders []client.Holder
		if ok, _ := e.Decode("holders", &holders); ok && len(holders) > 0 {
			return exitWith(exitWaited, "%s not granted within %s: held by %s", what, wait, holderList(holders))
		}
		return exitWith(exitWaited, "%s not granted within %s", what, wait)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func holderList(hs []client.Holder) string {
	s := ""
	for i, h := range hs {
		if i > 0 {
			s += ", "
		}
		if i == 3 {
			return s + fmt.Sprintf("and %d more", len(hs)-3)
		}
		s += strconv.Quote(h.Holder)
	}
	return s
}

// nameAndCommand checks the arguments of lock and elect: one name of kind,
// then -- and the command to run.
func nameAndCommand(kind, usage string, pos, argv []string) (string, error) {
	if len(pos) != 1 {
		return "", usageErr("give one %s name, then -- and the command (usage: %s)", kind, usage)
	}
	if err := validName(kind, pos[0]); err != nil {
		return "", err
	}
	if len(argv) == 0 {
		return "", usageErr("give the command to run after -- (usage: %s)", usage)
	}
	return pos[0], nil
}

// checkRunFlags checks the durations that lock and elect share.
func checkRunFlags(wait, grace, ttl time.Duration) error {
	for n, d := range map[string]time.Duration{"wait": wait, "kill-grace": grace} {
		if err := notNegative(n, d); err != nil {
			return err
		}
	}
	if ttl < time.Second {
		return usageErr("--ttl %s is below the minimum of 1s", ttl)
	}
	return nil
}

// leaseForCommand takes the lease that a command of lock or elect runs
// under, kept alive in the background; holder "" names it after argv.
func leaseForCommand(ctx context.Context, gw *gatewayFlags, ttl time.Duration, holder string, argv []string) (*client.Client, *client.Lease, error) {
	c, err := gw.client()
	if err != nil {
		return nil, nil, err
	}
	if holder == "" {
		holder = defaultHolder(argv)
	}
	lease, err := c.Grant(ctx, ttl, holder)
	if err != nil {
		return nil, nil, fmt.Errorf("lease: %w", err)
	}
	return c, lease, nil
}

// revoke ends the lease at the gateway, bounded: what it held goes with
// it. If the gateway cannot be reached the lease, no longer kept alive,
// expires within its TTL.
func revoke(l *client.Lease, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Revoke(ctx); err != nil {
		fmt.Fprintf(stderr, "zkgate: revoke lease %s: %s (it expires within its TTL of %s)\n", l.ID(), oneLine(err.Error()), l.TTL())
	}
}
