package zkserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zkproxy"
	"github.com/zkgate/zkgate/internal/zk"
)

// requireZooKeeper fails (never skips) the test when ZooKeeper or Java is
// missing: every test of the project depends on a real server.
func requireZooKeeper(t *testing.T) {
	t.Helper()
	if err := Check(Options{}); err != nil {
		t.Fatal(err)
	}
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func startStandalone(t *testing.T, opts Options) *Server {
	t.Helper()
	requireZooKeeper(t)
	s, err := Start(testContext(t, 60*time.Second), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// stateTracker records session states from zk.WithEventCallback, which must
// not block, and lets the test wait for one with a deadline.
type stateTracker struct {
	mu      sync.Mutex
	seen    []zk.State
	changed chan struct{}
}

func newStateTracker() *stateTracker { return &stateTracker{changed: make(chan struct{})} }

func (st *stateTracker) callback(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	st.mu.Lock()
	st.seen = append(st.seen, ev.State)
	close(st.changed)
	st.changed = make(chan struct{})
	st.mu.Unlock()
}

// waitFor waits until state has been seen at least n times in total.
func (st *stateTracker) waitFor(t *testing.T, state zk.State, n int, d time.Duration) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		st.mu.Lock()
		count := 0
		for _, s := range st.seen {
			if s == state {
				count++
			}
		}
		ch := st.changed
		st.mu.Unlock()
		if count >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			st.mu.Lock()
			defer st.mu.Unlock()
			t.Fatalf("no %v (#%d) within %v; states seen: %v", state, n, d, st.seen)
		}
	}
}

// testLogger sends go-zookeeper's log lines to the test log until the test
// ends (logging after that would panic).
type testLogger struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (l *testLogger) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Logf("zk: "+format, args...)
	}
}

func connect(t *testing.T, servers []string, timeout time.Duration) (*zk.Conn, *stateTracker) {
	t.Helper()
	st := newStateTracker()
	logger := &testLogger{t: t}
	conn, _, err := zk.Connect(servers, timeout, zk.WithEventCallback(st.callback), zk.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		logger.mu.Lock()
		logger.done = true
		logger.mu.Unlock()
	})
	st.waitFor(t, zk.StateHasSession, 1, 15*time.Second)
	return conn, st
}

var openACL = zk.WorldACL(zk.PermAll)

// processGone reports whether pid no longer runs. A zombie counts as gone:
// an orphan is reaped by init, which may be slow (or absent) in a container.
func processGone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// Format: pid (comm) state ...; comm may contain spaces and parens.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	return strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

func TestStandalone(t *testing.T) {
	t.Parallel()
	requireZooKeeper(t)
	t0 := time.Now()
	s := startStandalone(t, Options{})
	t.Logf("standalone start-to-ready: %v", time.Since(t0))

	mode, err := s.Mode(testContext(t, 5*time.Second))
	if err != nil || mode != "standalone" {
		t.Fatalf("Mode() = %q, %v; want standalone", mode, err)
	}
	if !s.Running() || s.PID() == 0 {
		t.Fatalf("Running() = %v, PID() = %d", s.Running(), s.PID())
	}
	if reply, err := FourLetterWord(testContext(t, 5*time.Second), s.Addr(), "ruok"); err != nil || reply != "imok" {
		t.Fatalf("ruok = %q, %v", reply, err)
	}

	conn, _ := connect(t, []string{s.Addr()}, 4*time.Second)
	if _, err := conn.Create("/zkserver-test", []byte("hello"), 0, openACL); err != nil {
		t.Fatal(err)
	}
	data, _, err := conn.Get("/zkserver-test")
	if err != nil || string(data) != "hello" {
		t.Fatalf("Get = %q, %v", data, err)
	}
	conn.Close()

	pid, dir := s.PID(), s.DataDir()
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	// Stop from several goroutines at once: one stops, all return nil.
	var wg sync.WaitGroup
	stopErrs := make([]error, 3)
	for i := range stopErrs {
		wg.Go(func() { stopErrs[i] = s.Stop() })
	}
	wg.Wait()
	if err := errors.Join(stopErrs...); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Errorf("pid %d still exists after Stop", pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp data dir %s still there after Stop: %v", dir, err)
	}
	if s.Running() || s.PID() != 0 {
		t.Errorf("after Stop: Running() = %v, PID() = %d", s.Running(), s.PID())
	}
	if _, err := s.Mode(testContext(t, time.Second)); err == nil {
		t.Error("Mode() after Stop succeeded")
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := s.Restart(testContext(t, time.Second)); !errors.Is(err, ErrStopped) {
		t.Errorf("Restart after Stop = %v, want ErrStopped", err)
	}
}

// createEventually retries a create until it succeeds (a retried create may
// find the node made by an attempt whose reply was lost).
func createEventually(t testing.TB, conn *zk.Conn, path string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		_, err := conn.Create(path, nil, 0, openACL)
		if err == nil || errors.Is(err, zk.ErrNodeExists) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("create %s: still failing after %v: %v", path, d, err)
		}
		time.Sleep(50 * time.Millisecond) // retry pacing, not a wait for a condition
	}
}

