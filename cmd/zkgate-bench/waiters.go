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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/zkserver"
)

// waitersMemoryPhase is section 3: the gateway's memory with many waiters,
// over each protocol on a fresh gateway.
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
			wr, err := waitersOn(ctx, e, proto)
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
func waitersOn(ctx context.Context, e *env, proto string) (res waitersResult, err error) {
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
	err = measureWaiters(ctx, e, g, tr, &res)
	res.dials = dials.Load()
	endGuard()
	if killed != "" {
		err = errors.Join(err, errors.New(killed))
	}
	return res, err
}

// settle scales the pauses of the memory measurement: 1 in a real run; the
// smoke test shortens them (its figures mean nothing anyway).
func (w *waiterRun) settle(d time.Duration) time.Duration {
	if w.e.cfg.settleScale > 0 {
		return time.Duration(float64(d) * w.e.cfg.settleScale)
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

// waiterRun is one run of the memory test on one gateway.
type waiterRun struct {
	e                *env
	g                *gateway
	res              *waitersResult
	setup, wc        *client // the bench's setup requests; the waiters'
	leases           []string
	acquire, release string
	parent           string // the lock's node in ZooKeeper
	outs             []outcome
	wg               sync.WaitGroup
	answered         atomic.Int64 // HTTP answers
	finished         atomic.Int64 // answers and failures
	released         atomic.Bool
	early            atomic.Int64
	start            time.Time // the first waiter sent
}

// measureWaiters parks cfg.waiters acquires on one held lock, measures the
// gateway's memory before and with them, then releases the holder and lets
// every waiter be granted and release in turn.
func measureWaiters(ctx context.Context, e *env, g *gateway, tr *http.Transport, res *waitersResult) (err error) {
	n := e.cfg.waiters
	res.n, res.acquire, res.release, res.excl = n, map[string]int{}, map[string]int{}, &exclusion{}
	setupTr := g.metrics.Transport.(*http.Transport).Clone()
	setupTr.MaxIdleConns, setupTr.MaxIdleConnsPerHost = 64, 64
	w := &waiterRun{e: e, g: g, res: res, setup: &client{base: g.url, hc: &http.Client{Transport: setupTr, Timeout: 2 * time.Minute}},
		acquire: fmt.Sprintf("/v1/locks/%s/acquire", memLock), release: fmt.Sprintf("/v1/locks/%s/release", memLock),
		parent: gatewayRoot + "/locks/" + memLock, outs: make([]outcome, n)}
	defer w.setup.close()
	if res.idle, err = g.settledMemory(ctx, 3, w.settle(300*time.Millisecond)); err != nil {
		return err
	}
	revoked := false
	defer func() {
		if !revoked {
			_ = w.setup.revokeLeases(context.Background(), w.leases, 64)
		}
	}()
	if err := w.hold(ctx); err != nil {
		return err
	}
	if res.leased, err = g.settledMemory(ctx, 5, w.settle(400*time.Millisecond)); err != nil {
		return err
	}
	// The waiters: each its own connection (HTTP/1.1) or stream.
	w.wc = &client{base: g.url, hc: &http.Client{Transport: tr, Timeout: e.cfg.waiterWait + 3*time.Minute}}
	defer w.wc.close()
	if err := w.park(ctx); err != nil {
		return err
	}
	if err := w.awaitArrival(ctx); err != nil {
		return err
	}
	if err := w.measureWith(ctx); err != nil {
		return err
	}
	t0, err := w.grantAll(ctx)
	if err != nil {
		return err
	}
	w.tally(t0)
	if err := w.leftover(ctx); err != nil {
		return err
	}
	w.wc.close() // drop the waiters' idle connections before "after"
	progress("revoking %d leases", len(w.leases))
	t0 = time.Now()
	revoked = true
	if err := w.setup.revokeLeases(ctx, w.leases, 64); err != nil {
		return err
	}
	res.revokeTook = time.Since(t0)
	if res.after, err = g.settledMemory(ctx, 3, w.settle(300*time.Millisecond)); err != nil {
		return err
	}
	if res.unanswered > 0 {
		return fmt.Errorf("%d of %d waiters got no answer", res.unanswered, n)
	}
	return nil
}

// hold makes a lease per waiter plus the holder's, 64 at a time, and has
// the holder acquire the lock.
func (w *waiterRun) hold(ctx context.Context) (err error) {
	t0 := time.Now()
	ttl := w.e.cfg.waiterWait + 30*time.Minute
	w.leases, err = w.setup.createLeases(ctx, w.res.n+1, 64, ttl, "bench-waiter")
	w.res.leasesTook = time.Since(t0)
	if err != nil {
		return err
	}
	progress("%d leases made in %s", len(w.leases), w.res.leasesTook.Round(time.Millisecond))
	st, b, herr := w.setup.do(ctx, http.MethodPost, w.acquire, leaseBody(w.leases[0]))
	if err := expect("holder acquire", st, b, herr, http.StatusOK); err != nil {
		return err
	}
	hg, err := parseGrant(b)
	if err != nil {
		return err
	}
	w.res.excl.enter(hg.Token)
	return nil
}

// park sends every waiter's acquire?wait=. At most cfg.ramp of them are
// connecting and sending at once; once a request is written the next one
// starts.
func (w *waiterRun) park(ctx context.Context) error {
	// One request first: an HTTP/2 client then has its connection up, and
	// the waiters open streams on it (and more connections when it is full).
	st, b, herr := w.wc.do(ctx, http.MethodGet, "/readyz", nil)
	if err := expect("readyz", st, b, herr, http.StatusOK); err != nil {
		return err
	}
	waitPath := fmt.Sprintf("%s?wait=%s", w.acquire, w.e.cfg.waiterWait)
	sem := make(chan struct{}, w.e.cfg.ramp)
	w.start = time.Now()
	for i, lease := range w.leases[1:] {
		w.wg.Go(func() { w.wait(ctx, sem, waitPath, &w.outs[i], leaseBody(lease)) })
	}
	return nil
}

// wait is one waiter: its acquire, and its release once granted.
func (w *waiterRun) wait(ctx context.Context, sem chan struct{}, waitPath string, o *outcome, body []byte) {
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
	st, b, err := w.wc.do(tctx, http.MethodPost, waitPath, body)
	free()
	o.answered = time.Now()
	w.finished.Add(1)
	o.status, o.err = st, err
	if err != nil {
		return
	}
	w.answered.Add(1)
	if !w.released.Load() {
		w.early.Add(1)
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
	w.res.excl.enter(g.Token)
	w.res.excl.leave()
	o.relStatus, _, o.relErr = w.wc.do(ctx, http.MethodPost, w.release, body)
}

// zkState reads the lock nodes and the watches ZooKeeper holds ("?": not
// read).
func (w *waiterRun) zkState(ctx context.Context) (nodes, watches string) {
	nodes, watches = "?", "?"
	if kids, _, err := w.e.conn.Children(w.parent); err == nil {
		nodes = fmt.Sprint(len(kids))
	}
	if n, err := totalWatches(ctx, w.e.zkAddr); err == nil {
		watches = fmt.Sprint(n)
	}
	return nodes, watches
}

// awaitArrival waits until the gateway counts every waiter and ZooKeeper
// has all their nodes, or some waiter has already finished (then all never
// will be), or the waiters' wait and a minute have passed.
func (w *waiterRun) awaitArrival(ctx context.Context) error {
	n, res := w.res.n, w.res
	lastReport := time.Now()
	limit := w.e.cfg.waiterWait + time.Minute
	arrivalLimit := time.NewTimer(limit)
	defer arrivalLimit.Stop()
	for {
		m, err := w.g.memory(ctx)
		if err != nil {
			return fmt.Errorf("while waiters arrive: %w", err)
		}
		res.reached = max(res.reached, int(m.waiters))
		if int(m.waiters) >= n && w.parked(ctx) {
			res.arrival = time.Since(w.start)
			return nil
		}
		if w.finished.Load() > 0 {
			res.arrival = time.Since(w.start)
			progress("a waiter finished (answered %d, failed %d) before all %d were parked (the gateway counts %d)",
				w.answered.Load(), w.finished.Load()-w.answered.Load(), n, int(m.waiters))
			return nil
		}
		if time.Since(lastReport) > 5*time.Second {
			nodes, watches := w.zkState(ctx)
			progress("waiters: the gateway counts %d of %d; ZooKeeper holds %s lock nodes and %s watches", int(m.waiters), n, nodes, watches)
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-arrivalLimit.C:
			res.arrival = time.Since(w.start)
			progress("not all %d waiters arrived within %s", n, limit)
			return nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// parked says whether ZooKeeper holds every waiter's node and watch: the
// gateway counts a waiter from the start of its acquire; it is parked once
// ZooKeeper holds its node and its watch on the node before it.
func (w *waiterRun) parked(ctx context.Context) bool {
	res := w.res
	if kids, _, err := w.e.conn.Children(w.parent); err == nil {
		res.zkChildren = len(kids)
	}
	if n, err := totalWatches(ctx, w.e.zkAddr); err == nil {
		res.zkWatches = n
	}
	return res.zkChildren >= res.n+1 && res.zkWatches >= res.n
}

// measureWith measures the gateway's memory with the waiters parked.
func (w *waiterRun) measureWith(ctx context.Context) (err error) {
	progress("%d waiters parked in %s; measuring memory", w.res.reached, w.res.arrival.Round(time.Millisecond))
	select { // let the last arrivals finish their bookkeeping
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(w.settle(2 * time.Second)):
	}
	if w.res.with, err = w.g.settledMemory(ctx, 5, w.settle(400*time.Millisecond)); err != nil {
		return err
	}
	if m, err := w.g.memory(ctx); err == nil && int(m.waiters) < w.res.reached {
		progress("waiters left while memory was measured: the gateway counts %d", int(m.waiters))
	}
	return nil
}

// grantAll releases the holder, so that every waiter is granted in turn and
// releases, and waits for them all (or their wait and 3 minutes); it
// returns when the holder released.
func (w *waiterRun) grantAll(ctx context.Context) (time.Time, error) {
	w.released.Store(true)
	w.res.excl.leave()
	t0 := time.Now()
	st, b, herr := w.setup.do(ctx, http.MethodPost, w.release, leaseBody(w.leases[0]))
	if err := expect("holder release", st, b, herr, http.StatusNoContent); err != nil {
		return t0, err
	}
	done := doneCh(&w.wg)
	limit := time.NewTimer(w.e.cfg.waiterWait + 3*time.Minute)
	defer limit.Stop()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return t0, nil
		case <-ctx.Done():
			return t0, ctx.Err()
		case <-limit.C:
			return t0, nil
		case <-tick.C:
			progress("waiters answered: %d of %d (failed: %d)", w.answered.Load(), w.res.n, w.finished.Load()-w.answered.Load())
		}
	}
}

// tally counts the waiters' answers; t0 is when the holder released.
func (w *waiterRun) tally(t0 time.Time) {
	res := w.res
	res.chain = time.Since(t0)
	res.early = int(w.early.Load())
	for i := range w.outs {
		o := &w.outs[i]
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
}

// leftover reads the gateway's waiter gauge and the lock nodes left.
func (w *waiterRun) leftover(ctx context.Context) error {
	if m, merr := w.g.memory(ctx); merr == nil {
		w.res.waitersAfter = m.waiters
	}
	if kids, _, kerr := w.e.conn.Children(w.parent); kerr == nil {
		w.res.leftover = len(kids)
	} else if !errors.Is(kerr, zk.ErrNoNode) {
		return kerr
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
