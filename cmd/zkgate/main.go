// Command zkgate is the coordination gateway: ZooKeeper's recipes over HTTP,
// and its command-line client.
//
//	zkgate serve [flags]
//	zkgate lock NAME -- CMD [ARGS...]
//	zkgate elect NAME -- CMD [ARGS...]
//	zkgate status [--limit 50] [--json]
//	zkgate queue put|take|claim|ack|nack NAME ...
//	zkgate barrier raise|lower|wait NAME
//	zkgate counter get|set|add|delete NAME ...
//	zkgate lease grant|keepalive|revoke ...
//	zkgate token new ...
//	zkgate peer-secret new
//	zkgate completion bash|zsh|fish
//
// Bare zkgate prints the help (zkgate help).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/zkgate/zkgate/server"
)

func main() {
	// Before anything else: the watchdog of lock and elect ignores the
	// signals that main's context would catch.
	if code, ok := watchdogMode(os.Args); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// run is the whole program, so tests can start it as it runs in production.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	a := &app{getenv: getenv, stdout: stdout, stderr: stderr}
	root := newRootCommand(a)
	root.SetArgs(args[1:])
	cmd, err := root.ExecuteContextC(ctx)
	var usage *server.UsageError
	if errors.As(err, &usage) && !strings.Contains(usage.Msg, "--help") && cmd != nil {
		return usageErr("%s (see %s --help)", usage.Msg, cmd.CommandPath())
	}
	return a.explain(err)
}

// Command groups of zkgate help.
const (
	gatewayGroup = "gateway"
	clientGroup  = "client"
)

const rootLong = `zkgate serves ZooKeeper's coordination recipes (leases, locks, read/write
locks, semaphores, elections, barriers, queues) over HTTP, with a live
dashboard (zkgate serve), and is the command-line client of that API.

The client commands talk to the gateway at --gateway URL, default
$ZKGATE_URL, else http://127.0.0.1:8080 (host:port alone means http://),
with the bearer token --token T, default $ZKGATE_TOKEN; -q (--quiet)
leaves only errors on stderr.`

// rootUsageTail ends cobra's usage template with the exit codes, on
// zkgate help alone.
const rootUsageTail = `{{if not .HasParent}}
` + exitCodesHelp + `
{{end}}`

// newRootCommand is zkgate and every command under it.
func newRootCommand(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:     "zkgate",
		Short:   "ZooKeeper's coordination recipes over HTTP: the gateway and its command-line client",
		Long:    rootLong,
		Version: server.BuildInfo(),
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return cmd.Help()
		},
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true,
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	root.SetUsageTemplate(root.UsageTemplate() + rootUsageTail)
	root.AddGroup(&cobra.Group{ID: gatewayGroup, Title: "The gateway:"},
		&cobra.Group{ID: clientGroup, Title: "The client (each takes --gateway URL, --token T and -q):"})
	root.SetHelpCommandGroupID(gatewayGroup)
	root.SetCompletionCommandGroupID(gatewayGroup)

	for _, c := range []*cobra.Command{newServeCommand(a), newTokenCommand(a), newPeerSecretCommand(a), newVersionCommand(a)} {
		c.GroupID = gatewayGroup
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newLockCommand(a), newElectCommand(a), newStatusCommand(a),
		newQueueCommand(a), newBarrierCommand(a), newLeaseCommand(a),
		newGroupsCommand(a),
		newCounterCommand(a),
	} {
		c.GroupID = clientGroup
		root.AddCommand(c)
	}
	root.AddCommand(newManCommand())
	return root
}

// newGroupCommand is a command of commands, such as zkgate queue: alone
// it prints its help; with an unknown command, a usage error.
func newGroupCommand(use, short, long string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return cmd.Help()
		},
	}
}

// unknownCommand is the one line of a command that cmd does not have,
// with the nearest ones it has.
func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	cmd.SuggestionsMinimumDistance = 2
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf(": did you mean %s?", strings.Join(s, " or "))
	}
	return usageErr("%s (see %s --help)", msg, cmd.CommandPath())
}

// flagError makes a bad flag a usage error of one line; a flag of serve
// given to zkgate alone (which started a gateway before serve was needed)
// says where it goes.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if !cmd.HasParent() {
		if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok && serveHasFlag(name) {
			return usageErr("%s: the gateway's flags follow serve, as in zkgate serve --%s (see zkgate serve --help)", msg, name)
		}
	}
	if strings.HasPrefix(msg, "unknown shorthand flag") {
		// -wait: flags take two dashes, as in kubectl.
		msg += "; long flags take two dashes (--name)"
	}
	return usageErr("%s (see %s --help)", msg, cmd.CommandPath())
}

func newVersionCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "the version, and the commit and build date of a release (also zkgate --version)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(a.stdout, server.BuildInfo())
			return nil
		},
	}
}

// noArgs refuses any argument, as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErr("unexpected argument %q", args[0])
	}
	return nil
}

// exactArgs wants n arguments, what names them.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErr("%s takes %s, got %d argument(s)", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}
