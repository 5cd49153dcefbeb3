//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/zkgate/zkgate/kinds"
)

// dashboardFanoutPhase is section 7: one change reaching every dashboard
// client.
var dashboardFanoutPhase = phase{
	name: "dashboard",
	flags: func(fs *flag.FlagSet, c *config) {
		fs.IntVar(&c.dashClients, "dashboard-clients", 3000, "dashboard fan-out test: WebSocket clients on /ws?page=locks")
		fs.IntVar(&c.dashChanges, "dashboard-changes", 5, "dashboard fan-out test: changes (a lock acquired, then released), each timed until every client has seen it")
		fs.IntVar(&c.dashRamp, "dashboard-ramp", 64, "dashboard fan-out test: WebSocket clients connecting at once")
	},
	quick: map[string]func(c *config){"dashboard-clients": func(c *config) { c.dashClients = 300 }},
	check: func(c *config) error { return positive(c.dashClients, c.dashChanges, c.dashRamp) },
	announce: func(c config) string {
		return fmt.Sprintf("7. dashboard fan-out: %d WebSocket clients, %d changes", c.dashClients, c.dashChanges)
	},
	what: "dashboard fan-out",
	run:  storeIn(func(r *report) *dashResult { return &r.dash }, dashboardFanout),
}

// dashPage is the dashboard page the clients watch: the locks'.
var dashPage = kinds.Locks.Name

const (
	dashLockPrefix = "bench-fan-"
	dashWait       = 30 * time.Second // per change, for every client to see it
)

// fanChange is one change and when each client saw it.
type fanChange struct {
	what     string
	arrivals summary // just before the change was sent .. a client read the message showing it
	first    time.Duration
	missing  int // clients that did not see it within dashWait
}

type dashResult struct {
	clients       int
	connected     int
	connectTook   time.Duration // dial of the first .. every snapshot read
	snapshotBytes int
	gaugeClients  float64 // the gateway's zkgate_dashboard_clients then
	changes       []fanChange
	lost          int // clients whose connection ended during the test
	rssBefore     uint64
	rssWith       uint64
}

// worst is the change whose last client came last.
func (r dashResult) worst() (fanChange, bool) {
	var w fanChange
	for _, c := range r.changes {
		if c.missing > w.missing || (c.missing == w.missing && c.arrivals.worst >= w.arrivals.worst) {
			w = c
		}
	}
	return w, len(r.changes) > 0
}

// fanTarget is the change the clients are looking for.
type fanTarget struct {
	idx    int
	needle []byte
	start  time.Time
	seen   []atomic.Int64 // per client, nanoseconds; written once by that client
	left   atomic.Int64
	all    chan struct{}
}

// fanout is the dashboard clients and what they have seen.
type fanout struct {
	res       *dashResult
	wsURL     string
	hc        *http.Client
	target    atomic.Pointer[fanTarget]
	snapshots sync.WaitGroup
	readers   sync.WaitGroup
	lost      atomic.Int64
	sizeOnce  sync.Once
	conns     []*websocket.Conn
	dialErr   chan error
}

