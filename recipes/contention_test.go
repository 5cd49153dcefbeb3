package recipes

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A histogram's percentiles are within 9% of the true ones (and never
// above the max), its count, sum and max exact; merging two is adding
// every duration to one, also through JSON (another gateway's).
func TestHistogramPercentilesAndMerge(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	var all, a, b Histogram
	var ds []time.Duration
	for i := range 5000 {
		d := time.Duration(math.Exp(rng.NormFloat64()*2+math.Log(float64(50*time.Millisecond)))) + time.Microsecond
		ds = append(ds, d)
		all.Add(d)
		if i%3 == 0 {
			a.Add(d)
		} else {
			b.Add(d)
		}
	}
	slices.Sort(ds)
	for _, q := range []float64{.5, .9, .99} {
		want := ds[int(math.Ceil(q*float64(len(ds))))-1]
		got := all.Quantile(q)
		if math.Abs(float64(got-want))/float64(want) > 0.095 {
			t.Errorf("p%v = %s, want %s within 9%%", q*100, got, want)
		}
	}
	if all.Max != ds[len(ds)-1] || all.Quantile(1) != all.Max || all.Count != 5000 {
		t.Errorf("max %s (want %s), p100 %s, count %d", all.Max, ds[len(ds)-1], all.Quantile(1), all.Count)
	}
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var b2 Histogram
	if err := json.Unmarshal(raw, &b2); err != nil {
		t.Fatal(err)
	}
	a.Merge(b2)
	if fmt.Sprint(a) != fmt.Sprint(all) || !a.sane() {
		t.Errorf("merged %v\nwant   %v", a, all)
	}
	var empty Histogram
	if empty.Quantile(.5) != 0 || !empty.sane() {
		t.Errorf("an empty histogram: p50 %s", empty.Quantile(.5))
	}
	broken := all
	broken.Count++
	if broken.sane() {
		t.Errorf("a histogram whose buckets do not add up to its count passes as sane")
	}
}

// fakeHold is a hold of a lease of gateway gw, for the record's own tests.
func fakeHold(kind, name, lease string) *hold {
	lh := &lockHold{mode: ModeExclusive}
	lh.hold = hold{lines: &lines{gatewayID: "gw"}, lease: &Lease{LeaseTerms: LeaseTerms{ID: lease, Holder: "holder-" + lease}}, kind: kind, name: name}
	lh.self = lh
	return &lh.hold
}

// The record on a clock of its own: waits and holds counted in the minute
// they end, the window in whole minutes, what is under way counted as far
// as it went, the last holds kept, and names past the bound dropped least
// recently used first.
func TestContentionFigures(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	c := NewContention(nil)
	c.now = func() time.Time { return now }
	h := fakeHold(KindLock, "ledger", "lease-1")

	e := c.startWait(h, KindLock, ModeExclusive, func(error) {})
	now = now.Add(2 * time.Second)
	c.endWait(e, nil)
	h.token, h.grantedAt = 42, now
	c.granted(h)
	now = now.Add(20 * time.Minute)
	c.released(h)
	e = c.startWait(h, KindLock, ModeExclusive, func(error) {})
	now = now.Add(time.Second)
	c.endWait(e, &Error{Code: CodeTimeout})
	c.lineSeen(KindLock, "ledger", 7)
	w := fakeHold(KindLock, "ledger", "lease-2")
	e = c.startWait(w, KindLock, ModeExclusive, func(error) {})
	now = now.Add(3 * time.Second)

	figures := func(window time.Duration) NameFigures {
		t.Helper()
		fs := c.Figures(window, nil)
		if len(fs) != 1 {
			t.Fatalf("figures of %d names, want 1: %+v", len(fs), fs)
		}
		return fs[0]
	}
	// The last minute: the timeout, the hold's end, and the wait under
	// way; not the grant, 20 minutes ago.
	f := figures(time.Minute)
	if f.Grants != 0 || f.Timeouts != 1 || f.Waiting != 1 || f.Waited.Count != 2 || f.Held.Count != 1 || f.Held.Max != 20*time.Minute ||
		f.Waited.Sum != 4*time.Second || f.LongestLine() != 7 || len(f.Line) != 2 {
		t.Errorf("1m: %+v", f)
	}
	f = figures(time.Hour)
	if f.Grants != 1 || f.Timeouts != 1 || f.Waited.Count != 3 || f.Waited.Sum != 6*time.Second || len(f.Line) != 61 {
		t.Errorf("1h: %+v", f)
	}
	if s := f.Stats(); s.WaitSeconds.Total != 6 || s.WaitSeconds.Max != 3 || s.HoldSeconds.Max != 1200 || s.Waits != 3 || s.Waiting != 1 {
		t.Errorf("1h stats: %+v", s)
	}
	log := c.Name(KindLock, "ledger", time.Hour)
	if len(log.Holds) != 1 || log.Holds[0].Token != 42 || log.Holds[0].Until == nil || log.Holds[0].Until.Sub(log.Holds[0].From) != 20*time.Minute ||
		log.Holds[0].Holder != "holder-lease-1" || log.Holds[0].Gateway != "gw" || log.Holds[0].Mode != ModeExclusive {
		t.Errorf("holds: %+v", log.Holds)
	}
	if len(log.Waits) != 3 || log.Waits[0].Outcome != WaitGranted || log.Waits[1].Outcome != WaitTimeout || log.Waits[2].Outcome != WaitWaiting ||
		log.Waits[2].Until != nil || log.Waits[2].Lease != "lease-2" {
		t.Errorf("waits: %+v", log.Waits)
	}
	c.endWait(e, context.Canceled)
	if got := c.Name(KindLock, "ledger", time.Minute).Waits; len(got) != 2 || got[1].Outcome != WaitFailed {
		t.Errorf("after the wait ended: %+v", got)
	}
	// An hour and two minutes later nothing is in any window.
	now = now.Add(62 * time.Minute)
	if fs := c.Figures(time.Hour, nil); len(fs) != 0 {
		t.Errorf("figures after an hour: %+v", fs)
	}
	// keep picks names (a token's permissions).
	c.lineSeen(KindSemaphore, "pool", 1)
	if fs := c.Figures(time.Minute, func(kind, _ string) bool { return kind == KindLock }); len(fs) != 0 {
		t.Errorf("a semaphore passed a filter of locks: %+v", fs)
	}

	namesAreBounded(t, c)
}

