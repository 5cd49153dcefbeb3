//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"
)

// Wall-clock holders have no fencing token to hide behind: what keeps them
// apart is the lease's deadline alone. Each works in small units while it
// holds, and before each unit checks that the unit ends before the
// deadline its gateway last confirmed (leaseClient.note); when it would
// not, it stops at once and takes the hold as lost (no release: a holder
// that lost its lease cannot tell what it still holds). The checker then
// measures, per name, whether two holds the primitive forbids together
// overlapped in time, on the harness's one clock.

// The primitives the wall-clock holders take, one name each.
const (
	WallLock      = "lock"      // an exclusive lock: one holder at a time
	WallRWLock    = "rwlock"    // a read/write lock: readers together, a writer alone
	WallSemaphore = "semaphore" // at most wallSemLimit holders at a time
	WallElection  = "election"  // one leader at a time
)

var wallKinds = []string{WallLock, WallRWLock, WallSemaphore, WallElection}

const wallSemLimit = 2

// wallClockAllowance is how far a hold may run into a conflicting one
// beyond the harness's own delay in waking from its last unit (its
// Overshoot, measured) before the checker calls it an overlap: none. A
// holder begins a unit only if it is planned to end before its deadline,
// and its deadline is at least the promise margin (200 ms here) before
// ZooKeeper can expire the session that holds its grant, and no later than
// the end of its gateway's drain, after which the gateway still ends its
// leases and closes its session before anyone else can be granted. So the
// planned end of its last unit comes before any conflicting grant; when
// the harness, on a loaded machine, wakes from that unit late, the end it
// records is honestly late, by the measured overshoot, which is no fault
// of the gateway.
const wallClockAllowance = 0

// WallHold is a span of work a holder without fencing did under a grant:
// from the receipt of the grant to the end of its last unit of work.
type WallHold struct {
	Kind, Name string
	Mode       string // exclusive, read, write, slot, leader
	Limit      int    // how many may hold at once
	Worker     string
	Lease      string
	Start, End time.Time
	// Deadline is the lease's confirmed deadline that the last unit was
	// begun under (when no unit was, the one that stopped the work).
	Deadline time.Time
	Units    int
	// Stop is how the work ended: done (then released), deadline (the
	// next unit would not have ended before it), or lease_ended (an
	// answer said so).
	Stop   string
	Silent bool // its keepalives were stopped at the grant, on purpose
	// Drained says that Deadline was the end of its gateway's drain.
	Drained bool
	// Overshoot is how much longer than planned the last unit took: the
	// harness's own scheduling delay.
	Overshoot time.Duration
}

// wallName is the one name each kind is taken under.
func wallName(kind string) string { return "wall-" + kind }

// wallWorker takes the primitive of kind again and again, works under each
// grant by its deadline, and lets go.
func (r *runner) wallWorker(ctx context.Context, kind string, k, i int) {
	c := r.newLeaseClient(fmt.Sprintf("wall-%s-%d", kind, i), uint64(1100+100*k+i))
	defer c.dropAtEnd()
	for id := range c.leases(ctx) {
		mode := map[string]string{WallLock: "exclusive", WallSemaphore: "slot", WallElection: "leader"}[kind]
		if kind == WallRWLock {
			mode = "read"
			if c.rng.IntN(3) == 0 {
				mode = "write"
			}
		}
		wait := between(c.rng, 200*time.Millisecond, 2*time.Second)
		a := c.sendLease(ctx, id, wallTake(kind, mode, id, c.name, wait))
		switch {
		case a.Status == http.StatusOK:
			if !wallGranted(kind, a) {
				r.unexpectedAnswer(wallTakeKind(kind), a)
				c.wallLetGo(ctx, kind, id)
				continue
			}
			r.wallHold(c, kind, mode, id, a)
		case a.Status == http.StatusAccepted && kind == WallElection:
			c.wallLetGo(ctx, kind, id) // in line, not elected: withdraw
		case a.Status == http.StatusConflict && a.Code == "timeout", leaseOver(a):
		case a.Status == 0 || a.Status == http.StatusServiceUnavailable:
			c.wallLetGo(ctx, kind, id) // it may have been granted unseen
			c.backoff(ctx)
		default:
			r.unexpectedAnswer(wallTakeKind(kind), a)
			c.wallLetGo(ctx, kind, id)
			c.backoff(ctx)
		}
	}
}

func wallTakeKind(kind string) string {
	if kind == WallElection {
		return "campaign"
	}
	return "acquire_" + kind
}

// wallTake is the request that asks for kind in mode.
func wallTake(kind, mode, lease, worker string, wait time.Duration) request {
	body := map[string]any{"lease": lease}
	path := "/v1/locks/" + wallName(kind) + "/acquire"
	switch kind {
	case WallRWLock:
		body["mode"] = mode
	case WallSemaphore:
		path = "/v1/semaphores/" + wallName(kind) + "/acquire"
		body["limit"] = wallSemLimit
	case WallElection:
		path = "/v1/elections/" + wallName(kind) + "/campaign"
		body["value"] = worker
	}
	return request{kind: wallTakeKind(kind), method: "POST", path: path + "?wait=" + wait.String(), body: body, wait: wait, gateway: -1}
}

