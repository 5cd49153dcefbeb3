package recipes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// Queues follow kazoo's LockingQueue: an item is the PERSISTENT_SEQUENTIAL
// node {root}/queues/{name}/entries/entry-<ppp>-<seq10> holding the raw
// bytes; a consumer claims it with the EPHEMERAL node .../taken/<entry>, and
// consumes it by deleting both in one transaction. An item produced with a
// due time waits in .../delayed until then (queuedelay.go).
type Queues struct {
	*lines
	cache  *watchCache
	keep   *keepers
	of     func(*Lease) *Queues // the queues of the lease's session
	ledger *queueLedger         // what the queues hold, against their caps (queuecaps.go)
	mover  *delayMover          // moves delayed items when due (queuedelay.go)
}

// Priorities: lower is served first.
const (
	MinPriority     = 0
	MaxPriority     = 999
	DefaultPriority = 100
)

// Item is a queue item's metadata.
type Item struct {
	ID        string    `json:"id"`
	Priority  int       `json:"priority"`
	Size      int       `json:"size"`
	CreatedAt time.Time `json:"created_at"`
	ClaimedBy *string   `json:"claimed_by,omitempty"` // the holder (or lease) of the claim
	// NotBefore is the due time of an item produced delayed: until then its
	// id is its delayed node's (due-…), and it gets an entry-… id when it
	// moves into the queue.
	NotBefore *time.Time `json:"not_before,omitempty"`
	seq       int64
}

// QueueState is the length and head of a queue.
type QueueState struct {
	Name    string `json:"name"`
	Length  int    `json:"length"`  // items, claimed or not
	Claimed int    `json:"claimed"` // items claimed now
	// Delayed items are not in Length nor Head: they are not served before
	// NextDue, the earliest due time among them.
	Delayed int        `json:"delayed"`
	NextDue *time.Time `json:"next_due,omitempty"`
	Head    []Item     `json:"head"`
	Index   int64      `json:"-"`
}

// Taken is an item taken or claimed from a queue.
type Taken struct {
	Item
	Data []byte
}

func (q *Queues) base(name string) string    { return kinds.Queues.Path(q.sess.Root(), name) }
func (q *Queues) entries(name string) string { return q.base(name) + "/entries" }
func (q *Queues) taken(name string) string   { return q.base(name) + "/taken" }

// ParseItemID reads entry-<ppp>-<seq>; it is the check of an item id that
// came from a client.
func ParseItemID(id string) (priority int, seq int64, err error) {
	rest, ok := strings.CutPrefix(id, "entry-")
	pp, ss, ok2 := strings.Cut(rest, "-")
	if !ok || !ok2 || len(pp) != 3 || len(ss) < 10 || len(ss) > 19 {
		return 0, 0, Errorf(CodeInvalid, "an item id looks like entry-100-0000000042")
	}
	p, perr := strconv.Atoi(pp)
	s, serr := strconv.ParseInt(ss, 10, 64)
	if perr != nil || serr != nil || p < MinPriority || s < 0 || strings.ContainsAny(pp+ss, "+-") {
		return 0, 0, Errorf(CodeInvalid, "an item id looks like entry-100-0000000042")
	}
	return p, s, nil
}

// Produce appends data with a priority and returns the new item. A produce
// that would pass a cap of the queues (QueueConfig) is queue_full.
func (q *Queues) Produce(ctx context.Context, name string, data []byte, priority int) (Item, error) {
	return q.ProduceWith(ctx, name, data, ProduceOptions{Priority: priority})
}

// ProduceOptions are the options of a produce.
type ProduceOptions struct {
	Priority int
	// NotBefore, when after now (and at most MaxDelay ahead), delays the
	// item: nobody takes or claims it before then (queuedelay.go).
	NotBefore time.Time
}

