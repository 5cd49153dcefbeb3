//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// The queues of the queue phases. The gateway's live under
// {gatewayRoot}/queues/{name}, the direct client's under
// {directRoot}/queues/{name}, in the same (kazoo LockingQueue) layout.
const (
	queueSeq      = "bench-qs" // sequential produce, then take
	queueConc     = "bench-qc" // producers and consumers at once
	queueWake     = "bench-qw" // take wake-up
	queuePriority = 100
)

// queueClient is one way of using a queue: through the gateway or with the
// recipe on a direct ZooKeeper connection. Producer and consumer i are
// separate clients (for the direct client, separate connections).
type queueClient interface {
	produce(ctx context.Context, producer int, data []byte) error
	// take removes the head item and returns its bytes, waiting up to wait
	// for one; ok is false when there was none.
	take(ctx context.Context, consumer int, wait time.Duration) (data []byte, ok bool, err error)
}

// doRaw sends raw bytes (a queue item) and reads the answer whole.
func (c *client) doRaw(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	st, b, _, err := c.exchange(ctx, method, path, "application/octet-stream", body)
	return st, b, err
}

// gwQueue is a queue through the gateway: POST .../items and POST .../take.
type gwQueue struct {
	c    *client
	name string
}

func (q gwQueue) producePath() string { return "/v1/queues/" + q.name + "/items" }

func (q gwQueue) takePath(wait time.Duration) string {
	p := "/v1/queues/" + q.name + "/take"
	if wait > 0 {
		p += "?wait=" + wait.String()
	}
	return p
}

func (q gwQueue) produce(ctx context.Context, _ int, data []byte) error {
	st, b, err := q.c.doRaw(ctx, http.MethodPost, q.producePath(), data)
	return expect("produce", st, b, err, http.StatusCreated)
}

func (q gwQueue) take(ctx context.Context, _ int, wait time.Duration) ([]byte, bool, error) {
	st, b, err := q.c.do(ctx, http.MethodPost, q.takePath(wait), nil)
	return takeAnswer(st, b, err)
}

