package recipes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// Lock modes.
const (
	ModeExclusive = "exclusive"
	ModeRead      = "read"
	ModeWrite     = "write"
)

// nodeMarker is the text before the sequence number of a lock node of each
// mode, as Curator's InterProcessMutex and InterProcessReadWriteLock write it.
var nodeMarker = map[string]string{ModeExclusive: "lock-", ModeRead: "__READ__", ModeWrite: "__WRIT__"}

// Locks are exclusive and read/write locks under {root}/locks/{name}.
type Locks struct{ svc *Service }

// LockGrant is a held lock.
type LockGrant struct {
	Name       string    `json:"name"`
	Mode       string    `json:"mode"`
	Lease      string    `json:"lease"`
	Token      int64     `json:"token"`
	Node       string    `json:"node"`
	AcquiredAt time.Time `json:"acquired_at"`
}

// Contender is one node in the line of a lock, semaphore or election, as
// any client sees it: holding, waiting, or leading. Holder is the label of
// its lease (or a foreign node's data).
type Contender struct {
	Node    string    `json:"node"`
	Seq     int64     `json:"seq"`
	Token   int64     `json:"token"`
	Mode    string    `json:"mode,omitempty"`
	Lease   string    `json:"lease,omitempty"`
	Holder  string    `json:"holder"`
	Session string    `json:"session"`
	Since   time.Time `json:"since"`
	Foreign bool      `json:"foreign"`
	Gateway string    `json:"gateway,omitempty"`
	Value   string    `json:"value,omitempty"`
	Limit   int       `json:"limit,omitempty"`
}

// LockState is who holds a lock and who waits, in queue order.
type LockState struct {
	Name    string      `json:"name"`
	Holders []Contender `json:"holders"`
	Waiters []Contender `json:"waiters"`
	Index   int64       `json:"-"`
}

// LockSummary is one line of the lock list.
type LockSummary struct {
	Name    string `json:"name"`
	Holders int    `json:"holders"`
	Waiters int    `json:"waiters"`
}

func (k *Locks) parent(name string) string { return k.svc.sess.Root() + "/locks/" + name }

// lockHold is a lease's node in one lock, held or waited for. Retries of the
// same acquire by the same lease share it: one node, one grant.
type lockHold struct {
	hold
	mode   string
	parent string
	last   turn // what the last wait saw of the line (guarded by hold.mu)
}

const lockRole = "lock"

func (h *lockHold) info() HoldInfo {
	info := h.describe(func(i *HoldInfo) { i.Node = h.nodeLocked(lockRole) })
	info.Mode = h.mode
	return info
}

// grantLocked is the grant h holds.
func (h *lockHold) grantLocked() LockGrant {
	return LockGrant{Name: h.name, Mode: h.mode, Lease: h.lease.ID, Token: h.token, Node: h.nodeLocked(lockRole), AcquiredAt: h.grantedAt}
}

func lockKey(name, mode string) string { return "lock\x00" + name + "\x00" + mode }

// ValidMode checks a lock mode; "" means exclusive.
func ValidMode(mode string) (string, error) {
	switch mode {
	case "":
		return ModeExclusive, nil
	case ModeExclusive, ModeRead, ModeWrite:
		return mode, nil
	}
	return "", Errorf(CodeInvalid, "mode must be exclusive, read or write")
}

