//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// contentionPhase is section 2: contenders on one lock.
var contentionPhase = phase{
	name: "contention",
	flags: func(fs *flag.FlagSet, c *config) {
		fs.IntVar(&c.contenders, "contenders", 32, "contenders on one lock")
		fs.DurationVar(&c.contentionDur, "contention-duration", 10*time.Second, "contended run time, each for the gateway and for the direct client (run as two halves, ABBA)")
		fs.DurationVar(&c.contentionWait, "contention-wait", 30*time.Second, "?wait= of each contended acquire")
	},
	quick: map[string]func(c *config){"contention-duration": func(c *config) { c.contentionDur = 2 * time.Second }},
	check: func(c *config) error {
		return firstError(positive(c.contenders), durations(c.contentionDur >= 100*time.Millisecond), waits(c.contentionWait))
	},
	announce: func(c config) string {
		return fmt.Sprintf("2. %d contenders, %s each for gateway and direct", c.contenders, c.contentionDur)
	},
	what: "contention",
	run:  storeIn(func(r *report) *contentionResult { return &r.contention }, contention),
}

// exclusion checks mutual exclusion from the clients' side: a counter of
// current holders that must never exceed 1, and fencing tokens that must
// grow with every grant.
type exclusion struct {
	holders         atomic.Int64
	maxHolders      atomic.Int64
	violations      atomic.Int64
	lastToken       atomic.Int64
	tokenViolations atomic.Int64
	entered         atomic.Int64
}

// enter is called as soon as a grant is received; token 0: none to check.
func (x *exclusion) enter(token int64) {
	n := x.holders.Add(1)
	x.entered.Add(1)
	for {
		m := x.maxHolders.Load()
		if n <= m || x.maxHolders.CompareAndSwap(m, n) {
			break
		}
	}
	if n > 1 {
		x.violations.Add(1)
	}
	if token > 0 {
		if prev := x.lastToken.Swap(token); token <= prev {
			x.tokenViolations.Add(1)
		}
	}
}

// leave is called just before the release is sent.
func (x *exclusion) leave() { x.holders.Add(-1) }

// side is one client's contended run.
type side struct {
	grants   int64         // grants received before the deadline
	total    int64         // all grants, the ones finishing after it too
	timeouts int64         // acquires answered 409 timeout
	elapsed  time.Duration // the measured windows
	segments int
	excl     *exclusion
}

func (s side) rate() float64 { return float64(s.grants) / s.elapsed.Seconds() }

type contentionResult struct {
	contenders int
	gw, direct side
}

func (r contentionResult) ratio() float64 { return r.gw.rate() / r.direct.rate() }

// contention runs cfg.contenders clients in a loop of acquire + release on
// one lock, through the gateway (each its own lease; acquire?wait=) and with
// zk.Lock (each its own connection), in ABBA halves.
func contention(ctx context.Context, e *env) (contentionResult, error) {
	n := e.cfg.contenders
	res := contentionResult{contenders: n,
		gw: side{excl: &exclusion{}}, direct: side{excl: &exclusion{}}}
	c := newClient(e.gw.url, 2*n, e.cfg.contentionWait+time.Minute)
	defer c.close()
	leases, err := c.createLeases(ctx, n, 8, 10*time.Minute, "bench-contender")
	defer func() { _ = c.revokeLeases(context.Background(), leases, 8) }()
	if err != nil {
		return res, err
	}
	locks := make([]*zk.Lock, n)
	for i := range locks {
		conn, err := dialZK(ctx, e.zkAddr)
		if err != nil {
			return res, err
		}
		defer conn.Close()
		locks[i] = zk.NewLock(conn, directRoot+"/bench-c", zk.WorldACL(zk.PermAll))
	}

	// Warm-up runs are checked for exclusion but not counted.
	sums := [2]*side{&res.gw, &res.direct}
	warm := [2]*side{{excl: res.gw.excl}, {excl: res.direct.excl}}
	err = ab[time.Duration]{sides: []string{"gateway", "direct"}, run: intoSides(sums, warm, func(s abRun[time.Duration], into *side) error {
		if s.gateway() {
			return gatewayContention(ctx, c, leases, e.cfg.contentionWait, s.n, into)
		}
		return directContention(ctx, locks, s.n, into)
	})}.warmHalves(warmUp(e.cfg.contentionDur), e.cfg.contentionDur)
	return res, err
}

// gatewayContention runs one window of d of the gateway's contenders, each
// acquire with ?wait=wait.
func gatewayContention(ctx context.Context, c *client, leases []string, wait, d time.Duration, s *side) error {
	acquire := fmt.Sprintf("/v1/locks/bench-c/acquire?wait=%s", wait)
	const release = "/v1/locks/bench-c/release"
	var timeouts atomic.Int64
	bodies := make([][]byte, len(leases))
	for i, id := range leases {
		bodies[i] = leaseBody(id)
	}
	win := newWindow(d, len(leases), false)
	err := loopUntil(ctx, len(leases), win.deadline, func(i int) error {
		body := bodies[i]
		st, b, err := c.do(ctx, http.MethodPost, acquire, body)
		if err == nil && st == http.StatusConflict {
			timeouts.Add(1)
			return nil
		}
		if err := expect("acquire", st, b, err, http.StatusOK); err != nil {
			return err
		}
		at := time.Now()
		g, err := parseGrant(b)
		if err != nil {
			return err
		}
		s.excl.enter(g.Token)
		s.excl.leave()
		st, b, err = c.do(ctx, http.MethodPost, release, body)
		if err := expect("release", st, b, err, http.StatusNoContent); err != nil {
			return err
		}
		win.done(i, at, at) // no times kept: t0 is not read
		return nil
	}).wait(ctx)
	s.add(win.in.Load(), win.total.Load(), timeouts.Load(), d)
	return err
}

// add adds one measured window's counts.
func (s *side) add(grants, total, timeouts int64, d time.Duration) {
	s.grants += grants
	s.total += total
	s.timeouts += timeouts
	s.elapsed += d
	s.segments++
}

// directContention runs one window of d of the zk.Lock contenders.
func directContention(ctx context.Context, locks []*zk.Lock, d time.Duration, s *side) error {
	win := newWindow(d, len(locks), false)
	err := loopUntil(ctx, len(locks), win.deadline, func(i int) error {
		if err := locks[i].Lock(); err != nil {
			return fmt.Errorf("zk.Lock: %w", err)
		}
		at := time.Now()
		s.excl.enter(0)
		s.excl.leave()
		if err := locks[i].Unlock(); err != nil {
			return fmt.Errorf("zk.Unlock: %w", err)
		}
		win.done(i, at, at) // no times kept: t0 is not read
		return nil
	}).waitOrCancel(ctx)
	if ctx.Err() != nil {
		return err
	}
	s.add(win.in.Load(), win.total.Load(), 0, d)
	return err
}
