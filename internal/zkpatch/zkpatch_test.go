package zkpatch

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/zkserver"
)

// The tests run against the real standalone ZooKeeper of internal/harness/zktest,
// started on first use and stopped by TestMain.
func TestMain(m *testing.M) { os.Exit(zktest.Run(m)) }

// server returns the shared ZooKeeper.
func server(t testing.TB) *zkserver.Server { return zktest.Shared(t) }

// wait is how long any one thing a test waits for may take before the test
// fails: a bound on a hang, not a timing threshold.
const wait = 30 * time.Second

var errInjected = errors.New("zkpatch: injected write failure")

// dialer dials the server with connections that count their Write calls
// and the request packets each carries, and that can hold one Write on a
// gate or fail one Write.
type dialer struct {
	dials      atomic.Int64
	writes     atomic.Int64
	maxPackets atomic.Int64 // the most packets one Write carried

	mu        sync.Mutex
	gate      chan struct{} // the next Write waits until it is closed
	held      chan struct{} // closed once that Write waits
	failAbove int           // the next Write longer than this fails; 0: none
	failed    chan struct{} // closed once it has
	readGate  chan struct{} // Reads wait until it is closed
	ops       map[int32]int // request packets written, by opcode
	conns     []net.Conn    // every connection dialed
}

// dropConnections closes every connection dialed so far: the client
// reconnects to its session.
func (d *dialer) dropConnections() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

// holdReads makes every Read wait, so that no reply reaches the client,
// until release.
func (d *dialer) holdReads() (release func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	gate := make(chan struct{})
	d.readGate = gate
	return func() {
		d.mu.Lock()
		d.readGate = nil
		d.mu.Unlock()
		close(gate)
	}
}

// written returns how many request packets of opcode op were written.
func (d *dialer) written(op int32) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ops[op]
}

// Read hands over what it read only once reads are not held (the receive
// loop is usually inside a Read already when they start to be).
func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.d.mu.Lock()
	gate := c.d.readGate
	c.d.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return n, err
}

func (d *dialer) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	d.dials.Add(1)
	d.mu.Lock()
	d.conns = append(d.conns, c)
	d.mu.Unlock()
	return &countingConn{Conn: c, d: d}, nil
}

// holdNextWrite makes the next Write wait: held is closed once it waits,
// and release lets it through.
func (d *dialer) holdNextWrite() (held <-chan struct{}, release func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gate, d.held = make(chan struct{}), make(chan struct{})
	gate := d.gate
	return d.held, func() { close(gate) }
}

// failNextWriteAbove makes the next Write of more than size bytes fail
// without writing anything; the returned channel is closed once it has.
func (d *dialer) failNextWriteAbove(size int) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failAbove, d.failed = size, make(chan struct{})
	return d.failed
}

type countingConn struct {
	net.Conn
	d *dialer
}

func (c *countingConn) Write(p []byte) (int, error) {
	d := c.d
	d.writes.Add(1)
	if n := int64(packets(p)); n > d.maxPackets.Load() {
		d.maxPackets.Store(n) // Writes come from one goroutine at a time
	}
	d.mu.Lock()
	if d.ops == nil {
		d.ops = map[int32]int{}
	}
	for _, op := range opcodes(p) {
		d.ops[op]++
	}
	gate, held := d.gate, d.held
	d.gate, d.held = nil, nil
	var failed chan struct{}
	if d.failAbove > 0 && len(p) > d.failAbove {
		failed = d.failed
		d.failAbove, d.failed = 0, nil
	}
	d.mu.Unlock()
	if gate != nil {
		close(held)
		<-gate
	}
	if failed != nil {
		close(failed)
		return 0, errInjected
	}
	return c.Conn.Write(p)
}

// packets counts the length-prefixed packets of one Write.
func packets(p []byte) int {
	n := 0
	for len(p) >= 4 {
		l := int(binary.BigEndian.Uint32(p))
		if l < 0 || 4+l > len(p) {
			return n + 1
		}
		p = p[4+l:]
		n++
	}
	return n
}

// opcodes returns the opcodes of the request packets of one Write (the
// connect request, which has none, reads as 0 or garbage: tests count only
// the opcodes they send).
func opcodes(p []byte) []int32 {
	var ops []int32
	for len(p) >= 4 {
		l := int(binary.BigEndian.Uint32(p))
		if l < 8 || 4+l > len(p) {
			break
		}
		ops = append(ops, int32(binary.BigEndian.Uint32(p[8:12])))
		p = p[4+l:]
	}
	return ops
}

// connect opens a session on the shared server through d.
func connect(t *testing.T, d *dialer) *zk.Conn {
	t.Helper()
	srv := server(t)
	c, _, err := zk.Connect([]string{srv.Addr()}, 20*time.Second, zk.WithDialer(d.dial))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(c.Close)
	waitFor(t, "a session", func() bool { return c.State() == zk.StateHasSession })
	return c
}

// waitFor polls cond until it holds, failing the test after wait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %v", what, wait)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// parkedInClient counts the goroutines that wait inside the client for the
// reply to a request or for room on its send queue, found in a dump of every
// goroutine's stack: those blocked in a select of (*Conn).request,
// (*Conn).queueRequest or (*Conn).await. Once a caller is counted, its request is queued (or
// will be moved into the queue by the send loop's next receive): the tests
// wait for this count instead of sleeping.
func parkedInClient() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, stack, _ := strings.Cut(g, "\n")
		if !strings.Contains(header, "[select") && !strings.Contains(header, "[chan send") {
			continue
		}
		if strings.Contains(stack, "zkgate/internal/zk.(*Conn).request(") ||
			strings.Contains(stack, "zkgate/internal/zk.(*Conn).queueRequest(") ||
			strings.Contains(stack, "zkgate/internal/zk.(*Conn).await(") {
			count++
		}
	}
	return count
}

