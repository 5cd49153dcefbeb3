package recipes

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// Elections follow Curator's LeaderLatch: every candidate is an
// EPHEMERAL_SEQUENTIAL `latch-` node under {root}/elections/{name}, and the
// lowest sequence leads. A candidate waits only for its predecessor.
type Elections struct {
	*lines
	cache *watchCache
	keep  *keepers
	of    func(*Lease) *Elections // the elections of the lease's session
}

// MaxValueBytes bounds a candidate's value.
const MaxValueBytes = 64 << 10

// Campaign is the answer to a campaign: elected, or a candidate in line.
type Campaign struct {
	Name     string     `json:"name"`
	Elected  bool       `json:"elected"`
	Lease    string     `json:"lease"`
	Node     string     `json:"node"`
	Token    int64      `json:"token,omitempty"` // the latch node's czxid, when elected
	Value    string     `json:"value"`
	Since    time.Time  `json:"since"`              // candidacy or leadership start
	Position int        `json:"position,omitempty"` // 1: next in line, when not elected
	Leader   *Contender `json:"leader,omitempty"`   // the current leader, when not elected
}

// ElectionState is the leader (nil if none) and the candidates in line.
type ElectionState struct {
	Name       string      `json:"name"`
	Leader     *Contender  `json:"leader"`
	Candidates []Contender `json:"candidates"`
	Index      int64       `json:"-"`
}

// ElectionSummary is one line of the election list.
type ElectionSummary struct {
	Name       string     `json:"name"`
	Leader     *Contender `json:"leader"`
	Candidates int        `json:"candidates"`
}

func (e *Elections) parent(name string) string { return kinds.Elections.Path(e.sess.Root(), name) }

// candidacy is a lease's latch node in one election.
type candidacy struct {
	hold
	value string // guarded by hold.mu
}

const latchRole = "latch"

func electionKey(name string) string { return "election\x00" + name }

func (c *candidacy) info() HoldInfo {
	return c.describe(func(i *HoldInfo) { i.Node = c.nodeLocked(latchRole) })
}

func (c *candidacy) dataLocked() []byte {
	return nodeData{Lease: c.lease.ID, Holder: c.lease.Holder, Gateway: c.lines.gatewayID, Value: c.value}.bytes()
}

// Campaign makes lease a candidate of election name (or finds its existing
// candidacy) and waits up to wait to be elected. When the wait ends first the
// candidacy stays, and the answer says where it stands. A candidacy that no
// client was ever told of is withdrawn if every call waiting on it goes
// away (the client hung up).
func (e *Elections) Campaign(ctx context.Context, lease *Lease, name, value string, wait time.Duration) (Campaign, error) {
	if o := e.of(lease); o != e {
		return o.Campaign(ctx, lease, name, value, wait)
	}
	if err := checkCandidate(lease, name, value); err != nil {
		return Campaign{}, err
	}
	key := electionKey(name)
	c, err := joinHold(lease, key, func() *candidacy {
		return &candidacy{hold: newHold(e.lines, lease, "election", key, name), value: value}
	}, nil)
	if err != nil {
		return Campaign{}, err
	}
	cctx, stop := c.whileHeld(ctx, Errorf(CodeNotHeld, "the candidacy in election %q was withdrawn while this campaign waited", name))
	out, told, err := e.campaign(cctx, c, wait)
	stop()
	c.leave(told)
	return out, err
}

