package dashboard

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/zkgate/zkgate/recipes"
	"github.com/zkgate/zkgate/views"
)

// The live pages, each a topic of the hub; every page also has the header.
const topicHeader = "header"

var livePages = []string{"overview", kindLocks, kindSems, "leases", pageContention, kindElections, kindBarriers, kindQueues,
	kindGroups,
	kindCounters,
}

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
	// The confirmed deadline moves at every answer of ZooKeeper to the
	// session; the row shows its second, and is rendered (and replaced in the
	// browsers, under a pointer on its controls) only when that changes.
	fmt.Fprintf(&b, "%s|%s|%s|%s|%t|%d|%d|%d|%s|%t", l.Holder, l.Gateway, l.TTL, l.ID, l.Local, l.CreatedAt.UnixNano(), l.ExpiresAt.Unix(),
		l.RenewedAt.UnixNano(), l.LockDelay, l.Admin)
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

// renderer renders the fragments of a topic, list items through its
// cache (nil: rendered every time).
type renderer struct {
	ctx   context.Context
	cache *renderCache
	// variant tells apart, in the cache, the renderings of one item for
	// different viewers: a lease's with an admin's controls, and without.
	variant string
}

func (r renderer) html(c templ.Component) string { return renderHTML(r.ctx, c) }

// cached is the HTML of the item id, rendered again only when fp changed.
func (r renderer) cached(id, fp string, c templ.Component) string {
	return r.cache.get(id, fp, func() string { return r.html(c) })
}

// itemOf is how one item of a list renders: its id, its key in the list's
// order, the fingerprint of what it shows, and its component.
type itemOf struct {
	id, key, fp string
	c           templ.Component
}

// listOf renders the list id of xs: whole, for snapshots, and item by item.
func listOf[T any](r renderer, id string, xs []T, whole func([]T) templ.Component, each func(T) itemOf) list {
	l := list{id: id, container: func() string { return r.html(whole(xs)) }}
	for _, x := range xs {
		it := each(x)
		l.items = append(l.items, item{it.id, it.key, r.cached(it.id+r.variant, it.fp, it.c)})
	}
	return l
}

// listPage is a page of lists: its summary, its pager and the lists.
func (r renderer) listPage(summaryID string, summary templ.Component, lp views.ListPage, lists ...list) topicView {
	return topicView{singles: []single{{summaryID, r.html(summary)}, {views.IDPager, r.html(views.Pager(lp))}}, lists: lists}
}

