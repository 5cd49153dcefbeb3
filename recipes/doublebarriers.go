package recipes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// DoubleBarriers follow Curator's DistributedDoubleBarrier: each member is
// an EPHEMERAL child of {root}/double-barriers/{name}; the member that makes
// the count creates the PERSISTENT `ready` child, which lets everyone in.
// Leaving, the lowest member waits for the highest to go, the others delete
// their node and wait for the lowest; the last one out removes `ready`.
type DoubleBarriers struct {
	*lines
	cache *watchCache
	keep  *keepers
	of    func(*Lease) *DoubleBarriers // the double barriers of the lease's session
}

const readyNode = "ready"

// MaxBarrierCount bounds a double barrier's count.
const MaxBarrierCount = 10_000

// Member is one member of a double barrier.
type Member struct {
	Member  string    `json:"member"`
	Lease   string    `json:"lease,omitempty"`
	Holder  string    `json:"holder"`
	Gateway string    `json:"gateway,omitempty"`
	Count   int       `json:"count,omitempty"`
	Since   time.Time `json:"since"`
	Foreign bool      `json:"foreign"`
	session string    // its node's, for keep
}

// DoubleBarrierState is the membership of a double barrier.
type DoubleBarrierState struct {
	Name    string   `json:"name"`
	Count   int      `json:"count,omitempty"` // as the zkgate members give it
	Ready   bool     `json:"ready"`
	Members []Member `json:"members"`
	Index   int64    `json:"-"`
}

func (d *DoubleBarriers) path(name string) string {
	return kinds.DoubleBarriers.Path(d.sess.Root(), name)
}

// membership is a lease's member node in one double barrier.
type membership struct {
	hold
	member string
	count  int
	path   string // its node
	// guarded by hold.mu
	leaving bool // our node was deleted on the way out
}

const memberRole = "member"

func (m *membership) info() HoldInfo {
	info := m.describe(func(i *HoldInfo) { i.Node = m.nodeLocked(memberRole) })
	info.Member = m.member
	return info
}

func memberKey(name, member string) string { return "double-barrier\x00" + name + "\x00" + member }

// Enter makes member (bound to lease) a member of the barrier and waits up
// to wait until count members are in. On timeout the membership is kept, and
// entering again resumes the wait; if every call waiting on a membership no
// client was told of goes away instead (the client hung up), it is removed.
func (d *DoubleBarriers) Enter(ctx context.Context, lease *Lease, name, member string, count int, wait time.Duration) (DoubleBarrierState, error) {
	if o := d.of(lease); o != d {
		return o.Enter(ctx, lease, name, member, count, wait)
	}
	if err := d.validate(name, member); err != nil {
		return DoubleBarrierState{}, err
	}
	if count < 1 || count > MaxBarrierCount {
		return DoubleBarrierState{}, Errorf(CodeInvalid, "count must be between 1 and %d", MaxBarrierCount)
	}
	if err := lease.alive(); err != nil {
		return DoubleBarrierState{}, err
	}
	key := memberKey(name, member)
	m, err := joinHold(lease, key, func() *membership {
		return &membership{hold: newHold(d.lines, lease, "double-barrier", key, name), member: member, count: count,
			path: d.path(name) + "/" + member}
	}, func(m *membership) error {
		switch {
		case m.leaving:
			return Errorf(CodeInvalid, "member %q is leaving barrier %q", member, name)
		case m.count != count:
			return &Error{Code: CodeCountMismatch,
				Detail: fmt.Sprintf("member %q entered barrier %q with count %d", member, name, m.count), Extra: map[string]any{"count": m.count}}
		}
		return nil
	})
	if err != nil {
		return DoubleBarrierState{}, err
	}
	st, told, err := d.enter(ctx, m, wait)
	m.leave(told)
	return st, err
}