// dashboardFanout connects cfg.dashClients WebSocket clients to the
// dashboard's locks page, waits for every snapshot, then times how long one
// change (a lock acquired, then released, through the gateway) takes to
// reach every client.
func dashboardFanout(ctx context.Context, e *env) (res dashResult, err error) {
	n := e.cfg.dashClients
	res.clients = n
	if m, merr := e.gw.memory(ctx); merr == nil {
		res.rssBefore = m.rss
	}
	f := &fanout{res: &res, wsURL: "ws" + strings.TrimPrefix(e.gw.url, "http") + "/ws?page=" + dashPage,
		hc: &http.Client{Transport: newTransport(1)}, conns: make([]*websocket.Conn, n), dialErr: make(chan error, 1)}
	cctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel() // ends every Read, and so every reader
		f.readers.Wait()
		for _, c := range f.conns {
			if c != nil {
				c.CloseNow()
			}
		}
	}()
	if err := f.connect(ctx, cctx, e.cfg.dashRamp); err != nil {
		return res, err
	}
	progress("%d dashboard clients connected with their snapshot in %s", res.connected, res.connectTook.Round(time.Millisecond))
	if m, merr := e.gw.scrape(ctx); merr == nil {
		res.gaugeClients = m["zkgate_dashboard_clients"]
	}
	if m, merr := e.gw.memory(ctx); merr == nil {
		res.rssWith = m.rss
	}

	c, lease, done, err := e.leasedClient(ctx, "bench-dashboard")
	if err != nil {
		return res, err
	}
	defer done()
	body := leaseBody(lease)
	for k := 1; k <= e.cfg.dashChanges; k++ {
		name := fmt.Sprintf("%s%d", dashLockPrefix, k)
		if err := f.change(ctx, "acquire "+name, `"id":"lock-`+name+`"`, func() error {
			st, b, err := c.do(ctx, http.MethodPost, "/v1/locks/"+name+"/acquire", body)
			return expect("acquire", st, b, err, http.StatusOK)
		}); err != nil {
			return res, err
		}
		if err := f.change(ctx, "release "+name, `"op":"remove","id":"lock-`+name+`"`, func() error {
			st, b, err := c.do(ctx, http.MethodPost, "/v1/locks/"+name+"/release", body)
			return expect("release", st, b, err, http.StatusNoContent)
		}); err != nil {
			return res, err
		}
	}
	res.lost = int(f.lost.Load())
	return res, nil
}

// connect dials every client, ramp at once, and waits until each has read
// its snapshot (or 5 minutes). The clients read until cctx ends.
func (f *fanout) connect(ctx, cctx context.Context, ramp int) error {
	n := len(f.conns)
	sem := make(chan struct{}, ramp)
	start := time.Now()
	f.snapshots.Add(n)
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		f.readers.Go(func() { f.read(cctx, i, sem) })
	}
	select {
	case <-doneCh(&f.snapshots):
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Minute):
		return errors.New("the dashboard clients did not all get their snapshot within 5m")
	}
	f.res.connectTook = time.Since(start)
	select {
	case err := <-f.dialErr:
		return err
	default:
	}
	for _, c := range f.conns {
		if c != nil {
			f.res.connected++
		}
	}
	return nil
}

// failed reports the first error of the clients' dials or snapshots.
func (f *fanout) failed(err error) {
	select {
	case f.dialErr <- err:
	default:
	}
}

// read is client i: it dials (then frees its place in sem), reads its
// snapshot, then every message, marking when it saw the current target.
func (f *fanout) read(cctx context.Context, i int, sem chan struct{}) {
	snapped := false
	defer func() {
		if !snapped {
			f.snapshots.Done()
		}
	}()
	c, _, err := websocket.Dial(cctx, f.wsURL, &websocket.DialOptions{HTTPClient: f.hc})
	<-sem
	if err != nil {
		f.failed(fmt.Errorf("dial %s: %w", f.wsURL, err))
		return
	}
	f.conns[i] = c
	c.SetReadLimit(64 << 20)
	lastSeen := -1
	for {
		_, data, err := c.Read(cctx)
		if err != nil {
			if cctx.Err() == nil {
				f.lost.Add(1)
			}
			return
		}
		if !snapped {
			if !bytes.HasPrefix(data, []byte(`{"snapshot":true`)) {
				f.failed(fmt.Errorf("the first message is not a snapshot: %s", truncate(data, 200)))
				return
			}
			f.sizeOnce.Do(func() { f.res.snapshotBytes = len(data) })
			snapped = true
			f.snapshots.Done()
			continue
		}
		t := f.target.Load()
		if t == nil || t.idx == lastSeen || !bytes.Contains(data, t.needle) {
			continue
		}
		lastSeen = t.idx
		t.seen[i].Store(int64(time.Since(t.start)))
		if t.left.Add(-1) == 0 {
			close(t.all)
		}
	}
}

