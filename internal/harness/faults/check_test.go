//go:build linux

package faults

import (
	"slices"
	"testing"
	"time"
)

// The checker on made-up histories: a clean one passes, and each broken
// promise is reported under its kind.

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// cleanHistory: two leases take one lock in turn, write and release; one
// item is produced, claimed and acked; the queue drained.
func cleanHistory() *History {
	h := newHistory()
	h.SessionTimeout, h.TickTime = 2*time.Second, 100*time.Millisecond
	h.Leases["a"] = &LeaseRecord{ID: "a", TTL: 2 * time.Second, Gateway: 0, Life: 1, Session: 1, Deadline: at(2000), RecordUntil: at(3050)}
	h.Leases["b"] = &LeaseRecord{ID: "b", TTL: 2 * time.Second, Gateway: 1, Life: 1, Session: 2, Deadline: at(2000), RecordUntil: at(2100)}
	h.Grants = []Grant{
		{Lock: "L", Lease: "a", Token: 10, Sent: at(0), Recv: at(5), AcquiredAt: at(4)},
		{Lock: "L", Lease: "b", Token: 12, Sent: at(1), Recv: at(30), AcquiredAt: at(29)},
		{Lock: "L", Lease: "a", Token: 15, Sent: at(40), Recv: at(60), AcquiredAt: at(59)},
	}
	h.Writes = []Write{
		{Lock: "L", Lease: "a", Token: 10, At: at(6), Accepted: true},
		{Lock: "L", Lease: "b", Token: 12, At: at(31), Accepted: true},
		{Lock: "L", Lease: "a", Token: 15, At: at(61), Accepted: true},
	}
	h.Vouches = []Vouch{
		{Kind: "release", Lock: "L", Lease: "a", Token: 10, Sent: at(10), Recv: at(12)},
		{Kind: "fence", Lock: "L", Lease: "b", Token: 12, Sent: at(32), Recv: at(33)},
		{Kind: "release", Lock: "L", Lease: "b", Token: 12, Sent: at(35), Recv: at(38)},
	}
	h.Alive = []LeaseAlive{{Kind: "keepalive", Lease: "a", Sent: at(500), Recv: at(501)}}
	h.SessionLost[1] = at(3000)
	h.Ends = []LeaseEnd{
		{Lease: "a", Kind: "keepalive", Status: 410, Reason: "session_lost", Recv: at(3100), Gateway: 2, Life: 1},
		{Lease: "b", Kind: "acquire", Status: 410, Reason: "expired", Recv: at(2080), Gateway: 1, Life: 1},
	}
	h.Zombies = []ZombieCheck{{Lease: "b", EndsBy: at(2000), Sent: at(2001), Status: 410}}
	h.Vanished = []VanishCheck{{Lease: "b", Lock: "M", HungUp: at(100), Outcome: "gone"}}
	h.Produced["p0-0"] = &Produced{BodyID: "p0-0", ItemID: "entry-100-0000000000", Confirmed: true, Sent: at(0)}
	h.Produced["p0-1"] = &Produced{BodyID: "p0-1", Sent: at(1)} // answer lost, never stored
	h.Claims = []Claim{
		{BodyID: "p0-0", ItemID: "entry-100-0000000000", Lease: "a", Sent: at(10), Recv: at(11)},
		{BodyID: "p0-0", ItemID: "entry-100-0000000000", Lease: "b", Sent: at(20), Recv: at(21)}, // served again after a's lease died
	}
	h.Acks = []Ack{{BodyID: "p0-0", ItemID: "entry-100-0000000000", Lease: "b", Status: 204, Sent: at(25), Recv: at(26)}}
	h.Drained = true
	// Adds to the counter: two acknowledged, one unanswered that applied.
	h.Adds = []CounterAdd{
		{Delta: 2, Acked: true, Value: 2, Sent: at(0), Recv: at(3)},
		{Delta: 5, Sent: at(4), Recv: at(10)},
		{Delta: 1, Acked: true, Value: 8, Sent: at(11), Recv: at(12)},
	}
	h.CounterFinal, h.CounterRead = 8, true
	// Wall-clock holds: a lock handed on by a release and by a lost hold;
	// readers together, then a writer; two semaphore slots at once; two
	// leaders in turn.
	h.WallHolds = []WallHold{
		{Kind: WallLock, Name: "l", Limit: 1, Worker: "w1", Start: at(0), End: at(100), Deadline: at(1800), Units: 10, Stop: "done"},
		{Kind: WallLock, Name: "l", Limit: 1, Worker: "w2", Start: at(105), End: at(1790), Deadline: at(1800), Units: 90, Stop: "deadline"},
		{Kind: WallLock, Name: "l", Limit: 1, Worker: "w3", Start: at(2010), End: at(2100), Deadline: at(3800), Units: 9, Stop: "deadline", Drained: true},
		{Kind: WallLock, Name: "l", Limit: 1, Worker: "w4", Start: at(2150), End: at(2200), Deadline: at(3800), Units: 5, Stop: "done"},
		{Kind: WallRWLock, Name: "rw", Mode: "read", Limit: 1, Worker: "r1", Start: at(0), End: at(300), Units: 30, Stop: "done"},
		{Kind: WallRWLock, Name: "rw", Mode: "read", Limit: 1, Worker: "r2", Start: at(100), End: at(200), Units: 10, Stop: "done"},
		{Kind: WallRWLock, Name: "rw", Mode: "write", Limit: 1, Worker: "r3", Start: at(310), End: at(400), Units: 9, Stop: "done"},
		{Kind: WallSemaphore, Name: "s", Limit: 2, Worker: "s1", Start: at(0), End: at(300), Units: 30, Stop: "done"},
		{Kind: WallSemaphore, Name: "s", Limit: 2, Worker: "s2", Start: at(100), End: at(400), Units: 30, Stop: "done"},
		{Kind: WallSemaphore, Name: "s", Limit: 2, Worker: "s3", Start: at(305), End: at(790), Units: 50, Stop: "done"},
		{Kind: WallSemaphore, Name: "s", Limit: 2, Worker: "s4", Start: at(420), End: at(480), Deadline: at(490), Units: 6, Stop: "deadline"},
		{Kind: WallSemaphore, Name: "s", Limit: 2, Worker: "s5", Start: at(700), End: at(800), Units: 10, Stop: "done"},
		{Kind: WallElection, Name: "e", Limit: 1, Worker: "e1", Start: at(0), End: at(50), Units: 5, Stop: "done"},
		{Kind: WallElection, Name: "e", Limit: 1, Worker: "e2", Start: at(60), End: at(90), Units: 3, Stop: "done"},
	}
	return h
}

