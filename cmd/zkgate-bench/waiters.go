//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/zkserver"
)

var waitersMemoryPhase = phase{
	name: "waiters",
	flags: func(fs *flag.FlagSet, c *config) {
		fs.IntVar(&c.waiters, "waiters", 10000, "concurrent acquires waiting on one lock in the memory test, per protocol (see -waiter-protocols)")
		fs.StringVar(&c.waiterProtoList, "waiter-protocols", strings.Join(waiterProtos, ","), "protocols of the memory test, each on a fresh gateway process: h1 (HTTP/1.1, a connection per waiter), h2c (HTTP/2 with prior knowledge on the plain port), tls (HTTP/2 over TLS, a self-signed certificate)")
		fs.DurationVar(&c.waiterWait, "waiter-wait", 5*time.Minute, "?wait= of each waiting acquire; it must cover the time the gateway takes to park them all and then grant them in turn (see the report)")
		fs.IntVar(&c.ramp, "ramp", 128, "waiting acquires being connected and sent at once while they arrive")
	},
	quick: map[string]func(c *config){"waiters": func(c *config) { c.waiters = 1000 }},
	check: func(c *config) (err error) {
		if c.waiterProtocols, err = listFlag("waiter-protocols", "protocol", c.waiterProtoList, waiterProtos, true); err != nil {
			return err
		}
		if len(c.waiterProtocols) == 0 {
			return errors.New("-waiter-protocols: none given")
		}
		return firstError(positive(c.waiters, c.ramp), waits(c.waiterWait))
	},
	run: func(ctx context.Context, e *env, rep *report) error {
		for _, proto := range e.cfg.waiterProtocols {
			progress("3. %d waiting acquires over %s, on a fresh gateway", e.cfg.waiters, protoName(proto))
			wr, err := e.waitersOn(ctx, proto)
			rep.waiters = append(rep.waiters, wr)
			if err != nil {
				return fmt.Errorf("waiters over %s: %w", protoName(proto), err)
			}
		}
		return nil
	},
}

const memLock = "bench-mem"

type waitersResult struct {
	proto        string // h1, h2c or tls
	letter       string // a, b, c: the subsection
	pid          int    // the fresh gateway's
	args         string
	peakRSS      uint64
	dials        int64 // TCP connections the waiters' client opened
	n            int
	leasesTook   time.Duration
	arrival      time.Duration // first request sent .. the gateway counted them all
	reached      int           // most waiters the gateway counted
	zkChildren   int           // lock nodes in ZooKeeper then (holder included)
	zkWatches    int           // watches ZooKeeper holds then (wchs)
	idle         mem           // before the leases
	leased       mem           // n leases and the holder, no waiters
	with         mem           // n waiters
	after        mem           // all answered and every lease revoked
	chain        time.Duration // holder released .. last waiter answered
	lastGrant    time.Duration // holder released .. last grant received
	acquire      map[string]int
	release      map[string]int
	answered     int
	granted      int
	early        int // answered before the holder released
	unanswered   int
	excl         *exclusion
	leftover     int     // lock nodes left at the end
	waitersAfter float64 // the gateway's waiter gauge at the end
	revokeTook   time.Duration
}

// waiterConns is how many TCP connections the waiters added on the
// gateway's port.
func (r waitersResult) waiterConns() int64 {
	return int64(r.with.conns) - int64(r.leased.conns)
}

func (r waitersResult) target() uint64 {
	if r.proto == "h1" {
		return targetPerWaiterH1
	}
	return targetPerWaiterH2
}

func protoName(proto string) string {
	switch proto {
	case "h1":
		return "HTTP/1.1"
	case "h2c":
		return "HTTP/2 cleartext (h2c, prior knowledge)"
	case "tls":
		return "HTTP/2 over TLS"
	}
	return proto
}

func protoHow(proto string) string {
	switch proto {
	case "h1":
		return "HTTP/1.1: Go's `http.Transport` with HTTP/2 off, one connection per waiting request."
	case "h2c":
		return "HTTP/2 with prior knowledge on the gateway's plain port: Go's `http.Transport` with `Protocols` set to `UnencryptedHTTP2` only; the waiting requests are streams, and the client opens another connection when one reaches the server's limit of concurrent streams (Go's default, 250, unless the gateway sets another)."
	case "tls":
		return "HTTP/2 over TLS (ALPN h2): the gateway serves `--tls-cert/--tls-key` with a self-signed ECDSA P-256 certificate for 127.0.0.1 the bench makes and trusts; Go's `http.Transport` with `Protocols` set to `HTTP2` only; the waiting requests are streams, and the client opens another connection when one reaches the server's limit of concurrent streams (Go's default, 250, unless the gateway sets another)."
	}
	return ""
}

