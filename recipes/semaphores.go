package recipes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// Semaphores follow Curator's InterProcessSemaphoreV2: a mutex in
// {root}/semaphores/{name}/locks admits one seqNode at a time to
// .../leases, where it creates a `lease-` node and waits until at most
// limit such nodes exist. Its lease node is its slot.
type Semaphores struct {
	*lines
	cache *watchCache
	keep  *keepers
	of    func(*Lease) *Semaphores // the semaphores of the lease's session
}

// MaxSemaphoreLimit bounds a semaphore's limit.
const MaxSemaphoreLimit = 100_000

// SemaphoreGrant is a held slot.
type SemaphoreGrant struct {
	Name       string    `json:"name"`
	Lease      string    `json:"lease"`
	Limit      int       `json:"limit"`
	Token      int64     `json:"token"`
	Node       string    `json:"node"`
	AcquiredAt time.Time `json:"acquired_at"`
}

// SemaphoreState lists the slot holders and the queue for the next slot.
type SemaphoreState struct {
	Name    string      `json:"name"`
	Limit   int         `json:"limit,omitempty"` // as the zkgate holders give it; absent when unknown
	Holders []Contender `json:"holders"`
	Waiters []Contender `json:"waiters"`
	Index   int64       `json:"-"`
}

func (m *Semaphores) base(name string) string { return kinds.Semaphores.Path(m.sess.Root(), name) }

// The two lines of a semaphore, children of its node: the admission queue
// (locks) and the slots (leases).
const semAdmissionDir, semSlotsDir = "locks", "leases"

// semHold is a lease's place in a semaphore: its node in the admission
// queue while it waits, then its slot node.
type semHold struct {
	hold
	limit int
}

// The roles of a semaphore hold's nodes.
const (
	admissionRole = "admission" // in .../locks, while waiting to be admitted
	slotRole      = "slot"      // in .../leases
)

func (h *semHold) info() HoldInfo {
	return h.describe(func(i *HoldInfo) {
		i.Node = h.nodeLocked(admissionRole)
		if h.granted {
			i.Node = h.nodeLocked(slotRole)
		}
	})
}

func (h *semHold) grantLocked() SemaphoreGrant {
	return SemaphoreGrant{Name: h.name, Lease: h.lease.ID, Limit: h.limit, Token: h.token, Node: h.nodeLocked(slotRole), AcquiredAt: h.grantedAt}
}

func semaphoreKey(name string) string { return "semaphore\x00" + name }

// Acquire takes one slot of semaphore name for lease, waiting up to wait.
// A limit different from the one its current zkgate holders use is
// limit_mismatch.
func (m *Semaphores) Acquire(ctx context.Context, lease *Lease, name string, limit int, wait time.Duration) (SemaphoreGrant, error) {
	if o := m.of(lease); o != m {
		return o.Acquire(ctx, lease, name, limit, wait)
	}
	if err := ValidName(name); err != nil {
		return SemaphoreGrant{}, err
	}
	if limit < 1 || limit > MaxSemaphoreLimit {
		return SemaphoreGrant{}, Errorf(CodeInvalid, "limit must be between 1 and %d", MaxSemaphoreLimit)
	}
	if err := lease.alive(); err != nil {
		return SemaphoreGrant{}, err
	}
	key := semaphoreKey(name)
	h, err := joinHold(lease, key, func() *semHold {
		return &semHold{hold: newHold(m.lines, lease, "semaphore", key, name), limit: limit}
	}, func(h *semHold) error {
		if h.limit != limit {
			return &Error{Code: CodeLimitMismatch,
				Detail: fmt.Sprintf("this lease already asked for semaphore %q with limit %d", name, h.limit),
				Extra:  map[string]any{"limit": h.limit}}
		}
		return nil
	})
	if err != nil {
		return SemaphoreGrant{}, err
	}
	m.metrics.Waiting("semaphore", 1)
	start := time.Now()
	sctx, span := m.startWait(ctx, KindSemaphore, name, "", lease)
	// The deadlock detector ends the wait with its cause (see deadlock.go).
	wctx, abort := context.WithCancelCause(sctx)
	entry := m.contention.startWait(&h.hold, KindSemaphore, "", abort)
	g, err := m.wait(withLineNotes(wctx, m.contention, KindSemaphore, name), h, wait)
	abort(nil)
	endWait(span, err, g.Token)
	m.contention.endWait(entry, err)
	m.metrics.Waiting("semaphore", -1)
	h.leave(false)
	if err != nil {
		if e, ok := err.(*Error); ok && e.Code == CodeTimeout {
			if !heldBackErr(e) {
				e.Detail = fmt.Sprintf("no slot of semaphore %q became free in time", name)
			}
			e.Extra = withExtra(e, m.timeoutState(name))
		}
		return SemaphoreGrant{}, err
	}
	m.metrics.Granted("semaphore", time.Since(start))
	return g, nil
}

