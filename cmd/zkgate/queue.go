package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/zkgate/zkgate/client"
)

// itemJSON is an item as `queue take --json` and `queue claim --json`
// print it: the bytes as text when they are UTF-8, else in base64.
type itemJSON struct {
	Queue      string `json:"queue"`
	ID         string `json:"id"`
	Priority   int    `json:"priority"`
	Lease      string `json:"lease,omitempty"`
	Data       string `json:"data,omitempty"`
	DataBase64 string `json:"data_base64,omitempty"`
}

// claimHolder is the holder label of the lease that zkgate queue claim
// makes when not given one: ack and nack know such a lease by it, and
// revoke it, since it was made for that one claim.
func claimHolder(queue string) string {
	return defaultHolder([]string{"zkgate queue claim", queue})
}

// madeByClaim reports whether a lease's holder label is claimHolder's.
var madeByClaim = regexp.MustCompile(`^\S*\[[0-9]+\] zkgate queue claim `).MatchString

// newQueueCommand is `zkgate queue put|take|claim|ack|nack`, for scripts.
func newQueueCommand(a *app) *cobra.Command {
	cmd := newGroupCommand("queue", "put items in queues, take or claim them, ack or nack claims, for scripts",
		`Queues of items (raw bytes, lower priority first). take removes the next item at
once; claim holds it for a lease until ack removes it or nack (or the lease's end)
puts it back, so that an item is handled at least once.`)
	cmd.AddCommand(newQueuePutCommand(a), newQueueTakeCommand(a, false), newQueueTakeCommand(a, true),
		newQueueSettleCommand(a, "ack"), newQueueSettleCommand(a, "nack"))
	return cmd
}

func newQueuePutCommand(a *app) *cobra.Command {
	var gw gatewayFlags
	var priority int
	var delay time.Duration
	cmd := &cobra.Command{
		Use:   "put [--priority 100] [--delay 30s] NAME [DATA]",
		Short: "put DATA (no DATA: stdin) in the queue NAME, and print the item's id",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErr("queue put takes NAME and maybe DATA, got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := validName("queue", name); err != nil {
				return err
			}
			c, err := gw.client()
			if err != nil {
				return err
			}
			var data []byte
			if len(args) == 2 {
				data = []byte(args[1])
			} else if data, err = io.ReadAll(cmd.InOrStdin()); err != nil {
				return fmt.Errorf("reading the item from stdin: %v", err)
			}
			if delay < 0 {
				return usageErr("--delay must not be negative, got %s", delay)
			}
			info, err := c.ProduceWith(cmd.Context(), name, data, client.ProduceOptions{Priority: priority, Delay: delay})
			if err != nil {
				return fmt.Errorf("queue %q: %w", name, err)
			}
			fmt.Fprintln(a.stdout, info.ID)
			return nil
		},
	}
	gw.register(cmd, a)
	cmd.Flags().IntVar(&priority, "priority", client.DefaultPriority, "0 to 999, lower is served first")
	cmd.Flags().DurationVar(&delay, "delay", 0, "serve the item only after this long (at most 720h); its id is then a due-... id until it is due")
	return cmd
}

// queueTakeOptions are the flags of zkgate queue take and claim.
type queueTakeOptions struct {
	gw       gatewayFlags
	wait     time.Duration
	ttl      time.Duration // claim's: the TTL of a lease made for the claim
	asJSON   bool
	leaseID  string // claim's: the lease to claim for ("": one made for it)
	claiming bool
}

// newQueueTakeCommand is zkgate queue take NAME, or with claim, zkgate
// queue claim NAME.
func newQueueTakeCommand(a *app, claim bool) *cobra.Command {
	o := &queueTakeOptions{claiming: claim}
	cmd := &cobra.Command{
		Use:   "take [--wait 30s] [--json] NAME",
		Short: "take the next item of the queue NAME: its bytes on stdout (exit 75 if the queue stays empty)",
		Args:  exactArgs(1, "one queue name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), a, args[0])
		},
	}
	o.gw.register(cmd, a)
	cmd.Flags().DurationVar(&o.wait, "wait", 30*time.Second, "how long to wait for an item; 0 answers at once")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the item as JSON (queue, id, priority, lease, data) instead of its bytes")
	if claim {
		cmd.Use = "claim [--wait 30s] [--lease ID | --ttl 5m] [--json] NAME"
		cmd.Short = "claim the next item of the queue NAME for a lease, until ack or nack (exit 75 if the queue stays empty)"
		cmd.Long = `Claims the next item of the queue NAME for a lease: its bytes on stdout, and on
stderr its id and the lease's, with the ack to run (--json: all of them in the
JSON, on stdout). zkgate queue ack removes the item; nack, or the lease's end,
puts it back.

Without --lease, claim makes a lease of --ttl for this one claim, labelled
"HOST[PID] zkgate queue claim NAME": the ack or nack of the claim revokes it
(--revoke=false keeps it), so that it does not linger for its TTL; if nothing
is claimed, it is revoked at once. For several claims on one lease, make it
with zkgate lease grant and give it with --lease.`
		cmd.Flags().StringVar(&o.leaseID, "lease", "", "claim for this lease (default: a new lease of --ttl, printed on stderr or in the JSON)")
		cmd.Flags().DurationVar(&o.ttl, "ttl", 5*time.Minute, "the TTL of the lease made for the claim: ack or nack before it ends")
	}
	return cmd
}