// waiterTransport is the waiters' transport for proto, counting the TCP
// connections it dials.
func waiterTransport(proto string, conns int, certs *tlsFiles, dials *atomic.Int64) *http.Transport {
	t := newTransport(conns)
	dial := t.DialContext
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	var ps http.Protocols
	switch proto {
	case "h1":
		ps.SetHTTP1(true)
	case "h2c":
		ps.SetUnencryptedHTTP2(true)
	case "tls":
		ps.SetHTTP2(true)
		t.TLSClientConfig = certs.clientConfig()
	}
	t.Protocols = &ps
	return t
}

// waitersOn runs the memory test over proto on a fresh gateway process,
// stopped at the end.
func (e *env) waitersOn(ctx context.Context, proto string) (res waitersResult, err error) {
	res.proto = proto
	res.letter = string(rune('a' + slices.Index(waiterProtos, proto)))
	var certs *tlsFiles
	if proto == "tls" {
		if certs, err = selfSigned(e.tmp); err != nil {
			return res, fmt.Errorf("self-signed certificate: %w", err)
		}
	}
	g, err := startGateway(ctx, e.bin, e.zkAddr, e.cfg.logLevel, filepath.Join(e.tmp, "zkgate-waiters-"+proto+".log"), certs)
	if err != nil {
		return res, err
	}
	res.pid, res.args = g.pid(), strings.Join(g.cmd.Args[1:], " ")
	defer func() {
		res.peakRSS = g.peakRSS()
		if serr := g.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "--- last lines of the log of the gateway of the %s waiters ---\n%s\n", proto, g.logTail(30))
		}
	}()
	var killed string
	stopGuard := g.guardRSS(uint64(e.cfg.maxRSSGiB*(1<<30)), func(rss uint64) {
		killed = fmt.Sprintf("the bench killed the gateway: its VmRSS reached %s, above -max-gateway-rss %.1f GiB", mib(rss), e.cfg.maxRSSGiB)
		progress("%s", killed)
	})
	var guardOnce sync.Once
	endGuard := func() { guardOnce.Do(stopGuard) }
	defer endGuard()
	if nofile, _ := procLimit(g.pid(), "Max open files"); nofile < uint64(e.cfg.waiters)+64 {
		return res, fmt.Errorf("the gateway's open-file limit is %d, below the %d waiters", nofile, e.cfg.waiters)
	}
	var dials atomic.Int64
	tr := waiterTransport(proto, e.cfg.waiters+64, certs, &dials)
	err = e.waitersPhase(ctx, g, tr, &res)
	res.dials = dials.Load()
	endGuard()
	if killed != "" {
		err = errors.Join(err, errors.New(killed))
	}
	return res, err
}

// settle scales the pauses of the memory measurement: 1 in a real run; the
// smoke test shortens them (its figures mean nothing anyway).
func (e *env) settle(d time.Duration) time.Duration {
	if e.cfg.settleScale > 0 {
		return time.Duration(float64(d) * e.cfg.settleScale)
	}
	return d
}

func perWaiter(with, before uint64, n int) float64 {
	return (float64(with) - float64(before)) / float64(n)
}

func (r waitersResult) rssPerWaiter() float64 {
	return perWaiter(r.with.rss, r.leased.rss, r.n)
}

func (r waitersResult) heapStackPerWaiter() float64 {
	return perWaiter(r.with.heapStack(), r.leased.heapStack(), r.n)
}

type outcome struct {
	status    int
	code      string
	err       error
	relStatus int
	relErr    error
	answered  time.Time
}

