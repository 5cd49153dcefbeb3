package recipes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/zkgate/zkgate/internal/harness/zkproxy"
	"github.com/zkgate/zkgate/internal/harness/zktest"
)

// wantQueueFull checks that err refuses a produce at the cap limit of max,
// with the queue's figures (want: items and bytes) in the problem.
func wantQueueFull(t *testing.T, err error, limit string, max any, items int, bytes int64) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeQueueFull {
		t.Fatalf("want queue_full at %s, got %v", limit, err)
	}
	if e.Extra["exceeded"] != limit || e.Extra["max"] != max || !strings.Contains(e.Detail, "--"+limit) {
		t.Fatalf("the refusal names %v (max %v): %s; want %s (max %v)", e.Extra["exceeded"], e.Extra["max"], e.Detail, limit, max)
	}
	q, _ := e.Extra["queue"].(map[string]any)
	if q["items"] != items || q["bytes"] != bytes {
		t.Fatalf("the refusal gives the queue's figures %v, want %d items and %d bytes", q, items, bytes)
	}
	if _, ok := e.Extra["all_queues"].(map[string]any); !ok {
		t.Fatalf("the refusal gives no figures of all queues: %v", e.Extra)
	}
}

// itemsIn counts the items of queue name in ZooKeeper.
func itemsIn(t *testing.T, svc *testService, name string) int {
	t.Helper()
	kids, _, err := rawClient(t).Children(svc.Queues.entries(name))
	if err != nil {
		t.Fatal(err)
	}
	return len(kids)
}

