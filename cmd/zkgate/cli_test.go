package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/server"
)

// runCLI runs zkgate with args through run, env as its environment, and
// returns its exit code, stdout and stderr as main would leave them.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"zkgate"}, args...), func(k string) string { return env[k] }, &out, &errOut)
	code = exitCode(err, &errOut)
	return code, out.String(), errOut.String()
}

// commandPaths lists every command of zkgate a user can see, as the
// arguments that name it: {}, {"lock"}, {"queue", "claim"}...
func commandPaths(c *cobra.Command, path []string) [][]string {
	out := [][]string{path}
	for _, sub := range c.Commands() {
		if sub.Hidden {
			continue
		}
		out = append(out, commandPaths(sub, append(append([]string{}, path...), sub.Name()))...)
	}
	return out
}

// TestBareZkgatePrintsHelp: zkgate alone, and zkgate help, print the help,
// naming every command and the exit codes, and exit 0; they start no
// gateway (bare zkgate served on :8080, making ./zkgate-data).
func TestBareZkgatePrintsHelp(t *testing.T) {
	// Serial: changes the working directory (t.Chdir).
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{}, {"help"}} {
		code, out, stderr := runCLI(t, nil, args...)
		if code != 0 || stderr != "" {
			t.Fatalf("zkgate %v: exit %d, stderr %q", args, code, stderr)
		}
		for _, want := range []string{"serve", "lock", "elect", "status", "queue", "barrier", "lease", "token", "peer-secret",
			"completion", "version", "ZKGATE_URL", "ZKGATE_TOKEN", "--quiet", "Exit codes:", "\n  69 ", "\n  75 ", "\n  76 "} {
			if !strings.Contains(out, want) {
				t.Errorf("zkgate %v lacks %q:\n%s", args, want, out)
			}
		}
	}
	if _, err := os.Stat("zkgate-data"); err == nil {
		t.Fatal("bare zkgate made ./zkgate-data: it started a gateway")
	}
}

// TestHelpOfEveryCommand: -h and --help on every command print its usage
// once, on stdout, and exit 0; help COMMAND prints the same.
func TestHelpOfEveryCommand(t *testing.T) {
	t.Parallel()
	paths := commandPaths(newRootCommand(&app{getenv: os.Getenv, stdout: io.Discard, stderr: io.Discard}), nil)
	if len(paths) < 20 {
		t.Fatalf("only %d commands: %v", len(paths), paths)
	}
	for _, path := range paths {
		var first string
		for _, flag := range []string{"-h", "--help"} {
			code, out, stderr := runCLI(t, nil, append(append([]string{}, path...), flag)...)
			if code != 0 || stderr != "" || strings.Count(out, "Usage:") != 1 {
				t.Errorf("zkgate %v %s: exit %d, stderr %q, stdout %q: want the usage once and exit 0", path, flag, code, stderr, out)
			}
			if first == "" {
				first = out
			} else if out != first {
				t.Errorf("zkgate %v: -h and --help differ", path)
			}
		}
		if len(path) > 0 {
			if code, out, _ := runCLI(t, nil, append([]string{"help"}, path...)...); code != 0 || out != first {
				t.Errorf("zkgate help %v: exit %d, not what -h prints:\n%s", path, code, out)
			}
		}
	}
}