// takeAnswer reads the answer of a take: 200 with the item, 204 when empty.
func takeAnswer(st int, b []byte, err error) ([]byte, bool, error) {
	if err == nil && st == http.StatusNoContent {
		return nil, false, nil
	}
	if err := expect("take", st, b, err, http.StatusOK); err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// remove deletes the gateway's queue (DELETE /v1/queues/{name}); a queue
// that still holds items (a run that failed) is emptied in ZooKeeper first.
func (q gwQueue) remove(ctx context.Context, conn *zk.Conn) error {
	path := "/v1/queues/" + q.name
	st, b, err := q.c.do(ctx, http.MethodDelete, path, nil)
	if err == nil && st == http.StatusConflict {
		if err := deleteTree(conn, gatewayRoot+"/queues/"+q.name); err != nil {
			return err
		}
		return fmt.Errorf("DELETE %s: the queue was not empty (%s); removed in ZooKeeper", path, truncate(b, 200))
	}
	return expect("DELETE "+path, st, b, err, http.StatusNoContent)
}

// directQueue is the gateway's queue recipe done by a go-zookeeper client:
// produce = Create entries/entry-100- PERSISTENT_SEQUENTIAL; take =
// Children(entries), sorted by priority then sequence number, Create
// taken/<entry> EPHEMERAL, Get entries/<entry>, Multi(Delete entry, Delete
// claim).
type directQueue struct {
	base      string
	producers []*zk.Conn
	consumers []*zk.Conn
}

var openACL = zk.WorldACL(zk.PermAll)

func (q directQueue) entries() string { return q.base + "/entries" }
func (q directQueue) taken() string   { return q.base + "/taken" }

func (q directQueue) produce(_ context.Context, producer int, data []byte) error {
	_, err := q.producers[producer].Create(fmt.Sprintf("%s/entry-%03d-", q.entries(), queuePriority), data, zk.FlagSequence, openACL)
	if err != nil {
		return fmt.Errorf("zk produce: %w", err)
	}
	return nil
}

func (q directQueue) take(ctx context.Context, consumer int, wait time.Duration) ([]byte, bool, error) {
	return q.takeOn(ctx, q.consumers[consumer], wait)
}

// takeOn takes with conn, waiting up to wait: when nothing can be claimed
// it waits on a children watch of the entries, as the gateway waits on its
// watch cache.
func (q directQueue) takeOn(ctx context.Context, conn *zk.Conn, wait time.Duration) ([]byte, bool, error) {
	deadline := time.Now().Add(wait)
	for {
		data, ok, listed, err := q.takeOnce(conn)
		if ok || err != nil || wait <= 0 {
			return data, ok, err
		}
		names, _, ch, err := conn.ChildrenW(q.entries())
		if err != nil {
			return nil, false, fmt.Errorf("zk ChildrenW: %w", err)
		}
		if !slices.Equal(sortEntries(names), listed) {
			continue // changed since the listing: try again at once
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, false, nil
		}
		t := time.NewTimer(left)
		select {
		case <-ch:
			t.Stop()
		case <-t.C:
			return nil, false, nil
		case <-ctx.Done():
			t.Stop()
			return nil, false, ctx.Err()
		}
	}
}

// takeOnce lists the entries and takes the first one it can claim. When it
// takes none it returns the listing (sorted): empty, or all claimed by
// other consumers.
func (q directQueue) takeOnce(conn *zk.Conn) (data []byte, ok bool, listed []string, err error) {
	names, _, err := conn.Children(q.entries())
	if err != nil {
		return nil, false, nil, fmt.Errorf("zk Children: %w", err)
	}
	listed = sortEntries(names)
	for _, id := range listed {
		entry, claim := q.entries()+"/"+id, q.taken()+"/"+id
		if _, err := conn.Create(claim, nil, zk.FlagEphemeral, openACL); err != nil {
			if errors.Is(err, zk.ErrNodeExists) {
				continue // another consumer was first
			}
			return nil, false, nil, fmt.Errorf("zk claim: %w", err)
		}
		data, _, err := conn.Get(entry)
		if err != nil {
			_ = conn.Delete(claim, -1)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			return nil, false, nil, fmt.Errorf("zk Get: %w", err)
		}
		if _, err := conn.Multi(&zk.DeleteRequest{Path: entry, Version: -1}, &zk.DeleteRequest{Path: claim, Version: -1}); err != nil {
			_ = conn.Delete(claim, -1)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			return nil, false, nil, fmt.Errorf("zk Multi: %w", err)
		}
		return data, true, listed, nil
	}
	return nil, false, listed, nil
}

// ensure makes the queue's directories.
func (q directQueue) ensure(conn *zk.Conn) error {
	for _, p := range []string{directRoot, directRoot + "/queues", q.base, q.entries(), q.taken()} {
		if _, err := conn.Create(p, nil, 0, openACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// remove deletes the queue recursively, and the queues' parent if empty.
func (q directQueue) remove(conn *zk.Conn) error {
	if err := deleteTree(conn, q.base); err != nil {
		return err
	}
	if err := conn.Delete(directRoot+"/queues", -1); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrNotEmpty) {
		return err
	}
	return nil
}

// deleteTree deletes p and everything below it.
func deleteTree(conn *zk.Conn, p string) error {
	kids, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", p, err)
	}
	for _, k := range kids {
		if err := deleteTree(conn, p+"/"+k); err != nil {
			return err
		}
	}
	if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("delete %s: %w", p, err)
	}
	return nil
}

// leftovers lists which of paths still exist.
func leftovers(conn *zk.Conn, paths ...string) ([]string, error) {
	var left []string
	for _, p := range paths {
		ok, _, err := conn.Exists(p)
		if err != nil {
			return left, err
		}
		if ok {
			left = append(left, p)
		}
	}
	return left, nil
}

// sortEntries keeps the item names (entry-<ppp>-<seq>) in serving order:
// priority, then sequence number.
func sortEntries(names []string) []string {
	type ent struct {
		name string
		prio int
		seq  int64
	}
	var es []ent
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, "entry-")
		pp, ss, ok2 := strings.Cut(rest, "-")
		if !ok || !ok2 {
			continue
		}
		p, err1 := strconv.Atoi(pp)
		s, err2 := strconv.ParseInt(ss, 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		es = append(es, ent{n, p, s})
	}
	sort.Slice(es, func(i, j int) bool {
		if es[i].prio != es[j].prio {
			return es[i].prio < es[j].prio
		}
		return es[i].seq < es[j].seq
	})
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.name
	}
	return out
}

