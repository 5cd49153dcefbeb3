//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// churnPhase is section 9: names used once, then many locks held.
var churnPhase = phase{
	name: "churn",
	flags: func(fs *flag.FlagSet, c *config) {
		fs.IntVar(&c.churnWorkers, "churn-workers", 32, "churn test: workers, each using a fresh name of each kind in turn")
		fs.DurationVar(&c.churnDur, "churn-duration", time.Minute, "churn test: how long the workers run")
		fs.DurationVar(&c.churnWait, "churn-wait", 50*time.Millisecond, "churn test: ?wait= of the wait in vain and of the blocking read of each name")
		fs.DurationVar(&c.churnSettle, "churn-settle", 4*time.Minute, "churn test: how long after the workers the gateway may take to be back where it started (its watches linger 30 s after their last use; Go gives freed memory back within about 2 minutes)")
		fs.IntVar(&c.heldLocks, "held-locks", 10000, "churn test: locks held (100 per lease) while the lists and the dashboard are timed")
	},
	quick: map[string]func(c *config){
		"churn-duration": func(c *config) { c.churnDur = 10 * time.Second },
		"held-locks":     func(c *config) { c.heldLocks = 2000 },
	},
	check: func(c *config) error {
		return firstError(positive(c.churnWorkers, c.heldLocks),
			durations(c.churnDur >= 100*time.Millisecond && c.churnWait >= time.Millisecond && c.churnSettle >= 0))
	},
	announce: func(c config) string {
		return fmt.Sprintf("9. churn: %d workers on fresh names for %s, then %d locks held", c.churnWorkers, c.churnDur, c.heldLocks)
	},
	what: "churn",
	run:  storeIn(func(r *report) *churnResult { return &r.churn }, churn),
}

// The targets of the churn phase: what names used once leave behind, and
// how lists answer with many names held.
const (
	targetChurnWatches    = 10       // ZooKeeper watches above the start, once the phase has settled
	targetChurnGoroutines = 20       // gateway goroutines above the start, once settled
	targetChurnRSS        = 16 << 20 // the gateway's VmRSS above the start, once settled
	targetListPage        = 50 * time.Millisecond
	targetDashPage        = 200 * time.Millisecond
	targetDashPageBytes   = 100 * 1024
)

// churnKinds are the kinds of name the workers use in turn.
var churnKinds = []string{"lock", "rwlock", "semaphore", "election", "queue", "barrier"}

// churnSample is the gateway's state at one moment of the phase.
type churnSample struct {
	at         time.Duration // since the workers started
	zkWatches  int           // every session's, ZooKeeper's zk_watch_count
	gwWatches  float64       // the gateway's zkgate_zk_watches (-1: a gateway without it)
	watched    float64       // zkgate_watched_paths
	goroutines uint64
	rss        uint64 // bytes
	heap       uint64 // go_memstats_heap_inuse_bytes
}

type churnResult struct {
	workers  int
	names    int64            // distinct names used, every kind
	cycles   map[string]int64 // by kind
	failures int64            // answers that were not the expected ones
	firstErr string
	took     time.Duration
	base     churnSample
	samples  []churnSample // during the workers, then while it settles
	end      int           // samples[end] is the first after the workers stopped
	settled  time.Duration // after the workers stopped, until watches and goroutines are back within the targets (0: never)
	rssBack  time.Duration // ... until VmRSS is too (0: never)

	held heldResult
}

// peak is the sample with the most ZooKeeper watches during the workers.
func (r churnResult) peak() churnSample {
	var p churnSample
	for _, s := range r.samples[:r.end] {
		if s.zkWatches >= p.zkWatches {
			p = s
		}
	}
	return p
}

// sampleAt is the first sample taken at least d after the workers stopped.
func (r churnResult) sampleAt(d time.Duration) churnSample {
	for _, s := range r.samples[r.end:] {
		if s.at >= r.took+d-time.Second/2 {
			return s
		}
	}
	return r.last()
}

