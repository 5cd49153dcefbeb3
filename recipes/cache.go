package recipes

import (
	"context"
	"errors"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// Node is a child znode as the cache saw it.
type Node struct {
	Name string
	Data []byte
	Stat zk.Stat
}

// Snapshot is the state of one watched znode: whether it exists and its
// children with their data. Index grows whenever the state changes: it is
// taken from ZooKeeper zxids, so it also grows across gateways and restarts.
type Snapshot struct {
	Path     string
	Exists   bool
	Data     []byte
	Stat     zk.Stat
	Children []Node // sorted by name
	Index    int64
}

// Bounds of the back-off between failed loads of a cache entry.
const (
	cacheRetryMin = 50 * time.Millisecond
	cacheRetryMax = 5 * time.Second
)

// watchCache keeps one ZooKeeper watch per path, however many readers wait
// on it, and fans changes out in memory. An entry lives while it is read and
// for a while after (linger); then it stops re-arming its watch.
type watchCache struct {
	sess   *Session
	log    *slog.Logger
	linger time.Duration

	mu      sync.Mutex
	entries map[string]*cacheEntry
	closed  bool
	wg      sync.WaitGroup

	watching atomic.Int64 // entries with an armed watch, for metrics and leak tests
	subs     []func(path string)
}

type cacheEntry struct {
	path string
	opts entryOpts

	// guarded by watchCache.mu
	snap     *Snapshot
	err      error
	ready    chan struct{} // closed once the first load is done
	changed  chan struct{} // closed and replaced at every new snapshot
	offered  bool          // snap came from offer, not from a load
	refs     int
	lastUsed time.Time
	stop     chan struct{}
}

// entryOpts say how an entry reads its children. The first reader of a path
// decides; every reader of a given path is the same recipe, so they agree.
type entryOpts struct {
	// namesOnly reads no child at all: queue items can be many and large,
	// and the queues read what they need themselves.
	namesOnly bool
	// sequential says that every child is a sequential node, whose name is
	// never reused while its parent lives: a child seen before under the
	// same name is the same node, and its data need not be read again.
	sequential bool
}

// seqOpts read a parent of sequential nodes: a lock, an election, a
// semaphore's directories.
var seqOpts = entryOpts{sequential: true}

// readState is a recipe's State: once name checks out, the snapshot of p
// from the watch cache (with index > 0, a blocking read), made into T by
// of.
func readState[T any](ctx context.Context, c *watchCache, name, p string, opts entryOpts, index int64, wait time.Duration,
	of func(name string, snap *Snapshot) T) (T, error) {
	if err := ValidName(name); err != nil {
		var zero T
		return zero, err
	}
	snap, err := c.Read(ctx, p, opts, index, wait)
	if err != nil {
		var zero T
		return zero, readErr(err)
	}
	return of(name, snap), nil
}

func newWatchCache(sess *Session, log *slog.Logger) *watchCache {
	return &watchCache{sess: sess, log: log.With("component", "watch-cache"), linger: 30 * time.Second,
		entries: map[string]*cacheEntry{}}
}

// Read returns the snapshot of p, read as opts say. With index > 0 and the
// snapshot's index equal to it, it first waits up to wait for a change (a
// blocking read).
func (c *watchCache) Read(ctx context.Context, p string, opts entryOpts, index int64, wait time.Duration) (*Snapshot, error) {
	if index <= 0 {
		// A plain read is answered fresh from ZooKeeper, so that a client
		// reads its own writes; only blocking reads wait on the cache.
		return c.direct(ctx, p, opts)
	}
	e, err := c.acquire(p, opts)
	if err != nil {
		return nil, err
	}
	defer c.releaseEntry(e)
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		c.mu.Lock()
		snap, serr, changed := e.snap, e.err, e.changed
		c.mu.Unlock()
		if serr != nil {
			return nil, serr
		}
		// Indexes are zxids, the same on every gateway: wait while the
		// cache has nothing newer than what the client has seen (it may
		// even be behind a fresh read the client made).
		if snap.Index > index {
			return snap, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return snap, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// waitNewer waits up to wait until the cached snapshot of either path has
// an index above index: a blocking read of a state made of two directories.
func (c *watchCache) waitNewer(ctx context.Context, paths [2]string, opts [2]entryOpts, index int64, wait time.Duration) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		a, ach, arel, err := c.view(ctx, paths[0], opts[0])
		if err != nil {
			return err
		}
		b, bch, brel, err := c.view(ctx, paths[1], opts[1])
		if err != nil {
			arel()
			return err
		}
		var stop bool
		if max(a.Index, b.Index) > index {
			stop = true
		} else {
			select {
			case <-ach:
			case <-bch:
			case <-timer.C:
				stop = true
			case <-ctx.Done():
				err, stop = context.Cause(ctx), true
			}
		}
		arel()
		brel()
		if stop {
			return err
		}
	}
}

// Peek returns the latest snapshot of p if the cache has one, without
// starting a watch.
func (c *watchCache) Peek(p string) *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[p]; ok {
		return e.snap
	}
	return nil
}

