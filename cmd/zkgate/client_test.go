package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/server"
)

// cliGateway starts a gateway for the tests of the client commands, with
// the default session timeout of a real gateway (10s): the commands'
// default --kill-grace must fit in the deadlines it promises.
func cliGateway(t *testing.T) *gwtest.Gateway {
	t.Helper()
	return gwtest.StartGateway(t, gwtest.GatewayOptions{SessionTimeout: 10 * time.Second})
}

// zkgate is one run of the built binary against a gateway.
type zkgate struct {
	cmd            *exec.Cmd
	stdout, stderr *gwtest.Buffer
	done           chan struct{}
}

// startZkgate starts the binary with args, ZKGATE_URL set to url; it is
// killed at the end of the test if still running (and its CMD with it:
// PR_SET_PDEATHSIG).
func startZkgate(t *testing.T, url string, stdin io.Reader, args ...string) *zkgate {
	t.Helper()
	cmd := exec.Command(gwtest.Binary(t), args...)
	cmd.Env = append(os.Environ(), "ZKGATE_URL="+url, "ZKGATE_TOKEN=")
	z := &zkgate{cmd: cmd, stdout: &gwtest.Buffer{}, stderr: &gwtest.Buffer{}, done: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, z.stdout, z.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(z.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-z.done
	})
	return z
}

// wait returns the exit code, failing the test after within.
func (z *zkgate) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-z.done:
		return z.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("zkgate %v still runs after %s\nstdout: %s\nstderr: %s", z.cmd.Args[1:], within, z.stdout, z.stderr)
		return -1
	}
}

// runZkgate runs the binary to its end and returns its exit code.
func runZkgate(t *testing.T, url string, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	z := startZkgate(t, url, stdin, args...)
	code = z.wait(t, time.Minute)
	return code, z.stdout.String(), z.stderr.String()
}

// noLeases checks that the gateway has no live lease left.
func noLeases(t *testing.T, url string) {
	t.Helper()
	gwtest.Eventually(t, 10*time.Second, func() error {
		r := gwtest.Do(t, "GET", url+"/v1/leases", nil)
		if !bytes.Contains(r.Body, []byte(`"leases":[]`)) {
			return fmt.Errorf("leases left: %s", r.Body)
		}
		return nil
	})
}

// waitForFile polls until path exists and has content, and returns it.
func waitForFile(t *testing.T, path string, within time.Duration) string {
	t.Helper()
	var data []byte
	gwtest.Eventually(t, within, func() error {
		var err error
		data, err = os.ReadFile(path)
		if err == nil && len(data) == 0 {
			err = errors.New("empty")
		}
		return err
	})
	return string(data)
}

func alive(pid int) bool {
	// A zombie has exited; its parent (zkgate) reaps it.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// TestLockExitCodes: zkgate lock exits with CMD's code (128+N for a
// signal), and releases and revokes when CMD ends.
func TestLockExitCodes(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	for _, c := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"exit 255", 255},
		{"kill -TERM $$", 128 + 15},
		{"kill -KILL $$", 128 + 9},
	} {
		code, _, stderr := runZkgate(t, g.URL, nil, "lock", "codes", "--", "sh", "-c", c.script)
		if code != c.want {
			t.Fatalf("%q: exit %d, want %d (stderr %q)", c.script, code, c.want, stderr)
		}
	}
	if r := gwtest.Do(t, "GET", g.URL+"/v1/locks/codes", nil); !bytes.Contains(r.Body, []byte(`"holders":[]`)) {
		t.Fatalf("the lock is still held: %s", r.Body)
	}
	noLeases(t, g.URL)

	code, _, stderr := runZkgate(t, g.URL, nil, "lock", "codes", "--", "/nonexistent/cmd")
	if code != exitNotFound || !strings.Contains(stderr, "/nonexistent/cmd") {
		t.Fatalf("a missing CMD: exit %d, stderr %q", code, stderr)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "noexec"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runZkgate(t, g.URL, nil, "lock", "codes", "--", filepath.Join(dir, "noexec")); code != exitCannotRun {
		t.Fatalf("a CMD that cannot run: exit %d", code)
	}
	noLeases(t, g.URL)
}