// run takes or claims the next item of the queue name and prints it.
func (o *queueTakeOptions) run(ctx context.Context, a *app, name string) error {
	if err := validName("queue", name); err != nil {
		return err
	}
	if err := notNegative("wait", o.wait); err != nil {
		return err
	}
	if o.claiming && o.leaseID == "" && o.ttl < time.Second {
		return usageErr("--ttl %s is below the minimum of 1s", o.ttl)
	}
	c, err := o.gw.client()
	if err != nil {
		return err
	}
	if !o.claiming {
		it, err := c.Take(ctx, name, o.wait)
		if err != nil {
			return takeFailed(name, err)
		}
		return printItem(a.stdout, it, "", o.asJSON)
	}
	id := o.leaseID
	if id == "" {
		info, err := c.CreateLease(ctx, o.ttl, claimHolder(name))
		if err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		id = info.ID
	}
	it, err := c.Lease(id).Claim(ctx, name, o.wait)
	if err != nil {
		if o.leaseID == "" {
			// Nothing claimed: the lease made for the claim goes.
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = c.RevokeLease(rctx, id)
			cancel()
		}
		return takeFailed(name, err)
	}
	if !o.asJSON {
		made := ""
		if o.leaseID == "" {
			made = fmt.Sprintf(" (made for it, TTL %s: ack or nack revokes it)", o.ttl)
		}
		o.gw.info("claimed %s for lease %s%s: zkgate queue ack --lease %s %s %s", it.ID, id, made, id, name, it.ID)
	}
	return printItem(a.stdout, it, id, o.asJSON)
}

// takeFailed is the error of a take or claim from the queue name that
// failed with err: exit 75 when the queue stayed empty.
func takeFailed(name string, err error) error {
	if errors.Is(err, client.ErrEmpty) {
		return exitWith(exitWaited, "queue %q is empty", name)
	}
	return fmt.Errorf("queue %q: %w", name, err)
}

// newQueueSettleCommand is zkgate queue ack or nack.
func newQueueSettleCommand(a *app, verb string) *cobra.Command {
	var gw gatewayFlags
	var leaseID string
	var revoke bool
	cmd := &cobra.Command{
		Use:   verb + " --lease ID NAME ITEM-ID",
		Short: "remove the claimed item ITEM-ID from the queue NAME",
		Long: `Removes the item ITEM-ID, claimed by the lease --lease, from the queue NAME.

A lease that zkgate queue claim made for the claim (its holder label says so)
is revoked afterwards; --revoke=false keeps it, --revoke revokes any lease.`,
		Args: exactArgs(2, "NAME and ITEM-ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, item := args[0], args[1]
			if err := validName("queue", name); err != nil {
				return err
			}
			if leaseID == "" {
				return usageErr("queue %s needs --lease, the lease that claimed the item", verb)
			}
			c, err := gw.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			lease := c.Lease(leaseID)
			if verb == "ack" {
				err = lease.Ack(ctx, name, item)
			} else {
				err = lease.Nack(ctx, name, item)
			}
			if err != nil {
				return fmt.Errorf("queue %q: %s %s: %w", name, verb, item, err)
			}
			if !cmd.Flags().Changed("revoke") {
				info, err := c.LeaseInfo(ctx, leaseID)
				if errors.Is(err, client.ErrLeaseExpired) || errors.Is(err, client.ErrLeaseNotFound) {
					return nil
				}
				if err != nil {
					return fmt.Errorf("lease %s: %w", leaseID, err)
				}
				revoke = madeByClaim(info.Holder)
			}
			if !revoke {
				return nil
			}
			if err := c.RevokeLease(ctx, leaseID); err != nil {
				return fmt.Errorf("revoke lease %s: %w", leaseID, err)
			}
			return nil
		},
	}
	gw.register(cmd, a)
	cmd.Flags().StringVar(&leaseID, "lease", "", "the lease that claimed the item (required)")
	cmd.Flags().BoolVar(&revoke, "revoke", false, "revoke the lease afterwards (default: when zkgate queue claim made it)")
	if verb == "nack" {
		cmd.Short = "put the claimed item ITEM-ID back in the queue NAME, for another claim"
		cmd.Long = strings.Replace(cmd.Long, "Removes the item ITEM-ID, claimed by the lease --lease, from the queue NAME.",
			"Puts the item ITEM-ID, claimed by the lease --lease, back in the queue NAME.", 1)
	}
	return cmd
}

func printItem(w io.Writer, it *client.Item, lease string, asJSON bool) error {
	if !asJSON {
		_, err := w.Write(it.Data)
		return err
	}
	out := itemJSON{Queue: it.Queue, ID: it.ID, Priority: it.Priority, Lease: lease}
	if utf8.Valid(it.Data) {
		out.Data = string(it.Data)
	} else {
		out.DataBase64 = base64.StdEncoding.EncodeToString(it.Data)
	}
	return json.NewEncoder(w).Encode(out)
}
