package recipes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// hold is the one lifecycle of everything a lease holds or waits for: a lock
// node, a semaphore slot, a candidacy, a double-barrier membership, a queue
// claim. The recipes keep only what truly differs: how they wait, and what
// they show.
//
// A hold is attached to its lease under a key. Concurrent calls of one lease
// for the same thing join the same hold (one node, one grant), and each
// counts as a waiter while it waits. The last waiter to leave a hold that was
// neither granted nor told to a client abandons it. Once a hold is gone
// (released, abandoned, or ended with its lease) it is detached from the
// lease and its nodes are deleted whatever the caller does next: a node that
// no lease tracks would stay until the gateway's session ends.
type hold struct {
	lines *lines // of the lease's session
	lease *Lease
	self  holding // the recipe's hold embedding this one, as attached
	kind  string  // lock, semaphore, election, double-barrier, claim
	key   string  // its key among the lease's holds
	name  string  // the primitive's name
	since time.Time

	mu        sync.Mutex // held across the create of a node, so calls never make two
	nodes     []heldNode // znodes made for it, deleted when it goes
	waiters   int
	granted   bool
	grantedAt time.Time
	token     int64
	told      bool // a client was answered about it: it stays until released
	gone      bool
	// unrecorded: a node of h in a line is not in the journal yet (see
	// ensureInLine); its grant, or its wait, records it.
	unrecorded bool
	// onGone ends the calls waiting on h (see whileHeld) when it goes.
	onGone map[*context.CancelCauseFunc]error
	// dropUntold makes a grant that no client was told of go when its last
	// waiter leaves (a claim: the item is served again at once).
	dropUntold bool
	// graceHeld: a wait cut by a handover, whose place in line is kept for
	// its client's retry by a waiter of its own (see restore), until the
	// retry comes or HandoverGrace ends.
	graceHeld bool
}

// heldNode is one znode of a hold, by the role it plays in the recipe, with
// its czxid once a stat of the node, checked to be the session's own, was
// read (0 until then).
type heldNode struct {
	role, path string
	czxid      int64
}

// holding is what a lease keeps: a recipe's hold.
type holding interface {
	core() *hold
	// info describes the hold; it must not wait for h.mu (see hold.describe).
	info() HoldInfo
}

func (h *hold) core() *hold { return h }

func newHold(ln *lines, lease *Lease, kind, key, name string) hold {
	return hold{lines: ln, lease: lease, kind: kind, key: key, name: name, since: time.Now().UTC()}
}

// whileHeld is ctx, ended with cause once h goes (a release or resign
// while the call waits). Nothing else wakes such a wait: a waiter watches
// the node before its own, not its own, whose deletion is the release.
// The hold ends the context itself when it goes (markGoneLocked), so a
// waiting call costs no goroutine of its own.
func (h *hold) whileHeld(ctx context.Context, cause error) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	h.mu.Lock()
	if h.gone {
		h.mu.Unlock()
		cancel(cause)
		return ctx, func() {}
	}
	if h.onGone == nil {
		h.onGone = make(map[*context.CancelCauseFunc]error)
	}
	h.onGone[&cancel] = cause
	h.mu.Unlock()
	return ctx, func() {
		h.mu.Lock()
		delete(h.onGone, &cancel)
		h.mu.Unlock()
		cancel(nil)
	}
}

// errHoldGone says that a hold went while a call was using it.
var errHoldGone = errors.New("hold gone")

// joinHold attaches fresh() to lease under key, or joins the live hold that
// is there, and counts the caller as one of its waiters: the caller must
// call leave once it is done. fits, called with the hold's lock held, may
// refuse a hold that does not match the request (a semaphore's limit).
func joinHold[H holding](lease *Lease, key string, fresh func() H, fits func(H) error) (H, error) {
	var zero H
	for {
		cand := fresh()
		cand.core().self = cand
		got, err := lease.attach(key, cand)
		if err != nil {
			return zero, err
		}
		h, ok := got.(H)
		if !ok {
			return zero, internal(nil, "hold key "+key+" is taken by another kind")
		}
		c := h.core()
		c.mu.Lock()
		if c.gone {
			c.mu.Unlock()
			// On its way out: detach it (outside c.mu: Lease.Info takes the
			// lease's lock, then each hold's) and make a new one.
			lease.detach(key, got)
			continue
		}
		if fits != nil {
			if err := fits(h); err != nil {
				c.mu.Unlock()
				return zero, err
			}
		}
		if c.graceHeld {
			c.graceHeld = false // the retry it was kept for: the caller waits in its stead
		} else {
			c.waiters++
		}
		c.mu.Unlock()
		return h, nil
	}
}

