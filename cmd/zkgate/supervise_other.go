//go:build !unix

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// lock and elect run CMD in a process group of its own and pass signals
// on: Unix only.
func newLockCommand(*app) *cobra.Command {
	return &cobra.Command{Use: "lock NAME -- CMD [ARGS...]", Short: "run CMD while holding the lock NAME (Unix only)",
		RunE: func(*cobra.Command, []string) error { return errors.New("zkgate lock needs a Unix system") }}
}

func newElectCommand(*app) *cobra.Command {
	return &cobra.Command{Use: "elect NAME -- CMD [ARGS...]", Short: "run CMD only while leading the election NAME (Unix only)",
		RunE: func(*cobra.Command, []string) error { return errors.New("zkgate elect needs a Unix system") }}
}

func newGroupJoinCommand(*app) *cobra.Command {
	return &cobra.Command{Use: "join NAME -- CMD [ARGS...]", Short: "run CMD while a member of the group NAME (Unix only)",
		RunE: func(*cobra.Command, []string) error { return errors.New("zkgate group join needs a Unix system") }}
}
