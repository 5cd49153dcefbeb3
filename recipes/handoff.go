package recipes

import (
	"context"
	"path"
	"slices"
	"sync"

	"github.com/zkgate/zkgate/internal/zk"
)

// handoffs let a delete made through this gateway vouch for the waiters of
// this gateway that watch the deleted node: the delete goes in one
// transaction with a check that each waiter's own node still exists, so a
// waiter woken by it knows, without a read, that its node was there when
// the node before it went. On the hand-over of a contended lock (see
// waitTurn) that saves a ZooKeeper round trip between one holder's release
// and the next one's grant.
type handoffs struct {
	mu      sync.Mutex
	waiting map[string][]*handoff // watched node -> its waiters (mostly one)
}

// handoff is one waiter's own node watching the node before it.
type handoff struct {
	watched, node string
	done          chan struct{} // closed once a delete of watched that checked node has an outcome
	started       bool          // guarded by handoffs.mu
	ok            bool          // set before done is closed: node existed when watched was deleted
}

// add registers node as waiting for watched to go.
func (hs *handoffs) add(watched, node string) *handoff {
	h := &handoff{watched: watched, node: node, done: make(chan struct{})}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.waiting == nil {
		hs.waiting = map[string][]*handoff{}
	}
	hs.waiting[watched] = append(hs.waiting[watched], h)
	return h
}

// remove ends h's registration (a delete under way still reports to it).
func (hs *handoffs) remove(h *handoff) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	ws := slices.DeleteFunc(hs.waiting[h.watched], func(w *handoff) bool { return w == h })
	if len(ws) == 0 {
		delete(hs.waiting, h.watched)
	} else {
		hs.waiting[h.watched] = ws
	}
}

// begin takes the waiters of watched, about to be deleted, and marks them:
// their wake-up waits for finishHandoffs.
func (hs *handoffs) begin(watched string) []*handoff {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	ws := hs.waiting[watched]
	if len(ws) == 0 {
		return nil
	}
	delete(hs.waiting, watched)
	for _, h := range ws {
		h.started = true
	}
	return ws
}

// finishHandoffs tells the waiters of a delete whether it checked their
// nodes (ok: they existed when the watched node went).
func finishHandoffs(hs []*handoff, ok bool) {
	for _, h := range hs {
		h.ok = ok
		close(h.done)
	}
}

// vouched says, once watched is gone, whether a delete through this gateway
// checked that h's node existed when watched went; it waits for that
// delete's outcome (bounded by ctx) if one was sent.
func (hs *handoffs) vouched(ctx context.Context, h *handoff) bool {
	hs.mu.Lock()
	started := h.started
	hs.mu.Unlock()
	if !started {
		return false // deleted some other way: the caller reads its node
	}
	select {
	case <-h.done:
		return h.ok
	case <-ctx.Done():
		return false
	}
}

// deleteVouching deletes p, a node made for a lease of epoch, as
// Session.deleteNode does; the waiters of this gateway watching p are told
// whether their nodes existed when p went (see handoffs).
func (ln *lines) deleteVouching(ctx context.Context, p string, epoch uint64) error {
	waiters := ln.handoffs.begin(p)
	if len(waiters) == 0 {
		return ln.sess.deleteNode(ctx, p, epoch)
	}
	if ln.sess.check(epoch) == nil {
		ops := []any{&zk.DeleteRequest{Path: p, Version: -1}}
		for _, w := range waiters {
			ops = append(ops, &zk.CheckVersionRequest{Path: w.node, Version: -1})
		}
		span := ln.zkSpan(ctx, "multi", path.Dir(p))
		_, err := ln.sess.Conn().Multi(ops...)
		endZK(span, err)
		if err == nil {
			finishHandoffs(waiters, true)
			return nil
		}
	}
	// p or a waiter's node is gone, or the reply was lost: the waiters read
	// their own nodes, and p is deleted as any other.
	finishHandoffs(waiters, false)
	return ln.sess.deleteNode(ctx, p, epoch)
}
