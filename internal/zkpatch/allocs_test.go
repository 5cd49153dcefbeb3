package zkpatch

import (
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// TestRequestAllocations: the client's allocations per request, its own
// and those of its send and receive loops (and of the test's connection),
// stay within a budget: an exists (6 on Go 1.26; 8 with the headers coded
// by reflection, 14 when the codec also copies every struct it looks at to
// the heap), and a create with its listing and a delete, a lock's acquire
// and release (21; 27; 44).
func TestRequestAllocations(t *testing.T) {
	c := connect(t, &dialer{})
	r := root(t, c)
	acl := zk.WorldACL(zk.PermAll)
	exists := testing.AllocsPerRun(200, func() {
		if _, _, err := c.Exists(r); err != nil {
			t.Fatal(err)
		}
	})
	cycle := testing.AllocsPerRun(200, func() {
		node, _, _, err := c.CreateWithStatThenChildren(r+"/lock-", nil, zk.FlagEphemeralSequential, acl, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(node, -1); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("allocations: %.1f per exists, %.1f per create, listing and delete", exists, cycle)
	if exists > 7 || cycle > 24 {
		t.Fatalf("%.1f allocations per exists (want at most 7), %.1f per create, listing and delete (want at most 24)", exists, cycle)
	}
}

// BenchmarkRequests is the client's cost per request on one session, in
// time and allocations (-benchmem): an exists, and a create with the
// listing behind it followed by a delete.
func BenchmarkRequests(b *testing.B) {
	c, _, err := zk.Connect([]string{server(b).Addr()}, 20*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	acl := zk.WorldACL(zk.PermAll)
	b.Run("exists", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := c.Exists("/"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("create+list+delete", func(b *testing.B) {
		p := "/zkpatch-bench"
		if _, err := c.Create(p, nil, zk.FlagPersistent, acl); err != nil && err != zk.ErrNodeExists {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			node, _, _, err := c.CreateWithStatThenChildren(p+"/lock-", nil, zk.FlagEphemeralSequential, acl, p)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Delete(node, -1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
