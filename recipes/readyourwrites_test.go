package recipes

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/zkserver"
)

// A plain read (of a lock, of a queue) syncs with the ensemble's leader
// first: the server a gateway talks to may lag it, and a client that
// acquired or produced through one gateway and read through another would
// not see its own write. Here the second gateway's server is frozen while
// the write commits (the other two make the quorum), and read right after
// it thaws, when its backlog is still on its way.
func TestPlainReadsSeeWritesMadeThroughAnotherServer(t *testing.T) {
	t.Parallel()
	zktest.Shared(t) // the loud failure when ZooKeeper is missing
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ens, err := zkserver.StartEnsemble(ctx, 3, zktest.Options())
	if err != nil {
		t.Fatalf("ensemble: %v", err)
	}
	t.Cleanup(func() { _ = ens.Stop() })
	leader, err := ens.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writer, reader := (leader+1)%3, (leader+2)%3
	a := newService(t, serviceOptions{servers: []string{ens.Servers[writer].Addr()}, timeout: 20 * time.Second})
	b := newService(t, serviceOptions{servers: []string{ens.Servers[reader].Addr()}, timeout: 20 * time.Second, root: a.root})
	lease := newLease(t, a, "writer")
	pid := ens.Servers[reader].PID()
	for round := range 15 {
		name := fmt.Sprintf("ryw-%d", round)
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		_, err := a.Locks.Acquire(ctx, lease, name, ModeExclusive, 0)
		if err == nil {
			_, err = a.Queues.Produce(ctx, "ryw", []byte(name), DefaultPriority)
		}
		if kerr := syscall.Kill(pid, syscall.SIGCONT); kerr != nil {
			t.Fatal(kerr)
		}
		if err != nil {
			t.Fatalf("round %d: acquire and produce: %v", round, err)
		}
		// Each read alone: the first one's sync would catch the server up
		// for the second. Odd rounds read the queue, even ones the lock.
		if round%2 == 1 {
			q, err := b.Queues.State(ctx, "ryw", 0, 0, 0)
			if err != nil {
				t.Fatalf("round %d: queue read: %v", round, err)
			}
			if q.Length != (round + 1) {
				t.Fatalf("round %d: a queue read through another server right after a produce saw %d items, want %d", round, q.Length, (round + 1))
			}
		} else {
			st, err := b.Locks.State(ctx, name, 0, 0)
			if err != nil {
				t.Fatalf("round %d: read: %v", round, err)
			}
			if len(st.Holders) != 1 {
				t.Fatalf("round %d: a read through another server right after the acquire saw %d holders", round, len(st.Holders))
			}
		}
	}
}