// wallGranted says whether a 200 is the grant it must be.
func wallGranted(kind string, a answer) bool {
	var g struct {
		Token   int64 `json:"token"`
		Elected *bool `json:"elected"`
	}
	if json.Unmarshal(a.Body, &g) != nil || g.Token == 0 {
		return false
	}
	return kind != WallElection || g.Elected != nil && *g.Elected
}

// wallHold works under a grant received with a: units of 5 to 20 ms, each
// begun only if it ends before the lease's deadline. A silent holder stops
// its keepalives first and works until its deadline stops it.
func (r *runner) wallHold(c *leaseClient, kind, mode, id string, a answer) {
	silent := c.rng.Float64() < r.cfg.ZombieChance
	length := between(c.rng, 20*time.Millisecond, 300*time.Millisecond)
	if c.rng.IntN(10) < 3 {
		length = between(c.rng, 300*time.Millisecond, 2*r.cfg.LeaseTTL)
	}
	if silent {
		c.stopKeepAlive()
		r.fault(FLeaseMidHold)
	}
	h := WallHold{Kind: kind, Name: wallName(kind), Mode: mode, Limit: 1, Worker: c.name, Lease: id, Start: a.Recv, End: a.Recv, Silent: silent}
	if kind == WallSemaphore {
		h.Limit = wallSemLimit
	}
	for {
		unit := between(c.rng, 5*time.Millisecond, 20*time.Millisecond)
		c.mu.Lock()
		deadline, over := c.deadline, c.ended || c.id != id
		drained := !c.capped.IsZero() && !c.capped.After(deadline)
		c.mu.Unlock()
		now := time.Now()
		switch {
		case over:
			h.Stop = "lease_ended"
		case !now.Add(unit).Before(deadline):
			h.Stop = "deadline"
		case !silent && now.Sub(h.Start) >= length:
			h.Stop = "done"
		}
		if h.Stop != "" {
			if h.Units == 0 {
				h.Deadline, h.Drained = deadline, drained
			}
			break
		}
		h.Deadline, h.Drained = deadline, drained
		time.Sleep(unit) // the holder's work
		h.End = time.Now()
		h.Overshoot = h.End.Sub(now) - unit
		h.Units++
	}
	r.hist.record(func(hist *History) {
		if h.Units == 0 {
			hist.WallLate++
			return
		}
		hist.WallHolds = append(hist.WallHolds, h)
	})
	if h.Units > 0 {
		r.wallHeld(kind)
	}
	if h.Stop == "done" {
		c.wallLetGo(context.Background(), kind, id)
		return
	}
	c.forget() // lost: no release, and the lease is left to end
}

// wallLetGo releases (resigns) what lease id holds of kind, retrying while
// the answer is unsure and the lease valid; a lease that is no longer
// valid is dropped instead.
func (c *leaseClient) wallLetGo(ctx context.Context, kind, id string) {
	path := "/v1/locks/" + wallName(kind) + "/release"
	switch kind {
	case WallSemaphore:
		path = "/v1/semaphores/" + wallName(kind) + "/release"
	case WallElection:
		path = "/v1/elections/" + wallName(kind) + "/resign"
	}
	for {
		a := c.sendLease(ctx, id, request{kind: "release_" + kind, method: "POST", path: path,
			body: map[string]any{"lease": id}, gateway: -1})
		switch {
		case a.Status == http.StatusNoContent, leaseOver(a), a.Status == http.StatusConflict && a.Code == "not_held":
			return
		case a.Status == 0 || a.Status == http.StatusServiceUnavailable:
			if !c.valid() || ctx.Err() != nil {
				c.drop(ctx)
				return
			}
			c.backoff(ctx)
		default:
			c.r.unexpectedAnswer("release_"+kind, a)
			c.drop(ctx)
			return
		}
	}
}

// forget stops the keepalives and forgets the lease without a word to the
// gateway: it ends by its TTL.
func (c *leaseClient) forget() {
	c.stopKeepAlive()
	c.mu.Lock()
	c.id = ""
	c.mu.Unlock()
}

// wallConflict says whether holds a and b of one name may not overlap.
func wallConflict(a, b WallHold) bool {
	return a.Kind != WallRWLock || a.Mode == "write" || b.Mode == "write"
}

