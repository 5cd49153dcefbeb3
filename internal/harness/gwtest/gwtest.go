// Package gwtest is the gateway side of zkgate's test harness, built on
// internal/harness/zktest (the shared ZooKeeper, roots, waits, leak checks):
// gateways started the way production starts them (server.Run in-process,
// or the zkgate binary as a child process), HTTP helpers, and the znodes a
// gateway leaves behind.
package gwtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/peer"
	"github.com/zkgate/zkgate/internal/proc"
	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/internal/zkdial"
	"github.com/zkgate/zkgate/kinds"
	"github.com/zkgate/zkgate/server"
	"github.com/zkgate/zkgate/zkserver"
)

// shared is what the tests of one test binary share: the zkgate binary
// and the roots' peer secrets.
var shared struct {
	bin struct {
		once sync.Once
		path string
		dir  string
		err  error
	}
	// peerSecrets are the peer secret files of the roots, one for all the
	// gateways of a root, in dir.
	peerSecrets struct {
		mu    sync.Mutex
		dir   string
		files map[string]string // root -> file
	}
}

// Main runs the tests of a package and then stops what the harness started.
// Use it as: func TestMain(m *testing.M) { gwtest.Main(m) }.
func Main(m *testing.M) {
	code := zktest.Run(m)
	if shared.bin.dir != "" {
		os.RemoveAll(shared.bin.dir)
	}
	if shared.peerSecrets.dir != "" {
		os.RemoveAll(shared.peerSecrets.dir)
	}
	os.Exit(code)
}

// ZK returns the shared standalone ZooKeeper (see zktest.Shared).
func ZK(t testing.TB) *zkserver.Server { return zktest.Shared(t) }

// OwnZK starts a ZooKeeper for one test, which it may stop, restart or
// pause, stopped at its end (see zktest.Own).
func OwnZK(t testing.TB) *zkserver.Server { return zktest.Own(t) }

// UniqueRoot returns a fresh root znode for one test.
func UniqueRoot(t testing.TB) string { return zktest.UniqueRoot(t) }

// GatewayOptions configure a test gateway; zero values get test defaults.
type GatewayOptions struct {
	ZK             []string      // default: the shared ZooKeeper
	Root           string        // default: UniqueRoot
	SessionTimeout time.Duration // default 2s
	MaxWait        time.Duration // default 1m
	MaxTTL         time.Duration // default 1h
	// DrainTimeout is --drain-timeout; the default, 0, closes at once
	// (tests stop many gateways and need not wait for their holders).
	DrainTimeout time.Duration
	// Embedded runs the gateway on its own embedded ZooKeeper (no --zk).
	// DataDir is --data-dir (default: a temp dir of its own): the embedded
	// ZooKeeper's data, the sessions a handover saves for the next start, and
	// (with Handover) the record of each session that a start after a kill
	// resumes.
	Embedded bool
	DataDir  string
	// Handover turns --handover on: on SIGTERM the gateway hands its leases
	// over instead of ending them, and it records them ahead for a start
	// after a kill. Off by default: tests that stop gateways expect their
	// leases to end.
	Handover bool
	Extra    []string // more flags
	// Env is the gateway's environment (ZKGATE_*, OTEL_*): the in-process
	// gateway's getenv, the process's variables besides the test's own.
	Env map[string]string
	// PeerSecretFile is --peer-secret-file; by default every gateway of a
	// root gets the same one, made for the root, so that the gateways of a
	// test prove themselves to each other. NoPeerSecret starts the gateway
	// without one (as does a --peer-secret-file in Extra).
	PeerSecretFile string
	NoPeerSecret   bool
	// Client polls /readyz (default http.DefaultClient); a gateway serving
	// HTTPS needs one that trusts its certificate.
	Client *http.Client
}

func (o *GatewayOptions) defaults(t testing.TB) {
	if len(o.ZK) == 0 && !o.Embedded {
		o.ZK = []string{ZK(t).Addr()}
	}
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	if o.Root == "" {
		o.Root = UniqueRoot(t)
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 2 * time.Second
	}
	if o.MaxWait == 0 {
		o.MaxWait = time.Minute
	}
	if o.MaxTTL == 0 {
		o.MaxTTL = time.Hour
	}
	if o.PeerSecretFile == "" && !o.NoPeerSecret && !slices.Contains(o.Extra, "--peer-secret-file") {
		o.PeerSecretFile = PeerSecretFile(t, o.Root)
	}
}

