package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkgate/zkgate/client"
)

// newBarrierCommand is `zkgate barrier raise|lower|wait`, for scripts.
func newBarrierCommand(a *app) *cobra.Command {
	cmd := newGroupCommand("barrier", "raise, lower and wait for barriers, for scripts",
		"A barrier holds back everyone who waits for it until it is lowered.")
	for _, verb := range []struct{ name, short string }{
		{"raise", "raise the barrier NAME"},
		{"lower", "lower the barrier NAME: every wait for it ends"},
		{"wait", "wait until the barrier NAME is lowered (exit 75 if it is still up after --wait)"},
	} {
		cmd.AddCommand(newBarrierVerbCommand(a, verb.name, verb.short))
	}
	return cmd
}

func newBarrierVerbCommand(a *app, verb, short string) *cobra.Command {
	var gw gatewayFlags
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  exactArgs(1, "one barrier name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := validName("barrier", name); err != nil {
				return err
			}
			if err := notNegative("wait", wait); err != nil {
				return err
			}
			c, err := gw.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			switch verb {
			case "raise":
				_, err = c.RaiseBarrier(ctx, name)
			case "lower":
				err = c.LowerBarrier(ctx, name)
			default:
				err = c.WaitBarrier(ctx, name, wait)
				if errors.Is(err, client.ErrTimeout) {
					return exitWith(exitWaited, "barrier %q is still up after %s", name, wait)
				}
			}
			if err != nil {
				return fmt.Errorf("barrier %q: %w", name, err)
			}
			return nil
		},
	}
	gw.register(cmd, a)
	if verb == "wait" {
		cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long to wait for the barrier to be lowered; 0 answers at once")
	}
	return cmd
}
