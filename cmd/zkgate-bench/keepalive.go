//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// keepalivePhase is section 4: keepalives, and that they stay off ZooKeeper.
var keepalivePhase = phase{
	name: "keepalive",
	flags: func(fs *flag.FlagSet, c *config) {
		fs.IntVar(&c.kaWorkers, "keepalive-workers", 32, "goroutines sending keepalives")
		fs.DurationVar(&c.kaDur, "keepalive-duration", 5*time.Second, "keepalive run time (an idle window of the same length is measured first)")
	},
	quick: map[string]func(c *config){"keepalive-duration": func(c *config) { c.kaDur = 2 * time.Second }},
	check: func(c *config) error {
		return firstError(positive(c.kaWorkers), durations(c.kaDur >= 100*time.Millisecond))
	},
	announce: func(c config) string { return fmt.Sprintf("4. keepalives: %d workers, %s", c.kaWorkers, c.kaDur) },
	what:     "keepalives",
	run:      storeIn(func(r *report) *keepaliveResult { return &r.keepalive }, keepalives),
}

type keepaliveResult struct {
	workers       int
	count         int64
	elapsed       time.Duration
	lat           summary
	idlePackets   float64 // ZooKeeper packets received in an idle window
	kaPackets     float64 // ... in a window of keepalives of the same length
	zkPacketsSeen bool
}

func (r keepaliveResult) rate() float64 { return float64(r.count) / r.elapsed.Seconds() }

// extraPackets is how many more packets ZooKeeper received while keepalives
// ran than while nothing did.
func (r keepaliveResult) extraPackets() float64 { return r.kaPackets - r.idlePackets }

// keepalivesFree says whether the keepalives stayed off ZooKeeper: the extra
// packets (pings drift in and out of a window) are under 1% of them.
func (r keepaliveResult) keepalivesFree() bool {
	return r.zkPacketsSeen && r.extraPackets() <= 0.01*float64(r.count)
}

// keepalives has cfg.kaWorkers goroutines each keep one lease alive in a
// loop, after an idle window of the same length, comparing ZooKeeper's
// packet count (mntr zk_packets_received) over both windows.
func keepalives(ctx context.Context, e *env) (keepaliveResult, error) {
	res := keepaliveResult{workers: e.cfg.kaWorkers}
	c := newClient(e.gw.url, 2*e.cfg.kaWorkers, time.Minute)
	defer c.close()
	leases, err := c.createLeases(ctx, e.cfg.kaWorkers, 8, time.Minute, "bench-keepalive")
	defer func() { _ = c.revokeLeases(context.Background(), leases, 8) }()
	if err != nil {
		return res, err
	}
	// Warm the connections up, then let things settle.
	if err := parallel(ctx, len(leases), len(leases), func(i int) error {
		st, b, err := c.do(ctx, http.MethodPost, "/v1/leases/"+leases[i]+"/keepalive", nil)
		return expect("keepalive", st, b, err, http.StatusOK)
	}); err != nil {
		return res, err
	}
	packets := func() (float64, error) {
		m, err := mntr(ctx, e.zkAddr)
		if err != nil {
			return 0, err
		}
		v, ok := m["zk_packets_received"]
		res.zkPacketsSeen = ok
		return v, nil
	}

	p0, err := packets()
	if err != nil {
		return res, err
	}
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(e.cfg.kaDur):
	}
	p1, err := packets()
	if err != nil {
		return res, err
	}
	res.idlePackets = p1 - p0

	var count atomic.Int64
	lats, paths := make([]dist, len(leases)), make([]string, len(leases))
	for i, id := range leases {
		paths[i] = "/v1/leases/" + id + "/keepalive"
	}
	p2, err := packets()
	if err != nil {
		return res, err
	}
	start := time.Now()
	werr := loopUntil(ctx, len(leases), start.Add(e.cfg.kaDur), func(i int) error {
		t0 := time.Now()
		st, b, err := c.do(ctx, http.MethodPost, paths[i], nil)
		if err := expect("keepalive", st, b, err, http.StatusOK); err != nil {
			return err
		}
		lats[i] = append(lats[i], time.Since(t0))
		count.Add(1)
		return nil
	}).wait(ctx)
	res.elapsed = time.Since(start)
	p3, err := packets()
	if err != nil {
		return res, err
	}
	res.kaPackets = p3 - p2
	res.count = count.Load()
	var all dist
	for _, l := range lats {
		all = append(all, l...)
	}
	res.lat = summarize(all)
	return res, werr
}