// Acquire takes the lock name in mode for lease, waiting up to wait (0: try
// once). A lease that already holds it gets the same grant again. When the
// wait ends first, or ctx is cancelled, the waiter node is deleted before
// Acquire returns, and the error is a timeout carrying the lock's state.
func (k *Locks) Acquire(ctx context.Context, lease *Lease, name, mode string, wait time.Duration) (LockGrant, error) {
	if s := lease.service(); s != k.svc {
		return s.Locks.Acquire(ctx, lease, name, mode, wait)
	}
	if err := ValidName(name); err != nil {
		return LockGrant{}, err
	}
	mode, err := ValidMode(mode)
	if err != nil {
		return LockGrant{}, err
	}
	if err := lease.alive(); err != nil {
		return LockGrant{}, err
	}
	// A lease may read what it writes, but a second writer-class node of its
	// own, or a writer behind its own reader, would wait for itself forever.
	for _, other := range lease.holdsWithPrefix(lockKey(name, "")) {
		om := other.(*lockHold).mode
		if om != mode && (mode != ModeRead || om == ModeRead) {
			return LockGrant{}, &Error{Code: CodeWouldDeadlock,
				Detail: fmt.Sprintf("lease already has lock %q in mode %s: release it before asking for mode %s", name, om, mode)}
		}
	}
	key := lockKey(name, mode)
	h, err := joinHold(lease, key, func() *lockHold {
		return &lockHold{hold: newHold(k.svc, lease, "lock", key, name), mode: mode, parent: k.parent(name)}
	}, nil)
	if err != nil {
		return LockGrant{}, err
	}
	k.svc.metrics.Waiting("lock", 1)
	start := time.Now()
	// The deadlock detector ends the wait with its cause (see deadlock.go).
	wctx, abort := context.WithCancelCause(ctx)
	entry := k.svc.contention.startWait(&h.hold, KindLock, mode, abort)
	g, err := k.wait(withLineNotes(wctx, k.svc.contention, KindLock, name), h, wait)
	abort(nil)
	k.svc.contention.endWait(entry, err)
	k.svc.metrics.Waiting("lock", -1)
	h.mu.Lock()
	last := h.last
	h.mu.Unlock()
	h.leave(false) // an acquire that failed, and was the last to wait, deletes its node
	if err == nil {
		k.svc.metrics.Granted("lock", time.Since(start))
		return g, nil
	}
	if e, ok := err.(*Error); ok && e.Code == CodeTimeout && ctx.Err() == nil {
		// Tell the caller where it stood, from the line its wait last saw.
		e.Extra = withExtra(e, k.svc.lineState(h.parent, last))
	}
	return LockGrant{}, err
}

// wait makes h's node if it has none and waits until it holds the lock.
func (k *Locks) wait(ctx context.Context, h *lockHold, wait time.Duration) (LockGrant, error) {
	sess, lease := k.svc.sess, h.lease
	// A try-once (wait 0) still gets a few seconds to ride out a reconnect.
	ctx, cancel := context.WithTimeoutCause(ctx, waitBound(wait), errWaitElapsed)
	defer cancel()
	stop := context.AfterFunc(lease.ctx, cancel)
	defer stop()
	for {
		h.mu.Lock()
		if h.granted && !h.gone {
			g := h.grantLocked()
			h.mu.Unlock()
			return g, nil
		}
		h.mu.Unlock()
		node, czxid, after, done, err := h.ensureInLine(lockRole, h.parent, func(list bool) (string, *zk.Stat, *listing, error) {
			data := nodeData{Lease: lease.ID, Holder: lease.Holder, Gateway: k.svc.gatewayID}.bytes()
			return sess.createProtected(ctx, h.parent, lease.ID, nodeMarker[h.mode], data, lease.epoch, list)
		})
		if errors.Is(err, errHoldGone) {
			return LockGrant{}, h.goneErr("lock")
		}
		if err != nil {
			return LockGrant{}, waitErr(ctx, lease, err)
		}
		t, again, err := h.waitInLine(ctx, lockRole, h.parent, node, after, lockMarkers, lockBlocks, wait <= 0)
		done()
		h.mu.Lock()
		h.last = t
		h.mu.Unlock()
		if again {
			continue // our node went though our lease lives: a new one, unless released
		}
		if err != nil {
			if ErrorCode(err) == CodeTimeout && wait <= 0 && !heldBackErr(err) {
				return LockGrant{}, &Error{Code: CodeTimeout, Detail: fmt.Sprintf("lock %q is held", h.name)}
			}
			return LockGrant{}, err
		}
		token, err := k.svc.tokenOf(ctx, lease, &h.hold, node, czxid, t)
		if err == nil {
			err = k.svc.markDelay(ctx, &h.hold, h.parent, node)
		}
		if errors.Is(err, errNodeGone) {
			continue // the next turn finds out why
		}
		if errors.Is(err, errHoldGone) {
			return LockGrant{}, h.goneErr("lock")
		}
		if err != nil {
			return LockGrant{}, err
		}
		h.mu.Lock()
		if h.gone || h.nodeLocked(lockRole) != node {
			h.mu.Unlock()
			continue
		}
		h.markGrantedLocked(token)
		g := h.grantLocked()
		h.mu.Unlock()
		return g, nil
	}
}

