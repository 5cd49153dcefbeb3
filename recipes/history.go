package recipes

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path"
	"slices"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// The lease history is what lets every gateway tell "you lost it" from
// "you never had it". A lease's record ({root}/leases/{id}) is an
// EPHEMERAL node of its gateway's session: when that gateway dies, the
// record goes with it, and nothing is left to say that the lease existed.
// So each lease also leaves a PERSISTENT node {root}/history/{xx}/{id}
// (xx: the id's first two hex digits, so that no directory grows past what
// one listing can carry), made in one transaction with the record. Its
// owner ends a lease by deleting the record and writing the reason into
// the history node, again in one transaction. A history node whose record
// is gone without a reason belongs to a gateway whose session was lost.
// Any gateway answers 410 with the reason for as long as the node lives:
// at least as long as the owner remembers the lease itself; a sweep that
// every gateway runs now and then removes older ones.

// historyEntry is the data of a history node.
type historyEntry struct {
	Gateway string     `json:"gateway"`
	Holder  string     `json:"holder,omitempty"`
	Reason  string     `json:"reason,omitempty"` // set once the lease has ended
	EndedAt *time.Time `json:"ended_at,omitempty"`
}

func (e historyEntry) bytes() []byte {
	b, _ := json.Marshal(e)
	return b
}

func (ls *Leases) recordPath(id string) string { return ls.sess.Root() + "/leases/" + id }

func (ls *Leases) historyPath(id string) string {
	return ls.sess.Root() + "/history/" + id[:2] + "/" + id
}

// createRecord makes the lease's record and its history node in one
// transaction, for a lease of epoch. An ambiguous reply is resolved by
// reading the record back.
func (ls *Leases) createRecord(ctx context.Context, id string, record []byte, hist historyEntry, epoch uint64) error {
	rec, hp := ls.recordPath(id), ls.historyPath(id)
	for {
		if err := ls.sess.check(epoch); err != nil {
			return err
		}
		conn := ls.sess.Conn()
		span := ls.sess.zkSpan(ctx, "multi", rec)
		_, err := conn.Multi(
			&zk.CreateRequest{Path: rec, Data: record, Acl: ls.sess.acl(), Flags: zk.FlagEphemeral},
			&zk.CreateRequest{Path: hp, Data: hist.bytes(), Acl: ls.sess.acl()},
		)
		endZK(span, err)
		switch {
		case err == nil:
			_, _, err := ls.sess.ownedBy(rec, nil, epoch)
			return err
		case errors.Is(err, zk.ErrNoNode):
			// The history's shard is made on first use.
			if err := ls.sess.createPersistent(ctx, path.Dir(hp)); err != nil {
				if ambiguous(err) {
					return unavailable()
				}
				return internal(err, "create "+path.Dir(hp))
			}
		case errors.Is(err, zk.ErrNodeExists):
			// Our own transaction, whose reply was lost?
			_, stat, gerr := conn.Get(rec)
			if gerr == nil && stat.EphemeralOwner == ls.sessionID() {
				return nil
			}
			return internal(err, "lease id collision")
		case ambiguous(err):
			if werr := ls.sess.waitEpoch(ctx, epoch); werr != nil {
				return werr
			}
		default:
			return internal(err, "create lease record")
		}
	}
}

// endRecord deletes the record of a lease of epoch that ended for reason,
// and writes the reason into its history, in one transaction.
func (ls *Leases) endRecord(ctx context.Context, l *Lease, reason string) error {
	now := time.Now().UTC()
	hist := historyEntry{Gateway: ls.cfg.GatewayID, Holder: l.Holder, Reason: reason, EndedAt: &now}.bytes()
	rec, hp := ls.recordPath(l.ID), ls.historyPath(l.ID)
	for {
		if err := ls.sess.check(l.epoch); err != nil && !errors.Is(err, errUnavailable) {
			return nil // the session is gone, and the record with it
		}
		conn := ls.sess.Conn()
		_, err := conn.Multi(
			&zk.DeleteRequest{Path: rec, Version: -1},
			&zk.SetDataRequest{Path: hp, Data: hist, Version: -1},
		)
		if errors.Is(err, zk.ErrNoNode) {
			// The record is gone already (a lost reply of this very
			// transaction), or the history is (a lease of an older
			// version): do what is left alone.
			err = ls.sess.deleteNode(ctx, rec, l.epoch)
			if err == nil {
				if _, serr := conn.Set(hp, hist, -1); serr != nil && !errors.Is(serr, zk.ErrNoNode) {
					err = serr
				}
			}
		}
		switch {
		case err == nil:
			return nil
		case ambiguous(err):
			if werr := ls.sess.waitEpoch(ctx, l.epoch); werr != nil {
				return nil // lost: the record went with the session
			}
		default:
			return err
		}
	}
}

