//go:build linux

package faults

import (
	"context"
	"path"
	"sync"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// observer is a ZooKeeper client of the suite's own, straight to the
// ensemble (no proxy): it tells the session that holds each lease's record
// and sees the record deleted, and sees each gateway session end, from the
// registration node every gateway keeps under {root}/gateways (EPHEMERAL
// of its current session, made again on each new session) and, for a
// session handed over to another gateway, from its lease records (see
// lost). It records the
// spans in which it had no session itself (History.ObserverOut): a watch
// event that comes after one may be late.
type observer struct {
	conn *zk.Conn
	root string
	hist *History

	mu       sync.Mutex
	watching map[string]bool
	wg       sync.WaitGroup
	stop     chan struct{}
	stopOnce sync.Once
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

func startObserver(ctx context.Context, servers []string, root string, hist *History) (*observer, error) {
	live := make(chan struct{}, 1)
	out := false
	conn, _, err := zk.Connect(servers, 20*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type != zk.EventSession {
				return
			}
			// Called in order, from one goroutine.
			now := time.Now()
			switch {
			case ev.State == zk.StateHasSession:
				if out {
					hist.record(func(h *History) { h.ObserverOut[len(h.ObserverOut)-1].To = now })
					out = false
				}
				select {
				case live <- struct{}{}:
				default:
				}
			case !out && (ev.State == zk.StateDisconnected || ev.State == zk.StateExpired):
				hist.record(func(h *History) { h.ObserverOut = append(h.ObserverOut, Span{From: now}) })
				out = true
			}
		}))
	if err != nil {
		return nil, err
	}
	select {
	case <-live:
	case <-ctx.Done():
		conn.Close()
		return nil, ctx.Err()
	}
	o := &observer{conn: conn, root: root, hist: hist, watching: map[string]bool{}, stop: make(chan struct{})}
	o.wg.Add(1)
	go o.watchGateways()
	return o, nil
}

// pause waits a moment before a ZooKeeper call that failed is tried
// again; false once the observer stops.
func (o *observer) pause() bool {
	select {
	case <-o.stop:
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

// close stops every watch (a lease record still there is recorded as seen
// until now) and the connection.
func (o *observer) close() {
	o.stopOnce.Do(func() {
		close(o.stop)
		o.wg.Wait()
		o.conn.Close()
	})
}

// watchGateways watches the registrations' parent and starts a watch on
// every registration it has not watched yet.
func (o *observer) watchGateways() {
	defer o.wg.Done()
	parent := o.root + "/gateways"
	o.follow(func() (<-chan zk.Event, error) {
		kids, _, ch, err := o.conn.ChildrenW(parent)
		for _, k := range kids {
			o.watchRegistration(path.Join(parent, k))
		}
		return ch, err
	})
}

// follow calls watch, which reads and sets a watch, until the observer
// stops: again once the watch fires, or after a pause if watch failed.
func (o *observer) follow(watch func() (<-chan zk.Event, error)) {
	for {
		ch, err := watch()
		if err != nil {
			if !o.pause() {
				return
			}
			continue
		}
		select {
		case <-o.stop:
			return
		case <-ch:
		}
	}
}

// watchRegistration follows one registration path for the rest of the
// run (an exists watch also fires when the node is made again), and records
// each session whose node goes or is replaced.
func (o *observer) watchRegistration(p string) {
	o.mu.Lock()
	if o.watching[p] {
		o.mu.Unlock()
		return
	}
	o.watching[p] = true
	o.mu.Unlock()
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		var owner int64
		o.follow(func() (<-chan zk.Event, error) {
			ok, st, ch, err := o.conn.ExistsW(p)
			switch {
			case err != nil:
			case !ok && owner != 0:
				o.lost(owner)
				owner = 0
			case ok && st.EphemeralOwner != owner:
				if owner != 0 {
					o.lost(owner) // replaced by the node of a new session
				}
				owner = st.EphemeralOwner
			}
			return ch, err
		})
	}()
}

// lost records that session ended, once its gateway's registration went:
// at once, unless lease records of the session are still there. A gateway
// that drains hands its session over to another gateway (which deletes
// the registration, the giver being gone) and the session lives on with
// its leases: it ends only when the last of them does (then the records
// all went, or the session expired and took them).
func (o *observer) lost(session int64) {
	seen := time.Now() // the registration's end: before the reads below
	records := o.recordsOf(session)
	if len(records) == 0 {
		o.sessionEnded(session, seen)
		return
	}
	// Each record is watched on its own, and the session ends when the
	// last went as seen by its own watch: one after the other, the reads
	// would put the end of a session that took its records all at once
	// later than it was, by a round trip for each record (half a second
	// for 27 records on a loaded machine).
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		gone := make([]time.Time, len(records))
		var wg sync.WaitGroup
		for i, p := range records {
			wg.Go(func() { gone[i] = o.recordGone(p, session) })
		}
		wg.Wait()
		last := seen
		for _, t := range gone {
			if t.IsZero() {
				return // the run stopped first
			}
			if t.After(last) {
				last = t
			}
		}
		o.sessionEnded(session, last)
	}()
}