// last is the last sample taken.
func (r churnResult) last() churnSample {
	if len(r.samples) == 0 {
		return r.base
	}
	return r.samples[len(r.samples)-1]
}

// flat reports whether s is back within the targets of the start: its
// watches and goroutines, and its VmRSS.
func (r churnResult) flat(s churnSample) (counts, rss bool) {
	return s.zkWatches <= r.base.zkWatches+targetChurnWatches && s.goroutines <= r.base.goroutines+targetChurnGoroutines,
		s.rss <= r.base.rss+targetChurnRSS
}

// churn runs cfg.churnWorkers workers, each using a fresh name at every
// cycle, of each kind in turn: hold it, have a second lease wait for it in
// vain, read it with a blocking read, let it go. The gateway's ZooKeeper
// watches (ZooKeeper's count and its own), goroutines, watched paths and
// RSS are sampled every second during the workers and after them, until
// they are back within the targets of where they started or
// cfg.churnSettle has passed (VmRSS comes back last: the Go runtime gives
// freed memory back to the system after its next collection, within two
// minutes of an idle gateway). Then it holds cfg.heldLocks locks and times
// the lists and the dashboard (see held).
func churn(ctx context.Context, e *env) (res churnResult, err error) {
	n := e.cfg.churnWorkers
	res.workers, res.cycles = n, map[string]int64{}
	k := &churnRun{e: e, res: &res}
	res.base, err = k.sample(ctx, 0)
	if err != nil {
		return res, err
	}
	c := newClient(e.gw.url, 2*n, time.Minute)
	leases, err := c.createLeases(ctx, 2*n, 8, 10*time.Minute, "bench-churn")
	if err != nil {
		c.close()
		return res, err
	}
	k.start = time.Now()
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		k.sampleUntil(ctx, stop)
	}()
	k.work(ctx, c, leases)
	close(stop)
	<-sampled
	res.end = len(res.samples)
	// The bench's own connections are closed first: each open one is a
	// goroutine of the gateway's.
	if err := c.revokeLeases(ctx, leases, 8); err != nil {
		c.close()
		return res, err
	}
	c.close()
	progress("9. %s names used by %d workers in %s; waiting up to %s for the gateway to settle", thousands(res.names), n, res.took.Round(time.Second), e.cfg.churnSettle)
	k.settle(ctx)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	res.held, err = held(ctx, e)
	return res, err
}

// churnRun is the churn phase's workers and samples.
type churnRun struct {
	e     *env
	res   *churnResult
	start time.Time // the workers'
}

// sampleUntil samples the gateway every second until stop.
func (k *churnRun) sampleUntil(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s, err := k.sample(ctx, time.Since(k.start)); err == nil {
			k.res.samples = append(k.res.samples, s)
		}
	}
}

