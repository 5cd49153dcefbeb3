package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
)

func grant(t *testing.T, c *client.Client, holder string) *client.Lease {
	t.Helper()
	l, err := c.Grant(ctxFor(t, 30*time.Second), 30*time.Second, holder)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.Revoke(ctx); err != nil {
			t.Errorf("revoke %s: %v", holder, err)
		}
	})
	return l
}

// twoHolders starts a gateway (see gateway) and returns a client of it, a
// context of a minute and two leases of that client, held by "a" and "b":
// what a test of two contenders starts from.
func twoHolders(t *testing.T) (*client.Client, context.Context, *client.Lease, *client.Lease) {
	t.Helper()
	_, c := gateway(t)
	ctx := ctxFor(t, time.Minute)
	return c, ctx, grant(t, c, "a"), grant(t, c, "b")
}

func wantCode(t *testing.T, err error, sentinel error, status int) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.Is(err, sentinel) || !errors.As(err, &e) || e.Status != status {
		t.Fatalf("want %v (%d), got %v", sentinel, status, err)
	}
	return e
}

func TestLocks(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	c, ctx, a, b := twoHolders(t)
	checkExclusiveLock(t, ctx, c, a, b)
	checkReadWriteLock(t, ctx, c, a, b)
	checkBadLockInput(t, ctx, a)
}

