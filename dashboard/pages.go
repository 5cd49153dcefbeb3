package dashboard

import (
	"cmp"
	"net/url"
	"slices"
	"strings"

	"github.com/zkgate/zkgate/recipes"
	"github.com/zkgate/zkgate/views"
)

const (
	// dashPageSize is how many items a page of a list shows: a page of
	// locks is some 50 KB of HTML, whatever the number of locks.
	dashPageSize = 50
	// dashReadWhole: the items of a kind with at most this many names are
	// all read (and watched, while dashboards are open), so that its
	// counts, and what the leases of other gateways hold, are whole; a
	// kind with more is read where a page shows it.
	dashReadWhole = 500
	// dashQueryMax bounds ?q= and ?after=: a name is at most 200 bytes.
	dashQueryMax = 256
)

// dashView is what one dashboard shows: a page and, for a page of lists,
// the filter (the names that contain q, ignoring case) and the name its
// lists start after; for the contention page, its window and name chosen.
type dashView struct {
	page, q, after string
	contention     contentionView
	// admin views show an admin's controls (see isAdmin).
	admin bool
}

// viewOf is the view of page that query asks for.
func viewOf(page string, query url.Values) dashView {
	v := dashView{page: page}
	if page == "overview" {
		return v
	}
	v.q = strings.TrimSpace(query.Get("q"))
	v.after = query.Get("after")
	if len(v.q) > dashQueryMax {
		v.q = v.q[:dashQueryMax]
	}
	if len(v.after) > dashQueryMax {
		v.after = ""
	}
	return v
}

// key names v as a topic of the hub: the dashboards that show the same
// view share its rendering.
func (v dashView) key() string {
	if v.page == pageContention {
		return v.contention.topic()
	}
	k := v.page
	if v.q != "" || v.after != "" {
		k += "?" + url.Values{"q": {v.q}, "after": {v.after}}.Encode()
	}
	if v.admin {
		k += "#admin" // an admin's controls: a rendering of its own
	}
	return k
}

// pageOfKind is the dashboard page that lists kind (see dashKind.page).
func pageOfKind(kind string) string {
	return cmp.Or(dashKinds[kind].page, kind)
}

// matches reports whether text holds q, ignoring case.
func matches(text, q string) bool {
	return q == "" || strings.Contains(strings.ToLower(text), strings.ToLower(q))
}

// namePage is the part of a sorted list of names a view shows: the names
// that match its filter after its start, at most dashPageSize of them.
type namePage struct {
	shown    []string
	next     string // the start of the next page; "" on the last
	matching int
}

func pageOfNames(names []string, v dashView) namePage {
	var p namePage
	for _, n := range names {
		if !matches(n, v.q) {
			continue
		}
		p.matching++
		switch {
		case n <= v.after:
		case len(p.shown) < dashPageSize:
			p.shown = append(p.shown, n)
		case p.next == "":
			p.next = p.shown[len(p.shown)-1]
		}
	}
	return p
}

