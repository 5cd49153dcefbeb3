package recipes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// Deadlocks are found and broken as PostgreSQL does it, across gateways.
//
// The wait-for graph. Its parties are zkgate leases and, for nodes other
// clients made (Curator, kazoo, go-zookeeper), their ZooKeeper sessions. A
// waiting node waits for the nodes ahead of it in its line that block it:
// each holder of a lock that keeps it waiting and the nearest waiter ahead
// that does (who waits for the rest); in a semaphore's admission line, the
// node ahead; once admitted, for a slot, for any one of the slot holders.
// A party is stuck when every wait it has is stuck: a wait for nodes is
// stuck when one of their parties is, a wait for a slot when all of theirs
// are. A party without a known wait gets on (it holds, works and releases;
// or it is a session or lease nobody could tell of: a deadlock is never
// assumed). A wait is in a deadlock when its party is stuck and lies on a
// cycle of stuck parties (their strongly connected component).
//
// Who knows what. A lease's gateway knows its holds and which node each
// waits with or holds; the lines themselves are read from ZooKeeper by
// whoever checks. So a gateway checking its waits asks every other gateway
// (POST /peer/v1/waits, through peers.Credential) for the holds of the leases
// it meets, reads the lines of their waits (and who owns each node that
// blocks them: a zkgate node's data names its lease, another client's
// stat its session), and so follows the edges out of its waits. A foreign
// session's waits are found in the lines behind the nodes of zkgate
// leases: those lines are read only when a foreign session took part.
//
// Cost. A wait is first checked once it has lasted the check interval
// (--deadlock-check), then again every interval while it lasts; a gateway
// with no wait that old does nothing at all. A check reads only the lines
// of the waits it meets (once each) and each node's owner once in the
// gateway's life (nodes never change owner); it is bounded (deadlockBudget),
// and what it could not read counts as getting on.
//
// The victim. Of the waits of zkgate leases on the cycles of a stuck
// component, the one with the newest node (the largest czxid: zxids order
// the whole ensemble) is chosen, so that every gateway that checks a wait
// of that component chooses the same one; only its own gateway ends it,
// after a second look, read afresh, finds the same victim (a cycle seen
// from reads made at different times may already be gone). It answers
// 409 deadlock with the cycle; the others wait on. A gateway whose wait is
// the victim checks it within an interval of its start, so a deadlock is
// broken within about twice the interval.

// deadlockBudget bounds one check: parties asked about, lines listed and
// nodes read.
var deadlockBudget = struct{ parties, lines, reads int }{parties: 256, lines: 128, reads: 256}

// maxBlockers bounds the nodes a wait is seen waiting for: past it, a wait
// for nodes keeps the first ones (fewer edges: fewer deadlocks, never a
// false one), and a wait for a slot counts as getting on.
const maxBlockers = 64

// WaitPeers are the other gateways of the root, as a deadlock check asks
// them.
type WaitPeers interface {
	// Holds returns what the other gateways tell of those of leases they
	// keep.
	Holds(ctx context.Context, leases []string) (map[string]PartyHolds, error)
}

// PartyHolds is what a gateway tells a deadlock check of one of its
// leases: its holds of locks and semaphores, held and waiting.
type PartyHolds struct {
	Lease   string `json:"lease"`
	Holder  string `json:"holder"`
	Gateway string `json:"gateway"`
	// Complete says that every hold is told of (one busy with ZooKeeper
	// at the time, or a lease being handed over, is not).
	Complete bool        `json:"complete"`
	Holds    []PartyHold `json:"holds"`
}

// PartyHold is one hold of a lease as a deadlock check sees it: the node
// it holds, or waits with, in the line under Line.
type PartyHold struct {
	Kind    string `json:"kind"` // lock, semaphore
	Name    string `json:"name"`
	Mode    string `json:"mode,omitempty"`
	Waiting bool   `json:"waiting"`
	Line    string `json:"line"`
	Node    string `json:"node"`
	Czxid   int64  `json:"czxid,omitempty"` // of Node, when known
	// Slots marks a semaphore's wait for a slot (Line is its slots): any
	// other slot's end lets it in.
	Slots bool `json:"slots,omitempty"`
}

