//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// leaseClient is a client with one lease at a time, kept alive in the
// background. It acts under its lease only before the deadline its gateway
// last confirmed (see note), and not once told the lease ended.
type leaseClient struct {
	r    *runner
	name string
	rng  *rand.Rand

	mu      sync.Mutex
	id      string
	ttl     time.Duration
	gateway int // the gateway the lease was made through, where it lives
	// deadline is the expires_at of the latest-sent answer that carried
	// one, on the client's clock, and no later than capped, the earliest
	// X-Zkgate-Lease-Ends its gateway sent. confirmedRecv is when the
	// answer that set it came: the keepalives go a third of the way from
	// there to the deadline.
	deadline, confirmedSent, confirmedRecv, capped time.Time
	// extendedRecv is when the latest answer that extended the lease came
	// (create 201, keepalive 200): the gateway extended it before then.
	extendedRecv time.Time
	// draining says that the lease's gateway drains: the client takes a
	// new lease (through any gateway) once the work under way is done.
	draining bool
	ended    bool
	zombie   bool
	// unsure says that a keepalive went unanswered or answered 503 (which
	// extends a lease too): the gateway may have extended the lease later
	// than any answer the client received.
	unsure bool
	stopKA chan struct{}
	kaDone chan struct{}
}

func (r *runner) newLeaseClient(name string, stream uint64) *leaseClient {
	return &leaseClient{r: r, name: name, rng: newRand(uint64(r.cfg.Seed), stream)}
}

// leaseInfo is the part of a lease answer the clients read.
type leaseInfo struct {
	ID        string    `json:"id"`
	Gateway   string    `json:"gateway"` // the id of the gateway that keeps it
	ExpiresAt time.Time `json:"expires_at"`
	Holds     []struct {
		Kind  string `json:"kind"`
		Name  string `json:"name"`
		State string `json:"state"`
		Token int64  `json:"token"`
	} `json:"holds"`
}

// leases yields the client's lease (as lease returns it), one a round,
// until ctx ends; a round that finds none and cannot make one backs off.
func (c *leaseClient) leases(ctx context.Context) iter.Seq[string] {
	return func(yield func(string) bool) {
		for ctx.Err() == nil {
			id := c.lease(ctx)
			if id == "" {
				c.backoff(ctx)
				continue
			}
			if !yield(id) {
				return
			}
		}
	}
}

// lease returns the current lease id, making a lease if there is none (or
// the last one is over, or its gateway drains); "" when none could be made.
func (c *leaseClient) lease(ctx context.Context) string {
	c.mu.Lock()
	id, ok := c.id, c.validLocked() && !c.draining
	c.mu.Unlock()
	if id != "" && ok {
		return id
	}
	if id != "" {
		c.drop(ctx)
	}
	ttl := c.r.cfg.LeaseTTL
	a := c.r.send(ctx, c.rng, request{kind: "create_lease", method: "POST", path: "/v1/leases",
		body: map[string]any{"ttl": ttl.String(), "holder": c.name}, gateway: -1})
	switch a.Status {
	case http.StatusCreated:
	case 0, http.StatusServiceUnavailable:
		return ""
	default:
		c.r.unexpectedAnswer("create_lease", a)
		return ""
	}
	var info leaseInfo
	if err := json.Unmarshal(a.Body, &info); err != nil || info.ID == "" {
		c.r.unexpectedAnswer("create_lease", a)
		return ""
	}
	rec := &LeaseRecord{ID: info.ID, Client: c.name, TTL: ttl, Gateway: a.Gateway, Life: a.Life, Created: a.Sent,
		Deadline: a.Sent.Add(ttl), ExpiresAt: info.ExpiresAt}
	c.r.hist.record(func(h *History) { h.Leases[info.ID] = rec })
	c.r.obs.watchLease(info.ID, rec)
	c.mu.Lock()
	c.id, c.ttl, c.gateway = info.ID, ttl, a.Gateway
	c.deadline, c.confirmedSent, c.confirmedRecv, c.capped = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	c.extendedRecv, c.draining, c.ended, c.zombie, c.unsure = a.Recv, false, false, false, false
	c.stopKA, c.kaDone = make(chan struct{}), make(chan struct{})
	stop, done := c.stopKA, c.kaDone
	c.mu.Unlock()
	c.note(info.ID, "create_lease", a, info.ExpiresAt)
	go c.keepAlive(info.ID, stop, done)
	return info.ID
}

