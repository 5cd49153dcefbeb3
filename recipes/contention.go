package recipes

import (
	"cmp"
	"container/list"
	"context"
	"math"
	"slices"
	"sync"
	"time"
)

// Metrics receives what the recipes do; the server implements it with
// Prometheus. Calls must not block.
type Metrics interface {
	Granted(kind string, waited time.Duration)
	Released(kind string, held time.Duration)
	Waiting(kind string, delta int)
	// Waited is the end of one wait for the lock or semaphore name,
	// whatever its outcome, and Held the end of one hold of it.
	Waited(kind, name string, d time.Duration)
	Held(kind, name string, d time.Duration)
}

type nopMetrics struct{}

func (nopMetrics) Granted(string, time.Duration)        {}
func (nopMetrics) Released(string, time.Duration)       {}
func (nopMetrics) Waiting(string, int)                  {}
func (nopMetrics) Waited(string, string, time.Duration) {}
func (nopMetrics) Held(string, string, time.Duration)   {}

// Contention is what this gateway saw of the waits and holds of its leases
// on each lock (exclusive or read/write) and semaphore: per name, a minute
// at a time for the last hour, the grants, timeouts and deadlocks, a
// Histogram of the waits and one of the holds, and the longest line seen;
// the last holds and waits themselves (who, from when to when); and the
// waits and holds under way. A gateway knows only its own leases' waits and
// holds: the figures of a name across gateways are the merge of each one's
// (see NameFigures.Merge), which is exact but for the percentiles' buckets.
//
// Memory is bounded: at most ContentionNames names, the least recently
// used dropped first, each with at most 61 minutes of figures (a minute
// costs about 100 bytes and 16 bytes a bucket hit in it) and the last
// contentionRecent holds and waits; the waits and holds under way are
// bounded by the leases. Recording takes no ZooKeeper request: it reads
// only what the recipes already know.
type Contention struct {
	now     func() time.Time
	metrics Metrics

	mu        sync.Mutex
	names     map[nameKey]*nameLog
	lru       list.List // of *nameLog, the most recently used first
	waits     map[*waitEntry]struct{}
	holds     map[*hold]*liveHold
	deadlocks []DeadlockRecord // broken here in the last hour, oldest first
	broken    int64            // deadlocks broken here
}

// Bounds of the contention figures of one gateway.
const (
	// ContentionNames is how many names a gateway keeps figures of.
	ContentionNames = 1000
	// contentionRecent is how many ended holds and waits a name keeps.
	contentionRecent = 32
	// contentionMinutes is an hour of minutes and the current one.
	contentionMinutes = 61
	// contentionDeadlocks bounds the deadlocks kept (for an hour).
	contentionDeadlocks = 100
)

// The outcomes of a wait.
const (
	WaitGranted  = "granted"
	WaitTimeout  = "timeout"
	WaitDeadlock = "deadlock"
	WaitFailed   = "failed" // the lease ended, the gateway stopped, ZooKeeper was out of reach...
	WaitWaiting  = "waiting"
)

// The kinds of primitive the figures cover.
const (
	KindLock      = "lock"
	KindSemaphore = "semaphore"
)

type nameKey struct{ kind, name string }

// minuteFigures are one name's figures of one minute.
type minuteFigures struct {
	minute                      int64 // Unix minutes
	grants, timeouts, deadlocks int64
	waited, held                minuteHistogram
	line                        int
}

// nameLog is what a gateway keeps of one name.
type nameLog struct {
	key     nameKey
	minutes [contentionMinutes]*minuteFigures // by minute modulo contentionMinutes
	holds   []HoldRecord                      // ended, oldest first
	waits   []WaitRecord
	elem    *list.Element
}

// waitEntry is one call of this gateway waiting for a lock or a semaphore:
// what the figures count while it lasts, and what the deadlock detector
// checks and may abort.
type waitEntry struct {
	h     *hold
	kind  string
	mode  string
	start time.Time
	abort context.CancelCauseFunc
	// checked is when the deadlock detector last looked at it (guarded by
	// Contention.mu).
	checked time.Time
}