// PartyHolds tells what this gateway keeps of those of leases it keeps
// (for the deadlock checks of any gateway).
func (s *Service) PartyHolds(leases []string) []PartyHolds {
	out := []PartyHolds{}
	for _, id := range leases {
		l, ok := s.Leases.find(id)
		if !ok {
			continue
		}
		out = append(out, l.partyHolds())
	}
	return out
}

// partyHolds is what l holds and waits for of locks and semaphores.
func (l *Lease) partyHolds() PartyHolds {
	ph := PartyHolds{Lease: l.ID, Holder: l.Holder, Gateway: l.table.cfg.GatewayID, Complete: !l.moving.Load(), Holds: []PartyHold{}}
	l.mu.Lock()
	holds := l.holdingsLocked()
	l.mu.Unlock()
	for _, hs := range holds {
		c := hs.core()
		if figureKind(c) == "" {
			continue
		}
		// h.mu is held across a create, which may wait out a reconnect: a
		// busy hold is not waited for.
		if !c.mu.TryLock() {
			ph.Complete = false
			continue
		}
		if !c.gone {
			ph.Holds = append(ph.Holds, partyHoldLocked(hs)...)
		}
		c.mu.Unlock()
	}
	slices.SortFunc(ph.Holds, func(a, b PartyHold) int { return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Node, b.Node)) })
	return ph
}

// partyHoldLocked describes hs (its lock is held): nothing while it has no
// node yet.
func partyHoldLocked(hs holding) []PartyHold {
	c := hs.core()
	nodeOf := func(role string) (string, int64) {
		for _, n := range c.nodes {
			if n.role == role {
				return n.path, n.czxid
			}
		}
		return "", 0
	}
	// at is h (its Waiting and Slots) with node p of c.
	at := func(p string, czxid int64, h PartyHold) PartyHold {
		h.Kind, h.Name, h.Line, h.Node, h.Czxid = c.kind, c.name, path.Dir(p), path.Base(p), czxid
		if lh, ok := hs.(*lockHold); ok {
			h.Mode = lh.mode
		}
		return h
	}
	switch c.kind {
	case KindLock:
		if p, czxid := nodeOf(lockRole); p != "" {
			return []PartyHold{at(p, czxid, PartyHold{Waiting: !c.granted})}
		}
	case KindSemaphore:
		slot, slotCzxid := nodeOf(slotRole)
		adm, admCzxid := nodeOf(admissionRole)
		switch {
		case c.granted && slot != "":
			return []PartyHold{at(slot, slotCzxid, PartyHold{})}
		case slot != "":
			// Admitted, waiting for a slot; its admission node (still
			// there) keeps the next ones out meanwhile.
			out := []PartyHold{at(slot, slotCzxid, PartyHold{Waiting: true, Slots: true})}
			if adm != "" {
				out = append(out, at(adm, admCzxid, PartyHold{}))
			}
			return out
		case adm != "":
			return []PartyHold{at(adm, admCzxid, PartyHold{Waiting: true})}
		}
	}
	return nil
}

// DeadlockRecord is a deadlock found and broken by a gateway.
type DeadlockRecord struct {
	At      time.Time `json:"at"`
	Gateway string    `json:"gateway"` // the gateway whose wait was ended
	// Cycle is the cycle of waits, the one ended first: each step's party
	// waits for what the next step's party holds (the last's for the
	// first's).
	Cycle []CycleStep `json:"cycle"`
}