// TestLockChildEnvironment: CMD gets the lock, the lease and the fencing
// token in its environment, and zkgate's stdin; the lock is held by that
// lease with that token while CMD runs, and revoked after.
func TestLockChildEnvironment(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	stdin, feed := io.Pipe()
	defer feed.Close()
	z := startZkgate(t, g.URL, stdin, "lock", "--holder", "env-test", "env", "--",
		"sh", "-c", `env | grep '^ZKGATE_' | sort; read line; echo "got $line"`)
	env := map[string]string{}
	gwtest.Eventually(t, 30*time.Second, func() error {
		for _, line := range strings.Split(z.stdout.String(), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		if env["ZKGATE_URL"] == "" {
			return fmt.Errorf("no environment printed yet: %q %q", z.stdout, z.stderr)
		}
		return nil
	})
	if env["ZKGATE_LOCK"] != "env" || len(env["ZKGATE_LEASE"]) != 36 || env["ZKGATE_URL"] != g.URL {
		t.Fatalf("environment %v", env)
	}
	token, err := strconv.ParseInt(env["ZKGATE_FENCING_TOKEN"], 10, 64)
	if err != nil || token <= 0 {
		t.Fatalf("token %q", env["ZKGATE_FENCING_TOKEN"])
	}
	r := gwtest.Do(t, "GET", g.URL+"/v1/locks/env", nil)
	var st struct {
		Holders []struct {
			Lease, Holder string
			Token         int64
		}
	}
	if err := json.Unmarshal(r.Body, &st); err != nil || len(st.Holders) != 1 || st.Holders[0].Lease != env["ZKGATE_LEASE"] ||
		st.Holders[0].Token != token || st.Holders[0].Holder != "env-test" {
		t.Fatalf("the lock while CMD runs: %s", r.Body)
	}
	if r := gwtest.Do(t, "GET", g.URL+"/v1/locks/env/fence?token="+env["ZKGATE_FENCING_TOKEN"], nil); r.Status != 200 {
		t.Fatalf("fence of CMD's token: %d %s", r.Status, r.Body)
	}
	io.WriteString(feed, "hello\n")
	feed.Close()
	if code := z.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d: %s", code, z.stderr)
	}
	if !strings.Contains(z.stdout.String(), "got hello") {
		t.Fatalf("stdin did not reach CMD: %q", z.stdout)
	}
	r = gwtest.Do(t, "GET", g.URL+"/v1/leases/"+env["ZKGATE_LEASE"], nil)
	if r.Status != http.StatusGone || !bytes.Contains(r.Body, []byte(`"reason":"revoked"`)) {
		t.Fatalf("the lease after CMD: %d %s", r.Status, r.Body)
	}
}

// TestLockLostStopsChild: a lease revoked from outside while CMD runs
// stops CMD, with SIGTERM first: one CMD exits on it, the other ignores it
// and is killed after the grace with everything it started. Either way
// zkgate exits 76.
func TestLockLostStopsChild(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	for _, c := range []struct {
		name, script string
		graceful     bool
	}{
		{"exits-on-term", `trap 'echo TERM; exit 0' TERM; echo "$$ 0 $ZKGATE_LEASE"; while :; do sleep 0.05; done`, true},
		{"ignores-term", `trap '' TERM; sleep 300 & echo "$$ $! $ZKGATE_LEASE"; while :; do sleep 0.05; done`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			z := startZkgate(t, g.URL, nil, "lock", "--ttl", "3s", "--kill-grace", "500ms", "lost-"+c.name, "--", "sh", "-c", c.script)
			var fields []string
			gwtest.Eventually(t, 30*time.Second, func() error {
				fields = strings.Fields(z.stdout.String())
				if len(fields) < 3 {
					return fmt.Errorf("CMD has not started: %q %q", z.stdout, z.stderr)
				}
				return nil
			})
			shell, _ := strconv.Atoi(fields[0])
			background, _ := strconv.Atoi(fields[1])
			start := time.Now()
			if r := gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+fields[2], nil); r.Status != http.StatusNoContent {
				t.Fatalf("revoke: %d %s", r.Status, r.Body)
			}
			if code := z.wait(t, 30*time.Second); code != exitLost {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitLost, z.stderr)
			}
			t.Logf("stopped %s after the revoke", time.Since(start).Round(time.Millisecond))
			if !strings.Contains(z.stderr.String(), "lost") || !strings.Contains(z.stderr.String(), "revoked") {
				t.Fatalf("stderr should say the lock was lost and why: %q", z.stderr)
			}
			if got := strings.Contains(z.stdout.String(), "TERM"); got != c.graceful {
				t.Fatalf("CMD saw SIGTERM: %v, want %v (stdout %q)", got, c.graceful, z.stdout)
			}
			gwtest.Eventually(t, 10*time.Second, func() error {
				if alive(shell) || background > 0 && alive(background) {
					return fmt.Errorf("left running: shell %d %v, its child %d %v", shell, alive(shell), background, background > 0 && alive(background))
				}
				return nil
			})
		})
	}
	noLeases(t, g.URL)
}

