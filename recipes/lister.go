package recipes

import (
	"path"
	"sync"

	"github.com/zkgate/zkgate/internal/zk"
)

// lister coalesces the listings of one parent that many waiters of this
// gateway need at once. A waiter woken by a deletion needs a listing made
// after that deletion; when thousands wake together (a line of waits timing
// out, a long queue draining), one listing in flight and one queued behind
// it serve them all, instead of one listing of the whole line each, which
// is quadratic in bytes and memory.
//
// It also counts the calls of this gateway in each line (from before they
// make their node until their wait ends). A call alone in its line lists it
// right behind its create, in the same round trip (see
// Session.createProtected); a call with company uses the coalesced listing,
// since a crowd of new waiters would otherwise each list the whole line.
type lister struct {
	mu    sync.Mutex
	paths map[string]*listState
	lines map[string]int
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
	marks    []delayMark // lock-delay markers among the children
}

func newLister() *lister { return &lister{paths: map[string]*listState{}, lines: map[string]int{}} }

// join counts one more call of this gateway in the line under p, and says
// whether it is the only one; the caller must call leave when its wait ends.
func (l *lister) join(p string) (alone bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines[p]++
	return l.lines[p] == 1
}

// leave ends a join.
func (l *lister) leave(p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lines[p]--; l.lines[p] <= 0 {
		delete(l.lines, p)
	}
}

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

// find returns where node stands in f (errNodeGone when it is not there).
func (f *listing) find(node string, markers []marker) (turn, error) {
	cs, index := f.contenders(markers)
	i, ok := index[path.Base(node)]
	if !ok {
		return turn{}, errNodeGone
	}
	t := turn{contenders: cs, index: i, marks: f.marks}
	if len(f.marks) > 0 {
		t.present = func(name string) bool { _, ok := index[name]; return ok }
	}
	if f.stat != nil {
		t.parentID = f.stat.Czxid
	}
	return t, nil
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
		f.marks = marksOf(f.children)
	})
	return f.sorted, f.index
}
