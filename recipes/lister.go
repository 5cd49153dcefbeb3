package recipes

import (
	"sync"

	"github.com/go-zookeeper/zk"
)

// lister coalesces the listings of one parent that many waiters of this
// gateway need at once. A waiter woken by a deletion needs a listing made
// after that deletion; when thousands wake together (a line of waits timing
// out, a long queue draining), one listing in flight and one queued behind
// it serve them all, instead of one listing of the whole line each, which
// is quadratic in bytes and memory.
type lister struct {
	mu    sync.Mutex
	paths map[string]*listState
}

type listState struct {
	inflight *listing // sent, not answered yet
	next     *listing // to be sent when inflight is answered
}

// listing is one Children call and its result, shared by its callers.
type listing struct {
	done     chan struct{}
	children []string
	stat     *zk.Stat
	err      error

	sortOnce sync.Once
	sorted   []seqNode
	index    map[string]int
}

func newLister() *lister { return &lister{paths: map[string]*listState{}} }

// list returns a listing of p that was requested after list was called.
func (l *lister) list(conn *zk.Conn, p string) *listing {
	l.mu.Lock()
	st := l.paths[p]
	if st == nil {
		st = &listState{}
		l.paths[p] = st
	}
	if st.inflight == nil {
		f := &listing{done: make(chan struct{})}
		st.inflight = f
		l.mu.Unlock()
		l.run(conn, p, f)
		return f
	}
	// One is in flight, but it may have been sent before we were woken:
	// wait for the next one, which its sender starts when it is answered.
	if st.next == nil {
		st.next = &listing{done: make(chan struct{})}
	}
	f := st.next
	l.mu.Unlock()
	<-f.done
	return f
}

// run sends f; once it is answered, the listing queued behind it (if any)
// is sent on a goroutine of its own, so that no caller waits for others.
func (l *lister) run(conn *zk.Conn, p string, f *listing) {
	f.children, f.stat, f.err = conn.Children(p)
	l.mu.Lock()
	st := l.paths[p]
	next := st.next
	st.inflight, st.next = next, nil
	if next == nil {
		delete(l.paths, p)
	}
	l.mu.Unlock()
	close(f.done)
	if next != nil {
		go l.run(conn, p, next)
	}
}

// contenders returns the listing's contenders sorted by sequence, and the
// index of each by name, computed once for all who share it. Every parent
// belongs to one recipe, so all its waiters pass the same markers.
func (f *listing) contenders(markers []marker) ([]seqNode, map[string]int) {
	f.sortOnce.Do(func() {
		f.sorted = sortContenders(f.children, markers)
		f.index = make(map[string]int, len(f.sorted))
		for i, c := range f.sorted {
			f.index[c.Name] = i
		}
	})
	return f.sorted, f.index
}