// A queue holds at most MaxItems items and MaxBytes bytes: a produce past
// either is queue_full, naming the cap and the queue's figures, and nothing
// is made. An item taken through the gateway makes room at once; one taken
// by another client, at the next produce (which counts the queue again
// before it refuses).
func TestAQueueIsCappedInItemsAndBytes(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{queues: QueueConfig{MaxItems: 5, MaxBytes: 100}})
	ctx := context.Background()
	for range 5 {
		produce(t, svc, "items", []byte("0123456789"), 0)
	}
	_, err := svc.Queues.Produce(ctx, "items", []byte("x"), 0)
	wantQueueFull(t, err, "max-queue-items", 5, 5, 50)
	if n := itemsIn(t, svc, "items"); n != 5 {
		t.Fatalf("%d items in ZooKeeper after the refusal, want 5", n)
	}
	if _, err := svc.Queues.Take(ctx, "items", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Queues.Produce(ctx, "items", []byte("x"), 0); err != nil {
		t.Fatalf("a produce after a take: %v", err)
	}
	// Another client consumes an item: the gateway learns of it when it
	// counts again, before it would refuse.
	kids, _, err := rawClient(t).Children(svc.Queues.entries("items"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rawClient(t).Delete(svc.Queues.entries("items")+"/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Queues.Produce(ctx, "items", []byte("y"), 0); err != nil {
		t.Fatalf("a produce after another client took an item: %v", err)
	}

	produce(t, svc, "bytes", make([]byte, 60), 0)
	_, err = svc.Queues.Produce(ctx, "bytes", make([]byte, 41), 0)
	wantQueueFull(t, err, "max-queue-bytes", int64(100), 1, 60)
	if _, err := svc.Queues.Produce(ctx, "bytes", make([]byte, 40), 0); err != nil {
		t.Fatalf("an item that fits: %v", err)
	}
}

// All the queues together hold at most MaxTotalItems items (each queue
// counting QueueNodes more) and MaxTotalBytes bytes; a queue deleted gives
// its share back.
func TestAllQueuesAreCappedTogether(t *testing.T) {
	t.Parallel()
	const most = 2*QueueNodes + 3
	svc := newService(t, serviceOptions{queues: QueueConfig{MaxTotalItems: most}})
	ctx := context.Background()
	for _, q := range []string{"a", "a", "b"} {
		produce(t, svc, q, []byte("x"), 0)
	}
	_, err := svc.Queues.Produce(ctx, "a", []byte("x"), 0)
	wantQueueFull(t, err, "max-queues-items", most, 2, 2)
	_, err = svc.Queues.Produce(ctx, "c", []byte("x"), 0)
	wantQueueFull(t, err, "max-queues-items", most, 0, 0)
	if ok, _, _ := rawClient(t).Exists(svc.Queues.base("c")); ok {
		t.Fatal("a refused produce made its queue")
	}
	// Take b's item and delete b: room for a queue and its item.
	if _, err := svc.Queues.Take(ctx, "b", 0); err != nil {
		t.Fatal(err)
	}
	if err := svc.Queues.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Queues.Produce(ctx, "c", []byte("x"), 0); err != nil {
		t.Fatalf("a produce after a queue was deleted: %v", err)
	}

	bytes := newService(t, serviceOptions{queues: QueueConfig{MaxTotalBytes: 1000}})
	for _, q := range []string{"a", "b"} {
		produce(t, bytes, q, make([]byte, 450), 0)
	}
	_, err = bytes.Queues.Produce(ctx, "a", make([]byte, 101), 0)
	wantQueueFull(t, err, "max-queues-bytes", int64(1000), 1, 450)
	if _, err := bytes.Queues.Produce(ctx, "c", make([]byte, 100), 0); err != nil {
		t.Fatalf("an item that fits: %v", err)
	}
}

// Several gateways share one root and produce into one queue at once until
// they are refused, then each in turn: the figures come from ZooKeeper, so
// the queue ends at its cap or above it by at most a blind budget (a
// sixteenth of the cap) per other gateway, and every gateway refuses it.
func TestQueueCapsHoldAcrossGateways(t *testing.T) {
	t.Parallel()
	const capacity, gateways = 64, 3
	root := zktest.UniqueRoot(t)
	var svcs []*testService
	for range gateways {
		svcs = append(svcs, newService(t, serviceOptions{root: root, queues: QueueConfig{MaxItems: capacity}}))
	}
	ctx := context.Background()
	fill := func(svc *testService) {
		for {
			_, err := svc.Queues.Produce(ctx, "shared", []byte("x"), 0)
			if ErrorCode(err) == CodeQueueFull {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
	}
	var wg sync.WaitGroup
	for _, svc := range svcs {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fill(svc)
			}()
		}
	}
	wg.Wait()
	for _, svc := range svcs {
		fill(svc)
	}
	n := itemsIn(t, svcs[0], "shared")
	if most := capacity + (gateways-1)*capacity/blindShare; n < capacity || n > most {
		t.Fatalf("the queue holds %d items; want from %d to %d", n, capacity, most)
	}
	for g, svc := range svcs {
		if _, err := svc.Queues.Produce(ctx, "shared", []byte("x"), 0); ErrorCode(err) != CodeQueueFull {
			t.Fatalf("gateway %d let a produce into the full queue: %v", g, err)
		}
	}
	t.Logf("%d items for a cap of %d", n, capacity)
}

// The produce path sends no request more for the caps in the common case:
// a create. The first produce of a gateway takes a census, the first into a
// queue counts it; then, once a blind budget (a sixteenth of a cap) is
// spent, one listing of the entries, and one stat per item that another
// gateway made meanwhile.
func TestAProduceCountsOnlyOncePerBudget(t *testing.T) {
	t.Parallel()
	const capacity = 32 // a blind budget of 2 items
	px := zkproxy.New(t, zktest.Shared(t).Addr())
	root := zktest.UniqueRoot(t)
	svc := newService(t, serviceOptions{root: root, servers: []string{px.Addr()}, queues: QueueConfig{MaxItems: capacity}})
	other := newService(t, serviceOptions{root: root})
	entries := svc.Queues.entries("q")
	produce := func(on *testService) []zkproxy.Request {
		t.Helper()
		mark := len(px.Requests(root))
		produce(t, on, "q", []byte("x"), 0)
		return withoutHeartbeats(root, px.Requests(root)[mark:])
	}
	ops := func(rs []zkproxy.Request) (out []string) {
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%d %s", r.Op, strings.TrimPrefix(r.Path, root)))
		}
		return out
	}
	// The first produce counts, and its item is the first of the budget.
	t.Logf("the first produce sent %v", ops(produce(svc)))
	if got := produce(svc); len(got) != 1 || got[0].Op != opCreate {
		t.Fatalf("a produce within the budget sent %v, want one create", ops(got))
	}
	for range 3 {
		produce(other)
	}
	got := produce(svc)
	want := []int32{opGetChildren2, opExists, opExists, opExists, opCreate}
	if !slices.Equal(opsOf(got), want) || got[0].Path != entries {
		t.Fatalf("the produce past the budget sent %v, want a listing of the entries, a stat of each of the other gateway's 3 items, and its create", ops(got))
	}
}

func opsOf(rs []zkproxy.Request) []int32 {
	var out []int32
	for _, r := range rs {
		out = append(out, r.Op)
	}
	return out
}

// The produces of one gateway under way in ZooKeeper hold at most
// MaxProducingBytes of items; another waits for room.
func TestProducesUnderWayAreBounded(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{queues: QueueConfig{MaxBytes: 1 << 30, MaxTotalBytes: 1 << 30}})
	l := svc.Queues.ledger
	ctx := context.Background()
	const size, weight = 512 << 10, 513 << 10
	room := MaxProducingBytes / weight
	var held []*reservation
	for range room {
		r, err := svc.Queues.reserve(ctx, "big", size)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	if l.producing.TryAcquire(weight) {
		t.Fatalf("room for a produce of %d bytes with %d under way", size, room)
	}
	waited := make(chan error, 1)
	go func() {
		r, err := svc.Queues.reserve(ctx, "big", size)
		if err == nil {
			r.cancel()
		}
		waited <- err
	}()
	held[0].cancel()
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	for _, r := range held[1:] {
		r.cancel()
	}
	if !l.producing.TryAcquire(MaxProducingBytes) {
		t.Fatal("cancelled produces kept their room")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.queues["big"].pending; p != (figures{}) || l.total != (figures{}) {
		t.Fatalf("cancelled produces left figures behind: %+v, all %+v", p, l.total)
	}
}
