package recipes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// Delayed items. An item produced with a due time (?delay= or ?not_before=)
// waits in the CONTAINER {root}/queues/{name}/delayed as the
// PERSISTENT_SEQUENTIAL node due-<ms13>-<ppp>-<seq10>: the due time in
// milliseconds since the epoch, the priority, ZooKeeper's sequence; its data
// is the raw item, as in the entries. The due time is in ZooKeeper, so it
// outlives the gateway that took the produce. kazoo's LockingQueue reads only
// entries and taken, so it never sees an item before it is due.
//
// A due item is moved into the entries, as entry-<ppp>-<seq10>, by one multi
// that creates the entry and deletes the delayed node (at the version read):
// whichever gateway's multi comes first moves it, and every other fails on
// the delete and makes nothing, so an item moves exactly once however many
// gateways race, and a multi whose reply was lost has either moved it or
// not. Its place among the entries is that of an item produced when it
// moved: after what was produced before its due time.
//
// Who moves: every gateway keeps one timer, for the earliest due item it
// knows of (delayMover). It knows of the items it produced, of those that a
// take, claim, state read or count of the queue through it listed, and, at
// its start, of every queue's (a scan). A take or claim that finds due items
// moves them first, and a consumer waiting on the queue is woken by the move
// (the entries change), with no polling of ZooKeeper. So with nobody
// consuming through zkgate (kazoo consumers only), the gateway that took the
// produce moves the item at its due time; if it stopped before, the next
// gateway to start, or to serve the queue, does.
//
// A delayed produce also sets the entries' data (empty, as kazoo leaves it)
// in the same multi: the entries' data version then says that delayed items
// may exist, so a take, a count or a state read of a queue that never had one
// (version 0), or that had none since this gateway last looked, sends not one
// request more for them.

// MaxDelay bounds how far ahead an item may be due.
const MaxDelay = 30 * 24 * time.Hour

// delayedDir is the child of a queue's node holding its delayed items.
const delayedDir = "delayed"

func (q *Queues) delayed(name string) string { return q.base(name) + "/" + delayedDir }

// delayedItem is a delayed node's name, read.
type delayedItem struct {
	node     string
	due      time.Time
	priority int
	seq      int64
}

// delayedPrefix is the name of a delayed node before ZooKeeper's sequence.
func delayedPrefix(due time.Time, priority int) string {
	return fmt.Sprintf("due-%013d-%03d-", due.UnixMilli(), priority)
}

// parseDelayed reads due-<ms13>-<ppp>-<seq10>; ok is false for any other
// name (not ours: left alone).
func parseDelayed(node string) (delayedItem, bool) {
	rest, ok := strings.CutPrefix(node, "due-")
	parts := strings.Split(rest, "-")
	if !ok || len(parts) != 3 || len(parts[0]) != 13 || len(parts[1]) != 3 || len(parts[2]) < 10 {
		return delayedItem{}, false
	}
	ms, err1 := strconv.ParseInt(parts[0], 10, 64)
	p, err2 := strconv.Atoi(parts[1])
	seq, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || ms < 0 || p < MinPriority || seq < 0 || strings.ContainsAny(rest, "+") {
		return delayedItem{}, false
	}
	return delayedItem{node: node, due: time.UnixMilli(ms).UTC(), priority: p, seq: seq}, true
}

// delayedOf returns the delayed items among names, in the order they come
// due (then by priority and sequence).
func delayedOf(names []string) []delayedItem {
	var out []delayedItem
	for _, n := range names {
		if d, ok := parseDelayed(n); ok {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.due.Equal(b.due) {
			return a.due.Before(b.due)
		}
		if a.priority != b.priority {
			return a.priority < b.priority
		}
		return a.seq < b.seq
	})
	return out
}

