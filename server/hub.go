package server

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
	page string
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
	d *dashboard

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

func newHub(d *dashboard) *hub {
	return &hub{d: d, dirty: map[string]struct{}{}, poke: make(chan struct{}, 1)}
}

// subscribe registers a dashboard showing page. Its first message is a
// snapshot of the page.
func (h *hub) subscribe(ctx context.Context, page string) (*subscriber, error) {
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
	s := &subscriber{page: page, ch: make(chan []byte, subscriberBuffer), ctx: sctx, drop: drop, run: run}
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

// hubWatcher keeps the paths the dashboards show in the watch cache.
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
// items that are gone.
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

// loop is the hub while dashboards are connected: the only goroutine that
// reads the state, renders, and writes to subscribers' channels, so that a
// snapshot and the updates after it are always in order.
func (h *hub) loop(run *hubRun) {
	defer close(run.done)
	d := h.d
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	sess := d.svc.Session()
	closing := make(chan struct{})
	var closeOnce sync.Once
	stopListen := sess.OnChange(func(c recipes.StateChange) {
		if c.State == recipes.StateClosed {
			closeOnce.Do(func() { close(closing) })
		}
		h.markDirty("")
	})
	defer stopListen()
	if st, _, _ := sess.Status(); st == recipes.StateClosed {
		closeOnce.Do(func() { close(closing) })
	}

	h.subscribed.Do(func() { d.source.dash.Subscribe(h.onChange) })
	h.active.Store(true)
	defer h.active.Store(false)
	w := &hubWatcher{dash: d.source.dash, held: map[string]func(){}}
	defer w.releaseAll()
	root := d.source.dash.Root()
	w.mu.Lock()
	for _, kind := range allKinds {
		w.hold(root + "/" + kind)
	}
	w.mu.Unlock()

	st := newDashState()
	h.takeDirty() // everything is read now
	lctx, lcancel := context.WithTimeout(ctx, hubReadTimeout)
	if err := d.source.loadAll(lctx, st, w); err != nil {
		d.log.Debug("dashboard: first read", "err", err)
	}
	lcancel()
	d.rates.reset()
	d.rates.sample(time.Now())
	refreshing := make(chan struct{}, 1)
	refreshing <- struct{}{}
	go h.refreshEnsemble(ctx, refreshing)

	subs := map[*subscriber]bool{}
	sent := map[string]*topicSent{}
	model := d.model(ctx, st, 0)

	cache := newRenderCache()

	// broadcast renders the topics that have clients (only those in only,
	// unless it is nil) and sends each client what changed of its own.
	broadcast := func(only map[string]bool) {
		topics := map[string][]wsFrag{}
		shown := map[string]bool{}
		for s := range subs {
			for _, t := range []string{topicHeader, s.page} {
				shown[t] = true
				if _, done := topics[t]; done || only != nil && !only[t] {
					continue
				}
				ts := sent[t]
				if ts == nil {
					ts = sentOf(topicView{})
					sent[t] = ts
				}
				topics[t] = ts.diff(renderTopic(ctx, t, model, cache))
			}
		}
		if only == nil {
			cache.sweep()
		}
		for t := range sent {
			if !shown[t] {
				delete(sent, t) // nobody shows it: a new client gets a snapshot
			}
		}
		now := time.Now().UnixMilli()
		byPage := map[string][]byte{}
		for s := range subs {
			msg, ok := byPage[s.page]
			if !ok {
				frags := append(slices.Clone(topics[topicHeader]), topics[s.page]...)
				if len(frags) > 0 {
					msg = encodeMessage(wsMessage{Now: now, Frags: frags})
				}
				byPage[s.page] = msg
			}
			if msg != nil {
				h.send(subs, s, msg)
			}
		}
	}

	// Only what this gateway keeps in memory changes without a ZooKeeper
	// event: lease expiries, grant times, rates, the session.
	timeDriven := map[string]bool{topicHeader: true, "overview": true, "leases": true}
	lastGrants := ""
	refresh := func(tick bool) {
		paths := h.takeDirty()
		rctx, rcancel := context.WithTimeout(ctx, hubReadTimeout)
		defer rcancel()
		kinds := map[string]bool{}
		items := map[string]map[string]bool{}
		for p := range paths {
			kind, name, ok := splitPath(root, p)
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
		for kind := range kinds {
			if err := d.source.loadKind(rctx, st, kind, w, false); err != nil {
				d.log.Debug("dashboard: read", "kind", kind, "err", err)
			}
		}
		for kind, names := range items {
			var known []string
			for _, n := range st.names[kind] { // sorted, and only names still there
				if names[n] {
					known = append(known, n)
				}
			}
			d.source.loadItems(rctx, st, kind, known)
		}
		if len(paths) == 0 && !tick {
			return
		}
		model = d.model(ctx, st, len(subs))
		grants := model.grantsFP()
		if len(paths) == 0 && grants == lastGrants {
			broadcast(timeDriven)
		} else {
			broadcast(nil)
		}
		lastGrants = grants
	}

	tick := time.NewTicker(hubTick)
	defer tick.Stop()
	var lastFlush time.Time
	var flushTimer *time.Timer
	var flushC <-chan time.Time
	var linger <-chan time.Time
	for {
		select {
		case s := <-run.reg:
			h.mu.Lock()
			run.pending--
			h.mu.Unlock()
			// Bring the others up to date first, so that the snapshot and
			// the diffs after it start from the same state.
			refresh(false)
			model = d.model(ctx, st, len(subs)+1)
			broadcast(timeDriven) // the count of dashboards
			subs[s] = true
			d.setClients(len(subs))
			linger = nil
			var frags []wsFrag
			for _, t := range []string{topicHeader, s.page} {
				v := renderTopic(ctx, t, model, cache)
				sent[t] = sentOf(v)
				frags = append(frags, snapshotFrags(v)...)
			}
			h.send(subs, s, encodeMessage(wsMessage{Snapshot: true, Now: time.Now().UnixMilli(), Frags: frags}))
		case s := <-run.unreg:
			if subs[s] {
				delete(subs, s)
				d.setClients(len(subs))
			}
			if len(subs) == 0 {
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
			refresh(false)
		case now := <-tick.C:
			d.rates.sample(now)
			select {
			case refreshing <- struct{}{}:
				go h.refreshEnsemble(ctx, refreshing)
			default: // one still under way
			}
			refresh(true)
		case <-linger:
			h.mu.Lock()
			idle := run.pending == 0 && len(subs) == 0
			if idle {
				h.run = nil
			}
			h.mu.Unlock()
			if idle {
				if flushTimer != nil {
					flushTimer.Stop()
				}
				return
			}
		case <-closing:
			h.mu.Lock()
			h.closed = true
			h.run = nil
			h.mu.Unlock()
			for s := range subs {
				s.drop(errSessionClosed)
			}
			d.setClients(0)
			if flushTimer != nil {
				flushTimer.Stop()
			}
			return
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