func TestCheckCleanHistory(t *testing.T) {
	if v, _ := Check(cleanHistory()); len(v) != 0 {
		t.Fatalf("a clean history has violations: %v", v)
	}
}

// spoiled is a change to cleanHistory that makes one violation of kind.
type spoiled struct {
	kind  string
	spoil func(h *History)
}

// tokenAndLeaseSpoils break the order of tokens, act after a session's
// loss or a lease's end, or end a lease early.
func tokenAndLeaseSpoils() []spoiled {
	return []spoiled{
		{VTokenOrder, func(h *History) {
			h.Grants = append(h.Grants, Grant{Lock: "L", Lease: "b", Token: 14, Sent: at(70), Recv: at(71)})
		}},
		{VTokenOrder, func(h *History) { // the same token to another lease
			h.Grants = append(h.Grants, Grant{Lock: "L", Lease: "b", Token: 15, Sent: at(70), Recv: at(71)})
		}},
		{VDoubleGrant, func(h *History) { // a's hold vouched for after b got a newer token
			h.Vouches = append(h.Vouches, Vouch{Kind: "release", Lock: "L", Lease: "a", Token: 10, Sent: at(31), Recv: at(32)})
		}},
		{VGrantAfterLoss, func(h *History) {
			h.Grants = append(h.Grants, Grant{Lock: "N", Lease: "a", Token: 99, Sent: at(3001), Recv: at(3002), AcquiredAt: at(2000)})
		}},
		{VGrantAfterLoss, func(h *History) { // asked before, but granted after the loss
			h.Grants = append(h.Grants, Grant{Lock: "N", Lease: "a", Token: 99, Sent: at(2900), Recv: at(3500), AcquiredAt: at(3400)})
		}},
		{VAliveAfterLoss, func(h *History) {
			h.Alive = append(h.Alive, LeaseAlive{Kind: "keepalive", Lease: "a", Sent: at(3001), Recv: at(3002)})
		}},
		{VWriteAfterEnd, func(h *History) {
			h.Writes = append(h.Writes, Write{Lock: "L", Lease: "a", Token: 15, At: at(3200), Accepted: true})
		}},
		{VEndedEarly, func(h *History) {
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "acquire", Status: 410, Reason: "expired", Recv: at(1900), Gateway: 1, Life: 1})
		}},
		{VOutlivedTTL, func(h *History) {
			h.Zombies = append(h.Zombies, ZombieCheck{Lease: "b", EndsBy: at(2000), Sent: at(2001), Status: 200})
		}},
	}
}