// root creates a fresh persistent node for one test.
func root(t *testing.T, c *zk.Conn) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	p := "/zkpatch-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + hex.EncodeToString(b[:])
	mkdirs(t, c, p)
	return p
}

// mkdirs creates the persistent nodes paths, empty, in order.
func mkdirs(t *testing.T, c *zk.Conn, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := c.Create(p, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
}

func randomData(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// result is what one concurrent call answered.
type result struct {
	path string
	data []byte
	err  error
}

// collect waits for n results, failing the test if any is missing after
// wait (a request that got no response would hang its caller).
func collect(t *testing.T, results <-chan result, n int) []result {
	t.Helper()
	out := make([]result, 0, n)
	timeout := time.After(wait)
	for len(out) < n {
		select {
		case r := <-results:
			out = append(out, r)
		case <-timeout:
			t.Fatalf("%d of %d requests still unanswered after %v", n-len(out), n, wait)
		}
	}
	return out
}

// TestCreateWithStat: create2 returns the created node's path and a Stat
// equal to what Exists then reads, for persistent, ephemeral and sequential
// ephemeral nodes; its errors come with no Stat.
func TestCreateWithStat(t *testing.T) {
	c := connect(t, &dialer{})
	r := root(t, c)
	acl := zk.WorldACL(zk.PermAll)

	check := func(name string, path string, flags int32, data []byte) string {
		t.Helper()
		got, st, err := c.CreateWithStat(path, data, flags, acl)
		if err != nil || st == nil {
			t.Fatalf("%s: CreateWithStat = %q, %v, %v", name, got, st, err)
		}
		if flags&zk.FlagSequence != 0 {
			seq := strings.TrimPrefix(got, path)
			if got == path || len(seq) != 10 || strings.Trim(seq, "0123456789") != "" {
				t.Fatalf("%s: path %q is not %q with a sequence number", name, got, path)
			}
		} else if got != path {
			t.Fatalf("%s: path %q, want %q", name, got, path)
		}
		ok, read, err := c.Exists(got)
		if err != nil || !ok {
			t.Fatalf("%s: Exists(%s) = %v, %v", name, got, ok, err)
		}
		if *st != *read {
			t.Fatalf("%s: CreateWithStat's stat %+v, Exists reads %+v", name, *st, *read)
		}
		if st.Czxid == 0 || st.Mzxid != st.Czxid || st.Pzxid != st.Czxid || st.Version != 0 ||
			st.NumChildren != 0 || st.DataLength != int32(len(data)) {
			t.Fatalf("%s: not the stat of a new node with %d bytes: %+v", name, len(data), *st)
		}
		wantOwner := int64(0)
		if flags&zk.FlagEphemeral != 0 {
			wantOwner = c.SessionID()
		}
		if st.EphemeralOwner != wantOwner {
			t.Fatalf("%s: EphemeralOwner %#x, want %#x", name, st.EphemeralOwner, wantOwner)
		}
		return got
	}
	persistent := check("persistent", r+"/p", zk.FlagPersistent, []byte("persistent data"))
	check("ephemeral", r+"/e", zk.FlagEphemeral, []byte("e"))
	s1 := check("ephemeral sequential", r+"/s-", zk.FlagEphemeralSequential, nil)
	s2 := check("ephemeral sequential", r+"/s-", zk.FlagEphemeralSequential, []byte("second"))
	if s2 <= s1 {
		t.Fatalf("sequence numbers %q then %q", s1, s2)
	}
	check("persistent sequential", r+"/q-", zk.FlagSequence, make([]byte, 1000))

	if p, st, err := c.CreateWithStat(persistent, nil, zk.FlagPersistent, acl); !errors.Is(err, zk.ErrNodeExists) || st != nil || p != "" {
		t.Fatalf("existing node: CreateWithStat = %q, %v, %v; want ErrNodeExists and no stat", p, st, err)
	}
	if p, st, err := c.CreateWithStat(r+"/missing/child", nil, zk.FlagEphemeral, acl); !errors.Is(err, zk.ErrNoNode) || st != nil || p != "" {
		t.Fatalf("missing parent: CreateWithStat = %q, %v, %v; want ErrNoNode and no stat", p, st, err)
	}
	for _, flags := range []int32{zk.FlagContainer, zk.FlagTTL, zk.FlagPersistentSequentialWithTTL} {
		if _, st, err := c.CreateWithStat(r+"/bad", nil, flags, acl); !errors.Is(err, zk.ErrInvalidFlags) || st != nil {
			t.Fatalf("flags %d: CreateWithStat = %v, %v; want ErrInvalidFlags", flags, st, err)
		}
	}
	if _, st, err := c.CreateWithStat("no-slash", nil, zk.FlagPersistent, acl); !errors.Is(err, zk.ErrInvalidPath) || st != nil {
		t.Fatalf("invalid path: CreateWithStat = %v, %v; want ErrInvalidPath", st, err)
	}
}

// TestCreateWithStatThenChildren: the listing is sent behind the create
// without waiting for the create's reply (both are written while the client
// can read no reply), and,
// since ZooKeeper runs a session's requests in order, it always shows the
// node just made, also while other sessions add and remove siblings.
func TestCreateWithStatThenChildren(t *testing.T) {
	d := &dialer{}
	c := connect(t, d)
	r := root(t, c)
	call := func(path, parent string, flags int32) createListAnswer {
		return createThenList(c, path, parent, flags)
	}

	const opCreate2, opGetChildren2 = 15, 12
	creates, lists := d.written(opCreate2), d.written(opGetChildren2)
	release := d.holdReads()
	answers := make(chan createListAnswer, 1)
	go func() { answers <- call(r+"/lock-", r, zk.FlagEphemeralSequential) }()
	waitFor(t, "the create and the listing to be written while no reply can be read", func() bool {
		return d.written(opCreate2) == creates+1 && d.written(opGetChildren2) == lists+1
	})
	select {
	case a := <-answers:
		t.Fatalf("answered while no reply could be read: %+v", a)
	default:
	}
	release()
	first := <-answers
	if err := first.shows(c, r); err != nil {
		t.Fatal(err)
	}
	checkListingsUnderChurn(t, c, r)
	checkCreateThenChildrenErrors(t, c, r)
}

// createListAnswer is what CreateWithStatThenChildren answers.
type createListAnswer struct {
	path string
	stat *zk.Stat
	list zk.ChildrenResult
	err  error
}

// createThenList calls c.CreateWithStatThenChildren with 4 bytes of data
// and an open ACL.
func createThenList(c *zk.Conn, path, parent string, flags int32) createListAnswer {
	p, st, l, err := c.CreateWithStatThenChildren(path, []byte("data"), flags, zk.WorldACL(zk.PermAll), parent)
	return createListAnswer{p, st, l, err}
}

// shows says why a, answered to c, is not a create of a node of c's
// session whose listing of parent shows it and goes with the parent's stat.
func (a createListAnswer) shows(c *zk.Conn, parent string) error {
	if a.err != nil || a.stat == nil || a.list.Err != nil || a.list.Stat == nil {
		return fmt.Errorf("create %q, %v, %v; listing %v, %v", a.path, a.stat, a.err, a.list.Stat, a.list.Err)
	}
	if a.stat.EphemeralOwner != c.SessionID() || a.stat.DataLength != 4 {
		return fmt.Errorf("not the stat of the node just made: %+v", *a.stat)
	}
	if int(a.list.Stat.NumChildren) != len(a.list.Children) || a.list.Stat.Pzxid < a.stat.Czxid {
		return fmt.Errorf("the parent's stat %+v does not go with %d children made up to zxid %d",
			*a.list.Stat, len(a.list.Children), a.stat.Czxid)
	}
	for _, name := range a.list.Children {
		if parent+"/"+name == a.path {
			return nil
		}
	}
	return fmt.Errorf("the listing %v of %s does not show %s", a.list.Children, parent, a.path)
}

// checkListingsUnderChurn: 200 creates under r through c, each listing
// showing its node while other sessions add and remove siblings.
func checkListingsUnderChurn(t *testing.T, c *zk.Conn, r string) {
	t.Helper()
	acl := zk.WorldACL(zk.PermAll)
	other := connect(t, &dialer{})
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Add(1)
	go func() {
		defer churn.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			p, err := other.Create(r+"/lock-", nil, zk.FlagEphemeralSequential, acl)
			if err == nil {
				_ = other.Delete(p, -1)
			}
		}
	}()
	for i := 0; i < 200; i++ {
		a := createThenList(c, r+"/lock-", r, zk.FlagEphemeralSequential)
		if err := a.shows(c, r); err != nil {
			close(stop)
			churn.Wait()
			t.Fatalf("call %d: %v", i, err)
		}
		if err := c.Delete(a.path, -1); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	churn.Wait()
}

// checkCreateThenChildrenErrors: the create's errors, and the listing's
// own.
func checkCreateThenChildrenErrors(t *testing.T, c *zk.Conn, r string) {
	t.Helper()
	acl := zk.WorldACL(zk.PermAll)
	call := func(path, parent string, flags int32) createListAnswer {
		return createThenList(c, path, parent, flags)
	}
	missing := call(r+"/missing/lock-", r+"/missing", zk.FlagEphemeralSequential)
	if !errors.Is(missing.err, zk.ErrNoNode) || missing.stat != nil || missing.path != "" ||
		!errors.Is(missing.list.Err, zk.ErrNoNode) || missing.list.Stat != nil {
		t.Fatalf("missing parent: %+v; want ErrNoNode for both", missing)
	}
	if _, err := c.Create(r+"/plain", nil, zk.FlagPersistent, acl); err != nil {
		t.Fatal(err)
	}
	exists := call(r+"/plain", r, zk.FlagPersistent)
	if !errors.Is(exists.err, zk.ErrNodeExists) || exists.stat != nil || exists.list.Err != nil {
		t.Fatalf("existing node: %+v; want ErrNodeExists and a listing", exists)
	}
	for _, bad := range []struct {
		path, parent string
		flags        int32
		want         error
	}{
		{r + "/c", r, zk.FlagContainer, zk.ErrInvalidFlags},
		{r + "/t", r, zk.FlagTTL, zk.ErrInvalidFlags},
		{"no-slash", r, zk.FlagPersistent, zk.ErrInvalidPath},
		{r + "/x", "no-slash", zk.FlagPersistent, zk.ErrInvalidPath},
	} {
		if a := call(bad.path, bad.parent, bad.flags); !errors.Is(a.err, bad.want) || a.stat != nil {
			t.Fatalf("CreateWithStatThenChildren(%q, flags %d, parent %q) = %+v; want %v", bad.path, bad.flags, bad.parent, a, bad.want)
		}
	}
}

// TestCreateThenChildrenKeepOrder: under many concurrent callers, whose
// requests the send loop takes in batches, the create and the listing of
// one CreateWithStatThenChildren still go out in their order. 32 workers
// each create a sequential node with a listing behind it and delete it
// again, on a lock of their own: every listing must show the node just
// created, alone. (Only the send loop may take queued requests: another
// writer that took them could send a listing ahead of its create.)
func TestCreateThenChildrenKeepOrder(t *testing.T) {
	c := connect(t, &dialer{})
	r := root(t, c)
	acl := zk.WorldACL(zk.PermAll)
	const workers, each = 32, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		p := fmt.Sprintf("%s/l%d", r, w)
		if _, err := c.Create(p, nil, zk.FlagPersistent, acl); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				node, _, list, err := c.CreateWithStatThenChildren(p+"/lock-", nil, zk.FlagEphemeralSequential, acl, p)
				if err != nil || list.Err != nil {
					errs <- fmt.Errorf("create %s: %v, listing: %v", p, err, list.Err)
					return
				}
				if len(list.Children) != 1 || p+"/"+list.Children[0] != node {
					errs <- fmt.Errorf("call %d created %s and listed %v", i, node, list.Children)
					return
				}
				if err := c.Delete(node, -1); err != nil {
					errs <- fmt.Errorf("delete %s: %v", node, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestBatchedWrites: requests queued while the send loop is busy go out
// together. The first Write is held on a gate; 100 concurrent Creates and
// Gets are issued and the test waits (by goroutine dump, not by sleeping)
// until all of them wait in the client; then the gate opens. Every request
// must get its own answer, with far fewer Writes than requests.
func TestBatchedWrites(t *testing.T) {
	d := &dialer{}
	c := connect(t, d)
	r := root(t, c)
	acl := zk.WorldACL(zk.PermAll)
	const n = 100
	for i := 1; i < n; i += 2 {
		if _, err := c.Create(fmt.Sprintf("%s/fixed-%03d", r, i), []byte(fmt.Sprintf("fixed %d", i)), zk.FlagPersistent, acl); err != nil {
			t.Fatal(err)
		}
	}

	held, release := d.holdNextWrite()
	first := make(chan error, 1)
	go func() { _, _, err := c.Exists(r); first <- err }()
	waitFor(t, "the first Write to be held", func() bool { return closed(held) })
	writesBefore := d.writes.Load()

	results := make(chan result, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			if i%2 == 0 {
				p, err := c.Create(fmt.Sprintf("%s/new-%03d", r, i), []byte(fmt.Sprintf("new %d", i)), zk.FlagPersistent, acl)
				results <- result{path: p, err: err}
			} else {
				p := fmt.Sprintf("%s/fixed-%03d", r, i)
				data, _, err := c.Get(p)
				results <- result{path: p, data: data, err: err}
			}
		}(i)
	}
	waitFor(t, "every request to wait in the client", func() bool { return parkedInClient() >= n+1 })
	release()

	if err := <-first; err != nil {
		t.Fatalf("the held request: %v", err)
	}
	seen := map[string]bool{}
	for _, res := range collect(t, results, n) {
		if res.err != nil {
			t.Fatalf("%s: %v", res.path, res.err)
		}
		seen[res.path] = true
		var i int
		if _, err := fmt.Sscanf(res.path[len(r):], "/fixed-%03d", &i); err == nil {
			if want := fmt.Sprintf("fixed %d", i); string(res.data) != want {
				t.Fatalf("Get(%s) = %q, want %q", res.path, res.data, want)
			}
		}
	}
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("%s/fixed-%03d", r, i)
		if i%2 == 0 {
			p = fmt.Sprintf("%s/new-%03d", r, i)
		}
		if !seen[p] {
			t.Fatalf("no answer for %s", p)
		}
	}
	writes := d.writes.Load() - writesBefore
	t.Logf("%d requests in %d Writes after the held one; at most %d packets in one Write", n, writes, d.maxPackets.Load())
	if writes > 10 {
		t.Fatalf("%d requests queued together took %d Writes, want at most 10", n, writes)
	}
}

// TestRepliesMatchRequests: with batches and buffered reads, every reply
// still reaches the request it answers. Concurrent workers each issue a
// sequence of creates (of sequential nodes, with data of their own and of
// varying size) and reads; each checks that a create answers its own path
// prefix and a Stat of its own data length, and that reading the node back
// gives its own data. A reply matched to the wrong xid would fail this.
func TestRepliesMatchRequests(t *testing.T) {
	c := connect(t, &dialer{})
	r := root(t, c)
	acl := zk.WorldACL(zk.PermAll)
	const workers, each = 8, 40
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			errs <- func() error {
				for i := 0; i < each; i++ {
					prefix := fmt.Sprintf("%s/w%d-i%d-", r, w, i)
					data := bytes.Repeat([]byte(fmt.Sprintf("<%d.%d>", w, i)), (w*each+i)%300)
					p, st, err := c.CreateWithStat(prefix, data, zk.FlagSequence, acl)
					if err != nil {
						return fmt.Errorf("create %s: %v", prefix, err)
					}
					if !strings.HasPrefix(p, prefix) || st.DataLength != int32(len(data)) {
						return fmt.Errorf("create %s answered %s with %d bytes of data, want %d", prefix, p, st.DataLength, len(data))
					}
					got, _, err := c.Get(p)
					if err != nil {
						return fmt.Errorf("get %s: %v", p, err)
					}
					if !bytes.Equal(got, data) {
						return fmt.Errorf("get %s: %d bytes %.40q..., want %d bytes %.40q...", p, len(got), got, len(data), data)
					}
				}
				return nil
			}()
		}(w)
	}
	timeout := time.After(wait)
	for w := 0; w < workers; w++ {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatalf("workers still running after %v", wait)
		}
	}
	children, _, err := c.Children(r)
	if err != nil || len(children) != workers*each {
		t.Fatalf("%d children (%v), want %d", len(children), err, workers*each)
	}
}