// view returns the current snapshot of p and a channel closed at its next
// change; release must be called when the caller stops looking.
func (c *watchCache) view(ctx context.Context, p string, opts entryOpts) (*Snapshot, <-chan struct{}, func(), error) {
	e, err := c.acquire(p, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	release := func() { c.releaseEntry(e) }
	select {
	case <-e.ready:
	case <-ctx.Done():
		release()
		return nil, nil, nil, context.Cause(ctx)
	}
	c.mu.Lock()
	snap, serr, changed := e.snap, e.err, e.changed
	c.mu.Unlock()
	if serr != nil {
		release()
		return nil, nil, nil, serr
	}
	return snap, changed, release, nil
}

func (c *watchCache) acquire(p string, opts entryOpts) (*cacheEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	e, ok := c.entries[p]
	if !ok {
		e = &cacheEntry{path: p, opts: opts, ready: make(chan struct{}), changed: make(chan struct{}), stop: make(chan struct{})}
		c.entries[p] = e
		c.wg.Add(1)
		go c.run(e)
	}
	e.refs++
	return e, nil
}

func (c *watchCache) releaseEntry(e *cacheEntry) {
	c.mu.Lock()
	e.refs--
	e.lastUsed = time.Now()
	c.mu.Unlock()
}

// run keeps e's snapshot current until nobody has read it for c.linger;
// then it removes its ZooKeeper watches, so that a path nobody reads any
// more costs neither ZooKeeper nor go-zookeeper a watch, nor a reconnect a
// watch to set again.
func (c *watchCache) run(e *cacheEntry) {
	defer c.wg.Done()
	c.watching.Add(1)
	defer c.watching.Add(-1)
	var prev *Snapshot
	var w watchSet
	idle := time.NewTicker(c.linger/2 + time.Millisecond)
	defer idle.Stop()
	backoff := cacheRetryMin
	for {
		snap, err := c.load(e.path, e.opts, prev, &w)
		if err != nil && ambiguous(err) {
			if c.waitLive(e) != nil {
				return
			}
			continue
		}
		c.publish(e, snap, err)
		var retry <-chan time.Time
		if err == nil {
			prev, backoff = snap, cacheRetryMin
		} else {
			// Readers see the error until a load succeeds, tried again with
			// back-off (or at once if a watch it armed fires).
			c.log.Warn("load watched path; retrying", "path", e.path, "in", backoff, "err", err)
			retry = time.After(backoff)
			backoff = min(2*backoff, cacheRetryMax)
		}
		for waiting := true; waiting; {
			select {
			case <-retry:
				waiting = false
			case <-w.child: // nil (blocks) unless armed
				w.child, waiting = nil, false
			case <-w.data:
				w.data, waiting = nil, false
			case <-w.exist:
				w.exist, waiting = nil, false
			case <-idle.C:
				c.mu.Lock()
				unused := e.refs == 0 && time.Since(e.lastUsed) >= c.linger
				if unused {
					delete(c.entries, e.path)
				}
				c.mu.Unlock()
				if unused {
					c.unwatch(e.path, &w)
					return
				}
			case <-e.stop:
				// The session closes with the cache: its watches go with it.
				return
			}
		}
	}
}

// unwatch removes the watches of w from ZooKeeper and go-zookeeper. A new
// entry of the same path may arm its own meanwhile: go-zookeeper keeps the
// server's watch for it (see zk.Conn.RemoveWatch).
func (c *watchCache) unwatch(p string, w *watchSet) {
	c.drop(p, &w.child)
	c.drop(p, &w.data)
	c.drop(p, &w.exist)
}

// drop removes the watch of *ch on p, if any, and sets *ch to nil.
func (c *watchCache) drop(p string, ch *<-chan zk.Event) {
	if *ch == nil {
		return
	}
	if err := c.sess.Conn().RemoveWatch(p, *ch); err != nil {
		c.log.Warn("remove the watch of a path no longer read", "path", p, "err", err)
	}
	*ch = nil
}

func (c *watchCache) waitLive(e *cacheEntry) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-e.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return c.sess.WaitLive(ctx)
}