// campaign is Campaign's wait; told says that the answer tells the client of
// a candidacy that stays.
func (e *Elections) campaign(ctx context.Context, c *candidacy, wait time.Duration) (Campaign, bool, error) {
	ln, lease, name := e.lines, c.lease, c.name
	ctx, cancel := waitContext(ctx, lease, wait)
	defer cancel()

	node, czxid, after, done, err := c.ensureInLine(latchRole, e.parent(name), func(list bool) (string, *zk.Stat, *listing, error) {
		return ln.sess.createProtected(ctx, e.parent(name), lease.ID, "latch-", c.dataLocked(), lease.epoch, list)
	})
	if errors.Is(err, errHoldGone) {
		return Campaign{}, false, c.goneErr("the candidacy in election")
	}
	if err != nil {
		return Campaign{}, false, waitErr(ctx, lease, err)
	}

	ln.metrics.Waiting("election", 1)
	start := time.Now()
	t, err := ln.waitTurn(ctx, lease, e.parent(name), node, after, latchMarkers, anyBlocks, wait <= 0, c.recordNode)
	done()
	ln.metrics.Waiting("election", -1)
	switch {
	case err == nil:
		token, serr := ln.tokenOf(ctx, lease, &c.hold, node, czxid, t)
		if serr == nil {
			serr = ln.markDelay(ctx, &c.hold, e.parent(name), node)
		}
		if errors.Is(serr, errHoldGone) {
			return Campaign{}, false, c.goneErr("the candidacy in election")
		}
		if serr != nil {
			return Campaign{}, false, serr
		}
		c.mu.Lock()
		if !c.granted {
			ln.metrics.Granted("election", time.Since(start))
		}
		c.markGrantedLocked(token)
		out := Campaign{Name: name, Elected: true, Lease: lease.ID, Node: node, Token: c.token, Value: c.value, Since: c.grantedAt}
		c.mu.Unlock()
		return out, true, nil
	case errors.Is(err, errNodeGone):
		// Deleted behind our back: the candidacy is over.
		c.forgetNode(latchRole, node)
		_ = c.drop()
		if aerr := lease.alive(); aerr != nil {
			return Campaign{}, false, aerr
		}
		return Campaign{}, false, Errorf(CodeNotHeld, "the candidacy in election %q was withdrawn while this campaign waited", name)
	case ErrorCode(err) != CodeTimeout:
		return Campaign{}, false, err
	case ctx.Err() != nil && !errors.Is(context.Cause(ctx), errWaitElapsed):
		return Campaign{}, false, err // the client went away
	}
	c.mu.Lock()
	out := Campaign{Name: name, Lease: lease.ID, Node: node, Value: c.value, Since: c.since, Position: t.index}
	c.mu.Unlock()
	// The leader as the wait last saw it; read alone, not the whole line.
	if len(t.contenders) > 0 && t.index > 0 {
		lead := t.contenders[0]
		if data, stat, err := ln.sess.Conn().Get(e.parent(name) + "/" + lead.Name); err == nil {
			h := []Contender{holderOf(lead, Node{Name: lead.Name, Data: data, Stat: *stat})}
			e.keep.keptBy(h)
			h[0].Mode = ""
			out.Leader = &h[0]
		}
	}
	return out, true, nil
}

// checkCandidate checks a campaign's or proclaim's arguments and lease.
func checkCandidate(lease *Lease, name, value string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if len(value) > MaxValueBytes {
		return Errorf(CodeInvalid, "value must be at most %d bytes", MaxValueBytes)
	}
	return lease.alive()
}

// Resign withdraws lease's candidacy (and leadership).
func (e *Elections) Resign(ctx context.Context, lease *Lease, name string) error {
	if o := e.of(lease); o != e {
		return o.Resign(ctx, lease, name)
	}
	return dropHeld[*candidacy](lease, name, electionKey, "resign", "lease %s is no candidate in election %q")
}