// liveHold is a hold of this gateway under way.
type liveHold struct {
	rec  HoldRecord
	kind string
}

// HoldRecord is one hold of a lock or a semaphore by a zkgate lease.
type HoldRecord struct {
	Lease   string     `json:"lease"`
	Holder  string     `json:"holder"`
	Gateway string     `json:"gateway"`
	Mode    string     `json:"mode,omitempty"`
	Token   int64      `json:"token"`
	From    time.Time  `json:"from"`
	Until   *time.Time `json:"until"` // nil: still held
}

// WaitRecord is one wait for a lock or a semaphore by a zkgate lease.
type WaitRecord struct {
	Lease   string     `json:"lease"`
	Holder  string     `json:"holder"`
	Gateway string     `json:"gateway"`
	Mode    string     `json:"mode,omitempty"`
	From    time.Time  `json:"from"`
	Until   *time.Time `json:"until"` // nil: still waiting
	Outcome string     `json:"outcome"`
}

// NewContention returns an empty record, which tells m of every wait and
// hold that ends (nil: nobody).
func NewContention(m Metrics) *Contention {
	if m == nil {
		m = nopMetrics{}
	}
	return &Contention{now: time.Now, metrics: m, names: map[nameKey]*nameLog{}, waits: map[*waitEntry]struct{}{}, holds: map[*hold]*liveHold{}}
}

func unixMinute(t time.Time) int64 { return t.Unix() / 60 }

// logOf returns the log of key, made (and the least recently used one
// dropped, past the bound) if there is none, and marks it used. c.mu is
// held.
func (c *Contention) logOf(key nameKey) *nameLog {
	if l, ok := c.names[key]; ok {
		c.lru.MoveToFront(l.elem)
		return l
	}
	for len(c.names) >= ContentionNames {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.names, oldest.Value.(*nameLog).key)
	}
	l := &nameLog{key: key}
	l.elem = c.lru.PushFront(l)
	c.names[key] = l
	return l
}

// minute returns the figures of the minute of t, made anew if the slot held
// an older one.
func (l *nameLog) minute(t time.Time) *minuteFigures {
	m := unixMinute(t)
	slot := &l.minutes[m%contentionMinutes]
	if *slot == nil || (*slot).minute != m {
		*slot = &minuteFigures{minute: m}
	}
	return *slot
}

func appendRecent[T any](s []T, v T) []T {
	if len(s) == contentionRecent {
		s = append(s[:0], s[1:]...)
	}
	return append(s, v)
}

// startWait counts a call waiting for h (kind lock or semaphore) from now;
// abort ends its wait with a cause. The caller must call endWait.
func (c *Contention) startWait(h *hold, kind, mode string, abort context.CancelCauseFunc) *waitEntry {
	e := &waitEntry{h: h, kind: kind, mode: mode, start: c.now(), abort: abort}
	c.mu.Lock()
	c.waits[e] = struct{}{}
	c.mu.Unlock()
	return e
}

// endWait counts the end of a wait, as err says: nil is a grant.
func (c *Contention) endWait(e *waitEntry, err error) {
	outcome := WaitGranted
	switch {
	case err == nil:
	case ErrorCode(err) == CodeTimeout:
		outcome = WaitTimeout
	case ErrorCode(err) == CodeDeadlock:
		outcome = WaitDeadlock
	default:
		outcome = WaitFailed
	}
	now := c.now()
	waited := now.Sub(e.start)
	c.metrics.Waited(e.kind, e.h.name, waited)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.waits, e)
	l := c.logOf(nameKey{e.kind, e.h.name})
	m := l.minute(now)
	m.waited.add(waited)
	switch outcome {
	case WaitGranted:
		m.grants++
	case WaitTimeout:
		m.timeouts++
	case WaitDeadlock:
		m.deadlocks++
	}
	until := now.UTC()
	l.waits = appendRecent(l.waits, WaitRecord{Lease: e.h.lease.ID, Holder: e.h.lease.Holder, Gateway: e.h.lines.gatewayID, Mode: e.mode,
		From: e.start.UTC(), Until: &until, Outcome: outcome})
}