func (c *watchCache) publish(e *cacheEntry, snap *Snapshot, err error) {
	c.mu.Lock()
	subs := c.publishLocked(e, snap, err, false)
	c.mu.Unlock()
	for _, fn := range subs {
		fn(e.path)
	}
}

// publishLocked is publish with c.mu held; it returns the subscribers to
// tell, once c.mu is released, of a new snapshot (none when nothing changed).
//
// offered says that snap comes from offer, not from the entry's own load.
func (c *watchCache) publishLocked(e *cacheEntry, snap *Snapshot, err error, offered bool) []func(string) {
	first := e.snap == nil && e.err == nil
	if err == nil && e.offered && e.snap != nil && snap.Index < e.snap.Index {
		// A load that an offered listing overtook (see offer) is older than
		// what readers have seen: dropped. The watch it armed was set before
		// the change it missed, so the next load is on its way.
		return nil
	}
	e.offered = offered
	// An absent node's index is its parent's pzxid, which its creation
	// moves to the new node's own index: equal indexes do not make an
	// absent snapshot and a present one the same.
	same := err == nil && e.snap != nil && e.err == nil && e.snap.Index == snap.Index && e.snap.Exists == snap.Exists &&
		len(e.snap.Children) == len(snap.Children) ||
		err != nil && e.err != nil && err.Error() == e.err.Error()
	if err == nil && e.snap != nil && snap.Index < e.snap.Index {
		snap.Index = e.snap.Index // never let the index go back
	}
	if !same {
		e.snap, e.err = snap, err
		close(e.changed)
		e.changed = make(chan struct{})
	}
	if first {
		close(e.ready)
	}
	if same {
		return nil
	}
	return c.subs
}

// offerLimit bounds the listings offered to the cache (see offer): a
// listing of a long directory at every change would cost more than the
// round trip it saves.
const offerLimit = 1024

// waited reports whether readers wait on the name-only entry of p, with a
// listing short enough to be worth offering a fresh one (see offer).
func (c *watchCache) waited(p string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[p]
	return e != nil && e.refs > 0 && e.opts.namesOnly && e.snap != nil && e.snap.Exists && len(e.snap.Children) <= offerLimit
}