// change makes one change with send and times it until every client has
// read a message holding needle (or dashWait).
func (f *fanout) change(ctx context.Context, what, needle string, send func() error) error {
	res := f.res
	t := &fanTarget{idx: len(res.changes), needle: []byte(needle), seen: make([]atomic.Int64, len(f.conns)), all: make(chan struct{})}
	t.left.Store(int64(res.connected))
	// Let the previous change's messages settle first.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(300 * time.Millisecond):
	}
	t.start = time.Now()
	f.target.Store(t)
	if err := send(); err != nil {
		return err
	}
	select {
	case <-t.all:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(dashWait):
	}
	f.target.Store(nil)
	var d dist
	for i := range t.seen {
		if v := t.seen[i].Load(); v > 0 {
			d = append(d, time.Duration(v))
		}
	}
	fc := fanChange{what: what, arrivals: summarize(d), first: d.sorted().pct(0), missing: res.connected - len(d)}
	res.changes = append(res.changes, fc)
	progress("dashboard: %s reached %d of %d clients, the last after %s", what, len(d), res.connected, fc.arrivals.worst.Round(time.Millisecond))
	return nil
}

// printDash writes section 7 and adds its summary rows.
func (r *report) printDash(rw *reportWriter) {
	p := rw.p
	d := r.dash
	if d.clients == 0 {
		return
	}
	rw.section(fmt.Sprintf("## 7. Dashboard fan-out to %s WebSocket clients", thousands(int64(d.clients))),
		"%s clients in this process connect to the gateway's `GET /ws?page=%s` (github.com/coder/websocket, %d dialing at once, each its own TCP connection) and read every message; all had their snapshot (%s each, the first one's size) %s after the first dial (the gateway's `zkgate_dashboard_clients` then: %.0f; its VmRSS went from %s to %s). Then, %d times, the bench acquires a fresh lock (`%sN`) through the gateway and then releases it; each of these changes is timed from just before its request is sent until each client has read a message showing it (for the acquire, a fragment with id `lock-%sN`; for the release, its `remove`). A client's time includes its own read and a substring search of the message, on the same %d CPUs as the gateway and ZooKeeper; the gateway batches changes at most every 50 ms (hubFlushGap).",
		thousands(int64(d.clients)), dashPage, r.cfg.dashRamp, kib(float64(d.snapshotBytes)), d.connectTook.Round(time.Millisecond), d.gaugeClients,
		mib(d.rssBefore), mib(d.rssWith), r.cfg.dashChanges, dashLockPrefix, dashLockPrefix, r.machine.nproc)
	p("| change | clients reached | first client | p50 | p99 | last client | last - first |")
	p("|---|---:|---:|---:|---:|---:|---:|")
	for _, c := range d.changes {
		p("| %s | %s / %s | %s | %s | %s | %s | %s |", c.what, thousands(int64(c.arrivals.n)), thousands(int64(d.connected)), msf(c.first),
			msf(c.arrivals.p50), msf(c.arrivals.p99), msf(c.arrivals.worst), msf(c.arrivals.worst-c.first))
	}
	p("")
	p("The first client's time is mostly the gateway's: the request, ZooKeeper's watch, the hub's refresh and render; last - first is the spread of the fan-out itself (writes to every connection, and the clients' reads, on the same CPUs).")
	p("")
	p("Connections lost during the test: %d. All clients were closed at the end.", d.lost)
	p("")
	if w, ok := d.worst(); ok {
		res := fmt.Sprintf("%s (worst of %d changes: %s; p50 %s, p99 %s; %d of %d clients missed it)",
			msf(w.arrivals.worst), len(d.changes), w.what, msf(w.arrivals.p50), msf(w.arrivals.p99), w.missing, d.connected)
		ok := w.missing == 0 && d.connected == d.clients && w.arrivals.worst < targetFanoutLast
		rw.add([4]string{fmt.Sprintf("7. dashboard: one change to %s WebSocket clients, last client", thousands(int64(d.clients))), res,
			fmt.Sprintf("< %s, all", msf(targetFanoutLast)), verdict(ok)})
	}
}
