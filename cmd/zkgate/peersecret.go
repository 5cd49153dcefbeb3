package main

import (
	"fmt"
	"io"

	"github.com/zkgate/zkgate/internal/peer"
	"github.com/zkgate/zkgate/server"
)

const peerSecretUsage = `usage: zkgate peer-secret new

Prints a new secret for --peer-secret-file, alone, on standard output: 32
random bytes, URL-safe base64. Every gateway of a root gets the same file,
readable by the gateway alone:
  (umask 077; zkgate peer-secret new > /etc/zkgate/peer-secret)
The file may hold several secrets, one a line: the first signs, each is
taken. To change the secret without a pause, add the new one as a second
line on every gateway and restart each, then move it first and restart
each, then remove the old one and restart each.`

// peerSecretCmd is `zkgate peer-secret new`.
func peerSecretCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 || args[0] != "new" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(stderr, peerSecretUsage)
		}
		return &server.UsageError{Msg: "usage: zkgate peer-secret new (zkgate peer-secret -h explains)"}
	}
	secret, err := peer.NewSecret()
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, secret)
	return nil
}