// TestUnknownCommandsAndFlags: a command or flag zkgate does not have is
// one line, naming it and --help, and exit 2.
func TestUnknownCommandsAndFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`, "zkgate --help"}},
		{[]string{"stauts"}, []string{`unknown command "stauts"`, "did you mean status?"}},
		{[]string{"queue", "frob", "q"}, []string{`unknown command "frob" for "zkgate queue"`, "zkgate queue --help"}},
		{[]string{"lease", "extend", "id"}, []string{`unknown command "extend"`, "zkgate lease --help"}},
		{[]string{"status", "--bogus"}, []string{"unknown flag: --bogus", "zkgate status --help"}},
		{[]string{"lock", "--bogus", "n", "--", "true"}, []string{"unknown flag: --bogus", "zkgate lock --help"}},
		{[]string{"lock", "-wait", "1s", "n", "--", "true"}, []string{"two dashes", "zkgate lock --help"}},
		{[]string{"queue", "claim", "--wait", "soon", "q"}, []string{"--wait", "zkgate queue claim --help"}},
		{[]string{"--listen", ":8080"}, []string{"unknown flag: --listen", "zkgate serve --listen"}},
		{[]string{"serve", "--bogus"}, []string{"-bogus", "zkgate serve --help"}},
		{[]string{"version", "extra"}, []string{`unexpected argument "extra"`, "zkgate version --help"}},
	} {
		code, out, stderr := runCLI(t, nil, c.args...)
		if code != exitUsage || out != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("zkgate %v: exit %d, stdout %q, stderr %q: want exit 2 and one line", c.args, code, out, stderr)
		}
		for _, want := range c.want {
			if !strings.Contains(stderr, want) {
				t.Errorf("zkgate %v: %q lacks %q", c.args, stderr, want)
			}
		}
	}
}

// TestCompletion: zkgate completion writes a script for bash (which bash
// parses), zsh and fish, and the completions they ask for name zkgate's
// commands and flags.
func TestCompletion(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, stderr := runCLI(t, nil, "completion", shell)
		if code != 0 || stderr != "" || !strings.Contains(out, "zkgate") || !strings.Contains(out, "__complete") {
			t.Fatalf("completion %s: exit %d, stderr %q, %d bytes", shell, code, stderr, len(out))
		}
		if shell == "bash" {
			file := filepath.Join(t.TempDir(), "zkgate.bash")
			if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			if msg, err := exec.Command("bash", "-n", file).CombinedOutput(); err != nil {
				t.Fatalf("bash -n on the bash completion: %v\n%s", err, msg)
			}
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", ""}, "serve"},
		{[]string{"__complete", "qu"}, "queue"},
		{[]string{"__complete", "queue", ""}, "claim"},
		{[]string{"__complete", "queue", "claim", "--"}, "--ttl"},
		{[]string{"__complete", "serve", "--lis"}, "--listen"},
	} {
		code, out, _ := runCLI(t, nil, c.args...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("zkgate %v: exit %d, %q lacks %q", c.args, code, out, c.want)
		}
	}
}

// TestGatewayWithoutScheme: ZKGATE_URL and --gateway as host:port (as
// etcdctl and consul take them) mean http://host:port, where
// ZKGATE_URL=127.0.0.1:8080 was refused with Go's "first path segment in
// URL cannot contain colon".
func TestGatewayWithoutScheme(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	hostPort := strings.TrimPrefix(g.URL, "http://")
	if code, out, stderr := runCLI(t, map[string]string{"ZKGATE_URL": hostPort}, "status"); code != 0 || !strings.Contains(out, g.URL) {
		t.Fatalf("ZKGATE_URL=%s zkgate status: exit %d, %q %q", hostPort, code, out, stderr)
	}
	if code, out, stderr := runCLI(t, nil, "lease", "grant", "--gateway", hostPort); code != 0 || len(strings.TrimSpace(out)) != 36 {
		t.Fatalf("zkgate lease grant --gateway %s: exit %d, %q %q", hostPort, code, out, stderr)
	}
	code, _, stderr := runCLI(t, map[string]string{"ZKGATE_URL": "ftp://" + hostPort}, "status")
	if code != exitUsage || !strings.Contains(stderr, "ZKGATE_URL") || !strings.Contains(stderr, "http://") {
		t.Fatalf("ZKGATE_URL=ftp://...: exit %d, %q", code, stderr)
	}
}

// TestUnavailableGateway: a gateway that answers 503 through the retries
// (here at once: its Retry-After is beyond them) exits 69, as one that
// cannot be reached does (TestClientCommandLines), and says what to do.
func TestUnavailableGateway(t *testing.T) {
	t.Parallel()
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": "Service Unavailable", "status": 503,
			"code": "unavailable", "detail": "the gateway has no ZooKeeper session"})
	}))
	defer gw.Close()
	code, _, stderr := runCLI(t, map[string]string{"ZKGATE_URL": gw.URL}, "status")
	if code != exitUnavailable || !strings.Contains(stderr, gw.URL) || !strings.Contains(stderr, "no ZooKeeper session") ||
		strings.Count(stderr, "\n") != 1 {
		t.Fatalf("503: exit %d, %q", code, stderr)
	}
}

// TestTokenErrorsNameTheVariable: a 401 or 403 tells the user to set
// ZKGATE_TOKEN (or --token), where it passed on the gateway's advice to
// send an Authorization header.
func TestTokenErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	reader, err := auth.AddToken(file, "reader", []string{"*:*:read"})
	if err != nil {
		t.Fatal(err)
	}
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: []string{"--auth-file", file}})
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"ZKGATE_URL": g.URL}, []string{"status"}, "wants a token: set ZKGATE_TOKEN (or --token)"},
		{map[string]string{"ZKGATE_URL": g.URL, "ZKGATE_TOKEN": "zkg_wrong"}, []string{"status"}, "refused the token: set ZKGATE_TOKEN (or --token)"},
		{map[string]string{"ZKGATE_URL": g.URL}, []string{"status", "--token", "zkg_wrong"}, "refused the token: set ZKGATE_TOKEN (or --token)"},
		{map[string]string{"ZKGATE_URL": g.URL, "ZKGATE_TOKEN": reader}, []string{"barrier", "raise", "b"}, "set ZKGATE_TOKEN (or --token) to a token that has that permission"},
	} {
		code, _, stderr := runCLI(t, c.env, c.args...)
		if code != exitFailed || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "Authorization") ||
			strings.Count(stderr, "\n") != 1 {
			t.Errorf("zkgate %v: exit %d, %q: want exit 1 and %q", c.args, code, stderr, c.want)
		}
	}
	if code, _, stderr := runCLI(t, map[string]string{"ZKGATE_URL": g.URL, "ZKGATE_TOKEN": reader}, "status"); code != 0 {
		t.Fatalf("status with a reader's token: exit %d, %q", code, stderr)
	}
}

// TestQuiet: -q leaves stderr to errors: a claim's line of information
// goes, an error stays.
func TestQuiet(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	env := map[string]string{"ZKGATE_URL": g.URL}
	putItems(t, env, "jobs", "x", 2)
	code, out, stderr := runCLI(t, env, "queue", "claim", "jobs")
	if code != 0 || out != "x" || !strings.Contains(stderr, "claimed") {
		t.Fatalf("claim: exit %d, %q, stderr %q", code, out, stderr)
	}
	code, out, stderr = runCLI(t, env, "queue", "claim", "-q", "jobs")
	if code != 0 || out != "x" || stderr != "" {
		t.Fatalf("claim -q: exit %d, %q, stderr %q: want nothing on stderr", code, out, stderr)
	}
	if code, _, stderr = runCLI(t, env, "queue", "take", "--quiet", "--wait", "0", "empty"); code != exitWaited || !strings.Contains(stderr, "empty") {
		t.Fatalf("take --quiet from an empty queue: exit %d, %q: the error stays", code, stderr)
	}
	for _, path := range commandPaths(newRootCommand(&app{getenv: os.Getenv, stdout: io.Discard, stderr: io.Discard}), nil) {
		cmd, _, err := newRootCommand(&app{getenv: os.Getenv}).Find(path)
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Flags().Lookup("gateway") != nil && cmd.Flags().ShorthandLookup("q") == nil {
			t.Errorf("zkgate %v talks to the gateway but has no -q", path)
		}
	}
}

// putItems puts n items data on queue with zkgate queue put.
func putItems(t *testing.T, env map[string]string, queue, data string, n int) {
	t.Helper()
	for range n {
		if code, _, stderr := runCLI(t, env, "queue", "put", queue, data); code != 0 {
			t.Fatalf("put: %d %s", code, stderr)
		}
	}
}

// TestClaimLeaseEndsWithAck: the lease that zkgate queue claim makes
// (its id in the JSON) is revoked by the ack or nack of its claim, where it
// lingered for its TTL (5m); a lease of the user's is kept, and so is the
// claim's with --revoke=false.
func TestClaimLeaseEndsWithAck(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	env := map[string]string{"ZKGATE_URL": g.URL}
	putItems(t, env, "work", "item", 4)
	claim := func(args ...string) itemJSON {
		t.Helper()
		code, out, stderr := runCLI(t, env, append([]string{"queue", "claim", "--json"}, args...)...)
		var it itemJSON
		if err := json.Unmarshal([]byte(out), &it); code != 0 || err != nil || it.Lease == "" {
			t.Fatalf("claim %v: exit %d, %q %q", args, code, out, stderr)
		}
		return it
	}
	settle := func(verb string, it itemJSON, args ...string) {
		t.Helper()
		if code, _, stderr := runCLI(t, env, append([]string{"queue", verb, "--lease", it.Lease, "work", it.ID}, args...)...); code != 0 {
			t.Fatalf("%s: exit %d, %s", verb, code, stderr)
		}
	}
	for _, verb := range []string{"ack", "nack"} {
		it := claim("work")
		if r := gwtest.Do(t, "GET", g.URL+"/v1/leases/"+it.Lease, nil); r.Status != 200 {
			t.Fatalf("the claim's lease: %d %s", r.Status, r.Body)
		}
		settle(verb, it)
		if r := gwtest.Do(t, "GET", g.URL+"/v1/leases", nil); bytes.Contains(r.Body, []byte(it.Lease)) {
			t.Fatalf("the claim's lease is still listed after %s: %s", verb, r.Body)
		}
	}
	// --revoke=false keeps the claim's lease.
	it := claim("work")
	settle("nack", it, "--revoke=false")
	if r := gwtest.Do(t, "GET", g.URL+"/v1/leases/"+it.Lease, nil); r.Status != 200 {
		t.Fatalf("nack --revoke=false revoked the lease: %d %s", r.Status, r.Body)
	}
	settle("ack", claim("--lease", it.Lease, "work"))
	// The user's own lease stays, unless --revoke.
	code, out, _ := runCLI(t, env, "lease", "grant", "--holder", "mine")
	lease := strings.TrimSpace(out)
	if code != 0 || lease == "" {
		t.Fatalf("lease grant: %d %q", code, out)
	}
	settle("ack", claim("--lease", lease, "work"))
	if r := gwtest.Do(t, "GET", g.URL+"/v1/leases/"+lease, nil); r.Status != 200 {
		t.Fatalf("the user's lease was revoked: %d %s", r.Status, r.Body)
	}
	putItems(t, env, "work", "last", 1)
	settle("nack", claim("--lease", lease, "work"), "--revoke")
	noLeases(t, g.URL)
}

// TestServeHelpIsNotAnError: zkgate serve -h lists the gateway's flags on
// stdout, each with what its value is (a duration, an int, a size, a
// list...; every one said "string" before), and exits 0, starting nothing.
func TestServeHelpIsNotAnError(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCLI(t, nil, "serve", "-h")
	if code != 0 || stderr != "" || !strings.Contains(out, "(ZKGATE_LISTEN)") {
		t.Fatalf("serve -h: exit %d, stderr %q, stdout %q", code, stderr, out)
	}
	for _, want := range []string{"--listen host:port", "--max-leases int", "--lease-rate int", "--session-timeout duration",
		"--max-item-bytes size", "--zk list", "--auth-file file", "--data-dir dir", "--log-format string"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve -h does not show %q:\n%s", want, out)
		}
	}
	var usage *server.UsageError
	if err := run(context.Background(), []string{"zkgate", "serve", "-listen", "x"}, func(string) string { return "" }, io.Discard, io.Discard); !errors.As(err, &usage) ||
		!strings.Contains(err.Error(), "--listen") {
		t.Fatalf("serve -listen x (Go's one dash, kept for serve): %v", err)
	}
}

// TestQueuePutDelay: zkgate queue put --delay puts an item that a take
// does not get before it is due, and prints its due-… id; a negative
// delay is a usage error.
func TestQueuePutDelay(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	env := map[string]string{"ZKGATE_URL": g.URL}
	start := time.Now()
	code, out, stderr := runCLI(t, env, "queue", "put", "--delay", "1s", "later", "due")
	if code != 0 || !strings.HasPrefix(out, "due-") {
		t.Fatalf("put --delay: exit %d, %q %q", code, out, stderr)
	}
	if code, out, _ := runCLI(t, env, "queue", "take", "--wait", "0", "later"); code != exitWaited && time.Since(start) < time.Second {
		t.Fatalf("take before the due time: exit %d, %q", code, out)
	}
	if code, out, stderr := runCLI(t, env, "queue", "take", "--wait", "30s", "later"); code != 0 || out != "due" {
		t.Fatalf("take once due: exit %d, %q %q", code, out, stderr)
	}
	if time.Since(start) < time.Second {
		t.Fatal("took the item before its delay")
	}
	if code, _, stderr := runCLI(t, env, "queue", "put", "--delay", "-1s", "later", "x"); code == 0 || !strings.Contains(stderr, "negative") {
		t.Fatalf("put --delay -1s: exit %d, %q", code, stderr)
	}
}
