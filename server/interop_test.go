package server_test

// Interoperability with real peers on the real ZooKeeper: Apache Curator
// (server/testdata/peers/CuratorPeer.java) and kazoo
// (server/testdata/peers/kazoo_peer.py) contend with zkgate for the same
// znodes, each peer a child process driven by line commands. A missing
// peer fails these tests with the install command: they are never skipped.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/zk"
)

const (
	interopInstall    = "apt-get install -y libcurator-recipes-java python3-kazoo"
	interopCuratorJar = "/usr/share/java/curator-recipes.jar"
	interopSlf4jNop   = "/usr/share/java/slf4j-nop.jar"
	interopPython     = "/usr/bin/python3" // kazoo is installed for the system python only
	interopWait       = 15 * time.Second   // for a peer's answer, or a state to show up
)

// interopCurator holds CuratorPeer's class files, compiled once per test
// binary; each test writes them into a t.TempDir() of its own.
var interopCurator struct {
	once    sync.Once
	java    string
	classes map[string][]byte
	err     error
}

func compileCuratorPeer() (java string, classes map[string][]byte, err error) {
	javac, err := exec.LookPath("javac")
	if err != nil {
		return "", nil, fmt.Errorf("javac not found (a JDK is needed: apt-get install -y default-jdk-headless): %v", err)
	}
	if java, err = exec.LookPath("java"); err != nil {
		return "", nil, fmt.Errorf("java not found: %v", err)
	}
	if _, err := os.Stat(interopCuratorJar); err != nil {
		return "", nil, fmt.Errorf("curator-recipes is missing: %v", err)
	}
	dir, err := os.MkdirTemp("", "zkgate-curator-peer-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(dir)
	src, err := filepath.Abs(filepath.Join("testdata", "peers", "CuratorPeer.java"))
	if err != nil {
		return "", nil, err
	}
	out, err := exec.Command(javac, "-nowarn", "-cp", interopCuratorJar, "-d", dir, src).CombinedOutput()
	if err != nil {
		return "", nil, fmt.Errorf("javac %s: %v\n%s", src, err, out)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.class"))
	if err != nil || len(files) == 0 {
		return "", nil, fmt.Errorf("javac made no class files (%v)", err)
	}
	classes = map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", nil, err
		}
		classes[filepath.Base(f)] = b
	}
	return java, classes, nil
}

// interopStart starts a gateway, a ZooKeeper client of its ensemble and
// a peer (startKazooPeer or startCuratorPeer), and checks that the test
// leaves no goroutine behind.
func interopStart(t *testing.T, startPeer func(*testing.T, string) *interopPeer) (*gwtest.Gateway, *zk.Conn, *interopPeer) {
	t.Helper()
	g, conn := gwtest.StartChecked(t, gwtest.GatewayOptions{})
	return g, conn, startPeer(t, gwtest.ZK(t).Addr())
}

