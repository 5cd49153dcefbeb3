package recipes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
)

func delayed(d time.Duration) *time.Duration { return &d }

// holdDelayed has a new lease of holder, with a lock-delay of an hour,
// take the lock name in mode on svc, and returns the lease.
func holdDelayed(t *testing.T, svc *testService, holder, name, mode string) *Lease {
	t.Helper()
	ctx := context.Background()
	l, err := svc.Leases.Grant(ctx, LeaseSpec{TTL: time.Minute, Holder: holder, LockDelay: delayed(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Locks.Acquire(ctx, l, name, mode, 0); err != nil {
		t.Fatal(err)
	}
	return l
}

// delayConfig lets leases ask for a lock-delay.
var delayConfig = LeaseConfig{MaxLockDelay: time.Hour}

// marksUnder lists the lock-delay markers and their index entries below the
// root.
func marksUnder(t testing.TB, conn *zk.Conn, root string) []string {
	t.Helper()
	var out []string
	for _, n := range treeUnder(t, conn, root) {
		if strings.Contains(n, "/"+delayPrefix) || strings.HasPrefix(n, root+"/delays/") {
			out = append(out, n)
		}
	}
	return out
}

// The name of a marker holds the node it stands for, and no recipe's marker:
// Curator, kazoo and go-zookeeper's zk.Lock sort it after every contender.
func TestMarkNames(t *testing.T) {
	t.Parallel()
	lease := "0b5c6f7e-1a2b-4c3d-8e9f-001122334455"
	for _, tt := range []struct {
		node   string
		reader bool
	}{
		{"_c_" + lease + "-lock-0000000042", false},
		{"_c_" + lease + "-__READ__0000000042", true},
		{"_c_" + lease + "-__WRIT__0000000042", false},
		{"_c_" + lease + "-latch-0000000042", false},
		{"_c_" + lease + "-lease-0000000042", false},
	} {
		name, ok := markName(tt.node, 1500*time.Millisecond)
		if !ok {
			t.Fatalf("no marker name for %s", tt.node)
		}
		for _, m := range []string{"lock-", "__READ__", "__WRIT__", "latch-", "lease-", "__lock__", "__rlock__"} {
			if strings.Contains(name, m) {
				t.Fatalf("marker %s holds the recipe marker %q", name, m)
			}
		}
		if _, ok := parseContender(name, append(append(lockMarkers, latchMarkers...), leaseMarkers...)); ok {
			t.Fatalf("marker %s parses as a contender", name)
		}
		m, ok := parseMark(name)
		if !ok || m.holder != tt.node || m.seq != 42 || m.reader != tt.reader || m.lease != lease || m.delay != 1500*time.Millisecond {
			t.Fatalf("parseMark(%s) = %+v, %v", name, m, ok)
		}
	}
	if _, ok := markName("lock-0000000001", time.Second); ok {
		t.Fatal("a foreign node got a marker name")
	}
}

// acquireAsync starts an acquire of name by lease and returns when it
// answered, and what.
func acquireAsync(svc *testService, lease *Lease, name, mode string, wait time.Duration) <-chan grantAt {
	got := make(chan grantAt, 1)
	go func() {
		g, err := svc.Locks.Acquire(context.Background(), lease, name, mode, wait)
		got <- grantAt{g.Token, err, time.Now()}
	}()
	return got
}

type grantAt struct {
	token int64
	err   error
	at    time.Time
}

// A holder with a lock-delay whose lease expires without releasing: the
// next holder is granted no sooner than the delay after the lease's end,
// and the marker goes once it is granted; a try-once acquire meanwhile is
// a timeout that names the lock-delay.
func TestLockDelayHoldsBackTheNextGrant(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{leases: delayConfig})
	ctx := context.Background()
	const delay = 1500 * time.Millisecond
	start := time.Now()
	holder, err := svc.Leases.Grant(ctx, LeaseSpec{TTL: time.Second, Holder: "slow", LockDelay: delayed(delay)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Locks.Acquire(ctx, holder, "delayed", "", 0); err != nil {
		t.Fatal(err)
	}
	waiter, _ := svc.Leases.Create(ctx, time.Minute, "next", "")
	got := acquireAsync(svc, waiter, "delayed", "", 30*time.Second)
	<-holder.Done() // expired: no keepalive
	other, _ := svc.Leases.Create(ctx, time.Minute, "impatient", "")
	if _, err := svc.Locks.Acquire(ctx, other, "delayed", "", 0); ErrorCode(err) != CodeTimeout {
		t.Fatalf("a try-once acquire during the lock-delay: %v, want a timeout", err)
	}
	g := <-got
	if g.err != nil {
		t.Fatalf("the waiter: %v", g.err)
	}
	if earliest := start.Add(time.Second + delay); g.at.Before(earliest) {
		t.Fatalf("granted %s before the holder's TTL and lock-delay could both have run out", earliest.Sub(g.at))
	}
	raw := rawClient(t)
	zktest.Eventually(t, 10*time.Second, func() error {
		if m := marksUnder(t, raw, svc.root); len(m) > 0 {
			return fmt.Errorf("markers left: %v", m)
		}
		return nil
	})
}

// A release, or a revoke by the lease's own client, ends the hold at once:
// no lock-delay, no marker left. (A delay of an hour would time the test
// out.)
func TestLockDelayNotAfterARelease(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{leases: delayConfig})
	ctx := context.Background()
	raw := rawClient(t)
	for _, how := range []string{"release", "revoke"} {
		holder := holdDelayed(t, svc, "tidy", "tidy", "")
		if m := marksUnder(t, raw, svc.root); len(m) != 2 {
			t.Fatalf("a holder with a lock-delay left %v, want a marker and its index entry", m)
		}
		waiter, _ := svc.Leases.Create(ctx, time.Minute, "next", "")
		got := acquireAsync(svc, waiter, "tidy", "", 30*time.Second)
		var err error
		if how == "release" {
			err = svc.Locks.Release(ctx, holder, "tidy", "")
		} else {
			err = svc.Leases.Revoke(holder.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
		if g := <-got; g.err != nil {
			t.Fatalf("after a %s: %v", how, g.err)
		}
		if m := marksUnder(t, raw, svc.root); len(m) > 0 {
			t.Fatalf("after a %s: markers left %v", how, m)
		}
		if err := svc.Leases.Revoke(waiter.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// An admin's revoke is not a release by the lease's client: the lock-delay
// applies.
func TestLockDelayAfterAnAdminRevoke(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{leases: delayConfig})
	ctx := context.Background()
	holder := holdDelayed(t, svc, "revoked", "admin", "")
	if err := svc.Leases.Terminate(holder.ID); err != nil {
		t.Fatal(err)
	}
	other, _ := svc.Leases.Create(ctx, time.Minute, "other", "")
	_, err := svc.Locks.Acquire(ctx, other, "admin", "", 0)
	if ErrorCode(err) != CodeTimeout || !strings.Contains(err.Error(), "lock-delay") {
		t.Fatalf("acquire after an admin revoked the holder: %v, want a timeout naming the lock-delay", err)
	}
}

// A gateway that goes away (here: closed, as at the end of a drain) takes
// its holders' nodes with its session; another gateway grants none of
// their locks, leaderships or semaphore slots before their lock-delay.
func TestLockDelayAfterItsGatewayWent(t *testing.T) {
	t.Parallel()
	gone := newService(t, serviceOptions{leases: delayConfig})
	other := newService(t, serviceOptions{root: gone.root, leases: delayConfig})
	ctx := context.Background()
	const delay = 2 * time.Second
	holder, err := gone.Leases.Grant(ctx, LeaseSpec{TTL: time.Minute, Holder: "leaving", LockDelay: delayed(delay)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Locks.Acquire(ctx, holder, "lock", ModeWrite, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Semaphores.Acquire(ctx, holder, "sem", 2, 0); err != nil {
		t.Fatal(err)
	}
	if c, err := gone.Elections.Campaign(ctx, holder, "election", "v", 0); err != nil || !c.Elected {
		t.Fatalf("campaign: %+v %v", c, err)
	}
	// A second slot holder without a lock-delay: one slot of two stays free.
	free, _ := other.Leases.Create(ctx, time.Minute, "free", "")
	if _, err := other.Semaphores.Acquire(ctx, free, "sem", 2, 0); err != nil {
		t.Fatal(err)
	}
	reader, _ := other.Leases.Create(ctx, time.Minute, "reader", "")
	writer, _ := other.Leases.Create(ctx, time.Minute, "writer", "")
	slot, _ := other.Leases.Create(ctx, time.Minute, "slot", "")
	candidate, _ := other.Leases.Create(ctx, time.Minute, "candidate", "")
	writes := acquireAsync(other, writer, "lock", ModeWrite, 30*time.Second)
	slots := make(chan grantAt, 1)
	go func() {
		g, err := other.Semaphores.Acquire(ctx, slot, "sem", 2, 30*time.Second)
		slots <- grantAt{g.Token, err, time.Now()}
	}()
	leads := make(chan grantAt, 1)
	go func() {
		c, err := other.Elections.Campaign(ctx, candidate, "election", "w", 30*time.Second)
		if err == nil && !c.Elected {
			err = errors.New("not elected")
		}
		leads <- grantAt{c.Token, err, time.Now()}
	}()
	zktest.Eventually(t, 10*time.Second, func() error {
		st, err := other.Locks.State(ctx, "lock", 0, 0)
		if err != nil || len(st.Waiters) != 1 {
			return fmt.Errorf("lock waiters %v %v", st.Waiters, err)
		}
		return nil
	})
	closed := time.Now()
	gone.Close()
	gone.sess.Close()
	for what, ch := range map[string]<-chan grantAt{"write lock": writes, "semaphore slot": slots, "leadership": leads} {
		g := <-ch
		if g.err != nil {
			t.Fatalf("%s: %v", what, g.err)
		}
		if held := g.at.Sub(closed); held < delay {
			t.Fatalf("%s granted %s after its holder's gateway went; its lock-delay is %s", what, held, delay)
		}
	}
	// A read lock of a reader that went would not have held a reader back;
	// here the holder was a writer, and it held the reader back too.
	if _, err := other.Locks.Acquire(ctx, reader, "lock", ModeRead, 0); ErrorCode(err) != CodeTimeout {
		t.Fatalf("a reader while another lease writes: %v", err)
	}
}

// A reader's marker holds writers back, not readers.
func TestLockDelayOfAReader(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{leases: delayConfig})
	ctx := context.Background()
	holder := holdDelayed(t, svc, "reader", "rw", ModeRead)
	if err := svc.Leases.Terminate(holder.ID); err != nil {
		t.Fatal(err)
	}
	reader, _ := svc.Leases.Create(ctx, time.Minute, "another reader", "")
	if _, err := svc.Locks.Acquire(ctx, reader, "rw", ModeRead, 0); err != nil {
		t.Fatalf("a reader behind an ended reader's lock-delay: %v", err)
	}
	if err := svc.Leases.Revoke(reader.ID); err != nil {
		t.Fatal(err)
	}
	writer, _ := svc.Leases.Create(ctx, time.Minute, "writer", "")
	if _, err := svc.Locks.Acquire(ctx, writer, "rw", ModeWrite, 0); ErrorCode(err) != CodeTimeout {
		t.Fatalf("a writer behind an ended reader's lock-delay: %v, want a timeout", err)
	}
}

// go-zookeeper's zk.Lock reads every child's sequence: a marker must not
// break it, and it is not bound by the lock-delay.
func TestLockDelayMarkerAndZkLock(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{leases: delayConfig})
	holder := holdDelayed(t, svc, "zkgate", "shared", "")
	raw := rawClient(t)
	l := zk.NewLock(raw, svc.root+"/locks/shared", zk.WorldACL(zk.PermAll))
	locked := make(chan error, 1)
	go func() { locked <- l.Lock() }()
	zktest.Eventually(t, 10*time.Second, func() error {
		kids, _, err := raw.Children(svc.root + "/locks/shared")
		if err != nil || len(kids) != 3 {
			return fmt.Errorf("children %v %v", kids, err)
		}
		return nil
	})
	select {
	case err := <-locked:
		t.Fatalf("zk.Lock returned while zkgate holds the lock: %v", err)
	default:
	}
	if err := svc.Leases.Terminate(holder.ID); err != nil { // the marker stays, for an hour
		t.Fatal(err)
	}
	select {
	case err := <-locked:
		if err != nil {
			t.Fatalf("zk.Lock beside a marker: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("zk.Lock did not get the lock")
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// A marker of a line nobody waits on is deleted by a sweep once its delay
// has run out.
func TestLockDelaySweep(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{leases: delayConfig})
	ctx := context.Background()
	holder, _ := svc.Leases.Grant(ctx, LeaseSpec{TTL: time.Minute, Holder: "lonely", LockDelay: delayed(300 * time.Millisecond)})
	if _, err := svc.Locks.Acquire(ctx, holder, "lonely", "", 0); err != nil {
		t.Fatal(err)
	}
	if err := svc.Leases.Terminate(holder.ID); err != nil {
		t.Fatal(err)
	}
	raw := rawClient(t)
	if m := marksUnder(t, raw, svc.root); len(m) != 2 {
		t.Fatalf("after an admin's revoke: %v, want the marker and its index entry", m)
	}
	zktest.Eventually(t, 10*time.Second, func() error {
		if err := svc.SweepDelays(ctx); err != nil {
			return err
		}
		if m := marksUnder(t, raw, svc.root); len(m) > 0 {
			return fmt.Errorf("markers left: %v", m)
		}
		return nil
	})
}
