package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/zkgate/zkgate/server"
)

const tokenUsage = `usage: zkgate token new --auth-file FILE --name NAME PERMISSION...

Adds a client token to the tokens file (made if missing, mode 0600) and
prints its secret, alone, on standard output; the file keeps only its hash.
A PERMISSION is KIND:PREFIX:LEVEL:
  KIND    locks, semaphores, elections, barriers, double-barriers, queues, leases, or *
  PREFIX  the start of the names it covers (billing-), or * for every name
  LEVEL   read (GETs, blocking reads, the dashboard), write (acquire, release,
          campaign, produce, take, claim...; leases: make them), or admin
          (write, and act with other tokens' leases); each includes the ones before
Examples: locks:billing-:write leases:*:write   *:*:read   *:*:admin
Send SIGHUP to running gateways to load the new token.`

// tokenCmd is `zkgate token new`.
func tokenCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "new" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(stderr, tokenUsage)
			return &server.UsageError{Msg: "usage: zkgate token new --auth-file FILE --name NAME PERMISSION..."}
		}
		return &server.UsageError{Msg: "usage: zkgate token new --auth-file FILE --name NAME PERMISSION... (zkgate token -h explains)"}
	}
	fs := flag.NewFlagSet("zkgate token new", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	file := fs.String("auth-file", getenv("ZKGATE_AUTH_FILE"), "the tokens file (ZKGATE_AUTH_FILE)")
	name := fs.String("name", "", "the token's name: 1-64 of A-Z a-z 0-9 . _ -")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, tokenUsage)
			return &server.UsageError{Msg: "usage: zkgate token new --auth-file FILE --name NAME PERMISSION..."}
		}
		return &server.UsageError{Msg: err.Error()}
	}
	perms := fs.Args()
	switch {
	case *file == "":
		return &server.UsageError{Msg: "zkgate token new needs --auth-file FILE"}
	case *name == "":
		return &server.UsageError{Msg: "zkgate token new needs --name NAME"}
	case len(perms) == 0:
		return &server.UsageError{Msg: "zkgate token new needs at least one PERMISSION, such as locks:billing-:write or *:*:read"}
	}
	for _, p := range perms {
		if strings.HasPrefix(p, "-") {
			return &server.UsageError{Msg: fmt.Sprintf("flag %s must come before the permissions", p)}
		}
	}
	secret, err := server.AddToken(*file, *name, perms)
	if err != nil {
		return &server.UsageError{Msg: err.Error()}
	}
	fmt.Fprintln(stdout, secret)
	fmt.Fprintf(stderr, "zkgate: token %q added to %s; send SIGHUP to running gateways to load it\n", *name, *file)
	return nil
}
