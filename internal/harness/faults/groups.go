//go:build linux

package faults

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// groupName is the one group the members join.
const groupName = "members"

// VMemberOutlivedLease: a group member's node was still there more than a
// session timeout (and the observer's delay) after its lease's record went:
// a member whose lease ended must leave within the session timeout.
const VMemberOutlivedLease = "member_outlived_lease"

// FMemberSilent is the fault of a member that stops its keepalives and
// leaves its lease (and membership) to end.
const FMemberSilent = "member_left_silent"

// GroupMember is one membership of the group as the client and the
// observer saw it.
type GroupMember struct {
	Lease  string
	Node   string    // its znode
	Joined time.Time // when the join's 200 came
	Silent bool      // its client stopped its keepalives: the lease ends by its TTL
	// EndsBy is, for a silent member, when its lease's TTL ran out since the
	// last answer that extended it; Unsure says that a keepalive went
	// unanswered (or answered 503) before, which may have extended it later.
	EndsBy time.Time
	Unsure bool
	// Seen says that the observer saw the node; Gone is when it saw it
	// deleted, or stopped watching with it still there.
	Seen bool
	Gone time.Time
}

// memberLag is how long after its lease's record went a member's node may
// still be seen: the session timeout (a gateway cut from ZooKeeper when the
// lease ended leaves the node to its session's expiry, which ZooKeeper
// makes on a tick), two ticks, and the observer's delay.
func memberLag(h *History) time.Duration {
	return h.SessionTimeout + 2*h.TickTime + goneAllowance
}

// groupMember joins the group under its lease (as the lease's id), stays a
// moment, then leaves or, now and then, goes silent: its keepalives stop
// and the lease ends by its TTL with the member in.
func (r *runner) groupMember(ctx context.Context, i int) {
	c := r.newLeaseClient(fmt.Sprintf("member-%d", i), uint64(5000+i))
	defer c.dropAtEnd()
	for id := range c.leases(ctx) {
		a := c.sendLease(ctx, id, request{kind: "join", method: "POST", path: "/v1/groups/" + groupName + "/join",
			body: map[string]any{"lease": id}, gateway: -1})
		switch {
		case a.Status == http.StatusOK:
			m := &GroupMember{Lease: id, Node: r.cfg.Root + "/groups/" + groupName + "/" + id + "__party__", Joined: a.Recv}
			r.hist.record(func(h *History) { h.Members = append(h.Members, m) })
			r.obs.watchMember(m)
			c.member(ctx, id, m)
		case leaseOver(a):
		case a.Status == 0 || a.Status == http.StatusServiceUnavailable:
			c.backoff(ctx)
		default:
			r.unexpectedAnswer("join", a)
			c.backoff(ctx)
		}
	}
}

// member is a client's time in the group: a while, then a leave, or
// silence (see groupMember).
func (c *leaseClient) member(ctx context.Context, id string, m *GroupMember) {
	sleepCtx(ctx, between(c.rng, 100*time.Millisecond, time.Second))
	if c.rng.Float64() < c.r.cfg.DeathChance {
		c.r.fault(FMemberSilent)
		c.forget()
		c.mu.Lock()
		endsBy, unsure := c.extendedRecv.Add(c.ttl), c.unsure
		c.mu.Unlock()
		c.r.hist.record(func(h *History) { m.Silent, m.EndsBy, m.Unsure = true, endsBy, unsure })
		return
	}
	for c.valid() {
		a := c.sendLease(context.Background(), id, request{kind: "leave", method: "POST", path: "/v1/groups/" + groupName + "/leave",
			body: map[string]any{"lease": id}, gateway: -1})
		switch {
		case a.Status == http.StatusNoContent, leaseOver(a), a.Status == http.StatusConflict && a.Code == "not_held":
			return
		case a.Status == 0 || a.Status == http.StatusServiceUnavailable:
			c.backoff(context.Background())
		default:
			c.r.unexpectedAnswer("leave", a)
			return
		}
	}
}