// TestWriteFailureFailsTheBatch: when the Write of a batch fails, every
// request of the batch is answered ErrConnectionClosed (none hangs, none is
// answered twice: a second answer would block the client), and the client
// reconnects to the same session and serves new requests.
func TestWriteFailureFailsTheBatch(t *testing.T) {
	d := &dialer{}
	c := connect(t, d)
	r := root(t, c)
	acl := zk.WorldACL(zk.PermAll)
	session := c.SessionID()

	// Hold the send loop in a Write, queue the batch behind it, and make the
	// batch's Write (the next one longer than a ping or a single small
	// request) fail.
	held, release := d.holdNextWrite()
	first := make(chan error, 1)
	go func() { _, _, err := c.Exists(r); first <- err }()
	waitFor(t, "the first Write to be held", func() bool { return closed(held) })
	failed := d.failNextWriteAbove(1000)
	const n = 50
	results := make(chan result, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			p := fmt.Sprintf("%s/lost-%03d", r, i)
			_, err := c.Create(p, bytes.Repeat([]byte{'x'}, 100), zk.FlagPersistent, acl)
			results <- result{path: p, err: err}
		}(i)
	}
	waitFor(t, "every request to wait in the client", func() bool { return parkedInClient() >= n+1 })
	release()

	for _, res := range collect(t, results, n) {
		if !errors.Is(res.err, zk.ErrConnectionClosed) {
			t.Fatalf("%s: %v, want ErrConnectionClosed", res.path, res.err)
		}
	}
	if !closed(failed) {
		t.Fatal("the requests failed but the injected Write failure did not happen")
	}
	if err := <-first; err != nil && !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("the held request: %v", err)
	}

	waitFor(t, "a new connection", func() bool { return d.dials.Load() >= 2 })
	waitFor(t, "the session back", func() bool { return c.State() == zk.StateHasSession })
	if got := c.SessionID(); got != session {
		t.Fatalf("session %#x after the reconnect, want the same %#x", got, session)
	}
	p, st, err := c.CreateWithStat(r+"/after", []byte("after"), zk.FlagEphemeral, acl)
	if err != nil || st.EphemeralOwner != session {
		t.Fatalf("create after the reconnect: %q, %+v, %v", p, st, err)
	}
	// The failed Write wrote nothing: none of the batch reached the server.
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("%s/lost-%03d", r, i)
		if ok, _, err := c.Exists(p); err != nil || ok {
			t.Fatalf("Exists(%s) = %v, %v; the failed Write carried nothing", p, ok, err)
		}
	}
}

