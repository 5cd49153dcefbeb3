package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/server"
)

// TestTokenNew: `zkgate token new` adds a token and prints its secret,
// alone, on stdout; the file keeps only its hash, with mode 0600.
func TestTokenNew(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"zkgate", "token", "new", "--auth-file", file, "--name", "ci", "locks:deploy-:write", "leases:*:write"},
		func(string) string { return "" }, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSuffix(out.String(), "\n")
	if !regexp.MustCompile(`^zkg_[A-Za-z0-9_-]{43}$`).MatchString(secret) || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("stdout %q, want the secret alone on one line", out.String())
	}
	if strings.Contains(errOut.String(), secret) {
		t.Errorf("stderr repeats the secret: %q", errOut.String())
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("tokens file: %v %v, want mode 0600", st.Mode(), err)
	}
	data, _ := os.ReadFile(file)
	if strings.Contains(string(data), secret) {
		t.Fatalf("the file holds the secret")
	}
	ts, err := auth.LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	tok := ts.Authenticate(secret)
	if tok == nil || tok.Name != "ci" || len(tok.Permissions) != 2 {
		t.Fatalf("the secret authenticates as %+v", tok)
	}
	// ZKGATE_AUTH_FILE names the file too.
	out.Reset()
	if err := run(context.Background(), []string{"zkgate", "token", "new", "--name", "viewer", "*:*:read"},
		func(k string) string { return map[string]string{"ZKGATE_AUTH_FILE": file}[k] }, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if ts, _ := auth.LoadTokens(file); ts.Len() != 2 {
		t.Errorf("%d tokens after a second add, want 2", ts.Len())
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"token", "rotate"}, `unknown command "rotate" for "zkgate token"`},
		{[]string{"token", "new", "--name", "x", "*:*:read"}, "needs --auth-file"},
		{[]string{"token", "new", "--auth-file", file, "*:*:read"}, "needs --name"},
		{[]string{"token", "new", "--auth-file", file, "--name", "x"}, "at least one PERMISSION"},
		{[]string{"token", "new", "--auth-file", file, "--name", "x", "lockz:*:read"}, `unknown kind "lockz"`},
		{[]string{"token", "new", "--auth-file", file, "--name", "x", "locks:*:owner"}, `unknown level "owner"`},
		{[]string{"token", "new", "--auth-file", file, "--name", "ci", "*:*:read"}, "already has a token named"},
		{[]string{"token", "new", "--auth-file", file, "--name", "x", "*:*:read", "--bogus"}, "must come before the permissions"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"zkgate"}, c.args...), func(string) string { return "" }, &out, &bytes.Buffer{})
		var usage *server.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want a one-line usage error with %q", c.args, err, c.want)
		}
		if out.Len() != 0 {
			t.Errorf("%v printed %q on stdout", c.args, out.String())
		}
	}
}

// TestSafeDefault: without tokens the gateway serves loopback only, unless
// told --insecure; a bad tokens file is one line at start.
func TestSafeDefault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("ci sha256:1234 locks:*:read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(string) string { return "" }
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:8080"}, "zkgate token new --auth-file FILE --name NAME PERMISSION..."},
		{[]string{"--listen", ":8080"}, "--insecure"},
		{[]string{"--listen", "10.1.2.3:8080"}, "is not a loopback address"},
		{[]string{"--listen", "gateway.example:8080"}, "is not a loopback address"},
		{[]string{"--auth-file", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"--auth-file", bad}, "line 1"},
		{[]string{"--max-leases", "0"}, "--max-leases"},
		{[]string{"--lease-rate", "fast"}, "--lease-rate"},
		{[]string{"--max-waiters-per-name", "-1"}, "--max-waiters-per-name"},
		{[]string{"--max-waiters-per-token", "0"}, "--max-waiters-per-token"},
		{[]string{"--max-requests-per-token", "many"}, "--max-requests-per-token"},
		{[]string{"--body-timeout", "0s"}, "--body-timeout"},
		{[]string{"--max-lease-history", "0"}, "--max-lease-history"},
		{[]string{"--max-queue-items", "30001"}, "--max-queue-items"},
		{[]string{"--max-queue-bytes", "lots"}, "--max-queue-bytes"},
		{[]string{"--max-queues-items", "0"}, "--max-queues-items"},
		{[]string{"--max-queues-bytes", "2TiB"}, "--max-queues-bytes"},
		{[]string{"--metrics-listen", "nope"}, "--metrics-listen"},
		{[]string{"--deadlock-check", "50ms"}, "--deadlock-check"},
		{[]string{"--deadlock-check", "2m"}, "--deadlock-check"},
		{[]string{"--deadlock-check", "-1s"}, "--deadlock-check"},
		{[]string{"--metrics-names", "1001"}, "--metrics-names"},
		{[]string{"--metrics-names", "some"}, "--metrics-names"},
		{[]string{"--allowed-hosts", "gw.example:8080"}, "--allowed-hosts"},
		{[]string{"--allowed-hosts", "*,gw.example"}, "--allowed-hosts"},
		{[]string{"--allowed-hosts", "http://gw.example"}, "--allowed-hosts"},
	} {
		_, err := server.ParseConfig(append([]string{"--zk", "127.0.0.1:2181"}, c.args...), env, &bytes.Buffer{})
		var usage *server.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want a one-line usage error with %q", c.args, err, c.want)
		}
	}
	for _, args := range [][]string{
		{"--listen", "127.0.0.1:8080"},
		{"--listen", "[::1]:8080"},
		{"--listen", "localhost:8080"},
		{"--listen", "0.0.0.0:8080", "--insecure"},
		{"--deadlock-check", "0"},
		{"--deadlock-check", "100ms", "--metrics-names", "0"},
		{"--allowed-hosts", "gw.example, zkgate.internal."},
		{"--allowed-hosts", "*"},
	} {
		if _, err := server.ParseConfig(append([]string{"--zk", "127.0.0.1:2181"}, args...), env, &bytes.Buffer{}); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	if _, err := server.ParseConfig([]string{"--zk", "127.0.0.1:2181", "--listen", "0.0.0.0:8080"},
		func(k string) string { return map[string]string{"ZKGATE_INSECURE": "true"}[k] }, &bytes.Buffer{}); err != nil {
		t.Errorf("ZKGATE_INSECURE=true: %v", err)
	}
}