// ProduceWith is Produce with options: a delayed item counts against the
// caps as any other.
func (q *Queues) ProduceWith(ctx context.Context, name string, data []byte, o ProduceOptions) (Item, error) {
	if err := ValidName(name); err != nil {
		return Item{}, err
	}
	priority := o.Priority
	if priority < MinPriority || priority > MaxPriority {
		return Item{}, Errorf(CodeInvalid, "priority must be between %d and %d", MinPriority, MaxPriority)
	}
	due, err := dueAt(o.NotBefore)
	if err != nil {
		return Item{}, err
	}
	sess := q.sess
	if st, _, _ := sess.Status(); st != StateLive {
		return Item{}, unavailable()
	}
	r, err := q.reserve(ctx, name, len(data))
	if err != nil {
		return Item{}, err
	}
	var item Item
	if due.IsZero() {
		item, err = q.produce(ctx, name, data, priority)
	} else {
		item, err = q.produceDelayed(ctx, name, data, priority, due)
	}
	if err != nil {
		r.cancel()
		return Item{}, err
	}
	r.done(item.ID)
	return item, nil
}

// produce makes the item of Produce.
func (q *Queues) produce(ctx context.Context, name string, data []byte, priority int) (Item, error) {
	sess := q.sess
	entries := q.entries(name)
	prefix := entries + fmt.Sprintf("/entry-%03d-", priority)
	for {
		if st, _, _ := sess.Status(); st != StateLive {
			return Item{}, unavailable()
		}
		_, epoch, _ := sess.Status()
		p, err := q.create(entries, prefix, data)
		switch {
		case err == nil:
			id := p[strings.LastIndexByte(p, '/')+1:]
			_, seq, _ := ParseItemID(id)
			return Item{ID: id, Priority: priority, Size: len(data), CreatedAt: time.Now().UTC(), seq: seq}, nil
		case errors.Is(err, zk.ErrNoNode):
			if err := q.ensure(ctx, name, epoch); err != nil {
				return Item{}, withoutLease(err)
			}
		case ambiguous(err):
			// A sequential create whose reply is lost cannot be found again:
			// say so rather than risk a duplicate.
			return Item{}, &Error{Code: CodeUnavailable, Detail: "the connection to ZooKeeper dropped during the produce: the item may or may not have been added", Err: err}
		default:
			return Item{}, internal(err, "produce")
		}
	}
}

// create makes the item node prefix<seq> in the directory entries.
// When takes or claims of this gateway wait on the queue (they wait on the
// watch cache's listing of the entries), the entries are listed right
// behind the create, in the same round trip (ZooKeeper runs a session's
// requests in order, so the listing shows the item), and the listing goes
// to the cache: the waiters get the item without waiting for the watch to
// fire and the cache to list the entries again.
func (q *Queues) create(entries, prefix string, data []byte) (string, error) {
	sess := q.sess
	if !q.cache.waited(entries) {
		return sess.Conn().Create(prefix, data, zk.FlagSequence, sess.acl())
	}
	p, _, list, err := sess.Conn().CreateWithStatThenChildren(prefix, data, zk.FlagSequence, sess.acl(), entries)
	if err == nil && list.Err == nil {
		q.cache.offer(entries, list.Children, list.Stat)
	}
	return p, err
}

// ensure makes the queue's directories. They are PERSISTENT, as kazoo makes
// them, not CONTAINERs: a container that ZooKeeper removes when the queue
// drains would restart the entries' sequence (item ids would repeat) and
// break kazoo consumers, which make the paths once and never look again.
// An empty queue is removed with Delete.
func (q *Queues) ensure(ctx context.Context, name string, epoch uint64) error {
	if err := q.sess.check(epoch); err != nil {
		return err
	}
	for _, p := range []string{q.entries(name), q.taken(name)} {
		if err := q.sess.createPersistent(ctx, p); err != nil {
			if ambiguous(err) {
				return unavailable()
			}
			return internal(err, "create queue "+p)
		}
	}
	return nil
}

// Delete removes an empty queue (its directories). A queue with items or
// claims is not_empty.
func (q *Queues) Delete(ctx context.Context, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if st, _, _ := q.sess.Status(); st != StateLive {
		return unavailable()
	}
	// A NoNode is a directory gone between the stat and the transaction:
	// deleted by another client, or the delayed items' container removed by
	// ZooKeeper when it emptied. The stats are read again.
	for range 3 {
		ops, err := q.deleteOps(name)
		if err != nil || len(ops) == 0 {
			return err
		}
		_, err = q.sess.Conn().Multi(ops...)
		switch {
		case err == nil:
			q.ledger.forget(name)
			q.mover.forget(name)
			return nil
		case errors.Is(err, zk.ErrNoNode):
			continue
		case errors.Is(err, zk.ErrNotEmpty), errors.Is(err, zk.ErrBadVersion):
			return &Error{Code: CodeNotEmpty, Detail: fmt.Sprintf("queue %q still has items, delayed items or claims", name)}
		case ambiguous(err):
			return unavailable()
		default:
			return internal(err, "delete queue")
		}
	}
	q.ledger.forget(name)
	q.mover.forget(name)
	return nil
}