// waitersPhase parks cfg.waiters acquires on one held lock, measures the
// gateway's memory before and with them, then releases the holder and lets
// every waiter be granted and release in turn.
func (e *env) waitersPhase(ctx context.Context, g *gateway, tr *http.Transport, out *waitersResult) (err error) {
	n := e.cfg.waiters
	res := out
	res.n, res.acquire, res.release, res.excl = n, map[string]int{}, map[string]int{}, &exclusion{}
	setupTr := g.metrics.Transport.(*http.Transport).Clone()
	setupTr.MaxIdleConns, setupTr.MaxIdleConnsPerHost = 64, 64
	setup := &client{base: g.url, hc: &http.Client{Transport: setupTr, Timeout: 2 * time.Minute}}
	defer setup.close()
	if res.idle, err = g.settledMemory(ctx, 3, e.settle(300*time.Millisecond)); err != nil {
		return err
	}

	// Leases: one per waiter, plus the holder's, made 64 at a time.
	t0 := time.Now()
	ttl := e.cfg.waiterWait + 30*time.Minute
	leases, err := setup.createLeases(ctx, n+1, 64, ttl, "bench-waiter")
	res.leasesTook = time.Since(t0)
	revoked := false
	defer func() {
		if !revoked {
			_ = setup.revokeLeases(context.Background(), leases, 64)
		}
	}()
	if err != nil {
		return err
	}
	holder, waiters := leases[0], leases[1:]
	progress("%d leases made in %s", len(leases), res.leasesTook.Round(time.Millisecond))

	acquire := fmt.Sprintf("/v1/locks/%s/acquire", memLock)
	release := fmt.Sprintf("/v1/locks/%s/release", memLock)
	st, b, herr := setup.do(ctx, http.MethodPost, acquire, leaseBody(holder))
	if err := expect("holder acquire", st, b, herr, http.StatusOK); err != nil {
		return err
	}
	hg, err := parseGrant(b)
	if err != nil {
		return err
	}
	res.excl.enter(hg.Token)

	if res.leased, err = g.settledMemory(ctx, 5, e.settle(400*time.Millisecond)); err != nil {
		return err
	}

	// The waiters: each its own connection. At most cfg.ramp of them are
	// connecting and sending at once; once a request is written the next
	// one starts.
	wc := &client{base: g.url, hc: &http.Client{Transport: tr, Timeout: e.cfg.waiterWait + 3*time.Minute}}
	defer wc.close()
	// One request first: an HTTP/2 client then has its connection up, and
	// the waiters open streams on it (and more connections when it is full).
	st, b, herr = wc.do(ctx, http.MethodGet, "/readyz", nil)
	if err := expect("readyz", st, b, herr, http.StatusOK); err != nil {
		return err
	}
	waitPath := fmt.Sprintf("%s?wait=%s", acquire, e.cfg.waiterWait)
	outs := make([]outcome, n)
	sem := make(chan struct{}, e.cfg.ramp)
	var (
		wg       sync.WaitGroup
		answered atomic.Int64 // HTTP answers
		finished atomic.Int64 // answers and failures
		released atomic.Bool
		early    atomic.Int64
	)
	start := time.Now()
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &outs[i]
			body := leaseBody(waiters[i])
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				o.err = ctx.Err()
				return
			}
			var once sync.Once
			free := func() { once.Do(func() { <-sem }) }
			tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
				WroteRequest: func(httptrace.WroteRequestInfo) { free() }})
			st, b, err := wc.do(tctx, http.MethodPost, waitPath, body)
			free()
			o.answered = time.Now()
			finished.Add(1)
			o.status, o.err = st, err
			if err != nil {
				return
			}
			answered.Add(1)
			if !released.Load() {
				early.Add(1)
			}
			if st != http.StatusOK {
				var p struct {
					Code string `json:"code"`
				}
				_ = json.Unmarshal(b, &p)
				o.code = p.Code
				return
			}
			g, err := parseGrant(b)
			if err != nil {
				o.err = err
				return
			}
			res.excl.enter(g.Token)
			res.excl.leave()
			o.relStatus, _, o.relErr = wc.do(ctx, http.MethodPost, release, body)
		}()
	}

	// Wait until the gateway counts every waiter and ZooKeeper has all their
	// nodes, or some waiter has already finished (then all never will be).
	parent := gatewayRoot + "/locks/" + memLock
	lastReport := time.Now()
	arrivalLimit := time.NewTimer(e.cfg.waiterWait + time.Minute)
	defer arrivalLimit.Stop()