// TestLockOneAtATime: three `zkgate lock` processes on one name run their
// commands one after the other, never two at once, in the order of their
// fencing tokens. The first holds until the other two are seen waiting, so
// they really contend; each then holds for a while.
func TestLockOneAtATime(t *testing.T) {
	// Serial: sets the environment (t.Setenv).
	g := cliGateway(t)
	dir := t.TempDir()
	log, gate := filepath.Join(dir, "log"), filepath.Join(dir, "go")
	script := `echo "enter $(date +%s%N) $ZKGATE_FENCING_TOKEN" >> "$LOG"
while [ ! -e "$GATE" ]; do sleep 0.02; done
sleep 0.3
echo "exit $(date +%s%N) $ZKGATE_FENCING_TOKEN" >> "$LOG"`
	t.Setenv("LOG", log)
	t.Setenv("GATE", gate)
	var procs []*zkgate
	for i := 0; i < 3; i++ {
		procs = append(procs, startZkgate(t, g.URL, nil, "lock", "--wait", "50s", "serial", "--", "sh", "-c", script))
		if i == 0 {
			waitForFile(t, log, 30*time.Second)
		}
	}
	gwtest.Eventually(t, 30*time.Second, func() error {
		r := gwtest.Do(t, "GET", g.URL+"/v1/locks/serial", nil)
		var st struct{ Holders, Waiters []json.RawMessage }
		if err := json.Unmarshal(r.Body, &st); err != nil || len(st.Holders) != 1 || len(st.Waiters) != 2 {
			return fmt.Errorf("want 1 holder and 2 waiters: %s", r.Body)
		}
		return nil
	})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if code := p.wait(t, time.Minute); code != 0 {
			t.Fatalf("exit %d: %s", code, p.stderr)
		}
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	type event struct {
		kind  string
		at    int64
		token int64
	}
	var events []event
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e event
		if _, err := fmt.Sscan(line, &e.kind, &e.at, &e.token); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		events = append(events, e)
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].at < events[j].at })
	if len(events) != 6 {
		t.Fatalf("events: %v", events)
	}
	for i := 0; i < len(events); i += 2 {
		in, out := events[i], events[i+1]
		if in.kind != "enter" || out.kind != "exit" || in.token != out.token {
			t.Fatalf("overlap or disorder at %d: %+v", i, events)
		}
		if i > 0 && in.token <= events[i-1].token {
			t.Fatalf("tokens must grow: %+v", events)
		}
	}
	noLeases(t, g.URL)
}

// TestLockWaitEnds: when the wait ends before the lock is granted, zkgate
// exits 75 without running CMD, and names the holder.
func TestLockWaitEnds(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	gwtest.MustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/locks/busy/acquire", map[string]any{"ttl": "1m", "holder": "the-holder"}), 200, "acquire")
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	code, _, stderr := runZkgate(t, g.URL, nil, "lock", "--wait", "300ms", "busy", "--", "touch", ran)
	if code != exitWaited || !strings.Contains(stderr, "the-holder") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("CMD ran without the lock")
	}
	code, _, _ = runZkgate(t, g.URL, nil, "lock", "--wait", "0", "--mode", "read", "busy", "--", "touch", ran)
	if code != exitWaited {
		t.Fatalf("a try-once read: exit %d", code)
	}
	r := gwtest.Do(t, "GET", g.URL+"/v1/leases", nil)
	if n := bytes.Count(r.Body, []byte(`"id"`)); n != 1 {
		t.Fatalf("only the holder's lease should be left: %s", r.Body)
	}
}