// endRecords is endRecord for many leases at once, at shutdown: a few
// transactions instead of one per lease, bounded by ctx.
func (ls *Leases) endRecords(ctx context.Context, leases []*Lease, reason string) {
	const perTxn = 100 // leases per transaction, two operations each
	now := time.Now().UTC()
	for len(leases) > 0 && ctx.Err() == nil {
		batch := leases[:min(perTxn, len(leases))]
		leases = leases[len(batch):]
		ops := make([]any, 0, 2*len(batch))
		for _, l := range batch {
			ops = append(ops,
				&zk.DeleteRequest{Path: ls.recordPath(l.ID), Version: -1},
				&zk.SetDataRequest{Path: ls.historyPath(l.ID), Version: -1,
					Data: historyEntry{Gateway: ls.cfg.GatewayID, Holder: l.Holder, Reason: reason, EndedAt: &now}.bytes()})
		}
		if _, err := ls.sess.Conn().Multi(ops...); err != nil {
			// One lease whose nodes went already fails the batch: one by one.
			for _, l := range batch {
				if ctx.Err() != nil {
					return
				}
				if err := ls.endRecord(ctx, l, reason); err != nil {
					ls.log.Warn("write lease history", "lease", l.ID, "err", err)
				}
			}
		}
	}
}

// Keeper is the gateway that keeps a lease: its id, and the host:port it
// is reached at.
type Keeper struct {
	Gateway, Advertise string
}

// The history is capped in count as well as in age: RememberMax nodes at
// most, beyond which the ended leases' nodes go, oldest end first (by
// their mzxid, the same order on every gateway). Nothing on the path that
// makes a lease checks the cap: the sweeper counts the history now and then
// (historyCount: one listing of the shards, and a stat of each), more often
// as it fills, and trims it when it is over. Every gateway does, so a
// history shared by several gateways is trimmed by whichever counts first;
// the others' deletes of the same nodes find them gone.

// historyNode is an ended lease's history node, as a sweep read it.
type historyNode struct {
	path    string
	mzxid   int64 // when the lease's end was written
	version int32
}

// historyTrimTo is what a trim leaves of the cap: a tenth below it, so
// that a busy history is not trimmed at every count.
func historyTrimTo(capacity int) int { return capacity - capacity/10 }

// defaultHistoryCheck is the longest time between two counts of the
// history, when it is empty; a fuller one is counted more often.
const defaultHistoryCheck = 32 * time.Second

// nextHistoryCount is when to count a history of n nodes again: every
// check when it is empty, down to a thirty-second of that as it reaches
// capacity, so that a history filling at any rate is seen soon after it is
// full.
func nextHistoryCount(n, capacity int, check time.Duration) time.Duration {
	room := max(capacity-n, 0)
	return max(check*time.Duration(room)/time.Duration(max(capacity, 1)), check/32)
}

// sweepHistory runs until ctx ends. About every twelfth of Remember (at
// random, so that gateways spread out) it sweeps: it stamps the history of
// leases whose gateway died with session_lost and the time it found them,
// and removes the history of leases ended longer than Remember ago. In
// between it counts the history, and trims a history over RememberMax,
// deleting the oldest ended leases' nodes that the last sweep saw (a sweep
// first, when they are too few).
func (ls *Leases) sweepHistory(ctx context.Context) {
	every := ls.cfg.Remember / 12
	check := ls.cfg.historyCheck
	if check <= 0 {
		check = defaultHistoryCheck
	}
	sweepAt := time.Now().Add(every/2 + time.Duration(rand.Int64N(int64(every))))
	countAt := time.Now().Add(check)
	var oldest []historyNode // the ended leases' nodes, oldest first, from the last sweep
	n := 0                   // the nodes at the last count
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(minTime(countAt, sweepAt))):
		}
		now := time.Now()
		if st, _, _ := ls.sess.Status(); st != StateLive {
			countAt = now.Add(check / 32)
			sweepAt = maxTime(sweepAt, countAt)
			continue
		}
		var err error
		if !now.Before(sweepAt) {
			oldest, err = ls.sweepAndTrim(ctx)
			sweepAt = now.Add(every/2 + time.Duration(rand.Int64N(int64(every))))
		}
		if err == nil {
			n, err = ls.historyCount(ctx)
		}
		if err == nil && n > ls.cfg.RememberMax {
			if excess := n - historyTrimTo(ls.cfg.RememberMax); len(oldest) < excess {
				oldest, err = ls.sweepAndTrim(ctx)
			} else {
				oldest, err = ls.trimHistory(ctx, oldest, excess)
			}
			if err == nil {
				n, err = ls.historyCount(ctx)
			}
		}
		if err != nil && ctx.Err() == nil {
			ls.log.Warn("sweep lease history", "err", err)
		}
		countAt = time.Now().Add(nextHistoryCount(n, ls.cfg.RememberMax, check))
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// historyCount is the number of history nodes: the shards' children, from
// the stats of the shards (a listing of them, and a stat each).
func (ls *Leases) historyCount(ctx context.Context) (int, error) {
	conn := ls.sess.Conn()
	dir := ls.sess.Root() + "/history"
	shards, _, err := conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	counts := make([]int32, len(shards))
	err = forEach(ctx, len(shards), func(i int) error {
		ok, stat, err := conn.Exists(dir + "/" + shards[i])
		if err != nil {
			return err
		}
		if ok {
			counts[i] = stat.NumChildren
		}
		return nil
	})
	n := 0
	for _, c := range counts {
		n += int(c)
	}
	return n, err
}

