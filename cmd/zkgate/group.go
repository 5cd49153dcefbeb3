package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// newGroupsCommand is `zkgate group join|list`: membership of a group for
// as long as a command runs, and the members of a group.
func newGroupsCommand(a *app) *cobra.Command {
	cmd := newGroupCommand("group", "join a group while CMD runs, and list a group's members",
		"A group's members are the processes that joined it and have not left, nor lost their lease.")
	cmd.AddCommand(newGroupJoinCommand(a), newGroupListCommand(a))
	return cmd
}

// newGroupListCommand is `zkgate group list [NAME]`: the members of the
// group NAME, or the groups that have members.
func newGroupListCommand(a *app) *cobra.Command {
	var gw gatewayFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json] [NAME]",
		Short: "list the members of the group NAME (member, holder, value), or the groups with members",
		Args:  cobra.MaximumNArgs(1),
		Example: `  zkgate group list workers
  zkgate group list --json workers | jq -r '.members[].value'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := gw.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if len(args) == 0 {
				groups, err := c.Groups(ctx)
				if err != nil {
					return fmt.Errorf("groups: %w", err)
				}
				if asJSON {
					return json.NewEncoder(a.stdout).Encode(map[string]any{"groups": groups})
				}
				for _, g := range groups {
					fmt.Fprintf(a.stdout, "%s\t%d\n", g.Name, len(g.Members))
				}
				return nil
			}
			name := args[0]
			if err := validName("group", name); err != nil {
				return err
			}
			st, err := c.GroupState(ctx, name)
			if err != nil {
				return fmt.Errorf("group %q: %w", name, err)
			}
			if asJSON {
				return json.NewEncoder(a.stdout).Encode(st)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			for _, m := range st.Members {
				holder := m.Holder
				if m.Foreign {
					holder = "(foreign)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Member, holder, m.Value)
			}
			return tw.Flush()
		},
	}
	gw.register(cmd, a)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the group (name, members) as the gateway answers it")
	return cmd
}
