package recipes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
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
type Locks struct {
	*lines
	cache *watchCache
	keep  *keepers
	of    func(*Lease) *Locks // the locks of the lease's session
}

// LockGrant is a held lock.
type LockGrant struct {
	Name       string    `json:"name"`
	Mode       string    `json:"mode"`
	Lease      string    `json:"lease"`
	Token      int64     `json:"token"`
	Node       string    `json:"node"`
	AcquiredAt time.Time `json:"acquired_at"`
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

func (k *Locks) parent(name string) string { return kinds.Locks.Path(k.sess.Root(), name) }

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
	if o := k.of(lease); o != k {
		return o.Acquire(ctx, lease, name, mode, wait)
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
		return &lockHold{hold: newHold(k.lines, lease, "lock", key, name), mode: mode, parent: k.parent(name)}
	}, nil)
	if err != nil {
		return LockGrant{}, err
	}
	k.metrics.Waiting("lock", 1)
	start := time.Now()
	sctx, span := k.startWait(ctx, KindLock, name, mode, lease)
	// The deadlock detector ends the wait with its cause (see deadlock.go).
	wctx, abort := context.WithCancelCause(sctx)
	entry := k.contention.startWait(&h.hold, KindLock, mode, abort)
	hctx, stop := h.whileHeld(wctx, Errorf(CodeNotHeld, "lock %q was released while this call waited", name))
	g, err := k.wait(withLineNotes(hctx, k.contention, KindLock, name), h, wait)
	stop()
	abort(nil)
	endWait(span, err, g.Token)
	k.contention.endWait(entry, err)
	k.metrics.Waiting("lock", -1)
	h.mu.Lock()
	last := h.last
	h.mu.Unlock()
	h.leave(false) // an acquire that failed, and was the last to wait, deletes its node
	if err == nil {
		k.metrics.Granted("lock", time.Since(start))
		return g, nil
	}
	if e, ok := err.(*Error); ok && e.Code == CodeTimeout && ctx.Err() == nil {
		// Tell the caller where it stood, from the line its wait last saw.
		e.Extra = withExtra(e, k.lineState(ctx, h.parent, last))
	}
	return LockGrant{}, err
}

// wait makes h's node if it has none and waits until it holds the lock.
func (k *Locks) wait(ctx context.Context, h *lockHold, wait time.Duration) (LockGrant, error) {
	sess, lease := k.sess, h.lease
	// A try-once (wait 0) still gets a few seconds to ride out a reconnect.
	ctx, cancel := waitContext(ctx, lease, wait)
	defer cancel()
	for {
		h.mu.Lock()
		if h.granted && !h.gone {
			g := h.grantLocked()
			h.mu.Unlock()
			return g, nil
		}
		h.mu.Unlock()
		node, czxid, after, done, err := h.ensureInLine(lockRole, h.parent, func(list bool) (string, *zk.Stat, *listing, error) {
			data := nodeData{Lease: lease.ID, Holder: lease.Holder, Gateway: k.gatewayID}.bytes()
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
		token, err := k.tokenOf(ctx, lease, &h.hold, node, czxid, t)
		if err == nil {
			err = k.markDelay(ctx, &h.hold, h.parent, node)
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

// maxListedHolders bounds the holders a timeout names.
const maxListedHolders = 100

// lineState describes a line as a timeout tells it: the holders (read one
// by one: they are few), how many wait, and the caller's former position
// (1: next in line). It never lists the whole line again: with thousands of
// waiters timing out, that would be thousands of reads each.
func (k *Locks) lineState(ctx context.Context, parent string, t turn) map[string]any {
	holders := []Contender{}
	waiters, position := 0, 0
	conn := k.sess.Conn()
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
		span := k.zkSpan(ctx, "get", parent)
		data, stat, err := conn.Get(parent + "/" + c.Name)
		endZK(span, err)
		if err != nil {
			continue // released meanwhile
		}
		holders = append(holders, holderOf(c, Node{Name: c.Name, Data: data, Stat: *stat}))
	}
	k.keep.keptBy(holders)
	extra := map[string]any{"holders": holders, "waiters": waiters}
	if position > 0 {
		extra["position"] = position
	}
	return extra
}

// Release gives up what lease holds (or waits for) of lock name: every mode,
// or only mode when it is not "".
func (k *Locks) Release(ctx context.Context, lease *Lease, name, mode string) error {
	if o := k.of(lease); o != k {
		return o.Release(ctx, lease, name, mode)
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
		if err := h.core().dropFor(ctx); err != nil && first == nil {
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
	st, err := readState(ctx, k.cache, name, k.parent(name), seqOpts, index, wait, lockStateOf)
	if err == nil {
		k.keep.keptBy(st.Holders, st.Waiters)
	}
	return st, err
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

// List returns one page of the locks whose name starts with prefix, with
// counts, and the name the next page starts after ("" for the last page).
func (k *Locks) List(ctx context.Context, prefix string, p Page) ([]LockSummary, string, error) {
	base := kinds.Locks.Dir(k.sess.Root())
	// Locks whose parent vanished in between have no holders: left out.
	return listPage(ctx, k.sess, base, p, hasPrefix(prefix), func(ctx context.Context, name string) (LockSummary, bool, error) {
		kids, err := k.sess.children(ctx, base+"/"+name)
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
	sess := k.sess
	if st, _, _ := sess.Status(); st != StateLive {
		return false, unavailable()
	}
	parent := k.parent(name)
	if _, err := sess.fresh(ctx); err != nil {
		return false, readErr(err)
	}
	conn := sess.Conn()
	kids, err := k.sess.children(ctx, parent)
	if err != nil {
		return false, err
	}
	holders, _ := splitLock(sortContenders(kids, lockMarkers))
	for _, c := range holders {
		ok, stat, err := conn.Exists(parent + "/" + c.Name)
		if err != nil {
			return false, readErr(err)
		}
		if ok && stat.Czxid == token {
			return true, nil
		}
	}
	return false, nil
}

// WithoutSessions leaves out the holders' and waiters' session ids.
func (s *LockState) WithoutSessions() {
	s.Holders, s.Waiters = withoutSessions(s.Holders), withoutSessions(s.Waiters)
}