// TestLargeAndManyReplies: requests and replies near the buffer sizes go
// through the batched writes and the buffered reads intact: 900 KiB nodes
// set and read back, a batch whose requests overflow the send buffer (queued
// together behind a held Write), and many small replies read together with
// large ones.
func TestLargeAndManyReplies(t *testing.T) {
	d := &dialer{}
	c := connect(t, d)
	r := root(t, c)
	acl := zk.WorldACL(zk.PermAll)

	big := randomData(t, 900*1024)
	if _, err := c.Create(r+"/big", big, zk.FlagPersistent, acl); err != nil {
		t.Fatal(err)
	}
	if got, st, err := c.Get(r + "/big"); err != nil || !bytes.Equal(got, big) || st.DataLength != int32(len(big)) {
		t.Fatalf("Get big: %d bytes, %v; want the %d bytes written", len(got), err, len(big))
	}
	big = randomData(t, 900*1024)
	if _, err := c.Set(r+"/big", big, 0); err != nil {
		t.Fatal(err)
	}
	const small = 200
	for i := 0; i < small; i++ {
		if _, err := c.Create(fmt.Sprintf("%s/small-%03d", r, i), []byte(fmt.Sprintf("small %d", i)), zk.FlagPersistent, acl); err != nil {
			t.Fatal(err)
		}
	}

	want := checkOverflowingBatch(t, d, c, r)
	want[r+"/big"] = big
	checkManySmallReplies(t, c, r, small, want)
}

