package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

const (
	// subscriberBuffer is how many messages a dashboard may fall behind
	// before it is dropped; it then reconnects and resyncs from a snapshot.
	subscriberBuffer = 64
	// hubLinger keeps the watches for a while after the last dashboard
	// leaves: moving to another page reconnects at once.
	hubLinger = 15 * time.Second
	// hubFlushGap bounds how often a burst of changes is pushed.
	hubFlushGap = 50 * time.Millisecond
	// hubTick refreshes what changes without a ZooKeeper event: lease
	// expiries (keepalives are served from memory), rates, the ensemble.
	hubTick = time.Second
	// hubReadTimeout bounds the reads of one refresh.
	hubReadTimeout = 10 * time.Second
)

var (
	errTooSlow       = errors.New("dashboard client too slow: dropped")
	errHubClosed     = errors.New("the gateway is shutting down")
	errSessionClosed = errors.New("the ZooKeeper session is closed")
)

// wsFrag is one fragment of a message: replace the element with id by html,
// upsert it into the list parent (sorted by key), or remove it.
type wsFrag struct {
	Op     string `json:"op"`
	ID     string `json:"id"`
	Parent string `json:"parent,omitempty"`
	Key    string `json:"key,omitempty"`
	HTML   string `json:"html,omitempty"`
}

// wsMessage is what /ws sends: first a snapshot, then updates.
type wsMessage struct {
	Snapshot bool     `json:"snapshot,omitempty"`
	Now      int64    `json:"now"` // the server's clock, Unix ms
	Frags    []wsFrag `json:"frags"`
}

// subscriber is one dashboard connection.
type subscriber struct {
	view dashView
	ch   chan []byte
	ctx  context.Context
	drop context.CancelCauseFunc // ends the connection
	run  *hubRun
}

// hub is the single subscriber of the watch cache on behalf of every
// dashboard: it keeps the paths they show watched (one ZooKeeper watch per
// path however many browsers look), turns changes into rendered fragments
// and fans them out, one buffered channel per client. It runs only while
// dashboards are connected (and a linger after).
type hub struct {
	d *Dashboard

	mu     sync.Mutex
	run    *hubRun // nil while idle
	closed bool

	subscribed sync.Once
	active     atomic.Bool
	dirtyMu    sync.Mutex
	dirty      map[string]struct{} // paths changed since the last refresh; "" is the session
	poke       chan struct{}
}

type hubRun struct {
	reg     chan *subscriber
	unreg   chan *subscriber
	done    chan struct{}
	pending int // subscribers on their way in; guarded by hub.mu
}

func newHub(d *Dashboard) *hub {
	return &hub{d: d, dirty: map[string]struct{}{}, poke: make(chan struct{}, 1)}
}

// subscribe registers a dashboard showing v. Its first message is a
// snapshot of it.
func (h *hub) subscribe(ctx context.Context, v dashView) (*subscriber, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errHubClosed
	}
	run := h.run
	if run == nil {
		run = &hubRun{reg: make(chan *subscriber), unreg: make(chan *subscriber), done: make(chan struct{})}
		h.run = run
		go h.loop(run)
	}
	run.pending++
	h.mu.Unlock()
	sctx, drop := context.WithCancelCause(ctx)
	s := &subscriber{view: v, ch: make(chan []byte, subscriberBuffer), ctx: sctx, drop: drop, run: run}
	select {
	case run.reg <- s:
		return s, nil
	case <-run.done:
		drop(errHubClosed)
		return nil, errHubClosed
	}
}

// unsubscribe forgets a dashboard that went away.
func (h *hub) unsubscribe(s *subscriber) {
	s.drop(nil)
	select {
	case s.run.unreg <- s:
	case <-s.run.done:
	}
}

// onChange is told of every change the watch cache sees; it must not block.
func (h *hub) onChange(p string) {
	if !h.active.Load() {
		return
	}
	h.markDirty(p)
}

