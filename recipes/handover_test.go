package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
)

// A session handed over keeps every lease and hold it had, on the gateway
// that adopts it: the same ids, nodes and tokens; releases, campaigns, acks
// and keepalives go on there; a wait cut by the handover resumes in its
// place in line on retry; the lease records name the new keeper; the
// adopted session closes once its last lease ends, leaving nothing.
func TestHandOverKeepsLeasesAndHolds(t *testing.T) {
	t.Parallel()
	giver, taker := giverAndTaker(t, 5*time.Second)
	ctx := context.Background()
	holder, _ := giver.Leases.Create(ctx, time.Minute, "holder", "")
	waiter, _ := giver.Leases.Create(ctx, time.Minute, "waiter", "")
	held, waiting := holdOneOfEach(t, giver, holder, waiter)

	h, err := giver.HandOver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; !errors.Is(err, ErrMoving) {
		t.Fatalf("the wait under way at the handover: %v, want ErrMoving", err)
	}
	if text := h.String(); strings.Contains(text, string(h.Session.Password)) {
		t.Fatalf("a handover's text shows its session's password: %s", text)
	}
	if _, err := giver.Leases.Get(holder.ID); ErrorCode(err) != CodeLeaseNotFound {
		t.Fatalf("the giver after the handover: %v, want no such lease here", err)
	}
	if _, err := giver.Leases.Create(ctx, time.Minute, "late", ""); !errors.Is(err, ErrMoving) {
		t.Fatalf("a new lease on the giver: %v, want ErrMoving", err)
	}
	adoptOverTheWire(t, taker, h)

	kept, err := taker.Leases.KeepAlive(holder.ID)
	if err != nil {
		t.Fatalf("keepalive on the taker: %v", err)
	}
	info := kept.Info()
	if info.Gateway != "gw-taker" || len(info.Holds) != 4 {
		t.Fatalf("the lease on the taker: %+v", info)
	}
	rec, _, err := rawClient(t).Get(taker.root + "/leases/" + holder.ID)
	if err != nil || !strings.Contains(string(rec), `"gateway":"gw-taker"`) {
		t.Fatalf("the lease record after the handover: %s %v", rec, err)
	}
	held.sameOn(t, taker, kept)
	w := held.waitResumes(t, taker, kept, waiter.ID)
	if err := taker.Queues.Ack(ctx, kept, "q", held.claim.ID); err != nil {
		t.Fatalf("ack on the taker: %v", err)
	}
	for _, l := range []*Lease{kept, w} {
		if err := taker.Leases.Revoke(l.ID); err != nil {
			t.Fatal(err)
		}
	}
	conn := rawClient(t)
	zktest.Eventually(t, 10*time.Second, func() error {
		if n := len(taker.Services()); n != 1 {
			return fmt.Errorf("%d services: the adopted one is not closed", n)
		}
		if e := ephemeralsUnder(t, conn, taker.root); len(e) > 0 {
			return fmt.Errorf("ephemeral nodes left: %v", e)
		}
		return nil
	})
}

// heldOfEach is what holdOneOfEach holds: a lock, a semaphore slot, a
// leadership and a claim of the holder, and the waiter's node in the
// lock's line.
type heldOfEach struct {
	lock     LockGrant
	sem      SemaphoreGrant
	lead     Campaign
	claim    Taken
	waitNode string
}

// holdOneOfEach has holder take a lock x, a slot of semaphore s, the
// leadership of e and a claim of queue q, and waiter wait for x; waiting
// answers that wait.
func holdOneOfEach(t *testing.T, svc *testService, holder, waiter *Lease) (heldOfEach, <-chan error) {
	t.Helper()
	ctx := context.Background()
	var h heldOfEach
	var err error
	if h.lock, err = svc.Locks.Acquire(ctx, holder, "x", "", 0); err != nil {
		t.Fatal(err)
	}
	if h.sem, err = svc.Semaphores.Acquire(ctx, holder, "s", 2, 0); err != nil {
		t.Fatal(err)
	}
	if h.lead, err = svc.Elections.Campaign(ctx, holder, "e", "v1", 0); err != nil || !h.lead.Elected {
		t.Fatalf("campaign: %+v %v", h.lead, err)
	}
	produce(t, svc, "q", []byte("work"), 100)
	if h.claim, err = svc.Queues.Claim(ctx, holder, "q", 0); err != nil {
		t.Fatal(err)
	}
	var waiting <-chan error
	h.waitNode, waiting = waitForX(t, svc, waiter)
	return h, waiting
}