// checkExclusiveLock: a holds "orders" with a token that fences, b times
// out with the holders, then waits and is handed the lock with a larger
// token when a releases it.
func checkExclusiveLock(t *testing.T, ctx context.Context, c *client.Client, a, b *client.Lease) {
	t.Helper()
	ga, err := a.Lock(ctx, "orders", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if ga.Mode != client.Exclusive || ga.Token <= 0 || ga.Lease != a.ID() || ga.Name != "orders" {
		t.Fatalf("grant %+v", ga)
	}
	if _, err := a.Lock(ctx, "orders", client.Exclusive, 0); !errors.Is(err, client.ErrAlreadyHeld) {
		t.Fatalf("a second Lock through the holding lease: %v", err)
	}
	if err := c.Fence(ctx, "orders", ga.Token); err != nil {
		t.Fatalf("fence of the holder's token: %v", err)
	}

	_, err = b.Lock(ctx, "orders", client.Exclusive, 300*time.Millisecond)
	e := wantCode(t, err, client.ErrTimeout, 409)
	var holders []client.Holder
	if ok, err := e.Decode("holders", &holders); !ok || err != nil || len(holders) != 1 || holders[0].Lease != a.ID() {
		t.Fatalf("a timeout carries the holders: %v %v %+v", ok, err, holders)
	}

	st, err := c.LockState(ctx, "orders")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != ga.Token || st.Index <= 0 {
		t.Fatalf("state %+v %v", st, err)
	}
	list, err := c.Locks(ctx, "ord")
	if err != nil || len(list) != 1 || list[0].Name != "orders" || list[0].Holders != 1 {
		t.Fatalf("list %+v %v", list, err)
	}

	// b waits; a's release hands the lock over with a larger token.
	got := make(chan *client.LockGrant, 1)
	go func() {
		g, err := b.Lock(ctx, "orders", client.Exclusive, 30*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- g
	}()
	waitForWaiters(t, ctx, c, "orders", 1)
	if err := ga.Release(ctx); err != nil {
		t.Fatal(err)
	}
	gb := <-got
	if gb == nil || gb.Token <= ga.Token {
		t.Fatalf("b's grant %+v after a's token %d", gb, ga.Token)
	}
	wantCode(t, c.Fence(ctx, "orders", ga.Token), client.ErrStaleToken, 409)
	wantCode(t, a.Unlock(ctx, "orders", ""), client.ErrNotHeld, 409)
	if err := gb.Release(ctx); err != nil {
		t.Fatal(err)
	}

}

// checkReadWriteLock: readers share, a writer waits for them; a lease's
// write behind its own read would deadlock.
func checkReadWriteLock(t *testing.T, ctx context.Context, c *client.Client, a, b *client.Lease) {
	t.Helper()
	if _, err := a.Lock(ctx, "catalog", client.Read, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(ctx, "catalog", client.Read, 0); err != nil {
		t.Fatal(err)
	}
	d := grant(t, c, "d")
	wantCode(t, errOf(d.Lock(ctx, "catalog", client.Write, 0)), client.ErrTimeout, 409)
	wantCode(t, errOf(a.Lock(ctx, "catalog", client.Write, 0)), client.ErrWouldDeadlock, 409)
	if err := a.Unlock(ctx, "catalog", client.Read); err != nil {
		t.Fatal(err)
	}

}

// checkBadLockInput: bad input is refused before a round trip, and by the
// gateway.
func checkBadLockInput(t *testing.T, ctx context.Context, a *client.Lease) {
	t.Helper()
	for _, name := range []string{"", "..", "a/b", "x y", strings.Repeat("n", 201)} {
		if _, err := a.Lock(ctx, name, client.Exclusive, 0); !errors.Is(err, client.ErrInvalid) {
			t.Fatalf("name %q: %v", name, err)
		}
	}
	if _, err := a.Lock(ctx, "x", "shared", 0); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("bad mode: %v", err)
	}
	e := wantCode(t, errOf(a.Lock(ctx, "x", client.Exclusive, 2*time.Hour)), client.ErrInvalid, 400)
	if !strings.Contains(e.Detail, "cap") {
		t.Fatalf("the gateway's detail should name the cap: %q", e.Detail)
	}
}

func errOf[T any](_ T, err error) error { return err }

// TestAcquireRetriedAfterLostAnswer: the gateway grants the lock but the
// answer is lost on the way back; the client asks again with the same
// lease and gets the same grant: one node, no self-deadlock.
// A deadlock the gateway breaks is ErrDeadlock for the wait it ended, with
// the cycle to read; the lease keeps what it holds.
func TestDeadlock(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	c, ctx, a, b := twoHolders(t)
	if _, err := a.Lock(ctx, "x", client.Exclusive, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(ctx, "y", client.Exclusive, 0); err != nil {
		t.Fatal(err)
	}
	aWaits := make(chan error, 1)
	go func() {
		_, err := a.Lock(ctx, "y", client.Exclusive, 30*time.Second)
		aWaits <- err
	}()
	waitForWaiters(t, ctx, c, "y", 1) // a waits for y
	_, err := b.Lock(ctx, "x", client.Exclusive, 30*time.Second)
	e := wantCode(t, err, client.ErrDeadlock, 409)
	var cycle []struct{ Lease, Name string }
	if ok, err := e.Decode("cycle", &cycle); !ok || err != nil || len(cycle) != 2 || cycle[0].Lease != b.ID() || cycle[0].Name != "x" ||
		cycle[1].Lease != a.ID() || cycle[1].Name != "y" {
		t.Fatalf("the cycle: %v %v %+v", ok, err, cycle)
	}
	if err := b.Unlock(ctx, "y", ""); err != nil {
		t.Fatal(err)
	}
	if err := <-aWaits; err != nil {
		t.Fatalf("a's wait, once b let y go: %v", err)
	}
}

func TestAcquireRetriedAfterLostAnswer(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	g, _ := gateway(t)
	p, c := proxiedClient(t, g.URL)
	ctx := ctxFor(t, time.Minute)
	l := grant(t, c, "retry")
	var once sync.Once
	dropped := false
	p.set(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		drop := false
		if strings.HasSuffix(r.URL.Path, "/acquire") {
			once.Do(func() { drop = true })
		}
		if !drop {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			t.Errorf("the dropped acquire was not granted: %d %s", rec.Code, rec.Body)
		}
		dropped = true
		cut(w)
	})
	gr, err := l.Lock(ctx, "retried", client.Exclusive, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !dropped {
		t.Fatal("no answer was dropped")
	}
	acquires := 0
	for _, r := range p.requests() {
		if strings.HasSuffix(r.URL.Path, "/acquire") {
			acquires++
		}
	}
	if acquires != 2 {
		t.Fatalf("%d acquires sent, want 2", acquires)
	}
	st, err := c.LockState(ctx, "retried")
	if err != nil || len(st.Holders) != 1 || len(st.Waiters) != 0 || st.Holders[0].Token != gr.Token {
		t.Fatalf("after the retry: %+v %v (grant %+v)", st, err, gr)
	}
}

func TestSemaphores(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	_, c := gateway(t)
	ctx := ctxFor(t, time.Minute)
	a, b, d := grant(t, c, "a"), grant(t, c, "b"), grant(t, c, "d")
	ga, err := a.AcquireSemaphore(ctx, "gpu", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireSemaphore(ctx, "gpu", 2, 0); err != nil {
		t.Fatal(err)
	}
	wantCode(t, errOf(d.AcquireSemaphore(ctx, "gpu", 2, 200*time.Millisecond)), client.ErrTimeout, 409)
	e := wantCode(t, errOf(d.AcquireSemaphore(ctx, "gpu", 3, 0)), client.ErrLimitMismatch, 409)
	var limit int
	if ok, _ := e.Decode("limit", &limit); !ok || limit != 2 {
		t.Fatalf("limit_mismatch carries the limit: %d", limit)
	}
	st, err := c.SemaphoreState(ctx, "gpu")
	if err != nil || len(st.Holders) != 2 || st.Limit != 2 {
		t.Fatalf("state %+v %v", st, err)
	}
	if err := ga.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if gd, err := d.AcquireSemaphore(ctx, "gpu", 2, 5*time.Second); err != nil || gd.Token <= ga.Token {
		t.Fatalf("d after a's release: %+v %v", gd, err)
	}
	wantCode(t, a.ReleaseSemaphore(ctx, "gpu"), client.ErrNotHeld, 409)
}

func TestElections(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	c, ctx, a, b := twoHolders(t)
	w, err := c.WatchElection(ctx, "scheduler")
	if err != nil {
		t.Fatal(err)
	}
	if st := <-w.C; st.Leader != nil || len(st.Candidates) != 0 {
		t.Fatalf("first state of a new election: %+v", st)
	}
	ca, err := a.Campaign(ctx, "scheduler", "10.0.0.1:80", 0)
	if err != nil || !ca.Elected || ca.Token <= 0 {
		t.Fatalf("a: %+v %v", ca, err)
	}
	cb, err := b.Campaign(ctx, "scheduler", "10.0.0.2:80", 100*time.Millisecond)
	if err != nil || cb.Elected || cb.Position != 1 || cb.Leader == nil || cb.Leader.Lease != a.ID() {
		t.Fatalf("b: %+v %v", cb, err)
	}
	wantCode(t, errOf(b.Proclaim(ctx, "scheduler", "me")), client.ErrNotLeader, 409)
	if p, err := a.Proclaim(ctx, "scheduler", "10.0.0.1:81"); err != nil || p.Value != "10.0.0.1:81" {
		t.Fatalf("proclaim: %+v %v", p, err)
	}
	led := make(chan *client.Campaign, 1)
	go func() {
		c, err := b.Lead(ctx, "scheduler", "10.0.0.2:80", 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		led <- c
	}()
	// The watch sees a lead, with its new value, then b.
	for st := range w.C {
		if st.Leader != nil && st.Leader.Lease == a.ID() && st.Leader.Value == "10.0.0.1:81" {
			break
		}
	}
	if err := a.Resign(ctx, "scheduler"); err != nil {
		t.Fatal(err)
	}
	for st := range w.C {
		if st.Leader != nil && st.Leader.Lease == b.ID() {
			break
		}
		if st.Leader != nil && st.Leader.Lease != a.ID() {
			t.Fatalf("unexpected leader %+v", st.Leader)
		}
	}
	if cb := <-led; cb == nil || !cb.Elected || cb.Token <= ca.Token {
		t.Fatalf("b's leadership %+v after a's token %d", cb, ca.Token)
	}
	list, err := c.Elections(ctx)
	if err != nil || len(list) != 1 || list[0].Leader == nil || list[0].Leader.Lease != b.ID() {
		t.Fatalf("list %+v %v", list, err)
	}
	wantCode(t, a.Resign(ctx, "scheduler"), client.ErrNotHeld, 409)
}

// TestLeadGivesUpWithItsContext: Lead withdraws the candidacy when its
// context ends before the lease is elected.
func TestLeadGivesUpWithItsContext(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	c, ctx, a, b := twoHolders(t)
	if _, err := a.Campaign(ctx, "e", "", 0); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := b.Lead(short, "e", "", 10*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lead: %v", err)
	}
	st, err := c.ElectionState(ctx, "e")
	if err != nil || len(st.Candidates) != 1 {
		t.Fatalf("b's candidacy should be withdrawn: %+v %v", st, err)
	}
}

func TestBarriers(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	_, c := gateway(t)
	ctx := ctxFor(t, time.Minute)
	if raised, err := c.RaiseBarrier(ctx, "deploy"); err != nil || !raised {
		t.Fatalf("raise: %v %v", raised, err)
	}
	if raised, err := c.RaiseBarrier(ctx, "deploy"); err != nil || raised {
		t.Fatalf("raise again: %v %v", raised, err)
	}
	wantCode(t, c.WaitBarrier(ctx, "deploy", 0), client.ErrTimeout, 409)
	w, err := c.WatchBarrier(ctx, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	if st := <-w.C; !st.Raised {
		t.Fatalf("state %+v", st)
	}
	down := make(chan error, 1)
	go func() { down <- c.WaitBarrier(ctx, "deploy", 30*time.Second) }()
	if list, err := c.Barriers(ctx); err != nil || len(list) != 1 {
		t.Fatalf("list %+v %v", list, err)
	}
	if err := c.LowerBarrier(ctx, "deploy"); err != nil {
		t.Fatal(err)
	}
	if err := <-down; err != nil {
		t.Fatalf("wait: %v", err)
	}
	if st := <-w.C; st.Raised {
		t.Fatalf("the watch should see it down: %+v", st)
	}
	if err := c.LowerBarrier(ctx, "deploy"); err != nil {
		t.Fatalf("lowering a barrier that is down: %v", err)
	}
}

func TestDoubleBarrier(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	c, ctx, a, b := twoHolders(t)
	wantCode(t, errOf(a.Enter(ctx, "batch", "host-a", 2, 100*time.Millisecond)), client.ErrTimeout, 409)
	wantCode(t, errOf(b.Enter(ctx, "batch", "host-b", 3, 0)), client.ErrCountMismatch, 409)
	var wg, entered sync.WaitGroup
	entered.Add(2)
	for _, m := range []struct {
		l      *client.Lease
		member string
	}{{a, "host-a"}, {b, "host-b"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := m.l.Enter(ctx, "batch", m.member, 2, 30*time.Second)
			entered.Done()
			if err != nil || !st.Ready || len(st.Members) != 2 {
				t.Errorf("enter %s: %+v %v", m.member, st, err)
				return
			}
			// Both answers read, then leave: a member that leaves first
			// deletes its node, which the other's answer would not list.
			entered.Wait()
			if _, err := m.l.Leave(ctx, "batch", m.member, 30*time.Second); err != nil {
				t.Errorf("leave %s: %v", m.member, err)
			}
		}()
	}
	wg.Wait()
	st, err := c.DoubleBarrierState(ctx, "batch")
	if err != nil || len(st.Members) != 0 {
		t.Fatalf("after leaving: %+v %v", st, err)
	}
}

func TestQueues(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	_, c := gateway(t)
	ctx := ctxFor(t, time.Minute)
	for i, p := range []int{100, 5, 100} {
		if _, err := c.Produce(ctx, "jobs", []byte(fmt.Sprintf("job-%d", i)), p); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.QueueState(ctx, "jobs", 5)
	if err != nil || st.Length != 3 || len(st.Head) != 3 || st.Head[0].Priority != 5 {
		t.Fatalf("state %+v %v", st, err)
	}
	it, err := c.Take(ctx, "jobs", 0)
	if err != nil || string(it.Data) != "job-1" || it.Priority != 5 {
		t.Fatalf("take: %+v %v", it, err)
	}
	if err := it.Ack(ctx); !errors.Is(err, client.ErrNotClaimed) {
		t.Fatalf("ack of a taken item: %v", err)
	}

	l := grant(t, c, "consumer")
	checkClaims(t, ctx, c, l)
	checkEmptyQueue(t, ctx, c, l)
	if list, err := c.Queues(ctx); err != nil || len(list) != 1 || list[0].Name != "jobs" {
		t.Fatalf("queues %+v %v", list, err)
	}
	if err := c.DeleteQueue(ctx, "jobs"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "jobs", nil, 1000); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("priority 1000: %v", err)
	}
}

// checkClaims: l claims job-0 of "jobs", which a nack serves again and an
// ack ends; job-2, claimed by a lease that ends, is served again to l.
func checkClaims(t *testing.T, ctx context.Context, c *client.Client, l *client.Lease) {
	t.Helper()
	claimed, err := l.Claim(ctx, "jobs", 0)
	if err != nil || string(claimed.Data) != "job-0" {
		t.Fatalf("claim: %+v %v", claimed, err)
	}
	peek, err := c.Peek(ctx, "jobs", claimed.ID)
	if err != nil || !bytes.Equal(peek.Data, claimed.Data) {
		t.Fatalf("peek: %+v %v", peek, err)
	}
	if err := claimed.Nack(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := l.Claim(ctx, "jobs", 0)
	if err != nil || again.ID != claimed.ID {
		t.Fatalf("a nacked item is served again first: %+v %v", again, err)
	}
	if err := again.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	wantCode(t, again.Ack(ctx), client.ErrNotClaimed, 409)

	// A claim whose lease ends is served again.
	other := grant(t, c, "other")
	lost, err := other.Claim(ctx, "jobs", 0)
	if err != nil || string(lost.Data) != "job-2" {
		t.Fatalf("claim: %+v %v", lost, err)
	}
	if err := other.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	back, err := l.Claim(ctx, "jobs", 5*time.Second)
	if err != nil || back.ID != lost.ID {
		t.Fatalf("the item of a revoked lease: %+v %v", back, err)
	}
	if err := back.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// checkEmptyQueue: "jobs" is empty to a take and a claim, and a take that
// waits is woken by a produce.
func checkEmptyQueue(t *testing.T, ctx context.Context, c *client.Client, l *client.Lease) {
	t.Helper()
	if _, err := c.Take(ctx, "jobs", 100*time.Millisecond); !errors.Is(err, client.ErrEmpty) {
		t.Fatalf("take from an empty queue: %v", err)
	}
	if _, err := l.Claim(ctx, "jobs", 0); !errors.Is(err, client.ErrEmpty) {
		t.Fatalf("claim from an empty queue: %v", err)
	}
	// A take that waits is woken by a produce.
	taken := make(chan *client.Item, 1)
	go func() {
		it, err := c.Take(ctx, "jobs", 30*time.Second)
		if err != nil {
			t.Error(err)
		}
		taken <- it
	}()
	w, err := c.WatchQueue(ctx, "jobs", 0)
	if err != nil {
		t.Fatal(err)
	}
	<-w.C
	if _, err := c.Produce(ctx, "jobs", nil, client.DefaultPriority); err != nil {
		t.Fatal(err)
	}
	if it := <-taken; it == nil || len(it.Data) != 0 {
		t.Fatalf("the woken take: %+v", it)
	}
}

// TestWatchLock: each change is delivered once, in order; the channel
// closes with the context.
func TestWatchLock(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	_, c := gateway(t)
	ctx := ctxFor(t, time.Minute)
	wctx, stop := context.WithCancel(ctx)
	w, err := c.WatchLock(wctx, "watched")
	if err != nil {
		t.Fatal(err)
	}
	first := <-w.C
	if len(first.Holders) != 0 {
		t.Fatalf("first %+v", first)
	}
	a := grant(t, c, "a")
	g, err := a.Lock(ctx, "watched", client.Exclusive, 0)
	if err != nil {
		t.Fatal(err)
	}
	held := <-w.C
	if len(held.Holders) != 1 || held.Holders[0].Token != g.Token || held.Index <= first.Index {
		t.Fatalf("held %+v after %+v", held, first)
	}
	if err := g.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if free := <-w.C; len(free.Holders) != 0 || free.Index <= held.Index {
		t.Fatalf("free %+v", free)
	}
	stop()
	for range w.C {
	}
	if !errors.Is(w.Err(), context.Canceled) {
		t.Fatalf("Err after the context ended: %v", w.Err())
	}
	if _, err := c.WatchLock(ctx, "no/such"); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("watch of a bad name: %v", err)
	}
}

// TestTypedErrors: every answer the gateway (or something before it) can
// give becomes an *Error that errors.Is matches by code; the token is sent
// as a bearer token on every request.
func TestTypedErrors(t *testing.T) {
	t.Parallel()
	problems := map[string]struct {
		status int
		code   string
		want   error
	}{
		"/unauth":    {401, "unauthenticated", client.ErrUnauthenticated},
		"/forbidden": {403, "forbidden", client.ErrForbidden},
		"/many":      {429, "too_many", client.ErrTooMany},
		"/full":      {507, "queue_full", client.ErrQueueFull},
		"/big":       {413, "too_large", client.ErrTooLarge},
		"/gone":      {410, "lease_expired", client.ErrLeaseExpired},
		"/busy":      {503, "unavailable", client.ErrUnavailable},
	}
	var auth sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.URL.Path, r.Header.Get("Authorization")+"|"+r.Header.Get("User-Agent"))
		name := strings.TrimPrefix(r.URL.Path, "/v1/locks")
		if name == "/proxy/fence" {
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html>bad gateway</html>\n")
			return
		}
		p, ok := problems[strings.TrimSuffix(name, "/fence")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(p.status)
		fmt.Fprintf(w, `{"type":"urn:zkgate:problem:%s","title":"t","status":%d,"detail":"the detail","code":"%s","limit":"leases"}`, p.code, p.status, p.code)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL+"/", client.WithToken("s3cret"), client.WithUserAgent("tester/1"), client.WithRetryWindow(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	for path, p := range problems {
		err := c.Fence(ctx, strings.TrimPrefix(path, "/"), 1)
		e := wantCode(t, err, p.want, p.status)
		var limit string
		if e.Detail != "the detail" || e.RetryAfter != 3*time.Second || errors.Is(err, client.ErrTimeout) {
			t.Fatalf("%s: %+v", path, e)
		}
		if ok, _ := e.Decode("limit", &limit); !ok || limit != "leases" {
			t.Fatalf("%s: extras %v", path, e.Extra)
		}
		if got, _ := auth.Load("/v1/locks" + path + "/fence"); got != "Bearer s3cret|tester/1" {
			t.Fatalf("%s: Authorization|User-Agent %q", path, got)
		}
	}
	e := wantCode(t, c.Fence(ctx, "proxy", 1), client.ErrUnavailable, 502)
	if !strings.Contains(e.Error(), "bad gateway") || strings.Contains(e.Error(), "\n") {
		t.Fatalf("a bare error page: %q", e.Error())
	}
	if _, err := client.New("ftp://host"); err == nil {
		t.Fatal("ftp must be refused")
	}
}

// TestGatewayErrors: the gateway's own problems, read through the client.
func TestGatewayErrors(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	_, c := gateway(t)
	ctx := ctxFor(t, time.Minute)
	wantCode(t, errOf(c.KeepAlive(ctx, "0b5c6f7e-1a2b-4c3d-8e9f-001122334455")), client.ErrLeaseNotFound, 404)
	wantCode(t, errOf(c.LeaseInfo(ctx, "not-a-uuid")), client.ErrInvalid, 400)
	wantCode(t, errOf(c.Grant(ctx, 500*time.Millisecond, "")), client.ErrInvalid, 400)
	info, err := c.CreateLease(ctx, 5*time.Second, "raw")
	if err != nil {
		t.Fatal(err)
	}
	l := c.Lease(info.ID)
	if _, err := l.Claim(ctx, "q", 0); !errors.Is(err, client.ErrEmpty) {
		t.Fatalf("claim through a handle: %v", err)
	}
	if err := c.RevokeLease(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	e := wantCode(t, errOf(c.KeepAlive(ctx, info.ID)), client.ErrLeaseExpired, 410)
	if e.Reason() != "revoked" {
		t.Fatalf("reason %q", e.Reason())
	}
	if err := l.Revoke(ctx); err != nil {
		t.Fatalf("revoking an ended lease is not an error: %v", err)
	}
	if !errors.Is(l.Err(), client.ErrRevoked) {
		t.Fatalf("Err %v", l.Err())
	}
}

// A set of locks: a takes {y, x} as x then y; b's set, crossing it, times
// out on the lock a holds and holds none of its own after; each of a's
// grants releases; sets that are not are refused before any request.
func TestLockSets(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	c, ctx, a, b := twoHolders(t)
	grants, err := a.LockAll(ctx, []client.LockRequest{{Name: "y", Mode: client.Write}, {Name: "x"}}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(grants) != 2 || grants[0].Name != "x" || grants[0].Mode != client.Exclusive || grants[1].Name != "y" || grants[1].Mode != client.Write {
		t.Fatalf("grants %+v, want x then y", grants)
	}
	if _, err := a.Lock(ctx, "x", client.Exclusive, 0); !errors.Is(err, client.ErrAlreadyHeld) {
		t.Fatalf("Lock of a lock the lease's set holds: %v", err)
	}
	_, err = b.LockAll(ctx, []client.LockRequest{{Name: "y"}, {Name: "w"}}, 300*time.Millisecond)
	e := wantCode(t, err, client.ErrTimeout, 409)
	var lock string
	if ok, err := e.Decode("lock", &lock); !ok || err != nil || lock != "y" {
		t.Fatalf("the timeout names lock %q (%v %v), want y", lock, ok, err)
	}
	if st, err := c.LockState(ctx, "w"); err != nil || len(st.Holders)+len(st.Waiters) != 0 {
		t.Fatalf("lock w after b's set failed: %+v %v, want nobody", st, err)
	}
	for _, g := range grants {
		if err := g.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.LockAll(ctx, []client.LockRequest{{Name: "w"}, {Name: "y"}}, time.Second); err != nil {
		t.Fatalf("b's set once a released: %v", err)
	}
	if err := b.UnlockAll(ctx, []client.LockRequest{{Name: "w"}, {Name: "y"}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]client.LockRequest{nil, {{Name: "x"}, {Name: "x", Mode: client.Read}}, {{Name: "x", Mode: "shared"}}, {{Name: "a/b"}}} {
		if _, err := a.LockAll(ctx, bad, 0); !errors.Is(err, client.ErrInvalid) {
			t.Errorf("set %v: %v, want ErrInvalid", bad, err)
		}
	}
}

// TestDelayedProduce: an item produced with a delay is not served before it
// is due, shows in the queue's state, and a take waiting gets it once due;
// a negative delay, or both a delay and a time, is ErrInvalid.
func TestDelayedProduce(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	_, c := gateway(t)
	ctx := ctxFor(t, time.Minute)
	info, err := c.ProduceWith(ctx, "later", []byte("due"), client.ProduceOptions{Priority: 3, Delay: 500 * time.Millisecond})
	if err != nil || info.NotBefore == nil || !strings.HasPrefix(info.ID, "due-") {
		t.Fatalf("a delayed produce: %+v %v", info, err)
	}
	st, err := c.QueueState(ctx, "later", 5)
	if err != nil || (time.Now().Before(*info.NotBefore) && (st.Delayed != 1 || st.NextDue == nil || st.Length != 0)) {
		t.Fatalf("state with a delayed item: %+v %v", st, err)
	}
	it, err := c.Take(ctx, "later", 30*time.Second)
	if err != nil || string(it.Data) != "due" || it.Priority != 3 {
		t.Fatalf("the waiting take: %+v %v", it, err)
	}
	if time.Now().Before(*info.NotBefore) {
		t.Fatalf("took the item before its due time %v", info.NotBefore)
	}
	if _, err := c.ProduceWith(ctx, "later", nil, client.ProduceOptions{Delay: -time.Second}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("a negative delay: %v", err)
	}
	if _, err := c.ProduceWith(ctx, "later", nil, client.ProduceOptions{Delay: time.Second, NotBefore: time.Now()}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("both a delay and a time: %v", err)
	}
	if _, err := c.ProduceWith(ctx, "later", nil, client.ProduceOptions{Delay: 31 * 24 * time.Hour}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("a delay of 31 days: %v", err)
	}
	if err := c.DeleteQueue(ctx, "later"); err != nil {
		t.Fatal(err)
	}
}
