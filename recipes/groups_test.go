package recipes

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
)

// memberIDs are the member ids of st, in its order.
func memberIDs(st GroupState) []string {
	var out []string
	for _, m := range st.Members {
		out = append(out, m.Member)
	}
	return out
}

// A join makes one EPHEMERAL node {member}__party__ whose data names the
// lease; joining again with the same lease and member finds it, another
// lease may not take the member id, a leave deletes the node and a second
// leave is not_held.
func TestGroupJoinListLeave(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	conn := rawClient(t)
	a, b := newLease(t, svc, "worker-a"), newLease(t, svc, "worker-b")
	_, id, err := svc.Groups.Join(ctx, a, "workers", "a", "10.0.0.1:80")
	if err != nil || id != "a" {
		t.Fatalf("join: %q %v", id, err)
	}
	if _, _, err := svc.Groups.Join(ctx, a, "workers", "a", "10.0.0.1:80"); err != nil {
		t.Fatalf("the same join again: %v", err)
	}
	if _, _, err := svc.Groups.Join(ctx, a, "workers", "a", "elsewhere"); ErrorCode(err) != CodeInvalid {
		t.Fatalf("a join of the same member with another value: %v, want invalid", err)
	}
	if _, _, err := svc.Groups.Join(ctx, b, "workers", "a", ""); ErrorCode(err) != CodeInvalid {
		t.Fatalf("another lease's join as member a: %v, want invalid", err)
	}
	st, idB, err := svc.Groups.Join(ctx, b, "workers", "", "")
	if err != nil || idB != b.ID {
		t.Fatalf("join with no member id: %q %v, want the lease's id", idB, err)
	}
	want := []string{svc.root + "/groups/workers/a__party__", svc.root + "/groups/workers/" + b.ID + "__party__"}
	if got := ephemeralsUnder(t, conn, svc.root+"/groups"); !sameSet(got, want) {
		t.Fatalf("member nodes %v, want %v", got, want)
	}
	if got := memberIDs(st); !sameSet(got, []string{"a", b.ID}) {
		t.Fatalf("members %v", got)
	}
	for _, m := range st.Members {
		if m.Member == "a" && (m.Lease != a.ID || m.Holder != "worker-a" || m.Value != "10.0.0.1:80" || m.Foreign || m.Node != "a__party__") {
			t.Fatalf("member a: %+v", m)
		}
	}
	if err := svc.Groups.Leave(ctx, a, "workers", "a"); err != nil {
		t.Fatal(err)
	}
	if err := svc.Groups.Leave(ctx, a, "workers", "a"); ErrorCode(err) != CodeNotHeld {
		t.Fatalf("a second leave: %v, want not_held", err)
	}
	st, err = svc.Groups.State(ctx, "workers", 0, 0)
	if err != nil || !slices.Equal(memberIDs(st), []string{b.ID}) {
		t.Fatalf("after the leave: %v %v", memberIDs(st), err)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// A member goes with its lease: revoked, or ended by its ttl.
func TestGroupMemberLeavesWithItsLease(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	conn := rawClient(t)
	revoked := newLease(t, svc, "revoked")
	expiring, err := svc.Leases.Create(ctx, time.Second, "expiring", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Lease{revoked, expiring} {
		if _, _, err := svc.Groups.Join(ctx, l, "g", "", ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.Leases.Revoke(revoked.ID); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, 15*time.Second, func() error {
		if got := ephemeralsUnder(t, conn, svc.root+"/groups"); len(got) != 0 {
			return fmt.Errorf("members left: %v", got)
		}
		return nil
	})
}

// A blocking read of a group wakes on a join and on a leave: each read
// started before the change answers it (a read may answer an index it had
// not seen first: it blocks again from there).
func TestGroupBlockingReadWakesOnAChange(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	lease := newLease(t, svc, "member")
	st, err := svc.Groups.State(ctx, "watched", 0, 0)
	if err != nil || len(st.Members) != 0 {
		t.Fatalf("an empty group: %+v %v", st, err)
	}
	type read struct {
		st  GroupState
		err error
	}
	// until blocks from index until want holds (bounded: 30s of reads).
	until := func(index int64, want func(GroupState) bool) chan read {
		c := make(chan read, 1)
		go func() {
			for deadline := time.Now().Add(30 * time.Second); ; {
				st, err := svc.Groups.State(ctx, "watched", max(index, 1), 10*time.Second)
				if err != nil || want(st) || time.Now().After(deadline) {
					c <- read{st, err}
					return
				}
				index = st.Index
			}
		}()
		return c
	}
	woken := until(st.Index, func(st GroupState) bool { return len(st.Members) == 1 })
	if _, _, err := svc.Groups.Join(ctx, lease, "watched", "m", ""); err != nil {
		t.Fatal(err)
	}
	got := <-woken
	if got.err != nil || !slices.Equal(memberIDs(got.st), []string{"m"}) {
		t.Fatalf("the read woken by the join: %+v %v", got.st, got.err)
	}
	woken = until(got.st.Index, func(st GroupState) bool { return len(st.Members) == 0 })
	if err := svc.Groups.Leave(ctx, lease, "watched", "m"); err != nil {
		t.Fatal(err)
	}
	if got = <-woken; got.err != nil || len(got.st.Members) != 0 {
		t.Fatalf("the read woken by the leave: %+v %v", got.st, got.err)
	}
}

// A join whose create is applied but whose reply is lost finds its own
// node once the session is back: one member, not a refusal as "another
// lease's".
func TestGroupJoinWhoseCreateReplyIsLost(t *testing.T) {
	t.Parallel()
	proxy, svc := stalledService(t, opCreate, 20*time.Second)
	conn := rawClient(t)
	lease := newLease(t, svc, "member")
	node := svc.root + "/groups/lossy/m__party__"
	proxy.Arm("/groups/lossy/m__party__")
	proxy.whenStalled(func() {
		proxy.loseReply(func() bool {
			ok, _, err := conn.Exists(node)
			return err == nil && ok
		}, nil)
		proxy.Refuse(false)
	})
	st, _, err := svc.Groups.Join(context.Background(), lease, "lossy", "m", "")
	if err != nil {
		t.Fatalf("join whose create's reply was lost: %v", err)
	}
	if !proxy.isStalled() {
		t.Fatal("the create never stalled")
	}
	if got := memberIDs(st); !slices.Equal(got, []string{"m"}) {
		t.Fatalf("members %v", got)
	}
	if got := ephemeralsUnder(t, conn, svc.root+"/groups"); !slices.Equal(got, []string{node}) {
		t.Fatalf("member nodes %v", got)
	}
}

// The members of other clients are listed: kazoo's Party by its uuid with
// its identifier, ShallowParty's identifier from its name, Curator's
// GroupMember by its id with its payload.
func TestGroupListsOtherClientsMembers(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	conn := rawClient(t)
	dir := svc.root + "/groups/mixed"
	if _, err := conn.Create(dir, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	const uuid = "0123456789abcdef0123456789abcdef"
	for name, data := range map[string]string{uuid + "__party__": "kazoo-id", uuid + "-shallow-id": "", "curator-1": "payload"} {
		if _, err := conn.Create(dir+"/"+name, []byte(data), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := svc.Groups.State(context.Background(), "mixed", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range st.Members {
		if !m.Foreign || m.Lease != "" {
			t.Fatalf("a member of another client: %+v", m)
		}
		got[m.Member] = m.Value
	}
	want := map[string]string{uuid: "kazoo-id", uuid + "-shallow-id": "shallow-id", "curator-1": "payload"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("members %v, want %v", got, want)
	}
}

// A membership is handed over with its lease: the taker keeps the member,
// a join retried there finds the same node, and a leave there deletes it.
func TestGroupMembershipIsHandedOver(t *testing.T) {
	t.Parallel()
	giver, taker := giverAndTaker(t, 5*time.Second)
	ctx := context.Background()
	conn := rawClient(t)
	lease := newLease(t, giver, "member")
	if _, _, err := giver.Groups.Join(ctx, lease, "moving", "m", "v"); err != nil {
		t.Fatal(err)
	}
	h, err := giver.HandOver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	adoptOverTheWire(t, taker, h)
	kept, err := taker.Leases.KeepAlive(lease.ID)
	if err != nil {
		t.Fatalf("keepalive on the taker: %v", err)
	}
	if holds := kept.Info().Holds; len(holds) != 1 || holds[0].Kind != "group" || holds[0].Member != "m" || holds[0].State != "held" {
		t.Fatalf("the lease's holds on the taker: %+v", holds)
	}
	node := taker.root + "/groups/moving/m__party__"
	if _, _, err := taker.Groups.Join(ctx, kept, "moving", "m", "v"); err != nil {
		t.Fatalf("the join retried on the taker: %v", err)
	}
	if got := ephemeralsUnder(t, conn, taker.root+"/groups"); !slices.Equal(got, []string{node}) {
		t.Fatalf("member nodes %v, want %s alone", got, node)
	}
	if err := taker.Groups.Leave(ctx, kept, "moving", "m"); err != nil {
		t.Fatal(err)
	}
	if got := ephemeralsUnder(t, conn, taker.root+"/groups"); len(got) != 0 {
		t.Fatalf("member nodes after the leave: %v", got)
	}
	if err := taker.Leases.Revoke(kept.ID); err != nil {
		t.Fatal(err)
	}
}