// CycleStep is one party of a deadlock and what it waits for.
type CycleStep struct {
	Lease   string `json:"lease,omitempty"`
	Session string `json:"session,omitempty"` // a node of another client: its ZooKeeper session
	Holder  string `json:"holder,omitempty"`
	Gateway string `json:"gateway,omitempty"`
	// Kind, Name and Mode are what it waits for; Blocker is the node of
	// the next party that it waits for, and BlockerMode how that one holds
	// or waits ("" for a semaphore's).
	Kind        string `json:"kind"`
	Name        string `json:"name,omitempty"`
	Mode        string `json:"mode,omitempty"`
	Node        string `json:"node,omitempty"`
	Blocker     string `json:"blocker,omitempty"`
	BlockerMode string `json:"blocker_mode,omitempty"`
	// Hidden marks a step on a name the reader may not read: its kind
	// alone is shown (see Shown).
	Hidden bool `json:"hidden,omitempty"`
}

// Shown is the step as a reader sees it: all of it with read (mayRead),
// its kind alone without; its session id only with admin (mayAdmin).
func (st CycleStep) Shown(mayRead, mayAdmin bool) CycleStep {
	switch {
	case !mayRead:
		return CycleStep{Kind: st.Kind, Hidden: true}
	case !mayAdmin:
		st.Session = ""
	}
	return st
}

// Shown is the record with the session ids of its cycle's steps left out
// where mayAdmin says no (a copy).
func (d DeadlockRecord) Shown(mayAdmin func(kind, name string) bool) DeadlockRecord {
	d.Cycle = slices.Clone(d.Cycle)
	for i, st := range d.Cycle {
		d.Cycle[i] = st.Shown(true, mayAdmin(st.Kind, st.Name))
	}
	return d
}

// DeadlockDetail is the detail of the 409 of the wait on kind and name
// that was ended to break the deadlock of cycle.
func DeadlockDetail(kind, name string, cycle []CycleStep) string {
	var parties []string
	for _, st := range cycle {
		parties = append(parties, cmp.Or(st.Holder, st.Lease, st.Session, "a party you may not read"))
	}
	return fmt.Sprintf("%s %q: this wait was ended to break a deadlock of %d parties (%s)", kind, name, len(cycle), strings.Join(parties, " → "))
}

// Deadlocks are the deadlocks this gateway broke in the window ending now,
// oldest first.
func (c *Contention) Deadlocks(window time.Duration) []DeadlockRecord {
	since := WindowSince(c.now(), window)
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []DeadlockRecord{}
	for _, d := range c.deadlocks {
		if !d.At.Before(since) {
			out = append(out, d)
		}
	}
	return out
}

// DeadlocksBroken is how many deadlocks this gateway has broken.
func (c *Contention) DeadlocksBroken() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}

// noteDeadlock keeps d, for an hour and contentionDeadlocks of them at most.
func (c *Contention) noteDeadlock(d DeadlockRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.broken++
	hourAgo := d.At.Add(-time.Hour)
	c.deadlocks = slices.DeleteFunc(c.deadlocks, func(x DeadlockRecord) bool { return x.At.Before(hourAgo) })
	if len(c.deadlocks) == contentionDeadlocks {
		c.deadlocks = c.deadlocks[1:]
	}
	c.deadlocks = append(c.deadlocks, d)
}

// dueWaits returns the waits that have lasted every, and were not checked
// in the last every, marking them checked now.
func (c *Contention) dueWaits(every time.Duration) []*waitEntry {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var due []*waitEntry
	for e := range c.waits {
		if now.Sub(e.start) >= every && now.Sub(e.checked) >= every {
			e.checked = now
			due = append(due, e)
		}
	}
	slices.SortFunc(due, func(a, b *waitEntry) int { return a.start.Compare(b.start) })
	return due
}

// waitsOf returns this gateway's calls waiting for the lock or semaphore
// name with lease (a lock's in mode).
func (c *Contention) waitsOf(lease, kind, name, mode string) []*waitEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*waitEntry
	for e := range c.waits {
		if e.h.lease.ID == lease && e.kind == kind && e.h.name == name && e.mode == mode {
			out = append(out, e)
		}
	}
	return out
}

