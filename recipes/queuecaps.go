package recipes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
	"golang.org/x/sync/semaphore"
)

// Queue caps. ZooKeeper keeps every znode, data included, in its heap, so
// what the queues hold is capped: items and bytes of each queue, and of all
// the queues under the root together (where each queue counts three items
// more, for its directories, even empty).
//
// The figures come from ZooKeeper, so that they hold for several gateways
// sharing one root: a count of a queue is one listing of its entries (the
// names, and the parent's cversion with them) and, for the items this
// gateway has not seen yet, one stat each (their size); a census counts
// every queue. Between counts a gateway adds what it produces and removes
// what it takes or acks, and lets a produce through with no request more as
// long as the figures leave room and what it produced since its last count
// (and had under way at it) stays within a sixteenth of each cap, or is one
// item: its blind budget. The others' produces are unseen until the next
// count, so with G gateways on one root a cap may be passed by at most G-1
// blind budgets; with one gateway the caps are exact. (A gateway's produces
// that its last count missed are at most its budget; the gateway that
// counted last saw every other's items but theirs.)
//
// A produce that would pass a cap counts again first (a stat of the
// entries when nothing changed since the last listing; a census at most
// once a second for the caps on all queues), so that a refusal rests on
// fresh figures: queue_full, naming the cap and the figures.
//
// What this costs the produce path: nothing in the common case (a create,
// or a create with the listing behind it when takes wait, as without
// caps). The
// first produce of a gateway takes a census, the first into a queue a count,
// and then one count per blind budget: a listing of the entries every
// MaxItems/16 items or MaxBytes/16 bytes produced into a queue, and a census
// every MaxTotalItems/16 items or MaxTotalBytes/16 bytes produced in all,
// each with a stat of every item another client produced since. With the
// defaults, a gateway alone lists a queue every 625 items (or 1 MiB) it
// produces into it.
//
// A delayed item (queuedelay.go) is an item: a count lists the delayed
// items with the entries, when the entries' data version says there may be
// some (a queue that never had one costs no request more), and a move into
// the entries keeps its size under its new id. The delayed items' directory
// is not among a queue's QueueNodes: it is a container, there only while
// they are.

// QueueConfig caps what the queues hold; a zero field takes its default.
type QueueConfig struct {
	MaxItems      int   // items in one queue (10,000)
	MaxBytes      int64 // bytes of the items of one queue (16 MiB)
	MaxTotalItems int   // items of all queues, each queue counting QueueNodes more (100,000)
	MaxTotalBytes int64 // bytes of the items of all queues (64 MiB)
}

// The defaults of QueueConfig.
const (
	DefaultMaxQueueItems  = 10_000
	DefaultMaxQueueBytes  = 16 << 20
	DefaultMaxQueuesItems = 100_000
	DefaultMaxQueuesBytes = 64 << 20
)

func (c QueueConfig) withDefaults() QueueConfig {
	if c.MaxItems <= 0 {
		c.MaxItems = DefaultMaxQueueItems
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxQueueBytes
	}
	if c.MaxTotalItems <= 0 {
		c.MaxTotalItems = DefaultMaxQueuesItems
	}
	if c.MaxTotalBytes <= 0 {
		c.MaxTotalBytes = DefaultMaxQueuesBytes
	}
	return c
}

// blindShare is the part of a cap a gateway may produce into between two
// counts: one sixteenth.
const blindShare = 16

// censusFresh is how old a census may be and still refuse a produce at a
// cap on all queues: a refused produce takes a census at most once a
// second.
const censusFresh = time.Second

// MaxProducingBytes bounds the items of one gateway's produces under way in
// ZooKeeper at once (each item weighs its size and 1 KiB): ZooKeeper reads
// every request it is sent into its heap before it writes any, so a crowd
// of concurrent produces of large items would fill it however small the
// queues. A produce over it waits for room.
const MaxProducingBytes = 8 << 20

// figures are a count of items and of their bytes.
type figures struct {
	items int
	bytes int64
}

func (f *figures) add(g figures) { f.items += g.items; f.bytes += g.bytes }
func (f *figures) sub(g figures) { f.items -= g.items; f.bytes -= g.bytes }

