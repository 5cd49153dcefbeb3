//go:build linux

package faults

import (
	"fmt"
	"sort"
	"time"
)

// Violation is one thing the history shows that must never happen.
type Violation struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// handoverTransit bounds how much later than its TTL a lease handed over
// to another gateway may end: the taker counts the TTL left from when the
// handover reached it, the time it took to get there later (a millisecond
// or two on loopback; more under load).
const handoverTransit = 50 * time.Millisecond

// The kinds of violation, each a promise of the gateway (or of the suite's
// own clients, for write_after_lease_end) seen broken.
const (
	// A grant whose request was sent after another grant of the lock had
	// been received carries a token no larger than that one: tokens must
	// grow in grant order.
	VTokenOrder = "token_order"
	// A gateway vouched for a lease's hold (release 204, fence 200) in
	// answer to a request sent after another lease had received a grant of
	// the same lock with a larger token: two holders at once.
	VDoubleGrant = "double_grant"
	// A grant for a lease whose gateway session was already lost (the
	// request was sent, or the grant made, after the loss).
	VGrantAfterLoss = "grant_after_session_loss"
	// A 200 about a lease (keepalive, read) to a request sent after the
	// session holding it was lost.
	VAliveAfterLoss = "lease_alive_after_session_loss"
	// The register accepted a write of a lease after its client had been
	// told that the lease had ended.
	VWriteAfterEnd = "write_after_lease_end"
	// A lease answered lease_expired (reason expired) before its TTL had
	// run out since the last request that extended it was sent.
	VEndedEarly = "lease_ended_early"
	// A lease whose keepalives stopped answered 200 to a request sent after
	// its TTL had run out since its client received the last answer that
	// extended it.
	VOutlivedTTL = "lease_outlived_ttl"
	// A 410 said a lease had ended while its record was still there, for
	// longer than the observer's delay (see goneAllowance and goneChecks).
	VGoneWhileAlive = "lease_gone_while_alive"
	// Two holders without fencing worked at once where the primitive
	// forbids it (see checkWallClock).
	VWallClockOverlap = "wallclock_overlap"
	// An acquire whose client hung up mid-wait left its waiter behind.
	VWaiterLeft = "vanished_waiter_left"
	// Two acks of one item were confirmed.
	VDoubleAck = "double_ack"
	// An item was served again after its ack was confirmed.
	VServedAfterAck = "acked_item_served_again"
	// An item confirmed produced was never acked, though the queue drained.
	VLostItem = "lost_item"
	// A claimed item nobody produced, or one body under two item ids.
	VPhantomItem = "phantom_item"
	// The queue still had items or claims when everything had healed.
	VNotDrained = "queue_not_drained"
	// An answer an endpoint may not give (a 500, a 400 to a valid request...).
	VUnexpected = "unexpected_answer"
	// A wait ended with 409 deadlock, though no client of the suite waits
	// while it holds (each takes one lock at a time): it was in no cycle.
	VFalseDeadlock = "deadlock_outside_a_cycle"

	// The counter (see checkCounter): below the sum of its acknowledged
	// adds, above that sum and every unanswered add, two acknowledged adds
	// answering the same value, or not readable at the end.
	VCounterLostAdd   = "counter_lost_add"
	VCounterDoubleAdd = "counter_add_applied_twice"
	VCounterSameValue = "counter_same_value_twice"
	VCounterUnread    = "counter_unread"
)

// maxPerKind bounds the details kept of one kind of violation.
const maxPerKind = 50

// goneAllowance is how long before the observer sees a lease's record
// deleted a 410 about the lease may be received: the observer's own delay
// (its ZooKeeper server applying the deletion, the watch event, and the
// harness's own scheduling, which has run 350 ms late on the loaded 2-core
// development machine). A gateway that reads the lease's end from
// ZooKeeper finds it after the record went (in the transaction that wrote
// the reason, or with its session), and a gateway that ends its own lease
// answers 410 once it has deleted the record.
const goneAllowance = 500 * time.Millisecond

// goneCheck is a 410 about a lease whose record the observer watched.
type goneCheck struct {
	end   LeaseEnd
	lease *LeaseRecord
	own   bool          // answered by the lease's own gateway (directly or passed on to it)
	lead  time.Duration // how long the record was seen after the answer came
	// excuse says why a lead over goneAllowance is no violation (see
	// goneChecks); "" for none.
	excuse string
}

