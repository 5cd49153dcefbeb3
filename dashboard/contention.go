package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/zkgate/zkgate/recipes"
	"github.com/zkgate/zkgate/views"
)

// The contention page shows the figures of every gateway, which come from
// asking each (the API's Contention), not from ZooKeeper: the hub asks
// again once a second for each view a dashboard shows (a window, and a
// name chosen or none), off its loop, and pushes what changed.

const pageContention = "contention"

// contentionView is what a contention page shows: its window, and the
// name whose holds and waits it draws (kind "": none).
type contentionView struct {
	window, kind, name string
}

// contentionViewOf reads the view a request asks for.
func contentionViewOf(q url.Values) (contentionView, error) {
	v := contentionView{window: q.Get("window"), kind: q.Get("kind"), name: q.Get("name")}
	if v.window == "" {
		v.window = recipes.DefaultContentionWindow
	}
	if _, ok := recipes.ContentionWindows[v.window]; !ok {
		return v, recipes.Errorf(recipes.CodeInvalid, "window must be 1m, 15m or 1h")
	}
	switch {
	case v.kind == "" && v.name == "":
	case v.kind != recipes.KindLock && v.kind != recipes.KindSemaphore:
		return v, recipes.Errorf(recipes.CodeInvalid, "kind must be lock or semaphore")
	default:
		if err := recipes.ValidName(v.name); err != nil {
			return v, err
		}
	}
	return v, nil
}

// topic is the hub topic of the view: its page and query.
func (v contentionView) topic() string {
	q := url.Values{"window": {v.window}}
	if v.kind != "" {
		q.Set("kind", v.kind)
		q.Set("name", v.name)
	}
	return pageContention + "?" + q.Encode()
}

// feedKeep is how long what a page read is kept for its dashboard's
// stream, which connects right after the page loads.
const feedKeep = 10 * time.Second

// contentionFeed keeps the figures each view last read, and reads them
// again on request, one read under way per view at most.
type contentionFeed struct {
	api          ContentionReader // nil: this gateway keeps no figures
	hideSessions bool             // see Config.HideSessions

	mu    sync.Mutex
	views map[contentionView]*feedEntry
}

type feedEntry struct {
	shown   views.Contention
	reading bool
	kept    time.Time // when a page read it: its dashboard connects next
}

// read asks every gateway for what v shows (at most peerTimeout each).
func (f *contentionFeed) read(ctx context.Context, v contentionView) views.Contention {
	now := time.Now()
	c := views.Contention{Window: v.window, Since: recipes.WindowSince(now, recipes.ContentionWindows[v.window]), Now: now,
		Names: []recipes.NameStats{}, Deadlocks: []recipes.DeadlockRecord{}}
	if f.api == nil {
		c.Err = "This gateway keeps no contention figures."
		return c
	}
	unreachable := map[string]bool{}
	rep := f.api.Contention(ctx, v.window, 20, nil, "")
	c.Names = rep.Names
	for _, u := range rep.Unreachable {
		unreachable[u.Gateway] = true
	}
	// Deadlocks are those of the last hour, whatever the window.
	if v.window == "1h" {
		c.Deadlocks = rep.Deadlocks
	} else {
		c.Deadlocks = f.api.Contention(ctx, "1h", 1, nil, "").Deadlocks
	}
	if f.hideSessions {
		for i, d := range c.Deadlocks {
			c.Deadlocks[i] = d.Shown(func(string, string) bool { return false })
		}
	}
	if v.kind != "" {
		nr := f.api.NameContention(ctx, v.kind, v.name, v.window, "")
		c.Chosen = &views.ChosenName{NameStats: nr.NameStats, Holds: nr.RecentHolds, Waits: nr.RecentWaits}
		for _, u := range nr.Unreachable {
			unreachable[u.Gateway] = true
		}
	}
	c.Unreachable = sortedKeys(unreachable)
	return c
}

// keep records what v showed last (a page read it for its first render).
func (f *contentionFeed) keep(v contentionView, c views.Contention) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.views == nil {
		f.views = map[contentionView]*feedEntry{}
	}
	e := f.views[v]
	if e == nil {
		e = &feedEntry{}
		f.views[v] = e
	}
	e.shown, e.kept = c, time.Now()
}

// shown is what v showed last; false if it was never read.
func (f *contentionFeed) shown(v contentionView) (views.Contention, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.views[v]
	if !ok {
		return views.Contention{}, false
	}
	return e.shown, true
}

// refresh reads each of vs again in the background (those not being read
// already), calling changed after each, and forgets the other views.
func (f *contentionFeed) refresh(ctx context.Context, vs []contentionView, changed func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.views == nil {
		f.views = map[contentionView]*feedEntry{}
	}
	wanted := map[contentionView]bool{}
	for _, v := range vs {
		wanted[v] = true
		e := f.views[v]
		if e == nil {
			e = &feedEntry{shown: views.Contention{Window: v.window, Now: time.Now(), Err: "Asking the gateways…"}}
			f.views[v] = e
		}
		if e.reading {
			continue
		}
		e.reading = true
		go func() {
			rctx, cancel := context.WithTimeout(ctx, hubReadTimeout)
			c := f.read(rctx, v)
			cancel()
			f.mu.Lock()
			e.shown, e.reading = c, false
			f.mu.Unlock()
			changed()
		}()
	}
	for v, e := range f.views {
		if !wanted[v] && !e.reading && time.Since(e.kept) > feedKeep {
			delete(f.views, v)
		}
	}
}

// contention serves GET /ui/contention: the page of a view, read at once.
func (d *Dashboard) contention(w http.ResponseWriter, r *http.Request) {
	v, err := contentionViewOf(r.URL.Query())
	status := http.StatusOK
	var c views.Contention
	if err != nil {
		status = http.StatusBadRequest
		c = views.Contention{Window: recipes.DefaultContentionWindow, Now: time.Now(), Err: errDetail(err)}
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), pageReadTimeout)
		defer cancel()
		c = d.feed.read(ctx, v)
		d.feed.keep(v, c)
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageReadTimeout)
	defer cancel()
	st := newDashState()
	_ = d.source.loadAll(ctx, st, nil, []dashView{{page: pageContention}}) // the header's counts, as on every page
	p := d.pageOf(pageContention, d.model(ctx, st, int(d.nclients.Load())), err == nil)
	p.SignedIn = signedIn(r)
	WritePage(w, r, status, views.ContentionPage(p, c))
}
