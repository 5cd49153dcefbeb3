package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"github.com/zkgate/zkgate/client"
)

const queueUsage = "zkgate queue put|take|claim|ack|nack ... (zkgate queue VERB -h for each)"

// queueVerbUsage is the synopsis of one queue command.
func queueVerbUsage(verb string) string {
	switch verb {
	case "put":
		return "zkgate queue put [--priority 100] NAME [DATA] (no DATA: the item is read from stdin)"
	case "take":
		return "zkgate queue take [--wait 30s] [--json] NAME (the item's bytes on stdout; exit 75 if empty)"
	case "claim":
		return "zkgate queue claim [--wait 30s] [--lease ID | --ttl 5m] [--json] NAME (exit 75 if empty)"
	}
	return "zkgate queue " + verb + " --lease ID NAME ITEM-ID"
}

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

// queueCommand is `zkgate queue put|take|claim|ack|nack`, for scripts.
func queueCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageErr("usage: %s", queueUsage)
	}
	verb, args := args[0], args[1:]
	fs := newFlags("queue " + verb)
	var gw gatewayFlags
	gw.register(fs, getenv)
	var (
		priority = new(int)
		wait     = new(time.Duration)
		asJSON   = new(bool)
		leaseID  = new(string)
		ttl      = new(time.Duration)
	)
	switch verb {
	case "put":
		fs.IntVar(priority, "priority", client.DefaultPriority, "0 to 999, lower is served first")
	case "take", "claim":
		fs.DurationVar(wait, "wait", 30*time.Second, "how long to wait for an item; 0 answers at once")
		fs.BoolVar(asJSON, "json", false, "print the item as JSON (id, priority, lease, data) instead of its bytes")
		if verb == "claim" {
			fs.StringVar(leaseID, "lease", "", "claim for this lease (default: a new lease of --ttl, printed on stderr or in the JSON)")
			fs.DurationVar(ttl, "ttl", 5*time.Minute, "the TTL of the lease made for the claim: ack or nack before it ends")
		}
	case "ack", "nack":
		fs.StringVar(leaseID, "lease", "", "the lease that claimed the item (required)")
	default:
		return usageErr("unknown queue command %q (usage: %s)", verb, queueUsage)
	}
	usage := queueVerbUsage(verb)
	pos, _, err := parseArgs(fs, args, false, usage, stderr)
	if err != nil {
		return err
	}
	want := map[string]int{"put": 1, "take": 1, "claim": 1, "ack": 2, "nack": 2}[verb]
	if verb == "put" && len(pos) == 2 {
		want = 2
	}
	if len(pos) != want {
		return usageErr("queue %s takes %d argument(s), got %d (usage: %s)", verb, want, len(pos), usage)
	}
	name := pos[0]
	if err := validName("queue", name); err != nil {
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
	case "put":
		var data []byte
		if len(pos) == 2 {
			data = []byte(pos[1])
		} else if data, err = io.ReadAll(os.Stdin); err != nil {
			return fmt.Errorf("reading the item from stdin: %v", err)
		}
		info, err := c.Produce(ctx, name, data, *priority)
		if err != nil {
			return fmt.Errorf("queue %q: %w", name, err)
		}
		fmt.Fprintln(stdout, info.ID)
		return nil
	case "take":
		it, err := c.Take(ctx, name, *wait)
		if errors.Is(err, client.ErrEmpty) {
			return exitWith(exitWaited, "queue %q is empty", name)
		}
		if err != nil {
			return fmt.Errorf("queue %q: %w", name, err)
		}
		return printItem(stdout, it, "", *asJSON)
	case "claim":
		id := *leaseID
		if id == "" {
			if *ttl < time.Second {
				return usageErr("--ttl %s is below the minimum of 1s", *ttl)
			}
			info, err := c.CreateLease(ctx, *ttl, defaultHolder([]string{"zkgate queue claim", name}))
			if err != nil {
				return fmt.Errorf("lease: %w", err)
			}
			id = info.ID
		}
		lease := c.Lease(id)
		it, err := lease.Claim(ctx, name, *wait)
		if err != nil && *leaseID == "" {
			// Nothing claimed: the lease made for the claim goes.
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = c.RevokeLease(rctx, id)
			cancel()
		}
		if errors.Is(err, client.ErrEmpty) {
			return exitWith(exitWaited, "queue %q is empty", name)
		}
		if err != nil {
			return fmt.Errorf("queue %q: %w", name, err)
		}
		if !*asJSON {
			fmt.Fprintf(stderr, "zkgate: claimed %s for lease %s: zkgate queue ack --lease %s %s %s\n", it.ID, id, id, name, it.ID)
		}
		return printItem(stdout, it, id, *asJSON)
	default: // ack, nack
		if *leaseID == "" {
			return usageErr("queue %s needs --lease, the lease that claimed the item", verb)
		}
		lease := c.Lease(*leaseID)
		if verb == "ack" {
			err = lease.Ack(ctx, name, pos[1])
		} else {
			err = lease.Nack(ctx, name, pos[1])
		}
		if err != nil {
			return fmt.Errorf("queue %q: %s %s: %w", name, verb, pos[1], err)
		}
		return nil
	}
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