// note takes what an answer about lease id confirms: its expires_at (zero:
// none), and the X-Zkgate-Lease-Ends of its gateway, both converted to the
// client's clock. The expires_at of the latest-sent answer sets the
// deadline; a drain's end caps it for good. An X-Zkgate-Lease-Ends is the
// lease's only when the answer came from the lease's gateway (directly,
// or passed on to it: X-Zkgate-Served-By): another gateway's drain says
// nothing of it.
func (c *leaseClient) note(id, kind string, a answer, expiresAt time.Time) {
	if a.Status == 0 {
		return
	}
	var promised time.Time
	if !expiresAt.IsZero() {
		t, ok := a.onClientClock(expiresAt)
		if !ok {
			c.r.hist.unexpected(kind+" (expires_at without "+headerTime+")", a)
			return
		}
		promised = t
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.id != id {
		return
	}
	if !promised.IsZero() && a.Sent.After(c.confirmedSent) {
		c.deadline, c.confirmedSent, c.confirmedRecv = promised, a.Sent, a.Recv
	}
	if a.Header.Get(headerServedBy) != "" || a.Gateway == c.gateway {
		if ends, ok := a.leaseEnds(); ok {
			c.draining = true
			if c.capped.IsZero() || ends.Before(c.capped) {
				c.capped = ends
			}
		}
	}
	if !c.capped.IsZero() && c.capped.Before(c.deadline) {
		c.deadline = c.capped
	}
}

func (c *leaseClient) validLocked() bool {
	return c.id != "" && !c.ended && time.Now().Before(c.deadline)
}

// valid says whether the lease may still be acted under.
func (c *leaseClient) valid() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.validLocked()
}

// keepAlive extends the lease a third of the way to its deadline (and at
// least every tenth of its TTL while no answer comes) until stopped.
func (c *leaseClient) keepAlive(id string, stop, done chan struct{}) {
	defer close(done)
	for {
		c.mu.Lock()
		next := c.confirmedRecv.Add(c.deadline.Sub(c.confirmedRecv) / 3)
		c.mu.Unlock()
		select {
		case <-stop:
			return
		case <-time.After(max(time.Until(next), c.ttl/10)):
		}
		a := c.sendLease(context.Background(), id, request{kind: "keepalive", method: "POST",
			path: "/v1/leases/" + id + "/keepalive", gateway: -1, timeout: c.ttl / 3})
		switch {
		case a.Status == http.StatusOK:
			c.extended(id, a)
		case leaseOver(a):
			return
		case a.Status == 0 || a.Status == http.StatusServiceUnavailable:
			c.mu.Lock()
			if c.id == id {
				c.unsure = true
			}
			c.mu.Unlock()
		default:
			c.r.unexpectedAnswer("keepalive", a)
		}
	}
}

// extended records a keepalive's 200, which extended the lease id.
func (c *leaseClient) extended(id string, a answer) {
	var info leaseInfo
	_ = json.Unmarshal(a.Body, &info)
	c.mu.Lock()
	if c.id == id && a.Recv.After(c.extendedRecv) {
		c.extendedRecv = a.Recv
	}
	c.mu.Unlock()
	c.r.hist.record(func(h *History) {
		if l := h.Leases[id]; l != nil {
			if d := a.Sent.Add(l.TTL); d.After(l.Deadline) {
				l.Deadline = d
			}
			if info.ExpiresAt.After(l.ExpiresAt) {
				l.ExpiresAt = info.ExpiresAt
			}
		}
		h.Alive = append(h.Alive, LeaseAlive{Kind: "keepalive", Lease: id, Sent: a.Sent, Recv: a.Recv})
	})
}

// leaseOver says that an answer reports the lease ended: 410. A 404 for a
// lease that was made is a broken promise (every gateway answers 410 with
// the reason for a lease that ended, even one whose gateway died: the lease
// history); sendLease reports it, and the client moves on all the same.
func leaseOver(a answer) bool {
	return a.Status == http.StatusGone && a.Code == "lease_expired" ||
		a.Status == http.StatusNotFound && a.Code == "lease_not_found"
}

