package zkpatch

import (
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// syscallConn counts the client's Read and Write calls on its connection
// (each is one system call: the connection is a plain TCP one), and its
// read deadlines set.
type syscallConn struct {
	net.Conn
	reads, writes, readDeadlines *atomic.Int64
}

func (c syscallConn) Read(p []byte) (int, error)  { c.reads.Add(1); return c.Conn.Read(p) }
func (c syscallConn) Write(p []byte) (int, error) { c.writes.Add(1); return c.Conn.Write(p) }
func (c syscallConn) SetReadDeadline(t time.Time) error {
	c.readDeadlines.Add(1)
	return c.Conn.SetReadDeadline(t)
}

// syscallCounts dials connections that count into its fields.
type syscallCounts struct {
	reads, writes, readDeadlines atomic.Int64
}

func (s *syscallCounts) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return syscallConn{Conn: c, reads: &s.reads, writes: &s.writes, readDeadlines: &s.readDeadlines}, nil
}

// TestReadDeadlinePerRead: the receive loop sets its read deadline (a
// timer change, which can wake a thread) for a read from the connection,
// not for every reply: replies that arrive together are read with one
// Read and need at most one deadline. 32 callers on one session run a
// lock's cycle 50 times each, so that replies arrive several to a read;
// the deadlines set must not outnumber the reads (setting and clearing one
// per reply made them 2 per reply, several per read).
func TestReadDeadlinePerRead(t *testing.T) {
	var n syscallCounts
	c, _, err := zk.Connect([]string{server(t).Addr()}, 20*time.Second, zk.WithDialer(n.dial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	waitFor(t, "a session", func() bool { return c.State() == zk.StateHasSession })
	r := root(t, c)
	acl := zk.WorldACL(zk.PermAll)
	const workers, each = 32, 50
	parents := make([]string, workers)
	for w := range parents {
		parents[w] = fmt.Sprintf("%s/l%d", r, w)
	}
	mkdirs(t, c, parents...)
	r0, d0 := n.reads.Load(), n.readDeadlines.Load()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for _, p := range parents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := lockCycle(c, p, acl); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	reads, deadlines := n.reads.Load()-r0, n.readDeadlines.Load()-d0
	t.Logf("%d replies in %d reads, %d read deadlines set", 3*workers*each, reads, deadlines)
	if deadlines > reads {
		t.Fatalf("%d read deadlines set for %d reads of %d replies: want at most one per read", deadlines, reads, 3*workers*each)
	}
}

// lockCycle is the gateway's three packets of a lock cycle under parent:
// the create of an ephemeral sequential node with the listing behind it,
// then the node's delete.
func lockCycle(c *zk.Conn, parent string, acl []zk.ACL) error {
	node, _, list, err := c.CreateWithStatThenChildren(parent+"/lock-", nil, zk.FlagEphemeralSequential, acl, parent)
	if err == nil {
		err = list.Err
	}
	if err == nil {
		err = c.Delete(node, -1)
	}
	return err
}

// cpuTime is the CPU time (user and system) this process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestConcurrentCallersShareWrites: callers that become ready to run
// together (as the callers answered by one read of the receive loop do)
// send their requests in one Write, not one each. 32 goroutines wait on one
// channel with a single P; once it is closed each sends an exists. The send
// loop, woken by the first request, must let the other callers queue theirs
// before it writes: without that, each request took a Write of its own.
func TestConcurrentCallersShareWrites(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	d := &dialer{}
	c := connect(t, d)
	r := root(t, c)
	const callers, rounds = 32, 5
	const opExists = 3
	for round := 0; round < rounds; round++ {
		w0, e0 := d.writes.Load(), d.written(opExists)
		start := make(chan struct{})
		errs := make(chan error, callers)
		var wg sync.WaitGroup
		for i := 0; i < callers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, _, err := c.Exists(r); err != nil {
					errs <- err
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		writes, sent := d.writes.Load()-w0, d.written(opExists)-e0
		t.Logf("round %d: %d exists in %d writes", round, sent, writes)
		if sent != callers {
			t.Fatalf("%d exists written, want %d", sent, callers)
		}
		if writes > callers/4 {
			t.Fatalf("%d exists of callers ready together took %d writes, want at most %d", sent, writes, callers/4)
		}
	}
}

// BenchmarkConcurrentCycles is the client's cost per packet under the
// gateway's lock workload: 32 goroutines on one session, each creating an
// ephemeral sequential node under a parent of its own with the listing
// behind it (CreateWithStatThenChildren), then deleting it; three packets
// per cycle. Besides time and allocations (-benchmem) it reports this
// process's CPU (getrusage: the client's calls and loops; ZooKeeper runs in
// a process of its own) per packet, and the connection's read and write
// calls per packet.
func BenchmarkConcurrentCycles(b *testing.B) {
	var n syscallCounts
	reads, writes := &n.reads, &n.writes
	c, _, err := zk.Connect([]string{server(b).Addr()}, 20*time.Second, zk.WithDialer(n.dial), zk.WithLogInfo(false))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	acl := zk.WorldACL(zk.PermAll)
	const workers = 32
	base := fmt.Sprintf("/zkpatch-cost-%d", time.Now().UnixNano())
	parents := make([]string, workers)
	if _, err := c.Create(base, nil, zk.FlagPersistent, acl); err != nil {
		b.Fatal(err)
	}
	for w := range parents {
		parents[w] = fmt.Sprintf("%s/l%d", base, w)
		if _, err := c.Create(parents[w], nil, zk.FlagPersistent, acl); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	var next atomic.Int64
	var failed atomic.Value
	r0, w0, cpu0 := reads.Load(), writes.Load(), cpuTime(b)
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		p := parents[w]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := lockCycle(c, p, acl); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	pkts := float64(3 * b.N)
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/pkts, "cpu-µs/packet")
	b.ReportMetric(float64(writes.Load()-w0)/pkts, "writes/packet")
	b.ReportMetric(float64(reads.Load()-r0)/pkts, "reads/packet")
}
