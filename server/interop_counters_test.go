package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// ioCounter reads the counter name through g as format, and fails the
// test unless it answers 200.
func ioCounter(t *testing.T, g *gwtest.Gateway, name, format string) int64 {
	t.Helper()
	r := gwtest.Do(t, "GET", g.URL+"/v1/counters/"+name+"?format="+format, nil)
	if r.Status != 200 {
		t.Fatalf("GET counter %s as %s: %d %s", name, format, r.Status, r.Body)
	}
	return int64(specJSON(t, r)["value"].(float64))
}

// ioAdds adds delta n times to the counter name through g as format, 4
// adders at once, each add acknowledged 200; it returns at once, and the
// returned func waits for them.
func ioAdds(t *testing.T, g *gwtest.Gateway, name, format string, delta, n int) func() {
	t.Helper()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; j < n; j += 4 {
				r, err := gwtest.DoCtx(context.Background(), "POST", g.URL+"/v1/counters/"+name+"/add?format="+format, map[string]any{"delta": delta})
				if err != nil || r.Status != 200 {
					t.Errorf("add to %s: %v %d %s", name, err, r.Status, r.Body)
					return
				}
			}
		}()
	}
	return wg.Wait
}

// ioNodeData is the data of the counter name's node.
func ioNodeData(t *testing.T, conn *zk.Conn, g *gwtest.Gateway, name string) []byte {
	t.Helper()
	data, _, err := conn.Get(kinds.Counters.Path(g.Root, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestInteropKazooCounter: kazoo's Counter and zkgate share a counter both
// ways, in kazoo's ASCII format and in its support_curator int32 one:
// each reads what the other wrote, and concurrent adds from both lose none.
func TestInteropKazooCounter(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	g, conn, p := interopStart(t, startKazooPeer)
	// ASCII: zkgate sets, kazoo reads; then both add at once.
	gwtest.MustStatus(t, gwtest.Do(t, "PUT", g.URL+"/v1/counters/ascii", map[string]any{"value": 40}), 200, "set")
	p.send("counter k1 %s 0", kinds.Counters.Path(g.Root, "ascii"))
	p.expect("COUNTER k1", interopWait)
	p.send("cget k1")
	if l := p.expect("CVALUE k1 ", interopWait); l != "CVALUE k1 40" {
		t.Fatalf("kazoo reads %q, want 40", l)
	}
	wait := ioAdds(t, g, "ascii", "decimal", 1, 60)
	p.send("cadd k1 1 60")
	p.expect("CADDED k1 ", interopWait)
	wait()
	if v := ioCounter(t, g, "ascii", "decimal"); v != 160 {
		t.Fatalf("after 60 adds from each: %d, want 160", v)
	}
	if data := ioNodeData(t, conn, g, "ascii"); string(data) != "160" {
		t.Fatalf("the node holds %q, want kazoo's repr \"160\"", data)
	}
	p.send("cget k1")
	if l := p.expect("CVALUE k1 ", interopWait); l != "CVALUE k1 160" {
		t.Fatalf("kazoo reads %q, want 160", l)
	}

	// support_curator: kazoo makes the node (empty, then 4 bytes), zkgate
	// reads it as int32 and refuses it as decimal.
	p.send("counter k2 %s 1", kinds.Counters.Path(g.Root, "int32"))
	p.expect("COUNTER k2", interopWait)
	p.send("cadd k2 -5 1")
	p.expect("CADDED k2 -5", interopWait)
	if v := ioCounter(t, g, "int32", "int32"); v != -5 {
		t.Fatalf("zkgate reads kazoo's int32 as %d, want -5", v)
	}
	r := gwtest.Do(t, "GET", g.URL+"/v1/counters/int32", nil)
	if r.Status != 409 || !strings.Contains(string(r.Body), "format_mismatch") {
		t.Fatalf("read as decimal: %d %s, want 409 format_mismatch", r.Status, r.Body)
	}
	gwtest.MustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/counters/int32/add?format=int32", map[string]any{"delta": 20}), 200, "add")
	p.send("cget k2")
	if l := p.expect("CVALUE k2 ", interopWait); l != "CVALUE k2 15" {
		t.Fatalf("kazoo reads %q, want 15", l)
	}
	p.exit()
}

// TestInteropCuratorCounters: Curator's SharedCount (int32) and
// DistributedAtomicLong (int64, optimistic and promoted to a lock) share
// counters with zkgate both ways, and concurrent adds from both lose none.
func TestInteropCuratorCounters(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	g, _, p := interopStart(t, startCuratorPeer)
	path := func(name string) string { return kinds.Counters.Path(g.Root, name) }

	// SharedCount: zkgate makes it, Curator reads; then both add at once.
	gwtest.MustStatus(t, gwtest.Do(t, "PUT", g.URL+"/v1/counters/shared?format=int32", map[string]any{"value": 7}), 200, "set")
	p.send("shared-get s0 %s", path("shared"))
	if l := p.expect("SHARED s0 ", interopWait); l != "SHARED s0 7" {
		t.Fatalf("SharedCount reads %q, want 7", l)
	}
	wait := ioAdds(t, g, "shared", "int32", 1, 40)
	p.send("shared-add s1 %s 1 40", path("shared"))
	p.expect("SHARED s1 ", interopWait)
	wait()
	if v := ioCounter(t, g, "shared", "int32"); v != 87 {
		t.Fatalf("after 40 adds from each: %d, want 87", v)
	}

	// DistributedAtomicLong makes its node on its first add; zkgate reads
	// it as int64, and both add at once, with and without a promoted lock.
	p.send("long-add l0 %s -3 1 -", path("long"))
	if l := p.expect("LONG l0 ", interopWait); l != "LONG l0 -3" {
		t.Fatalf("the first add: %q, want -3", l)
	}
	if v := ioCounter(t, g, "long", "int64"); v != -3 {
		t.Fatalf("zkgate reads the long as %d, want -3", v)
	}
	for i, lock := range []string{"-", g.Root + "/curator-long-lock"} {
		wait := ioAdds(t, g, "long", "int64", 2, 30)
		p.send("long-add l%d %s 2 30 %s", i+1, path("long"), lock)
		p.expect(fmt.Sprintf("LONG l%d ", i+1), interopWait)
		wait()
	}
	p.send("long-get l9 %s", path("long"))
	if l := p.expect("LONG l9 ", interopWait); l != "LONG l9 237" {
		t.Fatalf("DistributedAtomicLong reads %q, want -3 + 2·120 = 237", l)
	}
	if v := ioCounter(t, g, "long", "int64"); v != 237 {
		t.Fatalf("zkgate reads %d, want 237", v)
	}
	p.exit()
}