wait:
	for {
		m, err := g.memory(ctx)
		if err != nil {
			return fmt.Errorf("while waiters arrive: %w", err)
		}
		res.reached = max(res.reached, int(m.waiters))
		if int(m.waiters) >= n {
			// The gateway counts a waiter from the start of its acquire; it
			// is parked once ZooKeeper holds its node and its watch on the
			// node before it.
			kids, _, err := e.conn.Children(parent)
			if err == nil {
				res.zkChildren = len(kids)
			}
			if w, err := totalWatches(ctx, e.zkAddr); err == nil {
				res.zkWatches = w
			}
			if res.zkChildren >= n+1 && res.zkWatches >= n {
				res.arrival = time.Since(start)
				break
			}
		}
		if finished.Load() > 0 {
			res.arrival = time.Since(start)
			progress("a waiter finished (answered %d, failed %d) before all %d were parked (the gateway counts %d)",
				answered.Load(), finished.Load()-answered.Load(), n, int(m.waiters))
			break
		}
		if time.Since(lastReport) > 5*time.Second {
			nodes, watches := "?", "?"
			if kids, _, err := e.conn.Children(parent); err == nil {
				nodes = fmt.Sprint(len(kids))
			}
			if w, err := totalWatches(ctx, e.zkAddr); err == nil {
				watches = fmt.Sprint(w)
			}
			progress("waiters: the gateway counts %d of %d; ZooKeeper holds %s lock nodes and %s watches", int(m.waiters), n, nodes, watches)
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-arrivalLimit.C:
			res.arrival = time.Since(start)
			progress("not all %d waiters arrived within %s", n, e.cfg.waiterWait+time.Minute)
			break wait
		case <-time.After(250 * time.Millisecond):
		}
	}
	progress("%d waiters parked in %s; measuring memory", res.reached, res.arrival.Round(time.Millisecond))
	select { // let the last arrivals finish their bookkeeping
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(e.settle(2 * time.Second)):
	}
	if res.with, err = g.settledMemory(ctx, 5, e.settle(400*time.Millisecond)); err != nil {
		return err
	}
	if m, err := g.memory(ctx); err == nil && int(m.waiters) < res.reached {
		progress("waiters left while memory was measured: the gateway counts %d", int(m.waiters))
	}

	// Release the holder: every waiter is granted in turn and releases.
	released.Store(true)
	res.excl.leave()
	t0 = time.Now()
	st, b, herr = setup.do(ctx, http.MethodPost, release, leaseBody(holder))
	if err := expect("holder release", st, b, herr, http.StatusNoContent); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	limit := time.NewTimer(e.cfg.waiterWait + 3*time.Minute)
	defer limit.Stop()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
collect:
	for {
		select {
		case <-done:
			break collect
		case <-ctx.Done():
			return ctx.Err()
		case <-limit.C:
			break collect
		case <-tick.C:
			progress("waiters answered: %d of %d (failed: %d)", answered.Load(), n, finished.Load()-answered.Load())
		}
	}
	res.chain = time.Since(t0)
	res.early = int(early.Load())
	for i := range outs {
		o := &outs[i]
		switch {
		case o.answered.IsZero():
			res.unanswered++
			if o.err != nil {
				res.acquire["no answer: "+errKind(o.err)]++
			} else {
				res.acquire["no answer"]++
			}
			continue
		case o.err != nil:
			res.acquire["transport error: "+errKind(o.err)]++
			res.unanswered++
			continue
		}
		res.answered++
		key := fmt.Sprint(o.status)
		if o.code != "" {
			key += " " + o.code
		}
		res.acquire[key]++
		if o.status == http.StatusOK {
			res.granted++
			res.lastGrant = max(res.lastGrant, o.answered.Sub(t0))
			switch {
			case o.relErr != nil:
				res.release["transport error: "+errKind(o.relErr)]++
			default:
				res.release[fmt.Sprint(o.relStatus)]++
			}
		}
	}
	if m, merr := g.memory(ctx); merr == nil {
		res.waitersAfter = m.waiters
	}
	if kids, _, kerr := e.conn.Children(parent); kerr == nil {
		res.leftover = len(kids)
	} else if !errors.Is(kerr, zk.ErrNoNode) {
		return kerr
	}

	wc.close() // drop the waiters' idle connections before "after"
	progress("revoking %d leases", len(leases))
	t0 = time.Now()
	revoked = true
	if err := setup.revokeLeases(ctx, leases, 64); err != nil {
		return err
	}
	res.revokeTook = time.Since(t0)
	if res.after, err = g.settledMemory(ctx, 3, e.settle(300*time.Millisecond)); err != nil {
		return err
	}
	if res.unanswered > 0 {
		return fmt.Errorf("%d of %d waiters got no answer", res.unanswered, n)
	}
	return nil
}

// errKind shortens a transport error to its gist, for counting.
func errKind(err error) string {
	s := err.Error()
	for _, k := range []string{"context deadline exceeded", "connection reset by peer", "connection refused",
		"EOF", "too many open files", "cannot assign requested address", "timeout", "context canceled"} {
		if strings.Contains(s, k) {
			return k
		}
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// totalWatches asks ZooKeeper (wchs) how many watches it holds.
func totalWatches(ctx context.Context, addr string) (int, error) {
	s, err := zkserver.FourLetterWord(ctx, addr, "wchs")
	if err != nil {
		return 0, err
	}
	i := strings.Index(s, "Total watches:")
	if i < 0 {
		return 0, fmt.Errorf("wchs: %q", s)
	}
	var n int
	_, err = fmt.Sscan(strings.TrimSpace(s[i+len("Total watches:"):]), &n)
	return n, err
}
