package dashboard_test

import (
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/dashtest"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// The groups page shows each group's members live: a member that joins is
// upserted into the list with its holder (escaped) and value, and its group
// goes once the last member's lease is revoked.
func TestWSGroupsShowMembersLive(t *testing.T) {
	// Serial: counts the binary's goroutines (startWS).
	g, ctx := startWS(t, 20*time.Second)
	c := dashtest.Dial(t, ctx, g.URL, "groups", nil)
	snap, err := dashtest.Read(ctx, c)
	if err != nil {
		t.Fatalf("first message: %v", err)
	}
	var view dashtest.View
	view.Apply(snap)
	if _, ok := view.HTML["groups-list"]; !ok {
		t.Fatalf("the snapshot has no groups-list: %v", snap.Frags)
	}
	lease := gwtest.NewLease(t, g.URL, "30s", markupLabel)
	gwtest.MustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/groups/ws-group/join", map[string]any{"lease": lease, "member": "w1", "value": "10.0.0.1:80"}), 200, "join")
	f := view.WaitFrag(t, ctx, c, "the group to appear", func(f dashtest.Frag) bool {
		return f.ID == "group-ws-group" && strings.Contains(f.HTML, "w1") && strings.Contains(f.HTML, "10.0.0.1:80")
	})
	checkUpsertedEscaped(t, f, "group", "groups-list", "ws-group")
	view.Until(t, ctx, c, "the group count", func(v *dashtest.View) bool {
		return strings.Contains(v.HTML["count-groups"], ">1<") && strings.Contains(v.HTML["groups-summary"], "1 member")
	})
	gwtest.MustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
	view.WaitFrag(t, ctx, c, "the group to go", func(f dashtest.Frag) bool { return f.ID == "group-ws-group" && f.Op == "remove" })
}
