package server_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/recipes"
)

// ioGroup reads the group name from the gateway at url.
func ioGroup(t *testing.T, url, name string) recipes.GroupState {
	t.Helper()
	r := gwtest.Do(t, "GET", url+"/v1/groups/"+name, nil)
	var st recipes.GroupState
	if r.Status != 200 || json.Unmarshal(r.Body, &st) != nil {
		t.Fatalf("GET /v1/groups/%s: %d %s", name, r.Status, r.Body)
	}
	return st
}

// ioJoin joins member, of a new lease of holder, to the group name; it
// returns the lease.
func ioJoin(t *testing.T, url, name, member, holder, value string) string {
	t.Helper()
	lease := gwtest.NewLease(t, url, "30s", holder)
	r := gwtest.Do(t, "POST", url+"/v1/groups/"+name+"/join", map[string]any{"lease": lease, "member": member, "value": value})
	gwtest.MustStatus(t, r, 200, "join")
	return lease
}

// kazoo's Party lists zkgate's member (its identifier is the member's
// JSON, which names the member, holder and value) with its own and leaves
// out ShallowParty's; zkgate lists all three, and a blocking read wakes
// when a kazoo member leaves. A member whose lease is revoked is gone for
// kazoo too.
func TestInteropKazooParty(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	g, _, k := interopStart(t, startKazooPeer)
	path := g.Root + "/groups/party"
	lease := ioJoin(t, g.URL, "party", "w1", "http-worker", "10.0.0.1:80")
	k.send("party p1 %s kazoo-1", path)
	k.expect("JOINED p1", interopWait)
	k.send("shallow s1 %s shallow-1", path)
	k.expect("JOINED s1", interopWait)

	k.send("party-members %s", path)
	var seen []string
	if err := json.Unmarshal([]byte(strings.TrimPrefix(k.expect("PARTY ", interopWait), "PARTY ")), &seen); err != nil || len(seen) != 2 {
		t.Fatalf("kazoo's Party lists %q (%v), want its own member and zkgate's", seen, err)
	}
	var zkgates struct{ Lease, Holder, Member, Value string }
	if err := json.Unmarshal([]byte(seen[1]), &zkgates); err != nil || seen[0] != "kazoo-1" ||
		zkgates != (struct{ Lease, Holder, Member, Value string }{lease, "http-worker", "w1", "10.0.0.1:80"}) {
		t.Fatalf("kazoo's Party lists %q (%v)", seen, err)
	}

	st := ioGroup(t, g.URL, "party")
	byValue := map[string]recipes.GroupMember{}
	for _, m := range st.Members {
		byValue[m.Value] = m
	}
	if m := byValue["10.0.0.1:80"]; m.Member != "w1" || m.Foreign || m.Lease != lease || m.Node != "w1__party__" {
		t.Fatalf("zkgate's member: %+v (all: %+v)", m, st.Members)
	}
	if m := byValue["kazoo-1"]; !m.Foreign || len(m.Member) != 32 || m.Node != m.Member+"__party__" {
		t.Fatalf("kazoo's Party member: %+v (all: %+v)", m, st.Members)
	}
	if m := byValue["shallow-1"]; !m.Foreign || !strings.HasSuffix(m.Node, "-shallow-1") {
		t.Fatalf("kazoo's ShallowParty member: %+v (all: %+v)", m, st.Members)
	}

	// A blocking read wakes when kazoo's member leaves.
	index := gwtest.Do(t, "GET", g.URL+"/v1/groups/party", nil).Header.Get("X-Zkgate-Index")
	woke := make(chan gwtest.Response, 1)
	go func() {
		r, _ := gwtest.DoCtx(t.Context(), "GET", g.URL+"/v1/groups/party?index="+index+"&wait=30s", nil)
		woke <- r
	}()
	k.send("pleave p1")
	k.expect("PLEFT p1", interopWait)
	r := gwtest.Receive(t, woke, interopWait, "the blocking read")
	if !strings.Contains(string(r.Body), `"member":"w1"`) || strings.Contains(string(r.Body), "kazoo-1") {
		t.Fatalf("the read woken by kazoo's leave: %d %s", r.Status, r.Body)
	}

	gwtest.MustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
	zkgateGone := func() error {
		k.send("party-members %s", path)
		if l := k.expect("PARTY ", interopWait); l != "PARTY []" {
			return fmt.Errorf("kazoo's Party still lists %s", l)
		}
		return nil
	}
	gwtest.Eventually(t, interopWait, zkgateGone)
	k.send("pleave s1")
	k.expect("PLEFT s1", interopWait)
	k.exit()
}

// Curator's GroupMember sees zkgate's member, by its node's name, and
// zkgate lists Curator's with its payload; a member whose lease is revoked
// leaves Curator's view too.
func TestInteropCuratorGroupMember(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	g, _, c := interopStart(t, startCuratorPeer)
	path := g.Root + "/groups/members"
	c.send("member m1 %s cur-1 payload-1", path)
	c.expect("JOINED m1", interopWait)
	lease := ioJoin(t, g.URL, "members", "w1", "http-worker", "")
	curatorSees := func(want string) func() error {
		return func() error {
			c.send("members m1")
			if l := c.expect("MEMBERS m1", interopWait); l != "MEMBERS m1 "+want {
				return fmt.Errorf("Curator's GroupMember lists %q, want %q", l, want)
			}
			return nil
		}
	}
	gwtest.Eventually(t, interopWait, curatorSees("cur-1,w1__party__"))
	gwtest.Eventually(t, interopWait, func() error {
		st := ioGroup(t, g.URL, "members")
		ids := []string{}
		for _, m := range st.Members {
			ids = append(ids, fmt.Sprintf("%s:%s:%t", m.Member, m.Value, m.Foreign))
		}
		if !slices.Equal(ids, []string{"cur-1:payload-1:true", "w1::false"}) {
			return fmt.Errorf("zkgate lists %v", ids)
		}
		return nil
	})
	gwtest.MustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
	gwtest.Eventually(t, interopWait, curatorSees("cur-1"))
	c.send("mleave m1")
	c.expect("MLEFT m1", interopWait)
	c.exit()
	gwtest.Eventually(t, 10*time.Second, func() error {
		if st := ioGroup(t, g.URL, "members"); len(st.Members) != 0 {
			return fmt.Errorf("members left: %+v", st.Members)
		}
		return nil
	})
}