// leave ends one caller's use of h. told says that the caller answers its
// client about h (a grant, a candidacy that stays in line): a hold told of
// stays until released. The last caller to leave a hold that no client was
// told of abandons it, unless it was granted; with dropUntold (a claim) it
// abandons even a grant, so that the item is served again at once.
func (h *hold) leave(told bool) {
	h.mu.Lock()
	h.waiters--
	if told && !h.told {
		h.told = true
		h.journalLocked() // before the client is told
	}
	// A hold of a lease being handed over stays for the gateway it moves to,
	// where the client's retry finds it (see handover.go).
	abandon := h.waiters == 0 && !h.gone && !h.told && (!h.granted || h.dropUntold) && !h.lease.moving.Load()
	var nodes []heldNode
	if abandon {
		nodes = h.markGoneLocked()
	}
	h.mu.Unlock()
	if abandon {
		h.lease.detach(h.key, h.self)
		h.removeNodes(nodes, released) // no client holds it: nothing for a lock-delay to cover
	}
}

// markGoneLocked marks h gone and hands over its nodes for deletion.
func (h *hold) markGoneLocked() []heldNode {
	h.gone = true
	h.lease.table.journal.dropped(h.lease.epoch, h.lease.ID, h.key)
	for cancel, cause := range h.onGone {
		(*cancel)(cause) // cancelling runs no code of the waiter's here
	}
	h.onGone = nil
	nodes := h.nodes
	h.nodes = nil
	if h.granted {
		h.lines.metrics.Released(h.kind, time.Since(h.grantedAt))
		h.lines.contention.released(h)
	}
	return nodes
}

// ending is how a hold goes.
type ending int

const (
	// released: by its client (a release, a resign, a revoke by the lease's
	// own client): every node goes, its lock-delay marker first.
	released ending = iota
	// abandoned: its lease ended without releasing it (expired, revoked by
	// an admin): its nodes go, but its lock-delay marker stays behind.
	abandoned
	// lapsed: with its session (lost, or closed at shutdown), which takes
	// its nodes: nothing to delete, and the marker stays behind.
	lapsed
)

// drop is a release by the client: h is detached from its lease and its
// nodes deleted before drop returns, whatever happens to the request that
// asked (the deletion is bounded by the session: it gives up once the
// session is lost, which takes the nodes with it).
func (h *hold) drop() error { return h.dropFor(context.Background()) }

// dropFor is drop for the request of ctx, whose spans its deletes join
// (they are made whatever ctx does next).
func (h *hold) dropFor(ctx context.Context) error {
	nodes, ok := h.markGone()
	if !ok {
		return nil
	}
	h.lease.detach(h.key, h.self)
	if h.lines.sess.cfg.Tracer == nil {
		ctx = context.Background() // nothing to trace: spare the copy
	} else {
		ctx = context.WithoutCancel(ctx)
	}
	return h.removeNodesFor(ctx, nodes, released)
}

// end is h's part of its lease's end. Its waiters have been cancelled
// already.
func (h *hold) end(how ending) error {
	nodes, ok := h.markGone()
	if !ok || how == lapsed {
		return nil
	}
	return h.removeNodes(nodes, how)
}

// markGone marks h gone and hands over its nodes; false if it was already.
func (h *hold) markGone() ([]heldNode, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone {
		return nil, false
	}
	return h.markGoneLocked(), true
}

// waitInLine waits for the turn of h's node in role under parent (see
// waitTurn). A node that went while the lease lives (deleted by hand) is
// forgotten, and again says that the caller should make a new one.
func (h *hold) waitInLine(ctx context.Context, role, parent, node string, after *listing, markers []marker,
	blocks func(c, self seqNode) bool, tryOnce bool) (t turn, again bool, err error) {
	t, err = h.lines.waitTurn(ctx, h.lease, parent, node, after, markers, blocks, tryOnce, h.recordNode)
	if errors.Is(err, errNodeGone) {
		h.forgetNode(role, node)
		if err := h.lease.alive(); err != nil {
			return t, false, err
		}
		return t, true, nil
	}
	return t, false, err
}