// CheckDeadlocks checks this gateway's waits for deadlocks and breaks
// those it finds (see above), every a quarter of every, until ctx ends.
func (s *Service) CheckDeadlocks(ctx context.Context, every time.Duration, peers WaitPeers) {
	tick := time.NewTicker(every / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.checkDeadlocks(ctx, every, peers)
		}
	}
}

// checkDeadlocks is one check of the waits due.
func (s *Service) checkDeadlocks(ctx context.Context, every time.Duration, peers WaitPeers) {
	due := s.contention.dueWaits(every)
	if len(due) == 0 {
		return
	}
	var leases []string
	for _, e := range due {
		leases = append(leases, e.h.lease.ID)
	}
	g := s.exploreWaits(ctx, peers, leases)
	ended := map[string]bool{}
	for _, e := range due {
		p := g.parties[leaseKey(e.h.lease.ID)]
		if p == nil || p.progress {
			continue
		}
		victim := g.victimOf(p)
		if victim == nil || victim.p.lease == "" || ended[victim.id()] || len(s.contention.waitsOf(victim.p.lease, victim.kind, victim.name, victim.mode)) == 0 {
			continue // not in a cycle, or another gateway's to end
		}
		// A second look, afresh, at the component.
		var again []string
		for _, q := range g.component(p) {
			if q.lease != "" {
				again = append(again, q.lease)
			}
		}
		g2 := s.exploreWaits(ctx, peers, again)
		p2 := g2.parties[victim.p.key]
		if p2 == nil || p2.progress {
			continue
		}
		v2 := g2.victimOf(p2)
		if v2 == nil || v2.id() != victim.id() {
			continue
		}
		ended[victim.id()] = true
		s.breakDeadlock(g2, v2)
	}
}

// breakDeadlock ends the waits of v, this gateway's, with the cycle.
func (s *Service) breakDeadlock(g *waitGraph, v *graphWait) {
	cycle := g.cycleThrough(v)
	d := DeadlockRecord{At: time.Now().UTC(), Gateway: s.gatewayID, Cycle: cycle}
	err := &Error{Code: CodeDeadlock, Detail: DeadlockDetail(v.kind, v.name, cycle), Extra: map[string]any{"cycle": cycle}}
	entries := s.contention.waitsOf(v.p.lease, v.kind, v.name, v.mode)
	if len(entries) == 0 {
		return
	}
	s.contention.noteDeadlock(d)
	s.log.Warn("deadlock: a wait ended to break it", "kind", v.kind, "name", v.name, "lease", v.p.lease, "cycle", len(cycle))
	for _, e := range entries {
		e.abort(err)
	}
}

// The wait-for graph of one check.
type (
	waitGraph struct {
		svc     *Service
		parties map[string]*graphParty
		lines   map[string]*lineSnap
		nodes   map[string]*graphNode // by path, this check's
		pending []string              // leases to ask about
		waits   map[string]bool       // the waits added, by node path
		asked   int
		read    int
	}
	graphParty struct {
		key, lease, session string
		holder, gateway     string
		asked, known        bool // it was asked about; it told of everything
		told                bool // its gateway told of it
		behind              bool // the lines of its nodes were read for who waits behind
		waits               []*graphWait
		owns                []string // paths of the nodes it holds or waits with
		progress            bool
		index, low          int // Tarjan's
		onStack             bool
	}
	graphWait struct {
		p                *graphParty
		kind, name, mode string
		line, node       string
		czxid            int64
		slots            bool // any target's end lets it in
		unknown          bool // its targets could not all be read: it gets on
		targets          []*graphNode
	}
	graphNode struct {
		path  string
		p     *graphParty
		mode  string
		czxid int64
		// going: a node of a lease whose gateway counts it in none of the
		// lease's holds (a hold given up, its node being deleted): it goes
		// by itself, whatever the lease does.
		going bool
	}
	lineSnap struct {
		nodes   []seqNode
		index   map[string]int
		holding []bool
	}
)