// startCuratorPeer starts CuratorPeer against zkAddr and waits for READY.
func startCuratorPeer(t *testing.T, zkAddr string) *interopPeer {
	t.Helper()
	c := &interopCurator
	c.once.Do(func() { c.java, c.classes, c.err = compileCuratorPeer() })
	if c.err != nil {
		t.Fatalf("the Curator interop peer is needed and could not be built; install it with `%s`: %v", interopInstall, c.err)
	}
	dir := t.TempDir()
	for name, b := range c.classes {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cp := []string{interopCuratorJar}
	if _, err := os.Stat(interopSlf4jNop); err == nil {
		cp = append(cp, interopSlf4jNop)
	}
	cp = append(cp, dir)
	return startInteropPeer(t, "curator", c.java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-cp", strings.Join(cp, string(os.PathListSeparator)), "CuratorPeer", zkAddr)
}

var interopKazoo struct {
	once sync.Once
	err  error
}

// startKazooPeer starts kazoo_peer.py against zkAddr and waits for READY.
func startKazooPeer(t *testing.T, zkAddr string) *interopPeer {
	t.Helper()
	k := &interopKazoo
	k.once.Do(func() {
		// extra_lock_patterns came with kazoo 2.7.1: without it kazoo would
		// not see the `-lock-` nodes of zkgate and Curator.
		probe := "import inspect, kazoo.recipe.lock as l; " +
			"assert 'extra_lock_patterns' in inspect.signature(l.Lock.__init__).parameters, 'kazoo >= 2.7.1 is needed'"
		if out, err := exec.Command(interopPython, "-c", probe).CombinedOutput(); err != nil {
			k.err = fmt.Errorf("%s: %v\n%s", interopPython, err, out)
		}
	})
	if k.err != nil {
		t.Fatalf("the kazoo interop peer is needed; install it with `%s`: %v", interopInstall, k.err)
	}
	src, err := filepath.Abs(filepath.Join("testdata", "peers", "kazoo_peer.py"))
	if err != nil {
		t.Fatal(err)
	}
	return startInteropPeer(t, "kazoo", interopPython, "-u", src, zkAddr)
}

// An interopPeer is a child process speaking the line protocol of testdata/peers.
type interopPeer struct {
	t       *testing.T
	name    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string // stdout, a line at a time; closed at EOF
	exited  chan struct{}
	stderr  *gwtest.Buffer
	pending []string // lines read but not expected yet
	seen    []string // everything it said, for failure messages
}

func startInteropPeer(t *testing.T, name string, argv ...string) *interopPeer {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	p := &interopPeer{t: t, name: name, cmd: cmd, lines: make(chan string, 256), exited: make(chan struct{}), stderr: &gwtest.Buffer{}}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s peer: %v (install with `%s`)", name, err, interopInstall)
	}
	go func() {
		defer close(p.exited)
		defer close(p.lines)
		var rest []byte
		buf := make([]byte, 4096)
		for {
			n, err := stdout.Read(buf)
			rest = append(rest, buf[:n]...)
			for {
				i := bytes.IndexByte(rest, '\n')
				if i < 0 {
					break
				}
				p.lines <- strings.TrimRight(string(rest[:i]), "\r")
				rest = rest[i+1:]
			}
			if err != nil {
				break
			}
		}
		_ = cmd.Wait() // after every read of stdout, as os/exec requires
	}()
	t.Cleanup(func() {
		// Ends the peer even when the test failed half-way: killing it
		// closes its session, and with it every node it made.
		_ = p.stdin.Close()
		_ = cmd.Process.Kill()
		deadline := time.After(10 * time.Second)
	drain: // what it still says, so that the reader reaches Wait
		for {
			select {
			case _, ok := <-p.lines:
				if !ok {
					break drain
				}
			case <-deadline:
				t.Errorf("%s peer: stdout still open 10s after SIGKILL", name)
				return
			}
		}
		select {
		case <-p.exited:
		case <-deadline:
			t.Errorf("%s peer did not exit within 10s of SIGKILL", name)
		}
		if t.Failed() {
			t.Logf("%s peer said: %q\nstderr:\n%s", name, p.seen, p.stderr.String())
		}
	})
	p.expect("READY", 60*time.Second)
	return p
}

func (p *interopPeer) send(format string, args ...any) {
	p.t.Helper()
	line := fmt.Sprintf(format, args...)
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("%s peer: write %q: %v (stderr: %s)", p.name, line, err, p.stderr.String())
	}
}

// take records a line the peer said; an ERROR line fails the test.
func (p *interopPeer) take(l string) {
	p.t.Helper()
	p.seen = append(p.seen, l)
	if strings.HasPrefix(l, "ERROR") {
		p.t.Fatalf("%s peer: %s", p.name, l)
	}
	p.pending = append(p.pending, l)
}

// expect waits for a line starting with prefix (other lines stay pending)
// and returns it.
func (p *interopPeer) expect(prefix string, within time.Duration) string {
	p.t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		for i, l := range p.pending {
			if strings.HasPrefix(l, prefix) {
				p.pending = append(p.pending[:i], p.pending[i+1:]...)
				return l
			}
		}
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("%s peer exited before saying %q; it said %q; stderr:\n%s", p.name, prefix, p.seen, p.stderr.String())
			}
			p.take(l)
		case <-deadline.C:
			p.t.Fatalf("%s peer did not say %q within %s; it said %q", p.name, prefix, within, p.seen)
		}
	}
}