// deleteOps are the deletes of the queue's directories that exist, at the
// versions read.
func (q *Queues) deleteOps(name string) ([]any, error) {
	conn := q.sess.Conn()
	ops := []any{}
	for _, p := range []string{q.delayed(name), q.taken(name), q.entries(name), q.base(name)} {
		ok, stat, err := conn.Exists(p)
		if err != nil {
			return nil, readErr(err)
		}
		if ok {
			// ZooKeeper refuses to delete a directory with children, so an
			// item produced or claimed meanwhile fails the whole transaction
			// instead of being lost.
			ops = append(ops, &zk.DeleteRequest{Path: p, Version: stat.Version})
		}
	}
	return ops, nil
}

// queueView is a queue's items (and, from the cache, its claims), with the
// channels of the watch cache that close at the next change of either.
type queueView struct {
	items []Item
	// cached: the items and their claims come from the watch cache, which
	// may lag: a claim found taken is not worth a listing of the claims.
	cached bool
	// changed: of the entries, the claims and the delayed items.
	changed [3]<-chan struct{}
	release func()
}

// view reads the queue for a take or claim. One that will not wait lists
// the entries directly: a client always sees its own writes. One that waits
// subscribes to the watch cache and takes the items and claims from its
// listings, which it watches anyway, instead of listing them again: the
// cache publishes a change only once it has read the new listing, so a
// waiter woken by a change sees it. A listing older than an item the caller
// knows of only delays it: the change that brings the item is on its way,
// and wakes the view. Claims settle which item is whose (see claimFirst).
func (q *Queues) view(ctx context.Context, name string, subscribe bool) (*queueView, error) {
	if !subscribe {
		return q.listView(ctx, name)
	}
	entries, taken, delayed, ch, release, err := q.subscribe(ctx, name)
	if err != nil {
		return nil, err
	}
	// The gateway's mover moves the due ones, and the move wakes the view.
	if ds := delayedOf(snapshotNames(delayed)); len(ds) > 0 {
		q.mover.add(name, ds[0].due)
	}
	names := snapshotNames(entries)
	claimed := make(map[string]bool, len(taken.Children))
	for _, c := range taken.Children {
		claimed[c.Name] = true
	}
	return &queueView{items: itemsOf(names, claimed), cached: true, changed: ch, release: release}, nil
}

// listView is the view of a take or claim that will not wait: the entries
// listed, after the due delayed items (if the entries' data version says
// there may be some) are moved into them.
func (q *Queues) listView(ctx context.Context, name string) (*queueView, error) {
	adds := q.mover.addsOf(name)
	items, _, version, err := q.list(name, false)
	if err != nil {
		return nil, readErr(err)
	}
	ds, err := q.listDelayed(name, version)
	if err != nil {
		return nil, readErr(err)
	}
	// A move that fails is the mover's to retry: the items listed stand.
	if due, _ := q.moveDue(ctx, name, ds, adds); due > 0 {
		if items, _, _, err = q.list(name, false); err != nil {
			return nil, readErr(err)
		}
	}
	return &queueView{items: items, release: func() {}}, nil
}

func snapshotNames(s *Snapshot) []string {
	names := make([]string, len(s.Children))
	for i, c := range s.Children {
		names[i] = c.Name
	}
	return names
}

// subscribe keeps the queue's three directories watched and returns the
// cache's listings of them (entries, claims, delayed items), and the
// channels closed at the next change of each.
func (q *Queues) subscribe(ctx context.Context, name string) (entries, taken, delayed *Snapshot, changed [3]<-chan struct{}, release func(), err error) {
	var rels []func()
	release = func() {
		for _, r := range rels {
			r()
		}
	}
	var snaps [3]*Snapshot
	for i, p := range []string{q.entries(name), q.taken(name), q.delayed(name)} {
		snap, ch, rel, err := q.cache.view(ctx, p, entryOpts{namesOnly: true})
		if err != nil {
			release()
			return nil, nil, nil, changed, nil, readErr(err)
		}
		snaps[i], changed[i] = snap, ch
		rels = append(rels, rel)
	}
	return snaps[0], snaps[1], snaps[2], changed, release, nil
}

