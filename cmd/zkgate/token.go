package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/server"
)

const tokenNewLong = `Adds a client token to the tokens file (made if missing, mode 0600) and
prints its secret, alone, on standard output; the file keeps only its hash.
A PERMISSION is KIND:PREFIX:LEVEL:

    KIND    locks, semaphores, elections, barriers, double-barriers, queues, groups, leases, or *
    PREFIX  the start of the names it covers (billing-), or * for every name
    LEVEL   read (GETs, blocking reads, the dashboard), write (acquire, release,
            campaign, produce, take, claim...; leases: make them), or admin
            (write, and act with other tokens' leases); each includes the ones before

Send SIGHUP to running gateways to load the new token.`

// newTokenCommand is `zkgate token new`.
func newTokenCommand(a *app) *cobra.Command {
	cmd := newGroupCommand("token", "add client tokens to a gateway's tokens file",
		"Client tokens of the gateways' --auth-file: the file keeps their hashes, the clients\n"+
			"send their secrets (ZKGATE_TOKEN, or --token).")
	var file, name string
	var quiet bool
	newCmd := &cobra.Command{
		Use:   "new --auth-file FILE --name NAME PERMISSION...",
		Short: "add a token to the tokens file, and print its secret",
		Long:  tokenNewLong,
		Example: `  zkgate token new --auth-file /etc/zkgate/tokens --name billing 'locks:billing-:write' 'leases:*:write'
  zkgate token new --auth-file /etc/zkgate/tokens --name viewer '*:*:read'
  zkgate token new --auth-file /etc/zkgate/tokens --name ops '*:*:admin'`,
		RunE: func(cmd *cobra.Command, perms []string) error {
			if !cmd.Flags().Changed("auth-file") {
				file = a.getenv("ZKGATE_AUTH_FILE")
			}
			switch {
			case file == "":
				return usageErr("zkgate token new needs --auth-file FILE")
			case name == "":
				return usageErr("zkgate token new needs --name NAME")
			case len(perms) == 0:
				return usageErr("zkgate token new needs at least one PERMISSION, such as locks:billing-:write or *:*:read")
			}
			for _, p := range perms {
				if strings.HasPrefix(p, "-") && p != "-" {
					return usageErr("flag %s must come before the permissions", p)
				}
			}
			secret, err := auth.AddToken(file, name, perms)
			if err != nil {
				return &server.UsageError{Msg: err.Error()}
			}
			fmt.Fprintln(a.stdout, secret)
			if !quiet {
				fmt.Fprintf(a.stderr, "zkgate: token %q added to %s; send SIGHUP to running gateways to load it\n", name, file)
			}
			return nil
		},
	}
	// Flags after a permission are refused: a permission may start with
	// neither - nor --.
	newCmd.Flags().SetInterspersed(false)
	newCmd.Flags().StringVar(&file, "auth-file", "", "the tokens file (default $ZKGATE_AUTH_FILE)")
	newCmd.Flags().StringVar(&name, "name", "", "the token's name: 1-64 of A-Z a-z 0-9 . _ -")
	newCmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print no information on stderr, only errors")
	cmd.AddCommand(newCmd)
	return cmd
}
