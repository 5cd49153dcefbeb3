package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/zkgate/zkgate/server"
)

// newManCommand is zkgate __man DIR, hidden: the man pages of zkgate and
// every command under it, zkgate.1, zkgate-serve.1, zkgate-queue-claim.1...,
// made from the commands themselves (tools/mangen runs it at build time).
func newManCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "__man DIR",
		Short:  "write the man pages into DIR",
		Hidden: true,
		Args:   exactArgs(1, "the directory to write the man pages into"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			// zkgate(1) gets the exit codes that zkgate help prints after
			// the commands, as a preformatted block (indented: markdown's).
			root := cmd.Root()
			root.Long += "\n\n" + strings.ReplaceAll("\n"+exitCodesHelp, "\n", "\n    ")
			header := &doc.GenManHeader{Section: "1", Source: server.BuildInfo(), Manual: "User Commands"}
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fmt.Errorf("man pages: %w", err)
			}
			return nil
		},
	}
}