func (m *Semaphores) wait(ctx context.Context, h *semHold, wait time.Duration) (SemaphoreGrant, error) {
	ln, lease := m.lines, h.lease
	ctx, cancel := waitContext(ctx, lease, wait)
	defer cancel()
	base := m.base(h.name)
	data := nodeData{Lease: lease.ID, Holder: lease.Holder, Gateway: ln.gatewayID, Limit: h.limit}.bytes()
	create := func(dir, marker string) func(list bool) (string, *zk.Stat, *listing, error) {
		return func(list bool) (string, *zk.Stat, *listing, error) {
			return ln.sess.createProtected(ctx, dir, lease.ID, marker, data, lease.epoch, list)
		}
	}
	var marks []delayMark // the lock-delay markers the admission line showed
	for {
		h.mu.Lock()
		if h.granted && !h.gone {
			g := h.grantLocked()
			h.mu.Unlock()
			return g, nil
		}
		admitted := h.nodeLocked(slotRole) != ""
		h.mu.Unlock()
		// First the admission mutex, unless a slot node is already made.
		if !admitted {
			var again bool
			var err error
			marks, again, err = m.admit(ctx, h, base, create(base+"/locks", "lock-"), wait)
			if again {
				continue
			}
			if err != nil {
				return SemaphoreGrant{}, err
			}
		}
		slot, _, err := h.ensureNode(slotRole, func() (string, *zk.Stat, error) {
			p, st, _, err := create(base+"/leases", "lease-")(false)
			return p, st, err
		})
		if errors.Is(err, errHoldGone) {
			return SemaphoreGrant{}, h.goneErr("semaphore")
		}
		if err != nil {
			return SemaphoreGrant{}, waitErr(ctx, lease, err)
		}
		stat, err := m.waitSlot(ctx, lease, base, slot, h.limit, wait <= 0, marks)
		if err == nil {
			err = ln.markDelay(ctx, &h.hold, base+"/locks", slot)
		}
		if errors.Is(err, errNodeGone) {
			h.forgetNode(slotRole, slot)
			continue
		}
		if errors.Is(err, errHoldGone) {
			return SemaphoreGrant{}, h.goneErr("semaphore")
		}
		if err != nil {
			return SemaphoreGrant{}, err
		}
		if g, ok := m.takeSlot(h, slot, stat.Czxid); ok {
			return g, nil
		}
	}
}

// admit waits in the admission line of the semaphore at base, its node
// made by create, until h holds the admission mutex. It returns the
// lock-delay markers the line showed; again says the wait is to start over.
func (m *Semaphores) admit(ctx context.Context, h *semHold, base string,
	create func(list bool) (string, *zk.Stat, *listing, error), wait time.Duration) (marks []delayMark, again bool, err error) {
	queued, _, after, done, err := h.ensureInLine(admissionRole, base+"/locks", create)
	if errors.Is(err, errHoldGone) {
		return nil, false, h.goneErr("semaphore")
	}
	if err != nil {
		return nil, false, waitErr(ctx, h.lease, err)
	}
	t, again, err := h.waitInLine(ctx, admissionRole, base+"/locks", queued, after, lockMarkers, lockBlocks, wait <= 0)
	done()
	return t.marks, again, err
}

// takeSlot grants h the slot node slot, made at czxid, and leaves the
// admission queue so the next seqNode may try; false when h is gone or
// holds another slot node by now.
func (m *Semaphores) takeSlot(h *semHold, slot string, czxid int64) (SemaphoreGrant, bool) {
	h.mu.Lock()
	if h.gone || h.nodeLocked(slotRole) != slot {
		h.mu.Unlock()
		return SemaphoreGrant{}, false
	}
	h.markGrantedLocked(czxid)
	g := h.grantLocked()
	queued := h.nodeLocked(admissionRole)
	h.forgetNodeLocked(admissionRole, queued)
	h.mu.Unlock()
	if queued != "" {
		if err := m.sess.deleteNode(context.Background(), queued, h.lease.epoch); err != nil {
			m.log.Error("leave semaphore admission queue", "node", queued, "err", err)
		}
	}
	return g, true
}