// said reports whether a line starting with prefix has arrived, without
// waiting and without consuming it.
func (p *interopPeer) said(prefix string) bool {
	p.t.Helper()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("%s peer exited; it said %q; stderr:\n%s", p.name, p.seen, p.stderr.String())
			}
			p.take(l)
			continue
		default:
		}
		break
	}
	for _, l := range p.pending {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// acquire starts acquire number id (cmd: mutex, rw-read, rw-write,
// semaphore, lock) and waits for its WAITING.
func (p *interopPeer) acquire(id int, cmd string, args ...string) {
	p.t.Helper()
	p.send("%s %d %s", cmd, id, strings.Join(args, " "))
	p.expect(fmt.Sprintf("WAITING %d", id), interopWait)
}

// acquired waits until acquire id holds and returns its node name.
func (p *interopPeer) acquired(id int) string {
	p.t.Helper()
	l := p.expect(fmt.Sprintf("ACQUIRED %d ", id), interopWait)
	return strings.Fields(l)[2]
}

// blocked checks that acquire id has not been granted: the peer's own view.
func (p *interopPeer) blocked(id int) {
	p.t.Helper()
	if p.said(fmt.Sprintf("ACQUIRED %d ", id)) {
		p.t.Fatalf("%s peer acquire %d was granted, but it should wait; it said %q", p.name, id, p.seen)
	}
	p.send("status %d", id)
	if l := p.expect(fmt.Sprintf("STATUS %d ", id), interopWait); !strings.HasSuffix(l, " waiting") {
		p.t.Fatalf("%s peer acquire %d: %s, want waiting", p.name, id, l)
	}
}

func (p *interopPeer) release(id int) {
	p.t.Helper()
	p.send("release %d", id)
	p.expect(fmt.Sprintf("RELEASED %d", id), interopWait)
}

// exit ends the peer gracefully: its session closes with it.
func (p *interopPeer) exit() {
	p.t.Helper()
	p.send("exit")
	p.expect("BYE", interopWait)
	gwtest.Receive(p.t, p.exited, interopWait, p.name+" peer's exit")
}

// What the gateway says of a lock or semaphore.
type ioHolder struct {
	Node    string `json:"node"`
	Token   int64  `json:"token"`
	Mode    string `json:"mode"`
	Lease   string `json:"lease"`
	Holder  string `json:"holder"`
	Foreign bool   `json:"foreign"`
}

func (h ioHolder) String() string {
	who := h.Lease
	if h.Foreign {
		who = "foreign:" + h.Holder
	}
	return fmt.Sprintf("%s(%s %s)", h.Node, h.Mode, who)
}

type ioState struct {
	Holders []ioHolder `json:"holders"`
	Waiters []ioHolder `json:"waiters"`
	Limit   int        `json:"limit"`
}

func (s ioState) String() string { return fmt.Sprintf("holders %v waiters %v", s.Holders, s.Waiters) }

type ioGrant struct {
	Token int64  `json:"token"`
	Node  string `json:"node"`
	Mode  string `json:"mode"`
}

// ioTimeout is a 409 timeout problem with the state it carries.
type ioTimeout struct {
	Code    string     `json:"code"`
	Holders []ioHolder `json:"holders"`
	Waiters int        `json:"waiters"`
}

func ioDecode(t *testing.T, r gwtest.Response, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// ioWaitState polls GET url until ok accepts the state, and returns it.
func ioWaitState(t *testing.T, url string, ok func(ioState) error) ioState {
	t.Helper()
	var st ioState
	gwtest.Eventually(t, interopWait, func() error {
		r, err := gwtest.DoCtx(context.Background(), "GET", url, nil)
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fmt.Errorf("GET %s: %d %s", url, r.Status, r.Body)
		}
		st = ioState{}
		if err := json.Unmarshal(r.Body, &st); err != nil {
			return err
		}
		if err := ok(st); err != nil {
			return fmt.Errorf("%v; state: %v", err, st)
		}
		return nil
	})
	return st
}

// ioAcquireLock is POST /v1/locks/{name}/acquire?wait=.
func ioAcquireLock(ctx context.Context, g *gwtest.Gateway, name, lease, mode, wait string) (gwtest.Response, error) {
	body := map[string]any{"lease": lease}
	if mode != "" {
		body["mode"] = mode
	}
	return gwtest.DoCtx(ctx, "POST", g.URL+"/v1/locks/"+name+"/acquire?wait="+wait, body)
}

func ioMustAcquireLock(t *testing.T, g *gwtest.Gateway, name, lease, mode string) ioGrant {
	t.Helper()
	r, err := ioAcquireLock(context.Background(), g, name, lease, mode, "10s")
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("acquire lock %s (%s) for %s: %v %d %s", name, mode, lease, err, r.Status, r.Body)
	}
	var gr ioGrant
	ioDecode(t, r, &gr)
	return gr
}

