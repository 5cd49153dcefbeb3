package recipes

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zkproxy"
	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
)

// proxiedService is a service whose connection to the shared ZooKeeper
// goes through a proxy, which sees every request it sends.
func proxiedService(t testing.TB) (*zkproxy.Proxy, *testService) {
	t.Helper()
	px := zkproxy.New(t, zktest.Shared(t).Addr())
	return px, newService(t, serviceOptions{servers: []string{px.Addr()}})
}

// An uncontended acquire sends what zk.Lock sends: the create, which brings
// the node's stat with it (create2), and one listing; no read of the stat of
// its own. The listing goes right behind the create, before its reply: one
// round trip. A release is one delete.
func TestAnUncontendedAcquireIsTwoRequests(t *testing.T) {
	t.Parallel()
	px, svc := proxiedService(t)
	ctx := context.Background()
	lease := newLease(t, svc, "solo")
	parent := svc.Locks.parent("solo")
	for i := range 3 {
		before := len(px.Sent(parent))
		g, err := svc.Locks.Acquire(ctx, lease, "solo", ModeExclusive, 0)
		if err != nil {
			t.Fatal(err)
		}
		sent := px.Requests(parent)[before:]
		got := px.Sent(parent)[before:]
		if i == 0 && len(got) > 0 && got[0] == opCreate {
			t.Fatalf("the acquire made its node with a plain create: %v", got)
		}
		// The first acquire also makes the parent: a create2 and its
		// listing that fail, the container's create, and the pair again.
		// So may a later one: the test server reaps an empty container
		// every 100 ms, and the release left this one empty.
		want := []int32{opCreate2, opGetChildren2}
		if slices.Contains(got, opCreateContainer) {
			got = slices.DeleteFunc(got, func(op int32) bool { return op == opCreateContainer })
			if slices.Equal(got, append(slices.Clone(want), want...)) {
				got, sent = got[2:], sent[len(sent)-2:]
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("acquire %d sent %v, want %v (create2, getChildren2)", i, got, want)
		}
		if sent[1].Answered != sent[0].Answered {
			t.Fatalf("acquire %d sent its listing after the create's reply", i)
		}
		if _, st, err := rawClient(t).Exists(g.Node); err != nil || st.Czxid != g.Token {
			t.Fatalf("the token %d is not the node's czxid (%v, %v)", g.Token, st, err)
		}
		before = len(px.Sent(parent))
		if err := svc.Locks.Release(ctx, lease, "solo", ""); err != nil {
			t.Fatal(err)
		}
		if got := px.Sent(parent)[before:]; !slices.Equal(got, []int32{opDelete}) {
			t.Fatalf("release %d sent %v, want one delete", i, got)
		}
	}
}

// Only a call alone in its line lists it behind its create: a crowd of new
// waiters would each list the whole line, where the coalesced listing
// serves them together. A call that finds another of this gateway waiting
// in the line sends its listing after its create is answered, through the
// lister; once every call is over, the count of calls in the line is gone.
func TestOnlyACallAloneInItsLineListsBehindItsCreate(t *testing.T) {
	t.Parallel()
	px, svc := proxiedService(t)
	ctx := context.Background()
	holder := newLease(t, svc, "holder")
	parent := svc.Locks.parent("crowd")
	if _, err := svc.Locks.Acquire(ctx, holder, "crowd", ModeExclusive, 0); err != nil {
		t.Fatal(err)
	}
	// The holder's call is over: the first waiter is alone in the line.
	before := len(px.Requests(parent))
	first := waitBehind(t, svc, px, "crowd")
	if sent := px.Requests(parent)[before:]; len(sent) < 2 || sent[0].Op != opCreate2 || sent[1].Op != opGetChildren2 ||
		sent[1].Answered != sent[0].Answered {
		t.Fatalf("the first waiter, alone in the line, sent %+v; want its listing before the create's reply", sent)
	}
	before = len(px.Requests(parent))
	second := waitBehind(t, svc, px, "crowd")
	if sent := px.Requests(parent)[before:]; len(sent) < 2 || sent[0].Op != opCreate2 || sent[1].Op != opGetChildren2 ||
		sent[1].Answered == sent[0].Answered {
		t.Fatalf("the second waiter, with company, sent %+v; want its listing after the create's reply", sent)
	}
	if err := svc.Locks.Release(ctx, holder, "crowd", ""); err != nil {
		t.Fatal(err)
	}
	g := first()
	firstLease, err := svc.Leases.Get(g.Lease)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Locks.Release(ctx, firstLease, "crowd", ""); err != nil {
		t.Fatal(err)
	}
	second()
	svc.lister.mu.Lock()
	lines := len(svc.lister.lines)
	svc.lister.mu.Unlock()
	if lines != 0 {
		t.Fatalf("%d lines still count calls after every call is over", lines)
	}
}

// A waiter granted when the holder goes needs at most one request after
// that delete: a listing that shows its node first when the holder was
// another client's; none when the holder released through this gateway,
// whose delete went in one transaction with a check of the waiter's node.
func TestAWaitedGrantIsOneRequestAfterTheRelease(t *testing.T) {
	t.Parallel()
	for _, through := range []string{"this gateway", "another client"} {
		t.Run(through, func(t *testing.T) {
			px, svc := proxiedService(t)
			ctx := context.Background()
			parent := svc.Locks.parent("line")
			var release func()
			if through == "this gateway" {
				holder := newLease(t, svc, "holder")
				if _, err := svc.Locks.Acquire(ctx, holder, "line", ModeExclusive, 0); err != nil {
					t.Fatal(err)
				}
				release = func() {
					if err := svc.Locks.Release(ctx, holder, "line", ""); err != nil {
						t.Error(err)
					}
				}
			} else {
				l := zk.NewLock(rawClient(t), parent, zk.WorldACL(zk.PermAll))
				if err := l.Lock(); err != nil {
					t.Fatal(err)
				}
				release = func() {
					if err := l.Unlock(); err != nil {
						t.Error(err)
					}
				}
			}
			grant := waitBehind(t, svc, px, "line")
			mark := len(px.Sent(parent))
			release()
			g := grant()
			got := px.Sent(parent)[mark:]
			if through == "this gateway" {
				if !slices.Equal(got, []int32{opMulti}) {
					t.Fatalf("after the release the gateway sent %v, want one multi (the delete and the check of the waiter's node)", got)
				}
			} else if !slices.Equal(got, []int32{opGetChildren2}) {
				t.Fatalf("after the release the gateway sent %v, want one listing", got)
			}
			if _, st, err := rawClient(t).Exists(g.Node); err != nil || st.Czxid != g.Token {
				t.Fatalf("the token %d is not the node's czxid (%v, %v)", g.Token, st, err)
			}
		})
	}
}

// A take of a queue where nothing is claimed sends what the recipe needs
// direct: the listing of the entries, the claim, the item's read and the
// transaction that removes both; the taken directory is read only once a
// claim finds its item claimed already.
func TestATakeReadsTheClaimsOnlyWhenItMeetsOne(t *testing.T) {
	t.Parallel()
	px, svc := proxiedService(t)
	ctx := context.Background()
	base := svc.Queues.base("q")
	for i := range 3 {
		produce(t, svc, "q", []byte{byte('a' + i)}, 0)
	}
	mark := len(px.Sent(base))
	it, err := svc.Queues.Take(ctx, "q", 0)
	if err != nil || string(it.Data) != "a" {
		t.Fatalf("take: %q, %v", it.Data, err)
	}
	if got := px.Sent(base)[mark:]; !slices.Equal(got, []int32{opGetChildren2, opCreate, opGetData, opMulti}) {
		t.Fatalf("a take with no claims sent %v, want getChildren2, create, getData, multi", got)
	}
	// Another consumer claims the head ("b"): the next take meets that
	// claim, reads the claims once, and takes "c".
	lease := newLease(t, svc, "consumer")
	if c, err := svc.Queues.Claim(ctx, lease, "q", 0); err != nil || string(c.Data) != "b" {
		t.Fatalf("claim: %q, %v", c.Data, err)
	}
	mark = len(px.Sent(base))
	it, err = svc.Queues.Take(ctx, "q", 0)
	if err != nil || string(it.Data) != "c" {
		t.Fatalf("take past a claim: %q, %v", it.Data, err)
	}
	// The create that meets the claim needs no read of it (a take's claimant
	// is new: the claim is someone else's); the claims are listed once.
	want := []int32{opGetChildren2, opCreate, opGetChildren2, opCreate, opGetData, opMulti}
	if got := px.Sent(base)[mark:]; !slices.Equal(got, want) {
		t.Fatalf("a take past a claim sent %v, want %v", got, want)
	}
}

// waitingTakeUnheard makes the queue name (empty) on svc, starts a take of
// it with a long wait, and returns once the take is waiting (the watch
// cache has listed the taken directory: nothing else lists it here) and the
// proxy holds every watch event back, until the test ends. took waits for
// the take's answer, which must be want, and checks that an event was held
// meanwhile (else the test would prove nothing).
func waitingTakeUnheard(t *testing.T, svc *testService, px *zkproxy.Proxy, name string) (took func(want string)) {
	t.Helper()
	ctx := context.Background()
	if _, err := svc.Queues.Produce(ctx, name, []byte("first"), 0); err != nil {
		t.Fatal(err) // makes the queue
	}
	if _, err := svc.Queues.Take(ctx, name, 0); err != nil {
		t.Fatal(err)
	}
	mark := len(px.Requests(svc.Queues.taken(name)))
	taken := make(chan Taken, 1)
	failed := make(chan error, 1)
	go func() {
		it, err := svc.Queues.Take(ctx, name, 30*time.Second)
		if err != nil {
			failed <- err
			return
		}
		taken <- it
	}()
	zktest.Eventually(t, 10*time.Second, func() error {
		for _, r := range px.Requests(svc.Queues.taken(name))[mark:] {
			if r.Op == opGetChildren2 {
				return nil
			}
		}
		return fmt.Errorf("the taken directory is not watched yet")
	})
	px.HoldEvents()
	t.Cleanup(px.ReleaseEvents)
	return func(want string) {
		t.Helper()
		select {
		case it := <-taken:
			if string(it.Data) != want {
				t.Fatalf("took %q, want %q", it.Data, want)
			}
		case err := <-failed:
			t.Fatal(err)
		case <-time.After(20 * time.Second):
			t.Fatalf("the waiting take was not woken by the produce through its gateway (%d bytes of watch events held)", px.HeldEvents())
		}
		if px.HeldEvents() == 0 {
			t.Fatal("no watch event was held: the test proves nothing")
		}
	}
}

// A waiting take gets an item produced through its own gateway without
// waiting for ZooKeeper's watch event and a new listing of the entries: the
// produce folds its item into the cached listing it was made on top of.
// Here the proxy holds every watch event back: the take still gets the item,
// and nothing lists the entries between the produce and the take's removal
// of the item.
func TestAWaitingTakeGetsAnItemProducedHereBeforeTheWatchFires(t *testing.T) {
	t.Parallel()
	px, svc := proxiedService(t)
	entries := svc.Queues.entries("w")
	took := waitingTakeUnheard(t, svc, px, "w")
	mark := len(px.Requests(entries))
	if _, err := svc.Queues.Produce(context.Background(), "w", []byte("second"), 0); err != nil {
		t.Fatal(err)
	}
	took("second")
	// Up to the multi that removes the item: the produce's create with the
	// listing right behind it (sent before the create's reply), the claim's
	// read of the item; no other listing.
	sent := px.Requests(entries)[mark:]
	if len(sent) < 2 || sent[0].Op != opCreate2 || sent[1].Op != opGetChildren2 || sent[1].Path != entries ||
		sent[1].Answered != sent[0].Answered {
		t.Fatalf("the produce sent %+v; want a create2 with the listing of the entries behind it", sent)
	}
	for _, r := range sent[2:] {
		if r.Op == opMulti {
			break
		}
		if r.Op == opGetChildren2 && r.Path == entries {
			t.Fatalf("the entries were listed again between the produce and the take: %+v", sent)
		}
	}
}

// The listing a produce gives the cache is a listing of ZooKeeper, never
// the cached one with the new item added: an item another client added
// before, which the cache has not heard of yet (the watch events are held
// here), is in it, and the waiting take, woken by the produce, takes that
// item first, in the queue's order.
func TestAProduceGivesTheCacheARealListing(t *testing.T) {
	t.Parallel()
	px, svc := proxiedService(t)
	ctx := context.Background()
	took := waitingTakeUnheard(t, svc, px, "u")
	if _, err := rawClient(t).Create(svc.Queues.entries("u")+"/entry-000-", []byte("other"), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	produce(t, svc, "u", []byte("mine"), 0)
	took("other") // the other client's item, produced first
	if it, err := svc.Queues.Take(ctx, "u", 0); err != nil || string(it.Data) != "mine" {
		t.Fatalf("the next take: %q, %v", it.Data, err)
	}
}

// A hand-over whose check finds the waiter's node gone (deleted by hand while
// it waited) vouches for nothing: the holder's node is deleted all the same,
// and the waiter, finding its node gone, makes a new one and is granted with
// that node's token, never the old one's.
func TestAHandOverDoesNotVouchForAGoneNode(t *testing.T) {
	t.Parallel()
	px, svc := proxiedService(t)
	ctx := context.Background()
	parent := svc.Locks.parent("gone")
	holder := newLease(t, svc, "holder")
	held, err := svc.Locks.Acquire(ctx, holder, "gone", ModeExclusive, 0)
	if err != nil {
		t.Fatal(err)
	}
	grant := waitBehind(t, svc, px, "gone")
	raw := rawClient(t)
	children, _, err := raw.Children(parent)
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for _, c := range children {
		if parent+"/"+c != held.Node {
			first = parent + "/" + c
		}
	}
	if first == "" {
		t.Fatalf("no waiter's node among %v", children)
	}
	if err := raw.Delete(first, -1); err != nil {
		t.Fatal(err)
	}
	mark := len(px.Sent(parent))
	if err := svc.Locks.Release(ctx, holder, "gone", ""); err != nil {
		t.Fatal(err)
	}
	g := grant()
	if got := px.Sent(parent)[mark:]; len(got) < 3 || got[0] != opMulti || got[1] != opDelete || got[2] != opExists {
		t.Fatalf("after the release the gateway sent %v, want the failed multi, the delete, the waiter's read of its node, then a new node", got)
	}
	if g.Node == first {
		t.Fatalf("granted on the deleted node %s", first)
	}
	if _, st, err := raw.Exists(g.Node); err != nil || st == nil || st.Czxid != g.Token {
		t.Fatalf("the grant's node %s and token %d do not match ZooKeeper (%v, %v)", g.Node, g.Token, st, err)
	}
	if ok, _, _ := raw.Exists(held.Node); ok {
		t.Fatal("the holder's node is still there")
	}
}

// Takes of one gateway woken by the same produce race for the item; the
// losers cost a failed create each at most: no read of the winner's claim
// (a take's claimant is new: the claim is someone else's) and no listing of
// the claims beyond the watch cache's own.
func TestWokenTakesThatLoseCostOneCreateAtMost(t *testing.T) {
	t.Parallel()
	px, svc := proxiedService(t)
	ctx := context.Background()
	taken := svc.Queues.taken("herd")
	produce(t, svc, "herd", []byte("seed"), 0)
	if _, err := svc.Queues.Take(ctx, "herd", 0); err != nil {
		t.Fatal(err)
	}
	const takers = 4
	got := make(chan string, takers)
	for range takers {
		go func() {
			it, err := svc.Queues.Take(ctx, "herd", 30*time.Second)
			if err != nil {
				t.Error(err)
				got <- ""
				return
			}
			got <- string(it.Data)
		}()
	}
	zktest.Eventually(t, 10*time.Second, func() error {
		for _, r := range px.Requests(taken) {
			if r.Op == opGetChildren2 {
				return nil
			}
		}
		return fmt.Errorf("the takers are not waiting yet")
	})
	mark := len(px.Requests(taken))
	for i := range takers {
		produce(t, svc, "herd", []byte{byte('a' + i)}, 0)
	}
	seen := map[string]bool{}
	for range takers {
		select {
		case d := <-got:
			if d == "" || seen[d] {
				t.Fatalf("item %q taken twice or not at all", d)
			}
			seen[d] = true
		case <-time.After(30 * time.Second):
			t.Fatal("the takers were not all served")
		}
	}
	var listings, reads, creates int
	for _, r := range px.Requests(taken)[mark:] {
		switch {
		case r.Op == opGetChildren2 && r.Path == taken:
			listings++
		case r.Op == opGetData:
			reads++
		case r.Op == opCreate:
			creates++
		}
	}
	if reads != 0 {
		t.Errorf("the takers read %d claim nodes, want none", reads)
	}
	// Each item's claim is made and removed: at most two changes of the
	// claims per item for the cache to list again.
	if listings > 2*takers {
		t.Errorf("the claims were listed %d times for %d items, want at most %d (the cache's)", listings, takers, 2*takers)
	}
	t.Logf("%d claim creates, %d listings of the claims for %d items", creates, listings, takers)
}

// waitBehind has a new lease wait for lock name through svc, and returns
// once its wait is armed (its getData with a watch on the node before it
// went through px); grant waits for the grant.
func waitBehind(t *testing.T, svc *testService, px *zkproxy.Proxy, name string) (grant func() LockGrant) {
	t.Helper()
	ctx := context.Background()
	waiter := newLease(t, svc, "waiter")
	parent := svc.Locks.parent(name)
	before := len(px.Sent(parent))
	granted := make(chan LockGrant, 1)
	failed := make(chan error, 1)
	go func() {
		g, err := svc.Locks.Acquire(ctx, waiter, name, ModeExclusive, 30*time.Second)
		if err != nil {
			failed <- err
			return
		}
		granted <- g
	}()
	zktest.Eventually(t, 10*time.Second, func() error {
		if sent := px.Sent(parent)[before:]; len(sent) == 0 || sent[len(sent)-1] != opGetData {
			return fmt.Errorf("the waiter has not armed its watch yet: %v", sent)
		}
		return nil
	})
	return func() LockGrant {
		t.Helper()
		select {
		case g := <-granted:
			return g
		case err := <-failed:
			t.Fatal(err)
		case <-time.After(30 * time.Second):
			t.Fatal("the waiter was not granted")
		}
		return LockGrant{}
	}
}

// A read of a queue's state costs ZooKeeper a bounded number of requests,
// however long the queue and however many head items are asked for: the
// head is at most MaxQueueHead items, each read once for its size and time
// (and its claim once for its claimant), behind one sync and the two
// listings.
func TestAQueueReadCostsABoundedNumberOfRequests(t *testing.T) {
	t.Parallel()
	px, svc := proxiedService(t)
	ctx := context.Background()
	const items = 250
	errs := make(chan error, items)
	for range items {
		go func() {
			_, err := svc.Queues.Produce(ctx, "long", []byte("x"), 0)
			errs <- err
		}()
	}
	for range items {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	lease := newLease(t, svc, "consumer")
	if _, err := svc.Queues.Claim(ctx, lease, "long", 0); err != nil {
		t.Fatal(err)
	}
	mark := len(px.Requests(svc.root))
	st, err := svc.Queues.State(ctx, "long", 1000, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Length != items || st.Claimed != 1 {
		t.Fatalf("the state says %d items, %d claimed; want %d and 1", st.Length, st.Claimed, items)
	}
	// A sync, the two listings, a stat per head item and the one claim;
	// the session's heartbeat (a stat of the root) may come in between.
	const maxHead = 100
	sent := withoutHeartbeats(svc.root, px.Requests(svc.root)[mark:])
	if len(sent) > 3+maxHead+1 {
		t.Fatalf("a read of the state sent %d requests to ZooKeeper, want at most %d: %v", len(sent), 3+maxHead+1, sent)
	}
	if len(st.Head) != maxHead {
		t.Fatalf("the head has %d items, want the most a read gives, %d", len(st.Head), maxHead)
	}
	if st.Head[0].ClaimedBy == nil || *st.Head[0].ClaimedBy != "consumer" || st.Head[0].Size != 1 || st.Head[0].CreatedAt.IsZero() {
		t.Fatalf("the first head item is not described: %+v", st.Head[0])
	}
}

// withoutHeartbeats leaves out of rs the session's heartbeats: a stat of
// the root a third of a session timeout (a second in these tests) after
// ZooKeeper last answered, which falls within whatever a test measures.
func withoutHeartbeats(root string, rs []zkproxy.Request) []zkproxy.Request {
	var out []zkproxy.Request
	for _, r := range rs {
		if r.Op != opExists || r.Path != root {
			out = append(out, r)
		}
	}
	return out
}