// list reads the items (names only, in serving order), with claims which
// are claimed, the queue's index and the entries' data version (which says
// whether there may be delayed items: see queuedelay.go). Without claims,
// the taken directory is not read (a take or claim finds out from its
// create; see claimFirst) and the index is that of the entries.
func (q *Queues) list(name string, claims bool) ([]Item, int64, int32, error) {
	conn := q.sess.Conn()
	var index int64
	var version int32
	names, es, err := conn.Children(q.entries(name))
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, 0, 0, err
	}
	if es != nil {
		index = max(es.Pzxid, es.Mzxid)
		version = es.Version
	}
	var claimed []string
	if claims {
		var ts *zk.Stat
		claimed, ts, err = conn.Children(q.taken(name))
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, 0, 0, err
		}
		if ts != nil {
			index = max(index, ts.Pzxid, ts.Mzxid)
		}
	}
	if index == 0 {
		// An absent queue takes its index from the queues' parent.
		if _, ps, err := conn.Exists(kinds.Queues.Dir(q.sess.Root())); err == nil && ps != nil {
			index = ps.Pzxid
		}
	}
	isClaimed := map[string]bool{}
	for _, c := range claimed {
		isClaimed[c] = true
	}
	return itemsOf(names, isClaimed), index, version, nil
}

// itemsOf returns the items among the entries' names, in serving order,
// marked claimed as isClaimed says.
func itemsOf(names []string, isClaimed map[string]bool) []Item {
	var items []Item
	for _, n := range names {
		p, seq, err := ParseItemID(n)
		if err != nil {
			continue // not an item: leave it alone
		}
		it := Item{ID: n, Priority: p, seq: seq}
		if isClaimed[n] {
			it.ClaimedBy = new(string)
		}
		items = append(items, it)
	}
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		return a.seq < b.seq
	})
	return items
}

// claimFirst claims the first item of v that is not claimed, with the
// EPHEMERAL node taken/<item> holding claimData (of the session of epoch),
// and reads its data. found is false when every item is claimed (or gone).
// A view listed directly does not say which items are claimed: the first
// claim found taken has the taken directory read, once, to skip the others
// (where claims are rare, as with takes, that read is saved). A view from
// the cache says so already, if a little late: a claim found taken there is
// mostly a consumer of this gateway woken by the same change and a step
// ahead, and a listing would only cost each of them a request more.
//
// keep, when not nil, says whether a claim node whose create went
// unanswered has been taken up since (by a retry of the same lease), so
// must stay. It is nil for a take, whose claimant is new at every call: a
// claim node that is there already is someone else's, known without a read.
func (q *Queues) claimFirst(ctx context.Context, name string, v *queueView, claimData []byte, epoch uint64, claimant string, keep func(node string) bool) (t Taken, found bool, err error) {
	sess := q.sess
	var claimed map[string]bool // listed at the first claim found taken
	listClaims := !v.cached
	for _, it := range v.items {
		if it.ClaimedBy != nil || claimed[it.ID] {
			continue
		}
		claimNode := q.taken(name) + "/" + it.ID
		_, err := sess.createOwned(ctx, claimNode, epoch, ownedNode{data: claimData, flags: zk.FlagEphemeral, lease: claimant, fresh: keep == nil})
		switch {
		case errors.Is(err, zk.ErrNodeExists):
			// Claimed by another consumer: skip the others' claims too.
			if listClaims {
				listClaims = false
				claimed = map[string]bool{}
				if names, _, lerr := sess.Conn().Children(q.taken(name)); lerr == nil {
					for _, n := range names {
						claimed[n] = true
					}
				}
			}
			continue
		case errors.Is(err, errNoParent):
			return Taken{}, false, err
		case err != nil:
			// The create may have been applied, its reply lost with the
			// connection: a claim node nobody tracks would hide the item
			// until the session ends. It goes once the session is back.
			go q.dropLostClaim(claimNode, epoch, claimant, keep)
			return Taken{}, false, err
		}
		data, _, err := sess.Conn().Get(q.entries(name) + "/" + it.ID)
		if err != nil {
			// Consumed by someone who ignores claims, or gone: drop ours.
			_ = sess.deleteNode(context.Background(), claimNode, epoch)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			return Taken{}, false, readErr(err)
		}
		it.Size = len(data)
		return Taken{Item: it, Data: data}, true, nil
	}
	return Taken{}, false, nil
}