// ioLockTimesOut asks for the lock with a short wait and expects a 409
// timeout; it returns the holders the problem names.
func ioLockTimesOut(t *testing.T, g *gwtest.Gateway, name, lease, mode string) []ioHolder {
	t.Helper()
	r, err := ioAcquireLock(context.Background(), g, name, lease, mode, "200ms")
	if err != nil || r.Status != http.StatusConflict {
		t.Fatalf("acquire lock %s (%s) with wait=200ms: %v %d %s, want 409 timeout", name, mode, err, r.Status, r.Body)
	}
	var p ioTimeout
	ioDecode(t, r, &p)
	if p.Code != "timeout" {
		t.Fatalf("acquire lock %s: %s, want code timeout", name, r.Body)
	}
	return p.Holders
}

// ioAsync is an acquire that waits in a goroutine.
type ioAsync struct {
	r   gwtest.Response
	err error
}

func ioAcquireLockAsync(g *gwtest.Gateway, name, lease, mode string) <-chan ioAsync {
	ch := make(chan ioAsync, 1)
	go func() {
		r, err := ioAcquireLock(context.Background(), g, name, lease, mode, "20s")
		ch <- ioAsync{r, err}
	}()
	return ch
}

func ioNotYet(t *testing.T, ch <-chan ioAsync, what string) {
	t.Helper()
	select {
	case res := <-ch:
		t.Fatalf("%s answered while it should wait: %v %d %s", what, res.err, res.r.Status, res.r.Body)
	default:
	}
}

func ioGranted(t *testing.T, ch <-chan ioAsync, what string) ioGrant {
	t.Helper()
	res := gwtest.Receive(t, ch, interopWait, what+" granted")
	if res.err != nil || res.r.Status != http.StatusOK {
		t.Fatalf("%s: %v %d %s", what, res.err, res.r.Status, res.r.Body)
	}
	var gr ioGrant
	ioDecode(t, res.r, &gr)
	return gr
}

// ioThreeLeases makes the 30s leases of three zkgate parties, zkgate-a,
// zkgate-b and zkgate-c.
func ioThreeLeases(t *testing.T, g *gwtest.Gateway) (a, b, c string) {
	t.Helper()
	return ioLease(t, g, "30s", "zkgate-a"), ioLease(t, g, "30s", "zkgate-b"), ioLease(t, g, "30s", "zkgate-c")
}

func ioLease(t *testing.T, g *gwtest.Gateway, ttl, holder string) string {
	t.Helper()
	r := gwtest.Do(t, "POST", g.URL+"/v1/leases", map[string]any{"ttl": ttl, "holder": holder})
	if r.Status != http.StatusCreated {
		t.Fatalf("create lease: %d %s", r.Status, r.Body)
	}
	var l struct {
		ID string `json:"id"`
	}
	ioDecode(t, r, &l)
	return l.ID
}

func ioPost204(t *testing.T, url string, body any) {
	t.Helper()
	if r := gwtest.Do(t, "POST", url, body); r.Status != http.StatusNoContent {
		t.Fatalf("POST %s: %d %s", url, r.Status, r.Body)
	}
}

func ioRevoke(t *testing.T, g *gwtest.Gateway, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if r := gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+id, nil); r.Status != http.StatusNoContent {
			t.Fatalf("revoke lease %s: %d %s", id, r.Status, r.Body)
		}
	}
}

func ioOneForeignWaiter(mode string) func(ioState) error {
	return func(st ioState) error {
		if len(st.Waiters) != 1 || !st.Waiters[0].Foreign || st.Waiters[0].Mode != mode {
			return fmt.Errorf("want one foreign %s waiter", mode)
		}
		return nil
	}
}

