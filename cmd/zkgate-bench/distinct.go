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

// distinctPhase is section 2b: workers each on a lock of its own.
var distinctPhase = phase{
	name: "distinct",
	flags: func(fs *flag.FlagSet, c *config) {
		fs.IntVar(&c.distinctWorkers, "distinct-workers", 32, "distinct-locks test: workers, each on its own lock")
		fs.DurationVar(&c.distinctDur, "distinct-duration", 10*time.Second, "distinct-locks run time, each for the gateway and for the direct client (run as two halves, ABBA)")
	},
	quick: map[string]func(c *config){"distinct-duration": func(c *config) { c.distinctDur = 2 * time.Second }},
	check: func(c *config) error {
		return firstError(positive(c.distinctWorkers), durations(c.distinctDur >= 100*time.Millisecond))
	},
	announce: func(c config) string {
		return fmt.Sprintf("2b. %d workers on distinct locks, %s each for gateway and direct", c.distinctWorkers, c.distinctDur)
	},
	what: "distinct locks",
	run:  storeIn(func(r *report) *distinctResult { return &r.distinct }, distinct),
}

// distinctSide is one client's run on distinct locks.
type distinctSide struct {
	cycles   int64         // acquire+release cycles whose grant came inside the windows
	total    int64         // all cycles, warm-ups excluded
	elapsed  time.Duration // the measured windows
	segments int
	bad      int64 // gateway: acquires not answered 200 with a token, tokens not growing per lock
	lat      dist  // one cycle, acquire sent .. release answered
}

func (s distinctSide) rate() float64 { return rate(s.cycles, s.elapsed) }

type distinctResult struct {
	workers    int
	gw, direct distinctSide
}

func (r distinctResult) ratio() float64 { return r.gw.rate() / r.direct.rate() }

// distinct runs cfg.distinctWorkers workers, each acquiring and releasing
// its own lock in a loop: through the gateway, each its own lease and lock
// name on keep-alive connections; directly, each its own zk.NewLock on its
// own path, all sharing ONE zk.Conn (what one process would do). ABBA
// halves after a warm-up each.
func distinct(ctx context.Context, e *env) (distinctResult, error) {
	n := e.cfg.distinctWorkers
	res := distinctResult{workers: n}
	c := newClient(e.gw.url, 2*n, time.Minute)
	defer c.close()
	leases, err := c.createLeases(ctx, n, 8, 10*time.Minute, "bench-distinct")
	defer func() { _ = c.revokeLeases(context.Background(), leases, 8) }()
	if err != nil {
		return res, err
	}
	conn, err := dialZK(ctx, e.zkAddr)
	if err != nil {
		return res, err
	}
	defer conn.Close()
	locks := make([]*zk.Lock, n)
	for i := range locks {
		locks[i] = zk.NewLock(conn, fmt.Sprintf("%s/bench-d-%d", directRoot, i), zk.WorldACL(zk.PermAll))
	}
	lastTok := make([]int64, n) // per worker (per lock): tokens must grow

	sums, warm := [2]*distinctSide{&res.gw, &res.direct}, [2]*distinctSide{{}, {}}
	err = ab[time.Duration]{sides: []string{"gateway", "direct"}, run: intoSides(sums, warm, func(s abRun[time.Duration], into *distinctSide) error {
		if s.gateway() {
			return gatewayDistinct(ctx, c, leases, lastTok, s.n, into)
		}
		return directDistinct(ctx, locks, s.n, into)
	})}.warmHalves(warmUp(e.cfg.distinctDur), e.cfg.distinctDur)
	return res, err
}