// dropLostClaim deletes claimNode, whose create went unanswered, if it was
// made after all (by the session of epoch, for claimant) and nobody kept it,
// once the session is live again; a lost session took it already.
func (q *Queues) dropLostClaim(claimNode string, epoch uint64, claimant string, keep func(node string) bool) {
	if q.sess.waitEpoch(context.Background(), epoch) != nil {
		return
	}
	if keep != nil && keep(claimNode) {
		return
	}
	q.sess.dropStray(claimNode, claimant)
}

// next waits up to the ctx deadline for an item that is not claimed, and
// claims it with claim, which runs claimFirst (under the claim hold's lock,
// for Claim). It returns errEmpty when no item came.
func (q *Queues) next(ctx context.Context, lease *Lease, name string, tryOnce bool, claim func(v *queueView) (Taken, bool, error)) (Taken, error) {
	for {
		v, err := q.view(ctx, name, !tryOnce)
		if err != nil {
			if errors.Is(context.Cause(ctx), errWaitElapsed) {
				return Taken{}, errEmpty
			}
			return Taken{}, waitErr(ctx, lease, err)
		}
		t, found, err := claim(v)
		if errors.Is(err, errNoParent) {
			// No taken directory: made by a producer that does not make one,
			// or the queue was just deleted. Make it only while the queue is
			// there: a deleted queue must stay deleted.
			v.release()
			if ok, _, _ := q.sess.Conn().Exists(q.entries(name)); ok {
				if err := q.sess.createPersistent(ctx, q.taken(name)); err == nil {
					continue
				}
			}
			return Taken{}, errEmpty
		}
		if err != nil || found {
			v.release()
			if err != nil {
				if errors.Is(context.Cause(ctx), errWaitElapsed) && (lease == nil || lease.ctx.Err() == nil) {
					return Taken{}, errEmpty // no item in the wait, as for a failed view
				}
				return Taken{}, waitErr(ctx, lease, err)
			}
			return t, nil
		}
		if tryOnce {
			v.release()
			return Taken{}, errEmpty
		}
		select {
		case <-v.changed[0]:
		case <-v.changed[1]:
		case <-v.changed[2]:
		case <-ctx.Done():
			v.release()
			if errors.Is(context.Cause(ctx), errWaitElapsed) {
				return Taken{}, errEmpty
			}
			return Taken{}, waitErr(ctx, lease, context.Cause(ctx))
		}
		v.release()
	}
}

// errEmpty: no item came within the wait.
var errEmpty = &Error{Code: CodeNotFound, Detail: "the queue is empty"}

// IsEmpty reports whether err says that no item came within the wait.
func IsEmpty(err error) bool { return err == errEmpty }

// Take removes the first item and returns it (at-most-once: it is gone
// before the caller sees it), waiting up to wait for one.
func (q *Queues) Take(ctx context.Context, name string, wait time.Duration) (Taken, error) {
	if err := ValidName(name); err != nil {
		return Taken{}, err
	}
	st, epoch, _ := q.sess.Status()
	if st != StateLive {
		return Taken{}, unavailable()
	}
	ctx, cancel := context.WithTimeoutCause(ctx, waitBound(wait), errWaitElapsed)
	defer cancel()
	// A take claims the item as a claim does, with a claimant of its own,
	// then removes item and claim in one transaction.
	taker := "take:" + newLeaseID()
	data := nodeData{Holder: "take", Gateway: q.gatewayID, Lease: taker}.bytes()
	for {
		t, err := q.next(ctx, nil, name, wait <= 0, func(v *queueView) (Taken, bool, error) {
			return q.claimFirst(ctx, name, v, data, epoch, taker, nil)
		})
		if err != nil {
			return Taken{}, withoutLease(err)
		}
		claimNode := q.taken(name) + "/" + t.ID
		if ctx.Err() != nil && !errors.Is(context.Cause(ctx), errWaitElapsed) {
			// The client is gone: removing the item now would lose it.
			_ = q.sess.deleteNode(context.Background(), claimNode, epoch)
			return Taken{}, waitErr(ctx, nil, context.Cause(ctx))
		}
		_, err = q.sess.Conn().Multi(
			&zk.DeleteRequest{Path: q.entries(name) + "/" + t.ID, Version: -1},
			&zk.DeleteRequest{Path: claimNode, Version: -1},
		)
		if err == nil {
			q.ledger.removed(name, t.ID)
			return t, nil
		}
		_ = q.sess.deleteNode(context.Background(), claimNode, epoch)
		if errors.Is(err, zk.ErrNoNode) {
			q.ledger.removed(name, t.ID)
			continue // consumed by someone else meanwhile
		}
		return Taken{}, &Error{Code: CodeUnavailable, Detail: "the connection to ZooKeeper dropped while the item was being removed: it may or may not be gone", Err: err}
	}
}

