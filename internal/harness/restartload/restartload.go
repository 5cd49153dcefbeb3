// Package restartload puts the load of a rolling restart on the gateways of
// one root, and checks that the restarts cost nothing. The load: `zkgate
// lock` jobs (the CLI binary, each running a command for a while under a
// lock, some locks shared), and Go clients holding locks, read-write locks,
// semaphore slots, leaderships, double barriers' memberships and queue
// claims, and waiting on barriers, all spread over the gateways. Meanwhile the
// caller's Restart stops each gateway in turn (SIGTERM: it hands its leases
// over) and starts it again on the same address. What must hold: every job
// exits 0; no lease ends (no 410 is answered, no client-side loss); no two
// holders of an exclusive hold overlap (a fenced register of the tokens,
// and a wall-clock check of each holder's start and end), nor more than a
// semaphore's limit, nor a writer and another holder of a read-write lock;
// no barrier's waiter is let through before the barrier is lowered, no
// double barrier's member before it is ready; every hold keeps the token it was granted (asked of
// the gateways after each restart); every queue item is acked once. And
// it measures how long each request waited on a handover.
//
// server/rollingrestart_test.go runs it small; zkgate-bench's restart
// phase runs it at full size.
package restartload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkgate/zkgate/client"
)

// Config is one run.
type Config struct {
	// URLs are the gateways' base URLs, the same across their restarts
	// (or a load balancer's, in front of gateways whose addresses change).
	URLs []string
	// Restart stops gateway i (SIGTERM), waits for its exit and starts it
	// again (on the same address, or behind the load balancer of URLs),
	// returning once it is ready. Gateways is how many there are (i runs
	// from 0 to Gateways-1; default len(URLs)).
	Restart  func(ctx context.Context, i int) error
	Gateways int
	// Token is the bearer token of every client and job (none when empty).
	Token string
	// Rounds is how many times every gateway is restarted in turn, and Gap
	// the pause after each restart.
	Rounds int
	Gap    time.Duration

	// Binary is the zkgate binary the Jobs `zkgate lock` jobs run; each
	// runs its command for JobHold, under one of JobLocks locks (so jobs
	// share a lock when JobLocks < Jobs), waiting up to JobWait for it (the
	// gateways' --max-wait at most), with JobArgs (--kill-grace...).
	Binary   string
	Jobs     int
	JobLocks int
	JobHold  time.Duration
	JobWait  time.Duration
	JobArgs  []string

	// Holders is the number of Go-client holders of each kind (locks, two
	// to a lock; readers and writers of one read-write lock, every other
	// one a writer; slots of a semaphore of limit 2; leaders of one
	// election; members of one double barrier of count Holders; waiters on
	// a barrier of their own, which they raise and lower; consumers of one
	// queue), each holding for Hold at a time, on leases of TTL.
	Holders int
	Hold    time.Duration
	TTL     time.Duration

	// Register, when set, is also told of every exclusive hold (locks and
	// leaderships) as it starts and ends: a test's fenced register.
	Register interface {
		Enter(lock, who string, token int64)
		Exit(lock, who string)
	}
	// Dir is where the jobs write their records (a temp dir of the
	// caller's); Log gets progress lines (nil: none).
	Dir string
	Log io.Writer
}

// Report is what a run saw.
type Report struct {
	Jobs, JobsOK  int
	JobFailures   []string
	LeasesEnded   []string // a 410 answered, or a lease lost by its client
	Overlaps      []string // two holders at once, a stale token, an item acked twice
	TokensChanged []string
	TokenChecks   int // holds whose token was asked for after a restart
	Grants        int // holds granted (Go clients) and jobs that ran
	Items         int // queue items produced
	Restarts      int
	// Waits is how long each request that met a handover or a restart (a
	// 503, or no connection) waited: from the first such answer to the
	// answer that got through (to the sending of the attempt that got
	// through, for a wait in line: its time in line is not the handover's).
	Waits   []time.Duration
	Slowest string // the request that waited longest
	Elapsed time.Duration
}

// OK says that the restarts cost nothing.
func (r *Report) OK() bool {
	return r.JobsOK == r.Jobs && len(r.JobFailures)+len(r.LeasesEnded)+len(r.Overlaps)+len(r.TokensChanged) == 0
}