// lineSeen notes how many waited in the line of a name, as a listing made
// for a wait showed it.
func (c *Contention) lineSeen(kind, name string, waiting int) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.logOf(nameKey{kind, name}).minute(now)
	m.line = max(m.line, waiting)
}

// figureKind is the kind of figures of a hold, "" for holds that have none.
func figureKind(h *hold) string {
	switch h.kind {
	case KindLock, KindSemaphore:
		return h.kind
	}
	return ""
}

// granted notes h held from its grant on (h.mu is held).
func (c *Contention) granted(h *hold) {
	kind := figureKind(h)
	if kind == "" {
		return
	}
	rec := HoldRecord{Lease: h.lease.ID, Holder: h.lease.Holder, Gateway: h.lines.gatewayID, Token: h.token, From: h.grantedAt.UTC()}
	if lh, ok := h.self.(*lockHold); ok {
		rec.Mode = lh.mode
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holds[h] = &liveHold{rec: rec, kind: kind}
}

// released counts the end of h's hold (h.mu is held).
func (c *Contention) released(h *hold) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	lh, ok := c.holds[h]
	if !ok {
		return
	}
	delete(c.holds, h)
	held := now.Sub(lh.rec.From)
	c.metrics.Held(lh.kind, h.name, held)
	l := c.logOf(nameKey{lh.kind, h.name})
	l.minute(now).held.add(held)
	until := now.UTC()
	rec := lh.rec
	rec.Until = &until
	l.holds = appendRecent(l.holds, rec)
}

// forget drops h's hold under way without counting its end: it goes on at
// another gateway (a handover).
func (c *Contention) forget(h *hold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.holds, h)
}

// NameFigures are the figures of one name over a window, as one gateway
// has them or merged from several: everything in them adds up (see
// Merge). The waits and holds are those that ended in the window and those
// under way (counted as long as they lasted so far).
type NameFigures struct {
	Kind      string    `json:"kind"`
	Name      string    `json:"name"`
	Grants    int64     `json:"grants"`
	Timeouts  int64     `json:"timeouts"`
	Deadlocks int64     `json:"deadlocks"`
	Waited    Histogram `json:"waited"`
	Held      Histogram `json:"held"`
	Waiting   int       `json:"waiting"` // waits under way
	Holding   int       `json:"holding"` // holds under way
	// Line is the longest line seen in each minute of the window, oldest
	// first (a minute nobody waited in is 0).
	Line []int `json:"line"`
}

// Merge adds o, the same name's figures of another gateway over the same
// window.
func (f *NameFigures) Merge(o NameFigures) {
	f.Grants += o.Grants
	f.Timeouts += o.Timeouts
	f.Deadlocks += o.Deadlocks
	f.Waited.Merge(o.Waited)
	f.Held.Merge(o.Held)
	f.Waiting += o.Waiting
	f.Holding += o.Holding
	for i := range min(len(f.Line), len(o.Line)) {
		f.Line[i] = max(f.Line[i], o.Line[i])
	}
}

// Sane reports whether f is figures this code could have made: another
// gateway's are checked before they are merged.
func (f *NameFigures) Sane(minutes int) bool {
	return ValidName(f.Name) == nil && (f.Kind == KindLock || f.Kind == KindSemaphore) && len(f.Line) == minutes &&
		f.Grants >= 0 && f.Timeouts >= 0 && f.Deadlocks >= 0 && f.Waiting >= 0 && f.Holding >= 0 && f.Waited.sane() && f.Held.sane()
}

// LongestLine is the longest line seen in the window.
func (f *NameFigures) LongestLine() int {
	longest := 0
	for _, n := range f.Line {
		longest = max(longest, n)
	}
	return longest
}

// WindowMinutes is the number of minutes of figures a window covers: its
// whole minutes and the current one.
func WindowMinutes(window time.Duration) int { return int(window/time.Minute) + 1 }

// windowStart is the first minute of a window ending now.
func windowStart(now time.Time, window time.Duration) int64 {
	return unixMinute(now) - int64(WindowMinutes(window)) + 1
}

