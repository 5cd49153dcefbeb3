package recipes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// Lock-delay, as Chubby and Consul have it: when a lease with a lock-delay
// ends without releasing what it holds (it expired, its gateway's session
// was lost, its gateway died or drained away, an admin revoked it), no
// zkgate grant of what it held is made, through any gateway, until that
// delay has passed. It covers a holder paused or slow past its deadline.
//
// Layout. A lease with a lock-delay leaves, beside each node it is granted
// (a lock node, a leader's latch node), a PERSISTENT marker in the same
// line; a semaphore slot's marker goes to the semaphore's admission line
// (.../locks), which every zkgate acquire of a slot lists while it holds the
// admission mutex:
//
//	{line}/zkgate-delay-<code><seq10>-<delay ms>-<lease>__9999999999
//
// <code> and <seq10> name the node it stands for (x: lock-, r: __READ__,
// w: __WRIT__, l: latch-, s: lease-, i.e. `_c_<lease>-<marker><seq10>`).
// An index entry {root}/delays/<hash of the marker's path> (data: that
// path) is made with it, in one transaction, so that a sweep finds every
// marker without listing every line. A release (or a revoke by the lease's
// own client) deletes the marker with its node; an ending that does not
// release leaves it behind, orphaned: its node is gone, it is not.
//
// An orphaned marker stands in the line where its node stood, as a node of
// the same mode, for its delay, counted by each gateway from when it first
// finds it orphaned (always after the lease ended, so no clock is shared):
// zkgate waiters behind it wait; then the first gateway whose count runs out
// deletes it. A marker never blocks its own lease.
//
// Interop: the name holds none of the recipes' markers and ends in a
// sequence above any ZooKeeper makes, so Curator and kazoo sort it after
// every contender and go-zookeeper's zk.Lock parses it as such: they are not
// bound by it (and not disturbed).

const (
	delayPrefix = "zkgate-delay-"
	delaySuffix = "__9999999999"
	delayRole   = "delay" // a hold's marker among its nodes
)

// delayCodes maps a marker code to the node marker it stands for.
var delayCodes = map[byte]marker{
	'x': {"lock-", false, ModeExclusive},
	'r': {"__READ__", true, ModeRead},
	'w': {"__WRIT__", false, ModeWrite},
	'l': {"latch-", false, ""},
	's': {"lease-", false, ""},
}

// delayMark is a lock-delay marker, parsed from its name.
type delayMark struct {
	code   byte   // of delayCodes
	name   string // the marker's own name
	holder string // the name of the node it stands for
	seq    int64
	reader bool
	lease  string
	delay  time.Duration
}

// markName is the name of the marker of node (a base name
// `_c_<lease>-<marker><seq10>`) for a delay; false for a node that is not a
// zkgate node of a lease.
func markName(node string, delay time.Duration) (string, bool) {
	lease := protectedID(node)
	if lease == "" {
		return "", false
	}
	rest := node[len("_c_")+len(lease)+1:]
	for code, m := range delayCodes {
		if seq, ok := strings.CutPrefix(rest, m.text); ok && len(seq) == 10 {
			return fmt.Sprintf("%s%c%s-%d-%s%s", delayPrefix, code, seq, delay.Milliseconds(), lease, delaySuffix), true
		}
	}
	return "", false
}

// parseMark reads a marker's name.
func parseMark(name string) (delayMark, bool) {
	body, ok := strings.CutPrefix(name, delayPrefix)
	if !ok {
		return delayMark{}, false
	}
	body, ok = strings.CutSuffix(body, delaySuffix)
	if !ok || len(body) < 1+10+1 {
		return delayMark{}, false
	}
	m, ok := delayCodes[body[0]]
	if !ok {
		return delayMark{}, false
	}
	seqText := body[1:11]
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil || body[11] != '-' {
		return delayMark{}, false
	}
	msText, lease, ok := strings.Cut(body[12:], "-")
	ms, err := strconv.ParseInt(msText, 10, 64)
	if !ok || err != nil || ms < 0 || len(lease) != 36 {
		return delayMark{}, false
	}
	return delayMark{code: body[0], name: name, holder: "_c_" + lease + "-" + m.text + seqText, seq: seq, reader: m.reader,
		lease: lease, delay: time.Duration(ms) * time.Millisecond}, true
}