// payload is a unique item: "<tag>-<seq, 12 digits>-" padded with dots to
// size bytes.
func payload(tag string, seq int64, size int) []byte {
	b := fmt.Appendf(make([]byte, 0, size), "%s-%012d-", tag, seq)
	for len(b) < size {
		b = append(b, '.')
	}
	return b
}

// payloadSeq reads the sequence number back from a payload.
func payloadSeq(b []byte) (int64, bool) {
	_, rest, ok := bytes.Cut(b, []byte("-"))
	if !ok || len(rest) < 13 || rest[12] != '-' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(rest[:12]), 10, 64)
	return n, err == nil
}

// ledger checks exactly-once delivery: every payload is unique, so each one
// acknowledged by a produce must be taken once, and nothing else taken.
type ledger struct {
	mu       sync.Mutex
	produced map[string]bool
	taken    map[string]int
}

func newLedger() *ledger { return &ledger{produced: map[string]bool{}, taken: map[string]int{}} }

func (l *ledger) addProduced(b []byte) {
	l.mu.Lock()
	l.produced[string(b)] = true
	l.mu.Unlock()
}

func (l *ledger) addTaken(b []byte) {
	l.mu.Lock()
	l.taken[string(b)]++
	l.mu.Unlock()
}

// delivery is what a ledger found.
type delivery struct {
	produced   int // acknowledged produces
	taken      int // items taken (answers with an item)
	duplicates int // extra takes of a payload taken more than once
	lost       int // produced, never taken
	unknown    int // taken, never (acknowledged as) produced
}

func (d delivery) exactlyOnce() bool {
	return d.duplicates == 0 && d.lost == 0 && d.unknown == 0 && d.taken == d.produced
}

func (d delivery) add(o delivery) delivery {
	return delivery{d.produced + o.produced, d.taken + o.taken, d.duplicates + o.duplicates, d.lost + o.lost, d.unknown + o.unknown}
}

func (l *ledger) check() delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := delivery{produced: len(l.produced)}
	for p, n := range l.taken {
		d.taken += n
		if n > 1 {
			d.duplicates += n - 1
		}
		if !l.produced[p] {
			d.unknown++
		}
	}
	for p := range l.produced {
		if l.taken[p] == 0 {
			d.lost++
		}
	}
	return d
}

// dialConns opens n direct connections; close closes them all.
func dialConns(ctx context.Context, addr string, n int) (conns []*zk.Conn, closeAll func(), err error) {
	closeAll = func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for i := 0; i < n; i++ {
		c, err := dialZK(ctx, addr)
		if err != nil {
			closeAll()
			return nil, func() {}, err
		}
		conns = append(conns, c)
	}
	return conns, closeAll, nil
}

// removeQueues deletes the gateway's queues (conn: a direct connection) with DELETE /v1/queues/{name}
// and the direct client's recursively, and lists what is left.
func removeQueues(ctx context.Context, conn *zk.Conn, gws []gwQueue, ds []directQueue) (problems, left []string) {
	if ctx.Err() != nil {
		ctx = context.Background() // interrupted: still clean up
	}
	var paths []string
	for _, q := range gws {
		if err := q.remove(ctx, conn); err != nil {
			problems = append(problems, err.Error())
		}
		paths = append(paths, gatewayRoot+"/queues/"+q.name)
	}
	for _, q := range ds {
		if err := q.remove(conn); err != nil {
			problems = append(problems, fmt.Sprintf("delete %s: %v", q.base, err))
		}
		paths = append(paths, q.base)
	}
	left, err := leftovers(conn, paths...)
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, p := range left {
		problems = append(problems, fmt.Sprintf("%s was still in ZooKeeper after its DELETE: removed recursively", p))
		if err := deleteTree(conn, p); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return problems, left
}