func leaseKey(id string) string   { return "lease:" + id }
func sessionKey(sid int64) string { return fmt.Sprintf("session:0x%x", uint64(sid)) }
func (w *graphWait) id() string   { return w.line + "/" + w.node }

// exploreWaits builds the graph around leases and works out who gets on.
func (s *Service) exploreWaits(ctx context.Context, peers WaitPeers, leases []string) *waitGraph {
	g := &waitGraph{svc: s, parties: map[string]*graphParty{}, lines: map[string]*lineSnap{}, nodes: map[string]*graphNode{}, waits: map[string]bool{}}
	for _, id := range leases {
		g.leaseParty(id)
	}
	for len(g.pending) > 0 && ctx.Err() == nil {
		batch := g.pending
		g.pending = nil
		g.ask(ctx, peers, batch)
		// A foreign session's waits are seen only in the lines behind the
		// nodes of zkgate leases: read them once one took part.
		if len(g.pending) == 0 && g.foreign() {
			g.behind(ctx)
		}
	}
	g.reduce()
	return g
}

// leaseParty is the party of lease id, queued to be asked about when new.
func (g *waitGraph) leaseParty(id string) *graphParty {
	k := leaseKey(id)
	if p, ok := g.parties[k]; ok {
		return p
	}
	p := &graphParty{key: k, lease: id}
	g.parties[k] = p
	if g.asked < deadlockBudget.parties {
		g.asked++
		g.pending = append(g.pending, id)
	}
	return p
}

func (g *waitGraph) foreign() bool {
	for _, p := range g.parties {
		if p.session != "" {
			return true
		}
	}
	return false
}

// ask has the keepers of leases tell of them (this gateway, then the
// others), and adds their waits.
func (g *waitGraph) ask(ctx context.Context, peers WaitPeers, leases []string) {
	told := map[string]PartyHolds{}
	for _, ph := range g.svc.PartyHolds(leases) {
		told[ph.Lease] = ph
	}
	var rest []string
	for _, id := range leases {
		if _, ok := told[id]; !ok {
			rest = append(rest, id)
		}
	}
	if len(rest) > 0 && peers != nil {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		got, err := peers.Holds(pctx, rest)
		cancel()
		if err != nil {
			g.svc.log.Debug("deadlock check: asking the other gateways", "err", err)
		}
		for _, id := range rest {
			if ph, ok := got[id]; ok && ph.Lease == id {
				told[id] = ph
			}
		}
	}
	for _, id := range leases {
		p := g.parties[leaseKey(id)]
		ph, ok := told[id]
		p.asked = true
		if !ok {
			continue // ended, or its gateway did not answer: its waits are unknown
		}
		p.told, p.known, p.holder, p.gateway = true, ph.Complete, ph.Holder, ph.Gateway
		for _, h := range ph.Holds {
			if !g.svc.ownsLine(h.Line) || h.Node == "" || strings.Contains(h.Node, "/") {
				p.known = false
				continue
			}
			p.owns = append(p.owns, h.Line+"/"+h.Node)
			if h.Waiting {
				g.addWait(ctx, p, h)
			}
		}
	}
}

// ownsLine says whether line is a line of a lock or a semaphore under this
// gateway's root.
func (s *Service) ownsLine(line string) bool {
	_, _, ok := s.lineName(line)
	return ok
}

// lineName is the kind and name of the lock or semaphore whose line is
// line: {root}/locks/{name}, {root}/semaphores/{name}/locks (admission) or
// .../leases (slots).
func (s *Service) lineName(line string) (kind, name string, ok bool) {
	rest, ok := strings.CutPrefix(line, s.sess.Root()+"/")
	if !ok || path.Clean(line) != line {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 2 && parts[0] == kinds.Locks.Name && ValidName(parts[1]) == nil:
		return KindLock, parts[1], true
	case len(parts) == 3 && parts[0] == kinds.Semaphores.Name && ValidName(parts[1]) == nil && (parts[2] == semAdmissionDir || parts[2] == semSlotsDir):
		return KindSemaphore, parts[1], true
	}
	return "", "", false
}