// Wait is the q-quantile of Waits (0 without any).
func (r *Report) Wait(q float64) time.Duration {
	if len(r.Waits) == 0 {
		return 0
	}
	w := slices.Clone(r.Waits)
	slices.Sort(w)
	return w[min(int(q*float64(len(w))), len(w)-1)]
}

// Summary is the report in one paragraph.
func (r *Report) Summary() string {
	return fmt.Sprintf("%d restarts in %s: jobs ok %d/%d, leases ended %d, overlaps %d, tokens changed %d (of %d checked), "+
		"%d grants, %d items; %d requests waited on a handover: p50 %s, p99 %s, max %s (%s)",
		r.Restarts, r.Elapsed.Round(time.Millisecond), r.JobsOK, r.Jobs, len(r.LeasesEnded), len(r.Overlaps),
		len(r.TokensChanged), r.TokenChecks, r.Grants, r.Items, len(r.Waits),
		r.Wait(0.5).Round(time.Millisecond), r.Wait(0.99).Round(time.Millisecond), r.Wait(1).Round(time.Millisecond), r.Slowest)
}

// run is the state of one run.
type run struct {
	cfg Config
	reg *register

	mu      sync.Mutex
	rep     Report
	holds   map[string]*hold // by holder name: what it holds now
	acked   map[string]int   // queue item id -> acks
	claimed map[string]string
}

// hold is what one Go holder holds now; gen counts its holds, so that a
// token check can tell a hold that ended meanwhile from one that changed.
type hold struct {
	lease      *client.Lease
	kind, name string
	token      int64
	gen        int
	held       bool
}

func (r *run) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "restartload: "+format+"\n", args...)
	}
}

func (r *run) add(list *[]string, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*list = append(*list, fmt.Sprintf(format, args...))
}

// Run puts the load on, restarts the gateways and reports. An error means
// the run itself could not be made (a gateway that did not restart, a job
// that did not start); what the restarts cost is in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if len(cfg.URLs) == 0 || cfg.Restart == nil || cfg.Dir == "" || cfg.Jobs > 0 && cfg.Binary == "" {
		return nil, errors.New("restartload: URLs, Restart, Dir and (with jobs) Binary are needed")
	}
	for _, u := range cfg.URLs {
		if _, err := client.New(u); err != nil {
			return nil, err
		}
	}
	cfg.JobLocks = max(cfg.JobLocks, 1)
	if cfg.Gateways == 0 {
		cfg.Gateways = len(cfg.URLs)
	}
	r := &run{cfg: cfg, reg: newRegister(), holds: map[string]*hold{}, acked: map[string]int{}, claimed: map[string]string{}}
	start := time.Now()
	load, stopLoad := context.WithCancel(ctx)
	defer stopLoad()

	jobs, err := r.startJobs(ctx)
	if err != nil {
		return nil, err
	}
	// The restarts begin once every holder has its lease: a new lease is
	// refused by a draining gateway (a load balancer sends it elsewhere),
	// and the waits measured are those of leases that move.
	var wg, leased sync.WaitGroup
	for kind, holder := range map[string]func(context.Context, string, *client.Lease, int) error{
		"lock": r.holdLock, "rwlock": r.holdRW, "semaphore": r.holdSlot, "election": r.lead, "claim": r.consume,
		"barrier": r.waitBarrier, "double-barrier": r.meet,
	} {
		for i := range cfg.Holders {
			wg.Add(1)
			leased.Add(1)
			go func() {
				defer wg.Done()
				r.holder(load, kind, i, holder, leased.Done)
			}()
		}
	}
	leased.Wait()
	if cfg.Holders > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.produce(load)
		}()
	}

	restartErr := r.restarts(ctx, jobs)
	r.waitJobs(ctx, jobs)
	stopLoad()
	wg.Wait()
	if restartErr != nil {
		return nil, restartErr
	}
	r.checkQueue(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rep.Overlaps = append(r.rep.Overlaps, r.reg.violations()...)
	r.rep.Elapsed = time.Since(start)
	rep := r.rep
	return &rep, nil
}

// restarts restarts every gateway in turn, Rounds times, checking the
// holds' tokens after each.
func (r *run) restarts(ctx context.Context, jobs []*job) error {
	for round := range r.cfg.Rounds {
		for i := range r.cfg.Gateways {
			t := time.Now()
			if err := r.cfg.Restart(ctx, i); err != nil {
				return fmt.Errorf("restart gateway %d (round %d): %w", i, round+1, err)
			}
			r.mu.Lock()
			r.rep.Restarts++
			r.mu.Unlock()
			r.logf("round %d: gateway %d restarted in %s", round+1, i, time.Since(t).Round(time.Millisecond))
			r.checkTokens(ctx, jobs)
			if err := pause(ctx, r.cfg.Gap); err != nil {
				return err
			}
		}
	}
	return nil
}

