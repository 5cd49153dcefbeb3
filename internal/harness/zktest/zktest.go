// Package zktest is the ZooKeeper side of zkgate's test harness: one real
// standalone ZooKeeper shared by the tests of a test binary (each test
// under a root of its own), servers of a test's own for tests that stop
// them, connections, znode listings, waits with a deadline and a goroutine
// leak check. It knows nothing of the gateway (see internal/harness/gwtest) and
// never skips a test: a missing ZooKeeper fails it loudly.
package zktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/internal/zkdial"
	"github.com/zkgate/zkgate/zkserver"
)

// shared is the standalone ZooKeeper that the tests of one test binary
// share.
var shared struct {
	once sync.Once
	srv  *zkserver.Server
	err  error
}

// Run runs the tests of a package, stops the shared server if one was
// started, and returns the exit code. Use it as:
// func TestMain(m *testing.M) { os.Exit(zktest.Run(m)) }.
func Run(m *testing.M) int {
	code := m.Run()
	if shared.srv != nil {
		_ = shared.srv.Stop()
	}
	return code
}

// Options are those of every test server: a short tick, so that session
// timeouts (and expiry tests) are short, and the empty CONTAINER parents
// collected unpaced: at ZooKeeper's 10,000 a minute, the 2,200 a handover
// test leaves took 13 s, and another test's wait for its own to go
// (gwtest.NoZnodesLeft, 10 s) ran out behind them.
func Options() zkserver.Options {
	return zkserver.Options{MinSessionTimeout: 400 * time.Millisecond, MaxSessionTimeout: time.Minute, ContainerMaxPerMinute: 6_000_000}
}

// Shared returns the shared standalone ZooKeeper, starting it on first
// use. A missing ZooKeeper fails the test with the command that installs
// it: it is never skipped.
func Shared(t testing.TB) *zkserver.Server {
	t.Helper()
	shared.once.Do(func() {
		if err := zkserver.Check(zkserver.Options{}); err != nil {
			shared.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		shared.srv, shared.err = zkserver.Start(ctx, Options())
	})
	if shared.err != nil {
		t.Fatalf("ZooKeeper is needed by this test and could not be started: %v", shared.err)
	}
	return shared.srv
}

// Own starts a ZooKeeper server for one test (one the test may stop or
// pause), stopped at its end.
func Own(t testing.TB) *zkserver.Server {
	t.Helper()
	Shared(t) // the same loud failure when ZooKeeper is missing
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := zkserver.Start(ctx, Options())
	if err != nil {
		t.Fatalf("start ZooKeeper: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// UniqueRoot returns a fresh root znode for one test, named after it.
func UniqueRoot(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
	if len(name) > 60 {
		name = name[:60]
	}
	return "/t-" + name + "-" + hex.EncodeToString(b[:])
}

// Connect returns a go-zookeeper connection with a live session, closed at
// the end of the test; no servers means the shared one.
func Connect(t testing.TB, servers []string, timeout time.Duration) *zk.Conn {
	t.Helper()
	if len(servers) == 0 {
		servers = []string{Shared(t).Addr()}
	}
	conn, err := zkdial.Dial(context.Background(), servers, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// Tree lists every znode below p (p excluded), depth first, children in
// the server's order, but not below a child for which skip returns true
// (nil skips nothing).
func Tree(conn *zk.Conn, p string, skip func(child string) bool) ([]string, error) {
	var out []string
	var walk func(string) error
	walk = func(p string) error {
		kids, _, err := conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, k := range kids {
			child := p + "/" + k
			if skip != nil && skip(child) {
				continue
			}
			out = append(out, child)
			if err := walk(child); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(p)
}

// WatchCount is the number of watches, data and child, that ZooKeeper at
// addr keeps for all its sessions (mntr's zk_watch_count).
func WatchCount(t testing.TB, addr string) int {
	t.Helper()
	out, err := zkserver.FourLetterWord(context.Background(), addr, "mntr")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "zk_watch_count\t"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("mntr: %q", line)
			}
			return n
		}
	}
	t.Fatalf("mntr has no zk_watch_count:\n%s", out)
	return 0
}

// DataWatches lists the paths of the data watches (getData's and exists')
// that ZooKeeper at addr keeps for session id: wchc dumps those alone.
func DataWatches(t testing.TB, addr string, id int64) []string {
	t.Helper()
	out, err := zkserver.FourLetterWord(context.Background(), addr, "wchc")
	if err != nil {
		t.Fatal(err)
	}
	session := "0x" + strconv.FormatUint(uint64(id), 16)
	var paths []string
	mine := false
	for _, line := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(line, "\t"); ok {
			if mine {
				paths = append(paths, p)
			}
			continue
		}
		mine = strings.TrimSpace(line) == session
	}
	return paths
}

// Eventually polls fn, backing off from 5ms to 200ms, until it returns nil,
// and fails the test with its last error once within has passed.
func Eventually(t testing.TB, within time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	delay := 5 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %v", within, err)
		}
		time.Sleep(delay)
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// NoGoroutinesLeft records the goroutine count now and, at the end of the
// test (after later cleanups, such as closing services and gateways, have
// run), waits until it is back to at most that. The count is the whole
// binary's: a test that uses it runs alone, not in parallel.
func NoGoroutinesLeft(t testing.TB) {
	t.Helper()
	Shared(t) // the shared server's own goroutines live as long as the test binary
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		deadline := time.Now().Add(10 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("%d goroutines left over (before %d):\n%s", n-before, before, buf)
				return
			}
			time.Sleep(20 * time.Millisecond)
			http.DefaultClient.CloseIdleConnections()
		}
	})
}