// dueAt reads the due time of a produce: notBefore, or nothing (zero) when it
// is not after now, so that an item due already is produced as any other.
func dueAt(notBefore time.Time) (time.Time, error) {
	if notBefore.IsZero() || !notBefore.After(time.Now()) {
		return time.Time{}, nil
	}
	if time.Until(notBefore) > MaxDelay {
		return time.Time{}, Errorf(CodeInvalid, "an item may be due at most %s ahead", MaxDelay)
	}
	// Its name holds milliseconds: rounded up, never served early.
	return notBefore.UTC().Add(time.Millisecond - 1).Truncate(time.Millisecond), nil
}

// produceDelayed makes the delayed node of Produce, and the entries' data
// version step that tells readers to look for it (see the top of the file).
func (q *Queues) produceDelayed(ctx context.Context, name string, data []byte, priority int, due time.Time) (Item, error) {
	sess := q.sess
	prefix := q.delayed(name) + "/" + delayedPrefix(due, priority)
	for {
		st, epoch, _ := sess.Status()
		if st != StateLive {
			return Item{}, unavailable()
		}
		res, err := sess.Conn().Multi(
			&zk.CreateRequest{Path: prefix, Data: data, Acl: sess.acl(), Flags: zk.FlagSequence},
			&zk.SetDataRequest{Path: q.entries(name), Data: nil, Version: -1},
		)
		switch {
		case err == nil:
			id := res[0].String[strings.LastIndexByte(res[0].String, '/')+1:]
			d, _ := parseDelayed(id)
			q.mover.add(name, due)
			return Item{ID: id, Priority: priority, Size: len(data), CreatedAt: time.Now().UTC(), NotBefore: &due, seq: d.seq}, nil
		case errors.Is(err, zk.ErrNoNode):
			if err := q.ensure(ctx, name, epoch); err != nil {
				return Item{}, withoutLease(err)
			}
			if err := sess.ensureContainers(ctx, q.delayed(name), epoch); err != nil {
				return Item{}, withoutLease(err)
			}
		case ambiguous(err):
			return Item{}, &Error{Code: CodeUnavailable, Detail: "the connection to ZooKeeper dropped during the produce: the item may or may not have been added", Err: err}
		default:
			return Item{}, internal(err, "produce")
		}
	}
}

// listDelayed lists queue name's delayed items when the entries' data
// version (of a listing just made) says there may be some; none, with no
// request, when it says there are none.
func (q *Queues) listDelayed(name string, entriesVersion int32) ([]delayedItem, error) {
	if !q.mover.mayHave(name, entriesVersion) {
		return nil, nil
	}
	names, _, err := q.sess.Conn().Children(q.delayed(name))
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, err
	}
	items := delayedOf(names)
	if len(items) == 0 {
		q.mover.sawNone(name, entriesVersion)
	}
	return items, nil
}

// moveDue moves the items of ds (in their order) that are due into the
// entries, and tells the mover of the earliest one left; ds was listed
// after the mover's addsOf said adds. due is how many of ds were due and
// are in the entries now (moved by this call or by another client).
func (q *Queues) moveDue(ctx context.Context, name string, ds []delayedItem, adds uint64) (due int, err error) {
	sess := q.sess
	now := time.Now()
	for i, d := range ds {
		if d.due.After(now) {
			q.mover.set(name, d.due, adds)
			return due, nil
		}
		if _, err := q.moveOne(ctx, name, d); err != nil {
			q.mover.retry(name)
			return due, err
		}
		due++
		if i == len(ds)-1 {
			q.mover.set(name, time.Time{}, adds)
		}
		if st, _, _ := sess.Status(); st != StateLive && i < len(ds)-1 {
			q.mover.retry(name)
			return due, unavailable()
		}
	}
	if len(ds) == 0 {
		q.mover.set(name, time.Time{}, adds)
	}
	return due, nil
}