// enter is Enter's wait; told says that the answer tells the client of a
// membership that stays.
func (d *DoubleBarriers) enter(rctx context.Context, m *membership, wait time.Duration) (DoubleBarrierState, bool, error) {
	ln, lease, name, count := d.lines, m.lease, m.name, m.count
	ctx, cancel := waitContext(rctx, lease, wait)
	defer cancel()

	if err := d.checkCount(ctx, name, m.member, count); err != nil {
		return DoubleBarrierState{}, false, err
	}
	readyPath := d.path(name) + "/" + readyNode
	// As Curator does: note whether the barrier was ready before we joined.
	wasReady, err := d.exists(ctx, lease, readyPath)
	if err != nil {
		return DoubleBarrierState{}, false, err
	}
	_, _, err = m.ensureNode(memberRole, func() (string, *zk.Stat, error) {
		data := nodeData{Lease: lease.ID, Holder: lease.Holder, Gateway: ln.gatewayID, Member: m.member, Count: count}.bytes()
		p, err := ln.sess.createOwned(ctx, m.path, lease.epoch, ownedNode{data: data, flags: zk.FlagEphemeral, lease: lease.ID, containers: true})
		if errors.Is(err, zk.ErrNodeExists) {
			return "", nil, &Error{Code: CodeInvalid, Detail: fmt.Sprintf("member %q of barrier %q belongs to another lease", m.member, name)}
		}
		return p, nil, err
	})
	if errors.Is(err, errHoldGone) {
		return DoubleBarrierState{}, false, m.goneErr("the membership of barrier")
	}
	if err != nil {
		return DoubleBarrierState{}, false, waitErr(ctx, lease, err)
	}
	ln.metrics.Waiting("double-barrier", 1)
	err = d.waitReady(ctx, lease, name, count, readyPath, wasReady, wait <= 0)
	ln.metrics.Waiting("double-barrier", -1)
	if err != nil {
		elapsed := ErrorCode(err) == CodeTimeout && (ctx.Err() == nil || errors.Is(context.Cause(ctx), errWaitElapsed))
		if e, ok := err.(*Error); ok && elapsed {
			if st, serr := d.State(context.Background(), name, 0, 0); serr == nil {
				e.Extra = map[string]any{"members": st.Members, "count": count}
			}
		}
		return DoubleBarrierState{}, elapsed, err
	}
	m.mu.Lock()
	m.markGrantedLocked(0)
	m.mu.Unlock()
	// Read on the request's own context: the barrier is ready, whether or
	// not the wait ended meanwhile.
	st, err := d.State(rctx, name, 0, 0)
	return st, true, err
}

func (d *DoubleBarriers) validate(name, member string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := ValidName(member); err != nil {
		return Errorf(CodeInvalid, "member: %s", err.(*Error).Detail)
	}
	if member == readyNode {
		return Errorf(CodeInvalid, "member may not be %q: the barrier uses that node", readyNode)
	}
	return nil
}

// checkCount compares count with the one the other zkgate members entered with.
func (d *DoubleBarriers) checkCount(ctx context.Context, name, member string, count int) error {
	st, err := d.State(ctx, name, 0, 0)
	if err != nil {
		return err
	}
	for _, m := range st.Members {
		if m.Member != member && m.Count != 0 && m.Count != count {
			return &Error{Code: CodeCountMismatch,
				Detail: fmt.Sprintf("barrier %q was entered with count %d, not %d", name, m.Count, count),
				Extra:  map[string]any{"count": m.Count}}
		}
	}
	return nil
}

func (d *DoubleBarriers) exists(ctx context.Context, lease *Lease, p string) (bool, error) {
	for {
		ok, _, err := d.sess.Conn().Exists(p)
		if err == nil {
			return ok, nil
		}
		if err := d.retryable(ctx, lease, err); err != nil {
			return false, err
		}
	}
}

