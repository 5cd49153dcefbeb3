package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestInteropCuratorMixedRecipes pins down what happens when one lock name
// is used with two different recipes: a zkgate exclusive lock (a `lock-`
// node, InterProcessMutex's layout) next to Curator's read/write lock
// (`__READ__`/`__WRIT__`), and a zkgate read/write lock next to Curator's
// InterProcessMutex. zkgate reads every known marker, so it always waits
// for the foreign node. Curator's drivers sort the children by the text
// after their own marker and skip the others, so a Curator client of the
// other recipe does not wait for zkgate: such mixes exclude one way only.
// docs/interop.md says so: use one recipe per name.
func TestInteropCuratorMixedRecipes(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	g, conn, p := interopStart(t, startCuratorPeer)
	a, b := ioLease(t, g, "30s", "zkgate-a"), ioLease(t, g, "30s", "zkgate-b")
	id := 0
	curatorGets := func(cmd, name string) bool {
		t.Helper()
		id++
		p.acquire(id, cmd, g.Root+"/locks/"+name)
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if p.said(fmt.Sprintf("ACQUIRED %d ", id)) {
				p.release(id)
				return true
			}
			time.Sleep(20 * time.Millisecond) // polling the peer's output
		}
		p.blocked(id)
		return false
	}
	zkgateWaits := func(name, mode string) {
		t.Helper()
		holders := ioLockTimesOut(t, g, name, b, mode)
		if len(holders) != 1 || !holders[0].Foreign {
			t.Fatalf("zkgate %s on %s timed out naming %v, want the Curator holder", mode, name, holders)
		}
	}
	release := func(name, lease string) {
		ioPost204(t, g.URL+"/v1/locks/"+name+"/release", map[string]any{"lease": lease})
	}

	cases := []struct {
		zkgateMode, curator string
		curatorWaits        bool // does the Curator client wait for the zkgate holder?
	}{
		{"exclusive", "rw-read", false},
		{"exclusive", "rw-write", false},
		{"read", "mutex", false},
		{"write", "mutex", false},
	}
	for i, c := range cases {
		name := fmt.Sprintf("mixed-%d", i)
		// zkgate holds: does Curator wait?
		ioMustAcquireLock(t, g, name, a, c.zkgateMode)
		got := curatorGets(c.curator, name)
		if got == c.curatorWaits {
			t.Errorf("zkgate %s held, Curator %s: acquired=%v, want acquired=%v", c.zkgateMode, c.curator, got, !c.curatorWaits)
		}
		if !got {
			release(name, a) // let the waiting Curator through, then free it
			p.acquired(id)
			p.release(id)
		} else {
			release(name, a)
		}
		// Curator holds: zkgate always waits.
		id++
		p.acquire(id, c.curator, g.Root+"/locks/"+name)
		p.acquired(id)
		zkgateWaits(name, c.zkgateMode)
		p.release(id)
		t.Logf("zkgate %-9s and Curator %-8s: zkgate waits for Curator; Curator waits for zkgate: %v", c.zkgateMode, c.curator, !got)
	}
	p.exit()
	ioRevoke(t, g, a, b)
	gwtest.NoZnodesLeft(t, conn, g.Root)
}