// claimHold is a lease's claim of one queue's item (one per queue at a
// time), or its wait for one.
type claimHold struct {
	hold
	q    *Queues
	item Item // guarded by hold.mu; set once granted
}

const claimRole = "claim"

func claimKey(name string) string { return "claim\x00" + name }

func (c *claimHold) info() HoldInfo {
	return c.describe(func(i *HoldInfo) {
		i.Node = c.nodeLocked(claimRole)
		i.Item = c.item.ID
	})
}

// Claim hides the first item from other consumers until it is acked,
// nacked, or the lease ends (then it is served again: at-least-once). A
// lease has one claim per queue at a time: concurrent and repeated claims
// share it and return the same item, so a retried claim never strands one.
// A claim that no caller could be told of (every client hung up) is put
// back at once.
func (q *Queues) Claim(ctx context.Context, lease *Lease, name string, wait time.Duration) (Taken, error) {
	if o := q.of(lease); o != q {
		return o.Claim(ctx, lease, name, wait)
	}
	if err := ValidName(name); err != nil {
		return Taken{}, err
	}
	if err := lease.alive(); err != nil {
		return Taken{}, err
	}
	key := claimKey(name)
	for {
		c, err := joinHold(lease, key, func() *claimHold {
			h := &claimHold{hold: newHold(q.lines, lease, "claim", key, name), q: q}
			h.dropUntold = true
			return h
		}, nil)
		if err != nil {
			return Taken{}, err
		}
		t, err := q.claim(ctx, c, wait)
		c.leave(err == nil && ctx.Err() == nil)
		if errors.Is(err, errHoldGone) {
			continue // consumed behind our back, or acked or nacked meanwhile: claim anew
		}
		if err != nil {
			return Taken{}, err
		}
		return t, nil
	}
}

// claim waits for c's item, or returns it when c has one already.
func (q *Queues) claim(ctx context.Context, c *claimHold, wait time.Duration) (Taken, error) {
	lease, name := c.lease, c.name
	c.mu.Lock()
	granted, item := c.granted, c.item
	c.mu.Unlock()
	if granted {
		data, _, err := q.sess.Conn().Get(q.entries(name) + "/" + item.ID)
		if err == nil {
			return Taken{Item: item, Data: data}, nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return Taken{}, readErr(err)
		}
		_ = c.drop() // consumed by a client that ignores claims
		return Taken{}, errHoldGone
	}
	ctx, cancel := waitContext(ctx, lease, wait)
	defer cancel()
	holder := lease.Holder
	if holder == "" {
		holder = lease.ID
	}
	data := nodeData{Lease: lease.ID, Holder: lease.Holder, Gateway: q.gatewayID}.bytes()
	q.metrics.Waiting("claim", 1)
	defer q.metrics.Waiting("claim", -1)
	return q.next(ctx, lease, name, wait <= 0, func(v *queueView) (Taken, bool, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch {
		case c.gone:
			// Not goneErr: it may wait for the lease to finish ending, which
			// takes c.mu.
			return Taken{}, false, errHoldGone
		case c.granted:
			// Claimed by a concurrent call of the lease: the same item.
			data, _, err := q.sess.Conn().Get(q.entries(name) + "/" + c.item.ID)
			if err != nil {
				return Taken{}, false, readErr(err)
			}
			return Taken{Item: c.item, Data: data}, true, nil
		}
		t, found, err := q.claimFirst(ctx, name, v, data, lease.epoch, lease.ID, func(node string) bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return !c.gone && c.nodeLocked(claimRole) == node
		})
		if err != nil || !found {
			return t, found, err
		}
		t.ClaimedBy = &holder
		c.markGrantedLocked(0)
		c.item = t.Item
		c.setNodeLocked(claimRole, q.taken(name)+"/"+t.ID)
		return t, true, nil
	})
}