// wallGaps calls fn for every hold b that started with at least b.Limit
// conflicting holds started before it: gap is from the end of the one of
// them that ended latest but b.Limit-1 (p) to b's start. A negative gap is
// an overlap that the primitive forbids: b.Limit+1 holders at once. freed
// are those of them that may have made room for b: p and the later-ending
// ones that ended before b started (one, p, with a limit of 1).
func wallGaps(holds []WallHold, fn func(b, p WallHold, gap time.Duration, freed []WallHold)) {
	byName := map[string][]WallHold{}
	for _, h := range holds {
		byName[h.Kind+"/"+h.Name] = append(byName[h.Kind+"/"+h.Name], h)
	}
	for _, hs := range byName {
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].Start.Before(hs[j].Start) })
		for i, b := range hs {
			var before []WallHold
			for _, a := range hs[:i] {
				if wallConflict(a, b) {
					before = append(before, a)
				}
			}
			if len(before) < b.Limit {
				continue
			}
			sort.Slice(before, func(x, y int) bool { return before[x].End.After(before[y].End) })
			p := before[b.Limit-1]
			freed := []WallHold{p}
			for _, q := range before[:b.Limit-1] {
				if !q.End.After(b.Start) {
					freed = append(freed, q)
				}
			}
			fn(b, p, b.Start.Sub(p.End), freed)
		}
	}
}

// WallGaps are the smallest gaps seen between a hold's end and the start of
// a conflicting one, by how the earlier hold ended.
type WallGaps struct {
	Measured int `json:"measured"`
	// Excused counts the overlaps no longer than the harness's overshoot
	// of the earlier hold's last unit (see wallClockAllowance).
	Excused int `json:"overlaps_within_overshoot"`
	// AfterRelease is after a hold that was released; AfterLoss after one
	// that stopped at its deadline or when told its lease ended, whose
	// grant went only when the lease or its session ended: the margin the
	// deadline kept; AfterDrain after one whose deadline was its gateway's
	// drain end. A semaphore's gap counts after a loss only when none of
	// the holds that may have made room for the next one was released. Nil
	// when none was measured.
	AfterRelease *time.Duration `json:"after_release,omitempty"`
	AfterLoss    *time.Duration `json:"after_loss,omitempty"`
	AfterDrain   *time.Duration `json:"after_drain,omitempty"`
	// Tightest and TightestDrain are the pairs of holds of AfterLoss and
	// AfterDrain: the lost one, then the conflicting one.
	Tightest      []WallHold `json:"tightest_after_loss,omitempty"`
	TightestDrain []WallHold `json:"tightest_after_drain,omitempty"`
}

// wallStats sums up the wall-clock holds: how many of each kind, the
// smallest gaps, and the latest end past a deadline.
func wallStats(holds []WallHold) (counts map[string]int, gaps map[string]*WallGaps, overrun time.Duration) {
	counts, gaps = map[string]int{}, map[string]*WallGaps{}
	overrun = time.Duration(-1 << 63)
	for _, h := range holds {
		counts[h.Kind]++
		if h.Kind == WallRWLock {
			counts[WallRWLock+"_"+h.Mode]++
		}
		if !h.Deadline.IsZero() && h.End.Sub(h.Deadline) > overrun {
			overrun = h.End.Sub(h.Deadline)
		}
	}
	lower := func(p **time.Duration, d time.Duration) {
		if *p == nil || d < **p {
			*p = &d
		}
	}
	wallGaps(holds, func(b, p WallHold, gap time.Duration, freed []WallHold) {
		g := gaps[b.Kind]
		if g == nil {
			g = &WallGaps{}
			gaps[b.Kind] = g
		}
		g.Measured++
		if gap < 0 && !wallOverlap(p, gap) {
			g.Excused++
		}
		released, drained := false, false
		for _, q := range freed {
			released = released || q.Stop == "done"
			drained = drained || q.Drained
		}
		switch {
		case released:
			lower(&g.AfterRelease, gap)
		case drained:
			if g.AfterDrain == nil || gap < *g.AfterDrain {
				lower(&g.AfterDrain, gap)
				g.TightestDrain = []WallHold{p, b}
			}
		case g.AfterLoss == nil || gap < *g.AfterLoss:
			lower(&g.AfterLoss, gap)
			g.Tightest = []WallHold{p, b}
		}
	})
	return counts, gaps, overrun
}

// wallOverlap says whether a gap from p's end is an overlap beyond the
// allowance and p's own overshoot.
func wallOverlap(p WallHold, gap time.Duration) bool {
	return -gap > wallClockAllowance+max(p.Overshoot, 0)
}

// checkWallClock reports every overlap that a primitive forbids.
func checkWallClock(holds []WallHold, add func(kind, format string, args ...any)) {
	wallGaps(holds, func(b, p WallHold, gap time.Duration, _ []WallHold) {
		if wallOverlap(p, gap) {
			add(VWallClockOverlap, "%s %s: %s (lease %s, %s) worked from %s, while %d other holder(s) still worked, the last of them %s (lease %s, %s, %d units, stopped: %s) until %s, %s after (its deadline %s, its last unit %s late)",
				b.Kind, b.Name, b.Worker, b.Lease, b.Mode, ts(b.Start), b.Limit, p.Worker, p.Lease, p.Mode, p.Units, p.Stop, ts(p.End), -gap, ts(p.Deadline), p.Overshoot)
		}
	})
}