// checkOverflowingBatch: twelve 60 KiB creates and two 900 KiB sets under
// r, queued together behind a held Write: more than the 1.5 MiB send
// buffer, so they take several batches, one of them cut where a large
// request no longer fits. It returns what each path now holds.
func checkOverflowingBatch(t *testing.T, d *dialer, c *zk.Conn, r string) map[string][]byte {
	t.Helper()
	acl := zk.WorldACL(zk.PermAll)
	want := map[string][]byte{}
	for _, name := range []string{"/bigA", "/bigB"} {
		if _, err := c.Create(r+name, nil, zk.FlagPersistent, acl); err != nil {
			t.Fatal(err)
		}
		want[r+name] = randomData(t, 900*1024)
	}
	for i := 0; i < 12; i++ {
		want[fmt.Sprintf("%s/mid-%02d", r, i)] = randomData(t, 60*1024)
	}
	held, release := d.holdNextWrite()
	first := make(chan error, 1)
	go func() { _, _, err := c.Exists(r); first <- err }()
	waitFor(t, "the first Write to be held", func() bool { return closed(held) })
	results := make(chan result, len(want))
	for p, data := range want {
		go func(p string, data []byte) {
			var err error
			if strings.Contains(p, "/big") {
				_, err = c.Set(p, data, 0)
			} else {
				_, err = c.Create(p, data, zk.FlagPersistent, acl)
			}
			results <- result{path: p, err: err}
		}(p, data)
	}
	waitFor(t, "every request to wait in the client", func() bool { return parkedInClient() >= len(want)+1 })
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for _, res := range collect(t, results, len(want)) {
		if res.err != nil {
			t.Fatalf("%s: %v", res.path, res.err)
		}
	}
	for p, data := range want {
		if got, _, err := c.Get(p); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get(%s): %d bytes, %v; want the %d bytes written", p, len(got), err, len(data))
		}
	}
	return want
}

