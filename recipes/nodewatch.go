package recipes

import (
	"context"
	"errors"
	"path"
	"sync"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// nodeWatches shares one ZooKeeper watch per node among all the waits of
// this gateway on that node (a predecessor in a line, a barrier's ready
// node). ZooKeeper watches are one-shot and go-zookeeper keeps every watch
// it is asked for until it fires: a wait that timed out and was retried,
// again and again, against a lock held for hours would pile up one per try.
// Here a node has at most one armed watch, however many waits come and go;
// one that nobody has waited for during linger is removed (from ZooKeeper
// too), so that the watches are those of the waits under way and of the
// last linger, whatever the nodes waited for became.
type nodeWatches struct {
	sess   *Session
	linger time.Duration

	mu       sync.Mutex
	armed    map[nodeWatchKey]*nodeWatch
	sweeping bool          // a sweep goroutine runs: some watch is idle
	closed   chan struct{} // closed by close: the sweep stops
}

type nodeWatchKey struct {
	path   string
	exists bool // a watch for the node to appear, not to change or go
}

// nodeWatch is one armed watch, shared. go-zookeeper delivers its one event
// to one receiver: every waiter selects on events, and the one that gets it
// closes fired for the others. No goroutine waits for it while a waiter
// does (in a long line every waiter watches a node of its own); one that
// nobody waits for any more is looked at by the sweep, which takes it out
// of the table once it has fired or lingered.
type nodeWatch struct {
	key     nodeWatchKey
	ready   chan struct{} // closed once armed (or found needless)
	present bool          // whether the node existed when armed
	err     error
	events  <-chan zk.Event // the armed watch's one event; nil when none is armed
	fired   chan struct{}   // closed once its event has been received
	event   zk.Event        // that event; read after fired is closed

	// guarded by nodeWatches.mu
	refs      int       // callers between get and wait (or release)
	done      bool      // fired is closed
	idleSince time.Time // when refs last fell to 0
}

// nodeWatchLinger is how long a watch nobody waits for stays armed, for a
// wait retried on the same node.
const nodeWatchLinger = 30 * time.Second

func newNodeWatches(sess *Session) *nodeWatches {
	return &nodeWatches{sess: sess, linger: nodeWatchLinger, armed: map[nodeWatchKey]*nodeWatch{},
		closed: make(chan struct{})}
}

// changed returns whether the node p exists and, when it does, the shared
// watch of its next change (deleted, data set) or of the connection being
// replaced: the caller must then call wait (or release) once. A missing
// node arms nothing: a sequential name never comes back.
func (w *nodeWatches) changed(ctx context.Context, p string) (bool, *nodeWatch, error) {
	return w.get(ctx, nodeWatchKey{path: p})
}

// appears returns whether p exists and, when it does not, the shared watch
// of its creation (or of the connection being replaced): the caller must
// then call wait (or release) once.
func (w *nodeWatches) appears(ctx context.Context, p string) (bool, *nodeWatch, error) {
	return w.get(ctx, nodeWatchKey{path: p, exists: true})
}

// Armed is the number of watches armed now, for metrics and leak tests.
func (w *nodeWatches) Armed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.armed)
}

func (w *nodeWatches) get(ctx context.Context, k nodeWatchKey) (bool, *nodeWatch, error) {
	w.mu.Lock()
	nw, ok := w.armed[k]
	if ok && !nw.done && nw.events != nil {
		// An idle watch's event may be waiting for the sweep: ZooKeeper
		// sends it before the answer to the change that made it, so a
		// change this session saw answered is in the channel by now, and
		// the watch no longer says what the node is.
		select {
		case ev := <-nw.events:
			w.fireLocked(nw, ev)
			ok = false
		default:
		}
	}
	span := noSpan() // a watch armed already costs no round trip
	if !ok {
		nw = &nodeWatch{key: k, ready: make(chan struct{}), fired: make(chan struct{})}
		w.armed[k] = nw
		op := "getw"
		if k.exists {
			op = "existsw"
		}
		// The line's path: the node's name holds its lease's id.
		span = w.sess.zkSpan(ctx, op, path.Dir(k.path))
		// Armed on a goroutine of its own: ZooKeeper calls take no
		// context, and the caller's wait must end when its ctx does, even
		// on a stalled connection.
		go w.arm(nw)
	}
	nw.refs++
	w.mu.Unlock()
	select {
	case <-nw.ready:
		endZK(span, nw.err)
	case <-ctx.Done():
		endZK(span, context.Cause(ctx))
		w.release(nw)
		return false, nil, context.Cause(ctx)
	}
	switch {
	case nw.err != nil:
		w.release(nw)
		return false, nil, nw.err
	case nw.present == k.exists:
		w.release(nw)
		return nw.present, nil, nil // nothing to wait for
	}
	return nw.present, nw, nil
}

