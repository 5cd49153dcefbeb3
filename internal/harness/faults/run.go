//go:build linux

package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Report is what a run prints and writes as JSON.
type Report struct {
	Seed     int64  `json:"seed"`
	Duration string `json:"duration"` // of the faults and clients
	// Worked is how long the faults and clients ran: past Duration when
	// a wall-clock primitive had not been held by then (Config.MaxDuration).
	Worked   string `json:"worked"`
	Elapsed  string `json:"elapsed"` // of the whole run: start-up, faults, drain, check
	Ensemble int    `json:"ensemble_members"`
	Gateways int    `json:"gateways"`
	Clients  int    `json:"clients"`
	Requests int64  `json:"requests"`
	Leases   int    `json:"leases"`
	// LeasesTraced are the leases whose ZooKeeper session the observer
	// read, and SessionsLost the gateway sessions it saw end: the material
	// of the session-loss checks.
	LeasesTraced int `json:"leases_with_known_session"`
	SessionsLost int `json:"gateway_sessions_lost"`
	Grants       int `json:"grants"`
	Writes       int `json:"writes_accepted"`
	WritesFenced int `json:"writes_fenced"` // refused by the register: a newer token had written
	// WritesAfterLoss are accepted writes made after the session holding
	// their lease had been lost, while the client could not know it (its
	// lease's TTL had not run out): the window only the fencing token
	// covers.
	WritesAfterLoss int `json:"writes_after_session_loss"`
	Releases        int `json:"releases"`
	// WallHolds counts the wall-clock holds by kind (and the read/write
	// lock's by mode); WallLost those that stopped at their deadline or
	// when told their lease ended, WallLate the grants that came too late
	// to work under. WallOverrun is the latest a hold ended past its
	// deadline (negative: all ended before theirs).
	WallHolds   map[string]int       `json:"wallclock_holds"`
	WallLost    int                  `json:"wallclock_holds_lost"`
	WallLate    int                  `json:"wallclock_grants_too_late"`
	WallGaps    map[string]*WallGaps `json:"wallclock_smallest_gaps"`
	WallOverrun *time.Duration       `json:"wallclock_latest_end_past_deadline,omitempty"`
	// GoneOwn and GoneOther count the 410s judged against the lease's
	// record (answered by the lease's own gateway, or by another from
	// ZooKeeper), with the longest the record was seen after one;
	// GoneReplaced, GoneSessionEnded, GoneObserverOut and GoneTTLRunOut
	// count those not judged (see goneChecks); ObserverOut is how long the
	// observer had no session.
	GoneOwn       int           `json:"gone_judged_own"`
	GoneOther     int           `json:"gone_judged_other"`
	GoneOwnLead   time.Duration `json:"gone_longest_lead_own_ns"`
	GoneOtherLead time.Duration `json:"gone_longest_lead_other_ns"`
	// GoneOwnLongest and GoneOtherLongest describe the answers of those leads.
	GoneOwnLongest   string        `json:"gone_longest_lead_own,omitempty"`
	GoneOtherLongest string        `json:"gone_longest_lead_other,omitempty"`
	GoneReplaced     int           `json:"gone_unjudged_gateway_replaced"`
	GoneSessionEnded int           `json:"gone_unjudged_session_ended"`
	GoneObserverOut  int           `json:"gone_unjudged_observer_out"`
	GoneTTLRunOut    int           `json:"gone_unjudged_ttl_run_out"`
	ObserverOut      time.Duration `json:"observer_out_ns"`
	// WallWorst is the hold that ended latest past its deadline.
	WallWorst   *WallHold `json:"wallclock_latest_past_deadline,omitempty"`
	Produced    int       `json:"items_produced"`
	Unconfirmed int       `json:"items_produce_unanswered"`
	Claims      int       `json:"claims"`
	Acks        int       `json:"acks"`
	Redelivered int       `json:"items_served_again"`
	// Members counts the group memberships, MembersSilent those whose
	// client went silent, and MembersJudged those whose node and lease
	// record the observer saw go; MemberLag is the longest such a node
	// outlived its record (0: none did).
	Members       int           `json:"group_members"`
	MembersSilent int           `json:"group_members_silent"`
	MembersJudged int           `json:"group_members_judged"`
	MemberLag     time.Duration `json:"group_member_longest_lag_ns"`
	// SilentJudged counts the silent members judged against their lease's
	// TTL, and SilentLag is the longest from its end to the node's.
	SilentJudged int            `json:"group_members_silent_judged"`
	SilentLag    time.Duration  `json:"group_member_silent_longest_lag_ns"`
	Faults       map[string]int `json:"faults"`
	Answers      []AnswerCount  `json:"answers"`
	Violations   int            `json:"violations"`
	ByKind       map[string]int `json:"violations_by_kind"`
	Details      []Violation    `json:"violation_details"`
	// ZooKeeperTrouble are the lines in which a ZooKeeper member reported
	// its replica diverged (see zooKeeperTrouble): a violation after them
	// may be ZooKeeper's.
	ZooKeeperTrouble []string `json:"zookeeper_trouble,omitempty"`
	WorkDir          string   `json:"work_dir,omitempty"` // kept for its logs

	// AddsAcked and AddsUnanswered count the counter's adds answered 200
	// and those whose answer was lost; CounterFinal is its value at the end.
	AddsAcked      int   `json:"counter_adds_acked"`
	AddsUnanswered int   `json:"counter_adds_unanswered"`
	CounterFinal   int64 `json:"counter_final"`
}