// checkManySmallReplies: many small replies (the nodes small-000 on under
// r) read in the same stream as large ones (want, read three times each).
func checkManySmallReplies(t *testing.T, c *zk.Conn, r string, small int, want map[string][]byte) {
	t.Helper()
	reads := make(chan result, small+3*len(want))
	for i := 0; i < small; i++ {
		go func(i int) {
			p := fmt.Sprintf("%s/small-%03d", r, i)
			data, _, err := c.Get(p)
			reads <- result{path: p, data: data, err: err}
		}(i)
	}
	for round := 0; round < 3; round++ {
		for p := range want {
			go func(p string) {
				data, _, err := c.Get(p)
				reads <- result{path: p, data: data, err: err}
			}(p)
		}
	}
	for _, res := range collect(t, reads, small+3*len(want)) {
		expect, ok := want[res.path]
		if !ok {
			var i int
			if _, err := fmt.Sscanf(res.path[len(r):], "/small-%03d", &i); err != nil {
				t.Fatalf("unexpected path %s", res.path)
			}
			expect = []byte(fmt.Sprintf("small %d", i))
		}
		if res.err != nil || !bytes.Equal(res.data, expect) {
			t.Fatalf("Get(%s): %d bytes, %v; want the %d bytes written", res.path, len(res.data), res.err, len(expect))
		}
	}
}

// TestLastHeard: LastHeard is when the latest answered request was sent,
// not when its answer came; pings alone keep it moving on an idle
// connection; SessionTimeout is what the server granted.
func TestLastHeard(t *testing.T) {
	d := &dialer{}
	before := time.Now()
	c := connect(t, d)
	if h := c.LastHeard(); h.Before(before) || h.After(time.Now()) {
		t.Fatalf("LastHeard after connect = %v, want between %v and now: the connect request's send time", h, before)
	}
	if got := c.SessionTimeout(); got != 20*time.Second {
		t.Fatalf("SessionTimeout = %v, want the 20s asked for (within the server's bounds)", got)
	}

	// An answer held back: LastHeard becomes the request's send time.
	release := d.holdReads()
	sent := time.Now()
	answered := make(chan error, 1)
	go func() {
		_, _, err := c.Exists("/")
		answered <- err
	}()
	waitFor(t, "the exists request to be written", func() bool { return d.written(3) > 0 })
	time.Sleep(300 * time.Millisecond) // the answer's delay, which LastHeard must not count
	releasedAt := time.Now()
	release()
	if err := <-answered; err != nil {
		t.Fatalf("exists: %v", err)
	}
	if h := c.LastHeard(); h.Before(sent) || !h.Before(releasedAt) {
		t.Fatalf("LastHeard = %v; want the send time, between %v and %v (the answer came after %v)", h, sent, releasedAt, releasedAt)
	}

	// The server clamps the session timeout to its bounds (400ms..1m here);
	// an idle connection is kept heard by its pings.
	srv := server(t)
	short, _, err := zk.Connect([]string{srv.Addr()}, 100*time.Millisecond)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer short.Close()
	waitFor(t, "a session", func() bool { return short.State() == zk.StateHasSession })
	if got := short.SessionTimeout(); got != 400*time.Millisecond {
		t.Fatalf("SessionTimeout = %v, want 400ms: the server's minimum, not the 100ms asked for", got)
	}
	first := short.LastHeard()
	waitFor(t, "a ping to be answered", func() bool { return short.LastHeard().After(first) })
}

