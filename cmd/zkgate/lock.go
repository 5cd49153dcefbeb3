//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkgate/zkgate/client"
)

const lockLong = `Runs CMD while holding the lock NAME (or a slot of the semaphore NAME, with
--semaphore N), on a lease kept alive meanwhile; CMD has ZKGATE_LOCK,
ZKGATE_LEASE, ZKGATE_FENCING_TOKEN and ZKGATE_URL in its environment. It
releases and revokes when CMD ends, and exits with CMD's exit code.

With several names it holds all those locks at once, all or nothing (each in
--mode), taken in one order (by name) so that two such commands never
deadlock each other, --wait bounding the whole set; ZKGATE_LOCK is then the
names, by name and space-separated, and ZKGATE_FENCING_TOKENS their tokens
(NAME=TOKEN, space-separated, in the same order).

` + runLong

// runLong is what zkgate lock and zkgate elect share in their help.
const runLong = `stdin, stdout, stderr and signals (HUP, INT, QUIT, TERM, USR1, USR2) pass on
to CMD. If no keepalive is confirmed in time, CMD gets SIGTERM, then SIGKILL
after --kill-grace, so that it is dead before the lease's deadline (what the
gateway promised: with its default --session-timeout of 10s, 6 to 9.5s ahead
after each keepalive); also if the lease is lost. If zkgate dies, CMD's
process group is killed (Linux; in the foreground of a terminal, CMD alone).

Exit codes: CMD's own (128+N if signal N ended it); 1 the gateway refused;
2 a bad command line; 69 the gateway could not be reached; 75 the wait ended
first, CMD was not run; 76 lost while CMD ran, CMD was stopped; 126 CMD
could not be started, 127 not found.`

// runOptions are the flags zkgate lock and zkgate elect share.
type runOptions struct {
	gw                          gatewayFlags
	wait, ttl, grace, lockDelay time.Duration
	holder                      string
}

// lockOptions are the flags of zkgate lock.
type lockOptions struct {
	runOptions
	mode      string
	semaphore int
}

// newLockCommand is `zkgate lock`: CMD runs while this process holds the
// lock NAME (or a slot of the semaphore NAME), on a lease kept alive
// meanwhile.
func newLockCommand(a *app) *cobra.Command {
	var o lockOptions
	cmd := &cobra.Command{
		Use:   "lock [flags] NAME [NAME...] -- CMD [ARGS...]",
		Short: "run CMD while holding the lock NAME, several locks at once, or a slot of the semaphore NAME",
		Long:  lockLong,
		Example: `  zkgate lock --wait 30s --lock-delay 10s invoices -- ./bill-customers.sh
  zkgate lock --mode read catalog -- ./export.sh
  zkgate lock account-7 account-3 -- ./transfer.sh 7 3 100
  zkgate lock --semaphore 3 gpu -- ./train.sh`,
	}
	o.register(cmd, a, o.run, runHelp{
		wait: 30 * time.Second, waitHelp: "how long to wait for the lock; 0 tries once",
		ttl:       "how soon the lock is freed if zkgate dies",
		holder:    "this holder",
		lockDelay: "if the lease ends without releasing, nobody is granted the lock for this long",
	})
	fs := cmd.Flags()
	fs.StringVar(&o.mode, "mode", "exclusive", "exclusive, read or write (a read/write lock)")
	fs.IntVar(&o.semaphore, "semaphore", 0, "take one of N slots of the semaphore NAME instead of a lock")
	return cmd
}