// queueTally is what a gateway knows of one queue.
type queueTally struct {
	sizes   map[string]int // the items' sizes, by id: counted, or produced here since
	held    figures        // the sum of sizes
	pending figures        // produces under way
	// blind is what was produced here that the last count may not have
	// seen: the produces under way when it began, and those since.
	blind   figures
	exists  bool // the queue's directories are there
	counted bool // counted once at least
	gen     int  // the counts so far
	// cversion and version are the entries' cversion and data version at
	// the last listing: a count that finds both unchanged needs no listing
	// (a delayed produce steps the version; see queuedelay.go).
	cversion int32
	version  int32
	// While a count is under way: the items produced here (its listing may
	// have been taken before they were made), and the produces reserved.
	madeInCount     map[string]int
	reservedInCount figures
	// dropped: the ledger forgot the queue; a count under way that still
	// writes the tally no longer moves the figures of all queues.
	dropped bool
}

// QueueNodes is what a queue counts toward the items of all queues, even
// empty: its three directories are znodes too.
const QueueNodes = 3

// contribution is what t adds to the figures of all queues.
func (t *queueTally) contribution() figures {
	f := t.held
	f.add(t.pending)
	if t.exists {
		f.items += QueueNodes
	}
	return f
}

// queueLedger is what a gateway knows of every queue under the root.
type queueLedger struct {
	caps      QueueConfig
	producing *semaphore.Weighted

	mu       sync.Mutex
	queues   map[string]*queueTally
	total    figures // the sum of the queues' contributions
	blind    figures // as queueTally.blind, of every queue, for the census
	censused bool
	censusAt time.Time
	censuses int
	// While a census is under way: the produces reserved.
	censusing        bool
	reservedInCensus figures

	counting chan struct{} // held by the one count or census under way
}

func newQueueLedger(caps QueueConfig) *queueLedger {
	return &queueLedger{caps: caps.withDefaults(), producing: semaphore.NewWeighted(MaxProducingBytes),
		queues: map[string]*queueTally{}, counting: make(chan struct{}, 1)}
}

// tallyLocked returns the tally of queue name, new if need be.
func (l *queueLedger) tallyLocked(name string) *queueTally {
	t := l.queues[name]
	if t == nil {
		t = &queueTally{sizes: map[string]int{}, cversion: -1}
		l.queues[name] = t
	}
	return t
}

// update applies change to t and keeps the figures of all queues with it.
func (l *queueLedger) update(t *queueTally, change func()) {
	if t.dropped {
		change()
		return
	}
	l.total.sub(t.contribution())
	change()
	l.total.add(t.contribution())
}

// dropLocked forgets queue name and what it adds to the figures.
func (l *queueLedger) dropLocked(name string) {
	if t := l.queues[name]; t != nil {
		l.total.sub(t.contribution())
		t.dropped = true
		delete(l.queues, name)
	}
}

// whatToCount is what a produce must count before it decides.
type whatToCount int

const (
	countNothing whatToCount = iota
	countQueue
	countQueueIfChanged // a refusal's: a stat of the entries, a listing if they changed
	countAll
)

// wantLocked says what a produce of size bytes into t must count first.
// confirmedQueue and confirmedAll say that this produce counted already to
// confirm a refusal, which then stands.
func (l *queueLedger) wantLocked(t *queueTally, size int, confirmedQueue, confirmedAll bool) whatToCount {
	c := l.caps
	switch {
	case !l.censused:
		return countAll
	case !t.counted:
		return countQueue
	case l.blind.items > 0 && (l.blind.items+1 > c.MaxTotalItems/blindShare || l.blind.bytes+int64(size) > c.MaxTotalBytes/blindShare):
		return countAll
	case t.blind.items > 0 && (t.blind.items+1 > c.MaxItems/blindShare || t.blind.bytes+int64(size) > c.MaxBytes/blindShare):
		return countQueue
	case !confirmedAll && l.overAllLocked(t, size) != nil && time.Since(l.censusAt) > censusFresh:
		return countAll
	case !confirmedQueue && l.overQueueLocked(t, size) != "":
		return countQueueIfChanged
	}
	return countNothing
}