var errNodeGone = errors.New("node gone")

// turn is what a wait last saw of its line: the contenders in order, its
// own place among them, and whether it had to wait.
type turn struct {
	contenders []seqNode
	index      int
	waited     bool
	// seen: the caller's node was still there when nothing blocked it any
	// more: it was in a listing made after its last wait, or the delete
	// that ended that wait checked it (see handoffs).
	seen     bool
	parentID int64 // the parent's czxid: which incarnation of a container parent
	// marks are the line's lock-delay markers (see lockdelay.go), and
	// present says whether a node of the line exists (set when marks are).
	marks   []delayMark
	present func(name string) bool
}

// marked says whether the node named name has a lock-delay marker in t.
func (t turn) marked(name string) bool {
	for _, m := range t.marks {
		if m.holder == name {
			return true
		}
	}
	return false
}

// waitTurn waits until no earlier seqNode of parent that blocks node (as
// blocks says) is left, watching only the one it waits for. tryOnce makes
// it answer a timeout at once instead of waiting. It returns what it last
// saw of the line, also with a timeout, so that the answer can say where
// the caller stood without listing the line again.
//
// When the watched node goes, the line is listed again (coalesced with the
// other waiters of this gateway), except when that node was the writer this
// gateway last let through: then every node before it was gone already (a
// writer only goes through alone) and none can come back (later nodes get
// higher sequence numbers), so nothing before the caller is left. That is
// the hand-over of a drain, which thus needs no listing of the whole line.
//
// A nil error says that nothing blocks node any more; whether node itself
// still exists is for the caller to check.
//
// after, when not nil, is a listing of parent made after node was: the
// first one, instead of a listing of its own.
func (s *Service) waitTurn(ctx context.Context, lease *Lease, parent, node string, after *listing, markers []marker,
	blocks func(c, self seqNode) bool, tryOnce bool) (turn, error) {
	var last turn
	listed := false
	floor := -1      // contenders at or below this index are known to be gone
	vouched := false // the delete of the last node waited for checked ours (see handoffs)
	for {
		if !listed {
			var t turn
			var err error
			if after != nil {
				t, err = after.find(node, markers)
				after = nil
			} else {
				t, err = s.listLine(ctx, lease, parent, node, markers)
			}
			if err != nil {
				return last, err
			}
			last, listed, floor = t, true, -1
			noteLine(ctx, last)
		}
		b, bi := last.blocker(floor, blocks)
		if b == "" && len(last.marks) > 0 {
			// Nothing before the caller is left, but the lock-delay of one
			// that ended without releasing may still hold it back.
			until, _, _, expired := s.heldBack(parent, last.marks, last.contenders[last.index], last.present, blocks)
			s.dropMarks(expired)
			if !until.IsZero() {
				if err := s.waitHeldBack(ctx, lease, until, tryOnce); err != nil {
					return last, err
				}
				listed = false
				continue
			}
		}
		if b == "" {
			last.seen = floor < 0 || vouched
			if !last.contenders[last.index].Reader {
				s.passed.note(parent, last.contenders[last.index].Name, last.parentID)
			}
			return last, nil
		}
		if tryOnce {
			return last, &Error{Code: CodeTimeout, Detail: "not first in line"}
		}
		// Registered before the watch is armed: a delete of b through this
		// gateway from now on vouches for node.
		ho := s.handoffs.add(parent+"/"+b, node)
		present, nw, err := s.watches.changed(ctx, parent+"/"+b)
		if err != nil {
			s.handoffs.remove(ho)
			if err := s.retryable(ctx, lease, err); err != nil {
				return last, err
			}
			continue
		}
		if !present {
			s.handoffs.remove(ho)
			listed = false
			continue
		}
		last.waited = true
		ev, err := s.watches.wait(ctx, nw)
		s.handoffs.remove(ho)
		if err != nil {
			return last, waitErr(ctx, lease, context.Cause(ctx))
		}
		vouched = false
		switch {
		case ev.Type == zk.EventNodeDeleted && s.passed.was(parent, b, last.parentID) && !last.marked(b):
			// (A node with a lock-delay marker may have gone without a
			// release: its marker then stands in its place; listed again.)
			floor = bi // a hand-over: nothing before us is left up to b
			vouched = s.handoffs.vouched(ctx, ho)
		case ev.Type == zk.EventNotWatching:
			// The session ended or the connection was replaced.
			if err := lease.alive(); err != nil {
				return last, err
			}
			listed = false
		default:
			listed = false
		}
	}
}