// pause waits for d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// newClient is a client of gateway i whose transport times the requests
// that wait on a handover. Run checked the URLs.
func (r *run) newClient(i int) *client.Client {
	c, _ := client.New(r.cfg.URLs[i%len(r.cfg.URLs)], client.WithHTTPClient(&http.Client{Transport: &timer{run: r, since: map[string]time.Time{}}}),
		client.WithRetryWindow(time.Minute), client.WithConnectRetries(1000), // a restart refuses connections for a while
		client.WithToken(r.cfg.Token))
	return c
}

// holder takes a lease through gateway i (then calls leased) and holds
// kind with it until ctx ends, then revokes it; a lease that ends on its
// own is reported.
func (r *run) holder(ctx context.Context, kind string, i int, holdOnce func(context.Context, string, *client.Lease, int) error, leased func()) {
	who := fmt.Sprintf("%s-holder-%d", kind, i)
	c := r.newClient(i)
	lease, err := c.Grant(ctx, r.cfg.TTL, who)
	leased()
	if err != nil {
		if ctx.Err() == nil {
			r.add(&r.rep.LeasesEnded, "%s: no lease: %v", who, err)
		}
		return
	}
	r.mu.Lock()
	r.holds[who] = &hold{lease: lease, kind: kind}
	r.mu.Unlock()
	for ctx.Err() == nil && lease.Err() == nil {
		if err := holdOnce(ctx, who, lease, i); err != nil && ctx.Err() == nil {
			r.add(&r.rep.LeasesEnded, "%s: %v", who, err)
			break
		}
	}
	if err := lease.Err(); err != nil {
		r.add(&r.rep.LeasesEnded, "%s: lease %s lost: %v", who, lease.ID(), err)
	}
	rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := lease.Revoke(rctx); err != nil {
		r.add(&r.rep.LeasesEnded, "%s: revoke: %v", who, err)
	}
}

// granted records who's grant of kind name with token; released its end.
func (r *run) granted(who, kind, name string, token int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.holds[who]
	h.kind, h.name, h.token, h.held = kind, name, token, true
	h.gen++
	r.rep.Grants++
}

func (r *run) released(who string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holds[who].held = false
	r.holds[who].gen++
}

// tokenless are the kinds whose grants have no token to check.
var tokenless = map[string]bool{"claim": true, "double-barrier": true}

// work is the holder's time with what it holds: Hold, or until ctx ends.
func (r *run) work(ctx context.Context) { _ = pause(ctx, r.cfg.Hold) }

// release runs fn once ctx may have ended: a release is always sent.
func release(fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return fn(ctx)
}

// waitLong is the wait of a holder's acquire: a stop ends it sooner.
const waitLong = time.Minute

func (r *run) holdLock(ctx context.Context, who string, lease *client.Lease, i int) error {
	name := fmt.Sprintf("go-lock-%d", i/2)
	g, err := lease.Lock(ctx, name, client.Exclusive, waitLong)
	if errors.Is(err, client.ErrTimeout) {
		return nil
	}
	if err != nil {
		return err
	}
	return r.holdFor(ctx, who, "lock", name, g.Token, 1, 1, g.Release)
}

// holdRW holds the read-write lock: every other holder (the even ones) a
// writer, whose weight is the lock's limit (it excludes every other
// holder), the others readers of weight 1.
func (r *run) holdRW(ctx context.Context, who string, lease *client.Lease, i int) error {
	const name = "go-rwlock"
	limit := r.cfg.Holders + 1
	mode, weight := client.Read, 1
	if i%2 == 0 {
		mode, weight = client.Write, limit
	}
	g, err := lease.Lock(ctx, name, mode, waitLong)
	if errors.Is(err, client.ErrTimeout) {
		return nil
	}
	if err != nil {
		return err
	}
	return r.holdFor(ctx, who, "lock", name, g.Token, limit, weight, g.Release)
}