// overQueueLocked names the cap of one queue that an item of size bytes
// would pass, or "".
func (l *queueLedger) overQueueLocked(t *queueTally, size int) string {
	f := t.held
	f.add(t.pending)
	switch {
	case f.items+1 > l.caps.MaxItems:
		return "max-queue-items"
	case f.bytes+int64(size) > l.caps.MaxBytes:
		return "max-queue-bytes"
	}
	return ""
}

// overAllLocked is the refusal of an item of size bytes into t by the caps
// on all queues, or nil.
func (l *queueLedger) overAllLocked(t *queueTally, size int) *Error {
	items := l.total.items + 1
	if !t.exists {
		items += QueueNodes
	}
	switch {
	case items > l.caps.MaxTotalItems:
		return &Error{Code: CodeQueueFull, Extra: map[string]any{"exceeded": "max-queues-items", "max": l.caps.MaxTotalItems},
			Detail: fmt.Sprintf("the queues hold %d items together (each queue counting three more), the most they may (--max-queues-items); take items, or delete empty queues", l.total.items)}
	case l.total.bytes+int64(size) > l.caps.MaxTotalBytes:
		return &Error{Code: CodeQueueFull, Extra: map[string]any{"exceeded": "max-queues-bytes", "max": l.caps.MaxTotalBytes},
			Detail: fmt.Sprintf("the queues hold %d bytes together: an item of %d bytes would pass the %d they may hold (--max-queues-bytes); take items first", l.total.bytes, size, l.caps.MaxTotalBytes)}
	}
	return nil
}

// refusalLocked is the refusal of an item of size bytes into queue name,
// or nil when there is room.
func (l *queueLedger) refusalLocked(name string, t *queueTally, size int) *Error {
	f := t.held
	f.add(t.pending)
	var e *Error
	switch l.overQueueLocked(t, size) {
	case "max-queue-items":
		e = &Error{Code: CodeQueueFull, Extra: map[string]any{"exceeded": "max-queue-items", "max": l.caps.MaxItems},
			Detail: fmt.Sprintf("queue %q holds %d items, the most one queue may hold (--max-queue-items); take items first", name, f.items)}
	case "max-queue-bytes":
		e = &Error{Code: CodeQueueFull, Extra: map[string]any{"exceeded": "max-queue-bytes", "max": l.caps.MaxBytes},
			Detail: fmt.Sprintf("queue %q holds %d bytes: an item of %d bytes would pass the %d one queue may hold (--max-queue-bytes); take items first", name, f.bytes, size, l.caps.MaxBytes)}
	default:
		if e = l.overAllLocked(t, size); e == nil {
			return nil
		}
	}
	e.Extra["queue"] = map[string]any{"name": name, "items": f.items, "bytes": f.bytes}
	e.Extra["all_queues"] = map[string]any{"items": l.total.items, "bytes": l.total.bytes}
	return e
}

// reservation is a produce under way, counted in the figures until it is
// done.
type reservation struct {
	l      *queueLedger
	t      *queueTally
	weight int64 // in producing
	size   figures
}

// reserve counts a produce of size bytes into queue name in the figures,
// counting the queue (or every queue) first when the figures say so, and
// waits for room among the produces under way. It refuses one that would
// pass a cap with queue_full.
func (q *Queues) reserve(ctx context.Context, name string, size int) (*reservation, error) {
	l := q.ledger
	var confirmedQueue, confirmedAll bool
	for {
		l.mu.Lock()
		t := l.tallyLocked(name)
		want := l.wantLocked(t, size, confirmedQueue, confirmedAll)
		gen, censuses := t.gen, l.censuses
		if want == countNothing {
			if e := l.refusalLocked(name, t, size); e != nil {
				if !t.exists && t.pending.items == 0 && t.madeInCount == nil {
					l.dropLocked(name) // made for this produce alone
				}
				l.mu.Unlock()
				return nil, e
			}
			r := &reservation{l: l, t: t, weight: int64(size) + 1<<10, size: figures{1, int64(size)}}
			l.update(t, func() { t.pending.add(r.size) })
			t.blind.add(r.size)
			l.blind.add(r.size)
			if t.madeInCount != nil {
				t.reservedInCount.add(r.size)
			}
			if l.censusing {
				l.reservedInCensus.add(r.size)
			}
			l.mu.Unlock()
			if err := l.producing.Acquire(ctx, r.weight); err != nil {
				r.weight = 0
				r.cancel()
				return nil, readErr(context.Cause(ctx))
			}
			return r, nil
		}
		l.mu.Unlock()
		var err error
		switch want {
		case countAll:
			err = q.census(ctx, name, censuses)
			confirmedAll = true
		default:
			err = q.countQueue(ctx, name, gen, want == countQueueIfChanged)
			confirmedQueue = want == countQueueIfChanged
		}
		if err != nil {
			return nil, err
		}
	}
}