// goneSpoils answer that a lease is gone while its record stays, with no
// excuse.
func goneSpoils() []spoiled {
	return []spoiled{
		{VGoneWhileAlive, func(h *History) { // another gateway said b was gone a second before its record went
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "release", Status: 410, Reason: "session_lost", Recv: at(1100), Gateway: 2, Life: 1})
		}},
		{VGoneWhileAlive, func(h *History) { // b's own gateway, its session alive until the record went
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "keepalive", Status: 410, Reason: "session_lost", Recv: at(900), Gateway: 1, Life: 1})
		}},
		{VGoneWhileAlive, func(h *History) { // b's own gateway, its session seen ended only after the record went
			h.SessionLost[2] = at(2700)
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "keepalive", Status: 410, Reason: "revoked", Recv: at(900), Gateway: 1, Life: 1})
		}},
		{VGoneWhileAlive, func(h *History) { // after the TTL ran out, but session_lost, not expired: still judged
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "release", Status: 410, Reason: "session_lost", Recv: at(2050), Gateway: 2, Life: 1})
			h.Leases["b"].RecordUntil = at(2700)
		}},
		{VGoneWhileAlive, func(h *History) { // handed over, but answered by a process that replaced no killed one
			h.Leases["b"].Moved = true
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "acquire", Status: 410, Reason: "session_lost", Recv: at(600), Gateway: 0, Life: 2})
		}},
		{VGoneWhileAlive, func(h *History) { // a successor's answer about a lease never handed over
			h.Replaced[GatewayLife{0, 1}] = at(500)
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "acquire", Status: 410, Reason: "session_lost", Recv: at(600), Gateway: 0, Life: 2})
		}},
		{VGoneWhileAlive, func(h *History) { // passed on to b's gateway (served by it)
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "keepalive", Status: 410, Reason: "revoked", Recv: at(900), Gateway: 0, Life: 1, ServedBy: "127.0.0.1:1"})
		}},
	}
}

// wallClockSpoils overlap the wall-clock holds.
func wallClockSpoils() []spoiled {
	return []spoiled{
		{VWallClockOverlap, func(h *History) { // the next holder started before the lost one stopped
			h.WallHolds[2].Start = at(1780)
		}},
		{VWallClockOverlap, func(h *History) { // a writer among readers
			h.WallHolds[6].Start = at(290)
		}},
		{VWallClockOverlap, func(h *History) { // a reader while a writer works
			h.WallHolds = append(h.WallHolds, WallHold{Kind: WallRWLock, Name: "rw", Mode: "read", Limit: 1, Worker: "r4", Start: at(350), End: at(360), Units: 1, Stop: "done"})
		}},
		{VWallClockOverlap, func(h *History) { // a third semaphore holder
			h.WallHolds[9].Start = at(250)
		}},
		{VWallClockOverlap, func(h *History) { // two leaders
			h.WallHolds[13].Start = at(40)
		}},
	}
}