// marksOf returns the markers among a line's children.
func marksOf(children []string) []delayMark {
	var out []delayMark
	for _, c := range children {
		if strings.HasPrefix(c, delayPrefix) {
			if m, ok := parseMark(c); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// asContender is the node an orphaned marker stands for, for blocks.
func (m delayMark) asContender() seqNode {
	return seqNode{Name: m.holder, Seq: m.seq, Reader: m.reader, Lease: m.lease}
}

// delayIndexPath is the index entry of the marker at p.
func (ln *lines) delayIndexPath(p string) string {
	sum := sha256.Sum256([]byte(p))
	return ln.sess.Root() + "/delays/" + hex.EncodeToString(sum[:12])
}

// orphans remembers when this gateway first found each orphaned marker, by
// its path: the delay runs from then.
type orphans struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// until is when the orphaned marker at p, of delay, stops blocking.
func (o *orphans) until(p string, delay time.Duration) time.Time {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[string]time.Time{}
	}
	first, ok := o.seen[p]
	if !ok {
		if len(o.seen) >= 100_000 {
			o.pruneLocked(now)
		}
		first = now
		o.seen[p] = now
	}
	return first.Add(delay)
}

// pruneLocked forgets the markers first seen longer ago than any delay: a
// marker still there is then seen anew, which only delays more.
func (o *orphans) pruneLocked(now time.Time) {
	for p, t := range o.seen {
		if now.Sub(t) > maxDelayKept {
			delete(o.seen, p)
		}
	}
}

// maxDelayKept bounds the delay a marker is honoured for (--max-lock-delay
// is at most 10 minutes).
const maxDelayKept = 10 * time.Minute

func (o *orphans) forget(p string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, p)
}

// heldBack says until when the orphaned markers of a line hold a grant of
// self back: latest (the zero Time: they do not) and earliest, with how
// many still do, and which ran out already (to be deleted). present says
// whether a node of the line's holders exists. With blocks, only a marker
// of a node before self that blocks it counts (a line); without, every
// marker of another lease does (a semaphore's slots).
func (ln *lines) heldBack(line string, marks []delayMark, self seqNode, present func(string) bool,
	blocks func(c, self seqNode) bool) (latest, earliest time.Time, active int, expired []string) {
	now := time.Now()
	for _, m := range marks {
		if (m.code == 's') == (blocks != nil) {
			continue // a slot's marker, in an admission line; or the converse
		}
		if m.lease == self.Lease || present(m.holder) {
			continue
		}
		if blocks != nil && (m.seq >= self.Seq || !blocks(m.asContender(), self)) {
			continue
		}
		u := ln.orphans.until(line+"/"+m.name, min(m.delay, maxDelayKept))
		if !u.After(now) {
			expired = append(expired, line+"/"+m.name)
			continue
		}
		active++
		if u.After(latest) {
			latest = u
		}
		if earliest.IsZero() || u.Before(earliest) {
			earliest = u
		}
	}
	return latest, earliest, active, expired
}

// dropMarks deletes orphaned markers whose delay ran out, with their index
// entries, in the background: any gateway may, and a grant need not wait.
func (ln *lines) dropMarks(paths []string) {
	for _, p := range paths {
		go func() {
			if err := ln.deleteMark(p); err != nil {
				ln.log.Debug("delete an expired lock-delay marker", "marker", p, "err", err)
			}
		}()
	}
}

// deleteMark deletes the marker at p and its index entry, retrying across
// reconnects while the session lives (a marker left behind only delays).
func (ln *lines) deleteMark(p string) error {
	idx := ln.delayIndexPath(p)
	for attempt := 0; ; attempt++ {
		conn := ln.sess.Conn()
		_, err := conn.Multi(&zk.DeleteRequest{Path: p, Version: -1}, &zk.DeleteRequest{Path: idx, Version: -1})
		if errors.Is(err, zk.ErrNoNode) {
			// One of the two went already: delete what is left, one by one.
			err = nil
			for _, q := range []string{p, idx} {
				if derr := conn.Delete(q, -1); derr != nil && !errors.Is(derr, zk.ErrNoNode) {
					err = derr
				}
			}
		}
		if err == nil {
			ln.orphans.forget(p)
			return nil
		}
		if !ambiguous(err) || attempt == 10 {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), ln.sess.timeout())
		werr := ln.sess.WaitLive(ctx)
		cancel()
		if werr != nil {
			return err
		}
	}
}