// waitReady waits until the ready node exists, creating it when the members
// make the count.
func (d *DoubleBarriers) waitReady(ctx context.Context, lease *Lease, name string, count int, readyPath string, wasReady, tryOnce bool) error {
	if wasReady {
		return nil
	}
	for {
		ok, nw, err := d.watches.appears(ctx, readyPath)
		if err != nil {
			if err := d.retryable(ctx, lease, err); err != nil {
				return err
			}
			continue
		}
		if ok {
			return nil
		}
		// The watch is armed before the members are counted, so that a
		// ready node made in between is not missed.
		wait, err := d.countOrReady(ctx, lease, name, count, readyPath, tryOnce)
		if !wait {
			d.watches.release(nw)
			if err == errAgain {
				continue
			}
			return err
		}
		if _, err := d.watches.wait(ctx, nw); err != nil {
			return waitErr(ctx, lease, context.Cause(ctx))
		}
	}
}

// errAgain: look again (a retryable error was waited out).
var errAgain = errors.New("again")

// countOrReady counts the members: with count of them it makes the ready
// node (and answers nil), with fewer it says to wait (or, trying once,
// answers a timeout).
func (d *DoubleBarriers) countOrReady(ctx context.Context, lease *Lease, name string, count int, readyPath string, tryOnce bool) (wait bool, err error) {
	kids, err := d.sess.children(ctx, d.path(name))
	if err != nil {
		return false, err
	}
	members := 0
	for _, k := range kids {
		if k != readyNode {
			members++
		}
	}
	if members >= count {
		_, err := d.sess.Conn().Create(readyPath, nil, zk.FlagPersistent, d.sess.acl())
		if err == nil || errors.Is(err, zk.ErrNodeExists) {
			return false, nil
		}
		if err := d.retryable(ctx, lease, err); err != nil {
			return false, err
		}
		return false, errAgain
	}
	if tryOnce {
		return false, &Error{Code: CodeTimeout, Detail: fmt.Sprintf("%d of %d members have entered", members, count)}
	}
	return true, nil
}

// Leave takes member out and waits up to wait until every member has left.
func (d *DoubleBarriers) Leave(ctx context.Context, lease *Lease, name, member string, wait time.Duration) (DoubleBarrierState, error) {
	if o := d.of(lease); o != d {
		return o.Leave(ctx, lease, name, member, wait)
	}
	if err := d.validate(name, member); err != nil {
		return DoubleBarrierState{}, err
	}
	if err := lease.alive(); err != nil {
		return DoubleBarrierState{}, err
	}
	m, ok := heldBy[*membership](lease, memberKey(name, member))
	if !ok {
		return DoubleBarrierState{}, &Error{Code: CodeNotHeld, Detail: fmt.Sprintf("lease %s has no member %q in barrier %q", lease.ID, member, name)}
	}
	wctx, cancel := waitContext(ctx, lease, wait)
	defer cancel()
	d.metrics.Waiting("double-barrier", 1)
	err := d.leave(wctx, m, wait <= 0)
	d.metrics.Waiting("double-barrier", -1)
	if err != nil {
		if e, ok := err.(*Error); ok && e.Code == CodeTimeout {
			if st, serr := d.State(context.Background(), name, 0, 0); serr == nil {
				e.Extra = map[string]any{"members": st.Members}
			}
		}
		return DoubleBarrierState{}, err
	}
	_ = m.drop() // its node is gone already
	// Read on the request's own context: the member has left, whether or
	// not the wait ended meanwhile.
	return d.State(ctx, name, 0, 0)
}

