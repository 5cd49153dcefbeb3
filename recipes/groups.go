package recipes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// Groups are group memberships, laid out so that kazoo's Party and
// Curator's GroupMember share them:
//
//	{root}/groups/{name}                   CONTAINER (kazoo's ensure_path makes it PERSISTENT)
//	{root}/groups/{name}/{member}__party__ EPHEMERAL, data JSON {"lease","holder","gateway","member"[,"value"]}
//
// A member is an EPHEMERAL node of the gateway's session bound to a lease, as
// a lock's node is: it goes when the lease ends (revoked, expired) or with
// the session. Its name ends in kazoo's "__party__", so that kazoo's Party
// (whose members are {uuid4hex}__party__, data the identifier) lists it, its
// identifier being the JSON; the name before it is the member id, unique in
// the group, so that a retried join (the reply lost) finds its node, whose
// data names the lease. Curator's GroupMember ({path}/{id}, data the
// payload) sees the member as the id {member}__party__.
//
// Every child counts as a member when listed: kazoo's Party ones by their
// uuid, ShallowParty's ({uuid4hex}-{identifier}, no data) and Curator's by
// their node's name, each with what its client wrote as the value.
type Groups struct {
	*lines
	cache *watchCache
	keep  *keepers
	of    func(*Lease) *Groups // the groups of the lease's session
}

// partySuffix ends the name of every member node zkgate makes, and kazoo's
// Party's: kazoo lists the children whose name holds it.
const partySuffix = "__party__"

// GroupMember is one member of a group.
type GroupMember struct {
	Member string `json:"member"`
	// Node is the member's znode under the group, as other clients see it.
	Node    string    `json:"node"`
	Lease   string    `json:"lease,omitempty"`
	Holder  string    `json:"holder,omitempty"`
	Gateway string    `json:"gateway,omitempty"`
	Value   string    `json:"value,omitempty"`
	Since   time.Time `json:"since"`
	// Foreign marks a member that another client (kazoo, Curator) made.
	Foreign bool   `json:"foreign"`
	session string // its node's, for keep
}

// GroupState is the membership of a group.
type GroupState struct {
	Name    string        `json:"name"`
	Members []GroupMember `json:"members"`
	Index   int64         `json:"-"`
}

// groupMembership is a lease's member node in one group.
type groupMembership struct {
	hold
	member, value string
}

const groupRole = "member"

func (m *groupMembership) info() HoldInfo {
	info := m.describe(func(i *HoldInfo) { i.Node = m.nodeLocked(groupRole) })
	info.Member = m.member
	return info
}

func groupKey(name, member string) string { return "group\x00" + name + "\x00" + member }

func (g *Groups) path(name string) string { return kinds.Groups.Path(g.sess.Root(), name) }

// memberPath is the node of member in the group called name.
func (g *Groups) memberPath(name, member string) string {
	return g.path(name) + "/" + member + partySuffix
}

// Join makes member, bound to lease, a member of the group called name, with
// value as its data; member "" is the lease's id. Joining again with the
// same lease and member finds the same node (and must give the same value).
// It answers the group's membership, the new member in it.
func (g *Groups) Join(ctx context.Context, lease *Lease, name, member, value string) (GroupState, string, error) {
	if o := g.of(lease); o != g {
		return o.Join(ctx, lease, name, member, value)
	}
	if member == "" {
		member = lease.ID
	}
	if err := validGroupMember(name, member); err != nil {
		return GroupState{}, "", err
	}
	if len(value) > MaxValueBytes {
		return GroupState{}, "", Errorf(CodeInvalid, "value must be at most %d bytes", MaxValueBytes)
	}
	if err := lease.alive(); err != nil {
		return GroupState{}, "", err
	}
	key := groupKey(name, member)
	m, err := joinHold(lease, key, func() *groupMembership {
		return &groupMembership{hold: newHold(g.lines, lease, "group", key, name), member: member, value: value}
	}, func(m *groupMembership) error {
		if m.value != value {
			return Errorf(CodeInvalid, "member %q joined group %q with another value: leave first", member, name)
		}
		return nil
	})
	if err != nil {
		return GroupState{}, "", err
	}
	err = g.ensureMember(ctx, m)
	m.leave(err == nil)
	if err != nil {
		return GroupState{}, "", err
	}
	st, err := g.State(ctx, name, 0, 0)
	return st, member, err
}

