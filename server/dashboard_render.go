package server

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

// renderTopic renders what topic shows of m.
func renderTopic(ctx context.Context, topic string, m *dashModel, cache *renderCache) topicView {
	r := func(c templ.Component) string { return renderHTML(ctx, c) }
	cached := func(id, fp string, c templ.Component) string {
		return cache.get(id, fp, func() string { return r(c) })
	}
	var v topicView
	if cv, ok := contentionTopic(topic); ok {
		c, ok := views.Contention{Window: cv.window, Err: "Asking the gateways…"}, false
		if m.contention != nil {
			c, ok = m.contention(cv)
		}
		if ok {
			v.singles = append(v.singles, single{"contention", r(views.ContentionBody(c))})
		}
		return v
	}
	counts := m.header.Counts
	switch topic {
	case topicHeader:
		v.singles = append(v.singles, single{"zk-state", r(views.ZKBadge(m.header.ZK))})
		for _, p := range views.NavPages() {
			n, _ := views.NavCount(p, counts)
			v.singles = append(v.singles, single{"count-" + p, r(views.NavCounter(p, n))})
		}
	case "overview":
		v.singles = append(v.singles, single{"overview", r(views.OverviewBody(m.overview()))})
	case "locks":
		v.singles = append(v.singles, single{"locks-summary", r(views.LocksSummary(counts))})
		l := list{id: "locks-list", container: func() string { return r(views.LocksList(m.locks)) }}
		for _, x := range m.locks {
			id := "lock-" + x.Name
			l.items = append(l.items, item{id, x.Name, cached(id, fmt.Sprint(x.Index, grantsFP(x.GrantedAt)), views.LockItem(x))})
		}
		v.lists = append(v.lists, l)
	case "semaphores":
		v.singles = append(v.singles, single{"sems-summary", r(views.SemaphoresSummary(counts))})
		l := list{id: "sems-list", container: func() string { return r(views.SemaphoresList(m.sems)) }}
		for _, x := range m.sems {
			id := "sem-" + x.Name
			l.items = append(l.items, item{id, x.Name, cached(id, fmt.Sprint(x.Index, grantsFP(x.GrantedAt)), views.SemaphoreItem(x))})
		}
		v.lists = append(v.lists, l)
	case "leases":
		v.singles = append(v.singles, single{"leases-summary", r(views.LeasesSummary(counts))})
		l := list{id: "leases-list", container: func() string { return r(views.LeaseRows(m.leases)) }}
		for _, x := range m.leases {
			id := "lease-" + x.ID
			l.items = append(l.items, item{id, views.LeaseKey(x), cached(id, leaseFP(x), views.LeaseRow(x))})
		}
		v.lists = append(v.lists, l)
	case "elections":
		v.singles = append(v.singles, single{"elections-summary", r(views.ElectionsSummary(counts))})
		l := list{id: "elections-list", container: func() string { return r(views.ElectionsList(m.elections)) }}
		for _, x := range m.elections {
			id := "election-" + x.Name
			l.items = append(l.items, item{id, x.Name, cached(id, fmt.Sprint(x.Index, grantsFP(x.GrantedAt)), views.ElectionItem(x))})
		}
		v.lists = append(v.lists, l)
	case "barriers":
		v.singles = append(v.singles, single{"barriers-summary", r(views.BarriersSummary(counts))})
		b := list{id: "barriers-list", container: func() string { return r(views.BarriersList(m.barriers)) }}
		for _, x := range m.barriers {
			b.items = append(b.items, item{"barrier-" + x.Name, x.Name, r(views.BarrierItem(x))})
		}
		d := list{id: "dbarriers-list", container: func() string { return r(views.DoubleBarriersList(m.dbarriers)) }}
		for _, x := range m.dbarriers {
			id := "dbarrier-" + x.Name
			d.items = append(d.items, item{id, x.Name, cached(id, fmt.Sprint(x.Index), views.DoubleBarrierItem(x))})
		}
		v.lists = append(v.lists, b, d)
	case "queues":
		v.singles = append(v.singles, single{"queues-summary", r(views.QueuesSummary(counts))})
		l := list{id: "queues-list", container: func() string { return r(views.QueuesList(m.queues)) }}
		for _, x := range m.queues {
			id := "queue-" + x.Name
			l.items = append(l.items, item{id, x.Name, cached(id, fmt.Sprint(x.Index), views.QueueItem(x))})
		}
		v.lists = append(v.lists, l)
	}
	return v
}
