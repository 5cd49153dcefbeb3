package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/zkgate/zkgate/client"
)

// newCounterCommand is `zkgate counter get|set|add|delete`, for scripts.
func newCounterCommand(a *app) *cobra.Command {
	cmd := newGroupCommand("counter", "read, set and add to shared counters, for scripts",
		`Shared integers, one znode each. get, set and add print the value (add: the value
it made) on stdout, alone on its line. --format names how the node holds it: decimal
(the default; kazoo's Counter), int32 (Curator's SharedCount) or int64 (Curator's
DistributedAtomicLong); bytes of another format fail, never print a wrong number.
Flags go before NAME, so that a negative VALUE or DELTA is not read as one.`)
	cmd.AddCommand(
		newCounterVerbCommand(a, "get", "get NAME", "print the value of the counter NAME (0 if it does not exist)", 1),
		newCounterVerbCommand(a, "set", "set [--version V] NAME VALUE",
			"set the counter NAME to VALUE; with --version, only if it is at that version (-1: does not exist)", 2),
		newCounterVerbCommand(a, "add", "add NAME DELTA", "add DELTA (negative: subtract) to the counter NAME, atomically, and print the value made", 2),
		newCounterVerbCommand(a, "delete", "delete NAME", "delete the counter NAME", 1),
	)
	return cmd
}

func newCounterVerbCommand(a *app, verb, use, short string, nargs int) *cobra.Command {
	var gw gatewayFlags
	var format string
	var version int32
	what := "one counter name"
	if nargs == 2 {
		what = "a counter name and a number"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(nargs, what),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := validName("counter", name); err != nil {
				return err
			}
			var n int64
			if nargs == 2 {
				var err error
				if n, err = strconv.ParseInt(args[1], 10, 64); err != nil {
					return usageErr("counter %s: %q is not an integer", verb, args[1])
				}
			}
			c, err := gw.client()
			if err != nil {
				return err
			}
			f := client.CounterFormat(format)
			ctx := cmd.Context()
			var st client.CounterState
			switch verb {
			case "get":
				st, err = c.Counter(ctx, name, f)
			case "set":
				if cmd.Flags().Changed("version") {
					st, err = c.CompareAndSetCounter(ctx, name, f, n, version)
				} else {
					st, err = c.SetCounter(ctx, name, f, n)
				}
			case "add":
				st, err = c.AddCounter(ctx, name, f, n)
			default:
				err = c.DeleteCounter(ctx, name)
			}
			if err != nil {
				return counterFailure(name, err)
			}
			if verb != "delete" {
				fmt.Fprintln(cmd.OutOrStdout(), st.Value)
			}
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false)
	gw.register(cmd, a)
	if verb != "delete" {
		cmd.Flags().StringVar(&format, "format", "decimal", "how the counter's node holds its value: decimal, int32 or int64")
	}
	if verb == "set" {
		cmd.Flags().Int32Var(&version, "version", 0, "compare-and-set: write only if the counter is at this version (-1: only if it does not exist)")
	}
	return cmd
}

// counterFailure is the error of a counter command: a version mismatch
// names the value and version the counter is at, for the script to retry.
func counterFailure(name string, err error) error {
	var e *client.Error
	if errors.Is(err, client.ErrVersionMismatch) && errors.As(err, &e) {
		var value int64
		var version int32
		_, _ = e.Decode("value", &value)
		_, _ = e.Decode("version", &version)
		return fmt.Errorf("counter %q is at version %d (value %d): %w", name, version, value, err)
	}
	return fmt.Errorf("counter %q: %w", name, err)
}