// offer gives the name-only entry of p a listing of p (its children's names
// and p's stat) that this gateway read on its own, so that the readers
// waiting there see a change of its own making (a queue's produce, whose
// listing goes right behind its create) without waiting for the watch to
// fire and p to be listed again: one ZooKeeper round trip sooner. A listing
// no newer than the entry's snapshot is dropped: the snapshot never goes
// back. The watch still fires and p is listed again; that listing publishes
// nothing new unless more has changed since.
func (c *watchCache) offer(p string, names []string, stat *zk.Stat) {
	c.mu.Lock()
	e := c.entries[p]
	if e == nil || !e.opts.namesOnly || e.err != nil || e.snap == nil || stat == nil {
		c.mu.Unlock()
		return
	}
	snap := &Snapshot{Path: p, Exists: true, Stat: *stat, Index: max(stat.Pzxid, stat.Mzxid)}
	if snap.Index <= e.snap.Index {
		c.mu.Unlock()
		return
	}
	snap.Children = make([]Node, len(names))
	for i, n := range names {
		snap.Children[i] = Node{Name: n}
	}
	slices.SortFunc(snap.Children, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	subs := c.publishLocked(e, snap, nil, true)
	c.mu.Unlock()
	for _, fn := range subs {
		fn(p)
	}
}

// watchSet is the watches armed for one entry's path, each nil until armed
// and once fired: its children, its data (while it exists), its creation
// (while it does not).
type watchSet struct{ child, data, exist <-chan zk.Event }

// armed returns ch, or nil if its event has come (it fired, or its watch
// ended with the session).
func armed(ch <-chan zk.Event) <-chan zk.Event {
	select {
	case <-ch:
		return nil
	default:
		return ch
	}
}

// load reads p with its children and arms in w the watches that tell of
// the next change, keeping those that have not fired: a path has one
// watch of each kind however often it is loaded. Its data is read only
// when it changed (its mzxid, in the listing's stat, moved); children of
// prev are reused as fetchChildren says.
//
// An event on its way when load looks at w (a change made just before the
// listing) wakes the entry once more after it: a load that finds nothing
// new publishes nothing.
func (c *watchCache) load(p string, opts entryOpts, prev *Snapshot, w *watchSet) (*Snapshot, error) {
	conn := c.sess.Conn()
	w.child, w.data, w.exist = armed(w.child), armed(w.data), armed(w.exist)
	var children []string
	var stat *zk.Stat
	var err error
	if w.child == nil {
		var ch <-chan zk.Event
		children, stat, ch, err = conn.ChildrenW(p)
		if err == nil {
			w.child = ch
		}
	} else {
		children, stat, err = conn.Children(p)
	}
	if errors.Is(err, zk.ErrNoNode) {
		return c.loadAbsent(p, opts, prev, w)
	}
	if err != nil {
		return nil, err
	}
	// Armed while p was absent, it fired with p's creation.
	c.drop(p, &w.exist)
	// The parent's own data is watched too (an election's proclaim touches
	// it), except for name-only entries, whose parents' data never changes.
	data, dstat, err := c.loadData(p, opts, prev, w, stat)
	if errors.Is(err, zk.ErrNoNode) {
		return c.load(p, opts, prev, w)
	}
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Path: p, Exists: true, Data: data, Stat: *dstat}
	snap.Index = max(stat.Pzxid, dstat.Mzxid)
	known := map[string]Node{}
	// Children keep their data unless someone changed it; those who do (an
	// election's proclaim) touch the parent too, so an unchanged parent
	// means unchanged children.
	if prev != nil && prev.Exists && prev.Stat.Mzxid == dstat.Mzxid {
		for _, n := range prev.Children {
			known[n.Name] = n
		}
	}
	if err := fetchChildren(context.Background(), conn, snap, children, opts, known); err != nil {
		return nil, err
	}
	return snap, nil
}

// loadAbsent answers load for p found absent: it arms in w the watch of its
// creation, and loads p again if it was created in between.
func (c *watchCache) loadAbsent(p string, opts entryOpts, prev *Snapshot, w *watchSet) (*Snapshot, error) {
	conn := c.sess.Conn()
	// Its child and data watches fired with its deletion, before this
	// answer: taken out (RemoveWatch of a fired watch sends nothing).
	c.drop(p, &w.child)
	c.drop(p, &w.data)
	if w.exist == nil {
		ok, _, ch, err := conn.ExistsW(p)
		if err != nil {
			return nil, err
		}
		if ok {
			// Created in between: the watch is one of its data.
			w.data = ch
			return c.load(p, opts, prev, w)
		}
		w.exist = ch
	}
	snap := &Snapshot{Path: p}
	// An absent node takes its index from its parent's pzxid, which grew
	// when the node was deleted.
	if _, pstat, err := conn.Exists(path.Dir(p)); err == nil && pstat != nil {
		snap.Index = pstat.Pzxid
	}
	// Made since ExistsW, its creation moved that pzxid to its own index:
	// an absent snapshot at it would hide the node from readers at it.
	if ok, _, err := conn.Exists(p); err == nil && ok {
		return c.load(p, opts, prev, w)
	}
	return snap, nil
}

