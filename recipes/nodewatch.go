package recipes

import (
	"context"
	"errors"
	"sync"

	"github.com/go-zookeeper/zk"
)

// nodeWatches shares one ZooKeeper watch per node among all the waits of
// this gateway on that node (a predecessor in a line, a barrier's ready
// node). ZooKeeper watches are one-shot and go-zookeeper keeps every watch
// it is asked for until it fires: a wait that timed out and was retried,
// again and again, against a lock held for hours would pile up one per try.
// Here a node has at most one armed watch, however many waits come and go.
type nodeWatches struct {
	sess *Session

	mu    sync.Mutex
	armed map[nodeWatchKey]*nodeWatch
}

type nodeWatchKey struct {
	path   string
	exists bool // a watch for the node to appear, not to change or go
}

// nodeWatch is one armed watch, shared.
type nodeWatch struct {
	ready   chan struct{} // closed once armed (or found needless)
	present bool          // whether the node existed when armed
	err     error
	fired   chan struct{} // closed when the watch fires
	event   zk.Event      // the event that fired it; read after fired is closed
}

// deleted reports, once fired is closed, whether the node was deleted.
func (nw *nodeWatch) deleted() bool { return nw.event.Type == zk.EventNodeDeleted }

func newNodeWatches(sess *Session) *nodeWatches {
	return &nodeWatches{sess: sess, armed: map[nodeWatchKey]*nodeWatch{}}
}

// changed returns whether the node p exists and, when it does, the shared
// watch whose fired channel closes at its next change (deleted, data set)
// or when the connection is replaced. A missing node arms nothing: a
// sequential name never comes back.
func (w *nodeWatches) changed(ctx context.Context, p string) (bool, *nodeWatch, error) {
	return w.get(ctx, nodeWatchKey{path: p})
}

// appears returns whether p exists and, when it does not, a channel closed
// once it is created (or the connection is replaced).
func (w *nodeWatches) appears(ctx context.Context, p string) (bool, <-chan struct{}, error) {
	present, nw, err := w.get(ctx, nodeWatchKey{path: p, exists: true})
	if nw == nil {
		return present, nil, err
	}
	return present, nw.fired, err
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
	if !ok {
		nw = &nodeWatch{ready: make(chan struct{}), fired: make(chan struct{})}
		w.armed[k] = nw
		w.mu.Unlock()
		// Armed on a goroutine of its own: ZooKeeper calls take no
		// context, and the caller's wait must end when its ctx does, even
		// on a stalled connection.
		go w.arm(k, nw)
	} else {
		w.mu.Unlock()
	}
	select {
	case <-nw.ready:
	case <-ctx.Done():
		return false, nil, context.Cause(ctx)
	}
	if nw.err != nil {
		return false, nil, nw.err
	}
	if nw.present == k.exists {
		return nw.present, nil, nil // nothing to wait for
	}
	return nw.present, nw, nil
}

// arm sets the ZooKeeper watch of nw. A change watch is set with GetW, which
// (unlike ExistsW) sets none on a missing node. An appear watch is set with
// ExistsW; on a node that is there already that arms a watch of its next
// change, which stays shared here until it fires.
func (w *nodeWatches) arm(k nodeWatchKey, nw *nodeWatch) {
	defer close(nw.ready)
	conn := w.sess.Conn()
	var events <-chan zk.Event
	var err error
	if k.exists {
		nw.present, _, events, err = conn.ExistsW(k.path)
	} else {
		_, _, events, err = conn.GetW(k.path)
		nw.present = err == nil
		if errors.Is(err, zk.ErrNoNode) {
			err = nil
		}
	}
	nw.err = err
	if err != nil || events == nil {
		w.forget(k, nw) // nothing armed
		return
	}
	go w.await(k, nw, events)
}

// await waits for the one event of nw's watch. go-zookeeper delivers one to
// every watch, at the latest when its connection is closed.
func (w *nodeWatches) await(k nodeWatchKey, nw *nodeWatch, events <-chan zk.Event) {
	nw.event = <-events
	w.forget(k, nw)
	close(nw.fired)
}

func (w *nodeWatches) forget(k nodeWatchKey, nw *nodeWatch) {
	w.mu.Lock()
	if w.armed[k] == nw {
		delete(w.armed, k)
	}
	w.mu.Unlock()
}