// waitSlot waits until the leases directory holds at most limit nodes, ours
// among them, checking that zkgate holders agree on the limit; a slot whose
// holder ended without releasing counts as taken while its lock-delay runs
// (marks: the markers of the admission line, which cannot change while
// this call holds the admission mutex but for markers going). It watches
// the directory through the shared watch cache: one watch, however many
// tries.
func (m *Semaphores) waitSlot(ctx context.Context, lease *Lease, base, slot string, limit int, tryOnce bool, marks []delayMark) (*zk.Stat, error) {
	ln := m.lines
	dir := base + "/leases"
	var slotMarks []delayMark
	for _, mk := range marks {
		if mk.code == 's' {
			slotMarks = append(slotMarks, mk)
		}
	}
	for {
		snap, changed, release, err := m.cache.view(ctx, dir, seqOpts)
		if err != nil {
			if err := ln.retryable(ctx, lease, err); err != nil {
				return nil, err
			}
			continue
		}
		mine, err := slotIn(snap, dir, slot, limit)
		if err != nil {
			release()
			return nil, err
		}
		held := 0 // slots held back by a lock-delay
		var heldUntil time.Time
		if len(slotMarks) > 0 {
			heldUntil, held = m.slotsHeldBack(base, slotMarks, lease, snap)
		}
		switch {
		case mine && len(snap.Children)+held <= limit:
			release()
			return ln.ownNode(ctx, lease, slot)
		case mine && len(snap.Children) <= limit && tryOnce:
			release()
			return nil, ln.waitHeldBack(ctx, lease, heldUntil, true)
		case !mine:
			// Not in the cache yet (made after its last load), or gone.
			ok, _, err := ln.sess.Conn().Exists(slot)
			if err == nil && !ok {
				release()
				return nil, errNodeGone
			}
		case tryOnce:
			release()
			return nil, &Error{Code: CodeTimeout, Detail: "every slot is taken"}
		}
		var lapse <-chan time.Time // when a lock-delay runs out
		var timer *time.Timer
		if held > 0 {
			timer = time.NewTimer(time.Until(heldUntil))
			lapse = timer.C
		}
		select {
		case <-changed:
		case <-lapse:
		case <-ctx.Done():
			release()
			return nil, waitErr(ctx, lease, context.Cause(ctx))
		}
		release()
		if timer != nil {
			timer.Stop()
		}
	}
}

// slotIn says whether slot is among the children of dir in snap, and
// fails with limit_mismatch when a zkgate holder there uses a limit other
// than limit.
func slotIn(snap *Snapshot, dir, slot string, limit int) (bool, error) {
	mine := false
	for _, n := range snap.Children {
		if dir+"/"+n.Name == slot {
			mine = true
			continue
		}
		if d, ok := parseNodeData(n.Data); ok && d.Limit != 0 && d.Limit != limit {
			return false, &Error{Code: CodeLimitMismatch,
				Detail: fmt.Sprintf("the holders of this semaphore use limit %d, not %d", d.Limit, limit),
				Extra:  map[string]any{"limit": d.Limit}}
		}
	}
	return mine, nil
}

// slotsHeldBack counts the slots in snap that the lock-delay markers marks
// hold back, and says until when the last of them runs.
func (m *Semaphores) slotsHeldBack(base string, marks []delayMark, lease *Lease, snap *Snapshot) (until time.Time, held int) {
	present := func(name string) bool {
		for _, n := range snap.Children {
			if n.Name == name {
				return true
			}
		}
		return false
	}
	_, until, held, expired := m.heldBack(base+"/locks", marks, seqNode{Lease: lease.ID}, present, nil)
	m.dropMarks(expired)
	return until, held
}

// timeoutState names the slot holders (as many as the slots, read one by
// one) and counts the queue, without reading every waiter.
func (m *Semaphores) timeoutState(name string) map[string]any {
	base := m.base(name)
	conn := m.sess.Conn()
	holders := []Contender{}
	slots, _, err := conn.Children(base + "/leases")
	if err != nil {
		return nil
	}
	for _, c := range sortContenders(slots, leaseMarkers) {
		if len(holders) == maxListedHolders {
			break
		}
		data, stat, err := conn.Get(base + "/leases/" + c.Name)
		if err != nil {
			continue
		}
		h := holderOf(c, Node{Name: c.Name, Data: data, Stat: *stat})
		h.Mode = ""
		holders = append(holders, h)
	}
	queued, _, _ := conn.Children(base + "/locks")
	m.keep.keptBy(holders)
	return map[string]any{"holders": holders, "waiters": len(queued)}
}

// Release gives up lease's slot (or its place in the queue).
func (m *Semaphores) Release(ctx context.Context, lease *Lease, name string) error {
	if o := m.of(lease); o != m {
		return o.Release(ctx, lease, name)
	}
	return dropHeld[*semHold](lease, name, semaphoreKey, "release semaphore", "lease %s holds no slot of semaphore %q")
}