// queueSpoils leave a waiter, break the queue's items, or show an
// unexpected answer or deadlock.
func queueSpoils() []spoiled {
	return []spoiled{
		{VWaiterLeft, func(h *History) { h.Vanished[0].Outcome = "left_waiting" }},
		{VDoubleAck, func(h *History) {
			h.Acks = append(h.Acks, Ack{BodyID: "p0-0", ItemID: "entry-100-0000000000", Lease: "a", Status: 204, Sent: at(27), Recv: at(28)})
		}},
		{VServedAfterAck, func(h *History) {
			h.Claims = append(h.Claims, Claim{BodyID: "p0-0", ItemID: "entry-100-0000000000", Lease: "a", Sent: at(30), Recv: at(31)})
		}},
		{VLostItem, func(h *History) {
			h.Produced["p0-2"] = &Produced{BodyID: "p0-2", ItemID: "entry-100-0000000002", Confirmed: true, Sent: at(2)}
		}},
		{VPhantomItem, func(h *History) {
			h.Claims = append(h.Claims, Claim{BodyID: "nobody", ItemID: "entry-100-0000000009", Lease: "a", Sent: at(30), Recv: at(31)})
		}},
		{VPhantomItem, func(h *History) { // one body stored twice
			h.Claims = append(h.Claims, Claim{BodyID: "p0-1", ItemID: "entry-100-0000000001", Lease: "a", Sent: at(30), Recv: at(31)},
				Claim{BodyID: "p0-1", ItemID: "entry-100-0000000003", Lease: "b", Sent: at(40), Recv: at(41)})
		}},
		{VNotDrained, func(h *History) { h.Drained = false }},
		{VUnexpected, func(h *History) { h.Unexpected = append(h.Unexpected, "release on gateway 1: 500 internal") }},
		{VFalseDeadlock, func(h *History) { h.Deadlocks = append(h.Deadlocks, "acquire on gateway 0: 409 deadlock") }},
	}
}

func TestCheckFindsEachViolation(t *testing.T) {
	cases := slices.Concat(tokenAndLeaseSpoils(), goneSpoils(), wallClockSpoils(), queueSpoils(), counterSpoils())
	for _, c := range cases {
		h := cleanHistory()
		c.spoil(h)
		v, counts := Check(h)
		if counts[c.kind] == 0 {
			t.Errorf("%s not found; got %v", c.kind, v)
			continue
		}
		for k := range counts {
			if k != c.kind {
				t.Errorf("breaking %s also reported %s: %v", c.kind, k, v)
			}
		}
	}
}

// An ambiguous ack (no answer) accounts for an item the drain never saw;
// a write after the session was lost but before the client could know is
// the fencing window, not a violation.
func TestCheckTolerates(t *testing.T) {
	h := cleanHistory()
	h.Produced["p0-2"] = &Produced{BodyID: "p0-2", ItemID: "entry-100-0000000002", Confirmed: true}
	h.Acks = append(h.Acks, Ack{BodyID: "p0-2", Lease: "a", Status: 0, Ambiguous: true})
	h.Writes = append(h.Writes, Write{Lock: "L", Lease: "a", Token: 15, At: at(3050), Accepted: true})
	// The next holder started 10 ms before the lost one's recorded end,
	// whose last unit the harness woke from 15 ms late: it was planned to
	// end 5 ms before.
	h.WallHolds[1].Overshoot = 15 * time.Millisecond
	h.WallHolds[2].Start = at(1780)
	if v, _ := Check(h); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
}

// A silent lease lives to its TTL's end after its last extension, though
// its expires_at (what the gateway promised, bounded by its session) came
// before: a 200 in between is no violation.
func TestCheckZombieAliveUntilItsTTLEnds(t *testing.T) {
	h := cleanHistory()
	h.Zombies = append(h.Zombies, ZombieCheck{Lease: "b", EndsBy: at(2000), Sent: at(1801), Status: 200})
	if v, _ := Check(h); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
}