// WindowSince is when a window ending at now begins: windows are counted
// in whole minutes, so a window of 15m covers 15 to 16 minutes.
func WindowSince(now time.Time, window time.Duration) time.Time {
	return time.Unix(windowStart(now, window)*60, 0).UTC()
}

// figuresLocked are l's figures over the minutes from first to last.
func (l *nameLog) figuresLocked(first, last int64) NameFigures {
	f := NameFigures{Kind: l.key.kind, Name: l.key.name, Line: make([]int, last-first+1)}
	for _, m := range l.minutes {
		if m == nil || m.minute < first || m.minute > last {
			continue
		}
		f.Grants += m.grants
		f.Timeouts += m.timeouts
		f.Deadlocks += m.deadlocks
		f.Waited.Merge(m.waited.histogram())
		f.Held.Merge(m.held.histogram())
		f.Line[m.minute-first] = m.line
	}
	return f
}

// Figures are the figures of every name with something in the window
// ending now, in no particular order; keep, when not nil, picks the names
// (a token's permissions).
func (c *Contention) Figures(window time.Duration, keep func(kind, name string) bool) []NameFigures {
	now := c.now()
	first, last := windowStart(now, window), unixMinute(now)
	c.mu.Lock()
	defer c.mu.Unlock()
	byKey := map[nameKey]*NameFigures{}
	get := func(k nameKey) *NameFigures {
		if f, ok := byKey[k]; ok {
			return f
		}
		var f NameFigures
		if l, ok := c.names[k]; ok {
			f = l.figuresLocked(first, last)
		} else {
			f = NameFigures{Kind: k.kind, Name: k.name, Line: make([]int, last-first+1)}
		}
		byKey[k] = &f
		return &f
	}
	for k, l := range c.names {
		if keep != nil && !keep(k.kind, k.name) {
			continue
		}
		if f := l.figuresLocked(first, last); f.Waited.Count+f.Held.Count > 0 || f.LongestLine() > 0 {
			byKey[k] = &f
		}
	}
	for e := range c.waits {
		k := nameKey{e.kind, e.h.name}
		if keep == nil || keep(k.kind, k.name) {
			f := get(k)
			f.Waiting++
			f.Waited.Add(now.Sub(e.start))
		}
	}
	for h, lh := range c.holds {
		k := nameKey{lh.kind, h.name}
		if keep == nil || keep(k.kind, k.name) {
			f := get(k)
			f.Holding++
			f.Held.Add(now.Sub(lh.rec.From))
		}
	}
	out := make([]NameFigures, 0, len(byKey))
	for _, f := range byKey {
		out = append(out, *f)
	}
	return out
}

// NameLog is one name over a window: its figures, and the holds and waits
// of this gateway's leases that ended in the window or are under way,
// oldest first.
type NameLog struct {
	Figures NameFigures  `json:"figures"`
	Holds   []HoldRecord `json:"holds"`
	Waits   []WaitRecord `json:"waits"`
}

// Name is the log of one name over the window ending now.
func (c *Contention) Name(kind, name string, window time.Duration) NameLog {
	now := c.now()
	first, last := windowStart(now, window), unixMinute(now)
	since := time.Unix(first*60, 0)
	c.mu.Lock()
	defer c.mu.Unlock()
	out := NameLog{Figures: NameFigures{Kind: kind, Name: name, Line: make([]int, last-first+1)}, Holds: []HoldRecord{}, Waits: []WaitRecord{}}
	if l, ok := c.names[nameKey{kind, name}]; ok {
		out.Figures = l.figuresLocked(first, last)
		for _, h := range l.holds {
			if !h.Until.Before(since) {
				out.Holds = append(out.Holds, h)
			}
		}
		for _, w := range l.waits {
			if !w.Until.Before(since) {
				out.Waits = append(out.Waits, w)
			}
		}
	}
	for e := range c.waits {
		if e.kind == kind && e.h.name == name {
			out.Figures.Waiting++
			out.Figures.Waited.Add(now.Sub(e.start))
			out.Waits = append(out.Waits, WaitRecord{Lease: e.h.lease.ID, Holder: e.h.lease.Holder, Gateway: e.h.lines.gatewayID,
				Mode: e.mode, From: e.start.UTC(), Outcome: WaitWaiting})
		}
	}
	for h, lh := range c.holds {
		if lh.kind == kind && h.name == name {
			out.Figures.Holding++
			out.Figures.Held.Add(now.Sub(lh.rec.From))
			out.Holds = append(out.Holds, lh.rec)
		}
	}
	slices.SortFunc(out.Holds, func(a, b HoldRecord) int { return cmp.Or(a.From.Compare(b.From), cmp.Compare(a.Lease, b.Lease)) })
	slices.SortFunc(out.Waits, func(a, b WaitRecord) int { return cmp.Or(a.From.Compare(b.From), cmp.Compare(a.Lease, b.Lease)) })
	return out
}

