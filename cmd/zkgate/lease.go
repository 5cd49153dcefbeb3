package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// newLeaseCommand is `zkgate lease grant|keepalive|revoke`: leases for
// scripts that keep them alive themselves (queue claims, say).
func newLeaseCommand(a *app) *cobra.Command {
	cmd := newGroupCommand("lease", "make, keep alive and revoke leases, for scripts",
		"Leases for scripts that keep them alive themselves: everything a client holds\n"+
			"is bound to a lease, and goes when it is revoked or expires.")
	cmd.AddCommand(newLeaseGrantCommand(a), newLeaseIDCommand(a, "keepalive", "extend the lease ID by its TTL"),
		newLeaseIDCommand(a, "revoke", "end the lease ID, and what it holds"))
	return cmd
}

func newLeaseGrantCommand(a *app) *cobra.Command {
	var gw gatewayFlags
	var ttl time.Duration
	var holder string
	cmd := &cobra.Command{
		Use:   "grant [--ttl 60s] [--holder H]",
		Short: "make a lease and print its id",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if ttl < time.Second {
				return usageErr("--ttl %s is below the minimum of 1s", ttl)
			}
			c, err := gw.client()
			if err != nil {
				return err
			}
			info, err := c.CreateLease(cmd.Context(), ttl, holder)
			if err != nil {
				return fmt.Errorf("lease: %w", err)
			}
			fmt.Fprintln(a.stdout, info.ID)
			return nil
		},
	}
	gw.register(cmd, a)
	cmd.Flags().DurationVar(&ttl, "ttl", time.Minute, "the lease's TTL (1s to the gateway's --max-ttl)")
	cmd.Flags().StringVar(&holder, "holder", "", "how other clients see this lease's holder")
	return cmd
}

// newLeaseIDCommand is zkgate lease keepalive ID, or revoke ID.
func newLeaseIDCommand(a *app, verb, short string) *cobra.Command {
	var gw gatewayFlags
	cmd := &cobra.Command{
		Use:   verb + " ID",
		Short: short,
		Args:  exactArgs(1, "one lease id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := gw.client()
			if err != nil {
				return err
			}
			id := args[0]
			if verb == "keepalive" {
				_, err = c.KeepAlive(cmd.Context(), id)
			} else {
				err = c.RevokeLease(cmd.Context(), id)
			}
			if err != nil {
				return fmt.Errorf("lease %s: %w", id, err)
			}
			return nil
		},
	}
	gw.register(cmd, a)
	return cmd
}