// done counts the item id in the figures as held: the produce made it.
func (r *reservation) done(id string) {
	r.release()
	l, t := r.l, r.t
	l.mu.Lock()
	defer l.mu.Unlock()
	l.update(t, func() {
		t.pending.sub(r.size)
		t.exists = true
		if _, ok := t.sizes[id]; !ok {
			t.sizes[id] = int(r.size.bytes)
			t.held.add(r.size)
		}
		if t.madeInCount != nil {
			t.madeInCount[id] = int(r.size.bytes)
		}
	})
}

// cancel takes the produce out of the figures: it made no item, or none
// known (a lost reply: the next count finds it, if it was made).
func (r *reservation) cancel() {
	r.release()
	l, t := r.l, r.t
	l.mu.Lock()
	defer l.mu.Unlock()
	l.update(t, func() { t.pending.sub(r.size) })
}

func (r *reservation) release() {
	if r.weight > 0 {
		r.l.producing.Release(r.weight)
		r.weight = 0
	}
}

// moved renames item from of queue name, a delayed item, to to: this
// gateway moved it into the entries (it is the same item, of the same size).
func (l *queueLedger) moved(name, from, to string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.queues[name]
	if t == nil {
		return
	}
	if size, ok := t.sizes[from]; ok {
		delete(t.sizes, from)
		t.sizes[to] = size
	}
	if size, ok := t.madeInCount[from]; ok {
		delete(t.madeInCount, from)
		t.madeInCount[to] = size
	}
}

// removed takes item id of queue name out of the figures: this gateway
// consumed it.
func (l *queueLedger) removed(name, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.queues[name]
	if t == nil {
		return
	}
	delete(t.madeInCount, id)
	if size, ok := t.sizes[id]; ok {
		l.update(t, func() {
			delete(t.sizes, id)
			t.held.sub(figures{1, int64(size)})
		})
	}
}

// forget drops queue name from the figures: it was deleted.
func (l *queueLedger) forget(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.queues[name]; t != nil && t.pending.items == 0 {
		l.dropLocked(name)
	}
}