func (q *Queues) claimOf(lease *Lease, name, id string) (*claimHold, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if _, _, err := ParseItemID(id); err != nil {
		return nil, err
	}
	if err := lease.alive(); err != nil {
		return nil, err
	}
	c, ok := heldBy[*claimHold](lease, claimKey(name))
	if ok {
		c.mu.Lock()
		ok = c.granted && c.item.ID == id
		c.mu.Unlock()
	}
	if !ok {
		return nil, &Error{Code: CodeNotClaimed, Detail: fmt.Sprintf("lease %s has no claim on item %s of queue %q", lease.ID, id, name)}
	}
	return c, nil
}

// Ack consumes a claimed item: the item and the claim go in one transaction.
func (q *Queues) Ack(ctx context.Context, lease *Lease, name, id string) error {
	if o := q.of(lease); o != q {
		return o.Ack(ctx, lease, name, id)
	}
	c, err := q.claimOf(lease, name, id)
	if err != nil {
		return err
	}
	if err := q.sess.check(lease.epoch); err != nil {
		return err
	}
	claimNode := q.taken(name) + "/" + id
	_, err = q.sess.Conn().Multi(
		&zk.DeleteRequest{Path: q.entries(name) + "/" + id, Version: -1},
		&zk.DeleteRequest{Path: claimNode, Version: -1},
	)
	switch {
	case err == nil:
		q.ledger.removed(name, id)
		c.forgetNode(claimRole, claimNode) // gone with the item
	case errors.Is(err, zk.ErrNoNode):
		// The item was consumed by a client that ignores claims; our claim
		// goes with the drop below.
		q.ledger.removed(name, id)
	case ambiguous(err):
		return &Error{Code: CodeUnavailable, Detail: "the ack may not have been applied; retry it", Err: err}
	default:
		return internal(err, "ack")
	}
	if err := c.drop(); err != nil {
		return internal(err, "ack")
	}
	return nil
}

// Nack drops the claim: the item is served again.
func (q *Queues) Nack(ctx context.Context, lease *Lease, name, id string) error {
	if o := q.of(lease); o != q {
		return o.Nack(ctx, lease, name, id)
	}
	c, err := q.claimOf(lease, name, id)
	if err != nil {
		return err
	}
	if err := c.drop(); err != nil {
		return internal(err, "nack")
	}
	return nil
}

// ClaimInfo is one claim of a queue's item, with the lease that holds it.
type ClaimInfo struct {
	Item    string
	Lease   string // "" for a claim made by another client (kazoo)
	Holder  string
	Gateway string
	Since   time.Time
	session string // its node's, for keep
}

