package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

const leaseUsage = "zkgate lease grant [--ttl 60s] [--holder H] (prints the id), zkgate lease keepalive ID, zkgate lease revoke ID"

// leaseCommand is `zkgate lease grant|keepalive|revoke`: leases for
// scripts that keep them alive themselves (queue claims, say).
func leaseCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageErr("usage: %s", leaseUsage)
	}
	verb, args := args[0], args[1:]
	fs := newFlags("lease " + verb)
	var gw gatewayFlags
	gw.register(fs, getenv)
	ttl, holder := new(time.Duration), new(string)
	want := 1
	switch verb {
	case "grant":
		fs.DurationVar(ttl, "ttl", time.Minute, "the lease's TTL (1s to the gateway's --max-ttl)")
		fs.StringVar(holder, "holder", "", "how other clients see this lease's holder")
		want = 0
	case "keepalive", "revoke":
	default:
		return usageErr("unknown lease command %q (usage: %s)", verb, leaseUsage)
	}
	pos, _, err := parseArgs(fs, args, false, leaseUsage, stderr)
	if err != nil {
		return err
	}
	if len(pos) != want {
		return usageErr("lease %s takes %d argument(s) (usage: %s)", verb, want, leaseUsage)
	}
	c, err := gw.client()
	if err != nil {
		return err
	}
	switch verb {
	case "grant":
		if *ttl < time.Second {
			return usageErr("--ttl %s is below the minimum of 1s", *ttl)
		}
		info, err := c.CreateLease(ctx, *ttl, *holder)
		if err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		fmt.Fprintln(stdout, info.ID)
	case "keepalive":
		if _, err := c.KeepAlive(ctx, pos[0]); err != nil {
			return fmt.Errorf("lease %s: %w", pos[0], err)
		}
	case "revoke":
		if err := c.RevokeLease(ctx, pos[0]); err != nil {
			return fmt.Errorf("lease %s: %w", pos[0], err)
		}
	}
	return nil
}
