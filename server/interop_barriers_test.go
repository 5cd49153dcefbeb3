package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// barrierRaised is whether zkgate reads the barrier name as raised.
func barrierRaised(t *testing.T, g *gwtest.Gateway, name string) bool {
	t.Helper()
	r := gwtest.Do(t, "GET", g.URL+"/v1/barriers/"+name, nil)
	if r.Status != 200 {
		t.Fatalf("GET barrier %s: %d %s", name, r.Status, r.Body)
	}
	return specJSON(t, r)["raised"].(bool)
}

// waitBarrier starts zkgate's wait on the barrier name (up to 30 s) and
// returns the channel of its answer.
func waitBarrier(g *gwtest.Gateway, name string) <-chan gwtest.Response {
	done := make(chan gwtest.Response, 1)
	go func() {
		r, _ := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/barriers/"+name+"/wait?wait=30s", nil)
		done <- r
	}()
	return done
}

// TestInteropBarriers: kazoo's Barrier and Curator's DistributedBarrier
// share zkgate's barriers (the node itself, up while it exists) every way:
// each one's waiters are let through when another lowers it, and each reads
// a barrier another raised as up.
func TestInteropBarriers(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	g, _, cur := interopStart(t, startCuratorPeer)
	kz := startKazooPeer(t, gwtest.ZK(t).Addr())
	path := func(name string) string { return kinds.Barriers.Path(g.Root, name) }
	for _, name := range []string{"byzkgate", "bykazoo", "bycurator"} {
		kz.send("barrier %s %s", name, path(name))
		kz.expect("BARRIER "+name, interopWait)
	}

	// zkgate raises: kazoo and Curator wait, and are let through when
	// zkgate lowers it.
	gwtest.MustStatus(t, gwtest.Do(t, "PUT", g.URL+"/v1/barriers/byzkgate", nil), 201, "raise")
	kz.send("bwait byzkgate 30")
	cur.send("barrier-wait c1 %s 30", path("byzkgate"))
	kz.send("bset bykazoo") // a round trip of each peer after its wait began
	kz.expect("BSET bykazoo", interopWait)
	cur.send("barrier-set c2 %s", path("bycurator"))
	cur.expect("BARRIER c2 set", interopWait)
	if kz.said("BWAITED byzkgate") || cur.said("BWAITED c1") {
		t.Fatalf("a peer's wait ended while zkgate's barrier was up: kazoo %q, Curator %q", kz.seen, cur.seen)
	}
	gwtest.MustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/barriers/byzkgate", nil), 204, "lower")
	if l := kz.expect("BWAITED byzkgate", interopWait); l != "BWAITED byzkgate True" {
		t.Fatalf("kazoo's wait: %q, want True", l)
	}
	if l := cur.expect("BWAITED c1", interopWait); l != "BWAITED c1 true" {
		t.Fatalf("Curator's wait: %q, want true", l)
	}

	// kazoo and Curator raise: zkgate reads each as up, waits on each, and
	// is let through when its raiser lowers it; the other peer waits too.
	for _, name := range []string{"bykazoo", "bycurator"} {
		if !barrierRaised(t, g, name) {
			t.Fatalf("zkgate reads the barrier %s as down", name)
		}
	}
	gwtest.MustStatus(t, gwtest.Do(t, "PUT", g.URL+"/v1/barriers/bykazoo", nil), 200, "raise again")
	byKazoo, byCurator := waitBarrier(g, "bykazoo"), waitBarrier(g, "bycurator")
	cur.send("barrier-wait c3 %s 30", path("bykazoo"))
	kz.send("bwait bycurator 30")
	kz.send("barrier probe %s", path("probe")) // a round trip of each peer meanwhile
	kz.expect("BARRIER probe", interopWait)
	select {
	case r := <-byKazoo:
		t.Fatalf("zkgate's wait on kazoo's barrier answered while it was up: %d %s", r.Status, r.Body)
	case r := <-byCurator:
		t.Fatalf("zkgate's wait on Curator's barrier answered while it was up: %d %s", r.Status, r.Body)
	default:
	}
	kz.send("bremove bykazoo")
	if l := kz.expect("BREMOVED bykazoo", interopWait); l != "BREMOVED bykazoo True" {
		t.Fatalf("kazoo's remove: %q, want True (it was up)", l)
	}
	if r := <-byKazoo; r.Status != 200 || specJSON(t, r)["raised"] != false {
		t.Fatalf("zkgate's wait on kazoo's barrier: %d %s, want 200 and down", r.Status, r.Body)
	}
	if l := cur.expect("BWAITED c3", interopWait); l != "BWAITED c3 true" {
		t.Fatalf("Curator's wait on kazoo's barrier: %q, want true", l)
	}
	cur.send("barrier-remove c4 %s", path("bycurator"))
	cur.expect("BARRIER c4 removed", interopWait)
	if r := <-byCurator; r.Status != 200 || specJSON(t, r)["raised"] != false {
		t.Fatalf("zkgate's wait on Curator's barrier: %d %s, want 200 and down", r.Status, r.Body)
	}
	if l := kz.expect("BWAITED bycurator", interopWait); l != "BWAITED bycurator True" {
		t.Fatalf("kazoo's wait on Curator's barrier: %q, want True", l)
	}
	for _, name := range []string{"byzkgate", "bykazoo", "bycurator"} {
		if barrierRaised(t, g, name) {
			t.Fatalf("zkgate reads the barrier %s as up after it was lowered", name)
		}
	}
	kz.exit()
	cur.exit()
}