// Claims lists the claims of queue name, of every gateway and client: the
// dashboard shows them with the leases that hold them.
func (q *Queues) Claims(ctx context.Context, name string) ([]ClaimInfo, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	dir := q.taken(name)
	ids, err := q.sess.children(ctx, dir)
	if err != nil {
		return nil, err
	}
	out := make([]ClaimInfo, len(ids))
	err = readEach(ctx, len(ids), func(i int) error {
		out[i].Item = ids[i]
		data, stat, err := q.sess.Conn().Get(dir + "/" + ids[i])
		if err != nil {
			return nil // acked meanwhile
		}
		out[i].Since, out[i].session = time.UnixMilli(stat.Ctime).UTC(), sessionHex(stat.EphemeralOwner)
		if d, ok := parseNodeData(data); ok {
			out[i].Lease, out[i].Holder, out[i].Gateway = d.Lease, d.Holder, d.Gateway
		} else {
			out[i].Holder = printable(data)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b ClaimInfo) int { return strings.Compare(a.Item, b.Item) })
	refs := make([]keptRef, 0, len(out))
	for i := range out {
		refs = append(refs, keptRef{session: out[i].session, lease: out[i].Lease, gateway: &out[i].Gateway})
	}
	q.keep.set(refs)
	return out, err
}

// Peek returns an item's data without taking it.
func (q *Queues) Peek(ctx context.Context, name, id string) (Taken, error) {
	if err := ValidName(name); err != nil {
		return Taken{}, err
	}
	p, seq, err := ParseItemID(id)
	if err != nil {
		return Taken{}, err
	}
	if _, err := q.sess.fresh(ctx); err != nil {
		return Taken{}, readErr(err)
	}
	data, stat, err := q.sess.Conn().Get(q.entries(name) + "/" + id)
	if errors.Is(err, zk.ErrNoNode) {
		return Taken{}, &Error{Code: CodeNotFound, Detail: fmt.Sprintf("queue %q has no item %s", name, id)}
	}
	if err != nil {
		return Taken{}, readErr(err)
	}
	return Taken{Item: Item{ID: id, Priority: p, Size: len(data), CreatedAt: time.UnixMilli(stat.Ctime).UTC(), seq: seq}, Data: data}, nil
}

// MaxQueueHead bounds the head of a queue's state. Each head item costs
// ZooKeeper a read (its size and time) and, when claimed, one more (its
// claimant), so the cap is what keeps one read of a long queue from costing
// ZooKeeper thousands of requests.
const MaxQueueHead = 100

// State returns the length, claims and first head items (at most
// MaxQueueHead, with their size, time and claimant); with index > 0 it is a
// blocking read.
func (q *Queues) State(ctx context.Context, name string, head int, index int64, wait time.Duration) (QueueState, error) {
	if err := ValidName(name); err != nil {
		return QueueState{}, err
	}
	if index > 0 {
		if err := q.waitChange(ctx, name, index, wait); err != nil {
			return QueueState{}, readErr(err)
		}
	}
	ctx, err := q.sess.fresh(ctx)
	if err != nil {
		return QueueState{}, readErr(err)
	}
	items, idx, version, err := q.list(name, true)
	if err != nil {
		return QueueState{}, readErr(err)
	}
	ds, err := q.listDelayed(name, version)
	if err != nil {
		return QueueState{}, readErr(err)
	}
	if len(ds) > 0 {
		q.mover.add(name, ds[0].due) // so that this gateway moves them, whoever produced them
	}
	st := QueueState{Name: name, Length: len(items), Head: []Item{}, Index: idx}
	st.Delayed, st.NextDue = delayedState(ds)
	for _, it := range items {
		if it.ClaimedBy != nil {
			st.Claimed++
		}
	}
	head = min(head, MaxQueueHead, len(items))
	st.Head = append(st.Head, items[:head]...)
	conn := q.sess.Conn()
	err = readEach(ctx, head, func(i int) error {
		it := &st.Head[i]
		if ok, stat, err := conn.Exists(q.entries(name) + "/" + it.ID); err == nil && ok {
			it.Size, it.CreatedAt = int(stat.DataLength), time.UnixMilli(stat.Ctime).UTC()
		}
		if it.ClaimedBy != nil {
			if data, _, err := conn.Get(q.taken(name) + "/" + it.ID); err == nil {
				by := printable(data)
				if d, ok := parseNodeData(data); ok {
					by = d.Holder
					if by == "" {
						by = d.Lease
					}
				}
				it.ClaimedBy = &by
			}
		}
		return nil
	})
	if err != nil {
		return QueueState{}, err
	}
	return st, nil
}

// waitChange waits up to wait until the queue's cached directories are newer
// than index.
func (q *Queues) waitChange(ctx context.Context, name string, index int64, wait time.Duration) error {
	names := entryOpts{namesOnly: true}
	return q.cache.waitNewer(ctx, [2]string{q.entries(name), q.taken(name)}, [2]entryOpts{names, names}, index, wait)
}

// List returns one page of the queues with their lengths, and the name the
// next page starts after ("" for the last page).
func (q *Queues) List(ctx context.Context, p Page) ([]QueueState, string, error) {
	return listPage(ctx, q.sess, kinds.Queues.Dir(q.sess.Root()), p, nil, func(ctx context.Context, name string) (QueueState, bool, error) {
		st, err := q.State(ctx, name, 0, 0, 0)
		return st, err == nil, err
	})
}