// TestEveryFlagDocumented: every flag of `zkgate serve -h` names its
// environment twin, and the configuration table (docs/operations.md) lists
// both.
func TestEveryFlagDocumented(t *testing.T) {
	t.Parallel()
	var help bytes.Buffer
	if err := run(context.Background(), []string{"zkgate", "serve", "-h"}, func(string) string { return "" }, &help, &bytes.Buffer{}); err != nil {
		t.Fatalf("serve -h: %v", err)
	}
	table, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	flags := regexp.MustCompile(`(?m)^      --([a-z-]+) (.*)$`).FindAllStringSubmatch(help.String(), -1)
	if len(flags) < 20 {
		t.Fatalf("only %d flags in serve -h:\n%s", len(flags), help.String())
	}
	for _, f := range flags {
		name := f[1]
		env := "ZKGATE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if !strings.Contains(f[2], "("+env+")") {
			t.Errorf("serve -h: --%s does not name its environment twin %s", name, env)
		}
		row := regexp.MustCompile("(?m)^\\| `--" + regexp.QuoteMeta(name) + "` \\| `" + env + "` \\|")
		if !row.Match(table) {
			t.Errorf("docs/operations.md's configuration table has no row for --%s (%s)", name, env)
		}
	}
}

// TestPeerSecretNew: `zkgate peer-secret new` prints a new secret, alone,
// on stdout, which --peer-secret-file takes; a file of a short secret is a
// bad command line that names the flag.
func TestPeerSecretNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var secrets []string
	for range 2 {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"zkgate", "peer-secret", "new"}, func(string) string { return "" }, &out, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		secret := strings.TrimSuffix(out.String(), "\n")
		if !regexp.MustCompile(`^zkp_[A-Za-z0-9_-]{43}$`).MatchString(secret) {
			t.Fatalf("stdout %q, want a secret alone on one line", out.String())
		}
		secrets = append(secrets, secret)
	}
	if secrets[0] == secrets[1] {
		t.Fatalf("two secrets alike: %s", secrets[0])
	}
	good, short := filepath.Join(dir, "good"), filepath.Join(dir, "short")
	if err := os.WriteFile(good, []byte(secrets[0]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, []byte("zkp_tooshort\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := server.ParseConfig([]string{"--zk", "127.0.0.1:2181", "--peer-secret-file", good}, func(string) string { return "" }, &bytes.Buffer{}); err != nil {
		t.Errorf("--peer-secret-file of a new secret: %v", err)
	}
	_, err := server.ParseConfig([]string{"--zk", "127.0.0.1:2181"}, func(k string) string {
		return map[string]string{"ZKGATE_PEER_SECRET_FILE": short}[k]
	}, &bytes.Buffer{})
	var stderr bytes.Buffer
	if code := exitCode(err, &stderr); code != 2 || !strings.Contains(stderr.String(), "--peer-secret-file") || !strings.Contains(stderr.String(), "at least 32") {
		t.Errorf("ZKGATE_PEER_SECRET_FILE of a short secret: exit %d, %q", code, stderr.String())
	}
	if err := run(context.Background(), []string{"zkgate", "peer-secret", "old"}, func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{}); exitCode(err, &bytes.Buffer{}) != 2 {
		t.Errorf("peer-secret old: %v", err)
	}
}