// lockCounting waits for the count or census under way, if any, to end.
func (l *queueLedger) lockCounting(ctx context.Context) error {
	select {
	case l.counting <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (l *queueLedger) unlockCounting() { <-l.counting }

// countQueue counts queue name (see the top of this file), unless it was
// counted since its count gen. With ifChanged, a queue counted before is
// first looked at with a stat of its entries, and listed only if they
// changed since.
func (q *Queues) countQueue(ctx context.Context, name string, gen int, ifChanged bool) error {
	l := q.ledger
	if err := l.lockCounting(ctx); err != nil {
		return readErr(err)
	}
	defer l.unlockCounting()
	l.mu.Lock()
	again := l.tallyLocked(name).gen == gen
	l.mu.Unlock()
	if !again {
		return nil
	}
	if err := q.countLocked(ctx, name, ifChanged); err != nil {
		return readErr(err)
	}
	return nil
}

// countLocked is countQueue, under the counting lock.
func (q *Queues) countLocked(ctx context.Context, name string, ifChanged bool) error {
	l := q.ledger
	conn := q.sess.Conn()
	l.mu.Lock()
	t := l.tallyLocked(name)
	pending := t.pending
	t.madeInCount, t.reservedInCount = map[string]int{}, figures{}
	cversion, version := t.cversion, t.version
	l.mu.Unlock()
	err := q.count(ctx, conn, name, t, ifChanged && cversion >= 0, cversion, version)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		t.blind = pending
		t.blind.add(t.reservedInCount)
		t.gen++
	}
	t.madeInCount, t.reservedInCount = nil, figures{}
	return err
}

// count reads queue name into t: see countLocked. Its delayed items count
// as items (they are znodes and bytes in ZooKeeper's heap as much); they are
// listed only when the entries' data version says there may be some.
func (q *Queues) count(ctx context.Context, conn *zk.Conn, name string, t *queueTally, ifChanged bool, cversion, version int32) error {
	l := q.ledger
	entries := q.entries(name)
	if ifChanged {
		ok, st, err := conn.Exists(entries)
		if err != nil {
			return err
		}
		if ok && st.Cversion == cversion && st.Version == version {
			return nil // nothing made or removed since the last listing
		}
	}
	names, st, err := conn.Children(entries)
	if errors.Is(err, zk.ErrNoNode) {
		names, st, err = nil, &zk.Stat{Cversion: -1}, nil
	}
	if err != nil {
		return err
	}
	paths := map[string]string{} // the unknown delayed items' paths
	if st.Cversion >= 0 {
		ds, err := q.listDelayed(name, st.Version)
		if err != nil {
			return err
		}
		for _, d := range ds {
			names = append(names, d.node)
			paths[d.node] = q.delayed(name) + "/" + d.node
		}
	}
	l.mu.Lock()
	var unknown []string
	for _, n := range names {
		if _, ok := t.sizes[n]; !ok {
			unknown = append(unknown, n)
		}
	}
	l.mu.Unlock()
	sizes := make([]int, len(unknown))
	err = forEach(ctx, len(unknown), func(i int) error {
		p, ok := paths[unknown[i]]
		if !ok {
			p = entries + "/" + unknown[i]
		}
		ok, stat, err := conn.Exists(p)
		switch {
		case err != nil:
			return err
		case ok:
			sizes[i] = int(stat.DataLength)
		default:
			sizes[i] = -1 // consumed meanwhile
		}
		return nil
	})
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	counted := make(map[string]int, len(names))
	for i, n := range unknown {
		if sizes[i] >= 0 {
			counted[n] = sizes[i]
		}
	}
	for _, n := range names {
		if s, ok := t.sizes[n]; ok {
			counted[n] = s
		}
	}
	// Items made here since the count began may be missing from its
	// listing.
	for n, s := range t.madeInCount {
		counted[n] = s
	}
	l.update(t, func() {
		t.sizes, t.held = counted, figures{}
		for _, s := range counted {
			t.held.add(figures{1, int64(s)})
		}
		t.exists = st.Cversion >= 0 || len(counted) > 0
		t.counted, t.cversion, t.version = true, st.Cversion, st.Version
	})
	return nil
}

// census counts every queue under the root, and every queue this gateway
// knows of that is no longer there, unless a census was taken since the
// census count censuses; it forgets those no longer there, but the queue
// keep (that a produce is about to make).
func (q *Queues) census(ctx context.Context, keep string, censuses int) error {
	l := q.ledger
	if err := l.lockCounting(ctx); err != nil {
		return readErr(err)
	}
	defer l.unlockCounting()
	l.mu.Lock()
	again := l.censuses == censuses
	l.mu.Unlock()
	if !again {
		return nil
	}
	names, err := q.sess.children(ctx, kinds.Queues.Dir(q.sess.Root()))
	if err != nil {
		return err
	}
	l.mu.Lock()
	var pending figures
	listed := map[string]bool{}
	for _, n := range names {
		listed[n] = true
	}
	for n, t := range l.queues {
		pending.add(t.pending)
		if !listed[n] {
			names = append(names, n)
		}
	}
	l.censusing, l.reservedInCensus = true, figures{}
	l.mu.Unlock()
	err = forEach(ctx, len(names), func(i int) error {
		if ValidName(names[i]) != nil {
			return nil // not a queue of ours: leave it alone
		}
		return q.countLocked(ctx, names[i], false)
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.censusing = false
	if err != nil {
		return readErr(err)
	}
	l.blind = pending
	l.blind.add(l.reservedInCensus)
	l.total = figures{}
	for n, t := range l.queues {
		if !t.exists && t.pending.items == 0 && n != keep {
			t.dropped = true
			delete(l.queues, n)
			continue
		}
		l.total.add(t.contribution())
	}
	l.censused, l.censusAt = true, time.Now()
	l.censuses++
	return nil
}