// work runs the workers, two leases each, for cfg.churnDur from the start,
// and counts their names, cycles and failures.
func (k *churnRun) work(ctx context.Context, c *client, leases []string) {
	e, res, start := k.e, k.res, k.start
	var names, failures atomic.Int64
	var mu sync.Mutex
	var firstErr error
	deadline := start.Add(e.cfg.churnDur)
	var wg sync.WaitGroup
	for w := range e.cfg.churnWorkers {
		a, b := leases[2*w], leases[2*w+1]
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				kind := churnKinds[i%len(churnKinds)]
				names.Add(1)
				err := useOnce(ctx, c, e.cfg.churnWait, kind, fmt.Sprintf("bench-churn-%d-%d", w, i), a, b)
				if err != nil {
					failures.Add(1)
				}
				mu.Lock()
				switch {
				case err == nil:
					res.cycles[kind]++
				case firstErr == nil:
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.took = time.Since(start)
	res.names, res.failures = names.Load(), failures.Load()
	if firstErr != nil {
		res.firstErr = firstErr.Error()
	}
}

// settle samples the gateway every second after the workers, until it is
// back within the targets of the start (watches and goroutines, then
// VmRSS) or cfg.churnSettle has passed.
func (k *churnRun) settle(ctx context.Context) {
	e, res, start := k.e, k.res, k.start
	stopped := time.Now()
	for time.Since(stopped) < e.cfg.churnSettle && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		s, err := k.sample(ctx, time.Since(start))
		if err != nil {
			continue
		}
		res.samples = append(res.samples, s)
		counts, rss := res.flat(s)
		if counts && res.settled == 0 {
			res.settled = time.Since(stopped)
		}
		if rss && res.rssBack == 0 {
			res.rssBack = time.Since(stopped)
		}
		if res.settled > 0 && res.rssBack > 0 {
			return
		}
	}
}

// sample reads the gateway's state.
func (k *churnRun) sample(ctx context.Context, at time.Duration) (churnSample, error) {
	e := k.e
	s := churnSample{at: at, gwWatches: -1}
	mt, err := mntr(ctx, e.zkAddr)
	if err != nil {
		return s, err
	}
	s.zkWatches = int(mt["zk_watch_count"])
	ms, err := e.gw.scrape(ctx)
	if err != nil {
		return s, err
	}
	if v, ok := ms["zkgate_zk_watches"]; ok {
		s.gwWatches = v
	}
	s.watched, s.goroutines, s.heap = ms["zkgate_watched_paths"], uint64(ms["go_goroutines"]), uint64(ms["go_memstats_heap_inuse_bytes"])
	s.rss, _ = procStatusKB(e.gw.pid(), "VmRSS")
	return s, nil
}

// useOnce is one cycle on a fresh name of kind: a holds it, b waits for it
// in vain (churnWait), a blocking read waits as long for a change, and
// a lets it go.
func useOnce(ctx context.Context, c *client, churnWait time.Duration, kind, name, a, b string) error {
	wait := "?wait=" + churnWait.String()
	step := func(what, method, path string, body []byte, want ...int) ([]byte, http.Header, error) {
		st, b, h, err := c.exchange(ctx, method, path, "application/json", body)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", kind, what, err)
		}
		for _, w := range want {
			if st == w {
				return b, h, nil
			}
		}
		return nil, nil, fmt.Errorf("%s %s: status %d, want %v: %s", kind, what, st, want, truncate(b, 200))
	}
	read := func(path string) error {
		_, h, err := step("read", http.MethodGet, path, nil, http.StatusOK)
		if err != nil {
			return err
		}
		_, _, err = step("blocking read", http.MethodGet, path+"?index="+h.Get("X-Zkgate-Index")+"&wait="+churnWait.String(), nil, http.StatusOK)
		return err
	}
	lease := func(id string, extra string) []byte { return []byte(`{"lease":"` + id + `"` + extra + `}`) }
	var errs []error
	do := func(_ []byte, _ http.Header, err error) { errs = append(errs, err) }
	switch kind {
	case "lock", "rwlock":
		mode, other := `,"mode":"exclusive"`, `,"mode":"exclusive"`
		if kind == "rwlock" {
			mode, other = `,"mode":"write"`, `,"mode":"read"`
		}
		p := "/v1/locks/" + name
		do(step("acquire", http.MethodPost, p+"/acquire", lease(a, mode), http.StatusOK))
		do(step("wait", http.MethodPost, p+"/acquire"+wait, lease(b, other), http.StatusConflict))
		errs = append(errs, read(p))
		do(step("release", http.MethodPost, p+"/release", lease(a, mode), http.StatusNoContent))
	case "semaphore":
		p := "/v1/semaphores/" + name
		do(step("acquire", http.MethodPost, p+"/acquire", lease(a, `,"limit":1`), http.StatusOK))
		do(step("wait", http.MethodPost, p+"/acquire"+wait, lease(b, `,"limit":1`), http.StatusConflict))
		errs = append(errs, read(p))
		do(step("release", http.MethodPost, p+"/release", lease(a, ""), http.StatusNoContent))
	case "election":
		p := "/v1/elections/" + name
		do(step("campaign", http.MethodPost, p+"/campaign", lease(a, `,"value":"a"`), http.StatusOK))
		do(step("wait", http.MethodPost, p+"/campaign"+wait, lease(b, `,"value":"b"`), http.StatusAccepted))
		errs = append(errs, read(p))
		do(step("resign", http.MethodPost, p+"/resign", lease(a, ""), http.StatusNoContent))
		do(step("resign", http.MethodPost, p+"/resign", lease(b, ""), http.StatusNoContent))
	case "queue":
		p := "/v1/queues/" + name
		do(step("produce", http.MethodPost, p+"/items", []byte("item"), http.StatusCreated))
		do(step("take", http.MethodPost, p+"/take", nil, http.StatusOK))
		do(step("wait", http.MethodPost, p+"/take"+wait, nil, http.StatusNoContent))
		errs = append(errs, read(p))
		do(step("delete", http.MethodDelete, p, nil, http.StatusNoContent))
	case "barrier":
		p := "/v1/barriers/" + name
		do(step("raise", http.MethodPut, p, nil, http.StatusCreated))
		do(step("wait", http.MethodPost, p+"/wait"+wait, nil, http.StatusConflict))
		errs = append(errs, read(p))
		do(step("lower", http.MethodDelete, p, nil, http.StatusNoContent))
	}
	return errors.Join(errs...)
}