// PeerSecretFile returns the peer secret file of root, made on first use:
// the one every gateway of root gets unless told otherwise.
func PeerSecretFile(t testing.TB, root string) string {
	t.Helper()
	ps := &shared.peerSecrets
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if f, ok := ps.files[root]; ok {
		return f
	}
	if ps.dir == "" {
		dir, err := os.MkdirTemp("", "zkgate-peer-secrets-")
		if err != nil {
			t.Fatalf("peer secret: %v", err)
		}
		ps.dir, ps.files = dir, map[string]string{}
	}
	secret, err := peer.NewSecret()
	if err != nil {
		t.Fatalf("peer secret: %v", err)
	}
	f := filepath.Join(ps.dir, strings.ReplaceAll(strings.TrimPrefix(root, "/"), "/", "_"))
	if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatalf("peer secret: %v", err)
	}
	ps.files[root] = f
	return f
}

func (o GatewayOptions) args() []string {
	args := []string{"--listen", "127.0.0.1:0", "--root", o.Root,
		"--session-timeout", o.SessionTimeout.String(), "--max-wait", o.MaxWait.String(),
		"--max-ttl", o.MaxTTL.String(), "--drain-timeout", o.DrainTimeout.String(), "--log-level", "warn",
		"--data-dir", o.DataDir, "--handover=" + strconv.FormatBool(o.Handover)}
	if !o.Embedded {
		args = append(args, "--zk", strings.Join(o.ZK, ","))
	} else {
		// The embedded ZooKeeper admits the gateway alone: its client
		// credentials are written where the test can read them.
		args = append(args, "--embedded-zk-credentials", filepath.Join(o.DataDir, "zk-credentials"))
	}
	if o.PeerSecretFile != "" {
		args = append(args, "--peer-secret-file", o.PeerSecretFile)
	}
	return append(args, o.Extra...)
}

// Gateway is a running test gateway.
type Gateway struct {
	URL  string
	Root string
	ZK   []string

	stop func()
	once sync.Once
}

// Stop shuts the gateway down gracefully and waits for it.
func (g *Gateway) Stop() { g.once.Do(g.stop) }

// StartGateway runs server.Run in-process, as `zkgate serve` does, and
// waits until it answers /readyz. It stops at the end of the test.
func StartGateway(t testing.TB, opts GatewayOptions) *Gateway {
	t.Helper()
	opts.defaults(t)
	cfg, err := server.ParseConfig(opts.args(), func(k string) string { return opts.Env[k] }, io.Discard)
	if err != nil {
		t.Fatalf("gateway config: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	stdout := &lineWatcher{prefix: "zkgate listening on ", found: addr}
	logs := &testLog{t: t}
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg, stdout, logs) }()
	var url string
	select {
	case url = <-addr:
	case err := <-done:
		cancel()
		t.Fatalf("gateway did not start: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("gateway did not start within 60s")
	}
	g := &Gateway{URL: url, Root: opts.Root, ZK: opts.ZK}
	g.stop = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("gateway run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("gateway did not stop within 30s")
		}
		logs.stop()
	}
	t.Cleanup(g.Stop)
	WaitReadyWith(t, opts.Client, url, within30)
	return g
}

const within30 = 30 * time.Second

// WaitReady polls /readyz until it answers 200.
func WaitReady(t testing.TB, url string, within time.Duration) {
	t.Helper()
	WaitReadyWith(t, nil, url, within)
}

