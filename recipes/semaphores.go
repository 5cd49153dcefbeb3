package recipes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Semaphores follow Curator's InterProcessSemaphoreV2: a mutex in
// {root}/semaphores/{name}/locks admits one contender at a time to
// .../leases, where it creates a `lease-` node and waits until at most
// limit such nodes exist. Its lease node is its slot.
type Semaphores struct{ svc *Service }

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
	Name    string   `json:"name"`
	Limit   int      `json:"limit,omitempty"` // as the zkgate holders give it; absent when unknown
	Holders []Holder `json:"holders"`
	Waiters []Holder `json:"waiters"`
	Index   int64    `json:"-"`
}

func (m *Semaphores) base(name string) string { return m.svc.sess.Root() + "/semaphores/" + name }

type semHold struct {
	m     *Semaphores
	lease *Lease
	key   string
	name  string
	limit int
	since time.Time

	mu        sync.Mutex
	mutexNode string // our place in the admission queue, while waiting
	slotNode  string // our lease- node
	token     int64
	granted   bool
	grantedAt time.Time
	waiters   int
	gone      bool
}

func (h *semHold) info() HoldInfo {
	if !h.mu.TryLock() { // held across creates (see lockHold.info)
		return HoldInfo{Kind: "semaphore", Name: h.name, State: "waiting", Since: h.since}
	}
	defer h.mu.Unlock()
	state, since, node := "waiting", h.since, h.mutexNode
	if h.granted {
		state, since, node = "held", h.grantedAt, h.slotNode
	}
	return HoldInfo{Kind: "semaphore", Name: h.name, Token: h.token, State: state, Node: node, Since: since}
}