// TestLockSet: zkgate lock with several names holds them all while CMD
// runs (ZKGATE_LOCK the names by name, ZKGATE_FENCING_TOKENS their
// tokens), releases them after; one of them held elsewhere times out with
// exit 75, CMD not run and none of the others held; names twice, or a
// set of semaphores, are usage errors.
func TestLockSet(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	code, stdout, stderr := runZkgate(t, g.URL, nil, "lock", "acct-7", "acct-3", "--", "sh", "-c",
		`echo "$ZKGATE_LOCK|$ZKGATE_FENCING_TOKENS|${ZKGATE_FENCING_TOKEN-unset}"`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	parts := strings.Split(strings.TrimSpace(stdout), "|")
	if len(parts) != 3 || parts[0] != "acct-3 acct-7" || !regexp.MustCompile(`^acct-3=[1-9][0-9]* acct-7=[1-9][0-9]*$`).MatchString(parts[1]) ||
		parts[2] != "unset" {
		t.Fatalf("CMD's environment: %q", stdout)
	}
	for _, n := range []string{"acct-3", "acct-7"} {
		if r := gwtest.Do(t, "GET", g.URL+"/v1/locks/"+n, nil); !bytes.Contains(r.Body, []byte(`"holders":[]`)) {
			t.Fatalf("lock %s is still held: %s", n, r.Body)
		}
	}
	gwtest.MustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/locks/acct-9/acquire", map[string]any{"ttl": "1m", "holder": "the-holder"}), 200, "acquire")
	ran := filepath.Join(t.TempDir(), "ran")
	code, _, stderr = runZkgate(t, g.URL, nil, "lock", "--wait", "300ms", "acct-1", "acct-9", "--", "touch", ran)
	if code != exitWaited || !strings.Contains(stderr, "the-holder") {
		t.Fatalf("a set with a held lock: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("CMD ran without the set")
	}
	if r := gwtest.Do(t, "GET", g.URL+"/v1/locks/acct-1", nil); !bytes.Contains(r.Body, []byte(`"holders":[]`)) {
		t.Fatalf("lock acct-1 is held after the set failed: %s", r.Body)
	}
	for _, args := range [][]string{{"a", "a"}, {"--semaphore", "2", "a", "b"}} {
		if code, _, stderr := runZkgate(t, g.URL, nil, append(append([]string{"lock"}, args...), "--", "true")...); code != exitUsage {
			t.Errorf("zkgate lock %v: exit %d %q, want a usage error", args, code, stderr)
		}
	}
}

// TestLockSemaphore: --semaphore N lets N commands run at once.
func TestLockSemaphore(t *testing.T) {
	// Serial: sets the environment (t.Setenv).
	g := cliGateway(t)
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	t.Setenv("GATE", gate)
	script := `echo "$ZKGATE_FENCING_TOKEN"; while [ ! -e "$GATE" ]; do sleep 0.02; done`
	a := startZkgate(t, g.URL, nil, "lock", "--semaphore", "2", "slots", "--", "sh", "-c", script)
	b := startZkgate(t, g.URL, nil, "lock", "--semaphore", "2", "slots", "--", "sh", "-c", script)
	gwtest.Eventually(t, 30*time.Second, func() error {
		if a.stdout.String() == "" || b.stdout.String() == "" {
			return errors.New("both should run at once")
		}
		return nil
	})
	if code, _, stderr := runZkgate(t, g.URL, nil, "lock", "--semaphore", "2", "--wait", "200ms", "slots", "--", "true"); code != exitWaited {
		t.Fatalf("a third: exit %d %q", code, stderr)
	}
	if code, _, stderr := runZkgate(t, g.URL, nil, "lock", "--semaphore", "3", "slots", "--", "true"); code != exitFailed || !strings.Contains(stderr, "limit_mismatch") {
		t.Fatalf("another limit: exit %d %q", code, stderr)
	}
	os.WriteFile(gate, nil, 0o644)
	for _, z := range []*zkgate{a, b} {
		if code := z.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("exit %d %s", code, z.stderr)
		}
	}
	noLeases(t, g.URL)
}

// TestElect: CMD runs only while its zkgate leads; the next candidate's
// CMD starts only after the leader's has ended and it resigned. A leader
// whose lease is revoked is stopped with 76.
func TestElect(t *testing.T) {
	// Serial: sets the environment (t.Setenv).
	g := cliGateway(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	t.Setenv("LOG", log)
	t.Setenv("DIR", dir)
	script := `echo "$1 leads $ZKGATE_FENCING_TOKEN" >> "$LOG"; while [ ! -e "$DIR/$1" ]; do sleep 0.02; done; echo "$1 ends" >> "$LOG"`
	a := startZkgate(t, g.URL, nil, "elect", "--value", "a:1", "sched", "--", "sh", "-c", script, "sh", "a")
	waitForFile(t, log, 30*time.Second)
	b := startZkgate(t, g.URL, nil, "elect", "--value", "b:1", "sched", "--", "sh", "-c", script, "sh", "b")
	gwtest.Eventually(t, 30*time.Second, func() error {
		r := gwtest.Do(t, "GET", g.URL+"/v1/elections/sched", nil)
		if !bytes.Contains(r.Body, []byte(`"b:1"`)) {
			return fmt.Errorf("b is not a candidate yet: %s", r.Body)
		}
		return nil
	})
	if got := waitForFile(t, log, time.Second); strings.Contains(got, "b leads") {
		t.Fatalf("b runs while a leads: %q", got)
	}
	os.WriteFile(filepath.Join(dir, "a"), nil, 0o644)
	if code := a.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("a: exit %d %s", code, a.stderr)
	}
	gwtest.Eventually(t, 30*time.Second, func() error {
		if got := waitForFile(t, log, time.Second); !strings.Contains(got, "b leads") {
			return fmt.Errorf("b does not lead: %q", got)
		}
		return nil
	})
	lines := strings.Split(strings.TrimSpace(waitForFile(t, log, time.Second)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "a leads") || lines[1] != "a ends" || !strings.HasPrefix(lines[2], "b leads") {
		t.Fatalf("log %q", lines)
	}
	// b's leadership ends with its lease.
	r := gwtest.Do(t, "GET", g.URL+"/v1/elections/sched", nil)
	var st struct{ Leader struct{ Lease string } }
	if err := json.Unmarshal(r.Body, &st); err != nil || st.Leader.Lease == "" {
		t.Fatalf("election %s", r.Body)
	}
	gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+st.Leader.Lease, nil)
	if code := b.wait(t, 30*time.Second); code != exitLost {
		t.Fatalf("b: exit %d, want %d: %s", code, exitLost, b.stderr)
	}
	if code, _, _ := runZkgate(t, g.URL, nil, "elect", "--wait", "0", "sched", "--", "true"); code != 0 {
		t.Fatalf("an election with no candidate: exit %d", code)
	}
	noLeases(t, g.URL)
}

// TestElectWaitEnds: --wait ends a candidacy that is not elected in time.
func TestElectWaitEnds(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	gwtest.MustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/elections/taken/campaign", map[string]any{"ttl": "1m", "holder": "boss"}), 200, "campaign")
	code, stdout, stderr := runZkgate(t, g.URL, nil, "elect", "--wait", "300ms", "taken", "--", "echo", "ran")
	if code != exitWaited || stdout != "" || !strings.Contains(stderr, "boss") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	r := gwtest.Do(t, "GET", g.URL+"/v1/elections/taken", nil)
	if n := bytes.Count(r.Body, []byte(`"node"`)); n != 2 { // the leader, as leader and first candidate
		t.Fatalf("the candidacy should be gone: %s", r.Body)
	}
}

// TestQueueAndBarrierCommands: the script commands, and their exit codes.
func TestQueueAndBarrierCommands(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	code, out, _ := runZkgate(t, g.URL, nil, "queue", "put", "jobs", "first")
	if code != 0 || !strings.HasPrefix(out, "entry-100-") {
		t.Fatalf("put: %d %q", code, out)
	}
	if code, out, _ = runZkgate(t, g.URL, strings.NewReader("urgent\x00bytes"), "queue", "put", "--priority", "1", "jobs"); code != 0 {
		t.Fatalf("put from stdin: %d %q", code, out)
	}
	if code, out, _ = runZkgate(t, g.URL, nil, "queue", "take", "jobs"); code != 0 || out != "urgent\x00bytes" {
		t.Fatalf("take: %d %q", code, out)
	}
	code, out, _ = runZkgate(t, g.URL, nil, "queue", "claim", "--json", "jobs")
	var item itemJSON
	if err := json.Unmarshal([]byte(out), &item); code != 0 || err != nil || item.Data != "first" || item.Lease == "" {
		t.Fatalf("claim: %d %q %v", code, out, err)
	}
	if code, _, stderr := runZkgate(t, g.URL, nil, "queue", "nack", "--revoke=false", "--lease", item.Lease, "jobs", item.ID); code != 0 {
		t.Fatalf("nack: %d %s", code, stderr)
	}
	if code, _, stderr := runZkgate(t, g.URL, nil, "queue", "ack", "--lease", item.Lease, "jobs", item.ID); code != exitFailed || !strings.Contains(stderr, "not_claimed") {
		t.Fatalf("ack after nack: %d %s", code, stderr)
	}
	code, out, _ = runZkgate(t, g.URL, nil, "queue", "claim", "--json", "--lease", item.Lease, "jobs")
	if err := json.Unmarshal([]byte(out), &item); code != 0 || err != nil || item.Data != "first" {
		t.Fatalf("claim again: %d %q", code, out)
	}
	if code, _, stderr := runZkgate(t, g.URL, nil, "queue", "ack", "--lease", item.Lease, "jobs", item.ID); code != 0 {
		t.Fatalf("ack: %d %s", code, stderr)
	}
	if code, _, stderr := runZkgate(t, g.URL, nil, "queue", "take", "--wait", "100ms", "jobs"); code != exitWaited || !strings.Contains(stderr, "empty") {
		t.Fatalf("take from empty: %d %q", code, stderr)
	}
	if code, _, _ := runZkgate(t, g.URL, nil, "queue", "claim", "--wait", "0", "jobs"); code != exitWaited {
		t.Fatalf("claim from empty: %d", code)
	}
	noLeases(t, g.URL) // the ack revoked the lease the first claim made

	if code, _, _ := runZkgate(t, g.URL, nil, "barrier", "raise", "deploy"); code != 0 {
		t.Fatalf("raise: %d", code)
	}
	if code, _, _ := runZkgate(t, g.URL, nil, "barrier", "wait", "--wait", "100ms", "deploy"); code != exitWaited {
		t.Fatalf("wait on a raised barrier: %d", code)
	}
	waiting := startZkgate(t, g.URL, nil, "barrier", "wait", "--wait", "50s", "deploy")
	if code, _, _ := runZkgate(t, g.URL, nil, "barrier", "lower", "deploy"); code != 0 {
		t.Fatalf("lower: %d", code)
	}
	if code := waiting.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("a wait released by lower: %d %s", code, waiting.stderr)
	}
}