// WaitReadyWith is WaitReady with a client of its own (nil: the default).
func WaitReadyWith(t testing.TB, client *http.Client, url string, within time.Duration) {
	t.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	Eventually(t, within, func() error {
		resp, err := client.Get(url + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
}

// Receive returns what comes on ch, or fails the test, naming what it
// waited for, if nothing comes within.
func Receive[T any](t testing.TB, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("%s: not within %s", what, within)
		var zero T
		return zero
	}
}

// Ensemble starts a ZooKeeper ensemble of three (sessions up to 30s),
// stopped at the test's end.
func Ensemble(t testing.TB, ctx context.Context) *zkserver.Ensemble {
	t.Helper()
	ens, err := zkserver.StartEnsemble(ctx, 3, zkserver.Options{MaxSessionTimeout: 30 * time.Second, ContainerMaxPerMinute: zktest.Options().ContainerMaxPerMinute})
	if err != nil {
		t.Fatalf("ensemble: %v", err)
	}
	t.Cleanup(func() { _ = ens.Stop() })
	return ens
}

// Leader is the index of ens's leader in its Addrs.
func Leader(t testing.TB, ctx context.Context, ens *zkserver.Ensemble) int {
	t.Helper()
	leader, err := ens.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return leader
}

// Eventually polls fn until it returns nil or within elapses.
func Eventually(t testing.TB, within time.Duration, fn func() error) {
	t.Helper()
	zktest.Eventually(t, within, fn)
}

type lineWatcher struct {
	mu     sync.Mutex
	buf    []byte
	prefix string
	found  chan string
	done   bool
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if rest, ok := strings.CutPrefix(line, w.prefix); ok {
			addr, _, _ := strings.Cut(rest, " ")
			w.found <- addr
			w.done = true
			return len(p), nil
		}
	}
}

// testLog forwards the gateway's log lines to t.Log until the test ends,
// and keeps them when keep is set.
type testLog struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
	keep    bool
	kept    bytes.Buffer
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keep {
		l.kept.Write(p)
	}
	if !l.stopped {
		l.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kept.String()
}

func (l *testLog) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}

// Client returns a go-zookeeper connection with a live session, closed at
// the end of the test.
func Client(t testing.TB, servers []string, timeout time.Duration) *zk.Conn {
	t.Helper()
	return zktest.Connect(t, servers, timeout)
}

// inSkeleton reports whether the child k of the root is one of the
// persistent nodes a gateway makes under it: the leases' own, and one per
// kind of primitive.
func inSkeleton(k string) bool {
	_, ok := kinds.ByName(k)
	return ok || k == "leases" || k == "gateways" || k == "delays"
}

// Znodes lists every znode under root except the root's persistent
// skeleton, the gateways' own registrations and the lease history (kept,
// by design, for a while after each lease, and swept later).
func Znodes(conn *zk.Conn, root string) ([]string, error) {
	out, err := zktest.Tree(conn, root, func(child string) bool {
		k, ok := strings.CutPrefix(child, root+"/")
		return ok && (k == "gateways" || k == "history")
	})
	out = slices.DeleteFunc(out, func(n string) bool {
		k, ok := strings.CutPrefix(n, root+"/")
		return ok && inSkeleton(k)
	})
	sort.Strings(out)
	return out, err
}

// NoZnodesLeft waits until nothing but the skeleton is left under root:
// leases, lock nodes, waiters, and the CONTAINER parents that ZooKeeper
// removes once empty (tests run it with a 100ms container check).
func NoZnodesLeft(t testing.TB, conn *zk.Conn, root string) {
	t.Helper()
	Eventually(t, 10*time.Second, func() error {
		nodes, err := Znodes(conn, root)
		if err != nil {
			return err
		}
		if len(nodes) > 0 {
			return fmt.Errorf("%d znodes left under %s: %v", len(nodes), root, head(nodes, 10))
		}
		return nil
	})
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// NoGoroutinesLeft is zktest.NoGoroutinesLeft: at the end of the test,
// as many goroutines as now at most.
func NoGoroutinesLeft(t testing.TB) {
	t.Helper()
	zktest.NoGoroutinesLeft(t)
}

// FreeAddr returns a loopback host:port nobody listens on now, for a
// gateway that must keep its address across restarts.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// StartChecked starts a gateway for a test that must leave no goroutine
// behind (NoGoroutinesLeft), with a client of its ZooKeeper for checking
// that it leaves no znode either (NoZnodesLeft).
func StartChecked(t testing.TB, opts GatewayOptions) (*Gateway, *zk.Conn) {
	t.Helper()
	NoGoroutinesLeft(t)
	g := StartGateway(t, opts)
	return g, Client(t, g.ZK, 5*time.Second)
}

// Response is an HTTP answer read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map.
func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not a JSON object (%v): %s", err, r.Body)
	}
	return m
}

// Do sends a request with a JSON (or raw []byte) body and reads the answer.
func Do(t testing.TB, method, url string, body any) Response {
	t.Helper()
	resp, err := DoCtx(context.Background(), method, url, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp
}

// DoCtx is Do without a test, for goroutines and cancellation.
func DoCtx(ctx context.Context, method, url string, body any) (Response, error) {
	var rd io.Reader
	ct := ""
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
		ct = "application/octet-stream"
	case string:
		rd = strings.NewReader(b)
		ct = "application/json"
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return Response{}, err
		}
		rd = bytes.NewReader(data)
		ct = "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return Response{}, err
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	return Send(http.DefaultClient, req)
}