// moveOne moves the due item d into the entries, in one multi; ok is false
// when another client moved (or removed) it first.
func (q *Queues) moveOne(ctx context.Context, name string, d delayedItem) (ok bool, err error) {
	sess := q.sess
	conn := sess.Conn()
	node := q.delayed(name) + "/" + d.node
	data, stat, err := conn.Get(node)
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	prefix := q.entries(name) + fmt.Sprintf("/entry-%03d-", d.priority)
	for range 2 {
		res, err := conn.Multi(
			&zk.CreateRequest{Path: prefix, Data: data, Acl: sess.acl(), Flags: zk.FlagSequence},
			&zk.DeleteRequest{Path: node, Version: stat.Version},
		)
		switch {
		case err == nil:
			id := res[0].String[strings.LastIndexByte(res[0].String, '/')+1:]
			q.ledger.moved(name, d.node, id)
			return true, nil
		case len(res) == 2 && res[0].Error != nil && errors.Is(res[0].Error, zk.ErrNoNode):
			// No entries directory (a queue made by hand): make it, once.
			_, epoch, _ := sess.Status()
			if err := q.ensure(ctx, name, epoch); err != nil {
				return false, err
			}
		case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
			return false, nil // moved by another gateway first
		default:
			return false, err
		}
	}
	return false, internal(errors.New("no entries directory"), "move a delayed item")
}

// delayedState is what a state read says of the delayed items.
func delayedState(ds []delayedItem) (count int, next *time.Time) {
	if len(ds) == 0 {
		return 0, nil
	}
	due := ds[0].due
	return len(ds), &due
}

// delayMover is a gateway's one timer for the delayed items it knows of: at
// the earliest due time it moves the due items of every queue whose earliest
// is due (see the top of the file). It also remembers, per queue, the
// entries' data version at which it found no delayed item, so that readers
// need not look again until a delayed produce changes it.
type delayMover struct {
	q    *Queues
	ctx  context.Context
	stop context.CancelFunc
	done chan struct{}
	wake chan struct{} // the earliest due time may have changed

	mu    sync.Mutex
	due   map[string]time.Time // queue → the earliest delayed item known
	adds  map[string]uint64    // queue → the produces noted by add, to date
	none  map[string]int32     // queue → the entries' data version with no delayed item
	start bool                 // run started (a Service that is never started moves nothing)
}

func newDelayMover(q *Queues) *delayMover {
	ctx, stop := context.WithCancel(context.Background())
	return &delayMover{q: q, ctx: ctx, stop: stop, done: make(chan struct{}), wake: make(chan struct{}, 1),
		due: map[string]time.Time{}, adds: map[string]uint64{}, none: map[string]int32{}}
}

// mayHave says whether queue name may have delayed items, by the entries'
// data version of a listing: 0 is a queue that never had one.
func (m *delayMover) mayHave(name string, entriesVersion int32) bool {
	if entriesVersion == 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.none[name]
	return !ok || v != entriesVersion
}

// sawNone records that queue name had no delayed item at entries' data
// version v.
func (m *delayMover) sawNone(name string, v int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.none[name] = v
}

// add makes due, of an item just produced, known for queue name.
func (m *delayMover) add(name string, due time.Time) {
	m.mu.Lock()
	if cur, ok := m.due[name]; !ok || due.Before(cur) {
		m.due[name] = due
	}
	m.adds[name]++
	m.mu.Unlock()
	m.poke()
}

// addsOf is the count of queue name's produces noted so far: a listing
// takes it before it reads, for set.
func (m *delayMover) addsOf(name string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.adds[name]
}

// set makes due the earliest delayed item of queue name, read from a
// listing made after addsOf said adds; zero: it has none. An item produced
// here since the listing began may be missing from it, so then the earlier
// of the two stands (one that is stale only costs a listing more when it
// fires).
func (m *delayMover) set(name string, due time.Time, adds uint64) {
	m.mu.Lock()
	cur, ok := m.due[name]
	if ok && m.adds[name] != adds && (due.IsZero() || cur.Before(due)) {
		due = cur
	}
	changed := !due.Equal(cur) || ok == due.IsZero()
	if due.IsZero() {
		delete(m.due, name)
	} else {
		m.due[name] = due
	}
	m.mu.Unlock()
	if changed {
		m.poke()
	}
}