func (r *run) holdSlot(ctx context.Context, who string, lease *client.Lease, _ int) error {
	const name, limit = "go-slots", 2
	g, err := lease.AcquireSemaphore(ctx, name, limit, waitLong)
	if errors.Is(err, client.ErrTimeout) {
		return nil
	}
	if err != nil {
		return err
	}
	return r.holdFor(ctx, who, "semaphore", name, g.Token, limit, 1, g.Release)
}

func (r *run) lead(ctx context.Context, who string, lease *client.Lease, _ int) error {
	const name = "go-election"
	c, err := lease.Lead(ctx, name, who, waitLong)
	if err != nil {
		return err
	}
	return r.holdFor(ctx, who, "election", name, c.Token, 1, 1, func(ctx context.Context) error { return lease.Resign(ctx, name) })
}

// waitBarrier raises a barrier of the holder's own, waits on it (through
// the holder's client, as another process would) while it works, then
// lowers it: the wait must end only after the lower, and without error.
func (r *run) waitBarrier(ctx context.Context, who string, lease *client.Lease, i int) error {
	name := fmt.Sprintf("go-barrier-%d", i)
	c := lease.Client()
	if _, err := c.RaiseBarrier(ctx, name); err != nil {
		return fmt.Errorf("raise barrier %s: %w", name, err)
	}
	var lowered atomic.Bool
	type waited struct {
		err   error
		early bool
	}
	done := make(chan waited, 1)
	go func() {
		err := c.WaitBarrier(ctx, name, waitLong)
		done <- waited{err, !lowered.Load()}
	}()
	r.work(ctx)
	lowered.Store(true)
	err := release(func(ctx context.Context) error { return c.LowerBarrier(ctx, name) })
	w := <-done
	switch {
	case ctx.Err() != nil:
	case w.err != nil:
		return fmt.Errorf("wait on barrier %s: %w", name, w.err)
	case w.early:
		r.add(&r.rep.Overlaps, "%s: barrier %s let its waiter through while up", who, name)
	default:
		r.mu.Lock()
		r.rep.Grants++
		r.mu.Unlock()
	}
	return err
}

// meet enters the double barrier with every other holder of its kind,
// works, and leaves: an enter that returns before the barrier is ready
// (count members in) is reported.
func (r *run) meet(ctx context.Context, who string, lease *client.Lease, _ int) error {
	const name = "go-double-barrier"
	st, err := lease.Enter(ctx, name, who, r.cfg.Holders, waitLong)
	if errors.Is(err, client.ErrTimeout) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.Ready {
		r.add(&r.rep.Overlaps, "%s: entered double barrier %s before it was ready: %+v", who, name, *st)
	}
	r.granted(who, "double-barrier", name, 0)
	r.work(ctx)
	r.released(who)
	_, err = lease.Leave(ctx, name, who, waitLong)
	if errors.Is(err, client.ErrTimeout) || ctx.Err() != nil {
		return nil
	}
	return err
}

// holdFor works under a grant of the kind's name (token, one of holders
// whose weights add up to limit at most), then lets it go with let.
func (r *run) holdFor(ctx context.Context, who, kind, name string, token int64, limit, weight int, let func(context.Context) error) error {
	r.granted(who, kind, name, token)
	r.enter(kind+" "+name, who, token, limit, weight)
	r.work(ctx)
	r.exit(kind+" "+name, who)
	r.released(who)
	return release(let)
}

const queueName = "go-queue"

