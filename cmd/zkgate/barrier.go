package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/zkgate/zkgate/client"
)

const barrierUsage = "zkgate barrier raise|lower NAME, or zkgate barrier wait [--wait 30s] NAME (exit 75 if still up)"

// barrierCommand is `zkgate barrier raise|lower|wait`, for scripts.
func barrierCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageErr("usage: %s", barrierUsage)
	}
	verb, args := args[0], args[1:]
	fs := newFlags("barrier " + verb)
	var gw gatewayFlags
	gw.register(fs, getenv)
	wait := new(time.Duration)
	switch verb {
	case "raise", "lower":
	case "wait":
		fs.DurationVar(wait, "wait", 30*time.Second, "how long to wait for the barrier to be lowered; 0 answers at once")
	default:
		return usageErr("unknown barrier command %q (usage: %s)", verb, barrierUsage)
	}
	pos, _, err := parseArgs(fs, args, false, barrierUsage, stderr)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("barrier %s takes one name (usage: %s)", verb, barrierUsage)
	}
	name := pos[0]
	if err := validName("barrier", name); err != nil {
		return err
	}
	if err := notNegative("wait", *wait); err != nil {
		return err
	}
	c, err := gw.client()
	if err != nil {
		return err
	}
	switch verb {
	case "raise":
		_, err = c.RaiseBarrier(ctx, name)
	case "lower":
		err = c.LowerBarrier(ctx, name)
	default:
		err = c.WaitBarrier(ctx, name, *wait)
		if errors.Is(err, client.ErrTimeout) {
			return exitWith(exitWaited, "barrier %q is still up after %s", name, *wait)
		}
	}
	if err != nil {
		return fmt.Errorf("barrier %q: %w", name, err)
	}
	return nil
}