// gatewayDistinct runs one window of d of the gateway's workers; lastTok
// is each lock's last fencing token.
func gatewayDistinct(ctx context.Context, c *client, leases []string, lastTok []int64, d time.Duration, s *distinctSide) error {
	var bad atomic.Int64
	bodies, acquire, release := make([][]byte, len(leases)), make([]string, len(leases)), make([]string, len(leases))
	for i, id := range leases {
		bodies[i] = leaseBody(id)
		acquire[i], release[i] = fmt.Sprintf("/v1/locks/bench-d-%d/acquire", i), fmt.Sprintf("/v1/locks/bench-d-%d/release", i)
	}
	win := newWindow(d, len(leases), true)
	err := loopUntil(ctx, len(leases), win.deadline, func(i int) error {
		body := bodies[i]
		t0 := time.Now()
		st, b, err := c.do(ctx, http.MethodPost, acquire[i], body)
		if err := expect("acquire", st, b, err, http.StatusOK); err != nil {
			bad.Add(1)
			return err
		}
		at := time.Now()
		g, err := parseGrant(b)
		if err != nil {
			bad.Add(1)
			return err
		}
		if g.Token <= lastTok[i] {
			bad.Add(1)
		}
		lastTok[i] = g.Token
		st, b, err = c.do(ctx, http.MethodPost, release[i], body)
		if err := expect("release", st, b, err, http.StatusNoContent); err != nil {
			return err
		}
		win.done(i, t0, at)
		return nil
	}).wait(ctx)
	s.bad += bad.Load()
	s.add(win, d)
	return err
}

// add adds one measured window of d: its counts and cycle times.
func (s *distinctSide) add(win *window, d time.Duration) {
	s.cycles += win.in.Load()
	s.total += win.total.Load()
	s.elapsed += d
	s.segments++
	for _, l := range win.lats {
		s.lat = append(s.lat, l...)
	}
}

// directDistinct runs one window of d of the zk.Lock workers.
func directDistinct(ctx context.Context, locks []*zk.Lock, d time.Duration, s *distinctSide) error {
	win := newWindow(d, len(locks), true)
	err := loopUntil(ctx, len(locks), win.deadline, func(i int) error {
		t0 := time.Now()
		if err := locks[i].Lock(); err != nil {
			return fmt.Errorf("zk.Lock: %w", err)
		}
		at := time.Now()
		if err := locks[i].Unlock(); err != nil {
			return fmt.Errorf("zk.Unlock: %w", err)
		}
		win.done(i, t0, at)
		return nil
	}).waitOrCancel(ctx)
	if ctx.Err() != nil {
		return err
	}
	s.add(win, d)
	return err
}

// printDistinct writes section 2b and adds its summary rows.
func (r *report) printDistinct(rw *reportWriter) {
	p := rw.p
	k := r.distinct
	if k.gw.segments == 0 && k.direct.segments == 0 {
		return
	}
	rw.section(fmt.Sprintf("## 2b. %d workers on distinct locks", k.workers),
		"Each worker loops acquire + release on a lock of its own, so nobody waits for anybody: this is the gateway's throughput across many locks. Gateway: each worker its own lease and lock name (`bench-d-N`), `POST acquire` (no wait) then `POST release`, on keep-alive connections (the gateway holds one ZooKeeper session). Direct: the same number of workers sharing **one** `zk.Conn`, each with its own `zk.NewLock` on its own path (what one process using go-zookeeper would do). Cycles whose grant came inside the measured windows count (ABBA halves, after a warm-up each of 1s or half the duration if shorter, not counted). Mutual exclusion holds trivially (one worker per lock); checked instead: every gateway acquire answered 200 with a fencing token, growing per lock.")
	p("| client | window | cycles | cycles/s | cycle p50 | cycle p99 | bad answers |")
	p("|---|---:|---:|---:|---:|---:|---:|")
	for _, s := range pair("gateway", k.gw, "direct, one shared zk.Conn", k.direct) {
		if s.s.segments == 0 {
			continue
		}
		l := summarize(s.s.lat)
		badCell := "n/a"
		if s.name == "gateway" {
			badCell = fmt.Sprint(s.s.bad)
		}
		p("| %s | %s | %s | %.0f | %s | %s | %s |", s.name, s.s.elapsed, thousands(s.s.cycles), s.s.rate(), msf(l.p50), msf(l.p99), badCell)
	}
	if k.gw.segments > 0 && k.direct.segments > 0 {
		p("| **ratio gateway/direct** | | | **%.2fx** | | | |", k.ratio())
		rw.add(ratioRow(fmt.Sprintf("2b. cycles/s, %d workers on distinct locks, gateway/direct", k.workers), k.ratio(),
			fmt.Sprintf("gateway %.0f/s, direct %.0f/s", k.gw.rate(), k.direct.rate()), targetDistinct, false))
	}
	if k.gw.segments > 0 {
		rw.add([4]string{"2b. distinct locks: every acquire 200 with a growing token", fmt.Sprintf("%d bad of %s", k.gw.bad, thousands(k.gw.total)), "0", verdict(k.gw.bad == 0)})
	}
	p("")
}
