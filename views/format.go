package views

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// StaticURL is the URL of a file of package static, versioned so that a
// new build is never served from an old cache.
func StaticURL(file, version string) string {
	return "/ui/static/" + file + "?v=" + version
}

// ms is a time as Unix milliseconds, which the browser counts from.
func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func iso(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// clock is the fallback text of a time the browser makes relative.
func clock(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}

// clockShort is a time of today as the clock shows it, seconds included:
// the deadlines a page shows are seconds away.
func clockShort(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return t.UTC().Format("15:04:05") + " UTC"
}

func itoa[T ~int | ~int32 | ~int64 | ~uint64](n T) string { return fmt.Sprint(n) }

// LeaseIDForm says whether id has the form of a lease id: a lower-case
// UUID.
func LeaseIDForm(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// short is the start of a UUID, enough to tell leases apart on a screen.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// label is how a contender is named: its lease's holder label, or for a
// foreign node its data.
func label(h recipes.Contender) string {
	if n := leaseParty(h.Holder, h.Lease); n != "" {
		return n
	}
	if h.Foreign {
		return "(no data)"
	}
	return h.Node
}

// leaseParty names a party that has a lease: by its holder label, else by
// its lease; "" for a party with neither.
func leaseParty(holder, lease string) string {
	if holder != "" {
		return holder
	}
	if lease != "" {
		return "lease " + short(lease)
	}
	return ""
}

// LeaseWords names a lease in a line: "lease 0b5c6f7e (worker-1)".
func LeaseWords(id, holder string) string { return "lease " + short(id) + holderWords(holder) }

// holderWords is " (label)" of a lease's holder label, if it has one.
func holderWords(holder string) string {
	if holder == "" {
		return ""
	}
	return " (" + holder + ")"
}

// lockDelayWords ends "nothing it held is granted to another lease" by how
// long: its lock-delay, which only the lease's own gateway knows.
func lockDelayWords(d string) string {
	switch d {
	case "":
		return " for the lock-delay it was made with"
	case "0s":
		return " for its lock-delay of 0s: that is, they are granted at once"
	}
	return " for " + d + ", its lock-delay"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func perSec(f float64) string {
	switch {
	case f == 0:
		return "0"
	case f < 10:
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'f', 0, 64)
}

// sparkline turns a series into the points of an SVG polyline of w x h.
func sparkline(series []float64, w, h float64) string {
	if len(series) < 2 {
		return ""
	}
	top := 1.0
	for _, v := range series {
		top = max(top, v)
	}
	var b strings.Builder
	step := w / float64(len(series)-1)
	for i, v := range series {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", float64(i)*step, h-1-(v/top)*(h-2))
	}
	return b.String()
}

func peak(series []float64) float64 {
	top := 0.0
	for _, v := range series {
		top = max(top, v)
	}
	return top
}

// sinceTime is when a holder got what it holds: the grant time when its
// gateway (this one) knows it, else the creation of its node.
func sinceTime(h recipes.Contender, granted map[string]time.Time, holder bool) time.Time {
	if t, ok := granted[h.Node]; ok && holder {
		return t
	}
	return h.Since
}

// sinceApprox says that sinceTime is the node's creation: the holder may have
// waited in line first, so it has held for at most that long.
func sinceApprox(h recipes.Contender, granted map[string]time.Time, holder bool) bool {
	_, ok := granted[h.Node]
	return holder && !ok
}

func modeOf(l recipes.LockState) string {
	if len(l.Holders) == 0 {
		return ""
	}
	m := l.Holders[0].Mode
	for _, h := range l.Holders[1:] {
		if h.Mode != m {
			return "mixed"
		}
	}
	if m == "" {
		return recipes.ModeExclusive
	}
	return m
}

// HoldLine names a hold: "lock invoices", "semaphore gpu", "claim emails (ID)".
func HoldLine(h recipes.HoldInfo) string { return holdLine(h) }

func holdLine(h recipes.HoldInfo) string {
	s := h.Kind + " " + h.Name
	switch {
	case h.Mode != "" && h.Mode != recipes.ModeExclusive:
		s += " (" + h.Mode + ")"
	case h.Member != "":
		s += " (" + h.Member + ")"
	case h.Item != "":
		s += " (" + h.Item + ")"
	}
	return s
}

func stateWord(st string) string {
	switch st {
	case "live":
		return "ZooKeeper live"
	case "suspended":
		return "ZooKeeper suspended"
	case "connecting":
		return "ZooKeeper connecting"
	case "lost":
		return "session lost"
	case "closed":
		return "closed"
	}
	return st
}

func modeClass(mode string) string {
	switch mode {
	case "leader", "standalone":
		return "ok"
	case "follower", "observer":
		return "ok2"
	}
	return "bad"
}

// PageURL is the URL of a page of a list: the items whose name contains q,
// after the name after.
func PageURL(page, q, after string) string {
	v := url.Values{}
	if q != "" {
		v.Set("q", q)
	}
	if after != "" {
		v.Set("after", after)
	}
	u := "/ui/" + page
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	return u
}

// matchingWord follows a count of items that a filter matches.
func matchingWord(q string) string {
	if q == "" {
		return ""
	}
	return " matching " + strconv.Quote(q)
}

// amongShown says, after a kind's totals, that they are counted among the
// items its pages show: it has too many to read them all.
func amongShown(c Counts, kind string) string {
	if slices.Contains(c.Partial, kind) {
		return " among those shown"
	}
	return ""
}