func (r *run) consume(ctx context.Context, who string, lease *client.Lease, _ int) error {
	item, err := lease.Claim(ctx, queueName, 5*time.Second)
	if errors.Is(err, client.ErrEmpty) || errors.Is(err, client.ErrTimeout) || err == nil && item == nil {
		return nil
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	if other, ok := r.claimed[item.ID]; ok {
		r.rep.Overlaps = append(r.rep.Overlaps, fmt.Sprintf("queue item %s claimed by %s while %s held it", item.ID, who, other))
	}
	r.claimed[item.ID] = who
	r.mu.Unlock()
	r.granted(who, "claim", item.ID, 0)
	r.work(ctx)
	r.released(who)
	r.mu.Lock()
	delete(r.claimed, item.ID)
	r.acked[item.ID]++
	if r.acked[item.ID] > 1 {
		r.rep.Overlaps = append(r.rep.Overlaps, fmt.Sprintf("queue item %s acked %d times", item.ID, r.acked[item.ID]))
	}
	r.mu.Unlock()
	return release(item.Ack)
}

// produce keeps the queue fed until ctx ends: an item whenever it holds
// fewer than the consumers. It feeds the load and is not under test: it
// moves to the next gateway on a failure, as a load balancer would, and
// its requests are not timed.
func (r *run) produce(ctx context.Context) {
	clients := make([]*client.Client, len(r.cfg.URLs))
	for i, u := range r.cfg.URLs {
		clients[i], _ = client.New(u, client.WithRetryWindow(0), client.WithToken(r.cfg.Token))
	}
	for n, i := 0, 0; ctx.Err() == nil; {
		c := clients[i%len(clients)]
		st, err := c.QueueState(ctx, queueName, 0)
		if err == nil && st.Length < r.cfg.Holders {
			// Produce is never retried (a repeat could add the item twice):
			// one that fails is tried again, and counted when it answered.
			if _, err = c.Produce(ctx, queueName, []byte(strconv.Itoa(n)), client.DefaultPriority); err == nil {
				n++
				r.mu.Lock()
				r.rep.Items++
				r.mu.Unlock()
				continue
			}
		}
		if err != nil {
			i++
		}
		_ = pause(ctx, r.cfg.Hold/4)
	}
}

// checkQueue checks that every item produced was acked, or is still in
// the queue: none was lost with a claim.
func (r *run) checkQueue(ctx context.Context) {
	if r.cfg.Holders == 0 {
		return
	}
	st, err := r.newClient(0).QueueState(ctx, queueName, 0)
	if err != nil {
		r.add(&r.rep.Overlaps, "the queue's state: %v", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// More than produced is possible (a produce whose answer was lost is
	// not counted); fewer is an item lost with a claim.
	if len(r.acked)+st.Length < r.rep.Items {
		r.rep.Overlaps = append(r.rep.Overlaps, fmt.Sprintf("queue: %d items produced, %d acked and %d left", r.rep.Items, len(r.acked), st.Length))
	}
}

// enter and exit record an exclusive (weight the limit) or shared hold's
// span, in the register and (exclusive ones) in the caller's.
func (r *run) enter(what, who string, token int64, limit, weight int) {
	r.reg.enter(what, who, token, limit, weight, time.Now())
	if r.cfg.Register != nil && weight == limit {
		r.cfg.Register.Enter(what, who, token)
	}
}

func (r *run) exit(what, who string) {
	if r.cfg.Register != nil {
		r.cfg.Register.Exit(what, who)
	}
	r.reg.exit(what, who, time.Now())
}

// checkTokens asks the gateways, through each holder's lease, for the
// token of what it holds, and compares it with the one it was granted.
func (r *run) checkTokens(ctx context.Context, jobs []*job) {
	r.mu.Lock()
	type snap struct {
		who string
		h   hold
	}
	var holds []snap
	for who, h := range r.holds {
		if h.held && !tokenless[h.kind] {
			holds = append(holds, snap{who, *h})
		}
	}
	r.mu.Unlock()
	for _, s := range holds {
		info, err := s.h.lease.Info(ctx)
		r.mu.Lock()
		same := r.holds[s.who].gen == s.h.gen
		r.mu.Unlock()
		if !same {
			continue // released meanwhile
		}
		if err != nil {
			r.add(&r.rep.TokensChanged, "%s: its lease could not be read: %v", s.who, err)
			continue
		}
		r.compare(s.who, info, s.h.kind, s.h.name, s.h.token)
	}
	for _, j := range jobs {
		lease, token, running := j.running()
		if !running {
			continue
		}
		info, err := r.newClient(0).LeaseInfo(ctx, lease)
		if _, _, still := j.running(); !still {
			continue
		}
		if err != nil {
			r.add(&r.rep.TokensChanged, "job %d: its lease could not be read: %v", j.n, err)
			continue
		}
		r.compare(fmt.Sprintf("job %d", j.n), info, "lock", j.lock, token)
	}
}

func (r *run) compare(who string, info client.LeaseInfo, kind, name string, token int64) {
	r.mu.Lock()
	r.rep.TokenChecks++
	r.mu.Unlock()
	for _, h := range info.Holds {
		if h.Kind == kind && h.Name == name {
			if h.State != "held" || h.Token != token {
				r.add(&r.rep.TokensChanged, "%s: %s %s is %s with token %d, granted with %d", who, kind, name, h.State, h.Token, token)
			}
			return
		}
	}
	r.add(&r.rep.TokensChanged, "%s: %s %s (token %d) is no longer held: %+v", who, kind, name, token, info.Holds)
}

// job is one `zkgate lock` run; its command writes to file when it starts
// (its lease, token and time) and ends.
type job struct {
	n    int
	lock string
	file string
	cmd  *exec.Cmd
	out  strings.Builder
	done chan struct{}
}

// running is the job's lease and token while its command runs.
func (j *job) running() (lease string, token int64, ok bool) {
	b, _ := os.ReadFile(j.file)
	f := strings.Fields(string(b))
	if len(f) != 4 || f[0] != "start" {
		return "", 0, false
	}
	token, err := strconv.ParseInt(f[2], 10, 64)
	return f[1], token, err == nil
}

// span is the job's command's start and end, and its token.
func (j *job) span() (token int64, start, end time.Time, err error) {
	b, err := os.ReadFile(j.file)
	if err != nil {
		return 0, start, end, err
	}
	f := strings.Fields(string(b))
	if len(f) != 6 || f[0] != "start" || f[4] != "end" {
		return 0, start, end, fmt.Errorf("its record %q is not a start and an end", b)
	}
	token, err = strconv.ParseInt(f[2], 10, 64)
	ns1, err1 := strconv.ParseInt(f[3], 10, 64)
	ns2, err2 := strconv.ParseInt(f[5], 10, 64)
	if err = errors.Join(err, err1, err2); err != nil {
		return 0, start, end, err
	}
	return token, time.Unix(0, ns1), time.Unix(0, ns2), nil
}

// startJobs starts the `zkgate lock` jobs, each through one gateway.
func (r *run) startJobs(ctx context.Context) ([]*job, error) {
	var jobs []*job
	for n := range r.cfg.Jobs {
		j := &job{n: n, lock: fmt.Sprintf("cli-lock-%d", n%r.cfg.JobLocks), file: filepath.Join(r.cfg.Dir, fmt.Sprintf("job-%d", n)),
			done: make(chan struct{})}
		script := fmt.Sprintf(`echo "start $ZKGATE_LEASE $ZKGATE_FENCING_TOKEN $(date +%%s%%N)" > %[1]s; sleep %[2]s; `+
			`echo "end $(date +%%s%%N)" >> %[1]s`, j.file, strconv.FormatFloat(r.cfg.JobHold.Seconds(), 'f', 3, 64))
		args := append([]string{"lock", "--gateway", r.cfg.URLs[n%len(r.cfg.URLs)], "--wait", r.cfg.JobWait.String(),
			"--holder", fmt.Sprintf("job-%d", n)}, r.cfg.JobArgs...)
		args = append(args, j.lock, "--", "sh", "-c", script)
		j.cmd = exec.CommandContext(ctx, r.cfg.Binary, args...)
		j.cmd.Env = append(os.Environ(), "ZKGATE_TOKEN="+r.cfg.Token)
		j.cmd.Stdout, j.cmd.Stderr = &j.out, &j.out
		if err := j.cmd.Start(); err != nil {
			for _, s := range jobs {
				_ = s.cmd.Process.Kill()
				<-s.done
			}
			return nil, fmt.Errorf("start job %d: %w", n, err)
		}
		go func() { _ = j.cmd.Wait(); close(j.done) }()
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// waitJobs waits for every job, and checks its exit and its span.
func (r *run) waitJobs(ctx context.Context, jobs []*job) {
	type jobSpan struct {
		who, lock  string
		token      int64
		start, end time.Time
	}
	var spans []jobSpan
	for _, j := range jobs {
		select {
		case <-j.done:
		case <-ctx.Done():
			_ = j.cmd.Process.Kill()
			<-j.done
		}
		r.mu.Lock()
		r.rep.Jobs++
		code := j.cmd.ProcessState.ExitCode()
		if code == 0 {
			r.rep.JobsOK++
			r.rep.Grants++
		} else {
			r.rep.JobFailures = append(r.rep.JobFailures, fmt.Sprintf("job %d (lock %s) exited %d: %s", j.n, j.lock, code, strings.TrimSpace(j.out.String())))
		}
		r.mu.Unlock()
		token, start, end, err := j.span()
		if err != nil {
			r.add(&r.rep.JobFailures, "job %d: %v", j.n, err)
			continue
		}
		spans = append(spans, jobSpan{fmt.Sprintf("job-%d", j.n), j.lock, token, start, end})
	}
	// In the order they held their locks: each token above the one before.
	sort.Slice(spans, func(a, b int) bool { return spans[a].start.Before(spans[b].start) })
	for _, s := range spans {
		r.reg.enter("job "+s.lock, s.who, s.token, 1, 1, s.start)
		r.reg.exit("job "+s.lock, s.who, s.end)
	}
}

// timer is a transport that times the requests that meet a handover or a
// restart: per request (its method and path: a holder sends one at a time
// of each), from the first 503 or failure to connect to the answer that
// got through. A 410 is a lease that ended.
type timer struct {
	run   *run
	mu    sync.Mutex
	since map[string]time.Time
}

func (t *timer) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.Method + " " + req.URL.Path
	sent := time.Now()
	resp, err := http.DefaultTransport.RoundTrip(req)
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil || resp.StatusCode == http.StatusServiceUnavailable {
		if _, ok := t.since[key]; !ok {
			t.since[key] = now
		}
		return resp, err
	}
	// A revoke repeated after a lost answer finds its lease revoked: no end.
	if resp.StatusCode == http.StatusGone && req.Method != http.MethodDelete {
		t.run.add(&t.run.rep.LeasesEnded, "%s answered 410", key)
	}
	if first, ok := t.since[key]; ok {
		delete(t.since, key)
		end := now
		if w := req.URL.Query().Get("wait"); w != "" && w != "0s" {
			end = sent
		}
		w := max(end.Sub(first), 0)
		t.run.mu.Lock()
		if len(t.run.rep.Waits) == 0 || w > slices.Max(t.run.rep.Waits) {
			t.run.rep.Slowest = fmt.Sprintf("%s (%s, from %s)", key, w.Round(time.Millisecond), first.Format("15:04:05.000"))
		}
		t.run.rep.Waits = append(t.run.rep.Waits, w)
		t.run.mu.Unlock()
	}
	return resp, err
}

// register records the spans of holds: their weights add up to no more
// than a hold's limit at once, and, for exclusive holds (the weight the
// limit), each token above the one before (a fenced storage would refuse
// an older one).
type register struct {
	mu     sync.Mutex
	open   map[string]span
	spans  map[string][]span
	limits map[string]int
	newest map[string]int64
	stale  []string
}

type span struct {
	who         string
	token       int64
	weight      int
	enter, exit time.Time
}

func newRegister() *register {
	return &register{open: map[string]span{}, spans: map[string][]span{}, limits: map[string]int{}, newest: map[string]int64{}}
}

func (g *register) enter(what, who string, token int64, limit, weight int, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.limits[what] = limit
	if weight == limit {
		if token <= g.newest[what] {
			g.stale = append(g.stale, fmt.Sprintf("%s: %s wrote with token %d, not above %d", what, who, token, g.newest[what]))
		} else {
			g.newest[what] = token
		}
	}
	g.open[what+"\x00"+who] = span{who: who, token: token, weight: weight, enter: at}
}

func (g *register) exit(what, who string, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.open[what+"\x00"+who]
	if !ok {
		return
	}
	delete(g.open, what+"\x00"+who)
	s.exit = at
	g.spans[what] = append(g.spans[what], s)
}

// violations are the stale tokens, and every moment a hold's holders
// weighed more than its limit.
func (g *register) violations() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := slices.Clone(g.stale)
	for what, spans := range g.spans {
		type edge struct {
			at    time.Time
			delta int
			who   string
		}
		var edges []edge
		for _, s := range spans {
			edges = append(edges, edge{s.enter, s.weight, s.who}, edge{s.exit, -s.weight, s.who})
		}
		// Ends before starts at the same instant: a hold handed on is no overlap.
		sort.Slice(edges, func(i, j int) bool {
			if edges[i].at.Equal(edges[j].at) {
				return edges[i].delta < edges[j].delta
			}
			return edges[i].at.Before(edges[j].at)
		})
		n := 0
		for _, e := range edges {
			n += e.delta
			if n > g.limits[what] {
				out = append(out, fmt.Sprintf("%s: holders of weight %d at %s (limit %d), %s entering", what, n, e.at.Format(time.RFC3339Nano), g.limits[what], e.who))
			}
		}
	}
	return out
}