func (h *semHold) release(ctx context.Context) error {
	h.mu.Lock()
	h.gone = true
	nodes := []string{h.slotNode, h.mutexNode}
	granted, at := h.granted, h.grantedAt
	h.slotNode, h.mutexNode = "", ""
	h.mu.Unlock()
	if granted {
		h.m.svc.metrics.Released("semaphore", time.Since(at))
	}
	var first error
	for _, n := range nodes {
		if n == "" {
			continue
		}
		if err := h.m.svc.Leases.deleteNode(ctx, n, h.lease.epoch); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (h *semHold) grant() SemaphoreGrant {
	return SemaphoreGrant{Name: h.name, Lease: h.lease.ID, Limit: h.limit, Token: h.token, Node: h.slotNode, AcquiredAt: h.grantedAt}
}

// Acquire takes one slot of semaphore name for lease, waiting up to wait.
// A limit different from the one its current zkgate holders use is
// limit_mismatch.
func (m *Semaphores) Acquire(ctx context.Context, lease *Lease, name string, limit int, wait time.Duration) (SemaphoreGrant, error) {
	if err := ValidName(name); err != nil {
		return SemaphoreGrant{}, err
	}
	if limit < 1 || limit > MaxSemaphoreLimit {
		return SemaphoreGrant{}, Errorf(CodeInvalid, "limit must be between 1 and %d", MaxSemaphoreLimit)
	}
	if err := lease.alive(); err != nil {
		return SemaphoreGrant{}, err
	}
	key := "semaphore\x00" + name
	var h *semHold
	for h == nil {
		got, err := lease.attach(key, &semHold{m: m, lease: lease, key: key, name: name, limit: limit, since: time.Now().UTC()})
		if err != nil {
			return SemaphoreGrant{}, err
		}
		cand := got.(*semHold)
		stale := false
		cand.mu.Lock()
		switch {
		case cand.gone:
			stale = true // a hold on its way out: make a new one
		case cand.limit != limit:
			cand.mu.Unlock()
			return SemaphoreGrant{}, &Error{Code: CodeLimitMismatch,
				Detail: fmt.Sprintf("this lease already asked for semaphore %q with limit %d", name, cand.limit),
				Extra:  map[string]any{"limit": cand.limit}}
		case cand.granted:
			g := cand.grant()
			cand.mu.Unlock()
			return g, nil
		default:
			cand.waiters++
			h = cand
		}
		cand.mu.Unlock()
		if stale {
			// Outside cand.mu: Lease.Info takes the lease's lock, then each hold's.
			lease.detach(key, cand)
		}
	}
	m.svc.metrics.Waiting("semaphore", 1)
	start := time.Now()
	g, err := m.wait(ctx, h, wait)
	m.svc.metrics.Waiting("semaphore", -1)
	h.mu.Lock()
	h.waiters--
	abandon := !h.granted && h.waiters == 0 && !h.gone
	h.mu.Unlock()
	if abandon {
		lease.detach(key, h)
		if derr := h.release(context.Background()); derr != nil {
			m.svc.log.Error("delete abandoned semaphore nodes", "semaphore", name, "err", derr)
		}
	}
	if err != nil {
		if e, ok := err.(*Error); ok && e.Code == CodeTimeout {
			e.Detail = fmt.Sprintf("no slot of semaphore %q became free in time", name)
			e.Extra = m.timeoutState(name)
		}
		return SemaphoreGrant{}, err
	}
	m.svc.metrics.Granted("semaphore", time.Since(start))
	return g, nil
}

func (m *Semaphores) wait(ctx context.Context, h *semHold, wait time.Duration) (SemaphoreGrant, error) {
	svc, lease := m.svc, h.lease
	ctx, cancel := context.WithTimeoutCause(ctx, waitBound(wait), errWaitElapsed)
	defer cancel()
	stop := context.AfterFunc(lease.ctx, cancel)
	defer stop()
	base := m.base(h.name)
	data := nodeData{Lease: lease.ID, Holder: lease.Holder, Gateway: svc.gatewayID, Limit: h.limit}.bytes()
	for {
		h.mu.Lock()
		if h.gone {
			h.mu.Unlock()
			// Released by the client, or by the end of its lease?
			if err := lease.alive(); err != nil {
				return SemaphoreGrant{}, err
			}
			return SemaphoreGrant{}, Errorf(CodeNotHeld, "semaphore %q was released while this acquire waited", h.name)
		}
		if h.granted {
			g := h.grant()
			h.mu.Unlock()
			return g, nil
		}
		// First the admission mutex, unless a slot node is already made.
		if h.mutexNode == "" && h.slotNode == "" {
			n, err := svc.sess.createProtected(ctx, base+"/locks", lease.ID, "lock-", data, lease.epoch)
			if err != nil {
				h.mu.Unlock()
				return SemaphoreGrant{}, waitErr(ctx, lease, err)
			}
			h.mutexNode = n
		}
		mutexNode := h.mutexNode
		h.mu.Unlock()

		if mutexNode != "" {
			_, err := svc.waitTurn(ctx, lease, base+"/locks", mutexNode, lockMarkers, lockBlocks, wait <= 0)
			if errors.Is(err, errNodeGone) {
				h.mu.Lock()
				if h.mutexNode == mutexNode {
					h.mutexNode = ""
				}
				h.mu.Unlock()
				if err := lease.alive(); err != nil {
					return SemaphoreGrant{}, err
				}
				continue
			}
			if err != nil {
				return SemaphoreGrant{}, err
			}
		}
		h.mu.Lock()
		if h.gone {
			h.mu.Unlock()
			continue
		}
		if h.slotNode == "" {
			n, err := svc.sess.createProtected(ctx, base+"/leases", lease.ID, "lease-", data, lease.epoch)
			if err != nil {
				h.mu.Unlock()
				return SemaphoreGrant{}, waitErr(ctx, lease, err)
			}
			h.slotNode = n
		}
		slot := h.slotNode
		h.mu.Unlock()

		stat, err := m.waitSlot(ctx, lease, base+"/leases", slot, h.limit, wait <= 0)
		if errors.Is(err, errNodeGone) {
			h.mu.Lock()
			if h.slotNode == slot {
				h.slotNode = ""
			}
			h.mu.Unlock()
			continue
		}
		if err != nil {
			return SemaphoreGrant{}, err
		}
		h.mu.Lock()
		if h.gone {
			h.mu.Unlock()
			continue
		}
		h.granted, h.token, h.grantedAt = true, stat.Czxid, time.Now().UTC()
		g := h.grant()
		mutexNode = h.mutexNode
		h.mutexNode = ""
		h.mu.Unlock()
		// Leave the admission queue so the next contender may try.
		if mutexNode != "" {
			if err := svc.Leases.deleteNode(context.Background(), mutexNode, lease.epoch); err != nil {
				svc.log.Error("leave semaphore admission queue", "node", mutexNode, "err", err)
			}
		}
		return g, nil
	}
}

// waitSlot waits until the leases directory holds at most limit nodes, ours
// among them, checking that zkgate holders agree on the limit.
func (m *Semaphores) waitSlot(ctx context.Context, lease *Lease, dir, slot string, limit int, tryOnce bool) (*zk.Stat, error) {
	svc := m.svc
	known := map[string]int{} // child -> limit it declares (0: foreign)
	for {
		conn := svc.sess.Conn()
		children, _, events, err := conn.ChildrenW(dir)
		if err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				return nil, errNodeGone
			}
			if err := svc.retryable(ctx, lease, err); err != nil {
				return nil, err
			}
			continue
		}
		mine := false
		for _, c := range children {
			if dir+"/"+c == slot {
				mine = true
				continue
			}
			if _, ok := known[c]; !ok {
				data, _, err := conn.Get(dir + "/" + c)
				if err != nil {
					continue // gone already, or unreadable: the next turn sees
				}
				d, _ := parseNodeData(data)
				known[c] = d.Limit
			}
			if l := known[c]; l != 0 && l != limit {
				return nil, &Error{Code: CodeLimitMismatch,
					Detail: fmt.Sprintf("the holders of this semaphore use limit %d, not %d", l, limit),
					Extra:  map[string]any{"limit": l}}
			}
		}
		if !mine {
			return nil, errNodeGone
		}
		if len(children) <= limit {
			return svc.ownNode(ctx, lease, slot, nil)
		}
		if tryOnce {
			return nil, &Error{Code: CodeTimeout, Detail: "every slot is taken"}
		}
		select {
		case <-events:
		case <-ctx.Done():
			return nil, waitErr(ctx, lease, context.Cause(ctx))
		}
	}
}