// ioCounts wants holders holding and waiters waiting.
func ioCounts(holders, waiters int) func(ioState) error {
	return func(st ioState) error {
		if len(st.Holders) != holders || len(st.Waiters) != waiters {
			return fmt.Errorf("want %d holding and %d waiting", holders, waiters)
		}
		return nil
	}
}

// interopExclusiveLock: zkgate and a peer (verb: Curator `mutex`, kazoo
// `lock`) take turns on {root}/locks/shared, each blocking the other.
func interopExclusiveLock(t *testing.T, start func(*testing.T, string) *interopPeer, verb, nodeMarker string) {
	g, conn, p := interopStart(t, start)
	const name = "shared"
	stateURL := g.URL + "/v1/locks/" + name
	a, b := ioLease(t, g, "30s", "zkgate-a"), ioLease(t, g, "30s", "zkgate-b")

	// zkgate holds: the peer waits, and the gateway shows it waiting.
	first := ioMustAcquireLock(t, g, name, a, "")
	p.acquire(1, verb, g.Root+"/locks/"+name)
	st := ioWaitState(t, stateURL, func(st ioState) error {
		if len(st.Holders) != 1 || st.Holders[0].Lease != a {
			return fmt.Errorf("want lease %s holding", a)
		}
		return ioOneForeignWaiter("exclusive")(st)
	})
	waiter := st.Waiters[0].Node
	if !strings.Contains(waiter, nodeMarker) {
		t.Fatalf("the %s node is %q: want it to contain %q", p.name, waiter, nodeMarker)
	}
	p.blocked(1)

	// zkgate releases: the peer gets the lock, on the node it waited with.
	ioPost204(t, g.URL+"/v1/locks/"+name+"/release", map[string]any{"lease": a})
	if node := p.acquired(1); node != waiter {
		t.Fatalf("%s acquired with node %q, but waited with %q", p.name, node, waiter)
	}
	st = ioWaitState(t, stateURL, func(st ioState) error {
		if len(st.Holders) != 1 || st.Holders[0].Node != waiter || !st.Holders[0].Foreign || len(st.Waiters) != 0 {
			return fmt.Errorf("want the %s node %s holding alone", p.name, waiter)
		}
		return nil
	})
	// The peer's token is current, zkgate's earlier one is not.
	peerToken := st.Holders[0].Token
	if r := gwtest.Do(t, "GET", fmt.Sprintf("%s/fence?token=%d", stateURL, peerToken), nil); r.Status != http.StatusOK {
		t.Fatalf("fence with the %s holder's token %d: %d %s", p.name, peerToken, r.Status, r.Body)
	}
	if r := gwtest.Do(t, "GET", fmt.Sprintf("%s/fence?token=%d", stateURL, first.Token), nil); r.Status != http.StatusConflict {
		t.Fatalf("fence with the released token %d: %d %s, want 409", first.Token, r.Status, r.Body)
	}

	// The peer holds: zkgate times out, naming the foreign holder.
	holders := ioLockTimesOut(t, g, name, b, "")
	if len(holders) != 1 || holders[0].Node != waiter || !holders[0].Foreign {
		t.Fatalf("the timeout names holders %v: want the foreign %s node %s", holders, p.name, waiter)
	}
	ioWaitState(t, stateURL, func(st ioState) error {
		if len(st.Waiters) != 0 {
			return fmt.Errorf("the timed-out waiter is still queued")
		}
		return nil
	})

	// The peer releases: zkgate gets it, with a larger fencing token.
	p.release(1)
	second := ioMustAcquireLock(t, g, name, b, "")
	if second.Token <= first.Token || second.Token <= peerToken {
		t.Fatalf("fencing tokens must grow: zkgate %d, then %s %d, then zkgate %d", first.Token, p.name, peerToken, second.Token)
	}
	ioPost204(t, g.URL+"/v1/locks/"+name+"/release", map[string]any{"lease": b})

	p.exit()
	ioRevoke(t, g, a, b)
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

func TestInteropCuratorMutex(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	interopExclusiveLock(t, startCuratorPeer, "mutex", "-lock-")
}

func TestInteropKazooLock(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	interopExclusiveLock(t, startKazooPeer, "lock", "__lock__")
}

// ioCuratorAndZkgateTakeTurns: on the read/write lock name (at path), a
// zkgate writer (lease c) waits while a Curator reader of peer p reads,
// and a Curator reader waits while it writes.
func ioCuratorAndZkgateTakeTurns(t *testing.T, g *gwtest.Gateway, p *interopPeer, name, path, c string) {
	t.Helper()
	stateURL := g.URL + "/v1/locks/" + name
	releaseURL := stateURL + "/release"
	// A zkgate writer waits while Curator reads.
	p.acquire(3, "rw-read", path)
	read3 := p.acquired(3)
	w := ioAcquireLockAsync(g, name, c, "write")
	ioWaitState(t, stateURL, func(st ioState) error {
		if len(st.Holders) != 1 || st.Holders[0].Node != read3 {
			return fmt.Errorf("want the Curator reader %s holding", read3)
		}
		if len(st.Waiters) != 1 || st.Waiters[0].Lease != c || st.Waiters[0].Mode != "write" {
			return fmt.Errorf("want lease %s waiting to write", c)
		}
		return nil
	})
	ioNotYet(t, w, "the zkgate write")
	p.release(3)
	if gr := ioGranted(t, w, "the zkgate write"); gr.Mode != "write" {
		t.Fatalf("zkgate write grant: %+v", gr)
	}

	// A Curator reader waits while zkgate writes.
	p.acquire(4, "rw-read", path)
	ioWaitState(t, stateURL, ioOneForeignWaiter("read"))
	p.blocked(4)
	ioPost204(t, releaseURL, map[string]any{"lease": c})
	p.acquired(4)
	p.release(4)
}

func TestInteropCuratorReadWriteLock(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	g, conn, p := interopStart(t, startCuratorPeer)
	const name = "rw"
	path := g.Root + "/locks/" + name
	stateURL := g.URL + "/v1/locks/" + name
	releaseURL := stateURL + "/release"
	a, b, c := ioThreeLeases(t, g)

	// Two zkgate readers and a Curator reader hold together.
	ioMustAcquireLock(t, g, name, a, "read")
	ioMustAcquireLock(t, g, name, b, "read")
	p.acquire(1, "rw-read", path)
	read1 := p.acquired(1)
	if !strings.Contains(read1, "__READ__") {
		t.Fatalf("Curator read node %q", read1)
	}
	ioWaitState(t, stateURL, ioCounts(3, 0))

	// A Curator writer waits for all three readers.
	p.acquire(2, "rw-write", path)
	ioWaitState(t, stateURL, ioOneForeignWaiter("write"))
	p.blocked(2)
	ioPost204(t, releaseURL, map[string]any{"lease": a})
	ioPost204(t, releaseURL, map[string]any{"lease": b})
	ioWaitState(t, stateURL, func(st ioState) error {
		if len(st.Holders) != 1 || st.Holders[0].Node != read1 {
			return fmt.Errorf("want the Curator reader %s holding alone", read1)
		}
		return ioOneForeignWaiter("write")(st)
	})
	p.blocked(2)
	p.release(1)
	write2 := p.acquired(2)
	if !strings.Contains(write2, "__WRIT__") {
		t.Fatalf("Curator write node %q", write2)
	}

	// While Curator writes, a zkgate reader times out naming it.
	holders := ioLockTimesOut(t, g, name, c, "read")
	if len(holders) != 1 || holders[0].Node != write2 || !holders[0].Foreign || holders[0].Mode != "write" {
		t.Fatalf("the timeout names holders %v: want the Curator writer %s", holders, write2)
	}
	p.release(2)

	ioCuratorAndZkgateTakeTurns(t, g, p, name, path, c)

	p.exit()
	ioRevoke(t, g, a, b, c)
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// ioSemaphoreFull: with both slots of the semaphore name (at path, limit
// 2) taken, a zkgate acquire of lease b times out naming the two holders,
// and a Curator acquire of peer p (its lock 2) waits, listed once.
func ioSemaphoreFull(t *testing.T, g *gwtest.Gateway, p *interopPeer, name, path, b string) {
	t.Helper()
	stateURL := g.URL + "/v1/semaphores/" + name
	acquireURL := stateURL + "/acquire?wait="
	r := gwtest.Do(t, "POST", acquireURL+"200ms", map[string]any{"lease": b, "limit": 2})
	var to ioTimeout
	ioDecode(t, r, &to)
	if r.Status != http.StatusConflict || to.Code != "timeout" || len(to.Holders) != 2 {
		t.Fatalf("third acquire: %d %s, want 409 timeout naming 2 holders", r.Status, r.Body)
	}
	p.acquire(2, "semaphore", path, "2")
	ioWaitState(t, stateURL, func(st ioState) error {
		// The waiting Curator is one waiter: its lease- node beyond the
		// limit stands for it, and its admission lock- node (with a UUID of
		// its own) is not listed again.
		if len(st.Holders) != 2 || len(st.Waiters) != 1 {
			return fmt.Errorf("want 2 holders and Curator waiting once")
		}
		for _, w := range st.Waiters {
			if !w.Foreign {
				return fmt.Errorf("want only Curator waiting")
			}
		}
		return nil
	})
	p.blocked(2)
}

func TestInteropCuratorSemaphoreV2(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	g, conn, p := interopStart(t, startCuratorPeer)
	const name = "pool"
	path := g.Root + "/semaphores/" + name
	stateURL := g.URL + "/v1/semaphores/" + name
	acquireURL := stateURL + "/acquire?wait="
	releaseURL := stateURL + "/release"
	a, b, c := ioThreeLeases(t, g)
	body := func(lease string) map[string]any { return map[string]any{"lease": lease, "limit": 2} }

	// One slot to zkgate, one to Curator: both held at once.
	if r := gwtest.Do(t, "POST", acquireURL+"10s", body(a)); r.Status != http.StatusOK {
		t.Fatalf("zkgate semaphore acquire: %d %s", r.Status, r.Body)
	}
	p.acquire(1, "semaphore", path, "2")
	slot1 := p.acquired(1)
	ioWaitState(t, stateURL, func(st ioState) error {
		if len(st.Holders) != 2 || len(st.Waiters) != 0 {
			return fmt.Errorf("want 2 holders")
		}
		if st.Holders[0].Lease != a && st.Holders[1].Lease != a {
			return fmt.Errorf("want lease %s among the holders", a)
		}
		if st.Holders[0].Node != slot1 && st.Holders[1].Node != slot1 {
			return fmt.Errorf("want the Curator slot %s among the holders", slot1)
		}
		return nil
	})

	ioSemaphoreFull(t, g, p, name, path, b)

	// A zkgate acquire queues behind the waiting Curator.
	cw := make(chan ioAsync, 1)
	go func() {
		r, err := gwtest.DoCtx(context.Background(), "POST", acquireURL+"20s", body(c))
		cw <- ioAsync{r, err}
	}()
	ioWaitState(t, stateURL, func(st ioState) error {
		for _, w := range st.Waiters {
			if w.Lease == c {
				return nil
			}
		}
		return fmt.Errorf("want lease %s waiting", c)
	})
	ioNotYet(t, cw, "the zkgate semaphore acquire")

	// zkgate frees a slot: the waiting Curator (first in line) takes it.
	ioPost204(t, releaseURL, map[string]any{"lease": a})
	slot2 := p.acquired(2)
	ioWaitState(t, stateURL, func(st ioState) error {
		if len(st.Holders) != 2 || !st.Holders[0].Foreign || !st.Holders[1].Foreign {
			return fmt.Errorf("want the 2 Curator slots %s, %s holding", slot1, slot2)
		}
		return nil
	})
	ioNotYet(t, cw, "the zkgate semaphore acquire")

	// Curator frees one: zkgate gets it.
	p.release(1)
	ioGranted(t, cw, "the zkgate semaphore acquire")
	ioWaitState(t, stateURL, ioCounts(2, 0))
	ioPost204(t, releaseURL, map[string]any{"lease": c})
	p.release(2)

	p.exit()
	ioRevoke(t, g, a, b, c)
	gwtest.NoZnodesLeft(t, conn, g.Root)
}