// listLine lists parent (coalesced with the other waiters of this gateway)
// and finds node in it; errNodeGone when it is not there.
func (s *Service) listLine(ctx context.Context, lease *Lease, parent, node string, markers []marker) (turn, error) {
	for {
		f := s.lister.list(s.sess.Conn(), parent)
		if f.err != nil && !errors.Is(f.err, zk.ErrNoNode) {
			if err := s.retryable(ctx, lease, f.err); err != nil {
				return turn{}, err
			}
			continue
		}
		return f.find(node, markers)
	}
}

// blocker returns the nearest earlier seqNode above floor that blocks the
// caller, and its index; "" when none does.
func (t turn) blocker(floor int, blocks func(c, self seqNode) bool) (string, int) {
	self := t.contenders[t.index]
	for j := t.index - 1; j > floor; j-- {
		if blocks(t.contenders[j], self) {
			return t.contenders[j].Name, j
		}
	}
	return "", -1
}

// passedWriters remembers, for each parent, the writer-class node this
// gateway last let through (see waitTurn), with the czxid of the parent it
// was under: a CONTAINER parent removed and made again restarts its
// sequence, and a name may come back.
type passedWriters struct {
	mu   sync.Mutex
	last map[string]passedNode
}

type passedNode struct {
	name     string
	parentID int64
}

func (p *passedWriters) note(parent, name string, parentID int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil || len(p.last) > 10_000 {
		p.last = map[string]passedNode{} // only a shortcut is lost
	}
	p.last[parent] = passedNode{name, parentID}
}

func (p *passedWriters) was(parent, name string, parentID int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.last[parent]
	return ok && parentID != 0 && n == passedNode{name, parentID}
}

// tokenOf returns the token of a grant of node, h's node, which nothing
// blocks any more (t is what the wait last saw of the line): the node's
// czxid. A node seen after the wait (t.seen), whose czxid came with its
// create, needs no read: it is known to be still there, and its create's
// stat showed it the session's own. Any other is read (see ownNode), and
// its czxid noted.
func (s *Service) tokenOf(ctx context.Context, lease *Lease, h *hold, node string, czxid int64, t turn) (int64, error) {
	if czxid != 0 && t.seen {
		if err := s.sess.check(lease.epoch); err != nil {
			return 0, err
		}
		return czxid, nil
	}
	st, err := s.ownNode(ctx, lease, node)
	if err != nil {
		return 0, err
	}
	h.mu.Lock()
	h.noteCzxidLocked(node, st.Czxid)
	h.mu.Unlock()
	return st.Czxid, nil
}