// The excuses of goneCheck.
const (
	excuseReplaced    = "replaced"
	excuseSessionGone = "session_ended"
	excuseObserverOut = "observer_out"
	excuseTTLRunOut   = "ttl_run_out"
)

// goneChecks lists the 410s about leases whose record the observer
// watched. Not judged:
//   - an answer about a lease whose gateway process had been killed and
//     replaced at its address: the successor, or a gateway passing the
//     request there, answers session_lost at once, and ZooKeeper deletes
//     the record a session timeout later; for a lease handed over (Moved),
//     whose keeper the observer does not know, a session_lost answered by
//     a process that replaced a killed one counts as such a successor's;
//   - an answer of the lease's own gateway, with a lead over
//     goneAllowance, when the record went with the lease's session (the
//     observer saw the session end, its registration gone or replaced, by
//     then): the gateway gave the session up, and ZooKeeper may keep a
//     silent session past its timeout as it likes: it counts from the last
//     request it received, a new leader restarts every session's timeout,
//     and a follower that rejoins and replays a session's creation touches
//     it;
//   - an answer with a lead over goneAllowance when the observer had no
//     session at some time from the answer to the deletion it saw: its
//     watch event may have come late;
//   - an "expired" answered once the lease's TTL had run out since the
//     last extension its client sent (Deadline): the lease is over by its
//     TTL, and the gateway deletes its nodes and record as it ends it, on
//     a ZooKeeper that may be slow then (a gateway paused past the TTL
//     ends the lease as it resumes). One before Deadline is
//     lease_ended_early.
//
// A drained gateway needs no excuse: it ends its leases after it stops
// answering, and its session (their records with it) before it exits.
func goneChecks(h *History) []goneCheck {
	outBetween := func(from, to time.Time) bool {
		for _, s := range h.ObserverOut {
			if !s.From.After(to) && (s.To.IsZero() || !s.To.Before(from)) {
				return true
			}
		}
		return false
	}
	var out []goneCheck
	for _, e := range h.Ends {
		l := h.Leases[e.Lease]
		if e.Status != 410 || l == nil || l.RecordUntil.IsZero() {
			continue
		}
		c := goneCheck{end: e, lease: l, own: e.ServedBy != "" || e.Gateway == l.Gateway && e.Life == l.Life, lead: l.RecordUntil.Sub(e.Recv)}
		sessionEnded, ok := h.SessionLost[l.Session]
		switch killed, replaced := h.Replaced[GatewayLife{l.Gateway, l.Life}]; {
		case l.Life < 0 || replaced && !killed.After(e.Recv):
			c.excuse = excuseReplaced
		case l.Moved && e.Reason == "session_lost" && successorAnswered(h, e):
			c.excuse = excuseReplaced
		case e.Reason == "expired" && !l.Deadline.IsZero() && !e.Recv.Before(l.Deadline):
			c.excuse = excuseTTLRunOut
		case c.lead <= goneAllowance:
		case c.own && l.Session != 0 && ok && !sessionEnded.After(l.RecordUntil.Add(goneAllowance)):
			c.excuse = excuseSessionGone
		case outBetween(e.Recv, l.RecordUntil):
			c.excuse = excuseObserverOut
		}
		out = append(out, c)
	}
	return out
}

// successorAnswered says that e was answered by a process that replaced a
// killed one at its gateway's address, after the kill.
func successorAnswered(h *History, e LeaseEnd) bool {
	killed, ok := h.Replaced[GatewayLife{e.Gateway, e.Life - 1}]
	return ok && e.Life > 0 && !killed.After(e.Recv)
}

// String describes the answer and how long the record was seen after it.
func (c goneCheck) String() string {
	e := c.end
	by := fmt.Sprintf("gateway %d", e.Gateway)
	if c.own {
		by += " (the lease's own)"
	}
	if e.ServedBy != "" {
		by += ", served by " + e.ServedBy
	}
	return fmt.Sprintf("lease %s (made on gateway %d): a %s answered 410 %s by %s at %s, but its record was there until %s (%s later)",
		e.Lease, c.lease.Gateway, e.Kind, e.Reason, by, ts(e.Recv), ts(c.lease.RecordUntil), c.lead.Round(time.Millisecond))
}

// checkGone finds 410s about leases that were alive: received more than
// goneAllowance before the observer saw the lease's record deleted, with
// no excuse.
func checkGone(h *History, add func(kind, format string, args ...any)) {
	for _, c := range goneChecks(h) {
		if c.lead <= goneAllowance || c.excuse != "" {
			continue
		}
		add(VGoneWhileAlive, "%s", c)
	}
}