// runner is one run under way.
type runner struct {
	cfg  Config
	cl   *cluster
	hist *History
	reg  *Register
	obs  *observer
	http *http.Client

	start    time.Time
	worked   time.Duration
	requests atomic.Int64
	stopWork context.CancelFunc

	// logMu makes each progress line one Write: the fault loops log at once,
	// and cfg.Log need not be safe for concurrent use.
	logMu sync.Mutex

	mu     sync.Mutex
	faults map[string]int
	// held are the kinds of wall-clock primitive held so far; allHeld is
	// closed once every kind was.
	held    map[string]bool
	allHeld chan struct{}
}

func newRunner(cfg Config) *runner {
	return &runner{cfg: cfg, hist: newHistory(), http: newHTTPClient(), faults: map[string]int{},
		held: map[string]bool{}, allHeld: make(chan struct{})}
}

// Run starts the cluster, runs the clients and the faults for cfg.Duration
// (or longer, up to cfg.MaxDuration, until every wall-clock primitive was held),
// heals everything, drains the queue, checks the history and stops the
// cluster. An error means the run could not be made (a process would not
// start); violations are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	workDir, tempDir := cfg.WorkDir, false
	if workDir == "" {
		d, err := os.MkdirTemp("", "zkgate-faults-")
		if err != nil {
			return nil, err
		}
		workDir, tempDir = d, true
	} else if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, err
	}
	r := newRunner(cfg)
	r.hist.SessionTimeout, r.hist.TickTime = cfg.SessionTimeout, cfg.TickTime
	r.reg = newRegister(r.hist)
	r.logf("work dir %s", workDir)

	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	cl, err := startCluster(startCtx, cfg, workDir)
	cancel()
	if err != nil {
		return nil, err
	}
	r.cl = cl
	keep := cfg.Keep
	defer func() {
		cl.stop()
		r.http.CloseIdleConnections()
		if tempDir && !keep {
			os.RemoveAll(workDir)
		}
	}()
	obsCtx, cancel := context.WithTimeout(ctx, time.Minute)
	r.obs, err = startObserver(obsCtx, cl.ens.Addrs(), cfg.Root, r.hist)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("observer: %w", err)
	}
	defer r.obs.close()
	r.logf("ensemble %s, gateways %s", cl.ens.ConnectString(), strings.Join(r.urls(), " "))

	if err := r.work(ctx); err != nil {
		return nil, err
	}
	if err := r.drain(ctx); err != nil {
		return nil, err
	}
	if err := r.readCounter(ctx); err != nil {
		return nil, err
	}
	r.obs.close() // the records still there are seen until now
	rep := r.report()
	rep.Elapsed = time.Since(began).Round(time.Millisecond).String()
	rep.ZooKeeperTrouble = zooKeeperTrouble(filepath.Join(workDir, "zookeeper"))
	if rep.Violations > 0 || len(rep.ZooKeeperTrouble) > 0 {
		keep = true
	}
	if keep {
		rep.WorkDir = workDir
	}
	return rep, nil
}