// leave is Curator's internalLeave.
func (d *DoubleBarriers) leave(ctx context.Context, m *membership, tryOnce bool) error {
	ln, lease := d.lines, m.lease
	dir := d.path(m.name)
	for {
		kids, err := ln.sess.children(ctx, dir)
		if err != nil {
			return err
		}
		var members []string
		for _, k := range kids {
			if k != readyNode {
				members = append(members, k)
			}
		}
		sort.Strings(members)
		shouldExist := m.node(memberRole) != ""
		if len(members) == 0 {
			break
		}
		ours := -1
		for i, k := range members {
			if k == m.member {
				ours = i
			}
		}
		if ours < 0 && shouldExist {
			return leaseEnded(lease.ID, "member node vanished")
		}
		if len(members) == 1 && ours == 0 {
			if err := d.deleteOwn(ctx, m); err != nil {
				return err
			}
			break
		}
		var watch string
		if ours == 0 {
			watch = members[len(members)-1] // lowest: wait for the highest to go
		} else {
			watch = members[0] // others: go now, then wait for the lowest
			if err := d.deleteOwn(ctx, m); err != nil {
				return err
			}
		}
		if tryOnce {
			return &Error{Code: CodeTimeout, Detail: fmt.Sprintf("%d members have not left", len(members))}
		}
		ok, nw, err := ln.watches.changed(ctx, dir+"/"+watch)
		if err != nil {
			if err := ln.retryable(ctx, lease, err); err != nil {
				return err
			}
			continue
		}
		if !ok {
			continue
		}
		if _, err := ln.watches.wait(ctx, nw); err != nil {
			return waitErr(ctx, lease, context.Cause(ctx))
		}
	}
	err := ln.sess.Conn().Delete(dir+"/"+readyNode, -1)
	if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrNotEmpty) {
		ln.log.Warn("remove ready node", "barrier", m.name, "err", err)
	}
	return nil
}

func (d *DoubleBarriers) deleteOwn(ctx context.Context, m *membership) error {
	m.mu.Lock()
	node := m.nodeLocked(memberRole)
	m.forgetNodeLocked(memberRole, node)
	m.leaving = true
	m.mu.Unlock()
	if node == "" {
		return nil
	}
	return d.sess.deleteNode(ctx, node, m.lease.epoch)
}

// State lists the members and readiness; with index > 0 a blocking read.
func (d *DoubleBarriers) State(ctx context.Context, name string, index int64, wait time.Duration) (DoubleBarrierState, error) {
	st, err := readState(ctx, d.cache, name, d.path(name), entryOpts{}, index, wait, doubleBarrierStateOf)
	if err == nil {
		keepMembers(d.keep, st.Members, func(m *Member) (keptRef, bool) {
			return keptRef{session: m.session, lease: m.Lease, gateway: &m.Gateway}, !m.Foreign
		})
	}
	return st, err
}

// keepMembers sets, as keepers.set does, the gateway of each of a state's members
// that is zkgate's (ref's ok) to the keeper of its lease; ref makes each
// one's keptRef.
func keepMembers[M any](k *keepers, members []M, ref func(m *M) (keptRef, bool)) {
	refs := make([]keptRef, 0, len(members))
	for i := range members {
		if r, ok := ref(&members[i]); ok {
			refs = append(refs, r)
		}
	}
	k.set(refs)
}

func doubleBarrierStateOf(name string, snap *Snapshot) DoubleBarrierState {
	st := DoubleBarrierState{Name: name, Members: []Member{}, Index: snap.Index}
	for _, n := range snap.Children {
		if n.Name == readyNode {
			st.Ready = true
			continue
		}
		mem := Member{Member: n.Name, Since: time.UnixMilli(n.Stat.Ctime).UTC(), session: sessionHex(n.Stat.EphemeralOwner)}
		if nd, ok := parseNodeData(n.Data); ok {
			mem.Lease, mem.Holder, mem.Gateway, mem.Count = nd.Lease, nd.Holder, nd.Gateway, nd.Count
			if nd.Count > 0 {
				st.Count = nd.Count
			}
		} else {
			mem.Foreign, mem.Holder = true, printable(n.Data)
		}
		st.Members = append(st.Members, mem)
	}
	return st
}

// List returns one page of the double barriers, and the name the next
// page starts after ("" for the last page).
func (d *DoubleBarriers) List(ctx context.Context, p Page) ([]DoubleBarrierState, string, error) {
	return listPage(ctx, d.sess, kinds.DoubleBarriers.Dir(d.sess.Root()), p, nil, func(ctx context.Context, name string) (DoubleBarrierState, bool, error) {
		st, err := d.State(ctx, name, 0, 0)
		return st, err == nil, err
	})
}
