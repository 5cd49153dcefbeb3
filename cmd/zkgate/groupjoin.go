//go:build unix

package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

const groupJoinLong = `Runs CMD while a member of the group NAME, on a lease kept alive meanwhile;
CMD has ZKGATE_GROUP, ZKGATE_MEMBER, ZKGATE_LEASE and ZKGATE_URL in its
environment. It leaves and revokes when CMD ends, and exits with CMD's exit
code; if zkgate dies, the member leaves once the lease's TTL has passed.

` + runLong

// groupJoinOptions are the flags of zkgate group join.
type groupJoinOptions struct {
	runOptions
	member, value string
}

// newGroupJoinCommand is `zkgate group join`: CMD runs while this process
// is a member of the group NAME, as zkgate lock holds a lock.
func newGroupJoinCommand(a *app) *cobra.Command {
	var o groupJoinOptions
	cmd := &cobra.Command{
		Use:     "join [flags] NAME -- CMD [ARGS...]",
		Short:   "run CMD while a member of the group NAME",
		Long:    groupJoinLong,
		Example: `  zkgate group join --member "$(hostname)" --value 10.0.0.7:8080 workers -- ./serve.sh`,
	}
	o.register(cmd, a, o.run, runHelp{
		waitHelp: "unused: a join waits for no one",
		ttl:      "how soon the member leaves if zkgate dies",
		holder:   "this member",
		// Nothing is granted to wait for the end of a member.
		lockDelay: "unused by groups",
	})
	_ = cmd.Flags().MarkHidden("wait")
	_ = cmd.Flags().MarkHidden("lock-delay")
	fs := cmd.Flags()
	fs.StringVar(&o.member, "member", "", "the member's id, unique in the group (default: the lease's id)")
	fs.StringVar(&o.value, "value", "", "the member's data, that every member sees (an address, say)")
	return cmd
}

func (o *groupJoinOptions) run(cmd *cobra.Command, a *app, args []string) error {
	ctx, stdout, stderr := cmd.Context(), a.stdout, a.stderr
	s, err := o.start(cmd, a, "group", args, func([]string) error {
		if o.member != "" {
			return validName("member", o.member)
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer s.end(stderr)
	name, argv, relay, c, lease := s.name, s.argv, s.relay, s.c, s.lease

	what := fmt.Sprintf("group %q", name)
	wctx, stopWait := relay.waitCtx(ctx)
	st, err := lease.Join(wctx, name, o.member, o.value)
	if sig := stopWait(); sig != nil {
		return exitWith(sig.exitCode(), "%s while joining %s", sig, what)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	member := st.Member
	env := []string{"ZKGATE_GROUP=" + name, "ZKGATE_MEMBER=" + member, "ZKGATE_LEASE=" + lease.ID(), "ZKGATE_URL=" + c.URL()}
	ch := &child{argv: argv, env: env, stdout: stdout, stderr: stderr, grace: o.grace}
	out, err := ch.run(ctx, relay, stopBy(lease, o.grace))
	if err != nil {
		return err
	}
	if out.stopped {
		return exitWith(exitLost, "the membership of %s lost while %s ran (%v): it was stopped", what, argv[0], stopCause(ctx, lease.Err()))
	}
	letGo(lease, stderr, "leave", what, func(ctx context.Context) error { return lease.LeaveGroup(ctx, name, member) })
	return &exitStatus{code: out.code}
}