func TestEnsemble(t *testing.T) {
	t.Parallel()
	requireZooKeeper(t)
	ctx := testContext(t, 90*time.Second)
	t0 := time.Now()
	e, err := StartEnsemble(ctx, 3, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3-node ensemble start-to-ready: %v", time.Since(t0))
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	if got := strings.Split(e.ConnectString(), ","); len(got) != 3 || got[0] != e.Addrs()[0] {
		t.Fatalf("ConnectString() = %q", e.ConnectString())
	}
	pids := oneLeader(ctx, t, e)
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}

	conn, _ := connect(t, e.Addrs(), 4*time.Second)
	if _, err := conn.Create("/ensemble", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	second := loseQuorum(ctx, t, e, conn, leader)

	// One member back: quorum again.
	t1 := time.Now()
	if err := e.Restart(ctx, second); err != nil {
		t.Fatal(err)
	}
	t.Logf("member restart to quorum: %v", time.Since(t1))
	createEventually(t, conn, "/ensemble/after-restart", 20*time.Second)
	if _, err := e.Leader(ctx); err != nil {
		t.Fatal(err)
	}

	for _, s := range e.Servers {
		if s.Running() {
			pids = append(pids, s.PID())
		}
	}
	stopLeavesNothing(t, e, pids)
}

// oneLeader checks that the members of e are one leader and followers, and
// returns their pids.
func oneLeader(ctx context.Context, t *testing.T, e *Ensemble) []int {
	t.Helper()
	var pids []int
	leaders := 0
	for i, s := range e.Servers {
		pids = append(pids, s.PID())
		mode, err := s.Mode(ctx)
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		switch mode {
		case "leader":
			leaders++
		case "follower":
		default:
			t.Fatalf("member %d mode %q", i, mode)
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders, want 1", leaders)
	}
	return pids
}

// loseQuorum kills the leader of e (two of three members keep the quorum),
// then a second member (the survivor stops serving), and returns that
// second member.
func loseQuorum(ctx context.Context, t *testing.T, e *Ensemble, conn *zk.Conn, leader int) int {
	t.Helper()
	if err := e.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if e.Servers[leader].Running() {
		t.Fatal("killed leader still running")
	}
	createEventually(t, conn, "/ensemble/after-leader-kill", 20*time.Second)
	newLeader, err := e.Leader(ctx)
	if err != nil || newLeader == leader {
		t.Fatalf("new leader %d (old %d): %v", newLeader, leader, err)
	}

	second := (leader + 1) % 3
	survivor := 3 - leader - second
	if err := e.Kill(second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := e.Servers[survivor].Mode(ctx)
		if errors.Is(err, ErrNotServing) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("survivor still serving without quorum: %v", err)
		}
		time.Sleep(pollInterval) // retry pacing
	}
	created := make(chan error, 1)
	go func() {
		_, err := conn.Create("/ensemble/without-quorum", nil, 0, openACL)
		created <- err
	}()
	select {
	case err := <-created:
		if err == nil {
			t.Fatal("create succeeded without quorum")
		}
		t.Logf("create without quorum failed as expected: %v", err)
	case <-time.After(2 * time.Second):
		t.Log("create without quorum did not complete within 2s, as expected")
	}
	return second
}

// stopLeavesNothing stops e and checks that none of pids, nor any member's
// data dir, is left.
func stopLeavesNothing(t *testing.T, e *Ensemble, pids []int) {
	t.Helper()
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !processGone(pid) {
			t.Errorf("pid %d still exists after Stop", pid)
		}
	}
	for _, s := range e.Servers {
		if _, err := os.Stat(s.DataDir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("temp data dir %s still there after Stop: %v", s.DataDir(), err)
		}
	}
}