func (r *runner) logf(format string, args ...any) {
	var at time.Duration
	if !r.start.IsZero() {
		at = time.Since(r.start)
	}
	line := fmt.Sprintf("[%7.3fs %s] %s\n", at.Seconds(), time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	r.logMu.Lock()
	defer r.logMu.Unlock()
	io.WriteString(r.cfg.Log, line)
}

func (r *runner) urls() []string {
	var out []string
	for _, g := range r.cl.gateways {
		out = append(out, g.URL())
	}
	return out
}

func (r *runner) fault(kind string) {
	r.mu.Lock()
	r.faults[kind]++
	r.mu.Unlock()
}

// wallHeld notes that a primitive of kind was held.
func (r *runner) wallHeld(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held[kind] {
		return
	}
	r.held[kind] = true
	if len(r.held) == len(wallKinds) {
		close(r.allHeld)
	}
}

// endWork calls stop when the duration is spent; if by then a kind of
// wall-clock primitive was never held (and MaxDuration is longer), once
// every kind was or MaxDuration is spent instead; and when ctx ends.
func (r *runner) endWork(ctx context.Context, stop context.CancelFunc) {
	defer stop()
	if !sleepCtx(ctx, r.cfg.Duration) {
		return
	}
	select {
	case <-r.allHeld:
		return
	default:
	}
	more := r.cfg.MaxDuration - r.cfg.Duration
	if more <= 0 || r.cfg.WallClockWorkers == 0 {
		return
	}
	r.mu.Lock()
	var never []string
	for _, kind := range wallKinds {
		if !r.held[kind] {
			never = append(never, kind)
		}
	}
	r.mu.Unlock()
	r.logf("time is up, but nothing was held yet of: %s; going on until it is, %s more at most", strings.Join(never, ", "), more)
	last := time.NewTimer(more)
	defer last.Stop()
	select {
	case <-ctx.Done():
	case <-r.allHeld:
		r.logf("every kind of wall-clock primitive was held")
	case <-last.C:
		r.logf("max duration %s is up, and a kind of wall-clock primitive was never held", r.cfg.MaxDuration)
	}
}

// work runs the clients and the faults until the duration (see endWork) or
// the request budget is spent, then heals every fault and lets the clients
// finish.
func (r *runner) work(ctx context.Context) error {
	r.start = time.Now()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	r.stopWork = stop
	go r.endWork(wctx, stop)
	seed := uint64(r.cfg.Seed)

	var faults sync.WaitGroup
	faultErrs := make(chan error, 2)
	faults.Go(func() { faultErrs <- r.zooKeeperFaults(wctx, newRand(seed, 1000)) })
	faults.Go(func() { faultErrs <- r.gatewayFaults(wctx, newRand(seed, 1001)) })

	var clients sync.WaitGroup
	for i := 0; i < r.cfg.LockClients; i++ {
		clients.Go(func() { r.lockClient(wctx, i) })
	}
	for i := 0; i < r.cfg.Vanishers; i++ {
		clients.Go(func() { r.vanisher(wctx, i) })
	}
	for i := 0; i < r.cfg.Producers; i++ {
		clients.Go(func() { r.producer(wctx, i) })
	}
	for i := 0; i < r.cfg.Consumers; i++ {
		clients.Go(func() { r.consumer(wctx, i) })
	}
	for i := 0; i < r.cfg.Adders; i++ {
		clients.Go(func() { r.adder(wctx, i) })
	}
	for k, kind := range wallKinds {
		for i := 0; i < r.cfg.WallClockWorkers; i++ {
			clients.Go(func() { r.wallWorker(wctx, kind, k, i) })
		}
	}
	for i := 0; i < r.cfg.GroupMembers; i++ {
		clients.Go(func() { r.groupMember(wctx, i) })
	}
	<-wctx.Done()
	r.worked = time.Since(r.start)
	r.logf("time is up (%d requests): healing every fault, clients finishing", r.requests.Load())
	faults.Wait()
	close(faultErrs)
	var first error
	for err := range faultErrs {
		if err != nil && first == nil {
			first = err
		}
	}
	clients.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if first != nil {
		return first
	}
	// Every gateway serves again before the drain.
	for _, g := range r.cl.gateways {
		if err := r.waitReady(ctx, g, time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// countRequest stops the work once the request budget is spent.
func (r *runner) countRequest() {
	if r.requests.Load() >= r.cfg.MaxRequests && r.stopWork != nil {
		r.stopWork()
	}
}

func (r *runner) waitReady(ctx context.Context, g *gateway, within time.Duration) error {
	deadline := time.Now().Add(within)
	probe := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := probe.Get(g.URL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway %d (%s) not ready within %s after the faults", g.index, g.URL(), within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// report counts what the run's history holds, with its violations.
func (r *runner) report() *Report {
	violations, byKind := Check(r.hist)
	h := r.hist
	h.mu.Lock()
	defer h.mu.Unlock()
	rep := &Report{Seed: r.cfg.Seed, Duration: r.cfg.Duration.String(), Worked: r.worked.Round(time.Millisecond).String(), Ensemble: len(r.cl.ens.Servers),
		Gateways: len(r.cl.gateways), Clients: r.cfg.LockClients + r.cfg.Vanishers + r.cfg.Producers + r.cfg.Consumers + len(wallKinds)*r.cfg.WallClockWorkers +
			r.cfg.GroupMembers + r.cfg.Adders,
		Requests: r.requests.Load(), Leases: len(h.Leases), Grants: len(h.Grants), Faults: map[string]int{},
		Answers: sortedAnswers(h.Answers), ByKind: byKind, Details: violations}
	for _, v := range byKind {
		rep.Violations += v
	}
	for _, l := range h.Leases {
		if l.Session != 0 {
			rep.LeasesTraced++
		}
	}
	rep.SessionsLost = len(h.SessionLost)
	rep.countWallHolds(h)
	for _, s := range h.ObserverOut {
		to := s.To
		if to.IsZero() {
			to = time.Now()
		}
		rep.ObserverOut += to.Sub(s.From)
	}
	rep.countGone(h)
	rep.countWrites(h)
	rep.countQueue(h)
	rep.countGroups(h)
	for _, a := range h.Adds {
		if a.Acked {
			rep.AddsAcked++
		} else {
			rep.AddsUnanswered++
		}
	}
	rep.CounterFinal = h.CounterFinal
	r.mu.Lock()
	for k, v := range r.faults {
		rep.Faults[k] = v
	}
	r.mu.Unlock()
	return rep
}

// countWallHolds counts the wall-clock holds of h: per kind, their gaps,
// the lost, the late, and the worst overrun of a deadline.
func (rep *Report) countWallHolds(h *History) {
	var overrun time.Duration
	rep.WallHolds, rep.WallGaps, overrun = wallStats(h.WallHolds)
	if len(h.WallHolds) > 0 {
		rep.WallOverrun = &overrun
	}
	for i, w := range h.WallHolds {
		if w.Stop != "done" {
			rep.WallLost++
		}
		if rep.WallWorst == nil || w.End.Sub(w.Deadline) > rep.WallWorst.End.Sub(rep.WallWorst.Deadline) {
			rep.WallWorst = &h.WallHolds[i]
		}
	}
	rep.WallLate = h.WallLate
}

// countGone counts the 410s of h about leases whose record was still
// there: by excuse, and those without one by whether the lease's own
// gateway answered, with the longest lead of each.
func (rep *Report) countGone(h *History) {
	for _, c := range goneChecks(h) {
		switch c.excuse {
		case excuseReplaced:
			rep.GoneReplaced++
			continue
		case excuseSessionGone:
			rep.GoneSessionEnded++
			continue
		case excuseObserverOut:
			rep.GoneObserverOut++
			continue
		case excuseTTLRunOut:
			rep.GoneTTLRunOut++
			continue
		}
		if c.own {
			rep.GoneOwn++
			if c.lead > rep.GoneOwnLead {
				rep.GoneOwnLead, rep.GoneOwnLongest = c.lead, c.String()
			}
		} else {
			rep.GoneOther++
			if c.lead > rep.GoneOtherLead {
				rep.GoneOtherLead, rep.GoneOtherLongest = c.lead, c.String()
			}
		}
	}
}

// countWrites counts the fenced writes of h: accepted, refused, accepted
// after their lease's session was lost; and the releases.
func (rep *Report) countWrites(h *History) {
	for _, w := range h.Writes {
		if !w.Accepted {
			rep.WritesFenced++
			continue
		}
		rep.Writes++
		if l := h.Leases[w.Lease]; l != nil && l.Session != 0 {
			if x, ok := h.SessionLost[l.Session]; ok && w.At.After(x) {
				rep.WritesAfterLoss++
			}
		}
	}
	for _, v := range h.Vouches {
		if v.Kind == "release" {
			rep.Releases++
		}
	}
}

// countQueue counts the items of h produced (and unconfirmed), claimed,
// served more than once and acked.
func (rep *Report) countQueue(h *History) {
	for _, p := range h.Produced {
		rep.Produced++
		if !p.Confirmed {
			rep.Unconfirmed++
		}
	}
	rep.Claims = len(h.Claims)
	claimsOf := map[string]int{}
	for _, c := range h.Claims {
		claimsOf[c.BodyID]++
	}
	for _, n := range claimsOf {
		if n > 1 {
			rep.Redelivered++
		}
	}
	for _, a := range h.Acks {
		if a.Status == 204 {
			rep.Acks++
		}
	}
}

// Print writes the report for people.
func (rep *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "zkgate fault-injection run: seed %d, %s of faults (%s asked for; %s in all)\n", rep.Seed, rep.Worked, rep.Duration, rep.Elapsed)
	fmt.Fprintf(w, "cluster: %d ZooKeeper members, %d gateways; %d clients sent %d requests\n", rep.Ensemble, rep.Gateways, rep.Clients, rep.Requests)
	fmt.Fprintf(w, "sessions: %d of %d leases traced to their gateway session; %d gateway sessions seen lost\n", rep.LeasesTraced, rep.Leases, rep.SessionsLost)
	fmt.Fprintf(w, "locks: %d leases, %d grants, %d writes accepted, %d writes fenced (stale token refused), %d releases\n",
		rep.Leases, rep.Grants, rep.Writes, rep.WritesFenced, rep.Releases)
	fmt.Fprintf(w, "       %d writes accepted after their lease's session was lost (the window the fencing token covers)\n", rep.WritesAfterLoss)
	fmt.Fprintf(w, "wall-clock holds (no fencing, each stopped by its lease's deadline):")
	for _, k := range wallKinds {
		fmt.Fprintf(w, " %s %d,", k, rep.WallHolds[k])
	}
	fmt.Fprintf(w, " (rwlock: %d read, %d write); %d lost (stopped at the deadline or told the lease ended), %d grants too late to work under\n",
		rep.WallHolds[WallRWLock+"_read"], rep.WallHolds[WallRWLock+"_write"], rep.WallLost, rep.WallLate)
	fmt.Fprintf(w, "       smallest gap from a hold's end to a conflicting hold's start, after a release / a lost hold / a hold lost to its gateway's drain:")
	for _, k := range wallKinds {
		g := rep.WallGaps[k]
		if g == nil {
			fmt.Fprintf(w, " %s -,", k)
			continue
		}
		fmt.Fprintf(w, " %s %s / %s / %s (%d),", k, fmtGap(g.AfterRelease), fmtGap(g.AfterLoss), fmtGap(g.AfterDrain), g.Measured)
	}
	fmt.Fprintln(w)
	if rep.WallOverrun != nil {
		fmt.Fprintf(w, "       latest end of a hold past its deadline: %s (negative: every hold ended before its deadline)\n", rep.WallOverrun.Round(time.Microsecond))
	}
	fmt.Fprintf(w, "410 answers judged against the lease's record: %d from the lease's gateway (record seen at most %s after), %d from another (at most %s after); not judged: %d (the lease's gateway killed and replaced at its address), %d (its own gateway's, its session ended: ZooKeeper's time), %d (the observer out of session, %s in all), %d (expired after its TTL had run out)\n",
		rep.GoneOwn, rep.GoneOwnLead.Round(time.Millisecond), rep.GoneOther, rep.GoneOtherLead.Round(time.Millisecond),
		rep.GoneReplaced, rep.GoneSessionEnded, rep.GoneObserverOut, rep.ObserverOut.Round(time.Millisecond), rep.GoneTTLRunOut)
	for _, d := range []string{rep.GoneOwnLongest, rep.GoneOtherLongest} {
		if d != "" {
			fmt.Fprintf(w, "       longest: %s\n", d)
		}
	}
	fmt.Fprintf(w, "queue: %d items produced (%d unanswered), %d claims, %d acks, %d items served more than once\n",
		rep.Produced, rep.Unconfirmed, rep.Claims, rep.Acks, rep.Redelivered)
	fmt.Fprintf(w, "groups: %d members, %d went silent; %d judged against their lease's record, the longest a node outlived it %s; %d silent ones against their TTL, the longest a node outlived it %s\n",
		rep.Members, rep.MembersSilent, rep.MembersJudged, rep.MemberLag.Round(time.Millisecond), rep.SilentJudged, rep.SilentLag.Round(time.Millisecond))
	fmt.Fprintf(w, "counter: %d adds acknowledged, %d unanswered, %d at the end\n", rep.AddsAcked, rep.AddsUnanswered, rep.CounterFinal)
	fmt.Fprintf(w, "faults:")
	for _, k := range slices.Sorted(maps.Keys(rep.Faults)) {
		fmt.Fprintf(w, " %s %d,", k, rep.Faults[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "answers (legitimate during faults: 503 unavailable, 410 lease_expired, 409 timeout, no answer from a paused or dead gateway):")
	for _, a := range rep.Answers {
		fmt.Fprintf(w, "  %7d  %s\n", a.Count, a.Answer)
	}
	fmt.Fprintf(w, "violations: %d\n", rep.Violations)
	for _, k := range slices.Sorted(maps.Keys(rep.ByKind)) {
		fmt.Fprintf(w, "  %s: %d\n", k, rep.ByKind[k])
	}
	for _, v := range rep.Details {
		fmt.Fprintf(w, "  - %s: %s\n", v.Kind, v.Detail)
	}
	if len(rep.ZooKeeperTrouble) > 0 {
		fmt.Fprintln(w, "ZooKeeper reported a replica diverged (what it served after may be wrong whatever the gateway does; violations after it may be ZooKeeper's):")
		for _, l := range rep.ZooKeeperTrouble {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	if rep.WorkDir != "" {
		fmt.Fprintf(w, "logs kept in %s\n", rep.WorkDir)
	}
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// zooKeeperTrouble reads the ensemble members' logs under dir for the
// line ZooKeeper writes when a member's data tree no longer matches the
// digests of the transactions it applies ("First digest mismatch on
// txn"): its replica has diverged, and what it serves may be wrong
// whatever a client does. ZooKeeper 3.8.0 gets there when a follower's
// sync with its leader fails mid-way (the NullPointerException of
// ZOOKEEPER-4394 in Follower.followLeader), leaving its transaction log
// out of order; replayed at its next start, it brings back nodes the
// leader deleted. The first few such lines, with their member.
func zooKeeperTrouble(dir string) []string {
	const most = 10
	logs, _ := filepath.Glob(filepath.Join(dir, "zk*", "zookeeper.out"))
	var out []string
	for _, p := range logs {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() && len(out) < most {
			if l := sc.Text(); strings.Contains(l, "digest mismatch") {
				out = append(out, filepath.Base(filepath.Dir(p))+": "+truncate(l, 200))
			}
		}
		f.Close()
	}
	return out
}

func fmtGap(d *time.Duration) string {
	if d == nil {
		return "-"
	}
	return d.Round(time.Microsecond).String()
}