// watchMember follows the node of m until it goes (m.Gone), or the observer
// stops (m.Gone then, the node still there). A node not there at the first
// look went before the observer could see it: m.Seen stays false.
func (o *observer) watchMember(m *GroupMember) {
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		for {
			ok, _, ch, err := o.conn.ExistsW(m.Node)
			if err != nil {
				if !o.pause() {
					return
				}
				continue
			}
			if !ok {
				now := time.Now()
				o.hist.record(func(h *History) {
					if m.Seen {
						m.Gone = now
					}
				})
				return
			}
			o.hist.record(func(h *History) { m.Seen = true })
			select {
			case <-o.stop:
				now := time.Now()
				o.hist.record(func(h *History) { m.Gone = now })
				return
			case ev := <-ch:
				if ev.Type == zk.EventNodeDeleted {
					now := time.Now()
					o.hist.record(func(h *History) { m.Gone = now })
					return
				}
			}
		}
	}()
}

// checkGroups finds members whose node outlived their lease by more than
// memberLag: its record (when the observer saw both go, and was in session
// throughout), or, for a silent member, its TTL since the last answer that
// extended it.
func checkGroups(h *History, add func(kind, format string, args ...any)) {
	for _, m := range h.Members {
		ended, lag, ok := memberJudged(h, m)
		if ok && lag > memberLag(h) {
			add(VMemberOutlivedLease, "lease %s: its member %s was seen until %s, %s after its record went at %s (silent: %t)",
				m.Lease, m.Node, ts(m.Gone), lag.Round(time.Millisecond), ts(ended), m.Silent)
		}
		if m.Silent && !m.Unsure && !m.EndsBy.IsZero() && m.Seen && !m.Gone.IsZero() && !observerOut(h, m.EndsBy, m.Gone) {
			if lag := m.Gone.Sub(m.EndsBy); lag > memberLag(h) {
				add(VMemberOutlivedLease, "lease %s: its silent member %s was seen until %s, %s after the lease's TTL ran out at %s",
					m.Lease, m.Node, ts(m.Gone), lag.Round(time.Millisecond), ts(m.EndsBy))
			}
		}
	}
}

// observerOut says whether the observer was out of session at some time
// from from to to: its watch events of then may have come late. A span
// still open (To zero: the observer's own close at the end) lasts until the
// end.
func observerOut(h *History, from, to time.Time) bool {
	for _, s := range h.ObserverOut {
		if (s.To.IsZero() || s.To.After(from)) && s.From.Before(to) {
			return true
		}
	}
	return false
}

// memberJudged says when m's lease's record went and how much later its
// node did; ok is false when that cannot be told.
func memberJudged(h *History, m *GroupMember) (ended time.Time, lag time.Duration, ok bool) {
	l := h.Leases[m.Lease]
	if l == nil || !m.Seen || m.Gone.IsZero() || l.RecordUntil.IsZero() {
		return time.Time{}, 0, false
	}
	if observerOut(h, l.RecordUntil, m.Gone) {
		return time.Time{}, 0, false
	}
	return l.RecordUntil, m.Gone.Sub(l.RecordUntil), true
}

// countGroups counts the members, those that went silent, and the longest
// a node outlived its lease's record among those judged.
func (rep *Report) countGroups(h *History) {
	rep.Members = len(h.Members)
	for _, m := range h.Members {
		if m.Silent {
			rep.MembersSilent++
			if !m.Unsure && !m.EndsBy.IsZero() && m.Seen && !m.Gone.IsZero() && !observerOut(h, m.EndsBy, m.Gone) {
				rep.SilentJudged++
				rep.SilentLag = max(rep.SilentLag, m.Gone.Sub(m.EndsBy))
			}
		}
		if _, lag, ok := memberJudged(h, m); ok {
			rep.MembersJudged++
			rep.MemberLag = max(rep.MemberLag, lag)
		}
	}
}