// loadData reads p's own data for load, stat being the listing's: the data
// of prev while its mzxid did not move and its watch has not fired, read
// again (arming the watch in w when none is armed) when it did. Name-only
// entries read none. zk.ErrNoNode says p went after the listing.
func (c *watchCache) loadData(p string, opts entryOpts, prev *Snapshot, w *watchSet, stat *zk.Stat) ([]byte, *zk.Stat, error) {
	if opts.namesOnly {
		return nil, stat, nil
	}
	conn := c.sess.Conn()
	same := prev != nil && prev.Exists && prev.Stat.Czxid == stat.Czxid && prev.Stat.Mzxid == stat.Mzxid
	if !same {
		// Changed before the listing: its watch fired then.
		w.data = armed(w.data)
	}
	switch {
	case same && w.data != nil:
		return prev.Data, stat, nil // unchanged, and still watched
	case w.data != nil:
		return conn.Get(p)
	}
	data, dstat, ch, err := conn.GetW(p)
	if err == nil {
		w.data = ch
	}
	return data, dstat, err
}

// fetchChildren reads the named children of snap (data, or only stats),
// reusing known ones, and folds their zxids into the index.
func fetchChildren(ctx context.Context, conn *zk.Conn, snap *Snapshot, children []string, opts entryOpts, known map[string]Node) error {
	p := snap.Path
	snap.Children = make([]Node, len(children))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var errMu sync.Mutex
	var firstErr error
	for i, name := range children {
		// Only a sequential name is never reused, so only its node is
		// surely the one seen before (a double barrier's member is not).
		if n, ok := known[name]; ok && opts.sequential {
			snap.Children[i] = n
			continue
		}
		if opts.namesOnly {
			snap.Children[i] = Node{Name: name}
			continue
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, name string) {
			defer wg.Done()
			defer func() { <-sem }()
			d, st, err := conn.Get(p + "/" + name)
			if err != nil {
				if !errors.Is(err, zk.ErrNoNode) {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
				}
				return
			}
			snap.Children[i] = Node{Name: name, Data: d, Stat: *st}
		}(i, name)
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	// Children deleted between the list and their read are left out; the
	// children watch has fired for them and the next load is on its way.
	kept := snap.Children[:0]
	for _, n := range snap.Children {
		if n.Name != "" {
			kept = append(kept, n)
			snap.Index = max(snap.Index, n.Stat.Mzxid)
		}
	}
	snap.Children = kept
	slices.SortFunc(snap.Children, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return nil
}

// direct reads p and its children now, with no watch. The data of children
// the cache already holds is reused (on the cache's own terms: the parent's
// data is unchanged), so that a fresh read of a long line is one listing,
// not one read per seqNode.
func (c *watchCache) direct(ctx context.Context, p string, opts entryOpts) (*Snapshot, error) {
	ctx, err := c.sess.fresh(ctx)
	if err != nil {
		return nil, err
	}
	conn := c.sess.Conn()
	children, stat, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		snap := &Snapshot{Path: p}
		if _, pstat, err := conn.Exists(path.Dir(p)); err == nil && pstat != nil {
			snap.Index = pstat.Pzxid
		}
		// Made in between, it moved that pzxid to its own index (see
		// loadAbsent): read it.
		if ok, _, err := conn.Exists(p); err == nil && ok {
			return c.direct(ctx, p, opts)
		}
		return snap, nil
	}
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Path: p, Exists: true, Stat: *stat, Index: max(stat.Pzxid, stat.Mzxid)}
	var known map[string]Node
	if prev := c.Peek(p); prev != nil && prev.Exists && prev.Stat.Mzxid == stat.Mzxid {
		known = make(map[string]Node, len(prev.Children))
		for _, n := range prev.Children {
			known[n.Name] = n
		}
	}
	if err := fetchChildren(ctx, conn, snap, children, opts, known); err != nil {
		return nil, err
	}
	return snap, nil
}

// Watching is the number of paths with a live cache entry.
func (c *watchCache) Watching() int64 { return c.watching.Load() }

// Close stops every entry.
func (c *watchCache) Close() {
	c.mu.Lock()
	c.closed = true
	for _, e := range c.entries {
		close(e.stop)
	}
	c.entries = map[string]*cacheEntry{}
	c.mu.Unlock()
	c.wg.Wait()
}