// line lists line, once per check (nil past the budget or on an error).
func (g *waitGraph) line(line string) *lineSnap {
	if l, ok := g.lines[line]; ok {
		return l
	}
	if len(g.lines) >= deadlockBudget.lines {
		return nil
	}
	kids, _, err := g.svc.sess.Conn().Children(line)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		g.lines[line] = nil
		return nil
	}
	markers := lockMarkers
	if strings.HasSuffix(line, "/leases") && strings.Contains(line, "/semaphores/") {
		markers = leaseMarkers
	}
	l := &lineSnap{nodes: sortContenders(kids, markers), index: map[string]int{}}
	l.holding = make([]bool, len(l.nodes))
	var writers []seqNode // earlier writer-class nodes
	for i, c := range l.nodes {
		l.index[c.Name] = i
		if !c.Reader {
			l.holding[i] = i == 0
			writers = append(writers, c)
			continue
		}
		l.holding[i] = !slices.ContainsFunc(writers, func(w seqNode) bool { return lockBlocks(w, c) })
	}
	g.lines[line] = l
	return l
}

// node reads who owns the node at p (a zkgate lease by its data, another
// client by its session), once per check; the owner of a zkgate node,
// whose name carries its lease, is remembered for the gateway's life.
// withCzxid asks for the node's czxid too, which is always read. nil: it
// is gone, or could not be read.
func (g *waitGraph) node(p string, c seqNode, withCzxid bool) *graphNode {
	if n, ok := g.nodes[p]; ok && (n == nil || n.czxid != 0 || !withCzxid) {
		return n
	}
	owner, ok := g.svc.owners.get(p)
	if !ok || withCzxid {
		if g.read >= deadlockBudget.reads {
			return nil
		}
		g.read++
		data, st, err := g.svc.sess.Conn().Get(p)
		if err != nil {
			g.nodes[p] = nil
			return nil
		}
		owner = nodeOwner{czxid: st.Czxid, session: st.EphemeralOwner}
		if d, ok := parseNodeData(data); ok && d.Lease == c.Lease {
			owner.lease, owner.holder, owner.gateway = d.Lease, d.Holder, d.Gateway
			g.svc.owners.put(p, nodeOwner{lease: d.Lease, holder: d.Holder, gateway: d.Gateway})
		} else {
			owner.holder = printable(data)
		}
	}
	var party *graphParty
	if owner.lease != "" {
		party = g.leaseParty(owner.lease)
		party.holder, party.gateway = cmp.Or(party.holder, owner.holder), cmp.Or(party.gateway, owner.gateway)
	} else {
		k := sessionKey(owner.session)
		party = g.parties[k]
		if party == nil {
			party = &graphParty{key: k, session: strings.TrimPrefix(k, "session:"), holder: owner.holder, known: true}
			g.parties[k] = party
		}
	}
	n := &graphNode{path: p, p: party, mode: c.Mode, czxid: owner.czxid}
	g.nodes[p] = n
	return n
}

// addWait adds p's wait with node h.Node in h.Line, and what it waits for.
func (g *waitGraph) addWait(ctx context.Context, p *graphParty, h PartyHold) {
	id := h.Line + "/" + h.Node
	if g.waits[id] || ctx.Err() != nil {
		return
	}
	g.waits[id] = true
	w := &graphWait{p: p, kind: h.Kind, name: h.Name, mode: h.Mode, line: h.Line, node: h.Node, czxid: h.Czxid, slots: h.Slots}
	l := g.line(w.line)
	if l == nil {
		w.unknown = true
		p.waits = append(p.waits, w)
		return
	}
	i, ok := l.index[w.node]
	if !ok {
		return // gone: it waits no more
	}
	self := l.nodes[i]
	if w.czxid == 0 {
		if n := g.node(id, self, true); n != nil {
			w.czxid = n.czxid
		}
	}
	var blockers []seqNode
	if w.slots {
		for j, c := range l.nodes {
			if j != i {
				blockers = append(blockers, c)
			}
		}
		if len(blockers) > maxBlockers {
			w.unknown = true
			blockers = nil
		}
	} else {
		nearest := false // the nearest waiter ahead that blocks it: it waits for the rest
		for j := i - 1; j >= 0 && len(blockers) < maxBlockers; j-- {
			c := l.nodes[j]
			if !lockBlocks(c, self) || !l.holding[j] && nearest {
				continue
			}
			nearest = nearest || !l.holding[j]
			blockers = append(blockers, c)
		}
	}
	for _, c := range blockers {
		n := g.node(w.line+"/"+c.Name, c, false)
		switch {
		case n == nil && w.slots:
			w.unknown = true // one that went, or could not be read, may be a slot soon free
		case n == nil:
			// gone: it blocks nothing any more
		case n.p != p:
			w.targets = append(w.targets, n)
		}
	}
	p.waits = append(p.waits, w)
}

