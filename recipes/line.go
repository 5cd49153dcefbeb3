package recipes

import (
	"context"
	"errors"
	"log/slog"
	"path"
	"sync"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// A line is the sequential children of one parent (a lock, a semaphore's
// queue, an election), each waiting until no earlier node that blocks it is
// left, as Curator's LockInternals waits: waitTurn watches only the node it
// waits for, lists the line through the lister, and trusts the hand-over of
// a writer this gateway let through (passedWriters, handoffs). tokenOf and
// ownNode check that the node that got its turn is still the session's own;
// waitErr and retryable turn the end of a wait into the client's error.
// Locks and semaphores wait here through hold.waitInLine, elections directly.

// lines is what the waits and holds of one session share, and all that a
// recipe that waits in a line gets of the session (rather than the Service
// that bundles the recipes): the session, the armed watches and the
// coalesced listings of its lines, the hand-overs between its waiters,
// lock-delay's orphaned markers (lockdelay.go), its spans (tracing.go),
// and where grants, waits and holds are counted.
type lines struct {
	sess       *Session
	gatewayID  string
	log        *slog.Logger
	metrics    Metrics
	contention *Contention // shared with the sessions the gateway adopted
	watches    *nodeWatches
	lister     *lister
	passed     passedWriters
	handoffs   handoffs
	orphans    orphans // lock-delay markers found orphaned, and since when
	// leases is the session's table: a wait's span names the holder of a
	// lease of this gateway it waits behind (noteBehind).
	leases *Leases
}

func newLines(sess *Session, gatewayID string, log *slog.Logger, metrics Metrics, contention *Contention) *lines {
	return &lines{sess: sess, gatewayID: gatewayID, log: log, metrics: metrics, contention: contention,
		watches: newNodeWatches(sess), lister: newLister()}
}

// errNodeGone says the caller's node is not in its line any more.
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
// first one, instead of a listing of its own. beforeWait, when not nil, is
// called before each wait (behind a node, or for a lock-delay).
func (ln *lines) waitTurn(ctx context.Context, lease *Lease, parent, node string, after *listing, markers []marker,
	blocks func(c, self seqNode) bool, tryOnce bool, beforeWait func()) (turn, error) {
	var last turn
	listed := false
	floor := -1      // contenders at or below this index are known to be gone
	vouched := false // the delete of the last node waited for checked ours (see handoffs)
	for {
		if !listed {
			t, err := ln.lineAfter(ctx, lease, parent, node, after, markers)
			after = nil
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
			if beforeWait != nil {
				beforeWait()
			}
			held, err := ln.waitDelay(ctx, lease, parent, last, blocks, tryOnce)
			if err != nil {
				return last, err
			}
			if held {
				listed = false
				continue
			}
		}
		if b == "" {
			last.seen = floor < 0 || vouched
			if !last.contenders[last.index].Reader {
				ln.passed.note(parent, last.contenders[last.index].Name, last.parentID)
			}
			return last, nil
		}
		if tryOnce {
			return last, &Error{Code: CodeTimeout, Detail: "not first in line"}
		}
		if beforeWait != nil {
			beforeWait()
		}
		ln.noteBehind(ctx, parent, last.contenders[bi])
		// Registered before the watch is armed: a delete of b through this
		// gateway from now on vouches for node.
		ho := ln.handoffs.add(parent+"/"+b, node)
		present, nw, err := ln.watches.changed(ctx, parent+"/"+b)
		if err != nil {
			ln.handoffs.remove(ho)
			if err := ln.retryable(ctx, lease, err); err != nil {
				return last, err
			}
			continue
		}
		if !present {
			ln.handoffs.remove(ho)
			listed = false
			continue
		}
		last.waited = true
		ev, err := ln.watches.wait(ctx, nw)
		ln.handoffs.remove(ho)
		if err != nil {
			return last, waitErr(ctx, lease, context.Cause(ctx))
		}
		vouched = false
		switch {
		case ev.Type == zk.EventNodeDeleted && ln.passed.was(parent, b, last.parentID) && !last.marked(b):
			// (A node with a lock-delay marker may have gone without a
			// release: its marker then stands in its place; listed again.)
			floor = bi // a hand-over: nothing before us is left up to b
			vouched = ln.handoffs.vouched(ctx, ho)
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

// lineAfter finds node in after, a listing of parent made after node was,
// or lists parent itself when after is nil.
func (ln *lines) lineAfter(ctx context.Context, lease *Lease, parent, node string, after *listing, markers []marker) (turn, error) {
	if after != nil {
		return after.find(node, markers)
	}
	return ln.listLine(ctx, lease, parent, node, markers)
}

// waitDelay waits out the lock-delay that holds back the caller's node in
// t, nothing before it being left; held says there was one to wait for
// (the line is then to be listed again).
func (ln *lines) waitDelay(ctx context.Context, lease *Lease, parent string, t turn,
	blocks func(c, self seqNode) bool, tryOnce bool) (held bool, err error) {
	until, _, _, expired := ln.heldBack(parent, t.marks, t.contenders[t.index], t.present, blocks)
	ln.dropMarks(expired)
	if until.IsZero() {
		return false, nil
	}
	return true, ln.waitHeldBack(ctx, lease, until, tryOnce)
}

// listLine lists parent (coalesced with the other waiters of this gateway)
// and finds node in it; errNodeGone when it is not there.
func (ln *lines) listLine(ctx context.Context, lease *Lease, parent, node string, markers []marker) (turn, error) {
	for {
		// Shared with the other waiters of this gateway that list it now.
		span := ln.zkSpan(ctx, "children", parent)
		f := ln.lister.list(ln.sess.Conn(), parent)
		endZK(span, f.err)
		if f.err != nil && !errors.Is(f.err, zk.ErrNoNode) {
			if err := ln.retryable(ctx, lease, f.err); err != nil {
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
func (ln *lines) tokenOf(ctx context.Context, lease *Lease, h *hold, node string, czxid int64, t turn) (int64, error) {
	if czxid != 0 && t.seen {
		if err := ln.sess.check(lease.epoch); err != nil {
			return 0, err
		}
		return czxid, nil
	}
	st, err := ln.ownNode(ctx, lease, node)
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
func (ln *lines) ownNode(ctx context.Context, lease *Lease, node string) (*zk.Stat, error) {
	for {
		span := ln.zkSpan(ctx, "exists", path.Dir(node))
		ok, stat, err := ln.sess.Conn().Exists(node)
		endZK(span, err)
		if err != nil {
			if err := ln.retryable(ctx, lease, err); err != nil {
				return nil, err
			}
			continue
		}
		if !ok {
			return nil, errNodeGone
		}
		if err := ln.sess.check(lease.epoch); err != nil {
			return nil, err
		}
		if _, _, sid := ln.sess.Status(); stat.EphemeralOwner != sid {
			// A node of an older session is not ours: that session, and
			// with it the lease, is gone.
			lease.end(EndSessionLost)
			return nil, leaseEnded(lease.ID, EndSessionLost)
		}
		return stat, nil
	}
}

// tryOnceBound bounds the ZooKeeper work of a request that asked not to wait.
const tryOnceBound = 5 * time.Second

// waitBound is how long a request may take: its wait, or for a try-once
// (wait 0) a few seconds to ride out a reconnect.
func waitBound(wait time.Duration) time.Duration {
	if wait > 0 {
		return wait
	}
	return tryOnceBound
}

// waitContext is ctx for a wait on lease: it ends when the wait elapses
// (waitBound, cause errWaitElapsed) or the lease does, whichever is first.
// Its cancel also unhooks it from the lease.
func waitContext(ctx context.Context, lease *Lease, wait time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeoutCause(ctx, waitBound(wait), errWaitElapsed)
	stop := context.AfterFunc(lease.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

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
func (ln *lines) retryable(ctx context.Context, lease *Lease, err error) error {
	if ctx.Err() != nil {
		return waitErr(ctx, lease, context.Cause(ctx))
	}
	if !ambiguous(err) {
		return internal(err, "ZooKeeper request")
	}
	if werr := ln.sess.WaitLive(ctx); werr != nil {
		return waitErr(ctx, lease, werr)
	}
	return lease.alive()
}