// A lease handed over to another gateway may end the handover's transit
// after its TTL (the taker counts it from when the handover came): a 200
// within handoverTransit of the TTL's end is no violation, one after it is.
func TestCheckZombieHandedOver(t *testing.T) {
	h := cleanHistory()
	h.Leases["b"].Moved = true
	h.Zombies = append(h.Zombies, ZombieCheck{Lease: "b", EndsBy: at(2000), Sent: at(2010), Status: 200})
	if v, _ := Check(h); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
	h.Zombies = append(h.Zombies, ZombieCheck{Lease: "b", EndsBy: at(2000), Sent: at(2100), Status: 200})
	if v, n := Check(h); n[VOutlivedTTL] != 1 {
		t.Fatalf("a handed-over lease alive 100ms past its TTL: %v", v)
	}
}

// The 410s that come before the record goes, legitimately.
func TestCheckGoneTolerates(t *testing.T) {
	cases := []struct {
		name  string
		spoil func(h *History)
	}{
		// ZooKeeper keeps a session given up as long as it likes: a
		// follower that rejoined and replayed its creation touched it (seed
		// 20261125, 90 s: records went 1.3 to 2 s after the answers).
		{"its own gateway gave its session up, which ZooKeeper expired 2 s later (the record and the registration went together)", func(h *History) {
			h.SessionLost[2] = at(2110)
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "keepalive", Status: 410, Reason: "session_lost", Recv: at(100), Gateway: 1, Life: 1})
		}},
		{"its own gateway gave its session up and registered with a new one, 2 s before ZooKeeper let the old one go", func(h *History) {
			h.SessionLost[2] = at(900)
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "keepalive", Status: 410, Reason: "session_lost", Recv: at(100), Gateway: 1, Life: 1})
		}},
		{"its gateway was killed: the successor at its address answers at once", func(h *History) {
			h.Replaced[GatewayLife{1, 1}] = at(500)
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "keepalive", Status: 410, Reason: "session_lost", Recv: at(600), Gateway: 0, Life: 1, ServedBy: "127.0.0.1:1"})
		}},
		// Seed 1234: leases handed over to gateway 0, which was then killed
		// and replaced at once; the successor answered session_lost, and
		// ZooKeeper deleted the records with the session 1.9 s later.
		{"a lease handed over to a gateway that was killed: the successor at its address answers at once", func(h *History) {
			h.Leases["b"].Moved = true
			h.Replaced[GatewayLife{0, 1}] = at(500)
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "acquire", Status: 410, Reason: "session_lost", Recv: at(600), Gateway: 0, Life: 2})
		}},
		// Seed 777: a gateway paused past the lease's TTL answered expired
		// as it resumed, and its record went 632 ms later, as the gateway
		// ended the lease on a ZooKeeper that had just lost a member.
		{"expired after the TTL ran out since the last extension sent, the record going later", func(h *History) {
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "release", Status: 410, Reason: "expired", Recv: at(2050), Gateway: 2, Life: 1})
			h.Leases["b"].RecordUntil = at(2700)
		}},
		{"the observer was out of session meanwhile", func(h *History) {
			h.ObserverOut = append(h.ObserverOut, Span{From: at(1200), To: at(2050)})
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "release", Status: 410, Reason: "session_lost", Recv: at(1100), Gateway: 2, Life: 1})
		}},
		{"the observer is still out of session", func(h *History) {
			h.ObserverOut = append(h.ObserverOut, Span{From: at(2000)})
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "release", Status: 410, Reason: "session_lost", Recv: at(1100), Gateway: 2, Life: 1})
		}},
		{"the record was never seen", func(h *History) {
			h.Leases["b"].RecordUntil = time.Time{}
			h.Ends = append(h.Ends, LeaseEnd{Lease: "b", Kind: "release", Status: 410, Reason: "session_lost", Recv: at(100), Gateway: 2, Life: 1})
		}},
	}
	for _, c := range cases {
		h := cleanHistory()
		c.spoil(h)
		if v, _ := Check(h); len(v) != 0 {
			t.Errorf("%s: violations: %v", c.name, v)
		}
	}
}