// behind reads the lines of the nodes of the leases asked about that it
// has not read yet: the foreign sessions found waiting in them get their
// waits, and the leases found waiting in them are asked about (one of
// them may be what a foreign session waits for).
func (g *waitGraph) behind(ctx context.Context) {
	for _, p := range g.sortedParties() {
		if !p.asked || p.behind {
			continue
		}
		p.behind = true
		for _, own := range p.owns {
			line := path.Dir(own)
			kind, name, ok := g.svc.lineName(line)
			l := g.line(line)
			if !ok || l == nil || strings.HasSuffix(line, "/leases") {
				continue // a semaphore's slots: who waits for one is in its admission line
			}
			for i, c := range l.nodes {
				if l.holding[i] || g.waits[line+"/"+c.Name] {
					continue
				}
				if n := g.node(line+"/"+c.Name, c, false); n != nil && n.p.session != "" {
					g.addWait(ctx, n.p, PartyHold{Kind: kind, Name: name, Mode: c.Mode, Line: line, Node: c.Name, Czxid: n.czxid})
				}
			}
		}
	}
}

func (g *waitGraph) sortedParties() []*graphParty {
	out := make([]*graphParty, 0, len(g.parties))
	for _, p := range g.parties {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *graphParty) int { return cmp.Compare(a.key, b.key) })
	return out
}

// reduce works out who gets on: parties without a known wait, then, again
// and again, those with a wait that can be met by those who get on.
func (g *waitGraph) reduce() {
	for _, n := range g.nodes {
		if n != nil && n.p.told && n.p.known {
			n.going = !slices.Contains(n.p.owns, n.path)
		}
	}
	for _, p := range g.parties {
		p.progress = !p.known || len(p.waits) == 0
	}
	for changed := true; changed; {
		changed = false
		for _, p := range g.parties {
			if p.progress {
				continue
			}
			for _, w := range p.waits {
				if w.getsOn() {
					p.progress, changed = true, true
					break
				}
			}
		}
	}
}

// getsOn says whether w can be met by the parties that get on.
func (w *graphWait) getsOn() bool {
	if w.unknown || len(w.targets) == 0 {
		return true
	}
	for _, n := range w.targets {
		if w.slots && n.getsOn() {
			return true
		}
		if !w.slots && !n.getsOn() {
			return false
		}
	}
	return !w.slots
}

// getsOn says whether n will go: it is on its way out, or its party gets
// on.
func (n *graphNode) getsOn() bool { return n.going || n.p.progress }

// stuckTargets are the targets of w that do not get on.
func (w *graphWait) stuckTargets() []*graphNode {
	var out []*graphNode
	for _, n := range w.targets {
		if !n.getsOn() {
			out = append(out, n)
		}
	}
	return out
}