// waitForX has waiter wait for the lock x on svc, in the background, until
// it has its node in x's line, and returns that node and the wait's answer.
func waitForX(t *testing.T, svc *testService, waiter *Lease) (string, <-chan error) {
	t.Helper()
	waiting := make(chan error, 1)
	go func() {
		_, err := svc.Locks.Acquire(context.Background(), waiter, "x", "", 30*time.Second)
		waiting <- err
	}()
	var node string
	zktest.Eventually(t, 10*time.Second, func() error {
		for _, hold := range waiter.Info().Holds {
			if hold.Node != "" {
				node = hold.Node
				return nil
			}
		}
		return errors.New("the waiter has no node yet")
	})
	return node, waiting
}

// giverAndTaker are the services of two gateways on one root, each on a
// session of timeout: giver hands its sessions over, taker adopts them.
func giverAndTaker(t *testing.T, timeout time.Duration) (giver, taker *testService) {
	t.Helper()
	giver = newService(t, serviceOptions{timeout: timeout, gateway: "gw-giver"})
	taker = newService(t, serviceOptions{timeout: timeout, root: giver.root, gateway: "gw-taker"})
	return giver, taker
}

// adoptOverTheWire has taker adopt h as a peer receives it: as JSON.
func adoptOverTheWire(t *testing.T, taker *testService, h *Handover) {
	t.Helper()
	raw, _ := json.Marshal(h)
	var got Handover
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if err := adopt(t, taker, &got, 5*time.Second); err != nil {
		t.Fatalf("adopt: %v", err)
	}
}

// adopt has taker adopt h on a session with the shared ZooKeeper of
// timeout.
func adopt(t *testing.T, taker *testService, h *Handover, timeout time.Duration) error {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := SessionConfig{Servers: []string{zktest.Shared(t).Addr()}, Timeout: timeout, Root: taker.root, Logger: log}
	return taker.Adopt(context.Background(), cfg, h)
}