// TestStatusCommand: the JSON for scripts and the table for people show
// who holds, waits for and leads what.
func TestStatusCommand(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	for _, req := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/locks/invoices/acquire", map[string]any{"ttl": "1m", "holder": "worker-1"}},
		{"/v1/semaphores/gpu/acquire", map[string]any{"ttl": "1m", "holder": "trainer", "limit": 2}},
		{"/v1/elections/scheduler/campaign", map[string]any{"ttl": "1m", "holder": "sched-1", "value": "10.0.0.5:80"}},
	} {
		if r := gwtest.Do(t, "POST", g.URL+req.path, req.body); r.Status != 200 {
			t.Fatalf("%s: %d %s", req.path, r.Status, r.Body)
		}
	}
	waiter := make(chan gwtest.Response, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		r, _ := gwtest.DoCtx(ctx, "POST", g.URL+"/v1/locks/invoices/acquire?wait=50s", map[string]any{"ttl": "1m", "holder": "worker-2"})
		waiter <- r
	}()
	gwtest.Eventually(t, 10*time.Second, func() error {
		if r := gwtest.Do(t, "GET", g.URL+"/v1/locks/invoices", nil); !bytes.Contains(r.Body, []byte("worker-2")) {
			return errors.New("no waiter yet")
		}
		return nil
	})
	gwtest.Do(t, "PUT", g.URL+"/v1/barriers/deploy", nil)
	gwtest.Do(t, "POST", g.URL+"/v1/queues/emails/items", []byte("x"))

	code, out, stderr := runZkgate(t, g.URL, nil, "status", "--json")
	var st status
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("status --json: %d %v %q %q", code, err, out, stderr)
	}
	if len(st.Locks) != 1 || len(st.Locks[0].Holders) != 1 || st.Locks[0].Holders[0].Holder != "worker-1" ||
		len(st.Locks[0].Waiters) != 1 || st.Locks[0].Waiters[0].Holder != "worker-2" ||
		len(st.Semaphores) != 1 || st.Semaphores[0].Holders[0].Holder != "trainer" ||
		len(st.Elections) != 1 || st.Elections[0].Leader == nil || st.Elections[0].Leader.Value != "10.0.0.5:80" ||
		len(st.Barriers) != 1 || len(st.Queues) != 1 || st.Queues[0].Length != 1 || len(st.Leases) != 4 {
		t.Fatalf("status: %s", out)
	}
	code, out, _ = runZkgate(t, g.URL, nil, "status")
	for _, want := range []string{
		"lock  ", "invoices", "holds exclusive", "worker-1", "waits #1", "worker-2",
		"semaphore", "gpu (1/2)", "trainer", "election", "leads", "10.0.0.5:80 (sched-1)",
		"barrier", "deploy", "raised", "queue", "emails", "1 items, 0 claimed",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("the table lacks %q:\n%s", want, out)
		}
	}
	cancel()
	<-waiter
}