// ownNode returns the stat of node once the session is live and the node is
// the current session's own.
func (s *Service) ownNode(ctx context.Context, lease *Lease, node string) (*zk.Stat, error) {
	for {
		ok, stat, err := s.sess.Conn().Exists(node)
		if err != nil {
			if err := s.retryable(ctx, lease, err); err != nil {
				return nil, err
			}
			continue
		}
		if !ok {
			return nil, errNodeGone
		}
		if err := s.sess.check(lease.epoch); err != nil {
			return nil, err
		}
		if _, _, sid := s.sess.Status(); stat.EphemeralOwner != sid {
			// A node of an older session is not ours: that session, and
			// with it the lease, is gone.
			lease.end(EndSessionLost)
			return nil, leaseEnded(lease.ID, EndSessionLost)
		}
		return stat, nil
	}
}

var errWaitElapsed = errors.New("wait elapsed")

// waitErr turns the end of a wait into the error the client should see.
func waitErr(ctx context.Context, lease *Lease, err error) error {
	if lease != nil && lease.ctx.Err() != nil {
		if errors.Is(context.Cause(lease.ctx), ErrMoving) {
			return ErrMoving // the wait resumes on the gateway the lease moves to
		}
		<-lease.done
		return leaseEnded(lease.ID, lease.reason)
	}
	var e *Error
	if errors.As(context.Cause(ctx), &e) {
		return e // e.g. ErrShuttingDown
	}
	if errors.Is(context.Cause(ctx), errWaitElapsed) || errors.Is(err, errWaitElapsed) {
		return &Error{Code: CodeTimeout, Detail: "the wait elapsed first"}
	}
	if ctx.Err() != nil {
		return &Error{Code: CodeTimeout, Detail: "the request was cancelled", Err: ctx.Err()}
	}
	return err
}

// retryable waits out a connection problem; any other error ends the wait.
// A request cut short by the end of the wait (it elapsed, the client hung
// up) is that end, not an internal error.
func (s *Service) retryable(ctx context.Context, lease *Lease, err error) error {
	if ctx.Err() != nil {
		return waitErr(ctx, lease, context.Cause(ctx))
	}
	if !ambiguous(err) {
		return internal(err, "ZooKeeper request")
	}
	if werr := s.sess.WaitLive(ctx); werr != nil {
		return waitErr(ctx, lease, werr)
	}
	return lease.alive()
}

// maxListedHolders bounds the holders a timeout names.
const maxListedHolders = 100

// lineState describes a line as a timeout tells it: the holders (read one
// by one: they are few), how many wait, and the caller's former position
// (1: next in line). It never lists the whole line again: with thousands of
// waiters timing out, that would be thousands of reads each.
func (s *Service) lineState(parent string, t turn) map[string]any {
	holders := []Contender{}
	waiters, position := 0, 0
	conn := s.sess.Conn()
	for i, c := range t.contenders {
		if lockBlocker(t.contenders, i) != "" {
			waiters++
			if i == t.index {
				position = waiters
			}
			continue
		}
		if len(holders) == maxListedHolders {
			continue
		}
		data, stat, err := conn.Get(parent + "/" + c.Name)
		if err != nil {
			continue // released meanwhile
		}
		holders = append(holders, holderOf(c, Node{Name: c.Name, Data: data, Stat: *stat}))
	}
	extra := map[string]any{"holders": holders, "waiters": waiters}
	if position > 0 {
		extra["position"] = position
	}
	return extra
}

// Release gives up what lease holds (or waits for) of lock name: every mode,
// or only mode when it is not "".
func (k *Locks) Release(ctx context.Context, lease *Lease, name, mode string) error {
	if s := lease.service(); s != k.svc {
		return s.Locks.Release(ctx, lease, name, mode)
	}
	if err := ValidName(name); err != nil {
		return err
	}
	if mode != "" {
		if _, err := ValidMode(mode); err != nil {
			return err
		}
	}
	if err := lease.alive(); err != nil {
		return err
	}
	holds := lease.holdsWithPrefix(lockKey(name, mode))
	if len(holds) == 0 {
		return &Error{Code: CodeNotHeld, Detail: fmt.Sprintf("lease %s holds no lock %q", lease.ID, name)}
	}
	var first error
	for _, h := range holds {
		if err := h.core().drop(); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return internal(first, "release lock")
	}
	return nil
}

