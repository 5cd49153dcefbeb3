//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

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

// latency measures one client acquiring and releasing a free lock, through
// the gateway (one lease, one keep-alive connection) and with go-zookeeper's
// zk.Lock on a direct connection, in alternating blocks (ABBA) so that drift
// of the machine hits both alike.
func (e *env) latency(ctx context.Context) (latencyResult, error) {
	var res latencyResult
	c := newClient(e.gw.url, 2, time.Minute)
	defer c.close()
	lease, err := c.createLease(ctx, 10*time.Minute, "bench-uncontended")
	if err != nil {
		return res, err
	}
	defer func() { _ = c.revokeLease(context.Background(), lease) }()
	body := leaseBody(lease)
	const acquirePath, releasePath = "/v1/locks/bench-u/acquire", "/v1/locks/bench-u/release"

	gwOnce := func() (acq, rel time.Duration, err error) {
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
	lock := zk.NewLock(e.conn, directRoot+"/bench-u", zk.WorldACL(zk.PermAll))
	directOnce := func() (acq, rel time.Duration, err error) {
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

	kaPath := "/v1/leases/" + lease + "/keepalive"
	floorParent := directRoot + "/bench-floor"
	for _, p := range []string{directRoot, floorParent} {
		if _, err := e.conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			return res, fmt.Errorf("create %s: %w", p, err)
		}
	}
	var ka, ex, cr, ch, del, cl dist
	floorBlock := func(n int) error {
		for i := 0; i < n; i++ {
			t0 := time.Now()
			st, b, err := c.do(ctx, http.MethodPost, kaPath, nil)
			if err := expect("keepalive", st, b, err, http.StatusOK); err != nil {
				return err
			}
			t1 := time.Now()
			if _, _, err := e.conn.Exists(directRoot); err != nil {
				return fmt.Errorf("zk Exists: %w", err)
			}
			t2 := time.Now()
			node, err := e.conn.Create(floorParent+"/floor-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
			if err != nil {
				return fmt.Errorf("zk Create: %w", err)
			}
			t3 := time.Now()
			if _, _, err := e.conn.Children(floorParent); err != nil {
				return fmt.Errorf("zk Children: %w", err)
			}
			t4 := time.Now()
			if err := e.conn.Delete(node, -1); err != nil {
				return fmt.Errorf("zk Delete: %w", err)
			}
			t5 := time.Now()
			node, _, list, err := e.conn.CreateWithStatThenChildren(floorParent+"/floor-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll), floorParent)
			if err == nil {
				err = list.Err
			}
			if err != nil {
				return fmt.Errorf("zk CreateWithStatThenChildren: %w", err)
			}
			t6 := time.Now()
			if err := e.conn.Delete(node, -1); err != nil {
				return fmt.Errorf("zk Delete: %w", err)
			}
			ka, ex = append(ka, t1.Sub(t0)), append(ex, t2.Sub(t1))
			cr, ch, del = append(cr, t3.Sub(t2)), append(ch, t4.Sub(t3)), append(del, t5.Sub(t4))
			cl = append(cl, t6.Sub(t5))
		}
		return nil
	}

	var gw, gwAcq, gwRel, d, dAcq, dRel dist
	runBlock := func(n int, gateway, record bool) error {
		for i := 0; i < n; i++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			once := directOnce
			if gateway {
				once = gwOnce
			}
			a, r, err := once()
			if err != nil {
				return err
			}
			if !record {
				continue
			}
			if gateway {
				gw, gwAcq, gwRel = append(gw, a+r), append(gwAcq, a), append(gwRel, r)
			} else {
				d, dAcq, dRel = append(d, a+r), append(dAcq, a), append(dRel, r)
			}
		}
		return nil
	}
	// Warm up both (connections, JIT of the JVM, lock parents).
	if err := runBlock(e.cfg.warmup, true, false); err != nil {
		return res, err
	}
	if err := runBlock(e.cfg.warmup, false, false); err != nil {
		return res, err
	}
	before, err := e.gw.scrape(ctx)
	if err != nil {
		return res, err
	}
	for done, b := 0, 0; done < e.cfg.iterations; b++ {
		n := min(e.cfg.block, e.cfg.iterations-done)
		first := b%2 == 0 // ABBA: G D, D G, G D, ...
		if err := runBlock(n, first, true); err != nil {
			return res, err
		}
		if err := runBlock(n, !first, true); err != nil {
			return res, err
		}
		if err := floorBlock(max(1, n/4)); err != nil {
			return res, err
		}
		done += n
		res.blocks = b + 1
	}
	res.gw, res.gwAcq, res.gwRel = summarize(gw), summarize(gwAcq), summarize(gwRel)
	res.direct, res.directLock, res.directUnlk = summarize(d), summarize(dAcq), summarize(dRel)
	res.keepalive, res.exists = summarize(ka), summarize(ex)
	res.create, res.children, res.del = summarize(cr), summarize(ch), summarize(del)
	res.createThenList = summarize(cl)
	_ = e.conn.Delete(floorParent, -1)
	after, err := e.gw.scrape(ctx)
	if err != nil {
		return res, err
	}
	res.serverAcq = serverMean(before, after, "/v1/locks/{name}/acquire")
	res.serverRel = serverMean(before, after, "/v1/locks/{name}/release")
	res.serverKA = serverMean(before, after, "/v1/leases/{id}/keepalive")
	return res, nil
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