// markDelay leaves the lock-delay marker of node, h's node in line, before
// its grant is answered: a lease without a lock-delay leaves none. The
// marker becomes one of h's nodes (deleted first when it goes; see
// hold.removeNodes).
func (ln *lines) markDelay(ctx context.Context, h *hold, line, node string) error {
	lease := h.lease
	if lease.LockDelay <= 0 {
		return nil
	}
	name, ok := markName(path.Base(node), time.Duration(lease.LockDelay))
	if !ok {
		return internal(nil, "no lock-delay marker for "+node)
	}
	p := line + "/" + name
	h.mu.Lock()
	for _, n := range h.nodes {
		if n.role == delayRole && n.path == p {
			h.mu.Unlock()
			return nil // a repeated grant
		}
	}
	h.mu.Unlock()
	idx := ln.delayIndexPath(p)
	for {
		if err := ln.sess.check(lease.epoch); err != nil {
			return err
		}
		conn := ln.sess.Conn()
		span := ln.zkSpan(ctx, "multi", line)
		_, err := conn.Multi(
			&zk.CreateRequest{Path: p, Acl: ln.sess.acl()},
			&zk.CreateRequest{Path: idx, Data: []byte(p), Acl: ln.sess.acl()})
		endZK(span, err)
		switch {
		case err == nil, errors.Is(err, zk.ErrNodeExists):
			// ErrNodeExists: our own transaction, whose reply was lost (the
			// name holds the lease's id and the node's sequence).
		case errors.Is(err, zk.ErrNoNode):
			// {root}/delays of a root made before lock-delays, or the line's
			// parent gone (the node with it: the next turn finds out).
			if err := ln.sess.createPersistent(ctx, path.Dir(idx)); err != nil {
				return waitErr(ctx, lease, err)
			}
			if ok, _, _ := conn.Exists(line); !ok {
				return errNodeGone
			}
			continue
		case ambiguous(err):
			if werr := ln.sess.waitEpoch(ctx, lease.epoch); werr != nil {
				return werr
			}
			continue
		default:
			return internal(err, "leave the lock-delay marker of "+node)
		}
		h.mu.Lock()
		gone := h.gone
		if !gone {
			h.nodes = append(h.nodes, heldNode{role: delayRole, path: p})
			h.journalLocked()
		}
		h.mu.Unlock()
		if gone {
			// Released (or ended) while its grant was being made: no client
			// was told of the grant, so nothing needs the marker.
			_ = ln.deleteMark(p)
			return errHoldGone
		}
		return nil
	}
}

// heldBackKey is the problem member that says until when a timeout was
// held back by a lock-delay.
const heldBackKey = "lock_delay_until"

// waitHeldBack waits until until (from heldBack), or answers the end of
// the wait; tryOnce answers a timeout at once.
func (ln *lines) waitHeldBack(ctx context.Context, lease *Lease, until time.Time, tryOnce bool) error {
	if tryOnce {
		return &Error{Code: CodeTimeout, Detail: "held back until " + until.UTC().Format(time.RFC3339Nano) +
			" by the lock-delay of a holder that ended without releasing",
			Extra: map[string]any{heldBackKey: until.UTC()}}
	}
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return waitErr(ctx, lease, context.Cause(ctx))
	}
}

// heldBackErr says whether err is a timeout of a lock-delay (see
// waitHeldBack).
func heldBackErr(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Extra[heldBackKey] != nil
}

// withExtra returns e's Extra with more's members added.
func withExtra(e *Error, more map[string]any) map[string]any {
	if len(e.Extra) == 0 {
		return more
	}
	out := make(map[string]any, len(e.Extra)+len(more))
	for k, v := range more {
		out[k] = v
	}
	for k, v := range e.Extra {
		out[k] = v
	}
	return out
}

// sweepDelays runs until ctx ends: now and then (every few seconds, at
// random so that gateways spread out) it looks at every lock-delay marker
// and deletes those orphaned longer than their delay, so that a marker of a
// line nobody waits on does not stay.
func (ln *lines) sweepDelays(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2*time.Second + time.Duration(rand.Int64N(int64(4*time.Second)))):
		}
		if st, _, _ := ln.sess.Status(); st == StateLive {
			if err := ln.SweepDelays(ctx); err != nil && ctx.Err() == nil {
				ln.log.Debug("sweep lock-delay markers", "err", err)
			}
		}
	}
}

// SweepDelays is one sweep of the lock-delay markers (see sweepDelays).
func (ln *lines) SweepDelays(ctx context.Context) error {
	conn := ln.sess.Conn()
	dir := ln.sess.Root() + "/delays"
	entries, _, err := conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	return forEach(ctx, len(entries), func(i int) error {
		idx := dir + "/" + entries[i]
		raw, _, err := conn.Get(idx)
		if err != nil {
			return nil // gone meanwhile, or out of reach: the next sweep
		}
		p := string(raw)
		m, ok := parseMark(path.Base(p))
		if !ok || ln.delayIndexPath(p) != idx {
			return nil // not ours to judge
		}
		holder := path.Dir(p) + "/" + m.holder
		if m.code == 's' {
			holder = path.Dir(path.Dir(p)) + "/leases/" + m.holder // a slot's marker sits in the admission line
		}
		there, _, err := conn.Exists(p)
		if err != nil {
			return nil
		}
		if !there {
			_ = conn.Delete(idx, -1) // its marker went with its node: a release
			return nil
		}
		alive, _, err := conn.Exists(holder)
		if err != nil || alive {
			return nil
		}
		if !ln.orphans.until(p, min(m.delay, maxDelayKept)).After(time.Now()) {
			return ln.deleteMark(p)
		}
		return nil
	})
}