// State returns the holders and waiters of a lock from the watch cache. With
// index > 0 it is a blocking read (see watchCache.Read).
func (k *Locks) State(ctx context.Context, name string, index int64, wait time.Duration) (LockState, error) {
	if err := ValidName(name); err != nil {
		return LockState{}, err
	}
	snap, err := k.svc.cache.Read(ctx, k.parent(name), seqOpts, index, wait)
	if err != nil {
		return LockState{}, k.svc.readErr(err)
	}
	return lockStateOf(name, snap), nil
}

func lockStateOf(name string, snap *Snapshot) LockState {
	st := LockState{Name: name, Holders: []Contender{}, Waiters: []Contender{}, Index: snap.Index}
	names := make([]string, len(snap.Children))
	byName := map[string]Node{}
	for i, n := range snap.Children {
		names[i] = n.Name
		byName[n.Name] = n
	}
	holders, waiters := splitLock(sortContenders(names, lockMarkers))
	for _, c := range holders {
		st.Holders = append(st.Holders, holderOf(c, byName[c.Name]))
	}
	for _, c := range waiters {
		st.Waiters = append(st.Waiters, holderOf(c, byName[c.Name]))
	}
	return st
}

func holderOf(c seqNode, n Node) Contender {
	h := Contender{Node: c.Name, Seq: c.Seq, Token: n.Stat.Czxid, Mode: c.Mode,
		Session: fmt.Sprintf("0x%x", uint64(n.Stat.EphemeralOwner)), Since: time.UnixMilli(n.Stat.Ctime).UTC()}
	if d, ok := parseNodeData(n.Data); ok {
		h.Lease, h.Holder, h.Gateway, h.Value, h.Limit = d.Lease, d.Holder, d.Gateway, d.Value, d.Limit
	} else {
		h.Foreign = true
		h.Holder = printable(n.Data)
	}
	return h
}

// printable shows foreign node data as text, replacing what is not.
func printable(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '.'
		}
		return r
	}, s)
}

// List returns one page of the locks whose name starts with prefix, with
// counts, and the name the next page starts after ("" for the last page).
func (k *Locks) List(ctx context.Context, prefix string, p Page) ([]LockSummary, string, error) {
	base := k.svc.sess.Root() + "/locks"
	ctx, names, err := k.svc.listNames(ctx, base)
	if err != nil {
		return nil, "", err
	}
	// Locks whose parent vanished in between have no holders: left out.
	return listPage(ctx, k.svc, names, p, hasPrefix(prefix), func(ctx context.Context, name string) (LockSummary, bool, error) {
		kids, err := k.svc.children(ctx, base+"/"+name)
		if err != nil {
			return LockSummary{}, false, err
		}
		h, w := splitLock(sortContenders(kids, lockMarkers))
		return LockSummary{Name: name, Holders: len(h), Waiters: len(w)}, len(h)+len(w) > 0, nil
	})
}

// Fence reports whether token is the token of a current holder of the lock,
// after a sync with the ensemble's leader, so a released token is never
// reported current.
func (k *Locks) Fence(ctx context.Context, name string, token int64) (bool, error) {
	if err := ValidName(name); err != nil {
		return false, err
	}
	sess := k.svc.sess
	if st, _, _ := sess.Status(); st != StateLive {
		return false, unavailable()
	}
	parent := k.parent(name)
	if _, err := sess.fresh(ctx); err != nil {
		return false, k.svc.readErr(err)
	}
	conn := sess.Conn()
	kids, err := k.svc.children(ctx, parent)
	if err != nil {
		return false, err
	}
	holders, _ := splitLock(sortContenders(kids, lockMarkers))
	for _, c := range holders {
		ok, stat, err := conn.Exists(parent + "/" + c.Name)
		if err != nil {
			return false, k.svc.readErr(err)
		}
		if ok && stat.Czxid == token {
			return true, nil
		}
	}
	return false, nil
}
