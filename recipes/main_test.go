package recipes

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
)

// The tests of this package run against real ZooKeeper servers (see
// internal/harness/zktest): one standalone server shared by the package, each test
// under a root of its own, and servers of their own for the tests that
// stop them.
func TestMain(m *testing.M) { os.Exit(zktest.Run(m)) }

// ZooKeeper's opcodes, as the proxy sees them (zkproxy.Request.Op).
const (
	opCreate          = 1
	opDelete          = 2
	opExists          = 3
	opGetData         = 4 // a change watch is set with getData
	opGetChildren2    = 12
	opMulti           = 14 // a lease's record and history are made in one multi
	opCreate2         = 15
	opRemoveWatches   = 18
	opCreateContainer = 19
)

// testService is a Service on its own session and root, closed at the end
// of the test.
type testService struct {
	*Service
	sess *Session
	root string
}

type serviceOptions struct {
	servers []string
	timeout time.Duration // session timeout, default 1s
	hosts   func() zk.HostProvider
	leases  LeaseConfig
	queues  QueueConfig
	root    string // default: a root of its own
	gateway string // default gw-test
	journal string // JournalDir (default: none)
}

func newService(t testing.TB, o serviceOptions) *testService {
	t.Helper()
	if len(o.servers) == 0 {
		o.servers = []string{zktest.Shared(t).Addr()}
	}
	if o.timeout == 0 {
		o.timeout = time.Second
	}
	root := o.root
	if root == "" {
		root = zktest.UniqueRoot(t)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := Connect(ctx, SessionConfig{Servers: o.servers, Timeout: o.timeout, Root: root, Logger: log, hosts: o.hosts})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if o.gateway == "" {
		o.gateway = "gw-test"
	}
	svc := New(sess, Config{GatewayID: o.gateway, Logger: log, Leases: o.leases, Queues: o.queues, JournalDir: o.journal})
	t.Cleanup(func() {
		svc.Close()
		sess.Close()
	})
	return &testService{Service: svc, sess: sess, root: root}
}

// produce puts an item of data, of priority prio, into the queue q on s.
func produce(t testing.TB, s *testService, q string, data []byte, prio int) {
	t.Helper()
	if _, err := s.Queues.Produce(context.Background(), q, data, prio); err != nil {
		t.Fatal(err)
	}
}

// newLease makes a lease of a minute for holder on s.
func newLease(t testing.TB, s *testService, holder string) *Lease {
	t.Helper()
	l, err := s.Leases.Create(context.Background(), time.Minute, holder, "")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// holdLock has a new lease, "holder", take the lock name on s, exclusive,
// and returns its grant: a lock that others wait for.
func holdLock(t testing.TB, s *testService, name string) LockGrant {
	t.Helper()
	g, err := s.Locks.Acquire(context.Background(), newLease(t, s, "holder"), name, ModeExclusive, 0)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// rawClient is a plain go-zookeeper client (default: on the shared
// server), for looking at what the recipes left in ZooKeeper and for
// playing other clients.
func rawClient(t testing.TB, servers ...string) *zk.Conn {
	t.Helper()
	return zktest.Connect(t, servers, 10*time.Second)
}

// treeUnder lists every znode below p (p excluded), depth first.
func treeUnder(t testing.TB, conn *zk.Conn, p string) []string {
	t.Helper()
	out, err := zktest.Tree(conn, p, nil)
	if err != nil {
		t.Fatalf("list %s: %v", p, err)
	}
	return out
}

// ephemeralsUnder lists the ephemeral znodes below p: what a lease holds.
func ephemeralsUnder(t testing.TB, conn *zk.Conn, p string) []string {
	t.Helper()
	var out []string
	for _, n := range treeUnder(t, conn, p) {
		_, st, err := conn.Exists(n)
		if err == nil && st != nil && st.EphemeralOwner != 0 {
			out = append(out, n)
		}
	}
	return out
}