// Proclaim sets the leader's value. Only the current leader may.
func (e *Elections) Proclaim(ctx context.Context, lease *Lease, name, value string) (Campaign, error) {
	if o := e.of(lease); o != e {
		return o.Proclaim(ctx, lease, name, value)
	}
	if err := checkCandidate(lease, name, value); err != nil {
		return Campaign{}, err
	}
	notLeader := &Error{Code: CodeNotLeader, Detail: fmt.Sprintf("lease %s does not lead election %q", lease.ID, name)}
	c, ok := heldBy[*candidacy](lease, electionKey(name))
	if !ok {
		return Campaign{}, notLeader
	}
	node := c.node(latchRole)
	if node == "" {
		return Campaign{}, notLeader
	}
	// Leadership is a fact of ZooKeeper, not of memory: check it now.
	kids, err := e.sess.children(ctx, e.parent(name))
	if err != nil {
		return Campaign{}, err
	}
	cs := sortContenders(kids, latchMarkers)
	if len(cs) == 0 || cs[0].Name != path.Base(node) {
		return Campaign{}, notLeader
	}
	if err := e.sess.check(lease.epoch); err != nil {
		return Campaign{}, err
	}
	c.mu.Lock()
	c.value = value
	data := c.dataLocked()
	c.mu.Unlock()
	// Touching the parent too tells every watch cache (which watches the
	// parent, not each candidate) that a candidate's data changed.
	_, err = e.sess.Conn().Multi(
		&zk.SetDataRequest{Path: node, Data: data, Version: -1},
		&zk.SetDataRequest{Path: e.parent(name), Data: nil, Version: -1},
	)
	if err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			return Campaign{}, notLeader
		}
		return Campaign{}, readErr(err)
	}
	stat, err := e.ownNode(ctx, lease, node)
	if err != nil {
		return Campaign{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.markGrantedLocked(stat.Czxid)
	c.journalLocked() // the new value, before the client is told
	return Campaign{Name: name, Elected: true, Lease: lease.ID, Node: node, Token: c.token, Value: c.value, Since: c.grantedAt}, nil
}

// State returns the leader and the candidates; with index > 0 it is a
// blocking read, which also reports "no leader".
func (e *Elections) State(ctx context.Context, name string, index int64, wait time.Duration) (ElectionState, error) {
	st, err := readState(ctx, e.cache, name, e.parent(name), seqOpts, index, wait, electionStateOf)
	if err == nil {
		e.keep.keptBy(st.Candidates)
		if st.Leader != nil {
			leader := st.Candidates[0]
			st.Leader = &leader
		}
	}
	return st, err
}

func electionStateOf(name string, snap *Snapshot) ElectionState {
	st := ElectionState{Name: name, Candidates: []Contender{}, Index: snap.Index}
	for i, c := range contendersOf(snap, latchMarkers) {
		h := holderOf(c, nodeNamed(snap, c.Name))
		h.Mode = ""
		st.Candidates = append(st.Candidates, h)
		if i == 0 {
			leader := h
			st.Leader = &leader
		}
	}
	return st
}

// List returns one page of the elections with candidates, with their
// leaders, and the name the next page starts after ("" for the last page).
func (e *Elections) List(ctx context.Context, p Page) ([]ElectionSummary, string, error) {
	return listPage(ctx, e.sess, kinds.Elections.Dir(e.sess.Root()), p, nil, func(ctx context.Context, name string) (ElectionSummary, bool, error) {
		st, err := e.State(ctx, name, 0, 0)
		if err != nil {
			return ElectionSummary{}, false, err
		}
		return ElectionSummary{Name: name, Leader: st.Leader, Candidates: len(st.Candidates)}, len(st.Candidates) > 0, nil
	})
}

// WithoutSessions leaves out the leader's and the candidates' session ids.
func (s *ElectionState) WithoutSessions() {
	s.Leader, s.Candidates = withoutSession(s.Leader), withoutSessions(s.Candidates)
}

// WithoutSessions leaves out the leader's session id.
func (s *ElectionSummary) WithoutSessions() { s.Leader = withoutSession(s.Leader) }

// ItemName is the election's name, in a list.
func (s ElectionSummary) ItemName() string { return s.Name }

// WithoutSessions leaves out the leader's session id.
func (c *Campaign) WithoutSessions() { c.Leader = withoutSession(c.Leader) }