// Check reads a history and returns its violations, and how many of each
// kind there were (details are kept for the first few of each kind).
func Check(h *History) ([]Violation, map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Violation
	counts := map[string]int{}
	add := func(kind, format string, args ...any) {
		counts[kind]++
		if counts[kind] <= maxPerKind {
			out = append(out, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
		}
	}
	checkTokens(h, add)
	checkSessionLoss(h, add)
	checkEnds(h, add)
	checkGone(h, add)
	checkWallClock(h.WallHolds, add)
	for _, v := range h.Vanished {
		if v.Outcome == "left_waiting" {
			add(VWaiterLeft, "lock %s: lease %s still waiting long after its client hung up at %s", v.Lock, v.Lease, ts(v.HungUp))
		}
	}
	checkQueue(h, add)
	checkGroups(h, add)
	checkCounter(h, add)
	for _, u := range h.Unexpected {
		add(VUnexpected, "%s", u)
	}
	for _, d := range h.Deadlocks {
		add(VFalseDeadlock, "%s", d)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out, counts
}

// ts is a time as the violations show it.
func ts(t time.Time) string { return t.Format("15:04:05.000000") }

// checkTokens finds fencing tokens out of order per lock (a grant received
// no later than one asked after it, with a token no smaller), and answers
// that vouched for a lease after another received a larger token.
func checkTokens(h *History, add func(kind, format string, args ...any)) {
	// Grants per lock, by the time they were received.
	byLock := map[string][]Grant{}
	for _, g := range h.Grants {
		byLock[g.Lock] = append(byLock[g.Lock], g)
	}
	for _, gs := range byLock {
		sort.Slice(gs, func(i, j int) bool { return gs[i].Recv.Before(gs[j].Recv) })
	}
	// earlier returns the grants of lock received before t.
	earlier := func(lock string, t time.Time) []Grant {
		gs := byLock[lock]
		n := sort.Search(len(gs), func(i int) bool { return !gs[i].Recv.Before(t) })
		return gs[:n]
	}

	for lock, gs := range byLock {
		for _, b := range gs {
			for _, a := range earlier(lock, b.Sent) {
				if a.Token >= b.Token && !(a.Lease == b.Lease && a.Token == b.Token) {
					add(VTokenOrder, "lock %s: lease %s got token %d (asked %s) after lease %s had received token %d (%s)",
						lock, b.Lease, b.Token, ts(b.Sent), a.Lease, a.Token, ts(a.Recv))
					break
				}
			}
		}
	}

	for _, v := range h.Vouches {
		for _, g := range earlier(v.Lock, v.Sent) {
			if g.Token > v.Token && g.Lease != v.Lease {
				add(VDoubleGrant, "lock %s: a %s answered at %s vouched for lease %s (token %d), asked at %s, after lease %s had received token %d at %s",
					v.Lock, v.Kind, ts(v.Recv), v.Lease, v.Token, ts(v.Sent), g.Lease, g.Token, ts(g.Recv))
				break
			}
		}
	}
}

// checkSessionLoss finds grants and answers that a lease is alive asked
// after the lease's ZooKeeper session was lost.
func checkSessionLoss(h *History, add func(kind, format string, args ...any)) {
	lostAt := func(lease string) (time.Time, int64, bool) {
		l := h.Leases[lease]
		if l == nil || l.Session == 0 {
			return time.Time{}, 0, false
		}
		t, ok := h.SessionLost[l.Session]
		return t, l.Session, ok
	}
	for _, g := range h.Grants {
		if x, s, ok := lostAt(g.Lease); ok && (g.Sent.After(x) || g.AcquiredAt.After(x)) {
			add(VGrantAfterLoss, "lock %s: gateway %d granted token %d to lease %s (asked %s, granted %s, received %s); its session 0x%x was lost by %s",
				g.Lock, g.Gateway, g.Token, g.Lease, ts(g.Sent), ts(g.AcquiredAt), ts(g.Recv), uint64(s), ts(x))
		}
	}
	for _, a := range h.Alive {
		if x, s, ok := lostAt(a.Lease); ok && a.Sent.After(x) {
			add(VAliveAfterLoss, "a %s of lease %s asked at %s answered 200 at %s; its session 0x%x was lost by %s",
				a.Kind, a.Lease, ts(a.Sent), ts(a.Recv), uint64(s), ts(x))
		}
	}
}

// checkEnds finds leases answered expired before their TTL ran out, writes
// accepted after a lease's client was told it ended, and leases not kept
// alive that answered 200 after their TTL ran out.
func checkEnds(h *History, add func(kind, format string, args ...any)) {
	firstEnd := map[string]time.Time{}
	for _, e := range h.Ends {
		if t, ok := firstEnd[e.Lease]; !ok || e.Recv.Before(t) {
			firstEnd[e.Lease] = e.Recv
		}
		if l := h.Leases[e.Lease]; l != nil && e.Reason == "expired" && e.Recv.Before(l.Deadline) {
			add(VEndedEarly, "lease %s (ttl %s) answered expired to a %s at %s, before %s (TTL after the last extension sent)",
				e.Lease, l.TTL, e.Kind, ts(e.Recv), ts(l.Deadline))
		}
	}
	for _, w := range h.Writes {
		if t, ok := firstEnd[w.Lease]; ok && w.Accepted && w.At.After(t) {
			add(VWriteAfterEnd, "lock %s: write of lease %s (token %d) accepted at %s; its client was told the lease ended at %s",
				w.Lock, w.Lease, w.Token, ts(w.At), ts(t))
		}
	}
	for _, z := range h.Zombies {
		endsBy := z.EndsBy
		if l := h.Leases[z.Lease]; l != nil && l.Moved {
			// Handed over: the taker counts the TTL left from when it
			// received the handover, the time in transit later.
			endsBy = endsBy.Add(handoverTransit)
		}
		if z.Status == 200 && z.Sent.After(endsBy) {
			add(VOutlivedTTL, "lease %s, not kept alive, answered 200 (%d holds) to a read sent at %s, after its TTL had run out since its last extension (%s)",
				z.Lease, z.Holds, ts(z.Sent), ts(z.EndsBy))
		}
	}
}

// checkQueue: every confirmed item acked exactly once, nothing served
// after its ack, nothing served that nobody produced, and the queue empty
// after the drain.
func checkQueue(h *History, add func(kind, format string, args ...any)) {
	confirmedAcks := map[string][]Ack{}
	ambiguousAck := map[string]bool{}
	for _, a := range h.Acks {
		if a.Status == 204 {
			confirmedAcks[a.BodyID] = append(confirmedAcks[a.BodyID], a)
		} else if a.Ambiguous {
			ambiguousAck[a.BodyID] = true
		}
	}
	for body, acks := range confirmedAcks {
		if len(acks) > 1 {
			add(VDoubleAck, "item %s acked %d times: by lease %s at %s and lease %s at %s",
				body, len(acks), acks[0].Lease, ts(acks[0].Recv), acks[1].Lease, ts(acks[1].Recv))
		}
	}
	checkClaims(h, confirmedAcks, add)
	if !h.Drained {
		add(VNotDrained, "the queue still held items or claims at the end of the drain")
		return
	}
	for body, p := range h.Produced {
		if p.Confirmed && len(confirmedAcks[body]) == 0 && !ambiguousAck[body] {
			add(VLostItem, "item %s (%s), produced at %s, was never acked", p.ItemID, body, ts(p.Sent))
		}
	}
}

// checkClaims finds claimed items nobody produced, bodies served as two
// items, and items claimed after their ack (confirmedAcks, by body) was
// confirmed.
func checkClaims(h *History, confirmedAcks map[string][]Ack, add func(kind, format string, args ...any)) {
	itemOf := map[string]string{}
	for body, p := range h.Produced {
		if p.ItemID != "" {
			itemOf[body] = p.ItemID
		}
	}
	for _, c := range h.Claims {
		if _, ok := h.Produced[c.BodyID]; !ok {
			add(VPhantomItem, "lease %s claimed item %s with body %q that no producer sent", c.Lease, c.ItemID, c.BodyID)
			continue
		}
		if id, ok := itemOf[c.BodyID]; ok && id != c.ItemID {
			add(VPhantomItem, "body %q served as item %s and as item %s", c.BodyID, id, c.ItemID)
		} else {
			itemOf[c.BodyID] = c.ItemID
		}
		for _, a := range confirmedAcks[c.BodyID] {
			if c.Sent.After(a.Recv) {
				add(VServedAfterAck, "item %s (%s) claimed by lease %s (asked %s) after its ack by lease %s was confirmed at %s",
					c.ItemID, c.BodyID, c.Lease, ts(c.Sent), a.Lease, ts(a.Recv))
				break
			}
		}
	}
}