// heldResult is the lists and the dashboard timed with many locks held.
type heldResult struct {
	locks, leases  int
	list           summary // GET /v1/locks?limit=100
	listBytes      int
	listItems      int
	paged          bool          // the answer had a next cursor
	allPages       time.Duration // every page, in turn
	pages          int
	listed         int // locks seen over every page
	overview       summary
	overviewBytes  int
	locksPage      summary
	locksPageBytes int
}

// heldSamples is how many times each list or page is timed.
const heldSamples = 30

// held holds cfg.heldLocks locks (cfg.heldLocks/100 leases, each holding
// 100), then times GET /v1/locks?limit=100, walks every page of it, and
// times the dashboard's overview and locks page; then it lets them go.
func held(ctx context.Context, e *env) (res heldResult, err error) {
	n := e.cfg.heldLocks
	res.locks, res.leases = n, max(n/100, 1)
	c := newClient(e.gw.url, 32, time.Minute)
	defer c.close()
	progress("9b. holding %s locks with %d leases", thousands(int64(n)), res.leases)
	leases, err := c.createLeases(ctx, res.leases, 8, 10*time.Minute, "bench-held")
	defer func() {
		if rerr := c.revokeLeases(context.Background(), leases, 8); rerr != nil && err == nil {
			err = rerr
		}
	}()
	if err != nil {
		return res, err
	}
	err = parallel(ctx, n, 32, func(i int) error {
		st, b, err := c.do(ctx, http.MethodPost, fmt.Sprintf("/v1/locks/bench-held-%05d/acquire", i), leaseBody(leases[i%len(leases)]))
		return expect("acquire a held lock", st, b, err, http.StatusOK)
	})
	if err != nil {
		return res, err
	}
	var last []byte
	if res.list, res.listBytes, last, err = timedGets(ctx, c, "/v1/locks?limit=100"); err != nil {
		return res, err
	}
	var page locksPage
	if err := json.Unmarshal(last, &page); err != nil {
		return res, fmt.Errorf("GET /v1/locks: %w", err)
	}
	res.listItems, res.paged = len(page.Locks), page.Next != ""
	if err := walkLocks(ctx, c, &res); err != nil {
		return res, err
	}
	if res.overview, res.overviewBytes, _, err = timedGets(ctx, c, "/"); err != nil {
		return res, err
	}
	if res.locksPage, res.locksPageBytes, _, err = timedGets(ctx, c, "/ui/locks"); err != nil {
		return res, err
	}
	return res, nil
}

// locksPage is a page of GET /v1/locks.
type locksPage struct {
	Locks []json.RawMessage `json:"locks"`
	Next  string            `json:"next"`
}

