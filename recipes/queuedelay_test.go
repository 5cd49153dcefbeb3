package recipes

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
)

// produceAt puts data into queue q on s, due at due.
func produceAt(t testing.TB, s *testService, q string, data string, prio int, due time.Time) Item {
	t.Helper()
	it, err := s.Queues.ProduceWith(context.Background(), q, []byte(data), ProduceOptions{Priority: prio, NotBefore: due})
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// takeNow takes the first item of q on s with no wait: "" when none.
func takeNow(t testing.TB, s *testService, q string) string {
	t.Helper()
	it, err := s.Queues.Take(context.Background(), q, 0)
	if IsEmpty(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(it.Data)
}

// A delayed item is neither taken nor claimed before it is due, nor seen by
// a reader of the entries (kazoo); the state counts it. Once due it is
// served after what was produced before its due time, and before what is
// produced after, and a take waiting on the queue gets it without polling.
func TestADelayedItemIsServedOnlyOnceDue(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	due := time.Now().Add(1500 * time.Millisecond)
	it := produceAt(t, svc, "q", "late", 0, due)
	if it.NotBefore == nil || it.NotBefore.Before(due) || it.NotBefore.Sub(due) >= time.Millisecond {
		t.Fatalf("the produce says %+v, want not_before %v", it, due)
	}
	if _, _, err := ParseItemID(it.ID); err == nil {
		t.Fatalf("a delayed item has the id %s of an entry", it.ID)
	}
	produce(t, svc, "q", []byte("early"), 500)
	if got := takeNow(t, svc, "q"); got != "early" {
		t.Fatalf("took %q, want the item not delayed", got)
	}
	if got := takeNow(t, svc, "q"); got != "" && time.Now().Before(due) {
		t.Fatalf("took %q before it was due", got)
	}
	lease := newLease(t, svc, "consumer")
	if c, err := svc.Queues.Claim(ctx, lease, "q", 0); !IsEmpty(err) && time.Now().Before(due) {
		t.Fatalf("claimed %q (%v) before it was due", c.Data, err)
	}
	st, err := svc.Queues.State(ctx, "q", 10, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(due) && (st.Length != 0 || st.Delayed != 1 || st.NextDue == nil || !st.NextDue.Equal(*it.NotBefore)) {
		t.Fatalf("the state before the due time: %+v, want 1 delayed, due %v", st, it.NotBefore)
	}
	if kids, _, err := rawClient(t).Children(svc.Queues.entries("q")); err != nil || (len(kids) != 0 && time.Now().Before(due)) {
		t.Fatalf("the entries hold %v (%v) before the due time", kids, err)
	}
	// A take waiting from before the due time gets it, at its due time.
	got, err := svc.Queues.Take(ctx, "q", 20*time.Second)
	if err != nil || string(got.Data) != "late" {
		t.Fatalf("the waiting take: %q, %v", got.Data, err)
	}
	if time.Now().Before(*it.NotBefore) {
		t.Fatalf("took the delayed item before its due time %v", due)
	}
	// Order: produced before the due time < delayed < produced after.
	produceAt(t, svc, "q", "second", 900, time.Now().Add(500*time.Millisecond))
	produce(t, svc, "q", []byte("first"), 900)
	zktest.Eventually(t, 10*time.Second, func() error {
		if st, err := svc.Queues.State(ctx, "q", 0, 0, 0); err != nil || st.Delayed != 0 {
			return fmt.Errorf("not moved yet: %+v, %v", st, err)
		}
		return nil
	})
	produce(t, svc, "q", []byte("third"), 900)
	for _, want := range []string{"first", "second", "third", ""} {
		if got := takeNow(t, svc, "q"); got != want {
			t.Fatalf("took %q, want %q", got, want)
		}
	}
	if err := svc.Queues.Delete(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if left := treeUnder(t, rawClient(t), svc.Queues.base("q")); len(left) != 0 {
		t.Fatalf("the deleted queue left %v", left)
	}
}

// startService is newService for a Service that the test stops itself (a
// restart): stop closes it and its session, once.
func startService(t *testing.T, root string) (svc *testService, stop func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sess, err := Connect(ctx, SessionConfig{Servers: []string{zktest.Shared(t).Addr()}, Timeout: 10 * time.Second, Root: root, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s := New(sess, Config{GatewayID: "gw-restarted", Logger: log})
	var once sync.Once
	stop = func() { once.Do(func() { s.Close(); sess.Close() }) }
	t.Cleanup(stop)
	return &testService{Service: s, sess: sess, root: root}, stop
}

// The due time is in ZooKeeper: a gateway that stops between the produce
// and the due time loses nothing. The next gateway to start moves the item
// when due with nobody consuming (kazoo consumers read the entries), and a
// claim waiting on it through that gateway gets it then.
func TestADelayedItemOutlivesItsGateway(t *testing.T) {
	t.Parallel()
	root := zktest.UniqueRoot(t)
	first, stop := startService(t, root)
	due := time.Now().Add(time.Second)
	produceAt(t, first, "jobs", "moved by the next gateway", 0, due)
	produceAt(t, first, "jobs", "claimed through it", 1, due.Add(time.Second))
	stop()

	next := newService(t, serviceOptions{root: root, timeout: 10 * time.Second})
	raw := rawClient(t)
	zktest.Eventually(t, 20*time.Second, func() error {
		kids, _, err := raw.Children(next.Queues.entries("jobs"))
		if err != nil || len(kids) == 0 {
			return fmt.Errorf("the entries hold %v (%v)", kids, err)
		}
		return nil
	})
	if time.Now().Before(due) {
		t.Fatal("the item was moved before its due time")
	}
	data, _, err := raw.Get(next.Queues.entries("jobs") + "/entry-000-0000000000")
	if err != nil || string(data) != "moved by the next gateway" {
		t.Fatalf("the entry moved holds %q, %v", data, err)
	}
	ctx := context.Background()
	lease := newLease(t, next, "consumer")
	for _, want := range []string{"moved by the next gateway", "claimed through it"} {
		c, err := next.Queues.Claim(ctx, lease, "jobs", 20*time.Second)
		if err != nil || string(c.Data) != want {
			t.Fatalf("claim: %q, %v; want %q", c.Data, err, want)
		}
		if err := next.Queues.Ack(ctx, lease, "jobs", c.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// Two gateways on one root, each producing delayed items and each with
// consumers waiting: every item is moved once and consumed once.
func TestTwoGatewaysMoveEachDelayedItemOnce(t *testing.T) {
	t.Parallel()
	root := zktest.UniqueRoot(t)
	// Sessions of 10s: a produce cut by a connection dropped under the load
	// of the package's tests would have to fail the test (it cannot be
	// retried blind).
	o := serviceOptions{root: root, timeout: 10 * time.Second}
	a, b := o, o
	a.gateway, b.gateway = "gw-a", "gw-b"
	gws := []*testService{newService(t, a), newService(t, b)}
	const n = 24
	start := time.Now().Add(500 * time.Millisecond)
	var want []string
	for i := range n {
		d := fmt.Sprintf("item-%02d", i)
		want = append(want, d)
		produceAt(t, gws[i%2], "race", d, i%3, start.Add(time.Duration(i%4)*100*time.Millisecond))
	}
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for c := range 8 {
		wg.Go(func() {
			for {
				it, err := gws[c%2].Queues.Take(context.Background(), "race", 3*time.Second)
				if IsEmpty(err) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				got = append(got, string(it.Data))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("took %d items %v, want each of the %d once", len(got), got, n)
	}
	// Left: the directories (the delayed items' is a container, which
	// ZooKeeper removes in its own time).
	base := gws[0].Queues.base("race")
	for _, p := range treeUnder(t, rawClient(t), base) {
		if p != base+"/entries" && p != base+"/taken" && p != base+"/delayed" {
			t.Fatalf("the queue still holds %s", p)
		}
	}
}

// A delayed item is an item: it counts against the caps of its queue, on
// the gateway that produced it and on one that counts the queue afresh.
func TestDelayedItemsCountAgainstTheCaps(t *testing.T) {
	t.Parallel()
	root := zktest.UniqueRoot(t)
	caps := QueueConfig{MaxItems: 3}
	svc := newService(t, serviceOptions{root: root, queues: caps})
	later := time.Now().Add(time.Hour)
	produceAt(t, svc, "capped", "a", 0, later)
	produceAt(t, svc, "capped", "b", 0, later)
	produce(t, svc, "capped", []byte("c"), 0)
	_, err := svc.Queues.Produce(context.Background(), "capped", []byte("d"), 0)
	wantQueueFull(t, err, "max-queue-items", 3, 3, 3)
	other := newService(t, serviceOptions{root: root, queues: caps})
	_, err = other.Queues.ProduceWith(context.Background(), "capped", []byte("d"), ProduceOptions{NotBefore: later})
	wantQueueFull(t, err, "max-queue-items", 3, 3, 3)
	if got := takeNow(t, svc, "capped"); got != "c" {
		t.Fatalf("took %q, want c", got)
	}
	produceAt(t, svc, "capped", "d", 0, later)
	if err := svc.Queues.Delete(context.Background(), "capped"); err == nil || err.(*Error).Code != CodeNotEmpty {
		t.Fatalf("deleting a queue with delayed items only: %v, want not_empty", err)
	}
}

// A due time too far ahead is refused; one past or now is no delay.
func TestADueTimeIsBounded(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	ctx := context.Background()
	_, err := svc.Queues.ProduceWith(ctx, "q", nil, ProduceOptions{NotBefore: time.Now().Add(MaxDelay + time.Minute)})
	if e, ok := err.(*Error); !ok || e.Code != CodeInvalid {
		t.Fatalf("a due time past MaxDelay: %v, want invalid_request", err)
	}
	it, err := svc.Queues.ProduceWith(ctx, "q", []byte("now"), ProduceOptions{NotBefore: time.Now().Add(-time.Minute)})
	if err != nil || it.NotBefore != nil {
		t.Fatalf("a due time past: %+v, %v; want an item served at once", it, err)
	}
	if got := takeNow(t, svc, "q"); got != "now" {
		t.Fatalf("took %q", got)
	}
}

// A queue that never had a delayed item costs no request for them: the
// entries' data version says so. One that had some costs one listing of
// them until the gateway has seen them gone, then none.
func TestDelayedItemsCostNothingWhereThereAreNone(t *testing.T) {
	t.Parallel()
	px, svc := proxiedService(t)
	produce(t, svc, "plain", []byte("x"), 0)
	delayed := svc.Queues.delayed("plain")
	if takeNow(t, svc, "plain") != "x" || takeNow(t, svc, "plain") != "" {
		t.Fatal("the plain queue")
	}
	if _, err := svc.Queues.State(context.Background(), "plain", 10, 0, 0); err != nil {
		t.Fatal(err)
	}
	if got := px.Requests(delayed); len(got) != 0 {
		t.Fatalf("a queue with no delayed item had them looked for: %v", got)
	}
	produceAt(t, svc, "plain", "soon", 0, time.Now().Add(200*time.Millisecond))
	zktest.Eventually(t, 10*time.Second, func() error {
		if takeNow(t, svc, "plain") != "soon" {
			return fmt.Errorf("not due yet")
		}
		return nil
	})
	takeNow(t, svc, "plain") // finds none: seen gone
	mark := len(px.Requests(delayed))
	takeNow(t, svc, "plain")
	if got := px.Requests(delayed)[mark:]; len(got) != 0 {
		t.Fatalf("a take after the delayed items were seen gone looked for them again: %v", got)
	}
}

// A wait on a queue whose only item is delayed past it is bounded by its
// wait (empty at its end) and by its context (cancelled), as any other.
func TestAWaitForADelayedItemIsBounded(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{})
	produceAt(t, svc, "far", "next hour", 0, time.Now().Add(time.Hour))
	if _, err := svc.Queues.Take(context.Background(), "far", 200*time.Millisecond); !IsEmpty(err) {
		t.Fatalf("a take waiting 200ms for an item due in an hour: %v, want empty", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	lease := newLease(t, svc, "consumer")
	done := make(chan error, 1)
	go func() {
		_, err := svc.Queues.Claim(ctx, lease, "far", time.Minute)
		done <- err
	}()
	zktest.Eventually(t, 10*time.Second, func() error {
		if svc.cache.waited(svc.Queues.entries("far")) {
			return nil
		}
		return fmt.Errorf("the claim is not waiting yet")
	})
	cancel()
	select {
	case err := <-done:
		if err == nil || IsEmpty(err) {
			t.Fatalf("a cancelled claim: %v, want an error", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a cancelled claim did not return")
	}
	st, err := svc.Queues.State(context.Background(), "far", 0, 0, 0)
	if err != nil || st.Delayed != 1 || st.Claimed != 0 {
		t.Fatalf("after the waits: %+v, %v", st, err)
	}
}