func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	s := startStandalone(t, Options{})
	addr := s.Addr()
	conn, _ := connect(t, []string{addr}, 4*time.Second)
	if _, err := conn.Create("/persistent", []byte("survives"), 0, openACL); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	pid := s.PID()
	// Kill and Stop-safety: concurrent and repeated calls are fine.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- s.Kill() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s.Running() || s.PID() != 0 || !processGone(pid) {
		t.Fatalf("after Kill: Running() = %v, PID() = %d, pid %d gone = %v", s.Running(), s.PID(), pid, processGone(pid))
	}
	if _, err := os.Stat(s.DataDir()); err != nil {
		t.Fatalf("Kill removed the data dir: %v", err)
	}

	if err := s.Restart(testContext(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr {
		t.Fatalf("Addr changed across Restart: %s -> %s", addr, s.Addr())
	}
	conn2, _ := connect(t, []string{s.Addr()}, 4*time.Second)
	data, _, err := conn2.Get("/persistent")
	if err != nil || string(data) != "survives" {
		t.Fatalf("Get after restart = %q, %v", data, err)
	}

	// Restart of a running server: a clean stop and start, data kept.
	if err := s.Restart(testContext(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if mode, err := s.Mode(testContext(t, 5*time.Second)); err != nil || mode != "standalone" {
		t.Fatalf("Mode() = %q, %v", mode, err)
	}
}

func TestCheckNotInstalled(t *testing.T) {
	t.Parallel()
	err := Check(Options{ZooKeeperHome: t.TempDir()})
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Check = %v, want ErrNotInstalled", err)
	}
	if !strings.Contains(err.Error(), "apt-get install -y zookeeper") {
		t.Fatalf("error lacks the install command: %v", err)
	}
	t.Log(err)
	if _, err := Start(context.Background(), Options{ZooKeeperHome: t.TempDir()}); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Start = %v, want ErrNotInstalled", err)
	}
}

func TestSessionExpiresInAboutASecond(t *testing.T) {
	// Not parallel: it times the expiry, which a busy machine would stretch.
	s := startStandalone(t, Options{TickTime: 200 * time.Millisecond})
	proxy := zkproxy.New(t, s.Addr())

	conn, st := connect(t, []string{proxy.Addr()}, time.Second)
	first := conn.SessionID()
	// The server accepted 1s (inside 2..20 ticks): `cons` shows to=1000.
	cons, err := FourLetterWord(testContext(t, 5*time.Second), s.Addr(), "cons")
	if err != nil {
		t.Fatal(err)
	}
	sid := "sid=0x" + strconv.FormatInt(first, 16)
	if !regexp.MustCompile(regexp.QuoteMeta(sid) + `[^)]*to=1000\b`).MatchString(cons) {
		t.Fatalf("no connection with %s and to=1000 in cons:\n%s", sid, cons)
	}
	if _, err := conn.Create("/ephemeral", nil, zk.FlagEphemeral, openACL); err != nil {
		t.Fatal(err)
	}

	observer, _ := connect(t, []string{s.Addr()}, 4*time.Second)
	t0 := time.Now()
	// The server stops hearing from the client: its connections are cut
	// and new ones refused.
	proxy.Refuse(true)
	proxy.Drop()
	for {
		ok, _, err := observer.Exists("/ephemeral")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Since(t0) > 5*time.Second {
			t.Fatal("session did not expire within 5s of losing its client")
		}
		time.Sleep(20 * time.Millisecond) // poll pacing
	}
	elapsed := time.Since(t0)
	t.Logf("session expired %v after its client went silent", elapsed)
	if elapsed > 3*time.Second {
		t.Errorf("expiry took %v, want about a second", elapsed)
	}

	proxy.Refuse(false)
	st.waitFor(t, zk.StateExpired, 1, 10*time.Second)
	st.waitFor(t, zk.StateHasSession, 2, 10*time.Second)
	if conn.SessionID() == first {
		t.Fatal("session ID unchanged after expiry")
	}
}

func TestStartFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	requireZooKeeper(t)
	// Hold a port so ZooKeeper cannot bind it; a fixed ClientPort is not
	// retried, so the bind error comes back.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	_, err = Start(testContext(t, 30*time.Second), Options{ClientPort: port})
	if err == nil {
		t.Fatal("Start on a taken port succeeded")
	}
	t.Log(err)
	if !errors.Is(err, errAddrInUse) {
		t.Errorf("error does not report the bind failure: %v", err)
	}
	m := regexp.MustCompile(`\(pid (\d+), data ([^)]+)\)`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error lacks pid and data dir: %v", err)
	}
	pid, _ := strconv.Atoi(m[1])
	if !processGone(pid) {
		t.Errorf("pid %d still exists after a failed Start", pid)
	}
	if _, err := os.Stat(m[2]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp data dir %s still there after a failed Start: %v", m[2], err)
	}
	if !strings.Contains(err.Error(), "last output lines") {
		t.Errorf("error lacks the JVM's output: %v", err)
	}
}