// retry has the mover try queue name again in a second: its last try
// failed (ZooKeeper out of reach).
func (m *delayMover) retry(name string) {
	m.mu.Lock()
	m.due[name] = time.Now().Add(time.Second)
	m.mu.Unlock()
	m.poke()
}

// forget drops what the mover knows of queue name: it was deleted.
func (m *delayMover) forget(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.none, name)
	if _, ok := m.due[name]; !ok {
		delete(m.adds, name)
	}
}

func (m *delayMover) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// earliest is the earliest due time known, zero when none.
func (m *delayMover) earliest() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	var at time.Time
	for _, d := range m.due {
		if at.IsZero() || d.Before(at) {
			at = d
		}
	}
	return at
}

// run is the mover's goroutine: the scan once the session is live, then the
// timer, until close.
func (m *delayMover) run() {
	defer close(m.done)
	if m.q.sess.WaitLive(m.ctx) == nil {
		if err := m.scan(); err != nil && m.ctx.Err() == nil {
			m.q.log.Debug("scan the queues for delayed items", "err", err)
		}
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		if at := m.earliest(); !at.IsZero() {
			timer.Reset(time.Until(at))
		}
		select {
		case <-m.ctx.Done():
			return
		case <-m.wake:
		case <-timer.C:
			m.moveAll()
		}
		timer.Stop()
	}
}

// moveAll moves the due items of every queue whose earliest known is due.
func (m *delayMover) moveAll() {
	now := time.Now()
	m.mu.Lock()
	var names []string
	for n, d := range m.due {
		if !d.After(now) {
			names = append(names, n)
		}
	}
	m.mu.Unlock()
	sort.Strings(names)
	for _, n := range names {
		if m.ctx.Err() != nil {
			return
		}
		if err := m.moveQueue(n); err != nil {
			m.retry(n)
			if m.ctx.Err() == nil {
				m.q.log.Debug("move delayed items", "queue", n, "err", err)
			}
		}
	}
}

// moveQueue lists queue name's delayed items and moves the due ones.
func (m *delayMover) moveQueue(name string) error {
	if st, _, _ := m.q.sess.Status(); st != StateLive {
		return unavailable()
	}
	adds := m.addsOf(name)
	names, _, err := m.q.sess.Conn().Children(m.q.delayed(name))
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	_, err = m.q.moveDue(m.ctx, name, delayedOf(names), adds)
	return err
}

// scan finds the queues with delayed items under the root, at the start:
// a listing of the queues and, for each, a stat of its entries, and a
// listing of its delayed items where their data version says it may have
// some.
func (m *delayMover) scan() error {
	q := m.q
	names, err := q.sess.children(m.ctx, kinds.Queues.Dir(q.sess.Root()))
	if err != nil {
		return err
	}
	return forEach(m.ctx, len(names), func(i int) error {
		name := names[i]
		if ValidName(name) != nil {
			return nil
		}
		ok, st, err := q.sess.Conn().Exists(q.entries(name))
		if err != nil || !ok {
			return nil // gone, or out of reach: a consumer or the next start finds it
		}
		adds := m.addsOf(name)
		ds, err := q.listDelayed(name, st.Version)
		if err != nil || len(ds) == 0 {
			return nil
		}
		m.set(name, ds[0].due, adds)
		return nil
	})
}

// close stops the mover and waits for its goroutine.
func (m *delayMover) close() {
	m.stop()
	m.mu.Lock()
	started := m.start
	m.mu.Unlock()
	if started {
		<-m.done
	}
}

// begin starts the mover's goroutine.
func (m *delayMover) begin() {
	m.mu.Lock()
	m.start = true
	m.mu.Unlock()
	go m.run()
}