// Send sends req with c and reads the answer whole.
func Send(c *http.Client, req *http.Request) (Response, error) {
	resp, err := c.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: data}, err
}

// MustSend sends req with c and reads the answer as far as it can be
// read; a request that gets no answer fails the test.
func MustSend(t testing.TB, c *http.Client, req *http.Request) Response {
	t.Helper()
	r, err := Send(c, req)
	if err != nil && r.Status == 0 {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	return r
}

// Binary builds cmd/zkgate once per test binary and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	b := &shared.bin
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "zkgate-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.dir = dir
		b.path = filepath.Join(dir, "zkgate")
		root, err := moduleRoot()
		if err != nil {
			b.err = err
			return
		}
		cmd := exec.Command("go", "build", "-o", b.path, "./cmd/zkgate")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatalf("build zkgate: %v", b.err)
	}
	return b.path
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// Proc is a gateway running as a child process.
type Proc struct {
	URL  string
	Root string
	ZK   string // the ZooKeeper connect string it printed (the embedded one's address)
	// ZKTLS connects to its embedded ZooKeeper (nil with --zk): the client
	// credentials it wrote (--embedded-zk-credentials).
	ZKTLS *tls.Config
	cmd   *exec.Cmd
	done  chan struct{}
	logs  *testLog
}

// StartProcess runs the zkgate binary with opts and waits until it is ready.
// It is killed at the end of the test if still running.
func StartProcess(t testing.TB, opts GatewayOptions) *Proc {
	t.Helper()
	opts.defaults(t)
	var env []string // nil: this process's
	if len(opts.Env) > 0 {
		env = os.Environ()
		for k, v := range opts.Env {
			env = append(env, k+"="+v)
		}
	}
	p := start(t, append([]string{"serve"}, opts.args()...), env, opts.Client)
	p.Root = opts.Root
	if opts.Embedded {
		host, _, _ := net.SplitHostPort(p.ZK)
		var err error
		if p.ZKTLS, err = zkserver.LoadClientCredentials(filepath.Join(opts.DataDir, "zk-credentials"), host); err != nil {
			t.Fatalf("the embedded ZooKeeper's client credentials: %v", err)
		}
	}
	return p
}

// StartArgs runs the zkgate binary with exactly args (serve and its flags)
// and the environment env alone, as a container runtime runs a pod's
// container, and waits until it is ready (/readyz, polled with client: nil
// is the default). It is killed at the end of the test if still running.
func StartArgs(t testing.TB, args, env []string, client *http.Client) *Proc {
	t.Helper()
	return start(t, args, env, client)
}

// start runs the binary with args and env (nil: this process's) and waits
// until it is ready.
func start(t testing.TB, args, env []string, client *http.Client) *Proc {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &testLog{t: t, keep: true}
	cmd.Stderr = logs
	// In the test's process group (a terminal's Ctrl-C reaches it), and
	// killed with the test binary on Linux, so that none outlives a crash.
	if err := proc.Start(cmd, false); err != nil {
		t.Fatalf("start zkgate: %v", err)
	}
	p := &Proc{cmd: cmd, done: make(chan struct{}), logs: logs}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "zkgate listening on "); ok {
				u, more, _ := strings.Cut(rest, " ")
				if zkPart, ok := strings.CutPrefix(more, "(ZooKeeper "); ok {
					p.ZK, _, _ = strings.Cut(zkPart, ",")
				}
				addr <- u
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		logs.stop()
	})
	select {
	case p.URL = <-addr:
	case <-p.done:
		t.Fatalf("zkgate exited before serving")
	case <-time.After(60 * time.Second):
		t.Fatalf("zkgate did not serve within 60s")
	}
	WaitReadyWith(t, client, p.URL, within30)
	return p
}