func (h *hub) markDirty(p string) {
	h.dirtyMu.Lock()
	h.dirty[p] = struct{}{}
	h.dirtyMu.Unlock()
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

func (h *hub) takeDirty() map[string]struct{} {
	h.dirtyMu.Lock()
	defer h.dirtyMu.Unlock()
	d := h.dirty
	h.dirty = map[string]struct{}{}
	return d
}

// hubWatcher keeps the paths the dashboards show in the watch cache: the
// kinds' nodes, and the items their pages show.
type hubWatcher struct {
	dash recipes.Dashboard
	mu   sync.Mutex
	held map[string]func() // path -> release
}

func (w *hubWatcher) hold(p string) {
	if _, ok := w.held[p]; ok {
		return
	}
	if release, err := w.dash.Hold(p); err == nil {
		w.held[p] = release
	}
}

// keep holds the paths of the named items of kind, and releases those of
// the other items of kind.
func (w *hubWatcher) keep(kind string, names []string) {
	root := w.dash.Root()
	want := map[string]bool{}
	for _, n := range names {
		for _, p := range itemPaths(root, kind, n) {
			want[p] = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for p := range want {
		w.hold(p)
	}
	prefix := root + "/" + kind + "/"
	for p, release := range w.held {
		if strings.HasPrefix(p, prefix) && !want[p] {
			release()
			delete(w.held, p)
		}
	}
}

func (w *hubWatcher) releaseAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, release := range w.held {
		release()
		delete(w.held, p)
	}
}

// topicSent is what the clients of a topic have been sent, to send only
// what changed.
type topicSent struct {
	singles map[string]string
	lists   map[string]map[string]string // list id -> item id -> html
}

func sentOf(v topicView) *topicSent {
	t := &topicSent{singles: map[string]string{}, lists: map[string]map[string]string{}}
	for _, s := range v.singles {
		t.singles[s.id] = s.html
	}
	for _, l := range v.lists {
		items := map[string]string{}
		for _, it := range l.items {
			items[it.id] = it.html
		}
		t.lists[l.id] = items
	}
	return t
}

// diff returns the fragments that turn what was sent into v, and records v.
func (t *topicSent) diff(v topicView) []wsFrag {
	var out []wsFrag
	for _, s := range v.singles {
		if t.singles[s.id] != s.html {
			out = append(out, wsFrag{Op: "replace", ID: s.id, HTML: s.html})
			t.singles[s.id] = s.html
		}
	}
	for _, l := range v.lists {
		old := t.lists[l.id]
		now := make(map[string]string, len(l.items))
		for _, it := range l.items {
			now[it.id] = it.html
			if prev, ok := old[it.id]; !ok || prev != it.html {
				out = append(out, wsFrag{Op: "upsert", ID: it.id, Parent: l.id, Key: it.key, HTML: it.html})
			}
		}
		var gone []string
		for id := range old {
			if _, ok := now[id]; !ok {
				gone = append(gone, id)
			}
		}
		slices.Sort(gone)
		for _, id := range gone {
			out = append(out, wsFrag{Op: "remove", ID: id})
		}
		t.lists[l.id] = now
	}
	return out
}

// snapshotFrags is the whole of v: every single, every list in one piece.
func snapshotFrags(v topicView) []wsFrag {
	var out []wsFrag
	for _, s := range v.singles {
		out = append(out, wsFrag{Op: "replace", ID: s.id, HTML: s.html})
	}
	for _, l := range v.lists {
		out = append(out, wsFrag{Op: "replace", ID: l.id, HTML: l.container()})
	}
	return out
}

// hubLoop is the state of the hub while dashboards are connected. Only its
// goroutine (hub.loop) reads the state, renders, and writes to subscribers'
// channels, so that a snapshot and the updates after it are always in order.
type hubLoop struct {
	h     *hub
	d     *Dashboard
	ctx   context.Context
	root  string
	w     *hubWatcher
	st    *dashState
	model *dashModel
	cache *renderCache

	subs       map[*subscriber]bool
	sent       map[string]*topicSent // what the clients of each topic (a view's key) were sent
	lastGrants string                // the grants the last broadcast showed
	refreshing chan struct{}         // full while the ensemble is being asked
}

// timeDriven are the topics that change without a ZooKeeper event, from
// what this gateway keeps in memory: lease expiries, grant times, rates,
// the session.
var timeDriven = map[string]bool{topicHeader: true, "overview": true, "leases": true}

// loop is the hub while dashboards are connected.
func (h *hub) loop(run *hubRun) {
	defer close(run.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	closing, stopListen := h.watchSession()
	defer stopListen()
	l := h.start(ctx)
	defer l.w.releaseAll()
	defer h.active.Store(false)

	tick := time.NewTicker(hubTick)
	defer tick.Stop()
	var lastFlush time.Time
	var flushTimer *time.Timer
	var flushC <-chan time.Time
	var linger <-chan time.Time
	defer func() {
		if flushTimer != nil {
			flushTimer.Stop()
		}
	}()
	for {
		select {
		case s := <-run.reg:
			h.mu.Lock()
			run.pending--
			h.mu.Unlock()
			l.register(s)
			linger = nil
		case s := <-run.unreg:
			if l.unregister(s) == 0 {
				linger = time.After(hubLinger)
			}
		case <-h.poke:
			if flushC == nil {
				flushTimer = time.NewTimer(max(hubFlushGap-time.Since(lastFlush), 0))
				flushC = flushTimer.C
			}
		case <-flushC:
			flushC = nil
			lastFlush = time.Now()
			l.refresh(false)
		case now := <-tick.C:
			l.d.rates.sample(now)
			l.askEnsemble()
			l.readContention()
			l.refresh(true)
		case <-linger:
			h.mu.Lock()
			idle := run.pending == 0 && len(l.subs) == 0
			if idle {
				h.run = nil
			}
			h.mu.Unlock()
			if idle {
				return
			}
		case <-closing:
			h.mu.Lock()
			h.closed = true
			h.run = nil
			h.mu.Unlock()
			for s := range l.subs {
				s.drop(errSessionClosed)
			}
			l.d.setClients(0)
			return
		}
	}
}

// watchSession marks the session dirty at every change of state, and
// returns a channel closed once the session is closed.
func (h *hub) watchSession() (closing <-chan struct{}, stop func()) {
	sess := h.d.svc.Session()
	closed := make(chan struct{})
	var once sync.Once
	stop = sess.OnChange(func(c recipes.StateChange) {
		if c.State == recipes.StateClosed {
			once.Do(func() { close(closed) })
		}
		h.markDirty("")
	})
	if st, _, _ := sess.Status(); st == recipes.StateClosed {
		once.Do(func() { close(closed) })
	}
	return closed, stop
}

// start watches what the dashboards show and reads all of it once.
func (h *hub) start(ctx context.Context) *hubLoop {
	d := h.d
	h.subscribed.Do(func() { d.source.dash.Subscribe(h.onChange) })
	h.active.Store(true)
	root := d.source.dash.Root()
	l := &hubLoop{h: h, d: d, ctx: ctx, root: root, st: newDashState(), cache: newRenderCache(),
		w:    &hubWatcher{dash: d.source.dash, held: map[string]func(){}},
		subs: map[*subscriber]bool{}, sent: map[string]*topicSent{}, refreshing: make(chan struct{}, 1)}
	l.w.mu.Lock()
	for _, kind := range allKinds {
		l.w.hold(root + "/" + kind)
	}
	l.w.mu.Unlock()
	h.takeDirty() // everything is read now
	lctx, lcancel := context.WithTimeout(ctx, hubReadTimeout)
	if err := d.source.loadAll(lctx, l.st, l.w, nil); err != nil {
		d.log.Debug("dashboard: first read", "err", err)
	}
	lcancel()
	d.rates.reset()
	d.rates.sample(time.Now())
	l.askEnsemble()
	l.model = d.model(ctx, l.st, 0)
	return l
}

// readContention has the contention views the dashboards show read again,
// off the loop: each read marks the hub dirty when it is done.
func (l *hubLoop) readContention() {
	var vs []contentionView
	for s := range l.subs {
		if s.view.page == pageContention {
			vs = append(vs, s.view.contention)
		}
	}
	l.d.feed.refresh(l.ctx, vs, func() { l.h.markDirty(pageContention) })
}

// askEnsemble asks the servers for their mode, unless that is under way.
func (l *hubLoop) askEnsemble() {
	select {
	case l.refreshing <- struct{}{}:
		go l.h.refreshEnsemble(l.ctx, l.refreshing)
	default:
	}
}

// register adds a dashboard and sends it a snapshot of its view.
func (l *hubLoop) register(s *subscriber) {
	// Bring the others up to date first, so that the snapshot and the diffs
	// after it start from the same state.
	l.refresh(false)
	l.subs[s] = true
	l.show()
	l.model = l.d.model(l.ctx, l.st, len(l.subs))
	delete(l.subs, s)
	l.broadcast(timeDriven) // the count of dashboards
	l.subs[s] = true
	l.d.setClients(len(l.subs))
	l.readContention()
	var frags []wsFrag
	for _, v := range []dashView{{page: topicHeader}, s.view} {
		t := renderTopic(l.ctx, v, l.model, l.cache)
		l.sent[v.key()] = sentOf(t)
		frags = append(frags, snapshotFrags(t)...)
	}
	l.h.send(l.subs, s, encodeMessage(wsMessage{Snapshot: true, Now: time.Now().UnixMilli(), Frags: frags}))
}

// unregister forgets a dashboard and returns how many are left; what only
// it showed is no longer read nor watched.
func (l *hubLoop) unregister(s *subscriber) int {
	if l.subs[s] {
		delete(l.subs, s)
		l.d.setClients(len(l.subs))
		l.show()
	}
	return len(l.subs)
}

// views are the views the dashboards show.
func (l *hubLoop) views() []dashView {
	seen := map[string]bool{}
	var out []dashView
	for s := range l.subs {
		if k := s.view.key(); !seen[k] {
			seen[k] = true
			out = append(out, s.view)
		}
	}
	return out
}

// show reads and watches the items the dashboards' views show now, and
// lets the others go.
func (l *hubLoop) show() {
	rctx, rcancel := context.WithTimeout(l.ctx, hubReadTimeout)
	defer rcancel()
	vs := l.views()
	for _, kind := range allKinds {
		if itemPaths(l.root, kind, "x") == nil {
			continue // its node says all
		}
		if err := l.d.source.loadShown(rctx, l.st, kind, l.w, false, vs); err != nil {
			l.d.log.Debug("dashboard: read", "kind", kind, "err", err)
		}
	}
}

// refresh reads again what changed (tick: and what time changes), and
// sends every dashboard what changed of what it shows.
func (l *hubLoop) refresh(tick bool) {
	paths := l.h.takeDirty()
	rctx, rcancel := context.WithTimeout(l.ctx, hubReadTimeout)
	defer rcancel()
	kinds, items := l.changed(paths)
	vs := l.views()
	for kind := range kinds {
		if err := l.d.source.loadKind(rctx, l.st, kind, l.w, false, vs); err != nil {
			l.d.log.Debug("dashboard: read", "kind", kind, "err", err)
		}
	}
	for kind, names := range items {
		var known []string
		for _, n := range l.st.loaded(kind) { // only items shown, and still there
			if names[n] {
				known = append(known, n)
			}
		}
		l.d.source.loadItems(rctx, l.st, kind, known)
	}
	if len(paths) == 0 && !tick {
		return
	}
	l.model = l.d.model(l.ctx, l.st, len(l.subs))
	grants := l.model.grantsFP()
	if len(paths) == 0 && grants == l.lastGrants {
		l.broadcast(timeDriven)
	} else {
		l.broadcast(nil)
	}
	l.lastGrants = grants
}

// changed sorts changed paths into kinds whose list changed and named
// items that changed.
func (l *hubLoop) changed(paths map[string]struct{}) (kinds map[string]bool, items map[string]map[string]bool) {
	kinds, items = map[string]bool{}, map[string]map[string]bool{}
	for p := range paths {
		kind, name, ok := splitPath(l.root, p)
		switch {
		case !ok:
		case name == "":
			kinds[kind] = true
		default:
			if items[kind] == nil {
				items[kind] = map[string]bool{}
			}
			items[kind][name] = true
		}
	}
	return kinds, items
}

// broadcast renders the topics that have clients (only those in only,
// pages named, unless it is nil) and sends each client what changed of its
// own.
func (l *hubLoop) broadcast(only map[string]bool) {
	topics := map[string][]wsFrag{}
	shown := map[string]bool{}
	header := dashView{page: topicHeader}
	for s := range l.subs {
		for _, v := range []dashView{header, s.view} {
			t := v.key()
			shown[t] = true
			if _, done := topics[t]; done || only != nil && !only[v.page] {
				continue
			}
			ts := l.sent[t]
			if ts == nil {
				ts = sentOf(topicView{})
				l.sent[t] = ts
			}
			topics[t] = ts.diff(renderTopic(l.ctx, v, l.model, l.cache))
		}
	}
	if only == nil {
		l.cache.sweep()
	}
	for t := range l.sent {
		if !shown[t] {
			delete(l.sent, t) // nobody shows it: a new client gets a snapshot
		}
	}
	now := time.Now().UnixMilli()
	byView := map[string][]byte{}
	for s := range l.subs {
		k := s.view.key()
		msg, ok := byView[k]
		if !ok {
			frags := append(slices.Clone(topics[header.key()]), topics[k]...)
			if len(frags) > 0 {
				msg = encodeMessage(wsMessage{Now: now, Frags: frags})
			}
			byView[k] = msg
		}
		if msg != nil {
			l.h.send(l.subs, s, msg)
		}
	}
}

// encodeMessage is the JSON of m; the HTML in it stays as it is (no \u003c).
func encodeMessage(m wsMessage) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m) // plain strings and numbers: it cannot fail
	return b.Bytes()
}

// send queues msg for s, or drops s if it has fallen too far behind.
func (h *hub) send(subs map[*subscriber]bool, s *subscriber, msg []byte) {
	select {
	case s.ch <- msg:
	default:
		delete(subs, s)
		s.drop(errTooSlow)
		h.d.dropped.Inc()
		h.d.setClients(len(subs))
	}
}

// refreshEnsemble asks the servers for their mode, off the hub's loop (a
// dead server takes seconds to time out), then has the hub show it.
func (h *hub) refreshEnsemble(ctx context.Context, running chan struct{}) {
	defer func() { <-running }()
	if _, asked := h.d.ensemble.get(ctx); asked {
		h.markDirty("")
	}
}