// adoptAged has taker adopt h as a peer does that has just received it,
// its leases' TTLs counted from their handover.
func adoptAged(t *testing.T, taker *testService, h *Handover) {
	t.Helper()
	got := h.Aged()
	got.Received = time.Now()
	if err := adopt(t, taker, got, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// sameOn checks that the lock, the slot and the leadership are kept's on
// taker, with the same nodes and tokens.
func (h heldOfEach) sameOn(t *testing.T, taker *testService, kept *Lease) {
	t.Helper()
	ctx := context.Background()
	again, err := taker.Locks.Acquire(ctx, kept, "x", "", 0)
	if err != nil || again.Token != h.lock.Token || again.Node != h.lock.Node {
		t.Fatalf("the lock on the taker: %+v %v, want the same grant %+v", again, err, h.lock)
	}
	if g, err := taker.Semaphores.Acquire(ctx, kept, "s", 2, 0); err != nil || g.Token != h.sem.Token {
		t.Fatalf("the semaphore slot on the taker: %+v %v", g, err)
	}
	if c, err := taker.Elections.Proclaim(ctx, kept, "e", "v2"); err != nil || !c.Elected || c.Token != h.lead.Token {
		t.Fatalf("proclaim on the taker: %+v %v", c, err)
	}
}

// waitResumes retries on taker the wait the handover cut, releases kept's
// lock, and checks that the wait is granted with its node from before the
// handover, its place in line; it returns the waiter's lease.
func (h heldOfEach) waitResumes(t *testing.T, taker *testService, kept *Lease, waiterID string) *Lease {
	t.Helper()
	ctx := context.Background()
	w, err := taker.Leases.Get(waiterID)
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan LockGrant, 1)
	go func() {
		g, err := taker.Locks.Acquire(ctx, w, "x", "", 30*time.Second)
		if err != nil {
			t.Errorf("the retried wait: %v", err)
		}
		granted <- g
	}()
	if err := taker.Locks.Release(ctx, kept, "x", ""); err != nil {
		t.Fatal(err)
	}
	g := <-granted
	if g.Node != h.waitNode || g.Token <= h.lock.Token {
		t.Fatalf("the retried wait was granted %+v; want its node %s from before the handover, and a later token than %d", g, h.waitNode, h.lock.Token)
	}
	return w
}

// A handover of a session that expires before it is adopted: ErrSessionGone.
func TestAdoptAnExpiredSession(t *testing.T) {
	t.Parallel()
	giver, taker := giverAndTaker(t, time.Second)
	ctx := context.Background()
	if _, err := giver.Leases.Create(ctx, time.Minute, "doomed", ""); err != nil {
		t.Fatal(err)
	}
	h, err := giver.HandOver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn := rawClient(t)
	zktest.Eventually(t, 20*time.Second, func() error {
		if ok, _, _ := conn.Exists(giver.root + "/leases/" + h.Leases[0].ID); ok {
			return errors.New("the record is still there")
		}
		return nil
	})
	if err := adopt(t, taker, h, time.Second); !errors.Is(err, ErrSessionGone) {
		t.Fatalf("adopt an expired session: %v, want ErrSessionGone", err)
	}
}

// The TTL left of every lease handed over is counted from one instant, the
// handover's: a lease written down after a wait for a hold's operation
// under way ends when it would have, not that wait earlier.
func TestHandOverKeepsEachLeasesTTL(t *testing.T) {
	t.Parallel()
	giver, taker := giverAndTaker(t, 5*time.Second)
	ctx := context.Background()
	var leases []*Lease
	ends := map[string]time.Time{}
	for i := range 2 {
		l, _ := giver.Leases.Create(ctx, time.Minute, fmt.Sprintf("l%d", i), "")
		if _, err := giver.Locks.Acquire(ctx, l, fmt.Sprintf("ttl-%d", i), "", 0); err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
		l.mu.Lock()
		ends[l.ID] = l.expiresAt
		l.mu.Unlock()
	}
	// Every hold busy for a while, as with a create under way: HandOver
	// waits for each before it writes its lease down.
	var holds []*hold
	for _, l := range leases {
		for _, h := range l.holds {
			h.core().mu.Lock()
			holds = append(holds, h.core())
		}
	}
	go func() {
		for _, h := range holds {
			time.Sleep(300 * time.Millisecond) // the operation under way
			h.mu.Unlock()
		}
	}()
	h, err := giver.HandOver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	adoptAged(t, taker, h)
	for _, l := range leases {
		kept, ok := taker.Leases.find(l.ID)
		if !ok {
			t.Fatalf("lease %s not kept", l.ID)
		}
		kept.mu.Lock()
		diff := kept.expiresAt.Sub(ends[l.ID])
		kept.mu.Unlock()
		if diff < -50*time.Millisecond || diff > 50*time.Millisecond {
			t.Errorf("lease %s ends %s away from its TTL's end across the handover", l.ID, diff.Round(time.Millisecond))
		}
	}
}

// A session given up (handed over, or closed) ends every wait for it to be
// live again: the record of a lease whose create went unanswered, ended in
// the background as the gateway stops, is not waited for forever, and the
// gateway's service closes.
func TestNoWaitOutlivesAHandedOverSession(t *testing.T) {
	t.Parallel()
	giver := newService(t, serviceOptions{timeout: 5 * time.Second, gateway: "gw-giver"})
	lease := newLease(t, giver, "holder")
	_, epoch, _ := giver.sess.Status()
	if _, err := giver.HandOver(context.Background()); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- giver.sess.waitEpoch(context.Background(), epoch) }()
	ended := make(chan error, 1)
	go func() { ended <- giver.Leases.endRecord(context.Background(), lease, EndRevoked) }()
	closed := make(chan struct{})
	go func() { giver.Close(); close(closed) }()
	for what, done := range map[string]<-chan struct{}{
		"waitEpoch": after(waited, func(err error) {
			if !errors.Is(err, errClosed) {
				t.Errorf("waitEpoch on the handed-over session: %v, want errClosed", err)
			}
		}),
		"endRecord": after(ended, func(error) {}),
		"Close":     closed,
	} {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s still waits on a session handed over 20s ago", what)
		}
	}
}