// sendLease sends a request made for lease id, takes what its answer
// confirms of the lease (note), and notes when the answer says the lease
// is over.
func (c *leaseClient) sendLease(ctx context.Context, id string, req request) answer {
	a := c.r.send(ctx, c.rng, req)
	var expiresAt time.Time
	if a.Status == http.StatusOK && (req.kind == "keepalive" || req.kind == "read_lease") {
		var info leaseInfo
		if json.Unmarshal(a.Body, &info) == nil {
			expiresAt = info.ExpiresAt
		}
	}
	c.note(id, req.kind, a, expiresAt)
	if leaseOver(a) {
		c.mu.Lock()
		now := time.Now() // under the lock: no write of this client can come between
		if c.id == id {
			c.ended = true
		}
		c.mu.Unlock()
		reason := a.Reason
		if a.Status == http.StatusNotFound {
			reason = "not_found"
			c.r.hist.unexpected(req.kind+" (404 for a lease that was made)", a)
		}
		c.r.hist.record(func(h *History) {
			h.Ends = append(h.Ends, LeaseEnd{Lease: id, Kind: req.kind, Status: a.Status, Reason: reason, Sent: a.Sent, Recv: now,
				Gateway: a.Gateway, Life: a.Life, ServedBy: a.Header.Get(headerServedBy)})
		})
	}
	return a
}

// stopKeepAlive stops the keepalives and waits until none is under way.
func (c *leaseClient) stopKeepAlive() {
	c.mu.Lock()
	stop, done := c.stopKA, c.kaDone
	c.stopKA = nil
	c.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// dropAtEnd is a worker's last step: its lease revoked within 10 s,
// whatever became of the worker's context.
func (c *leaseClient) dropAtEnd() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.drop(ctx)
}

// drop forgets the lease, revoking it first if it may still be alive.
func (c *leaseClient) drop(ctx context.Context) {
	c.stopKeepAlive()
	c.mu.Lock()
	id, ended := c.id, c.ended
	c.id = ""
	c.mu.Unlock()
	if id == "" || ended {
		return
	}
	a := c.sendLease(ctx, id, request{kind: "revoke_lease", method: "DELETE", path: "/v1/leases/" + id, gateway: -1})
	switch {
	case a.Status == http.StatusNoContent, leaseOver(a), a.Status == 0, a.Status == http.StatusServiceUnavailable:
	default:
		c.r.unexpectedAnswer("revoke_lease", a)
	}
}

// backoff waits a little after an unavailable answer.
func (c *leaseClient) backoff(ctx context.Context) {
	sleepCtx(ctx, between(c.rng, 20*time.Millisecond, 120*time.Millisecond))
}

// unexpectedAnswer records an answer the endpoint may not give.
func (r *runner) unexpectedAnswer(kind string, a answer) {
	switch {
	case a.Status == 0:
	case a.Status == http.StatusConflict && a.Code == "deadlock":
		r.hist.deadlock(kind, a)
	default:
		r.hist.unexpected(kind, a)
	}
}

type grantBody struct {
	Token      int64     `json:"token"`
	Node       string    `json:"node"`
	AcquiredAt time.Time `json:"acquired_at"`
}

// lockClient takes random locks, writes under them through the fenced
// register and releases them; now and then it stops its keepalives mid-hold
// and lets its lease expire.
func (r *runner) lockClient(ctx context.Context, i int) {
	c := r.newLeaseClient(fmt.Sprintf("locker-%d", i), uint64(i))
	defer c.dropAtEnd()
	for id := range c.leases(ctx) {
		lock := fmt.Sprintf("lock-%d", c.rng.IntN(r.cfg.Locks))
		wait := between(c.rng, 200*time.Millisecond, 1500*time.Millisecond)
		a := c.sendLease(ctx, id, request{kind: "acquire", method: "POST",
			path: "/v1/locks/" + lock + "/acquire?wait=" + wait.String(), body: map[string]any{"lease": id}, wait: wait, gateway: -1})
		switch {
		case a.Status == http.StatusOK:
			g, ok := r.grant(lock, id, a)
			if ok {
				c.hold(ctx, lock, id, g)
			}
		case a.Status == http.StatusConflict && a.Code == "timeout", leaseOver(a):
		case a.Status == 0 || a.Status == http.StatusServiceUnavailable:
			c.backoff(ctx)
		default:
			r.unexpectedAnswer("acquire", a)
			c.backoff(ctx)
		}
	}
}

// grant records a 200 answer to an acquire.
func (r *runner) grant(lock, lease string, a answer) (Grant, bool) {
	var b grantBody
	if err := json.Unmarshal(a.Body, &b); err != nil || b.Token == 0 {
		r.unexpectedAnswer("acquire", a)
		return Grant{}, false
	}
	g := Grant{Lock: lock, Lease: lease, Token: b.Token, Node: b.Node, AcquiredAt: b.AcquiredAt, Sent: a.Sent, Recv: a.Recv, Gateway: a.Gateway}
	r.hist.record(func(h *History) { h.Grants = append(h.Grants, g) })
	return g, true
}

