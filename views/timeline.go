package views

import (
	"fmt"
	"hash/fnv"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// The timeline of a name: time runs left to right over timelineWidth,
// holds in rows of holdRow (overlapping ones, a read lock's or a
// semaphore's, each in a row of its own), then each wait in a row of
// waitRow; at most maxWaitRows waits, the latest.
const (
	timelineWidth = 1000.0
	holdRow       = 18.0
	waitRow       = 9.0
	laneGap       = 10.0
	maxWaitRows   = 40
	holderColors  = 8
)

// Bar is one hold or wait drawn on a timeline.
type Bar struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

// Timeline is a name's holds and waits drawn over a window.
type Timeline struct {
	Bars   []Bar
	Height float64
	HoldsY float64 // where the waits start
	Ticks  []Tick
}

// Tick is a time marked on the timeline's axis.
type Tick struct {
	X     float64
	Label string
}

// holderClass colours the holds of one lease alike.
func holderClass(lease string) string {
	h := fnv.New32a()
	h.Write([]byte(lease))
	return "h" + strconv.Itoa(int(h.Sum32()%holderColors))
}

func span(from time.Time, until *time.Time, now time.Time) string {
	end := "now"
	d := now.Sub(from)
	if until != nil {
		end = until.UTC().Format("15:04:05.000")
		d = until.Sub(from)
	}
	return from.UTC().Format("15:04:05.000") + " → " + end + " (" + seconds(d.Seconds()) + ")"
}

// minTimeline is the shortest stretch of time a timeline shows.
const minTimeline = 10 * time.Second

// TimelineOf draws c's holds and waits from the first of them (a little
// before, and not before since) to now.
func TimelineOf(c *ChosenName, since, now time.Time) Timeline {
	first := now
	for _, h := range c.Holds {
		first = earliest(first, h.From)
	}
	for _, w := range c.Waits {
		first = earliest(first, w.From)
	}
	first = first.Add(-now.Sub(first) / 10)
	if now.Sub(first) < minTimeline {
		first = now.Add(-minTimeline)
	}
	if first.After(since) {
		since = first
	}
	total := now.Sub(since)
	if total <= 0 {
		total = time.Second
	}
	x := func(t time.Time) float64 {
		return max(0, min(timelineWidth, float64(t.Sub(since))/float64(total)*timelineWidth))
	}
	bar := func(from time.Time, until *time.Time, y, h float64) Bar {
		end := now
		if until != nil {
			end = *until
		}
		x0, x1 := x(from), x(end)
		return Bar{X: x0, Y: y, W: max(x1-x0, 1.5), H: h}
	}
	var tl Timeline
	var rowEnds []time.Time // the end of the last hold of each row
	for _, h := range c.Holds {
		end := now
		if h.Until != nil {
			end = *h.Until
		}
		row := 0
		for row < len(rowEnds) && rowEnds[row].After(h.From) {
			row++
		}
		if row == len(rowEnds) {
			rowEnds = append(rowEnds, end)
		} else {
			rowEnds[row] = end
		}
		b := bar(h.From, h.Until, float64(row)*holdRow, holdRow-3)
		b.Class = "hold " + holderClass(h.Lease)
		b.Title = fmt.Sprintf("%s held it, token %d, %s (lease %s via %s)", cmpOr(h.Holder, "lease "+short(h.Lease)), h.Token,
			span(h.From, h.Until, now), short(h.Lease), h.Gateway)
		tl.Bars = append(tl.Bars, b)
	}
	tl.HoldsY = float64(max(len(rowEnds), 1))*holdRow + laneGap
	waits := c.Waits[max(len(c.Waits)-maxWaitRows, 0):]
	for i, w := range waits {
		b := bar(w.From, w.Until, tl.HoldsY+float64(i)*waitRow, waitRow-2)
		b.Class = "wait " + w.Outcome
		b.Title = fmt.Sprintf("%s waited, %s: %s (lease %s via %s)", cmpOr(w.Holder, "lease "+short(w.Lease)), w.Outcome,
			span(w.From, w.Until, now), short(w.Lease), w.Gateway)
		tl.Bars = append(tl.Bars, b)
	}
	tl.Height = tl.HoldsY + float64(max(len(waits), 1))*waitRow
	for i := range 5 {
		t := since.Add(total * time.Duration(i) / 4)
		tl.Ticks = append(tl.Ticks, Tick{X: x(t), Label: t.UTC().Format("15:04:05")})
	}
	return tl
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// seconds shows a time in seconds as the page does: 340ms, 2.5s, 12m 3s.
func seconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Millisecond:
		return strconv.FormatFloat(s*1e6, 'f', 0, 64) + "µs"
	case d < time.Second:
		return strconv.FormatFloat(s*1e3, 'f', 0, 64) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(s, 'f', 1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
}

// ContentionURL is the contention page over window, with name chosen
// (kind "" for none).
func ContentionURL(window, kind, name string) string {
	q := url.Values{"window": {window}}
	if kind != "" {
		q.Set("kind", kind)
		q.Set("name", name)
	}
	return "/ui/contention?" + q.Encode()
}

func floats(line []int) []float64 {
	out := make([]float64, len(line))
	for i, n := range line {
		out[i] = float64(n)
	}
	return out
}

func fx(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// cycleText is a deadlock's cycle in one line.
func cycleText(d recipes.DeadlockRecord) string {
	s := ""
	for i, st := range d.Cycle {
		if i > 0 {
			s += " → "
		}
		s += partyOf(st) + " waits for " + st.Kind + " " + st.Name
	}
	if len(d.Cycle) > 0 {
		s += " → " + partyOf(d.Cycle[0])
	}
	return s
}

// partyOf names a party of a deadlock.
func partyOf(st recipes.CycleStep) string {
	if n := leaseParty(st.Holder, st.Lease); n != "" {
		return n
	}
	return "session " + st.Session
}

// waitsFor is what a step of a cycle waits for.
func waitsFor(st recipes.CycleStep) string {
	s := st.Kind + " " + st.Name
	if st.Mode != "" && st.Mode != recipes.ModeExclusive {
		s += " (" + st.Mode + ")"
	}
	return s
}

func joinComma(s []string) string { return strings.Join(s, ", ") }

// clip shortens s to n runes, with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