func (o *lockOptions) run(cmd *cobra.Command, a *app, args []string) error {
	ctx, stdout, stderr := cmd.Context(), a.stdout, a.stderr
	s, err := o.start(cmd, a, "lock", args, func(names []string) error {
		switch {
		case len(names) > 1 && o.semaphore > 0:
			return usageErr("--semaphore takes one semaphore name; several names are a set of locks")
		case len(names) > client.MaxLockSet:
			return usageErr("%d locks: a set has at most %d", len(names), client.MaxLockSet)
		case o.semaphore < 0:
			return usageErr("--semaphore %d: a semaphore has at least 1 slot", o.semaphore)
		case o.semaphore > 0 && cmd.Flags().Changed("mode"):
			return usageErr("--mode is for locks, --semaphore for semaphores: give one")
		case client.LockMode(o.mode) != client.Exclusive && client.LockMode(o.mode) != client.Read && client.LockMode(o.mode) != client.Write:
			return usageErr("--mode %q is not exclusive, read or write", o.mode)
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer s.end(stderr)
	argv, relay, c, lease := s.argv, s.relay, s.c, s.lease

	wctx, stopWait := relay.waitCtx(ctx)
	what, held, err := o.take(wctx, lease, s.names)
	if sig := stopWait(); sig != nil {
		return exitWith(sig.exitCode(), "%s while waiting for %s", sig, what)
	}
	if err != nil {
		return waitFailed(what, o.wait, err)
	}

	env := append(held.env, "ZKGATE_LEASE="+lease.ID(), "ZKGATE_URL="+c.URL())
	ch := &child{argv: argv, env: env, stdout: stdout, stderr: stderr, grace: o.grace}
	out, err := ch.run(ctx, relay, stopBy(lease, o.grace))
	if err != nil {
		return err
	}
	if out.stopped {
		return exitWith(exitLost, "%s lost while %s ran (%v): it was stopped", what, argv[0], stopCause(ctx, lease.Err()))
	}
	letGo(lease, stderr, "release", what, held.release)
	return &exitStatus{code: out.code}
}

// taken is what zkgate lock took: CMD's environment for it, and how to let
// it go.
type taken struct {
	env     []string
	release func(context.Context) error
}

// take acquires for lease what the command asks for: a semaphore's slot,
// a lock, or a set of locks (several names). what names it in messages.
func (o *lockOptions) take(ctx context.Context, lease *client.Lease, names []string) (what string, h taken, err error) {
	mode := client.LockMode(o.mode)
	switch {
	case o.semaphore > 0:
		what = fmt.Sprintf("semaphore %q", names[0])
		g, err := lease.AcquireSemaphore(ctx, names[0], o.semaphore, o.wait)
		if err != nil {
			return what, h, err
		}
		return what, taken{env: lockEnv(names[0], g.Token), release: g.Release}, nil
	case len(names) == 1:
		what = fmt.Sprintf("lock %q", names[0])
		g, err := lease.Lock(ctx, names[0], mode, o.wait)
		if err != nil {
			return what, h, err
		}
		return what, taken{env: lockEnv(names[0], g.Token), release: g.Release}, nil
	}
	what = fmt.Sprintf("locks %q", names)
	set := make([]client.LockRequest, len(names))
	for i, n := range names {
		set[i] = client.LockRequest{Name: n, Mode: mode}
	}
	grants, err := lease.LockAll(ctx, set, o.wait)
	if err != nil {
		return what, h, err
	}
	var locks, tokens []string
	for _, g := range grants {
		locks = append(locks, g.Name)
		tokens = append(tokens, g.Name+"="+strconv.FormatInt(g.Token, 10))
	}
	env := []string{"ZKGATE_LOCK=" + strings.Join(locks, " "), "ZKGATE_FENCING_TOKENS=" + strings.Join(tokens, " ")}
	return what, taken{env: env, release: func(ctx context.Context) error { return lease.UnlockAll(ctx, set) }}, nil
}

// lockEnv is CMD's environment for one lock or slot.
func lockEnv(name string, token int64) []string {
	return []string{"ZKGATE_LOCK=" + name, "ZKGATE_FENCING_TOKEN=" + strconv.FormatInt(token, 10)}
}

// stopCause is why CMD was stopped: why (the lease's or leadership's
// end), else ctx's cause, else a keepalive not confirmed in time.
func stopCause(ctx context.Context, why error) error {
	if why == nil {
		why = context.Cause(ctx)
	}
	if why == nil {
		why = errUnconfirmed
	}
	return why
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

// namesAndCommand checks the arguments of lock and elect: one name of
// kind (several when many: a set of locks, each named once), then -- and
// the command to run.
func namesAndCommand(kind string, many bool, pos, argv []string) ([]string, error) {
	switch {
	case len(pos) == 0 && many:
		return nil, usageErr("give one %s name or more, then -- and the command", kind)
	case len(pos) != 1 && !many:
		return nil, usageErr("give one %s name, then -- and the command", kind)
	}
	for i, n := range pos {
		if err := validName(kind, n); err != nil {
			return nil, err
		}
		if slices.Contains(pos[:i], n) {
			return nil, usageErr("%s %q is named twice", kind, n)
		}
	}
	if len(argv) == 0 {
		return nil, usageErr("give the command to run after --")
	}
	return pos, nil
}

// runHelp is what the help of the flags lock and elect share says of
// each command's subject, and the default of its --wait.
type runHelp struct {
	wait                             time.Duration
	waitHelp, ttl, holder, lockDelay string
}

// register adds to cmd, lock or elect, the flags they share, and run.
func (o *runOptions) register(cmd *cobra.Command, a *app, run func(*cobra.Command, *app, []string) error, h runHelp) {
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return run(cmd, a, args) }
	o.gw.register(cmd, a)
	fs := cmd.Flags()
	fs.DurationVar(&o.wait, "wait", h.wait, h.waitHelp)
	fs.DurationVar(&o.ttl, "ttl", defaultTTL, "the lease's TTL: "+h.ttl)
	fs.DurationVar(&o.grace, "kill-grace", defaultKillGrace, "between SIGTERM and SIGKILL, which lands before the lease's deadline "+
		"(unset: less than 2s when the gateway's deadlines are shorter, so that it fits)")
	fs.StringVar(&o.holder, "holder", "", "how other clients see "+h.holder+" (default: host[pid] CMD)")
	fs.DurationVar(&o.lockDelay, "lock-delay", 0, h.lockDelay+" (default: the gateway's --lock-delay)")
}

// runStart is what lock and elect hold while they wait and run CMD.
type runStart struct {
	name  string   // the first of names
	names []string // lock's several, a set
	argv  []string
	relay *signalRelay
	c     *client.Client
	lease *client.Lease
}

// start checks the arguments of lock or elect (one name of kind, several
// for lock, then CMD) and their flags (own: the command's own checks, of
// the names, first), then relays signals and makes the lease CMD runs on;
// end undoes both.
func (o *runOptions) start(cmd *cobra.Command, a *app, kind string, args []string, own func(names []string) error) (*runStart, error) {
	pos, argv := argsAndCommand(cmd, args)
	names, err := namesAndCommand(kind, kind == "lock", pos, argv)
	if err != nil {
		return nil, err
	}
	if err := own(names); err != nil {
		return nil, err
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	relay := newSignalRelay()
	c, lease, err := o.lease(cmd.Context(), cmd.Flags().Changed("lock-delay"), cmd.Flags().Changed("kill-grace"), argv)
	if err != nil {
		relay.stop()
		return nil, err
	}
	return &runStart{name: names[0], names: names, argv: argv, relay: relay, c: c, lease: lease}, nil
}

// end revokes the lease, then stops relaying signals.
func (s *runStart) end(stderr io.Writer) {
	revoke(s.lease, stderr)
	s.relay.stop()
}

// check checks the durations that lock and elect share.
func (o *runOptions) check() error {
	for n, d := range map[string]time.Duration{"wait": o.wait, "kill-grace": o.grace, "lock-delay": o.lockDelay} {
		if err := notNegative(n, d); err != nil {
			return err
		}
	}
	if o.ttl < time.Second {
		return usageErr("--ttl %s is below the minimum of 1s", o.ttl)
	}
	return nil
}

// The defaults of lock and elect suit the gateway's default
// --session-timeout of 10s, under which a lease's deadline is 6.2 to 9.5s
// ahead after each keepalive. A TTL of 10s frees what a dead zkgate held
// about as soon as a dead gateway's session would; a longer one would
// extend no deadline. A grace of 2s leaves a keepalive, due a third of the
// way to the deadline, about 2s (at least) to get through before SIGTERM.
const (
	defaultTTL       = 10 * time.Second
	defaultKillGrace = 2 * time.Second
)

// killMargin is how long before the lease's deadline SIGKILL is sent: time
// for zkgate's timer to fire and the kill to land.
const killMargin = 250 * time.Millisecond

// errUnconfirmed is why CMD was stopped while the lease still lived.
var errUnconfirmed = errors.New("no keepalive was confirmed in time: the lease's deadline came within --kill-grace")

// stopBy is closed when CMD must get SIGTERM for SIGKILL, grace later, to
// land before the lease's deadline: grace and killMargin before it,
// following every keepalive that moves it (and the lease's end).
func stopBy(lease *client.Lease, grace time.Duration) <-chan struct{} {
	return lease.Ending(grace + killMargin)
}

// graceFits refuses a --kill-grace that leaves no room for a keepalive in
// the first deadline the gateway gave, window after the lease was asked
// for: SIGTERM, grace and killMargin before the deadline, would come before
// the keepalive due a third of the way there, every time.
func graceFits(grace, window time.Duration) error {
	most := window*2/3 - killMargin
	if grace < most {
		return nil
	}
	return usageErr("--kill-grace %s does not fit in the %s the gateway promised for the lease: CMD would get SIGTERM "+
		"before a keepalive could extend it; give less than %s (the promise is about 0.6 to 0.95 of the gateway's --session-timeout)",
		grace, window.Round(10*time.Millisecond), max(most, 0).Round(10*time.Millisecond))
}

// fitGrace is the grace that lock and elect use in a first deadline of
// window: the one given (graceSet), refused when it does not fit (see
// graceFits); unset, the default, or half of what fits when the gateway's
// deadlines are too short for it (a gateway with a short
// --session-timeout): the user did not ask for 2s.
func fitGrace(grace, window time.Duration, graceSet bool) (time.Duration, error) {
	err := graceFits(grace, window)
	if err == nil || graceSet {
		return grace, err
	}
	if most := window*2/3 - killMargin; most > 0 {
		return (most / 2).Truncate(10 * time.Millisecond), nil
	}
	return grace, err
}

// lease takes the lease that the command argv of lock or elect runs
// under, kept alive in the background; a holder "" names it after argv;
// lockDelaySet asks for the lockDelay given rather than the gateway's
// default. It refuses a grace given (graceSet) that does not fit in the
// lease's first deadline, and makes the default one fit (see fitGrace).
func (o *runOptions) lease(ctx context.Context, lockDelaySet, graceSet bool, argv []string) (*client.Client, *client.Lease, error) {
	c, err := o.gw.client()
	if err != nil {
		return nil, nil, err
	}
	holder := o.holder
	if holder == "" {
		holder = defaultHolder(argv)
	}
	var opts []client.LeaseOption
	if lockDelaySet {
		opts = append(opts, client.LockDelay(o.lockDelay))
	}
	asked := time.Now()
	lease, err := c.Grant(ctx, o.ttl, holder, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("lease: %w", err)
	}
	if o.grace, err = fitGrace(o.grace, lease.Deadline().Sub(asked), graceSet); err != nil {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = lease.Revoke(rctx)
		return nil, nil, err
	}
	return c, lease, nil
}

// letGo gives up what with giveUp (a release or a resign, named by verb),
// bounded, unless the lease has ended: a failure is only told on stderr,
// as the lease's revoke follows.
func letGo(lease *client.Lease, stderr io.Writer, verb, what string, giveUp func(context.Context) error) {
	if lease.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := giveUp(ctx); err != nil && !errors.Is(err, client.ErrLeaseExpired) {
		fmt.Fprintf(stderr, "zkgate: %s %s: %s\n", verb, what, oneLine(err.Error()))
	}
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