// wait waits for nw's event, or for ctx to end, and lets go of nw.
func (w *nodeWatches) wait(ctx context.Context, nw *nodeWatch) (zk.Event, error) {
	defer w.release(nw)
	select {
	case ev, ok := <-nw.events:
		if ok {
			w.fire(nw, ev)
			return ev, nil
		}
		// Closed after another receiver took the event: it fires.
		select {
		case <-nw.fired:
		case <-ctx.Done():
			return zk.Event{}, context.Cause(ctx)
		}
	case <-nw.fired:
	case <-ctx.Done():
		return zk.Event{}, context.Cause(ctx)
	}
	return nw.event, nil
}

// release lets go of nw without waiting. The last caller to let go of a
// watch that has not fired leaves it to the sweep.
func (w *nodeWatches) release(nw *nodeWatch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	nw.refs--
	if nw.refs == 0 && !nw.done && nw.events != nil {
		w.idleLocked(nw)
	}
}

// idleLocked leaves nw, armed and waited on by nobody, to the sweep.
func (w *nodeWatches) idleLocked(nw *nodeWatch) {
	nw.idleSince = time.Now()
	if !w.sweeping {
		w.sweeping = true
		go w.sweep()
	}
}

// sweep takes out of the table, every half linger, the watches nobody waits
// for that have fired, and removes those that have lingered; it ends when
// none is left, or at close.
func (w *nodeWatches) sweep() {
	tick := time.NewTicker(w.linger/2 + time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-w.closed:
			return
		}
		var stale []*nodeWatch
		w.mu.Lock()
		idle := 0
		for k, nw := range w.armed {
			if nw.refs > 0 || nw.done || nw.events == nil {
				continue
			}
			select {
			case ev := <-nw.events:
				w.fireLocked(nw, ev) // fired with nobody waiting
			default:
				if time.Since(nw.idleSince) < w.linger {
					idle++
					continue
				}
				delete(w.armed, k)
				stale = append(stale, nw)
			}
		}
		if idle == 0 {
			w.sweeping = false
		}
		w.mu.Unlock()
		// A caller that comes to the node from now on arms a watch of its
		// own: go-zookeeper keeps the server's watch for it (see
		// zk.Conn.RemoveWatch).
		for _, nw := range stale {
			_ = w.sess.Conn().RemoveWatch(nw.key.path, nw.events)
		}
		if idle == 0 {
			return
		}
	}
}

// close stops the sweep; the session's watches end with it.
func (w *nodeWatches) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.closed:
	default:
		close(w.closed)
	}
}

// fire records nw's event, wakes its waiters and takes it out of the table.
func (w *nodeWatches) fire(nw *nodeWatch, ev zk.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fireLocked(nw, ev)
}

func (w *nodeWatches) fireLocked(nw *nodeWatch, ev zk.Event) {
	if nw.done {
		return
	}
	nw.event, nw.done = ev, true
	close(nw.fired)
	if w.armed[nw.key] == nw {
		delete(w.armed, nw.key)
	}
}

// arm sets the ZooKeeper watch of nw. A change watch is set with GetW, which
// (unlike ExistsW) sets none on a missing node. An appear watch is set with
// ExistsW; on a node that is there already that arms a watch of its next
// change, which stays shared here until it fires.
func (w *nodeWatches) arm(nw *nodeWatch) {
	conn := w.sess.Conn()
	var events <-chan zk.Event
	var err error
	if nw.key.exists {
		nw.present, _, events, err = conn.ExistsW(nw.key.path)
	} else {
		_, _, events, err = conn.GetW(nw.key.path)
		nw.present = err == nil
		if errors.Is(err, zk.ErrNoNode) {
			err = nil
		}
	}
	nw.err = err
	w.mu.Lock()
	if err != nil || events == nil {
		// Nothing armed: the next caller arms anew.
		if w.armed[nw.key] == nw {
			delete(w.armed, nw.key)
		}
	} else {
		nw.events = events
		if nw.refs == 0 {
			// Every caller gave up while it was being armed: it is idle
			// from now, as if the last had let go of it now.
			w.idleLocked(nw)
		}
	}
	w.mu.Unlock()
	close(nw.ready)
}