// recordGone waits until record p is no longer session's, and says when
// it saw that (zero when the run stopped first).
func (o *observer) recordGone(p string, session int64) time.Time {
	asked := time.Now()
	for {
		ok, st, ch, err := o.conn.ExistsW(p)
		if err != nil {
			if !o.pause() {
				return time.Time{}
			}
			asked = time.Now()
			continue
		}
		if !ok || st.EphemeralOwner != session {
			return asked // seen gone: at the watch's event, or the read that found it so
		}
		select {
		case <-o.stop:
			return time.Time{}
		case <-ch:
			asked = time.Now()
		}
	}
}

// recordsOf lists the lease records that session owns now (after a sync,
// so that none made through another server is missed).
func (o *observer) recordsOf(session int64) []string {
	dir := o.root + "/leases"
	for {
		_, err := o.conn.Sync(o.root)
		var ids []string
		if err == nil {
			ids, _, err = o.conn.Children(dir)
		}
		if err != nil {
			if !o.pause() {
				return nil
			}
			continue
		}
		var out []string
		for _, id := range ids {
			if ok, st, err := o.conn.Exists(dir + "/" + id); err == nil && ok && st.EphemeralOwner == session {
				out = append(out, dir+"/"+id)
			}
		}
		return out
	}
}

func (o *observer) sessionEnded(session int64, at time.Time) {
	o.hist.record(func(h *History) {
		if _, ok := h.SessionLost[session]; !ok {
			h.SessionLost[session] = at
		}
	})
}

// watchLease follows the record of lease id, made a moment ago: it records
// the session that owns it (rec.Session) and how long the record was seen
// (rec.RecordUntil). It syncs first, so that a record made through another
// ZooKeeper server is found; one not found then was deleted already, at a
// time the observer cannot tell, and is left unknown. A record made anew
// (deleted and created in one transaction, as a gateway that adopts the
// lease in a handover does) is the lease moving, not its end: a deletion
// is looked at again, and a record of another czxid than the first seen
// marks the lease Moved.
func (o *observer) watchLease(id string, rec *LeaseRecord) {
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		p := o.root + "/leases/" + id
		synced := false
		var czxid int64         // of the record as last seen
		var deletedAt time.Time // of a deletion not yet looked at again
		for {
			select {
			case <-o.stop:
				return
			default:
			}
			var (
				ok  bool
				st  *zk.Stat
				ch  <-chan zk.Event
				err error
			)
			if !synced {
				_, err = o.conn.Sync(o.root)
				synced = err == nil
			}
			if err == nil {
				ok, st, ch, err = o.conn.ExistsW(p)
			}
			if err != nil {
				if !o.pause() {
					return
				}
				continue
			}
			if !ok {
				if !deletedAt.IsZero() {
					o.hist.record(func(h *History) { rec.RecordUntil = deletedAt })
				}
				return
			}
			deletedAt = time.Time{}
			moved := czxid != 0 && st.Czxid != czxid
			czxid = st.Czxid
			o.hist.record(func(h *History) {
				rec.Session = st.EphemeralOwner
				rec.Moved = rec.Moved || moved
			})
			select {
			case <-o.stop:
				now := time.Now()
				o.hist.record(func(h *History) { rec.RecordUntil = now })
				return
			case ev := <-ch:
				if ev.Type == zk.EventNodeDeleted {
					deletedAt = time.Now() // gone, unless made anew
					continue
				}
				if ev.Type == zk.EventNodeDataChanged {
					o.hist.record(func(h *History) { rec.Moved = true })
				}
				// Anything else (its data set, the watch lost with a
				// connection): look again.
			}
		}
	}()
}