// State lists the holders (the first limit slot nodes) and the admission
// queue, from the watch cache; with index > 0 it is a blocking read on the
// slots.
func (m *Semaphores) State(ctx context.Context, name string, index int64, wait time.Duration) (SemaphoreState, error) {
	if err := ValidName(name); err != nil {
		return SemaphoreState{}, err
	}
	base := m.base(name)
	if index > 0 {
		// Holders come from the slots, waiters also from the admission
		// queue: a change of either is a change of the state.
		err := m.cache.waitNewer(ctx, [2]string{base + "/leases", base + "/locks"}, [2]entryOpts{seqOpts, seqOpts}, index, wait)
		if err != nil {
			return SemaphoreState{}, readErr(err)
		}
	}
	ctx, err := m.sess.fresh(ctx) // once for both directories
	if err != nil {
		return SemaphoreState{}, readErr(err)
	}
	slots, err := m.cache.direct(ctx, base+"/leases", seqOpts)
	if err != nil {
		return SemaphoreState{}, readErr(err)
	}
	queue, err := m.cache.direct(ctx, base+"/locks", seqOpts)
	if err != nil {
		return SemaphoreState{}, readErr(err)
	}
	st := SemaphoreState{Name: name, Holders: []Contender{}, Waiters: []Contender{}, Index: max(slots.Index, queue.Index)}
	for _, n := range slots.Children {
		if d, ok := parseNodeData(n.Data); ok && d.Limit > 0 {
			st.Limit = d.Limit
		}
	}
	slotNodes := contendersOf(slots, leaseMarkers)
	queued := contendersOf(queue, lockMarkers)
	// Only the seqNode that holds the admission mutex (the first of the
	// queue) makes a slot node while every slot is taken, so when there are
	// more slot nodes than the limit, or the limit is unknown (only Curator
	// holders) and someone is being admitted, the newest slot node is that
	// seqNode's, still waiting. Curator gives its two nodes different
	// UUIDs, so it is recognised by position, not by name.
	free := len(slotNodes)
	if st.Limit > 0 {
		free = min(free, st.Limit)
	} else if len(queued) > 0 && len(slotNodes) > 0 {
		free = len(slotNodes) - 1
	}
	admitted := free < len(slotNodes)
	for i, c := range slotNodes {
		h := holderOf(c, nodeNamed(slots, c.Name))
		h.Mode = ""
		if i >= free {
			st.Waiters = append(st.Waiters, h) // admitted, waiting for a slot to free up
			continue
		}
		st.Holders = append(st.Holders, h)
	}
	for i, c := range queued {
		if i == 0 && admitted {
			continue // the admitted seqNode, already listed by its slot node
		}
		h := holderOf(c, nodeNamed(queue, c.Name))
		h.Mode = ""
		st.Waiters = append(st.Waiters, h)
	}
	m.keep.keptBy(st.Holders, st.Waiters)
	return st, nil
}

// SemaphoreSummary is one line of the semaphore list.
type SemaphoreSummary struct {
	Name    string `json:"name"`
	Limit   int    `json:"limit,omitempty"` // as the zkgate holders give it; absent when unknown
	Holders int    `json:"holders"`
	Waiters int    `json:"waiters"`
}

// List returns one page of the semaphores with holders or waiters, sorted
// by name, and the name the next page starts after ("" for the last page).
func (m *Semaphores) List(ctx context.Context, p Page) ([]SemaphoreSummary, string, error) {
	return listPage(ctx, m.sess, kinds.Semaphores.Dir(m.sess.Root()), p, nil, func(ctx context.Context, name string) (SemaphoreSummary, bool, error) {
		st, err := m.State(ctx, name, 0, 0)
		if err != nil {
			return SemaphoreSummary{}, false, err
		}
		return SemaphoreSummary{Name: name, Limit: st.Limit, Holders: len(st.Holders), Waiters: len(st.Waiters)},
			len(st.Holders)+len(st.Waiters) > 0, nil
	})
}

func contendersOf(s *Snapshot, markers []marker) []seqNode {
	names := make([]string, len(s.Children))
	for i, n := range s.Children {
		names[i] = n.Name
	}
	return sortContenders(names, markers)
}

func nodeNamed(s *Snapshot, name string) Node {
	for _, n := range s.Children {
		if n.Name == name {
			return n
		}
	}
	return Node{Name: name}
}

// WithoutSessions leaves out the holders' and waiters' session ids.
func (s *SemaphoreState) WithoutSessions() {
	s.Holders, s.Waiters = withoutSessions(s.Holders), withoutSessions(s.Waiters)
}