// component is the strongly connected component of the stuck parties that
// p belongs to (Tarjan's algorithm, over the stuck edges).
func (g *waitGraph) component(p *graphParty) []*graphParty {
	for _, q := range g.parties {
		q.index, q.low, q.onStack = -1, 0, false
	}
	var stack []*graphParty
	var found []*graphParty
	index := 0
	var visit func(v *graphParty)
	visit = func(v *graphParty) {
		v.index, v.low = index, index
		index++
		stack = append(stack, v)
		v.onStack = true
		for _, w := range v.waits {
			for _, n := range w.stuckTargets() {
				u := n.p
				if u.index < 0 {
					visit(u)
					v.low = min(v.low, u.low)
				} else if u.onStack {
					v.low = min(v.low, u.index)
				}
			}
		}
		if v.low == v.index {
			var scc []*graphParty
			for {
				u := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				u.onStack = false
				scc = append(scc, u)
				if u == v {
					break
				}
			}
			if slices.Contains(scc, p) {
				found = scc
			}
		}
	}
	if !p.progress {
		visit(p)
	}
	return found
}

// victimOf is the wait to end to break the deadlock p is in: the wait of
// a zkgate lease on a cycle of p's component with the newest node; nil
// when p is in none.
func (g *waitGraph) victimOf(p *graphParty) *graphWait {
	scc := g.component(p)
	if len(scc) < 2 {
		return nil
	}
	var victim *graphWait
	for _, q := range scc {
		if q.lease == "" {
			continue
		}
		for _, w := range q.waits {
			if !slices.ContainsFunc(w.stuckTargets(), func(n *graphNode) bool { return slices.Contains(scc, n.p) }) {
				continue
			}
			if victim == nil || cmp.Or(cmp.Compare(w.czxid, victim.czxid), cmp.Compare(w.id(), victim.id())) > 0 {
				victim = w
			}
		}
	}
	return victim
}

// cycleThrough is a shortest cycle of stuck waits that starts with v.
func (g *waitGraph) cycleThrough(v *graphWait) []CycleStep {
	scc := g.component(v.p)
	type hop struct {
		w *graphWait
		n *graphNode
	}
	// Breadth first from the parties v waits for, back to v's party.
	prev := map[*graphParty]hop{}
	var queue []*graphParty
	for _, n := range v.stuckTargets() {
		if slices.Contains(scc, n.p) {
			if _, seen := prev[n.p]; !seen {
				prev[n.p] = hop{v, n}
				queue = append(queue, n.p)
			}
		}
	}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		if q == v.p {
			break
		}
		for _, w := range q.waits {
			for _, n := range w.stuckTargets() {
				if _, seen := prev[n.p]; !seen && slices.Contains(scc, n.p) {
					prev[n.p] = hop{w, n}
					queue = append(queue, n.p)
				}
			}
		}
	}
	var hops []hop
	for q := v.p; ; {
		h, ok := prev[q]
		if !ok {
			return nil
		}
		hops = append(hops, h)
		q = h.w.p
		if q == v.p || len(hops) > len(scc) {
			break
		}
	}
	slices.Reverse(hops)
	steps := make([]CycleStep, 0, len(hops))
	for _, h := range hops {
		p := h.w.p
		steps = append(steps, CycleStep{Lease: p.lease, Session: p.session, Holder: p.holder, Gateway: p.gateway,
			Kind: h.w.kind, Name: h.w.name, Mode: h.w.mode, Node: h.w.node, Blocker: path.Base(h.n.path), BlockerMode: h.n.mode})
	}
	return steps
}

// nodeOwner is who owns a node, as its data and stat say.
type nodeOwner struct {
	lease, holder, gateway string
	session, czxid         int64
}

// nodeOwners remembers who owns the nodes deadlock checks read: a node
// never changes owner, so each is read once (until the memory is full,
// when it starts again: only reads are lost).
type nodeOwners struct {
	mu sync.Mutex
	m  map[string]nodeOwner
}

func (o *nodeOwners) get(p string) (nodeOwner, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, ok := o.m[p]
	return n, ok
}

func (o *nodeOwners) put(p string, n nodeOwner) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil || len(o.m) >= 10_000 {
		o.m = map[string]nodeOwner{}
	}
	o.m[p] = n
}