// ZKClient connects to the gateway's ZooKeeper as the gateway does (over
// TLS, with the embedded ZooKeeper's client certificate); closed when the
// test ends.
func (p *Proc) ZKClient(t testing.TB, timeout time.Duration) *zk.Conn {
	t.Helper()
	conn, err := zkdial.DialTLS(context.Background(), []string{p.ZK}, timeout, p.ZKTLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// Terminate sends SIGTERM and returns at once (see Signal to wait).
func (p *Proc) Terminate() { _ = p.cmd.Process.Signal(syscall.SIGTERM) }

// Drain sends SIGTERM and waits until /readyz answers 503: the gateway
// drains, and is not gone yet while anything holds it.
func (p *Proc) Drain(t testing.TB) {
	t.Helper()
	p.Terminate()
	Eventually(t, 10*time.Second, func() error {
		if r := Do(t, "GET", p.URL+"/readyz", nil); r.Status != http.StatusServiceUnavailable {
			return fmt.Errorf("readyz %d", r.Status)
		}
		return nil
	})
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Logs is what the process wrote to stderr so far (its log).
func (p *Proc) Logs() string { return p.logs.String() }

// Send sends sig and returns at once.
func (p *Proc) Send(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL: no graceful anything, as in a crash.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Signal sends sig and waits for the exit, bounded.
func (p *Proc) Signal(t testing.TB, sig os.Signal, within time.Duration) {
	t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("zkgate did not exit within %s of %v", within, sig)
	}
}

// Exited reports whether the process has exited, and its exit code.
func (p *Proc) Exited() (bool, int) {
	select {
	case <-p.done:
		return true, p.cmd.ProcessState.ExitCode()
	default:
		return false, 0
	}
}

// FencedRegister plays the storage that lock holders write to: it refuses a
// write whose fencing token is older than the newest it has accepted for
// that lock, and records when each holder entered and left its critical
// section, so that a test can check that no two holders of one lock ever
// acted at once. Enter is called once the grant has arrived, Exit just
// before the release is sent: the next holder cannot be granted before
// that, so any overlap of the recorded spans is a real double grant.
type FencedRegister struct {
	mu     sync.Mutex
	newest map[string]int64
	spans  map[string][]Span
	open   map[string]*Span
	stale  []string
}

// Span is one holder's time in its critical section.
type Span struct {
	Who         string
	Token       int64
	Enter, Exit time.Time
}

// NewFencedRegister returns an empty register.
func NewFencedRegister() *FencedRegister {
	return &FencedRegister{newest: map[string]int64{}, spans: map[string][]Span{}, open: map[string]*Span{}}
}

// Enter records who entering lock with token, and writes with it.
func (r *FencedRegister) Enter(lock, who string, token int64) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if token <= r.newest[lock] {
		r.stale = append(r.stale, fmt.Sprintf("%s wrote to %s with token %d, not above %d", who, lock, token, r.newest[lock]))
	} else {
		r.newest[lock] = token
	}
	r.open[lock+"\x00"+who] = &Span{Who: who, Token: token, Enter: now}
}

// Exit records who leaving lock.
func (r *FencedRegister) Exit(lock, who string) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.open[lock+"\x00"+who]; s != nil {
		s.Exit = now
		r.spans[lock] = append(r.spans[lock], *s)
		delete(r.open, lock+"\x00"+who)
	}
}

// Check fails t if a write was refused as stale, or if two spans of one
// lock overlap; it returns the number of spans checked.
func (r *FencedRegister) Check(t testing.TB) int {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.stale {
		t.Errorf("fenced write refused: %s", s)
	}
	n := 0
	for lock, spans := range r.spans {
		sorted := append([]Span(nil), spans...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].Enter.Before(sorted[j].Enter) })
		for i := 1; i < len(sorted); i++ {
			prev, cur := sorted[i-1], sorted[i]
			if cur.Enter.Before(prev.Exit) {
				t.Errorf("%s: %s (token %d) entered %s before %s (token %d) left", lock, cur.Who, cur.Token,
					prev.Exit.Sub(cur.Enter), prev.Who, prev.Token)
			}
			if cur.Token <= prev.Token {
				t.Errorf("%s: token %d granted after %d", lock, cur.Token, prev.Token)
			}
		}
		n += len(sorted)
	}
	return n
}

// Pause stops the process with SIGSTOP (it keeps its sockets and memory,
// as a gateway frozen by a long GC pause or a stopped VM would), and
// returns once every thread of it has stopped: until then it still
// answers requests (see proc.Stopped).
func (p *Proc) Pause(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("pause zkgate: %v", err)
	}
	Eventually(t, 10*time.Second, func() error {
		if exited, code := p.Exited(); exited {
			t.Fatalf("zkgate exited (%d) instead of pausing", code)
		}
		stopped, err := proc.Stopped(p.Pid())
		if err == nil && !stopped {
			err = errors.New("zkgate is not stopped yet")
		}
		return err
	})
}

// Resume continues a paused process with SIGCONT.
func (p *Proc) Resume() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }
