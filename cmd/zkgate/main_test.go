package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/proc"
	"github.com/zkgate/zkgate/server"
	"github.com/zkgate/zkgate/zkserver"
)

func TestMain(m *testing.M) { gwtest.Main(m) }

// javaProcessesUsing lists the PIDs of processes whose command line or
// working files mention dir (the embedded ZooKeeper's config lives there).
func javaProcessesUsing(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, []byte(dir)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestServeEmbedded runs `zkgate serve` through run() on its embedded
// ZooKeeper: it answers /readyz 200, serves a lock, and a graceful shutdown
// ends a waiting request and leaves no process behind.
func TestServeEmbedded(t *testing.T) {
	t.Parallel()
	if err := zkserver.Check(zkserver.Options{}); err != nil {
		t.Fatal(err) // loudly, with the install command: never a skip
	}
	dataDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr := &gwtest.Buffer{}, &gwtest.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"zkgate", "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir}, func(string) string { return "" }, stdout, stderr)
	}()
	var url string
	gwtest.Eventually(t, 60*time.Second, func() error {
		select {
		case err := <-done:
			t.Fatalf("run ended early: %v\n%s", err, stderr.String())
		default:
		}
		for _, line := range strings.Split(stdout.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "zkgate listening on http://"); ok {
				addr, _, _ := strings.Cut(rest, " ")
				url = "http://" + addr
				return nil
			}
		}
		return errors.New("not listening yet")
	})
	gwtest.WaitReady(t, url, 30*time.Second)
	if pids := javaProcessesUsing(dataDir); len(pids) == 0 {
		t.Fatalf("no embedded ZooKeeper process found using %s", dataDir)
	}

	holder := gwtest.Do(t, "POST", url+"/v1/locks/shutdown/acquire", map[string]any{"ttl": "1m", "holder": "h"})
	if holder.Status != 200 {
		t.Fatalf("acquire: %d %s", holder.Status, holder.Body)
	}
	waiting := make(chan gwtest.Response, 1)
	go func() {
		r, _ := gwtest.DoCtx(context.Background(), "POST", url+"/v1/locks/shutdown/acquire?wait=5m", map[string]any{"ttl": "1m"})
		waiting <- r
	}()
	gwtest.Eventually(t, 10*time.Second, func() error {
		r := gwtest.Do(t, "GET", url+"/v1/locks/shutdown", nil)
		if !strings.Contains(string(r.Body), `"waiters":[{`) {
			return fmt.Errorf("no waiter yet: %s", r.Body)
		}
		return nil
	})

	start := time.Now()
	cancel() // as SIGTERM does through signal.NotifyContext
	awaitNoError(t, done, "graceful shutdown (run)")
	w := <-waiting
	if w.Status != http.StatusServiceUnavailable {
		t.Fatalf("a wait ended by shutdown should answer 503, got %d %s", w.Status, w.Body)
	}
	t.Logf("shutdown took %s", time.Since(start).Round(time.Millisecond))
	gwtest.Eventually(t, 10*time.Second, func() error {
		if pids := javaProcessesUsing(dataDir); len(pids) > 0 {
			return fmt.Errorf("processes still running: %v", pids)
		}
		return nil
	})
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Fatal("still serving after shutdown")
	}
}

// TestBadCommandLine: bad input is one clear line and a usage error (exit 2).
func TestBadCommandLine(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--bogus"}, "flag provided but not defined"},
		{[]string{"serve", "--zk", "zk1"}, "is not host:port"},
		{[]string{"serve", "--zk", "zk1:notaport"}, "no valid port"},
		{[]string{"serve", "--zk", "a:1,,b:2"}, "is not host:port"},
		{[]string{"serve", "--data-dir", filepath.Join(file, "sub")}, "--data-dir"},
		{[]string{"serve", "--root", "relative"}, "--root"},
		{[]string{"serve", "--root", "/zookeeper/x"}, "reserves"},
		{[]string{"serve", "--session-timeout", "soon"}, "--session-timeout"},
		{[]string{"serve", "--max-wait", "-1s"}, "--max-wait"},
		{[]string{"serve", "--max-item-bytes", "2MiB"}, "1 MiB"},
		{[]string{"serve", "--log-format", "xml"}, "--log-format"},
		{[]string{"serve", "--listen", "nope"}, "--listen"},
		{[]string{"serve", "extra"}, "unexpected argument"},
		{[]string{"frobnicate"}, "unknown command"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), append([]string{"zkgate"}, c.args...), func(string) string { return "" }, &out, &errOut)
			var usage *server.UsageError
			if !errors.As(err, &usage) {
				t.Fatalf("want a usage error, got %v", err)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q should be one line mentioning %q", err, c.want)
			}
		})
	}
}