// TestStatusShowsTheFirstOfEachKind: the table shows at most --limit of
// each kind, the first by name, and says which kinds have more; --json
// gives every one.
func TestStatusShowsTheFirstOfEachKind(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	for i := range 5 {
		if r := gwtest.Do(t, "POST", fmt.Sprintf("%s/v1/locks/many-%d/acquire", g.URL, i), map[string]any{"ttl": "1m", "holder": "h"}); r.Status != 200 {
			t.Fatalf("acquire: %d %s", r.Status, r.Body)
		}
	}
	code, out, stderr := runZkgate(t, g.URL, nil, "status", "--limit", "2")
	if code != 0 {
		t.Fatalf("status --limit 2: %d %s", code, stderr)
	}
	for _, want := range []string{"many-0", "many-1", "more leases, locks than shown", "more than 2 leases live"} {
		if !strings.Contains(out, want) {
			t.Errorf("status --limit 2 lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "many-2") {
		t.Errorf("status --limit 2 shows a third lock:\n%s", out)
	}
	code, out, _ = runZkgate(t, g.URL, nil, "status", "--limit", "2", "--json")
	var st status
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || len(st.Locks) != 5 || len(st.Leases) != 5 {
		t.Errorf("status --json: %d %v, want every lock and lease: %s", code, err, out)
	}
	if code, _, _ := runZkgate(t, g.URL, nil, "status", "--limit", "-1"); code != 2 {
		t.Errorf("status --limit -1: exit %d, want 2", code)
	}
}

// TestStatusShowsControlCharactersEscaped: holder labels and election
// values come from clients (and foreign nodes' data from anyone who can
// write to ZooKeeper); the table shows their control and format characters
// escaped as Go's %q does, where it printed a holder's terminal escapes
// raw (retitling, clearing or recolouring the reader's terminal). --json
// keeps them, JSON-escaped.
func TestStatusShowsControlCharactersEscaped(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	const holder = "\x1b]0;pwned\a\x1b[2Jworker" // retitle the terminal, clear it
	mustOK := func(r gwtest.Response, what string) {
		t.Helper()
		if r.Status >= 300 {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
	}
	mustOK(gwtest.Do(t, "POST", g.URL+"/v1/locks/term/acquire", map[string]any{"ttl": "1m", "holder": holder}), "acquire")
	mustOK(gwtest.Do(t, "POST", g.URL+"/v1/elections/e/campaign", map[string]any{"ttl": "1m", "holder": "c",
		"value": "right\u202eleft"}), "campaign")

	code, out, stderr := runZkgate(t, g.URL, nil, "status")
	if code != 0 {
		t.Fatalf("status: %d %s", code, stderr)
	}
	if strings.ContainsAny(out, "\x1b\a\u202e") {
		t.Errorf("the table prints control characters raw: %q", out)
	}
	for _, want := range []string{`\x1b]0;pwned\a\x1b[2Jworker`, `right\u202eleft`} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %s:\n%s", want, out)
		}
	}
	code, out, _ = runZkgate(t, g.URL, nil, "status", "--json")
	var st status
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || len(st.Locks) != 1 || st.Locks[0].Holders[0].Holder != holder {
		t.Errorf("status --json: %d %v, want the holder as it is: %s", code, err, out)
	}
}

// TestClientCommandLines: bad command lines are one line and exit 2;
// --gateway falls back to ZKGATE_URL, then the default; help lists the
// exit codes.
func TestClientCommandLines(t *testing.T) {
	t.Parallel()
	env := func(k string) string { return map[string]string{"ZKGATE_URL": "http://127.0.0.1:1"}[k] }
	for _, args := range [][]string{
		{"lock"}, {"lock", "name"}, {"lock", "name", "--"}, {"lock", "bad/name", "--", "true"},
		{"lock", "--mode", "shared", "n", "--", "true"}, {"lock", "--semaphore", "2", "--mode", "read", "n", "--", "true"},
		{"lock", "--ttl", "500ms", "n", "--", "true"}, {"lock", "--wait", "-1s", "n", "--", "true"},
		{"lock", "--bogus", "n", "--", "true"}, {"lock", "a", "a", "--", "true"}, {"lock", "--semaphore", "2", "a", "b", "--", "true"},
		{"elect", "a", "b", "--", "true"}, {"lock", "--gateway", "ftp://x", "n", "--", "true"},
		{"elect", "n"}, {"elect", "--wait", "x", "n", "--", "true"},
		{"status", "extra"}, {"queue", "frob", "q"}, {"queue", "take"}, {"queue", "ack", "q", "id"},
		{"queue", "put", "a", "b", "c"}, {"barrier", "wait"}, {"barrier", "up", "b"}, {"lease", "grant", "x"}, {"lease", "keepalive"},
	} {
		err := run(context.Background(), append([]string{"zkgate"}, args...), env, io.Discard, io.Discard)
		var usage *server.UsageError
		if !errors.As(err, &usage) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%v: want a one-line usage error, got %v", args, err)
		}
		if code := exitCode(err, io.Discard); code != exitUsage {
			t.Fatalf("%v: exit code %d", args, code)
		}
	}
	// No gateway listens on port 1: one line, exit 69, after the retries.
	start := time.Now()
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"zkgate", "barrier", "raise", "b"}, env, io.Discard, &stderr)
	if code := exitCode(err, &stderr); code != exitUnavailable || !strings.Contains(stderr.String(), "http://127.0.0.1:1") ||
		!strings.Contains(stderr.String(), "ZKGATE_URL") || !strings.Contains(stderr.String(), "--gateway") ||
		strings.Count(stderr.String(), "\n") != 1 {
		t.Fatalf("unreachable gateway: exit %d, %q", code, stderr.String())
	}
	t.Logf("gave up on an unreachable gateway after %s", time.Since(start).Round(time.Millisecond))
	var out bytes.Buffer
	if err := run(context.Background(), []string{"zkgate", "help"}, env, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\n  lock ", "\n  elect ", "\n  status ", "\n  75 ", "\n  76 ", "126", "127"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("help lacks %q", want)
		}
	}
	out.Reset()
	if err := run(context.Background(), []string{"zkgate", "lock", "--help"}, env, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ZKGATE_FENCING_TOKEN", "75", "76", "--kill-grace"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("lock --help lacks %q", want)
		}
	}
}