// timeoutState names the slot holders (as many as the slots, read one by
// one) and counts the queue, without reading every waiter.
func (m *Semaphores) timeoutState(name string) map[string]any {
	base := m.base(name)
	conn := m.svc.sess.Conn()
	holders := []Holder{}
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
	return map[string]any{"holders": holders, "waiters": len(queued)}
}

// Release gives up lease's slot (or its place in the queue).
func (m *Semaphores) Release(ctx context.Context, lease *Lease, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := lease.alive(); err != nil {
		return err
	}
	key := "semaphore\x00" + name
	holds := lease.holdsWithPrefix(key)
	h, ok := holds[key]
	if !ok {
		return &Error{Code: CodeNotHeld, Detail: fmt.Sprintf("lease %s holds no slot of semaphore %q", lease.ID, name)}
	}
	lease.detach(key, h)
	if err := h.release(ctx); err != nil {
		return internal(err, "release semaphore")
	}
	return nil
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
		err := m.svc.cache.waitNewer(ctx, [2]string{base + "/leases", base + "/locks"}, [2]entryOpts{}, index, wait)
		if err != nil {
			return SemaphoreState{}, m.svc.readErr(err)
		}
	}
	slots, err := m.svc.cache.direct(ctx, base+"/leases", entryOpts{})
	if err != nil {
		return SemaphoreState{}, m.svc.readErr(err)
	}
	queue, err := m.svc.cache.direct(ctx, base+"/locks", entryOpts{})
	if err != nil {
		return SemaphoreState{}, m.svc.readErr(err)
	}
	st := SemaphoreState{Name: name, Holders: []Holder{}, Waiters: []Holder{}, Index: max(slots.Index, queue.Index)}
	for _, n := range slots.Children {
		if d, ok := parseNodeData(n.Data); ok && d.Limit > 0 {
			st.Limit = d.Limit
		}
	}
	slotNodes := contendersOf(slots, leaseMarkers)
	queued := contendersOf(queue, lockMarkers)
	// Only the contender that holds the admission mutex (the first of the
	// queue) makes a slot node while every slot is taken, so when there are
	// more slot nodes than the limit, or the limit is unknown (only Curator
	// holders) and someone is being admitted, the newest slot node is that
	// contender's, still waiting. Curator gives its two nodes different
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
			continue // the admitted contender, already listed by its slot node
		}
		h := holderOf(c, nodeNamed(queue, c.Name))
		h.Mode = ""
		st.Waiters = append(st.Waiters, h)
	}
	return st, nil
}

func contendersOf(s *Snapshot, markers []marker) []contender {
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