// shownNames are the names of kind whose items views show: every name of
// a kind that has at most dashReadWhole, else those on the views' pages
// (the overview shows the first page of the locks and semaphores).
func shownNames(kind string, names []string, views []dashView) []string {
	if len(names) <= dashReadWhole {
		return names
	}
	shown := map[string]bool{}
	for _, v := range views {
		var page namePage
		switch {
		case v.page == pageOfKind(kind):
			page = pageOfNames(names, v)
		case v.page == "overview" && (kind == kindLocks || kind == kindSems):
			page = pageOfNames(names, dashView{page: v.page})
		}
		for _, n := range page.shown {
			shown[n] = true
		}
	}
	out := make([]string, 0, len(shown))
	for n := range shown {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// namesOf lists the names of a kind to page through: of the items read,
// when every one is (an empty one is left out), else every name.
func (m *dashModel) namesOf(kind string, read []string) []string {
	if m.whole[kind] {
		return read
	}
	return m.names[kind]
}

// onPage keeps, of items, those whose name p shows.
func onPage[T any](items []T, name func(T) string, p namePage) []T {
	shown := make(map[string]bool, len(p.shown))
	for _, n := range p.shown {
		shown[n] = true
	}
	out := []T{}
	for _, it := range items {
		if shown[name(it)] {
			out = append(out, it)
		}
	}
	return out
}

func listPageOf(v dashView, p namePage, shown int) views.ListPage {
	return views.ListPage{Page: v.page, Q: v.q, After: v.after, Next: p.next, Shown: shown, Matching: p.matching}
}

// kindPage is the page v shows of items, the items of kind read, by name.
func kindPage[T any](m *dashModel, kind string, items []T, name func(T) string, v dashView) ([]T, views.ListPage) {
	p := pageOfNames(m.namesOf(kind, mapped(items, name)), v)
	shown := onPage(items, name, p)
	return shown, listPageOf(v, p, len(shown))
}

func (m *dashModel) locksPage(v dashView) ([]views.Lock, views.ListPage) {
	return kindPage(m, kindLocks, m.locks, func(l views.Lock) string { return l.Name }, v)
}

func (m *dashModel) semsPage(v dashView) ([]views.Semaphore, views.ListPage) {
	return kindPage(m, kindSems, m.sems, func(s views.Semaphore) string { return s.Name }, v)
}

func (m *dashModel) electionsPage(v dashView) ([]views.Election, views.ListPage) {
	return kindPage(m, kindElections, m.elections, func(e views.Election) string { return e.Name }, v)
}

func (m *dashModel) queuesPage(v dashView) ([]recipes.QueueState, views.ListPage) {
	return kindPage(m, kindQueues, m.queues, func(q recipes.QueueState) string { return q.Name }, v)
}

func (m *dashModel) groupsPage(v dashView) ([]recipes.GroupState, views.ListPage) {
	return kindPage(m, kindGroups, m.groups, func(g recipes.GroupState) string { return g.Name }, v)
}

func (m *dashModel) countersPage(v dashView) ([]views.Counter, views.ListPage) {
	return kindPage(m, kindCounters, m.counters, func(c views.Counter) string { return c.Name }, v)
}

// barriersPage pages the barriers and the double barriers together: each
// list shows its first page after v.after, and the next page starts after
// the earlier of their ends, so that no item is skipped (some may show
// twice).
func (m *dashModel) barriersPage(v dashView) ([]recipes.BarrierState, []recipes.DoubleBarrierState, views.ListPage) {
	bname := func(b recipes.BarrierState) string { return b.Name }
	dname := func(d recipes.DoubleBarrierState) string { return d.Name }
	bp := pageOfNames(mapped(m.barriers, bname), v)
	dp := pageOfNames(m.namesOf(kindDBarriers, mapped(m.dbarriers, dname)), v)
	bs, dbs := onPage(m.barriers, bname, bp), onPage(m.dbarriers, dname, dp)
	next := bp.next
	if dp.next != "" && (next == "" || dp.next < next) {
		next = dp.next
	}
	lp := views.ListPage{Page: v.page, Q: v.q, After: v.after, Next: next, Shown: len(bs) + len(dbs), Matching: bp.matching + dp.matching}
	return bs, dbs, lp
}

// leasesPage pages the leases in the order of views.LeaseKey; the filter
// matches a lease's holder label or id.
func (m *dashModel) leasesPage(v dashView) ([]views.Lease, views.ListPage) {
	lp := views.ListPage{Page: v.page, Q: v.q, After: v.after}
	shown := []views.Lease{}
	for _, l := range m.leases {
		if !matches(l.Holder+" "+l.ID, v.q) {
			continue
		}
		lp.Matching++
		switch k := views.LeaseKey(l); {
		case k <= v.after:
		case len(shown) < dashPageSize:
			shown = append(shown, l)
		case lp.Next == "":
			lp.Next = views.LeaseKey(shown[len(shown)-1])
		}
	}
	lp.Shown = len(shown)
	for i := range shown {
		shown[i].Admin = v.admin
	}
	return shown, lp
}

func mapped[T any](items []T, f func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = f(it)
	}
	return out
}