// after is closed once ch has delivered its value to check.
func after(ch <-chan error, check func(error)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		check(<-ch)
		close(done)
	}()
	return done
}

// A lease whose create is under way when the handover begins is handed
// over with the others once it is made: a lease the client is told of is
// never left behind in a session given up.
func TestALeaseMadeDuringAHandoverIsHandedOver(t *testing.T) {
	t.Parallel()
	giver := newService(t, serviceOptions{timeout: 5 * time.Second, gateway: "gw-giver"})
	ls := giver.Leases
	recorded, proceed := make(chan struct{}), make(chan struct{})
	ls.afterRecord = func() {
		close(recorded)
		<-proceed
	}
	type grant struct {
		l   *Lease
		err error
	}
	granted := make(chan grant, 1)
	go func() {
		l, err := ls.Create(context.Background(), time.Minute, "late", "")
		granted <- grant{l, err}
	}()
	<-recorded
	handed := make(chan *Handover, 1)
	go func() {
		h, err := giver.HandOver(context.Background())
		if err != nil {
			t.Errorf("hand over: %v", err)
		}
		handed <- h
	}()
	zktest.Eventually(t, 10*time.Second, func() error {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		if !ls.handingOver {
			return errors.New("the handover has not begun")
		}
		return nil
	})
	close(proceed)
	g, h := <-granted, <-handed
	if g.err != nil {
		t.Fatalf("the create under way: %v", g.err)
	}
	if h == nil || len(h.Leases) != 1 || h.Leases[0].ID != g.l.ID {
		t.Fatalf("the handover left lease %s behind: %v", g.l.ID, h)
	}
}

// A wait cut by a handover keeps its place in line for its client's retry
// (HandoverGrace), and only until that retry comes: a retry that is then
// given up (its client hung up) leaves the line at once, as any wait, not
// when the grace ends. (The fault suite saw a vanished client's waiter
// kept 10 s after it hung up, and handed over again with a new grace.)
func TestARetriedWaitGivenUpAfterAHandoverLeavesTheLine(t *testing.T) {
	t.Parallel()
	giver, taker := giverAndTaker(t, 5*time.Second)
	ctx := context.Background()
	holdLock(t, giver, "x")
	waiter := newLease(t, giver, "waiter")
	_, waiting := waitForX(t, giver, waiter)
	h, err := giver.HandOver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; !errors.Is(err, ErrMoving) {
		t.Fatalf("the wait under way at the handover: %v, want ErrMoving", err)
	}
	adoptAged(t, taker, h)
	w, err := taker.Leases.Get(waiter.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The retry, given up by its client after a moment.
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = taker.Locks.Acquire(rctx, w, "x", "", 30*time.Second)
	cancel()
	if err == nil {
		t.Fatal("the retry was granted a held lock")
	}
	alone := holderAlone(t, taker, "x")
	zktest.Eventually(t, 5*time.Second, func() error {
		if holds := w.Info().Holds; len(holds) != 0 {
			return fmt.Errorf("the waiter still has %+v", holds)
		}
		return alone()
	})
}