// SweepHistory is one sweep of the lease history (see sweepHistory), with
// the trim of a history over RememberMax.
func (ls *Leases) SweepHistory(ctx context.Context) error {
	_, err := ls.sweepAndTrim(ctx)
	return err
}

// sweepAndTrim sweeps the history, then trims it to historyTrimTo when the
// sweep found more than RememberMax nodes; it returns the ended leases'
// nodes left, oldest first.
func (ls *Leases) sweepAndTrim(ctx context.Context) ([]historyNode, error) {
	ended, total, err := ls.sweep(ctx)
	if err != nil {
		return nil, err
	}
	if total > ls.cfg.RememberMax {
		return ls.trimHistory(ctx, ended, total-historyTrimTo(ls.cfg.RememberMax))
	}
	return ended, nil
}

// trimHistory deletes the first n of oldest (at most all of them) and
// returns the rest. A node written since the sweep read it (its version
// moved) stays.
func (ls *Leases) trimHistory(ctx context.Context, oldest []historyNode, n int) ([]historyNode, error) {
	n = min(n, len(oldest))
	conn := ls.sess.Conn()
	err := forEach(ctx, n, func(i int) error {
		err := conn.Delete(oldest[i].path, oldest[i].version)
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
			return err
		}
		return nil
	})
	return oldest[n:], err
}

// sweep stamps and removes as sweepHistory says, and returns the nodes of
// the ended leases left, oldest end first, and how many nodes it found.
func (ls *Leases) sweep(ctx context.Context) (ended []historyNode, total int, err error) {
	conn := ls.sess.Conn()
	dir := ls.sess.Root() + "/history"
	shards, _, err := conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	now := time.Now().UTC()
	for _, shard := range shards {
		ids, _, err := conn.Children(dir + "/" + shard)
		if err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			return nil, 0, err
		}
		left := make([]historyNode, len(ids))
		err = forEach(ctx, len(ids), func(i int) error {
			id, hp := ids[i], dir+"/"+shard+"/"+ids[i]
			raw, stat, err := conn.Get(hp)
			if err != nil {
				return nil // gone meanwhile, or out of reach: the next sweep
			}
			var h historyEntry
			_ = json.Unmarshal(raw, &h)
			switch {
			case h.Reason == "":
				if ok, _, err := conn.Exists(ls.recordPath(id)); err != nil || ok {
					left[i].path = hp // live (or unknown): leave it
					return nil
				}
				h.Reason, h.EndedAt = EndSessionLost, &now
				left[i].path = hp
				if stamped, err := conn.Set(hp, h.bytes(), stat.Version); err == nil {
					left[i] = historyNode{path: hp, mzxid: stamped.Mzxid, version: stamped.Version}
				}
			case h.EndedAt == nil || now.Sub(*h.EndedAt) > ls.cfg.Remember:
				_ = conn.Delete(hp, stat.Version)
			default:
				left[i] = historyNode{path: hp, mzxid: stat.Mzxid, version: stat.Version}
			}
			return nil
		})
		if err != nil {
			return nil, 0, err
		}
		for _, n := range left {
			if n.path == "" {
				continue
			}
			total++
			if n.mzxid != 0 {
				ended = append(ended, n)
			}
		}
	}
	slices.SortFunc(ended, func(a, b historyNode) int { return cmp.Compare(a.mzxid, b.mzxid) })
	return ended, total, nil
}
