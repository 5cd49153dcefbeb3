//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkgate/zkgate/client"
)

// campaignRound is the wait of each campaign call while zkgate elect waits
// to lead; the candidacy stays between calls, so its place in line too.
const campaignRound = 30 * time.Second

const electLong = `Runs CMD only while leading the election NAME, on a lease kept alive
meanwhile; CMD has ZKGATE_ELECTION, ZKGATE_LEASE, ZKGATE_FENCING_TOKEN and
ZKGATE_URL in its environment. It resigns and revokes when CMD ends, and
exits with CMD's exit code; CMD is stopped as well when someone else leads.

` + runLong

// electOptions are the flags of zkgate elect.
type electOptions struct {
	runOptions
	value string
}

// newElectCommand is `zkgate elect`: CMD runs only while this process
// leads the election NAME.
func newElectCommand(a *app) *cobra.Command {
	var o electOptions
	cmd := &cobra.Command{
		Use:     "elect [flags] NAME -- CMD [ARGS...]",
		Short:   "run CMD only while leading the election NAME",
		Long:    electLong,
		Example: `  zkgate elect --value "$(hostname):8080" scheduler -- ./scheduler`,
	}
	o.register(cmd, a, o.run, runHelp{
		waitHelp:  "give up if not elected within this long (exit 75); 0 waits as long as it takes",
		ttl:       "how soon another candidate leads if zkgate dies",
		holder:    "this candidate",
		lockDelay: "if the lease ends without resigning, nobody else leads for this long",
	})
	cmd.Flags().StringVar(&o.value, "value", "", "the value the leader shows to everyone (an address, say)")
	return cmd
}

func (o *electOptions) run(cmd *cobra.Command, a *app, args []string) error {
	ctx, stdout, stderr := cmd.Context(), a.stdout, a.stderr
	s, err := o.start(cmd, a, "election", args, func([]string) error { return nil })
	if err != nil {
		return err
	}
	defer s.end(stderr)
	name, argv, relay, c, lease := s.name, s.argv, s.relay, s.c, s.lease
	what := fmt.Sprintf("election %q", name)

	wctx, stopWait := relay.waitCtx(ctx)
	camp, err := campaign(wctx, lease, name, o.value, o.wait)
	if sig := stopWait(); sig != nil {
		return exitWith(sig.exitCode(), "%s while waiting to lead %s", sig, what)
	}
	if err != nil {
		return err
	}

	// Follow the election: CMD must stop when someone else leads, or in
	// time for the lease's deadline.
	mctx, stopMonitor := context.WithCancel(context.Background())
	lost, monitored := make(chan struct{}), make(chan struct{})
	var why error
	go func() {
		defer close(monitored)
		why = followLeadership(mctx, c, lease, stopBy(lease, o.grace), name)
		if why != nil {
			close(lost)
		}
	}()
	env := []string{"ZKGATE_ELECTION=" + name, "ZKGATE_LEASE=" + lease.ID(),
		"ZKGATE_FENCING_TOKEN=" + strconv.FormatInt(camp.Token, 10), "ZKGATE_URL=" + c.URL()}
	ch := &child{argv: argv, env: env, stdout: stdout, stderr: stderr, grace: o.grace}
	out, runErr := ch.run(ctx, relay, lost)
	stopMonitor()
	<-monitored
	if runErr != nil {
		return runErr
	}
	if out.stopped {
		return exitWith(exitLost, "leadership of %s lost while %s ran (%v): it was stopped", what, argv[0], stopCause(ctx, why))
	}
	letGo(lease, stderr, "resign", what, func(ctx context.Context) error { return lease.Resign(ctx, name) })
	return &exitStatus{code: out.code}
}

// campaign waits to lead, in rounds, for at most wait (0: no limit).
func campaign(ctx context.Context, lease *client.Lease, name, value string, wait time.Duration) (*client.Campaign, error) {
	deadline := time.Now().Add(wait)
	for {
		round := campaignRound
		if wait > 0 {
			round = min(round, max(time.Until(deadline), 0))
		}
		c, err := lease.Campaign(ctx, name, value, round)
		if err != nil {
			return nil, fmt.Errorf("election %q: %w", name, err)
		}
		if c.Elected {
			return c, nil
		}
		if wait > 0 && !time.Now().Before(deadline) {
			leader := "nobody"
			if c.Leader != nil {
				leader = strconv.Quote(c.Leader.Holder)
			}
			return nil, exitWith(exitWaited, "election %q: not elected within %s: %s leads, this candidate is at position %d (1 is next)",
				name, wait, leader, c.Position)
		}
	}
}

// followLeadership returns nil when ctx ends while lease still leads the
// election, or why the leadership was lost (or is to be given up: ending
// is closed when CMD must stop for the lease's deadline). The deadline is
// kept whatever the watch does: a read of the election that hangs on a
// frozen gateway must not hold CMD past it.
func followLeadership(ctx context.Context, c *client.Client, lease *client.Lease, ending <-chan struct{}, name string) error {
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watched := make(chan error, 1)
	go func() { watched <- watchLeadership(wctx, c, lease, name) }()
	// stop ends the watch, and waits for it, before answering why.
	stop := func(why error) error {
		stopWatch()
		<-watched
		return why
	}
	select {
	case <-ctx.Done():
		return stop(nil)
	case <-ending:
		if err := lease.Err(); err != nil {
			return stop(err)
		}
		return stop(errUnconfirmed)
	case err := <-watched:
		return err
	}
}

// watchLeadership follows the election until ctx ends (nil) or lease no
// longer leads it (why).
func watchLeadership(ctx context.Context, c *client.Client, lease *client.Lease, name string) error {
	w, err := c.WatchElection(ctx, name)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("cannot follow the election: %w", err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case st, ok := <-w.C:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("cannot follow the election: %w", w.Err())
			}
			switch {
			case st.Leader == nil:
				return errors.New("the election has no leader")
			case st.Leader.Lease != lease.ID():
				return fmt.Errorf("%q leads now", st.Leader.Holder)
			}
		}
	}
}