// renderTopic renders what v shows of m (the header's view is topicHeader).
func renderTopic(ctx context.Context, v dashView, m *dashModel, cache *renderCache) topicView {
	r := renderer{ctx: ctx, cache: cache}
	if v.admin {
		r.variant = "#admin"
	}
	counts := m.header.Counts
	switch v.page {
	case pageContention:
		return r.contention(v.contention, m)
	case topicHeader:
		t := topicView{singles: []single{{views.IDZKState, r.html(views.ZKBadge(m.header.ZK))}, {views.IDActions, r.html(views.Actions(m.header.Actions))}}}
		for _, p := range views.NavPages() {
			n, _ := views.NavCount(p, counts)
			t.singles = append(t.singles, single{views.CountID(p), r.html(views.NavCounter(p, n))})
		}
		return t
	case "overview":
		return topicView{singles: []single{{views.IDOverview, r.html(views.OverviewBody(m.overview()))}}}
	case kindLocks:
		locks, lp := m.locksPage(v)
		return r.listPage(views.IDLocksSummary, views.LocksSummary(counts), lp, listOf(r, views.IDLocksList, locks, views.LocksList,
			func(x views.Lock) itemOf {
				return itemOf{views.LockID(x.Name), x.Name, fmt.Sprint(x.Index, grantsFP(x.GrantedAt)), views.LockItem(x)}
			}))
	case kindSems:
		sems, lp := m.semsPage(v)
		return r.listPage(views.IDSemsSummary, views.SemaphoresSummary(counts), lp, listOf(r, views.IDSemsList, sems, views.SemaphoresList,
			func(x views.Semaphore) itemOf {
				return itemOf{views.SemaphoreID(x.Name), x.Name, fmt.Sprint(x.Index, grantsFP(x.GrantedAt)), views.SemaphoreItem(x)}
			}))
	case "leases":
		leases, lp := m.leasesPage(v)
		return r.listPage(views.IDLeasesSummary, views.LeasesSummary(counts), lp, listOf(r, views.IDLeasesList, leases, views.LeaseRows,
			func(x views.Lease) itemOf {
				return itemOf{views.LeaseID(x.ID), views.LeaseKey(x), leaseFP(x), views.LeaseRow(x)}
			}))
	case kindElections:
		els, lp := m.electionsPage(v)
		return r.listPage(views.IDElectionsSummary, views.ElectionsSummary(counts), lp, listOf(r, views.IDElectionsList, els, views.ElectionsList,
			func(x views.Election) itemOf {
				return itemOf{views.ElectionID(x.Name), x.Name, fmt.Sprint(x.Index, grantsFP(x.GrantedAt)), views.ElectionItem(x)}
			}))
	case kindBarriers:
		return r.barriers(v, m)
	case kindQueues:
		qs, lp := m.queuesPage(v)
		return r.listPage(views.IDQueuesSummary, views.QueuesSummary(counts), lp, listOf(r, views.IDQueuesList, qs, views.QueuesList,
			func(x recipes.QueueState) itemOf {
				return itemOf{views.QueueID(x.Name), x.Name, fmt.Sprint(x.Index), views.QueueItem(x)}
			}))
	case kindGroups:
		gs, lp := m.groupsPage(v)
		return r.listPage(views.IDGroupsSummary, views.GroupsSummary(counts), lp, listOf(r, views.IDGroupsList, gs, views.GroupsList,
			func(x recipes.GroupState) itemOf {
				return itemOf{views.GroupID(x.Name), x.Name, fmt.Sprint(x.Index), views.GroupItem(x)}
			}))
	case kindCounters:
		cs, lp := m.countersPage(v)
		return r.listPage(views.IDCountersSummary, views.CountersSummary(counts), lp, listOf(r, views.IDCountersList, cs, views.CountersList,
			func(x views.Counter) itemOf {
				return itemOf{views.CounterID(x.Name), x.Name, fmt.Sprint(x.Index), views.CounterItem(x)}
			}))
	}
	return topicView{}
}

// barriers renders the barriers' page: the barriers, each rendered every
// time (it is small, and has no version to fingerprint it by), and the
// double barriers.
func (r renderer) barriers(v dashView, m *dashModel) topicView {
	bs, dbs, lp := m.barriersPage(v)
	uncached := renderer{ctx: r.ctx}
	return r.listPage(views.IDBarriersSummary, views.BarriersSummary(m.header.Counts), lp,
		listOf(uncached, views.IDBarriersList, bs, views.BarriersList,
			func(x recipes.BarrierState) itemOf {
				return itemOf{views.BarrierID(x.Name), x.Name, "", views.BarrierItem(x)}
			}),
		listOf(r, views.IDDBarriersList, dbs, views.DoubleBarriersList,
			func(x recipes.DoubleBarrierState) itemOf {
				return itemOf{views.DoubleBarrierID(x.Name), x.Name, fmt.Sprint(x.Index), views.DoubleBarrierItem(x)}
			}))
}

// contention renders the contention page's view cv, once it was read.
func (r renderer) contention(cv contentionView, m *dashModel) topicView {
	if m.contention == nil {
		return topicView{}
	}
	c, ok := m.contention(cv)
	if !ok {
		return topicView{}
	}
	return topicView{singles: []single{{views.IDContention, r.html(views.ContentionBody(c))}}}
}
