package dashboard

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/zkgate/zkgate/views"
)

// The live pages, each a topic of the hub; every page also has the header.
const topicHeader = "header"

var livePages = []string{"overview", "locks", "semaphores", "leases", pageContention, "elections", "barriers", "queues"}

// A topic renders to single fragments (replaced whole) and lists of items
// (each item upserted or removed by id, the list replaced whole in a
// snapshot). Every fragment is the HTML of one templ component, the same
// component the page itself is made of.
type (
	single struct{ id, html string }
	item   struct{ id, key, html string }
	list   struct {
		id        string
		items     []item
		container func() string // the whole list, for snapshots
	}
	topicView struct {
		singles []single
		lists   []list
	}
)

// renderCache keeps the HTML of list items between refreshes of the hub,
// by id, with a fingerprint of what it was rendered from: with a thousand
// locks, one that changes is rendered again, not the thousand.
type renderCache struct {
	prev, next map[string]cachedHTML
}

type cachedHTML struct{ fp, html string }

func newRenderCache() *renderCache {
	return &renderCache{prev: map[string]cachedHTML{}, next: map[string]cachedHTML{}}
}

// get returns the HTML of item id, rendering it only if its fingerprint
// changed. A nil cache always renders.
func (c *renderCache) get(id, fp string, render func() string) string {
	if c == nil {
		return render()
	}
	if h, ok := c.next[id]; ok && h.fp == fp {
		return h.html
	}
	if h, ok := c.prev[id]; ok && h.fp == fp {
		c.next[id] = h
		return h.html
	}
	h := cachedHTML{fp, render()}
	c.next[id] = h
	return h.html
}

// sweep forgets the items that the last refresh did not use.
func (c *renderCache) sweep() {
	c.prev, c.next = c.next, map[string]cachedHTML{}
}

// grantsFP fingerprints grant times, which change what a holder shows.
func grantsFP(g map[string]time.Time) string {
	if len(g) == 0 {
		return ""
	}
	var b strings.Builder
	for _, k := range sortedKeys(g) {
		fmt.Fprintf(&b, "%s=%d;", k, g[k].UnixNano())
	}
	return b.String()
}

func leaseFP(l views.Lease) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%s|%s|%t|%d|%d", l.Holder, l.Gateway, l.TTL, l.ID, l.Local, l.CreatedAt.UnixNano(), l.ExpiresAt.UnixNano())
	for _, h := range l.Holds {
		fmt.Fprintf(&b, "|%s %s %s%s%s %d %s", h.Kind, h.Name, h.Mode, h.Member, h.Item, h.Token, h.State)
	}
	return b.String()
}

func renderHTML(ctx context.Context, c templ.Component) string {
	var b strings.Builder
	if err := c.Render(ctx, &b); err != nil {
		// Rendering into a strings.Builder fails only if ctx is done.
		return ""
	}
	return b.String()
}