// timedGets times GET path heldSamples times, one at a time, and returns
// the answers' size and the last one.
func timedGets(ctx context.Context, c *client, path string) (summary, int, []byte, error) {
	var d dist
	var size int
	var last []byte
	for range heldSamples {
		t0 := time.Now()
		st, b, err := c.do(ctx, http.MethodGet, path, nil)
		if err := expect("GET "+path, st, b, err, http.StatusOK); err != nil {
			return summary{}, 0, nil, err
		}
		d = append(d, time.Since(t0))
		size, last = len(b), b
	}
	return summarize(d), size, last, nil
}

// walkLocks walks every page of GET /v1/locks?limit=100, following next,
// and counts the pages and the locks on them into res.
func walkLocks(ctx context.Context, c *client, res *heldResult) error {
	t0 := time.Now()
	var page locksPage
	for after := ""; ; {
		path := "/v1/locks?limit=100"
		if after != "" {
			path += "&after=" + after
		}
		st, b, err := c.do(ctx, http.MethodGet, path, nil)
		if err := expect("GET "+path, st, b, err, http.StatusOK); err != nil {
			return err
		}
		page.Next = ""
		if err := json.Unmarshal(b, &page); err != nil {
			return fmt.Errorf("GET %s: %w", path, err)
		}
		res.pages++
		res.listed += len(page.Locks)
		if page.Next == "" || res.pages > res.locks {
			break
		}
		after = page.Next
	}
	res.allPages = time.Since(t0)
	return nil
}

