//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// latencyPhase is section 1: one client's uncontended acquire + release.
var latencyPhase = phase{
	name: "latency",
	flags: func(fs *flag.FlagSet, c *config) {
		fs.IntVar(&c.iterations, "iterations", 2000, "uncontended acquire+release iterations, each for the gateway and for the direct client")
		fs.IntVar(&c.warmup, "warmup", 200, "uncontended warm-up iterations, each")
		fs.IntVar(&c.block, "block", 100, "uncontended iterations per block; blocks alternate gateway/direct in ABBA order")
	},
	quick: map[string]func(c *config){
		"iterations": func(c *config) { c.iterations = 300 },
		"warmup":     func(c *config) { c.warmup = 50 },
		"block":      func(c *config) { c.block = 50 },
	},
	check: func(c *config) error {
		return positive(c.iterations, c.block, c.warmup+1) // -warmup may be 0
	},
	announce: func(c config) string {
		return fmt.Sprintf("1. uncontended latency: %d warm-up + %d iterations each", c.warmup, c.iterations)
	},
	what: "uncontended latency",
	run:  storeIn(func(r *report) *latencyResult { return &r.latency }, latency),
}

// dist is a sample of durations.
type dist []time.Duration

func (d dist) sorted() dist {
	s := append(dist(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

// pct is the nearest-rank percentile p (0-100) of a sorted sample.
func (d dist) pct(p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(p/100*float64(len(d))+0.999999) - 1
	return d[max(0, min(i, len(d)-1))]
}

func (d dist) mean() time.Duration {
	if len(d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}

type summary struct {
	n                          int
	p50, p90, p99, mean, worst time.Duration
}

func summarize(d dist) summary {
	s := d.sorted()
	return summary{n: len(s), p50: s.pct(50), p90: s.pct(90), p99: s.pct(99), mean: s.mean(), worst: s.pct(100)}
}

// latencyResult is the uncontended test.
type latencyResult struct {
	gw, direct             summary // acquire+release
	gwAcq, gwRel           summary
	directLock, directUnlk summary
	serverAcq, serverRel   time.Duration // mean time inside the gateway, from its own histogram
	serverKA               time.Duration
	keepalive              summary // one POST keepalive: the HTTP floor
	exists                 summary // one zk Exists: the ZooKeeper round-trip floor
	create, children, del  summary // zk.Lock's own requests, timed raw
	createThenList         summary // the gateway's acquire: create2 with the listing behind it
	blocks                 int
}

// floorRaw is the gateway's ZooKeeper requests timed raw on the direct
// client's connection: a create2 of an ephemeral sequential node with the
// listing of its parent sent right behind it (one round trip), then a
// Delete: what an uncontended acquire + release sends.
func (r latencyResult) floorRaw(f func(summary) time.Duration) time.Duration {
	return f(r.createThenList) + f(r.del)
}

// floorRatio is (those requests timed raw + one HTTP exchange per gateway
// call, i.e. two) / the direct client's Lock + Unlock.
func (r latencyResult) floorRatio(f func(summary) time.Duration) float64 {
	return float64(r.floorRaw(f)+2*f(r.keepalive)) / float64(f(r.direct))
}

func p50Of(s summary) time.Duration  { return s.p50 }
func meanOf(s summary) time.Duration { return s.mean }

func (r latencyResult) ratioP50() float64  { return float64(r.gw.p50) / float64(r.direct.p50) }
func (r latencyResult) ratioMean() float64 { return float64(r.gw.mean) / float64(r.direct.mean) }

// cycle is one acquire + release, timed: the acquire, then the release.
type cycle func() (acq, rel time.Duration, err error)

// cycleTimes are one side's recorded cycles: whole, acquire, release.
type cycleTimes struct{ both, acq, rel dist }

// runCycles runs once n times, recording into times (nil: a warm-up).
func runCycles(ctx context.Context, n int, once cycle, times *cycleTimes) error {
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		a, r, err := once()
		if err != nil {
			return err
		}
		if times != nil {
			times.both, times.acq, times.rel = append(times.both, a+r), append(times.acq, a), append(times.rel, r)
		}
	}
	return nil
}

// cycleRunner is the A/B runner of the gateway's cycles (once[0], recorded
// into times[0]) against another client's (once[1], into times[1]); sides
// names them. Warm-ups are not recorded.
func cycleRunner(ctx context.Context, sides []string, once [2]cycle, times [2]*cycleTimes) ab[int] {
	return ab[int]{sides: sides, run: func(s abRun[int]) error {
		into := times[s.side]
		if s.warm {
			into = nil
		}
		return runCycles(ctx, s.n, once[s.side], into)
	}}
}

// lockCycle acquires and releases lock name through the gateway with the
// lease body holds.
func lockCycle(ctx context.Context, c *client, name string, body []byte) cycle {
	acquirePath, releasePath := "/v1/locks/"+name+"/acquire", "/v1/locks/"+name+"/release"
	return func() (acq, rel time.Duration, err error) {
		t0 := time.Now()
		st, b, err := c.do(ctx, http.MethodPost, acquirePath, body)
		if err := expect("acquire", st, b, err, http.StatusOK); err != nil {
			return 0, 0, err
		}
		t1 := time.Now()
		st, b, err = c.do(ctx, http.MethodPost, releasePath, body)
		if err := expect("release", st, b, err, http.StatusNoContent); err != nil {
			return 0, 0, err
		}
		return t1.Sub(t0), time.Since(t1), nil
	}
}

// zkLockCycle locks and unlocks a zk.Lock.
func zkLockCycle(lock *zk.Lock) cycle {
	return func() (acq, rel time.Duration, err error) {
		t0 := time.Now()
		if err := lock.Lock(); err != nil {
			return 0, 0, fmt.Errorf("zk.Lock: %w", err)
		}
		t1 := time.Now()
		if err := lock.Unlock(); err != nil {
			return 0, 0, fmt.Errorf("zk.Unlock: %w", err)
		}
		return t1.Sub(t0), time.Since(t1), nil
	}
}

// latency measures one client acquiring and releasing a free lock, through
// the gateway (one lease, one keep-alive connection) and with go-zookeeper's
// zk.Lock on a direct connection, in alternating blocks (ABBA) so that drift
// of the machine hits both alike.
func latency(ctx context.Context, e *env) (latencyResult, error) {
	var res latencyResult
	c, lease, done, err := e.leasedClient(ctx, "bench-uncontended")
	if err != nil {
		return res, err
	}
	defer done()
	fl := &floor{ctx: ctx, c: c, conn: e.conn, kaPath: "/v1/leases/" + lease + "/keepalive", parent: directRoot + "/bench-floor"}
	for _, p := range []string{directRoot, fl.parent} {
		if _, err := e.conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			return res, fmt.Errorf("create %s: %w", p, err)
		}
	}
	// Both are warmed up (connections, JIT of the JVM, lock parents) before
	// the gateway's own figures are read.
	var gw, d cycleTimes
	lock := zk.NewLock(e.conn, directRoot+"/bench-u", zk.WorldACL(zk.PermAll))
	r := cycleRunner(ctx, []string{"gateway", "direct"}, [2]cycle{lockCycle(ctx, c, "bench-u", leaseBody(lease)), zkLockCycle(lock)},
		[2]*cycleTimes{&gw, &d})
	r.between = func(n int) error { return fl.block(max(1, n/4)) }
	if err := r.warm(e.cfg.warmup); err != nil {
		return res, err
	}
	before, err := e.gw.scrape(ctx)
	if err != nil {
		return res, err
	}
	if res.blocks, err = r.blocks(e.cfg.iterations, e.cfg.block); err != nil {
		return res, err
	}
	res.gw, res.gwAcq, res.gwRel = summarize(gw.both), summarize(gw.acq), summarize(gw.rel)
	res.direct, res.directLock, res.directUnlk = summarize(d.both), summarize(d.acq), summarize(d.rel)
	res.keepalive, res.exists = summarize(fl.ka), summarize(fl.ex)
	res.create, res.children, res.del = summarize(fl.cr), summarize(fl.ch), summarize(fl.del)
	res.createThenList = summarize(fl.cl)
	_ = e.conn.Delete(fl.parent, -1)
	after, err := e.gw.scrape(ctx)
	if err != nil {
		return res, err
	}
	res.serverAcq = serverMean(before, after, "/v1/locks/{name}/acquire")
	res.serverRel = serverMean(before, after, "/v1/locks/{name}/release")
	res.serverKA = serverMean(before, after, "/v1/leases/{id}/keepalive")
	return res, nil
}

// floor times, raw on the direct client's connection, the requests a lock
// cycle is made of, and one HTTP exchange of the gateway (a keepalive).
type floor struct {
	ctx                     context.Context
	c                       *client
	conn                    *zk.Conn
	kaPath, parent          string
	ka, ex, cr, ch, del, cl dist
}

// block times n of each.
func (f *floor) block(n int) error {
	acl := zk.WorldACL(zk.PermAll)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		st, b, err := f.c.do(f.ctx, http.MethodPost, f.kaPath, nil)
		if err := expect("keepalive", st, b, err, http.StatusOK); err != nil {
			return err
		}
		t1 := time.Now()
		if _, _, err := f.conn.Exists(directRoot); err != nil {
			return fmt.Errorf("zk Exists: %w", err)
		}
		t2 := time.Now()
		node, err := f.conn.Create(f.parent+"/floor-", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
		if err != nil {
			return fmt.Errorf("zk Create: %w", err)
		}
		t3 := time.Now()
		if _, _, err := f.conn.Children(f.parent); err != nil {
			return fmt.Errorf("zk Children: %w", err)
		}
		t4 := time.Now()
		if err := f.conn.Delete(node, -1); err != nil {
			return fmt.Errorf("zk Delete: %w", err)
		}
		t5 := time.Now()
		node, _, list, err := f.conn.CreateWithStatThenChildren(f.parent+"/floor-", nil, zk.FlagEphemeral|zk.FlagSequence, acl, f.parent)
		if err == nil {
			err = list.Err
		}
		if err != nil {
			return fmt.Errorf("zk CreateWithStatThenChildren: %w", err)
		}
		t6 := time.Now()
		if err := f.conn.Delete(node, -1); err != nil {
			return fmt.Errorf("zk Delete: %w", err)
		}
		f.ka, f.ex = append(f.ka, t1.Sub(t0)), append(f.ex, t2.Sub(t1))
		f.cr, f.ch, f.del = append(f.cr, t3.Sub(t2)), append(f.ch, t4.Sub(t3)), append(f.del, t5.Sub(t4))
		f.cl = append(f.cl, t6.Sub(t5))
	}
	return nil
}

// serverMean is the mean request duration the gateway itself measured for a
// route between two scrapes of its zkgate_http_request_duration_seconds.
func serverMean(before, after map[string]float64, route string) time.Duration {
	get := func(m map[string]float64, suffix string) float64 {
		var v float64
		for k, x := range m {
			if strings.HasPrefix(k, "zkgate_http_request_duration_seconds"+suffix+"{") && strings.Contains(k, `route="`+route+`"`) {
				v += x
			}
		}
		return v
	}
	n := get(after, "_count") - get(before, "_count")
	if n <= 0 {
		return 0
	}
	return time.Duration((get(after, "_sum") - get(before, "_sum")) / n * float64(time.Second))
}