// write writes to the register under the client's lock, if the lease is
// still valid; it reports whether the write was made and accepted.
func (c *leaseClient) write(lock, id string, token int64) (made, accepted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.id != id || !c.validLocked() {
		return false, false
	}
	return true, c.r.reg.Write(lock, id, token)
}

// hold is a client's time with a lock: a few writes, now and then a fence
// check, then the release. A zombie stops its keepalives first.
func (c *leaseClient) hold(ctx context.Context, lock, id string, g Grant) {
	zombie := c.rng.Float64() < c.r.cfg.ZombieChance
	if zombie {
		c.stopKeepAlive()
		c.mu.Lock()
		c.zombie = true
		c.mu.Unlock()
		c.r.fault(FLeaseMidHold)
		c.r.hist.record(func(h *History) {
			if l := h.Leases[id]; l != nil {
				l.Zombie = true
			}
		})
	}
	lost := false
	for k, n := 0, 1+c.rng.IntN(4); k < n || zombie; k++ {
		if k > 0 {
			time.Sleep(between(c.rng, 10*time.Millisecond, 60*time.Millisecond)) // the holder's work
		}
		made, accepted := c.write(lock, id, g.Token)
		if !made || !accepted {
			lost = true
			break
		}
	}
	if zombie {
		c.zombieCheck(id)
		return
	}
	if !lost && c.rng.IntN(5) == 0 {
		a := c.sendLease(ctx, id, request{kind: "fence", method: "GET",
			path: "/v1/locks/" + lock + "/fence?token=" + strconv.FormatInt(g.Token, 10), gateway: -1})
		switch {
		case a.Status == http.StatusOK:
			c.r.hist.record(func(h *History) {
				h.Vouches = append(h.Vouches, Vouch{Kind: "fence", Lock: lock, Lease: id, Token: g.Token, Sent: a.Sent, Recv: a.Recv})
			})
		case a.Status == http.StatusConflict && a.Code == "stale_token", a.Status == 0, a.Status == http.StatusServiceUnavailable:
		default:
			c.r.unexpectedAnswer("fence", a)
		}
	}
	c.release(lock, id, g)
}

// release releases lock, retrying while the lease is valid and the answer
// unsure.
func (c *leaseClient) release(lock, id string, g Grant) {
	for {
		a := c.sendLease(context.Background(), id, request{kind: "release", method: "POST",
			path: "/v1/locks/" + lock + "/release", body: map[string]any{"lease": id}, gateway: -1})
		switch {
		case a.Status == http.StatusNoContent && g.Token != 0:
			c.r.hist.record(func(h *History) {
				h.Vouches = append(h.Vouches, Vouch{Kind: "release", Lock: lock, Lease: id, Token: g.Token, Sent: a.Sent, Recv: a.Recv})
			})
			return
		case a.Status == http.StatusNoContent, leaseOver(a), a.Status == http.StatusConflict && a.Code == "not_held":
			return
		case a.Status == 0 || a.Status == http.StatusServiceUnavailable:
			if !c.valid() {
				return // the lease is over by now, and the lock with it
			}
			c.backoff(context.Background())
		default:
			c.r.unexpectedAnswer("release", a)
			return
		}
	}
}

// zombieCheck is a zombie's end: once its TTL has run out since the last
// answer that extended its lease, with no request of the lease under way,
// it reads its lease: a gateway must not answer 200 any more. (Its
// expires_at may have come well before: what the gateway promises is often
// shorter than the TTL, and a silent lease lives on to the TTL's end.) Then
// it forgets the lease.
func (c *leaseClient) zombieCheck(id string) {
	c.mu.Lock()
	endsBy, unsure := c.extendedRecv.Add(c.ttl), c.unsure
	c.id = ""
	c.mu.Unlock()
	if unsure {
		c.r.hist.record(func(h *History) {
			h.Zombies = append(h.Zombies, ZombieCheck{Lease: id, EndsBy: endsBy, Skipped: true})
		})
		return
	}
	if d := time.Until(endsBy); d > 0 {
		time.Sleep(d + time.Millisecond)
	}
	a := c.sendLease(context.Background(), id, request{kind: "read_lease", method: "GET", path: "/v1/leases/" + id, gateway: -1})
	z := ZombieCheck{Lease: id, EndsBy: endsBy, Sent: a.Sent, Status: a.Status}
	if a.Status == http.StatusOK {
		var info leaseInfo
		_ = json.Unmarshal(a.Body, &info)
		z.Holds = len(info.Holds)
	} else if a.Status != 0 && a.Status != http.StatusServiceUnavailable && !leaseOver(a) {
		c.r.unexpectedAnswer("read_lease", a)
	}
	c.r.hist.record(func(h *History) { h.Zombies = append(h.Zombies, z) })
}