func TestFreePortRaceIsRetried(t *testing.T) {
	// Not parallel: it sets testHookPortPicked, which every Start calls.
	requireZooKeeper(t)
	// Another process takes the port Start picked before the JVM binds it:
	// Start must notice the bind error and succeed on a fresh port.
	thief := newPortThief(t, func() { testHookPortPicked = nil })
	testHookPortPicked = thief.steal
	s := startStandalone(t, Options{})
	stolen := thief.stolen(t)
	if fmt.Sprint(stolen.Addr().(*net.TCPAddr).Port) == strings.Split(s.Addr(), ":")[1] {
		t.Fatal("server reports the stolen port")
	}
}

// portThief takes the first port it is given that it can listen on,
// holding it until the end of the test, as another process would.
type portThief struct{ l net.Listener }

// newPortThief is a portThief; at the test's end it calls unhook, then
// lets its port go.
func newPortThief(t *testing.T, unhook func()) *portThief {
	p := &portThief{}
	t.Cleanup(func() {
		unhook()
		if p.l != nil {
			p.l.Close()
		}
	})
	return p
}

func (p *portThief) steal(port int) {
	if p.l == nil {
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			p.l = l
		}
	}
}

// stolen is the listener on the port taken; it fails t if none was.
func (p *portThief) stolen(t *testing.T) net.Listener {
	t.Helper()
	if p.l == nil {
		t.Fatal("hook did not steal a port")
	}
	return p.l
}

func TestEnsemblePortRaceIsRetried(t *testing.T) {
	// Not parallel: it sets testHookEnsemblePorts, which every StartEnsemble calls.
	requireZooKeeper(t)
	// Member 1's election port is taken after the first attempt picked it:
	// the ensemble must be relaunched on a fresh set of ports. What is
	// promised is that retry, not a count of attempts: on a loaded machine
	// another process may take a picked port of a later attempt too, which
	// costs one more.
	thief := newPortThief(t, func() { testHookEnsemblePorts = nil })
	attempts, stolenAt := 0, 0
	testHookEnsemblePorts = func(ports []int) {
		attempts++
		thief.steal(ports[2])
		if thief.l != nil && stolenAt == 0 {
			stolenAt = attempts
		}
	}
	e, err := StartEnsemble(testContext(t, 60*time.Second), 3, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	stolen := thief.stolen(t).Addr().(*net.TCPAddr).Port
	t.Logf("%d launch attempts; port %d stolen from the first", attempts, stolen)
	if stolenAt != 1 {
		t.Fatalf("port stolen from attempt %d, want the first", stolenAt)
	}
	if attempts < 2 {
		t.Fatalf("%d launch attempts: the attempt whose port was stolen was not retried", attempts)
	}
	ports := e.Servers[0].servers // every member's peer and election ports
	for _, s := range e.Servers {
		ports += s.Addr() + "\n"
	}
	if regexp.MustCompile(fmt.Sprintf(`:%d\b`, stolen)).MatchString(ports) {
		t.Errorf("the ensemble runs on the stolen port %d:\n%s", stolen, ports)
	}
	if _, err := e.Leader(testContext(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// TestParentDeathKillsServer SIGKILLs a process that started a server (this
// test binary, re-executed) and checks the kernel takes the JVM down too.
func TestParentDeathKillsServer(t *testing.T) {
	t.Parallel()
	if os.Getenv("ZKSERVER_TEST_HELPER") == "1" {
		s, err := Start(context.Background(), Options{})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		fmt.Printf("READY %d %s\n", s.PID(), s.DataDir())
		select {} // wait to be killed
	}
	requireZooKeeper(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestParentDeathKillsServer$")
	cmd.Env = append(os.Environ(), "ZKSERVER_TEST_HELPER=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY ") || strings.HasPrefix(sc.Text(), "ERROR ") {
				lines <- sc.Text()
				break
			}
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(60 * time.Second):
		t.Fatal("helper did not start a server within 60s")
	}
	var pid int
	var dir string
	if _, err := fmt.Sscanf(line, "READY %d %s", &pid, &dir); err != nil {
		t.Fatalf("helper: %q", line)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) }) // a killed parent cannot clean up
	if processGone(pid) {
		t.Fatalf("JVM %d not running before the parent died", pid)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("JVM %d outlived its SIGKILLed parent", pid)
		}
		time.Sleep(20 * time.Millisecond) // poll pacing
	}
}
