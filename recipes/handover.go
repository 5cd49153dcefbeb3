package recipes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// A handover moves one ZooKeeper session of a gateway, with every lease
// made in it and everything they hold or wait for, to another gateway (or to
// this gateway's next run): a restart then costs its clients nothing.
//
// ZooKeeper keeps a session alive for its timeout after its connection
// closes, and any client that presents its id and password resumes it,
// ephemeral nodes and all. So the giver freezes the session's leases
// (nothing starts or ends; waits answer ErrMoving, 503, and keep their place
// in line), writes down their state, and gives the session up without ending
// it (Session.Detach: it never reconnects). The taker resumes the session,
// rebuilds the leases and holds from that state, and rewrites the lease
// records to name itself. The nodes, their sequence numbers and czxids (the
// fencing tokens) do not change: the same session keeps them. A lease is
// kept by one gateway at a time: the giver never touches the session again
// once Detach returns, and ZooKeeper moves a session to its newest
// connection.
//
// A waiting hold that no client was told of (a lock acquire that was
// waiting when its gateway began to hand over) stays in line for its
// client's retry, which joins it: for HandoverGrace, after which it is
// abandoned as any hold whose caller went away.

// HandoverGrace is how long a handed-over waiting hold that no client was
// told of waits for its client's retry.
const HandoverGrace = 10 * time.Second

// restore makes the hold st describes, for lease, in svc.
func (s *Service) restore(lease *Lease, st HoldState) (holding, error) {
	var hs holding
	switch st.Kind {
	case "lock":
		if _, err := ValidMode(st.Mode); err != nil {
			return nil, err
		}
		hs = &lockHold{hold: newHold(s.lines, lease, st.Kind, st.Key, st.Name), mode: st.Mode, parent: s.Locks.parent(st.Name)}
	case "semaphore":
		hs = &semHold{hold: newHold(s.lines, lease, st.Kind, st.Key, st.Name), limit: st.Limit}
	case "election":
		hs = &candidacy{hold: newHold(s.lines, lease, st.Kind, st.Key, st.Name), value: st.Value}
	case "double-barrier":
		hs = &membership{hold: newHold(s.lines, lease, st.Kind, st.Key, st.Name), member: st.Member, count: st.Count,
			path: s.DoubleBarriers.path(st.Name) + "/" + st.Member}
	case "group":
		if err := ValidName(st.Member); err != nil {
			return nil, err
		}
		hs = &groupMembership{hold: newHold(s.lines, lease, st.Kind, st.Key, st.Name), member: st.Member, value: st.Value}
	case "claim":
		c := &claimHold{hold: newHold(s.lines, lease, st.Kind, st.Key, st.Name), q: s.Queues}
		c.dropUntold = true
		if st.Item != nil {
			c.item = *st.Item
			_, c.item.seq, _ = ParseItemID(c.item.ID)
		}
		hs = c
	default:
		return nil, fmt.Errorf("a hold of unknown kind %q", st.Kind)
	}
	if err := ValidName(st.Name); err != nil {
		return nil, err
	}
	c := hs.core()
	c.self = hs
	c.mu.Lock()
	c.restoreLocked(st)
	c.mu.Unlock()
	return hs, nil
}