// lineNotes is where a wait's listings of its line are noted: the
// figures' longest line.
type lineNotes struct {
	c          *Contention
	kind, name string
}

type lineNotesKey struct{}

// withLineNotes has the listings made for a wait under ctx noted in c.
func withLineNotes(ctx context.Context, c *Contention, kind, name string) context.Context {
	return context.WithValue(ctx, lineNotesKey{}, lineNotes{c, kind, name})
}

// noteLine notes how many wait in the line t shows, if ctx asks for it: a
// lock's waiters (everyone the holders keep waiting), or a semaphore's
// admission line (everyone in it waits for a slot).
func noteLine(ctx context.Context, t turn) {
	n, ok := ctx.Value(lineNotesKey{}).(lineNotes)
	if !ok {
		return
	}
	waiting := len(t.contenders)
	if n.kind == KindLock {
		waiting -= leadingHolders(t.contenders)
	}
	n.c.lineSeen(n.kind, n.name, waiting)
}

// leadingHolders counts the holders at the head of a lock's line: a
// writer-class node alone, or the readers before the first writer.
func leadingHolders(cs []seqNode) int {
	if len(cs) == 0 {
		return 0
	}
	if !cs[0].Reader {
		return 1
	}
	n := 0
	for n < len(cs) && cs[n].Reader {
		n++
	}
	return n
}

// NameStats are a name's figures as answers show them: counts, and times
// in seconds.
type NameStats struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Grants    int64  `json:"grants"`
	Timeouts  int64  `json:"timeouts"`
	Deadlocks int64  `json:"deadlocks"`
	// Waits and Holds are how many waits and holds the times cover: those
	// that ended in the window and those under way (Waiting, Holding).
	Waits       int64   `json:"waits"`
	Holds       int64   `json:"holds"`
	Waiting     int     `json:"waiting"`
	Holding     int     `json:"holding"`
	WaitSeconds Seconds `json:"wait_seconds"`
	HoldSeconds Seconds `json:"hold_seconds"`
	LongestLine int     `json:"longest_line"`
	Line        []int   `json:"line"`
}

// Seconds sum up durations: their total, median, 99th percentile and
// longest, in seconds (the percentiles within 9%).
type Seconds struct {
	Total float64 `json:"total"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

func secondsOf(h Histogram) Seconds {
	s := func(d time.Duration) float64 { return math.Round(d.Seconds()*1e6) / 1e6 }
	return Seconds{Total: s(h.Sum), P50: s(h.Quantile(.5)), P99: s(h.Quantile(.99)), Max: s(h.Max)}
}

// Stats are f as answers show them.
func (f *NameFigures) Stats() NameStats {
	return NameStats{Kind: f.Kind, Name: f.Name, Grants: f.Grants, Timeouts: f.Timeouts, Deadlocks: f.Deadlocks,
		Waits: f.Waited.Count, Holds: f.Held.Count, Waiting: f.Waiting, Holding: f.Holding,
		WaitSeconds: secondsOf(f.Waited), HoldSeconds: secondsOf(f.Held), LongestLine: f.LongestLine(), Line: slices.Clone(f.Line)}
}