// TestStatusShowsHowLeasesRenew: a lease of TTL 5m on a gateway of a 10 s
// session timeout is shown with its TTL, its last renewal and its
// deadline labelled "confirmed until" (what the session is known to keep,
// sooner than the TTL's end), where the table showed a count alone and the
// dashboard a countdown that read as a lease about to end. A keepalive
// moves renewed_at on.
func TestStatusShowsHowLeasesRenew(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	lease := gwtest.NewLease(t, g.URL, "5m", "renewing")
	gwtest.MustStatus(t, gwtest.Acquire(t, g.URL, "renewed-lock", lease, "0s"), 200, "acquire")
	read := func() client.LeaseInfo {
		t.Helper()
		code, out, stderr := runZkgate(t, g.URL, nil, "status", "--json")
		var st status
		if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || len(st.Leases) != 1 {
			t.Fatalf("status --json: %d %v %q %q", code, err, out, stderr)
		}
		return st.Leases[0]
	}
	first := read()
	if first.RenewedAt.IsZero() || first.RenewedAt.Before(first.CreatedAt) || !first.ExpiresAt.Before(first.RenewedAt.Add(first.TTL)) {
		t.Fatalf("lease: created %s, renewed %s, confirmed until %s, ttl %s: want renewed at or after created, "+
			"and confirmed until before the TTL's end (the session's promise is shorter)", first.CreatedAt, first.RenewedAt, first.ExpiresAt, first.TTL)
	}
	gwtest.Eventually(t, 10*time.Second, func() error {
		r := gwtest.Do(t, "POST", g.URL+"/v1/leases/"+lease+"/keepalive", nil)
		if r.Status != 200 {
			t.Fatalf("keepalive: %d %s", r.Status, r.Body)
		}
		var info client.LeaseInfo
		if err := json.Unmarshal(r.Body, &info); err != nil || !info.RenewedAt.After(first.RenewedAt) {
			return fmt.Errorf("keepalive answered renewed_at %s (%v), want after %s", info.RenewedAt, err, first.RenewedAt)
		}
		return nil
	})
	if again := read(); !again.RenewedAt.After(first.RenewedAt) {
		t.Errorf("after a keepalive status shows renewed_at %s, want after %s", again.RenewedAt, first.RenewedAt)
	}

	code, out, stderr := runZkgate(t, g.URL, nil, "status")
	if code != 0 {
		t.Fatalf("status: %d %s", code, stderr)
	}
	t.Logf("zkgate status:\n%s", out)
	row := ""
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, lease[:8]) {
			row = line
		}
	}
	if !strings.Contains(out, "TTL") || !strings.Contains(out, "RENEWED") || !strings.Contains(out, "CONFIRMED UNTIL") {
		t.Errorf("the lease table lacks its TTL, RENEWED and CONFIRMED UNTIL columns:\n%s", out)
	}
	for _, want := range []string{"renewing", "5m0s", " ago", " UTC", "1"} {
		if !strings.Contains(row, want) {
			t.Errorf("the lease's row lacks %q: %q\n%s", want, row, out)
		}
	}
}