// renderTopic renders what v shows of m (the header's view is topicHeader).
func renderTopic(ctx context.Context, v dashView, m *dashModel, cache *renderCache) topicView {
	r := func(c templ.Component) string { return renderHTML(ctx, c) }
	cached := func(id, fp string, c templ.Component) string {
		return cache.get(id, fp, func() string { return r(c) })
	}
	var t topicView
	if v.page == pageContention {
		cv := v.contention
		c, ok := views.Contention{Window: cv.window, Err: "Asking the gateways…"}, false
		if m.contention != nil {
			c, ok = m.contention(cv)
		}
		if ok {
			t.singles = append(t.singles, single{"contention", r(views.ContentionBody(c))})
		}
		return t
	}
	counts := m.header.Counts
	switch v.page {
	case topicHeader:
		t.singles = append(t.singles, single{"zk-state", r(views.ZKBadge(m.header.ZK))})
		for _, p := range views.NavPages() {
			n, _ := views.NavCount(p, counts)
			t.singles = append(t.singles, single{"count-" + p, r(views.NavCounter(p, n))})
		}
	case "overview":
		t.singles = append(t.singles, single{"overview", r(views.OverviewBody(m.overview()))})
	case "locks":
		locks, lp := m.locksPage(v)
		t.singles = append(t.singles, single{"locks-summary", r(views.LocksSummary(counts))}, single{"pager", r(views.Pager(lp))})
		l := list{id: "locks-list", container: func() string { return r(views.LocksList(locks)) }}
		for _, x := range locks {
			id := "lock-" + x.Name
			l.items = append(l.items, item{id, x.Name, cached(id, fmt.Sprint(x.Index, grantsFP(x.GrantedAt)), views.LockItem(x))})
		}
		t.lists = append(t.lists, l)
	case "semaphores":
		sems, lp := m.semsPage(v)
		t.singles = append(t.singles, single{"sems-summary", r(views.SemaphoresSummary(counts))}, single{"pager", r(views.Pager(lp))})
		l := list{id: "sems-list", container: func() string { return r(views.SemaphoresList(sems)) }}
		for _, x := range sems {
			id := "sem-" + x.Name
			l.items = append(l.items, item{id, x.Name, cached(id, fmt.Sprint(x.Index, grantsFP(x.GrantedAt)), views.SemaphoreItem(x))})
		}
		t.lists = append(t.lists, l)
	case "leases":
		leases, lp := m.leasesPage(v)
		t.singles = append(t.singles, single{"leases-summary", r(views.LeasesSummary(counts))}, single{"pager", r(views.Pager(lp))})
		l := list{id: "leases-list", container: func() string { return r(views.LeaseRows(leases)) }}
		for _, x := range leases {
			id := "lease-" + x.ID
			l.items = append(l.items, item{id, views.LeaseKey(x), cached(id, leaseFP(x), views.LeaseRow(x))})
		}
		t.lists = append(t.lists, l)
	case "elections":
		els, lp := m.electionsPage(v)
		t.singles = append(t.singles, single{"elections-summary", r(views.ElectionsSummary(counts))}, single{"pager", r(views.Pager(lp))})
		l := list{id: "elections-list", container: func() string { return r(views.ElectionsList(els)) }}
		for _, x := range els {
			id := "election-" + x.Name
			l.items = append(l.items, item{id, x.Name, cached(id, fmt.Sprint(x.Index, grantsFP(x.GrantedAt)), views.ElectionItem(x))})
		}
		t.lists = append(t.lists, l)
	case "barriers":
		bs, dbs, lp := m.barriersPage(v)
		t.singles = append(t.singles, single{"barriers-summary", r(views.BarriersSummary(counts))}, single{"pager", r(views.Pager(lp))})
		b := list{id: "barriers-list", container: func() string { return r(views.BarriersList(bs)) }}
		for _, x := range bs {
			b.items = append(b.items, item{"barrier-" + x.Name, x.Name, r(views.BarrierItem(x))})
		}
		d := list{id: "dbarriers-list", container: func() string { return r(views.DoubleBarriersList(dbs)) }}
		for _, x := range dbs {
			id := "dbarrier-" + x.Name
			d.items = append(d.items, item{id, x.Name, cached(id, fmt.Sprint(x.Index), views.DoubleBarrierItem(x))})
		}
		t.lists = append(t.lists, b, d)
	case "queues":
		qs, lp := m.queuesPage(v)
		t.singles = append(t.singles, single{"queues-summary", r(views.QueuesSummary(counts))}, single{"pager", r(views.Pager(lp))})
		l := list{id: "queues-list", container: func() string { return r(views.QueuesList(qs)) }}
		for _, x := range qs {
			id := "queue-" + x.Name
			l.items = append(l.items, item{id, x.Name, cached(id, fmt.Sprint(x.Index), views.QueueItem(x))})
		}
		t.lists = append(t.lists, l)
	}
	return t
}