// allThrough checks that both Curator members (c1, c2) said what "true"
// (their enter or leave went through), and that zkgate's call answered 200.
func allThrough(t *testing.T, cur *interopPeer, what string, zkgate <-chan gwtest.Response) {
	t.Helper()
	for _, id := range []string{"c1", "c2"} {
		if l := cur.expect(what+" "+id, interopWait); l != what+" "+id+" true" {
			t.Fatalf("Curator member %s: %q, want true", id, l)
		}
	}
	if r := <-zkgate; r.Status != http.StatusOK {
		t.Fatalf("zkgate's member after %s: %d %s, want 200", what, r.Status, r.Body)
	}
}

// TestInteropCuratorDoubleBarrier: Curator's DistributedDoubleBarrier and
// zkgate share a double barrier (one ephemeral child a member, and `ready`):
// two Curator members and one of zkgate enter together once all three are
// in, and leave together once all three left, with nothing left behind.
func TestInteropCuratorDoubleBarrier(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	g, conn, cur := interopStart(t, startCuratorPeer)
	path := kinds.DoubleBarriers.Path(g.Root, "batch")
	lease := newLease(t, g.URL, "1m", "zkgate-member")
	call := func(verb string, body map[string]any) <-chan gwtest.Response {
		done := make(chan gwtest.Response, 1)
		go func() {
			r, _ := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/double-barriers/batch/"+verb+"?wait=30s", body)
			done <- r
		}()
		return done
	}
	for _, id := range []string{"c1", "c2"} {
		cur.send("dbarrier %s %s 3", id, path)
		cur.expect("DBARRIER "+id, interopWait)
	}

	cur.send("denter c1 30")
	entered := call("enter", map[string]any{"lease": lease, "member": "m1", "count": 3})
	gwtest.Eventually(t, interopWait, func() error {
		kids, _, err := conn.Children(path)
		if err != nil || len(kids) != 2 {
			return fmt.Errorf("the barrier's children: %v %v, want Curator's and zkgate's member", kids, err)
		}
		return nil
	})
	st := gwtest.Do(t, "GET", g.URL+"/v1/double-barriers/batch", nil).JSON(t)
	if st["ready"] != false || len(st["members"].([]any)) != 2 {
		t.Fatalf("two members in, Curator's among them, not ready: %v", st)
	}
	if cur.said("DENTERED c1") {
		t.Fatalf("Curator entered before the third member: %q", cur.seen)
	}
	cur.send("denter c2 30")
	allThrough(t, cur, "DENTERED", entered)

	left := call("leave", map[string]any{"lease": lease, "member": "m1"})
	cur.send("dleave c1 30")
	cur.send("dbarrier probe %s 3", path) // a round trip of the peer meanwhile
	cur.expect("DBARRIER probe", interopWait)
	select {
	case r := <-left:
		t.Fatalf("zkgate's leave answered while a Curator member was in: %d %s", r.Status, r.Body)
	default:
	}
	if cur.said("DLEFT c1") {
		t.Fatalf("Curator left while another member was in: %q", cur.seen)
	}
	cur.send("dleave c2 30")
	allThrough(t, cur, "DLEFT", left)
	gwtest.Eventually(t, interopWait, func() error {
		kids, _, err := conn.Children(path)
		if err != nil && !errors.Is(err, zk.ErrNoNode) || len(kids) != 0 {
			return fmt.Errorf("the barrier's children after every member left: %v %v", kids, err)
		}
		return nil
	})
	cur.exit()
}