// removeNodes deletes nodes, newest first (a lock-delay marker, made last,
// goes before its node), with a context of their own: no client may stop it
// half way. Unless the hold was released, its marker stays.
func (h *hold) removeNodes(nodes []heldNode, how ending) error {
	return h.removeNodesFor(context.Background(), nodes, how)
}

// removeNodesFor is removeNodes under ctx, which must not end before it.
func (h *hold) removeNodesFor(ctx context.Context, nodes []heldNode, how ending) error {
	var first error
	for i := len(nodes) - 1; i >= 0; i-- {
		if nodes[i].role == delayRole {
			if how == released {
				if err := h.lines.deleteMark(nodes[i].path); err != nil {
					h.lines.log.Warn("delete the lock-delay marker of a released hold (it delays the next grant)", "marker", nodes[i].path, "err", err)
				}
			}
			continue
		}
		if err := h.lines.deleteVouching(ctx, nodes[i].path, h.lease.epoch); err != nil {
			h.lines.log.Error("delete node of a released hold", "kind", h.kind, "node", nodes[i].path, "err", err)
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// nodeLocked returns the node of h in role, or "".
func (h *hold) nodeLocked(role string) string {
	for _, n := range h.nodes {
		if n.role == role {
			return n.path
		}
	}
	return ""
}

// setNodeLocked records the node of h in role.
func (h *hold) setNodeLocked(role, path string) {
	defer h.journalLocked()
	for i, n := range h.nodes {
		if n.role == role {
			h.nodes[i] = heldNode{role: role, path: path}
			return
		}
	}
	h.nodes = append(h.nodes, heldNode{role: role, path: path})
}

// forgetNodeLocked forgets the node of h in role if it is path (it is gone
// already, or left on purpose).
func (h *hold) forgetNodeLocked(role, path string) {
	for i, n := range h.nodes {
		if n.role == role && n.path == path {
			h.nodes = append(h.nodes[:i], h.nodes[i+1:]...)
			h.journalLocked()
			return
		}
	}
}

// node returns the node of h in role, or "".
func (h *hold) node(role string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nodeLocked(role)
}

// forgetNode is forgetNodeLocked with the lock taken.
func (h *hold) forgetNode(role, path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forgetNodeLocked(role, path)
}

// ensureNode returns h's node in role, making it with create (under h.mu,
// so that concurrent calls of the lease make one) if h has none, and the
// node's czxid when known (see heldNode). create returns the stat that came
// with the create, or nil. A gone hold answers errHoldGone.
func (h *hold) ensureNode(role string, create func() (string, *zk.Stat, error)) (p string, czxid int64, err error) {
	return h.makeNode(role, create, false)
}

// makeNode is ensureNode; with later, a node it makes is recorded in the
// journal by the next line of h (a grant), or by recordNode before its wait,
// instead of a line of its own.
func (h *hold) makeNode(role string, create func() (string, *zk.Stat, error), later bool) (p string, czxid int64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone {
		return "", 0, errHoldGone
	}
	for _, n := range h.nodes {
		if n.role == role {
			return n.path, n.czxid, nil
		}
	}
	p, st, err := create()
	if err != nil {
		return "", 0, err
	}
	if st != nil {
		czxid = st.Czxid
	}
	if f := h.lease.table.afterCreate; f != nil {
		f(p)
	}
	h.nodes = append(h.nodes, heldNode{role: role, path: p, czxid: czxid})
	if later {
		h.unrecorded = true
	} else {
		h.journalLocked() // before it is waited on, or granted
	}
	return p, czxid, nil
}

// recordNode records h in the journal if a node of it is not yet (see
// makeNode): before a wait in line, so that a start after a kill resumes the
// waiter in its place.
func (h *hold) recordNode() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unrecorded {
		h.journalLocked()
	}
}

// ensureInLine is ensureNode for h's node in role in the line under parent.
// The call counts among this gateway's calls in that line (see lister) until
// it calls done, which it must once its wait is over (unless err). A node
// made while the call is alone in the line comes with a listing of the line
// made behind its create (create is called with list true then), to be the
// first listing of the wait (see waitTurn); after is nil otherwise.
//
// The node goes into the journal with the grant that follows when the line
// is free (one write for both), or before the wait when it is not (the
// wait's beforeWait, h.recordNode): until then no client was told of it,
// and a start after a kill sweeps it as a node nothing recorded.
func (h *hold) ensureInLine(role, parent string, create func(list bool) (string, *zk.Stat, *listing, error)) (node string, czxid int64, after *listing, done func(), err error) {
	lines := h.lines.lister
	alone := lines.join(parent)
	node, czxid, err = h.makeNode(role, func() (string, *zk.Stat, error) {
		p, st, l, err := create(alone)
		after = l
		return p, st, err
	}, true)
	if err != nil {
		lines.leave(parent)
		return "", 0, nil, nil, err
	}
	return node, czxid, after, func() { lines.leave(parent) }, nil
}

// noteCzxidLocked records the czxid of h's node path, read from a stat that
// was checked to be the session's own.
func (h *hold) noteCzxidLocked(path string, czxid int64) {
	for i, n := range h.nodes {
		if n.path == path && n.czxid != czxid {
			h.nodes[i].czxid = czxid
			h.journalLocked()
		}
	}
}

// markGrantedLocked marks h granted with token, unless it is already.
func (h *hold) markGrantedLocked(token int64) {
	if !h.granted {
		h.granted, h.token, h.grantedAt = true, token, time.Now().UTC()
		h.lines.contention.granted(h)
		h.journalLocked() // before the client is told
	}
}

// journalLocked records h as it is now in its lease's journal (see
// journal.go); h.mu is held.
func (h *hold) journalLocked() {
	h.unrecorded = false
	if j := h.lease.table.journal; j != nil && !h.gone {
		j.held(h.lease.epoch, h.lease.ID, stateLocked(h.self))
	}
}

// goneErr is what a waiter of a hold that went while it waited answers:
// the lease's end, or a release by another call of the lease.
func (h *hold) goneErr(what string) error {
	if err := h.lease.alive(); err != nil {
		return err
	}
	return Errorf(CodeNotHeld, "%s %q was released while this call waited", what, h.name)
}

// describe fills the common part of h's HoldInfo; detail adds what is
// guarded by h.mu. h.mu is held across creates, which wait out a
// reconnect; a lease's listing (a keepalive's answer) must not, so a busy
// hold is described as waiting, without detail.
func (h *hold) describe(detail func(*HoldInfo)) HoldInfo {
	info := HoldInfo{Kind: h.kind, Name: h.name, State: "waiting", Since: h.since}
	if !h.mu.TryLock() {
		return info
	}
	defer h.mu.Unlock()
	if h.granted {
		info.State, info.Since, info.Token = "held", h.grantedAt, h.token
	}
	if detail != nil {
		detail(&info)
	}
	return info
}

// dropHeld drops lease's hold of type H on name (under key(name)), for
// the call op; a lease without one answers not_held, with notHeld
// formatted with the lease's id and the name.
func dropHeld[H holding](lease *Lease, name string, key func(string) string, op, notHeld string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := lease.alive(); err != nil {
		return err
	}
	h, ok := heldBy[H](lease, key(name))
	if !ok {
		return &Error{Code: CodeNotHeld, Detail: fmt.Sprintf(notHeld, lease.ID, name)}
	}
	if err := h.core().drop(); err != nil {
		return internal(err, op)
	}
	return nil
}

// heldBy returns the lease's live hold under key, if any.
func heldBy[H holding](lease *Lease, key string) (H, bool) {
	var zero H
	got, ok := lease.holdAt(key)
	if !ok {
		return zero, false
	}
	h, ok := got.(H)
	return h, ok
}

// stateLocked is h's common part; h.mu is held.
func (h *hold) stateLocked() HoldState {
	st := HoldState{Kind: h.kind, Key: h.key, Name: h.name, Since: h.since, Granted: h.granted, Token: h.token,
		GrantedAt: h.grantedAt, Told: h.told}
	for _, n := range h.nodes {
		st.Nodes = append(st.Nodes, NodeState{Role: n.role, Path: n.path, Czxid: n.czxid})
	}
	return st
}

// restoreLocked sets h's common part from st.
func (h *hold) restoreLocked(st HoldState) {
	h.since, h.granted, h.token, h.grantedAt, h.told = st.Since, st.Granted, st.Token, st.GrantedAt, st.Told
	for _, n := range st.Nodes {
		h.nodes = append(h.nodes, heldNode{role: n.Role, path: n.Path, czxid: n.Czxid})
	}
}