// ensureMember makes m's node, unless it has one, and marks m granted. It
// waits out a reconnect (bounded by the session, whose end ends the
// lease's epoch) rather than a wait of its own: a join does not wait for
// others.
func (g *Groups) ensureMember(ctx context.Context, m *groupMembership) error {
	ln, lease := g.lines, m.lease
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(lease.ctx, func() { cancel(context.Cause(lease.ctx)) })()
	_, _, err := m.ensureNode(groupRole, func() (string, *zk.Stat, error) {
		data := nodeData{Lease: lease.ID, Holder: lease.Holder, Gateway: ln.gatewayID, Member: m.member, Value: m.value}.bytes()
		p, err := ln.sess.createOwned(ctx, g.memberPath(m.name, m.member), lease.epoch,
			ownedNode{data: data, flags: zk.FlagEphemeral, lease: lease.ID, containers: true})
		if errors.Is(err, zk.ErrNodeExists) {
			return "", nil, Errorf(CodeInvalid, "member %q of group %q belongs to another lease", m.member, m.name)
		}
		return p, nil, err
	})
	if errors.Is(err, errHoldGone) {
		return m.goneErr("the membership of group")
	}
	if err != nil {
		return waitErr(ctx, lease, err)
	}
	m.mu.Lock()
	m.markGrantedLocked(0)
	m.mu.Unlock()
	return nil
}

// Leave takes member (lease's id for "") of lease out of the group: its
// node is deleted before Leave returns.
func (g *Groups) Leave(ctx context.Context, lease *Lease, name, member string) error {
	if o := g.of(lease); o != g {
		return o.Leave(ctx, lease, name, member)
	}
	if member == "" {
		member = lease.ID
	}
	if err := validGroupMember(name, member); err != nil {
		return err
	}
	return dropHeld[*groupMembership](lease, name, func(name string) string { return groupKey(name, member) },
		"leave group", "lease %s has no member "+fmt.Sprintf("%q", member)+" in group %q")
}

func validGroupMember(name, member string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := ValidName(member); err != nil {
		return Errorf(CodeInvalid, "member: %s", err.(*Error).Detail)
	}
	return nil
}

// State lists the group's members in the order of their ids; with index > 0
// a blocking read, which wakes on a member's join or leave.
func (g *Groups) State(ctx context.Context, name string, index int64, wait time.Duration) (GroupState, error) {
	st, err := readState(ctx, g.cache, name, g.path(name), entryOpts{}, index, wait, groupStateOf)
	if err == nil {
		keepMembers(g.keep, st.Members, func(m *GroupMember) (keptRef, bool) {
			return keptRef{session: m.session, lease: m.Lease, gateway: &m.Gateway}, !m.Foreign
		})
	}
	return st, err
}

func groupStateOf(name string, snap *Snapshot) GroupState {
	st := GroupState{Name: name, Members: []GroupMember{}, Index: snap.Index}
	for _, n := range snap.Children {
		st.Members = append(st.Members, groupMemberOf(n))
	}
	sort.SliceStable(st.Members, func(i, j int) bool { return st.Members[i].Member < st.Members[j].Member })
	return st
}

// groupMemberOf reads one child of a group: zkgate's member, kazoo's Party
// or ShallowParty member, or Curator's GroupMember.
func groupMemberOf(n Node) GroupMember {
	mem := GroupMember{Member: n.Name, Node: n.Name, Since: time.UnixMilli(n.Stat.Ctime).UTC(), session: sessionHex(n.Stat.EphemeralOwner)}
	if nd, ok := parseNodeData(n.Data); ok {
		mem.Lease, mem.Holder, mem.Gateway, mem.Value = nd.Lease, nd.Holder, nd.Gateway, nd.Value
		mem.Member = nd.Member
		if mem.Member == "" {
			mem.Member = strings.TrimSuffix(n.Name, partySuffix)
		}
		return mem
	}
	mem.Foreign, mem.Value = true, printable(n.Data)
	if id, ok := strings.CutSuffix(n.Name, partySuffix); ok && id != "" {
		mem.Member = id // kazoo's Party: {uuid4hex}__party__
	} else if uuid, id, ok := strings.Cut(n.Name, "-"); ok && len(n.Data) == 0 && isHex32(uuid) {
		mem.Value = id // kazoo's ShallowParty: {uuid4hex}-{identifier}
	}
	return mem
}

func isHex32(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// List returns one page of the groups, and the name the next page starts
// after ("" for the last page).
func (g *Groups) List(ctx context.Context, p Page) ([]GroupState, string, error) {
	return listPage(ctx, g.sess, kinds.Groups.Dir(g.sess.Root()), p, nil, func(ctx context.Context, name string) (GroupState, bool, error) {
		st, err := g.State(ctx, name, 0, 0)
		return st, err == nil, err
	})
}