// vanishWait is how long a vanished client's waiter may stay in line: it
// leaves at once, but the gateway may be slow, frozen or cut off meanwhile.
const vanishWait = 10 * time.Second

// vanishWatch bounds how long the lease of a client that hung up mid-wait
// is read until its waiter is gone.
type vanishWatch struct {
	deadline, latest time.Time
	keeper           string // the gateway that keeps the lease, last seen
}

func newVanishWatch(hungUp time.Time) *vanishWatch {
	return &vanishWatch{deadline: hungUp.Add(vanishWait), latest: hungUp.Add(vanishWait + recipes.HandoverGrace + vanishWait/2)}
}

// saw takes an answer about the lease at now. A 503 (the lease moving, or
// its gateway cut off) or another keeper means the waiter may have been
// handed over with the lease while its client hung up: the taker keeps it
// in line for recipes.HandoverGrace for a retry that never comes, and only
// then does it leave. The wait is then that grace from now, with a margin,
// and never past latest.
func (w *vanishWatch) saw(status int, keeper string, now time.Time) {
	moved := status == http.StatusServiceUnavailable || (keeper != "" && w.keeper != "" && keeper != w.keeper)
	if keeper != "" {
		w.keeper = keeper
	}
	if !moved {
		return
	}
	d := now.Add(recipes.HandoverGrace + vanishWait/2)
	if d.After(w.latest) {
		d = w.latest
	}
	if d.After(w.deadline) {
		w.deadline = d
	}
}

// vanisher asks for a lock with a long wait and hangs up part way, then
// reads its lease until the waiter is gone (or the lock was granted in the
// race, or the lease ended).
func (r *runner) vanisher(ctx context.Context, i int) {
	c := r.newLeaseClient(fmt.Sprintf("vanisher-%d", i), uint64(500+i))
	defer c.dropAtEnd()
	for id := range c.leases(ctx) {
		lock := fmt.Sprintf("lock-%d", c.rng.IntN(r.cfg.Locks))
		hangUp := between(c.rng, 50*time.Millisecond, 800*time.Millisecond)
		actx, cancel := context.WithTimeout(ctx, hangUp)
		a := c.sendLease(actx, id, request{kind: "acquire", method: "POST",
			path: "/v1/locks/" + lock + "/acquire?wait=10s", body: map[string]any{"lease": id}, wait: 10 * time.Second, gateway: -1})
		hungUp := actx.Err() != nil && a.Status == 0
		cancel()
		switch {
		case a.Status == http.StatusOK:
			if g, ok := r.grant(lock, id, a); ok {
				c.hold(ctx, lock, id, g)
			}
			continue
		case hungUp && ctx.Err() == nil:
		case a.Status == 0 || a.Status == http.StatusServiceUnavailable:
			c.backoff(ctx)
			continue
		case leaseOver(a), a.Status == http.StatusConflict && a.Code == "timeout":
			continue
		default:
			r.unexpectedAnswer("acquire", a)
			continue
		}
		r.fault(FClientVanished)
		v := VanishCheck{Lease: id, Lock: lock, HungUp: time.Now(), Outcome: "unknown"}
		w := newVanishWatch(v.HungUp)
		for time.Now().Before(w.deadline) {
			a := c.sendLease(context.Background(), id, request{kind: "read_lease", method: "GET", path: "/v1/leases/" + id, gateway: -1})
			if leaseOver(a) {
				v.Outcome = "lease_ended"
				break
			}
			var info leaseInfo
			if a.Status == http.StatusOK {
				_ = json.Unmarshal(a.Body, &info)
			}
			w.saw(a.Status, info.Gateway, time.Now())
			if a.Status == http.StatusOK {
				v.Outcome = "gone"
				for _, h := range info.Holds {
					if h.Kind == "lock" && h.Name == lock {
						v.Outcome = map[string]string{"held": "granted", "waiting": "left_waiting"}[h.State]
						v.Token = h.Token
					}
				}
				if v.Outcome != "left_waiting" {
					break
				}
			} else if a.Status != 0 && a.Status != http.StatusServiceUnavailable {
				r.unexpectedAnswer("read_lease", a)
			}
			time.Sleep(100 * time.Millisecond) // polling the lease, bounded by the deadline
		}
		r.hist.record(func(h *History) { h.Vanished = append(h.Vanished, v) })
		if v.Outcome == "granted" {
			// Granted as it hung up: the lease holds the lock; let it go.
			c.release(lock, id, Grant{Lock: lock, Lease: id, Token: v.Token})
		}
	}
}