// TestEnvironmentTwins: every flag has a ZKGATE_* twin; flags win.
func TestEnvironmentTwins(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"ZKGATE_LISTEN": "127.0.0.1:9999", "ZKGATE_ZK": "a:1,b:2", "ZKGATE_ROOT": "/other",
		"ZKGATE_SESSION_TIMEOUT": "3s", "ZKGATE_MAX_WAIT": "1m", "ZKGATE_MAX_TTL": "2h",
		"ZKGATE_MAX_ITEM_BYTES": "1KiB", "ZKGATE_LOG_FORMAT": "json",
	}
	cfg, err := server.ParseConfig([]string{"--root", "/flag"}, func(k string) string { return env[k] }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9999" || len(cfg.ZK) != 2 || cfg.Root != "/flag" || cfg.SessionTimeout != 3*time.Second ||
		cfg.MaxWait != time.Minute || cfg.MaxTTL != 2*time.Hour || cfg.MaxItemBytes != 1024 || cfg.LogFormat != "json" {
		t.Fatalf("config %+v", cfg)
	}
}

// TestBinarySignalsAndExitCodes: the built binary exits 2 on a bad command
// line, and on SIGTERM shuts down with 0 leaving no ZooKeeper behind.
func TestBinarySignalsAndExitCodes(t *testing.T) {
	t.Parallel()
	bin := gwtest.Binary(t)
	bad := exec.Command(bin, "serve", "--zk", "nope")
	out, err := bad.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Fatalf("bad flag: err %v, output %q; want exit 2 and one line", err, out)
	}

	dataDir := t.TempDir()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	listening := make(chan string, 1)
	go proc.AnnouncedURL(stdout, listening)
	var url string
	select {
	case url = <-listening:
	case <-time.After(60 * time.Second):
		t.Fatal("the binary did not serve within 60s")
	}
	gwtest.WaitReady(t, url, 30*time.Second)
	if len(javaProcessesUsing(dataDir)) == 0 {
		t.Fatal("no embedded ZooKeeper found")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	awaitNoError(t, done, "exit after SIGTERM")
	gwtest.Eventually(t, 10*time.Second, func() error {
		if pids := javaProcessesUsing(dataDir); len(pids) > 0 {
			return fmt.Errorf("left running: %v", pids)
		}
		return nil
	})
}

// TestVersion: zkgate version and zkgate --version print the build's one
// line, with the commit and date a release stamps in.
func TestVersion(t *testing.T) {
	t.Parallel()
	defer func(v, c, d string) { server.Version, server.Commit, server.Date = v, c, d }(server.Version, server.Commit, server.Date)
	server.Version, server.Commit, server.Date = "1.2.3", "0123abc", "2026-01-02T03:04:05Z"
	for _, arg := range []string{"version", "--version"} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), []string{"zkgate", arg}, func(string) string { return "" }, &out, &errOut); err != nil {
			t.Fatalf("zkgate %s: %v", arg, err)
		}
		if want := "zkgate 1.2.3 (commit 0123abc, built 2026-01-02T03:04:05Z)\n"; out.String() != want {
			t.Fatalf("zkgate %s printed %q, want %q", arg, out.String(), want)
		}
	}
}

// TestNoZooKeeperToEmbed: a gateway without --zk on a machine without Java
// (a container image) says how to name an ensemble instead.
func TestNoZooKeeperToEmbed(t *testing.T) {
	// Serial: sets the environment (t.Setenv).
	t.Setenv("PATH", t.TempDir())
	t.Setenv("JAVA_HOME", "")
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"zkgate", "serve", "--data-dir", t.TempDir()}, func(string) string { return "" }, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "--zk host:port") || !strings.Contains(err.Error(), "ZKGATE_ZK") {
		t.Fatalf("serve without Java: %v", err)
	}
}

// awaitNoError fails t unless done yields nil within 30s; what names the
// end awaited.
func awaitNoError(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not within 30s", what)
	}
}