// TestResumeSession: a connection detached from its session leaves it,
// ephemeral nodes and all, to a connection that presents its id and
// password; the detached one never takes it back; an expired session is
// reported expired, not resumed.
func TestResumeSession(t *testing.T) {
	srv := server(t)
	first := connect(t, &dialer{})
	r := root(t, first)
	eph := r + "/eph"
	if _, err := first.Create(eph, []byte("kept"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	id, pw := first.SessionID(), first.Password()
	if len(pw) == 0 {
		t.Fatal("no password")
	}
	first.Detach()
	if st := first.State(); st == zk.StateHasSession {
		t.Fatalf("a detached connection is %v", st)
	}
	if _, _, err := first.Exists(eph); !errors.Is(err, zk.ErrClosing) && !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("a request on a detached connection: %v", err)
	}

	second, _, err := zk.Connect([]string{srv.Addr()}, 20*time.Second, zk.WithSession(id, pw))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	waitFor(t, "the resumed session", func() bool { return second.State() == zk.StateHasSession })
	if got := second.SessionID(); got != id {
		t.Fatalf("resumed session 0x%x, want 0x%x", got, id)
	}
	_, st, err := second.Get(eph)
	if err != nil || st.EphemeralOwner != id {
		t.Fatalf("the ephemeral node after the resume: %v %+v", err, st)
	}
	// The session stays with the new connection (the old one does not
	// reconnect): its requests go on succeeding, and it may delete its node.
	for range 20 {
		if _, _, err := second.Exists(eph); err != nil {
			t.Fatalf("the resumed session lost its connection: %v", err)
		}
	}
	if err := second.Delete(eph, -1); err != nil {
		t.Fatalf("delete the session's own node: %v", err)
	}

	// A session that is gone: reported expired.
	events := make(chan zk.Event, 16)
	third, _, err := zk.Connect([]string{srv.Addr()}, 20*time.Second, zk.WithSession(id^0x5a5a, pw),
		zk.WithEventCallback(func(ev zk.Event) {
			select {
			case events <- ev:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				t.Fatalf("resumed a session that does not exist")
			}
			if ev.State == zk.StateExpired {
				return
			}
		case <-time.After(wait):
			t.Fatal("no expiry reported for a session that does not exist")
		}
	}
}

// TestDetachKeepsTheSession: after Detach the session outlives the
// connection by its timeout, with its ephemeral nodes; Close ends it at once.
func TestDetachKeepsTheSession(t *testing.T) {
	srv := server(t)
	c, _, err := zk.Connect([]string{srv.Addr()}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a session", func() bool { return c.State() == zk.StateHasSession })
	r := root(t, c)
	eph := r + "/eph"
	if _, err := c.Create(eph, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	watcher := connect(t, &dialer{})
	detached := time.Now()
	c.Detach()
	if ok, _, err := watcher.Exists(eph); err != nil || !ok {
		t.Fatalf("the node of a detached session: %v %v, want still there", ok, err)
	}
	waitFor(t, "the session to expire", func() bool {
		ok, _, err := watcher.Exists(eph)
		return err == nil && !ok
	})
	if lived := time.Since(detached); lived < time.Second {
		t.Fatalf("the detached session's node went after %s, before its 1s timeout", lived)
	}
}

// opRemoveWatches is ZooKeeper's removeWatches opcode.
const opRemoveWatches = 18

// dataWatches lists the paths of the data watches (getData's and
// exists') the server keeps for c's session: wchc dumps those alone.
func dataWatches(t *testing.T, c *zk.Conn) []string {
	t.Helper()
	return zktest.DataWatches(t, server(t).Addr(), c.SessionID())
}

// allWatches is the number of watches, data and child, the server keeps
// for every session (mntr's zk_watch_count): the tests of this package run
// one at a time, so a test sees its own sessions' watches move it.
func allWatches(t *testing.T) int {
	t.Helper()
	return zktest.WatchCount(t, server(t).Addr())
}

// watched is the event channel of the watch that a call of Conn.ChildrenW,
// GetW or ExistsW (T: its first result) has set, the test failing if the
// call did: watched[[]string](t)(c.ChildrenW(p)).
func watched[T any](t *testing.T) func(T, *zk.Stat, <-chan zk.Event, error) <-chan zk.Event {
	return func(_ T, _ *zk.Stat, ch <-chan zk.Event, err error) <-chan zk.Event {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
}

// TestRemoveWatch: a removed watch is gone from the client and, with the
// last channel of its kind on its path, from the server; it never fires;
// a reconnect sets again only the watches still kept.
func TestRemoveWatch(t *testing.T) {
	d := &dialer{}
	c := connect(t, d)
	other := connect(t, &dialer{})
	r := root(t, c)
	kept, removed, missing := r+"/kept", r+"/removed", r+"/missing"
	mkdirs(t, c, kept, removed)
	keptCh := watched[[]string](t)(c.ChildrenW(kept))
	childCh := watched[[]string](t)(c.ChildrenW(removed))
	dataCh := watched[[]byte](t)(c.GetW(removed))
	existCh := watched[bool](t)(c.ExistsW(missing))
	if n := c.WatchCount(); n != 4 {
		t.Fatalf("WatchCount = %d, want 4", n)
	}
	base := allWatches(t) - 4
	for _, w := range []struct {
		ch <-chan zk.Event
		p  string
	}{{childCh, removed}, {dataCh, removed}, {existCh, missing}} {
		if err := c.RemoveWatch(w.p, w.ch); err != nil {
			t.Fatalf("RemoveWatch %s: %v", w.p, err)
		}
		if ev, ok := <-w.ch; ok {
			t.Fatalf("a removed watch delivered %+v; want its channel closed", ev)
		}
	}
	if n := c.WatchCount(); n != 1 {
		t.Fatalf("WatchCount = %d after 3 removals, want 1", n)
	}
	if got := dataWatches(t, c); len(got) != 0 {
		t.Fatalf("the server keeps data watches %v for the session, want none", got)
	}
	if n := allWatches(t) - base; n != 1 {
		t.Fatalf("the server keeps %d watches for the session, want 1 (the child watch of %s)", n, kept)
	}
	if n := d.written(opRemoveWatches); n != 3 {
		t.Fatalf("%d removeWatches sent, want 3", n)
	}
	// A second removal of the same watch, or of one that fired, is nothing.
	if err := c.RemoveWatch(removed, childCh); err != nil {
		t.Fatal(err)
	}
	if n := d.written(opRemoveWatches); n != 3 {
		t.Fatalf("%d removeWatches sent after removing a removed watch, want still 3", n)
	}
	checkKeptWatchAfterReconnect(t, d, c, other, kept, keptCh, base)
}

// checkKeptWatchAfterReconnect: a reconnect of c sets again the watch
// kept (keptCh, on the children of kept), and only it: the server keeps
// one watch more than base, it fires on a child made by other, and its
// removal, once fired, sends nothing.
func checkKeptWatchAfterReconnect(t *testing.T, d *dialer, c, other *zk.Conn, kept string, keptCh <-chan zk.Event, base int) {
	t.Helper()
	d.dropConnections()
	waitFor(t, "a reconnect", func() bool { return d.dials.Load() == 2 && c.State() == zk.StateHasSession })
	waitFor(t, "the kept watch set again", func() bool { return allWatches(t)-base == 1 })
	if got := dataWatches(t, c); len(got) != 0 {
		t.Fatalf("after a reconnect the server keeps data watches %v, want none", got)
	}
	mkdirs(t, other, kept+"/a")
	if ev := <-keptCh; ev.Type != zk.EventNodeChildrenChanged {
		t.Fatalf("the kept watch delivered %+v", ev)
	}
	if err := c.RemoveWatch(kept, keptCh); err != nil {
		t.Fatal(err)
	}
	if n := d.written(opRemoveWatches); n != 3 {
		t.Fatalf("%d removeWatches sent after removing a fired watch, want still 3", n)
	}
	if n := c.WatchCount(); n != 0 {
		t.Fatalf("WatchCount = %d, want 0", n)
	}
}

// TestRemoveWatchKeepsSharedWatches: the server keeps one watch for all the
// channels of a path and kind (getData and exists share one): removing one
// channel leaves the server's watch to the others, and the removal of the
// last waits for a request that sets one there and is not answered yet, so
// that it never removes the watch that request set.
func TestRemoveWatchKeepsSharedWatches(t *testing.T) {
	d := &dialer{}
	c := connect(t, d)
	other := connect(t, &dialer{})
	r := root(t, c)
	p := r + "/shared"
	mkdirs(t, c, p)
	first := watched[[]byte](t)(c.GetW(p))
	second := watched[bool](t)(c.ExistsW(p))
	if err := c.RemoveWatch(p, first); err != nil {
		t.Fatal(err)
	}
	if n := d.written(opRemoveWatches); n != 0 {
		t.Fatalf("%d removeWatches sent while another channel waits on the watch", n)
	}

	// A getData that sets the watch again is on its way when the last
	// channel goes: the removal is not sent.
	release := d.holdReads()
	answered := make(chan (<-chan zk.Event), 1)
	go func() {
		_, _, ch, err := c.GetW(p)
		if err != nil {
			t.Error(err)
		}
		answered <- ch
	}()
	waitFor(t, "the getData to be written", func() bool { return d.written(4) > 1 })
	removeAlone(t, c, p, second, release)
	release()
	third := <-answered
	if _, err := other.Set(p, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-third:
		if ev.Type != zk.EventNodeDataChanged {
			t.Fatalf("the watch set during the removal delivered %+v", ev)
		}
	case <-time.After(wait):
		t.Fatal("the watch set while the last other channel was removed never fired: its server watch was removed")
	}
	if n := d.written(opRemoveWatches); n != 0 {
		t.Fatalf("%d removeWatches sent, want none", n)
	}
	checkRemovalAfterAFailedRead(t, d, c, r)
}

// checkRemovalAfterAFailedRead: as the last channel of a watch goes while
// a request that sets no watch (getData of a missing node under r) is on
// its way, the removal is sent once that request is answered.
func checkRemovalAfterAFailedRead(t *testing.T, d *dialer, c *zk.Conn, r string) {
	t.Helper()
	missing := r + "/missing"
	existCh := watched[bool](t)(c.ExistsW(missing))
	release := d.holdReads()
	failed := make(chan error, 1)
	go func() {
		_, _, _, err := c.GetW(missing)
		failed <- err
	}()
	waitFor(t, "the getData to be written", func() bool { return d.written(4) > 2 })
	removeAlone(t, c, missing, existCh, release)
	if n := d.written(opRemoveWatches); n != 0 {
		t.Fatalf("%d removeWatches sent while a getData of the path is unanswered", n)
	}
	release()
	if err := <-failed; !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("getData of a missing node: %v", err)
	}
	waitFor(t, "the removal sent", func() bool { return d.written(opRemoveWatches) == 1 })
	waitFor(t, "the server to drop the watch", func() bool { return len(dataWatches(t, c)) == 0 })
	if n := c.WatchCount(); n != 0 {
		t.Fatalf("WatchCount = %d, want 0", n)
	}
}

// removeAlone removes the watch of ch while a request that sets one on p
// is unanswered (the replies held, until release): RemoveWatch must not
// send the removal then, so it returns without waiting for the server.
func removeAlone(t *testing.T, c *zk.Conn, p string, ch <-chan zk.Event, release func()) {
	t.Helper()
	removed := make(chan error, 1)
	go func() { removed <- c.RemoveWatch(p, ch) }()
	select {
	case err := <-removed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		release()
		t.Fatalf("RemoveWatch waited for the server while a request setting a watch on %s was unanswered: it sent its removal", p)
	}
}

// Ephemerals lists the session's own ephemeral nodes under a prefix, and
// none of another session's, nor a persistent node.
func TestEphemerals(t *testing.T) {
	c := connect(t, &dialer{})
	other := connect(t, &dialer{})
	r := root(t, c)
	mkdirs(t, c, r+"/a", r+"/b")
	acl := zk.WorldACL(zk.PermAll)
	mine := []string{r + "/a/one", r + "/b/two"}
	for _, p := range mine {
		if _, err := c.Create(p, nil, zk.FlagEphemeral, acl); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Create(r+"/a/theirs", nil, zk.FlagEphemeral, acl); err != nil {
		t.Fatal(err)
	}
	got, err := c.Ephemerals(r + "/")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, mine) {
		t.Fatalf("Ephemerals(%s/) = %v, want %v", r, got, mine)
	}
	if got, err := c.Ephemerals(r + "/b/"); err != nil || !slices.Equal(got, mine[1:]) {
		t.Fatalf("Ephemerals(%s/b/) = %v %v, want %v", r, got, err, mine[1:])
	}
}

// TestHandshakeBoundedByTheSessionTimeout (patch 14): a server that takes
// the connection and never answers the connect request is left after twice
// the session timeout, and the client connects again; go-zookeeper waited
// ten read timeouts (67 s at a 10 s session timeout,
// past the session's end: a restarted server's accepted connection held a
// reconnect that long in make test).
func TestHandshakeBoundedByTheSessionTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			defer c.Close() // read the connect request, answer nothing
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	const sessionTimeout = 2 * time.Second // a handshake of 4 s at most
	conn, _, err := zk.Connect([]string{ln.Addr().String()}, sessionTimeout, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Three connections within two handshakes and the second of backoff
	// after each attempt (the one server tried): before, the second came
	// after ten read timeouts (13 s).
	zktest.Eventually(t, 2*2*sessionTimeout+2*time.Second+2*time.Second, func() error {
		if n := accepted.Load(); n < 3 {
			return fmt.Errorf("%d connections: the client still waits on a connect request nobody answers", n)
		}
		return nil
	})
}

// quiet is a zk.Logger that logs nothing.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