// namesAreBounded checks that c keeps at most ContentionNames names: the
// least recently used goes.
func namesAreBounded(t *testing.T, c *Contention) {
	t.Helper()
	for i := range ContentionNames {
		c.lineSeen(KindLock, fmt.Sprintf("n%d", i), 1)
	}
	c.lineSeen(KindLock, "n0", 2) // used again: n1 is now the oldest
	c.lineSeen(KindLock, "extra", 1)
	if len(c.names) != ContentionNames {
		t.Fatalf("%d names kept, want %d", len(c.names), ContentionNames)
	}
	if _, ok := c.names[nameKey{KindLock, "n1"}]; ok {
		t.Errorf("n1, the least recently used, was kept")
	}
	if _, ok := c.names[nameKey{KindLock, "n0"}]; !ok {
		t.Errorf("n0, used again, was dropped")
	}
}

// A name keeps its last contentionRecent holds.
func TestContentionKeepsTheLastHolds(t *testing.T) {
	t.Parallel()
	c := NewContention(nil)
	for i := range contentionRecent + 5 {
		h := fakeHold(KindLock, "busy", fmt.Sprintf("lease-%d", i))
		h.token, h.grantedAt = int64(i), time.Now()
		c.granted(h)
		c.released(h)
	}
	holds := c.Name(KindLock, "busy", time.Minute).Holds
	if len(holds) != contentionRecent || holds[len(holds)-1].Token != contentionRecent+4 || holds[0].Token != 5 {
		t.Errorf("%d holds kept, tokens %d to %d; want the last %d", len(holds), holds[0].Token, holds[len(holds)-1].Token, contentionRecent)
	}
}

// The record's memory is bounded by its names: ContentionNames names, each
// with an hour of minutes whose waits and holds hit 60 buckets each (every
// duration from 100µs to 3 minutes), and its last holds and waits with
// 200-byte holder labels. The measure is in docs/contention.md.
func TestContentionMemoryIsBounded(t *testing.T) {
	// Serial: measures the heap of the whole test binary.
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := NewContention(nil)
	c.now = func() time.Time { return now }
	label := strings.Repeat("h", 200)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for range contentionMinutes {
		for n := range ContentionNames {
			h := fakeHold(KindLock, fmt.Sprintf("name-%04d", n), fmt.Sprintf("%036d", n))
			h.lease.Holder = label + strconv.Itoa(n) // a label of its own
			for i := range 60 {
				d := time.Duration(float64(histogramUnit) * math.Exp2(float64(i)/4))
				e := c.startWait(h, KindLock, ModeExclusive, func(error) {})
				e.start = now.Add(-d)
				c.endWait(e, nil)
				h.token, h.grantedAt = int64(i), now.Add(-d)
				c.granted(h)
				c.released(h)
			}
		}
		now = now.Add(time.Minute)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	used := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d names, %d minutes, 60 buckets of waits and of holds a minute, %d holds and waits kept each: %.1f MiB",
		len(c.names), contentionMinutes, contentionRecent, float64(used)/(1<<20))
	if len(c.names) != ContentionNames {
		t.Errorf("%d names kept", len(c.names))
	}
	if used > 64<<20 {
		t.Errorf("the record takes %.1f MiB, more than the 64 MiB docs/contention.md promises at most", float64(used)/(1<<20))
	}
	runtime.KeepAlive(c)
}