// printChurn writes section 8 and adds its summary rows.
func (r *report) printChurn(rw *reportWriter) {
	p := rw.p
	k := r.churn
	if k.workers == 0 {
		return
	}
	c := r.cfg
	rw.section(fmt.Sprintf("## 9. Names used once: %s names, then %s locks held", thousands(k.names), thousands(int64(k.held.locks))),
		"%d workers, each with two leases of its own, use a fresh name at every cycle for %s, of each kind in turn (%s): the first lease holds it (acquire, campaign, produce then take, raise), the second waits for it in vain (`?wait=%s`: a 409, a 202, a 204), a blocking read waits as long for a change (`GET ...?index=N&wait=%s`), and the first lets it go (release, resign both, delete the queue, lower). Every second, during the workers and after them (for up to %s, until the gateway is back within the targets): ZooKeeper's `zk_watch_count` (every session's watches; only the gateway's session has any), the gateway's own `zkgate_zk_watches` (go-zookeeper's table), `zkgate_watched_paths`, `go_goroutines` and VmRSS. The bench's connections are closed before the settling starts (each open one is a goroutine of the gateway's).",
		k.workers, c.churnDur, strings.Join(churnKinds, ", "), c.churnWait, c.churnWait, c.churnSettle)
	var kinds []string
	for _, kind := range churnKinds {
		kinds = append(kinds, fmt.Sprintf("%s %s", thousands(k.cycles[kind]), kind))
	}
	p("Cycles: %s (%.0f names/s); %d failed%s.", strings.Join(kinds, ", "), float64(k.names)/k.took.Seconds(), k.failures, firstErrNote(k.firstErr))
	p("")
	p("| moment | ZooKeeper watches | gateway's watches | watched paths | goroutines | heap in use | VmRSS |")
	p("|---|---:|---:|---:|---:|---:|---:|")
	row := func(name string, s churnSample) {
		gw := "—"
		if s.gwWatches >= 0 {
			gw = thousands(int64(s.gwWatches))
		}
		p("| %s | %s | %s | %.0f | %s | %s | %s |", name, thousands(int64(s.zkWatches)), gw, s.watched, thousands(int64(s.goroutines)), mib(s.heap), mib(s.rss))
	}
	row("before", k.base)
	if k.end > 0 {
		row(fmt.Sprintf("peak during (at %s)", k.peak().at.Round(time.Second)), k.peak())
		row(fmt.Sprintf("end of the workers (%s)", k.samples[k.end-1].at.Round(time.Second)), k.samples[k.end-1])
	}
	settled := "not within " + c.churnSettle.String()
	if k.settled > 0 {
		settled = k.settled.Round(time.Second).String() + " after the workers"
		row("watches and goroutines back ("+settled+")", k.sampleAt(k.settled))
	}
	rssBack := "not within " + c.churnSettle.String()
	if k.rssBack > 0 {
		rssBack = k.rssBack.Round(time.Second).String() + " after the workers"
	}
	row("last sample (VmRSS back: "+rssBack+")", k.last())
	p("")
	last := k.last()
	ok := k.settled > 0 && k.rssBack > 0 && k.failures == 0
	rw.add([4]string{fmt.Sprintf("9. %s names used once: the gateway's ZooKeeper watches, goroutines and VmRSS after", thousands(k.names)),
		fmt.Sprintf("%+d watches, %+d goroutines (%s), %+.1f MiB (%s); %d failed cycles", last.zkWatches-k.base.zkWatches,
			int64(last.goroutines)-int64(k.base.goroutines), settled, (float64(last.rss)-float64(k.base.rss))/(1<<20), rssBack, k.failures),
		fmt.Sprintf("<= +%d, <= +%d, <= +%s", targetChurnWatches, targetChurnGoroutines, mib(targetChurnRSS)), verdict(ok)})

	h := k.held
	if h.locks == 0 {
		return
	}
	rw.section(fmt.Sprintf("### 9b. Lists with %s locks held", thousands(int64(h.locks))),
		"%d leases hold %s locks (`bench-held-NNNNN`, 100 each). Each request is timed %d times, one at a time, on a keep-alive connection: `GET /v1/locks?limit=100`, the dashboard's overview `GET /` and its locks page `GET /ui/locks`. Then every page of `/v1/locks?limit=100` is walked, following `next`.", h.leases, thousands(int64(h.locks)), heldSamples)
	p("| request | p50 | p99 | max | size |")
	p("|---|---:|---:|---:|---:|")
	p("| `GET /v1/locks?limit=100` (%d locks in the answer, next cursor: %t) | %s | %s | %s | %s |", h.listItems, h.paged, msf(h.list.p50), msf(h.list.p99), msf(h.list.worst), kib(float64(h.listBytes)))
	p("| `GET /` | %s | %s | %s | %s |", msf(h.overview.p50), msf(h.overview.p99), msf(h.overview.worst), kib(float64(h.overviewBytes)))
	p("| `GET /ui/locks` | %s | %s | %s | %s |", msf(h.locksPage.p50), msf(h.locksPage.p99), msf(h.locksPage.worst), kib(float64(h.locksPageBytes)))
	p("")
	p("Every page of the list: %d pages, %s locks, %s in all.", h.pages, thousands(int64(h.listed)), h.allPages.Round(time.Millisecond))
	p("")
	rw.add(
		[4]string{fmt.Sprintf("9b. `GET /v1/locks?limit=100` with %s locks held, p50", thousands(int64(h.locks))), fmt.Sprintf("%s (%s, %d locks)", msf(h.list.p50), kib(float64(h.listBytes)), h.listItems), "< " + msf(targetListPage), verdict(h.list.p50 < targetListPage && h.paged)},
		[4]string{"9b. dashboard `GET /`, p50", fmt.Sprintf("%s (%s)", msf(h.overview.p50), kib(float64(h.overviewBytes))), "< " + msf(targetDashPage), verdict(h.overview.p50 < targetDashPage)},
		[4]string{"9b. dashboard `GET /ui/locks`, p50", fmt.Sprintf("%s (%s)", msf(h.locksPage.p50), kib(float64(h.locksPageBytes))), fmt.Sprintf("< %s, < %s", msf(targetDashPage), kib(targetDashPageBytes)),
			verdict(h.locksPage.p50 < targetDashPage && h.locksPageBytes < targetDashPageBytes)})
}

func firstErrNote(s string) string {
	if s == "" {
		return ""
	}
	return " (the first: " + strconv.Quote(s) + ")"
}
