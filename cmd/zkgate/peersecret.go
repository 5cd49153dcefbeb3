package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/zkgate/zkgate/internal/peer"
)

const peerSecretNewLong = `Prints a new secret for --peer-secret-file, alone, on standard output: 32
random bytes, URL-safe base64. Every gateway of a root gets the same file,
readable by the gateway alone:

    (umask 077; zkgate peer-secret new > /etc/zkgate/peer-secret)

The file may hold several secrets, one a line: the first signs, each is
taken. To change the secret without a pause, add the new one as a second
line on every gateway and restart each, then move it first and restart
each, then remove the old one and restart each.`

// newPeerSecretCommand is `zkgate peer-secret new`.
func newPeerSecretCommand(a *app) *cobra.Command {
	cmd := newGroupCommand("peer-secret", "make the secret the gateways of a root share (--peer-secret-file)",
		"The secret the gateways of one root share, so that they forward requests only to each other.")
	cmd.AddCommand(&cobra.Command{
		Use:   "new",
		Short: "print a new secret for --peer-secret-file",
		Long:  peerSecretNewLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			secret, err := peer.NewSecret()
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, secret)
			return nil
		},
	})
	return cmd
}