// The gaps the report gives: the smallest from a hold's end to the start
// of a conflicting one, apart after a release and after a lost hold.
func TestWallStats(t *testing.T) {
	counts, gaps, overrun := wallStats(cleanHistory().WallHolds)
	if counts[WallLock] != 4 || counts[WallRWLock] != 3 || counts[WallRWLock+"_read"] != 2 || counts[WallSemaphore] != 5 || counts[WallElection] != 2 {
		t.Errorf("counts %v", counts)
	}
	ms := func(d *time.Duration) any {
		if d == nil {
			return nil
		}
		return d.Milliseconds()
	}
	for kind, want := range map[string][4]any{
		WallLock:      {3, int64(5), int64(220), int64(50)}, // w2 5 ms after w1's release; w3 220 ms after w2 lost its hold; w4 50 ms after w3's drain
		WallRWLock:    {1, int64(10), nil, nil},             // the writer 10 ms after the last reader; readers do not conflict
		WallSemaphore: {3, int64(5), int64(220), nil},       // s3 5 ms after s1, the first of the two before it to end; s4 20 ms after s2 (s3 still working); s5 220 ms after s4 was lost (s3 still working)
		WallElection:  {1, int64(10), nil, nil},
	} {
		g := gaps[kind]
		if g == nil || g.Measured != want[0] || ms(g.AfterRelease) != want[1] || ms(g.AfterLoss) != want[2] || ms(g.AfterDrain) != want[3] {
			t.Errorf("%s: gaps %+v, want %v", kind, g, want)
		}
	}
	if overrun != -10*time.Millisecond {
		t.Errorf("latest end past a deadline %s, want -10ms (w2)", overrun)
	}
}

// A semaphore's slot may have come from a release though the hold whose
// end the gap is counted from was lost: the gap is then after a release.
func TestWallStatsSemaphoreRoomFromARelease(t *testing.T) {
	_, gaps, _ := wallStats([]WallHold{
		{Kind: WallSemaphore, Name: "s", Limit: 2, Worker: "x1", Start: at(0), End: at(100), Deadline: at(105), Units: 10, Stop: "deadline"},
		{Kind: WallSemaphore, Name: "s", Limit: 2, Worker: "x2", Start: at(10), End: at(120), Units: 11, Stop: "done"},
		{Kind: WallSemaphore, Name: "s", Limit: 2, Worker: "x3", Start: at(130), End: at(140), Units: 1, Stop: "done"},
	})
	g := gaps[WallSemaphore]
	if g == nil || g.Measured != 1 || g.AfterLoss != nil || g.AfterRelease == nil || *g.AfterRelease != 30*time.Millisecond {
		t.Fatalf("gaps %+v, want 30ms after a release (x2's) and none after a loss", g)
	}
}

// A wait the gateway ended with 409 deadlock is a violation of its own,
// told apart from the other answers no endpoint may give: no client of the
// suite waits while it holds, so none is ever in a cycle.
func TestCheckReportsADeadlockAnswer(t *testing.T) {
	r := &runner{hist: cleanHistory()}
	r.unexpectedAnswer("acquire", answer{Status: 409, Code: "deadlock", Gateway: 1, Body: []byte(`{"code":"deadlock","cycle":[]}`)})
	_, counts := Check(r.hist)
	if counts[VFalseDeadlock] != 1 || counts[VUnexpected] != 0 {
		t.Fatalf("a 409 deadlock counted as %v, want one %s", counts, VFalseDeadlock)
	}
}

// counterSpoils break the counter of cleanHistory: an acknowledged add
// lost, one applied twice, two answering one value, and no final read.
func counterSpoils() []spoiled {
	return []spoiled{
		{VCounterLostAdd, func(h *History) { h.CounterFinal = 2 }},
		{VCounterDoubleAdd, func(h *History) { h.CounterFinal = 9 }},
		{VCounterSameValue, func(h *History) { h.Adds[2].Value = 2 }},
		{VCounterUnread, func(h *History) { h.CounterRead = false }},
	}
}

// Only the acknowledged adds must be in the counter: one unanswered that
// did not apply is no violation either.
func TestCheckCounterTolerates(t *testing.T) {
	h := cleanHistory()
	h.CounterFinal = 3
	if v, _ := Check(h); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
}