// HandOver freezes the leases of the service's session, writes down their
// state and gives the session up without ending it (Session.Detach), for
// another gateway (or this gateway's next run) to Adopt. From then on the
// leases are not this gateway's: every request for one answers ErrMoving
// until the taker keeps it (the lease records then name the taker). It
// fails, and changes nothing, if the session is not live. The holds'
// operations under way end with their waits (the leases' contexts are
// cancelled first), so the wait for them is short.
func (s *Service) HandOver(ctx context.Context) (*Handover, error) {
	if st, _, _ := s.sess.Status(); st != StateLive {
		return nil, unavailable()
	}
	ls := s.Leases
	ls.mu.Lock()
	ls.handingOver = true // no new lease: Grant answers ErrMoving
	ls.mu.Unlock()
	created := make(chan struct{})
	go func() { ls.creating.Wait(); close(created) }()
	select {
	case <-created: // the leases being made are live now, or failed
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	ls.mu.Lock()
	leases := make([]*Lease, 0, len(ls.live))
	for _, l := range ls.live {
		leases = append(leases, l)
	}
	ls.mu.Unlock()
	for _, l := range leases {
		l.moving.Store(true)
		l.cancel(ErrMoving) // every wait of the lease ends, its holds stay
	}
	// Holds' operations under way (a create) finish under their hold's
	// lock: state waits for each.
	h := &Handover{From: s.gatewayID, taken: time.Now()}
	for _, l := range leases {
		l.mu.Lock()
		ending := l.ending
		if l.timer != nil {
			l.timer.Stop()
		}
		left := l.expiresAt.Sub(h.taken) // all counted from one instant, as Aged takes them
		holds := l.holdingsLocked()
		l.mu.Unlock()
		if ending {
			<-l.done // it ended before it froze: not handed over
			continue
		}
		st := LeaseState{LeaseTerms: l.LeaseTerms, Left: Duration(max(left, 0)), ExpiresAt: l.expiresAt.UTC()}
		for _, hs := range holds {
			hst := state(hs)
			// The hold goes on at the taker, which counts it from then on.
			s.contention.forget(hs.core())
			if len(hst.Nodes) == 0 && !hst.Granted {
				continue // nothing in ZooKeeper yet: the client's retry starts anew
			}
			st.Holds = append(st.Holds, hst)
		}
		sort.Slice(st.Holds, func(i, j int) bool { return st.Holds[i].Key < st.Holds[j].Key })
		h.Leases = append(h.Leases, st)
	}
	h.Session = s.sess.Saved()
	s.sess.Detach()
	// The session is not this gateway's any more: its next keeper (a peer,
	// or this gateway's next start through the file a SIGTERM saves)
	// resumes it from h, never twice.
	ls.journal.remove()
	ls.mu.Lock()
	for _, l := range leases {
		delete(ls.live, l.ID) // not this gateway's any more; not remembered as ended either
	}
	ls.mu.Unlock()
	return h, nil
}

// Adopt resumes the session h hands over and keeps its leases from now on:
// a service of its own on that session (with this gateway's id), whose
// leases Leases finds as its own. The lease records are rewritten to name
// this gateway. ErrSessionGone: the session expired before it could be
// resumed (its leases are gone).
func (s *Service) Adopt(ctx context.Context, cfg SessionConfig, h *Handover) error {
	cfg.Resume = &h.Session
	sess, err := Connect(ctx, cfg)
	if err != nil {
		return err
	}
	// The gateway's own configuration: its peer secret signs the rewritten
	// records, or no other gateway would locate the leases through them.
	sub := New(sess, s.cfg)
	sub.parent = s
	sub.contention = s.contention
	_, epoch, _ := sess.Status()
	live, listed, err := sub.ephemerals(ctx)
	if err != nil {
		s.log.Warn("the ephemeral nodes of the adopted session could not be listed: its leases are kept as handed over", "session", h.Session, "err", err)
	}
	leases := h.Leases
	if listed {
		leases = sub.keptInZooKeeper(leases, live)
	}
	for _, st := range leases {
		switch {
		case h.SameClock:
			st.Left = Duration(max(time.Until(st.ExpiresAt), 0))
		case !h.Received.IsZero():
			st.Left = Duration(max(time.Duration(st.Left)-time.Since(h.Received), 0))
		}
		if err := sub.Leases.restore(st, epoch); err != nil {
			s.log.Error("a handed-over lease could not be kept", "lease", st.ID, "err", err)
		}
	}
	// Recorded before any of its leases is served here.
	if err := sub.Leases.journal.begin(epoch, h.Session, s.gatewayID, sub.Leases.states()); err != nil {
		s.log.Error("the write-ahead record of an adopted session could not begin: a crash now ends its leases", "session", h.Session, "err", err)
	}
	if err := sub.sweepOrphans(ctx, live, listed, h.ended); err != nil {
		s.log.Warn("the nodes of the adopted session that no lease holds could not be swept", "session", h.Session, "err", err)
	}
	if err := sub.Leases.rewriteRecords(ctx); err != nil {
		s.log.Warn("rewrite the records of handed-over leases", "err", err)
	}
	sub.endRegistrations(ctx)
	s.adoptMu.Lock()
	s.adopted = append(s.adopted, sub)
	s.adoptMu.Unlock()
	go s.retire(sub)
	s.log.Info("adopted a handed-over session", "session", h.Session, "from", h.From, "leases", len(h.Leases))
	return nil
}

// states is the table's leases as a journal records them.
func (ls *Leases) states() []LeaseState {
	var out []LeaseState
	for _, l := range ls.List() {
		l.mu.Lock()
		st := LeaseState{LeaseTerms: l.LeaseTerms, ExpiresAt: l.expiresAt.UTC().Round(0)}
		holds := l.holdingsLocked()
		l.mu.Unlock()
		for _, hs := range holds {
			st.Holds = append(st.Holds, state(hs))
		}
		sort.Slice(st.Holds, func(i, j int) bool { return st.Holds[i].Key < st.Holds[j].Key })
		out = append(out, st)
	}
	return out
}

// ephemerals lists the ephemeral nodes of the service's session under its
// root (ZooKeeper's getEphemerals, since 3.6); listed is false, with a
// warning, when ZooKeeper is older.
func (s *Service) ephemerals(ctx context.Context) (live map[string]bool, listed bool, err error) {
	_, epoch, _ := s.sess.Status()
	for {
		// Synced first: the server this session reached now may be behind
		// the one its previous keeper wrote through.
		conn := s.sess.Conn()
		_, err := conn.Sync(s.sess.Root())
		var paths []string
		if err == nil {
			paths, err = conn.Ephemerals(s.sess.Root() + "/")
		}
		if err == nil {
			live = make(map[string]bool, len(paths))
			for _, p := range paths {
				live[p] = true
			}
			return live, true, nil
		}
		if errors.Is(err, zk.ErrUnimplemented) {
			s.log.Warn("this ZooKeeper does not list a session's ephemeral nodes (getEphemerals, ZooKeeper 3.6): "+
				"nodes made for a lease that a killed gateway had not recorded stay as long as the resumed session", "err", err)
			return nil, false, nil
		}
		if !ambiguous(err) {
			return nil, false, err
		}
		if werr := s.sess.waitEpoch(ctx, epoch); werr != nil {
			return nil, false, werr
		}
	}
}

// keptInZooKeeper is leases as ZooKeeper keeps them in the session, whose ephemeral
// nodes are live: a lease whose record is gone has ended, and a hold whose
// (ephemeral) node is gone is over. What was handed over is then resumed
// only where ZooKeeper agrees, even from a record that missed a change (a
// crash of the machine may lose a journal's latest lines): a lease never
// claims a lock whose node went. A hold left out leaves its other nodes to
// sweepOrphans.
func (s *Service) keptInZooKeeper(leases []LeaseState, live map[string]bool) []LeaseState {
	var out []LeaseState
	for _, st := range leases {
		if !live[s.Leases.recordPath(st.ID)] {
			s.log.Info("a handed-over lease whose record is gone has ended: not resumed", "lease", st.ID)
			continue
		}
		var holds []HoldState
		for _, hst := range st.Holds {
			whole := true
			for _, n := range hst.Nodes {
				whole = whole && (n.Role == delayRole || live[n.Path]) // a lock-delay marker is persistent
			}
			if !whole {
				s.log.Info("a handed-over hold whose node is gone is over: not resumed", "lease", st.ID, "kind", hst.Kind, "name", hst.Name)
				continue
			}
			holds = append(holds, hst)
		}
		st.Holds = holds
		out = append(out, st)
	}
	return out
}

// sweepOrphans deletes the ephemeral nodes of the service's session (an
// adopted one) that none of its leases holds (live, listed by ephemerals;
// nothing without a list): nodes that ZooKeeper made for a gateway killed
// before it recorded them (see journal.go), which the live session would
// otherwise keep for good (a lock never free again). The records of leases
// that were not resumed end too, in their history, as ended (the reason the
// journal gives, else revoked: no client was told of them). The gateways'
// registrations are left to endRegistrations.
func (s *Service) sweepOrphans(ctx context.Context, live map[string]bool, listed bool, ended map[string]string) error {
	if !listed {
		return nil
	}
	root := s.sess.Root()
	owned := map[string]bool{}
	for _, l := range s.Leases.List() {
		owned[s.Leases.recordPath(l.ID)] = true
		l.mu.Lock()
		holds := l.holdingsLocked()
		l.mu.Unlock()
		for _, hs := range holds {
			c := hs.core()
			c.mu.Lock()
			for _, n := range c.nodes {
				owned[n.path] = true
			}
			c.mu.Unlock()
		}
	}
	_, epoch, _ := s.sess.Status()
	var first error
	records := root + "/leases/"
	for p := range live {
		if owned[p] || strings.HasPrefix(p, root+"/gateways/") {
			continue
		}
		var err error
		if id, ok := strings.CutPrefix(p, records); ok && !strings.Contains(id, "/") {
			reason := ended[id]
			if reason == "" {
				reason = EndRevoked
			}
			s.log.Info("a lease that the killed gateway had not recorded, or had begun to end: ended", "lease", id, "reason", reason)
			err = s.Leases.endRecord(ctx, &Lease{LeaseTerms: LeaseTerms{ID: id}, epoch: epoch}, reason)
		} else {
			s.log.Info("a node that no resumed lease holds: deleted", "node", p)
			err = s.sess.deleteNode(ctx, p, epoch)
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// endRegistrations ends the gateways' registrations that came with the
// adopted session (ephemeral nodes of that session: the giver's, or one
// that came along an earlier handover). A registration's gateway is
// going: it stays listed, draining, until its drain ends, as it would
// have in its own session, and then goes.
func (s *Service) endRegistrations(ctx context.Context) {
	dir := s.sess.Root() + "/gateways"
	names, err := s.sess.children(ctx, dir)
	if err != nil {
		return
	}
	_, _, session := s.sess.Status()
	for _, name := range names {
		p := dir + "/" + name
		raw, stat, err := s.sess.Conn().Get(p)
		if err != nil || stat.EphemeralOwner != session {
			continue
		}
		var left time.Duration
		if g := s.readRegistration(p, name, stat, raw); g.DrainingUntil != nil {
			left = time.Until(*g.DrainingUntil)
		}
		version := stat.Version
		time.AfterFunc(max(left, 0), func() { _ = s.sess.Conn().Delete(p, version) })
	}
}

// retire closes an adopted service once its last lease has ended (or its
// session is lost): its session has nothing left to keep.
func (s *Service) retire(sub *Service) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for range t.C {
		st, _, _ := sub.sess.Status()
		if st == StateClosed {
			break // handed over again, or closed with the gateway
		}
		if sub.Leases.Count() == 0 {
			sub.Close()
			sub.sess.Close()
			break
		}
	}
	s.adoptMu.Lock()
	for i, a := range s.adopted {
		if a == sub {
			s.adopted = append(s.adopted[:i], s.adopted[i+1:]...)
			break
		}
	}
	s.adoptMu.Unlock()
}

// Moved records that the leases of h went to the gateway k: a lookup of
// one of them here answers k from then on, without ZooKeeper (this
// gateway gave its sessions up).
func (s *Service) Moved(h *Handover, k Keeper) {
	ls := s.Leases
	if s.parent != nil {
		ls = s.parent.Leases
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.moved == nil {
		ls.moved = map[string]Keeper{}
	}
	for _, l := range h.Leases {
		ls.moved[l.ID] = k
	}
}

// Services is this service and those it adopted: every session whose
// leases this gateway keeps.
func (s *Service) Services() []*Service {
	s.adoptMu.Lock()
	defer s.adoptMu.Unlock()
	return append([]*Service{s}, s.adopted...)
}

// restore rebuilds a handed-over lease in this table, bound to epoch (the
// resumed session's), with its TTL left and its holds.
func (ls *Leases) restore(st LeaseState, epoch uint64) error {
	if len(st.ID) != 36 {
		return fmt.Errorf("a lease id %q", st.ID)
	}
	lctx, cancel := context.WithCancelCause(context.Background())
	l := &Lease{LeaseTerms: st.LeaseTerms, epoch: epoch, table: ls, ctx: lctx, cancel: cancel, done: make(chan struct{}),
		expiresAt: time.Now().Add(time.Duration(st.Left)), holds: map[string]holding{}}
	for _, hst := range st.Holds {
		hs, err := ls.svc.restore(l, hst)
		if err != nil {
			ls.log.Error("a handed-over hold could not be kept; its nodes stay until the lease ends", "lease", st.ID, "hold", hst.Key, "err", err)
			continue
		}
		l.holds[hst.Key] = hs
		c := hs.core()
		if hst.Granted {
			ls.svc.contention.granted(c)
		}
		if !hst.Told && !hst.Granted {
			// A wait that its client will retry: its place in line is kept
			// for HandoverGrace, as if a call still waited on it, or until
			// the retry comes (which then waits in its stead: given up, it
			// leaves the line as any wait).
			c.mu.Lock()
			c.waiters++
			c.graceHeld = true
			c.mu.Unlock()
			time.AfterFunc(HandoverGrace, func() {
				c.mu.Lock()
				held := c.graceHeld
				c.graceHeld = false
				c.mu.Unlock()
				if held { // no retry came
					c.leave(false)
				}
			})
		}
	}
	l.timer = time.AfterFunc(time.Duration(st.Left), l.onTimer)
	ls.mu.Lock()
	ls.live[l.ID] = l
	ls.mu.Unlock()
	return nil
}

// rewriteRecords makes the records of this table's leases name this
// gateway, so that the others forward their requests here. Each is made
// anew (in the same session, one transaction) rather than set: the
// dashboards' cache follows the list of records, not each one's data.
func (ls *Leases) rewriteRecords(ctx context.Context) error {
	var first error
	_, _, owner := ls.sess.Status()
	for _, l := range ls.List() {
		p := ls.recordPath(l.ID)
		data := ls.recordOf(l, owner)
		for {
			_, err := ls.sess.Conn().Multi(&zk.DeleteRequest{Path: p, Version: -1},
				&zk.CreateRequest{Path: p, Data: data, Acl: ls.sess.acl(), Flags: zk.FlagEphemeral})
			if err == nil || errors.Is(err, zk.ErrNoNode) {
				break
			}
			if !ambiguous(err) {
				if first == nil {
					first = err
				}
				break
			}
			if werr := ls.sess.waitEpoch(ctx, l.epoch); werr != nil {
				return werr
			}
		}
	}
	return first
}

// state is what hs holds, for a handover: the common part and its recipe's.
func state(hs holding) HoldState {
	c := hs.core()
	c.mu.Lock()
	defer c.mu.Unlock()
	return stateLocked(hs)
}

// stateLocked is state with the hold's lock held.
func stateLocked(hs holding) HoldState {
	st := hs.core().stateLocked()
	switch h := hs.(type) {
	case *lockHold:
		st.Mode = h.mode
	case *semHold:
		st.Limit = h.limit
	case *candidacy:
		st.Value = h.value
	case *membership:
		st.Member, st.Count = h.member, h.count
	case *groupMembership:
		st.Member, st.Value = h.member, h.value
	case *claimHold:
		if h.granted {
			item := h.item
			st.Item = &item
		}
	}
	return st
}
