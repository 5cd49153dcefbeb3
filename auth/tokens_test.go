package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const (
	hashA = "sha256:" + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")
	hashB = "sha256:" + "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae" // sha256("foo")
)

func TestParseTokens(t *testing.T) {
	t.Parallel()
	good := []struct {
		name, text string
		tokens     int
	}{
		{"empty", "", 0},
		{"comments and blanks", "# a comment\n\n   \n\t# another\n", 0},
		{"one", "billing " + hashA + " locks:billing-:write\n", 1},
		{"two, tabs, CRLF", "billing\t" + hashA + "\tlocks:billing-:write leases:*:write\r\nops " + hashB + " *:*:admin\r\n", 2},
		{"prefix written with a star", "b " + hashA + " queues:jobs-*:read", 1},
		{"no final newline", "b " + hashA + " *:*:read", 1},
	}
	for _, c := range good {
		t.Run(c.name, func(t *testing.T) {
			ts, err := parseTokens("f", []byte(c.text))
			if err != nil {
				t.Fatalf("parseTokens: %v", err)
			}
			if ts.Len() != c.tokens {
				t.Errorf("%d tokens, want %d", ts.Len(), c.tokens)
			}
		})
	}
	bad := []struct {
		name, text, want string
	}{
		{"no permission", "b " + hashA + "\n", "line 1: want"},
		{"secret instead of hash", "b zkg_abcdef locks:*:read", "sha256:"},
		{"short hash", "b sha256:abcd locks:*:read", "64 hex digits"},
		{"hex that is not hex", "b sha256:" + strings.Repeat("z", 64) + " locks:*:read", "64 hex digits"},
		{"unknown kind", "# c\nb " + hashA + " lockz:*:read", `line 2: token "b": permission "lockz:*:read": unknown kind "lockz"`},
		{"unknown level", "b " + hashA + " locks:*:own", `unknown level "own"`},
		{"two colons missing", "b " + hashA + " locks", "KIND:PREFIX:LEVEL"},
		{"four parts", "b " + hashA + " locks:a:b:read", "KIND:PREFIX:LEVEL"},
		{"bad prefix", "b " + hashA + " locks:a/b:read", "the prefix may only hold"},
		{"bad name", "b@c " + hashA + " locks:*:read", "may only hold"},
		{"long name", strings.Repeat("n", 65) + " " + hashA + " locks:*:read", "1 to 64"},
		{"twice the name", "b " + hashA + " locks:*:read\nb " + hashB + " locks:*:read", `line 2: token name "b" is given twice`},
		{"twice the hash", "b " + hashA + " locks:*:read\nc " + hashA + " locks:*:read", "same secret hash"},
		{"not UTF-8", "# \xff\xfe\n", "not UTF-8"},
		{"very long line", "b " + hashA + " " + strings.Repeat("locks:*:read ", 6000), "longer than 64 KiB"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseTokens("tokens.txt", []byte(c.text))
			if err == nil {
				t.Fatalf("no error, want one with %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "tokens file tokens.txt") {
				t.Errorf("error %q, want one naming the file and with %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is more than one line", err)
			}
		})
	}
}

func TestPermissions(t *testing.T) {
	t.Parallel()
	ts, err := parseTokens("f", []byte(strings.Join([]string{
		"billing " + hashA + " locks:billing-:write leases:*:write",
		"viewer " + hashB + " *:*:read",
	}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	billing, viewer := ts.Authenticate("test"), ts.Authenticate("foo")
	if billing == nil || billing.Name != "billing" || viewer == nil || viewer.Name != "viewer" {
		t.Fatalf("Authenticate: %v %v", billing, viewer)
	}
	for _, secret := range []string{"", "tes", "test ", "TEST", strings.Repeat("x", maxSecretLen+1)} {
		if tok := ts.Authenticate(secret); tok != nil {
			t.Errorf("secret %q authenticates as %s", secret, tok.Name)
		}
	}
	cases := []struct {
		tok        *Token
		kind, name string
		level      Level
		want       bool
	}{
		{billing, "locks", "billing-eu", LevelWrite, true},
		{billing, "locks", "billing-eu", LevelRead, true},
		{billing, "locks", "billing-eu", LevelAdmin, false},
		{billing, "locks", "billing", LevelRead, false},
		{billing, "locks", "orders", LevelRead, false},
		{billing, "semaphores", "billing-eu", LevelRead, false},
		{billing, "locks", "*", LevelRead, false}, // every lock: only a * prefix grants it
		{billing, "leases", "0b5c6f7e-1a2b-4c3d-8e9f-001122334455", LevelWrite, true},
		{billing, "leases", "*", LevelWrite, true},
		{billing, "*", "*", LevelRead, false},
		{viewer, "*", "*", LevelRead, true},
		{viewer, "queues", "jobs", LevelRead, true},
		{viewer, "queues", "jobs", LevelWrite, false},
	}
	for _, c := range cases {
		if got := c.tok.Permits(c.kind, c.name, c.level); got != c.want {
			t.Errorf("%s on %s %q at %s: %v, want %v", c.tok.Name, c.kind, c.name, c.level, got, c.want)
		}
	}
}

func TestAddToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	s1, err := AddToken(path, "billing", []string{"locks:billing-:write", "leases:*:write"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s1, secretPrefix) || len(s1) != len(secretPrefix)+43 {
		t.Errorf("secret %q: want zkg_ and 43 base64url characters (32 bytes)", s1)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("a new tokens file has mode %v, want 0600", st.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), s1) || strings.Contains(string(data), s1[len(secretPrefix):]) {
		t.Errorf("the tokens file holds the secret:\n%s", data)
	}
	// A file whose owner chose another mode keeps it.
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	s2, err := AddToken(path, "viewer", []string{"*:*:read"})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v after an add, want the 0640 it had", st.Mode().Perm())
	}
	ts, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if tok := ts.Authenticate(s1); tok == nil || tok.Name != "billing" {
		t.Errorf("the first secret does not authenticate as billing: %v", tok)
	}
	if tok := ts.Authenticate(s2); tok == nil || tok.Name != "viewer" {
		t.Errorf("the second secret does not authenticate as viewer: %v", tok)
	}

	// Refusals leave the file as it was.
	before, _ := os.ReadFile(path)
	for _, c := range []struct {
		name  string
		perms []string
		want  string
	}{
		{"billing", []string{"*:*:read"}, "already has a token named"},
		{"x", nil, "at least one permission"},
		{"x", []string{"lockz:*:read"}, "unknown kind"},
		{"a b", []string{"*:*:read"}, "may only hold"},
	} {
		if _, err := AddToken(path, c.name, c.perms); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AddToken(%q, %v): %v, want an error with %q", c.name, c.perms, err, c.want)
		}
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("a refused add changed the file")
	}
	// A broken file is never rewritten.
	broken := filepath.Join(dir, "broken")
	if err := os.WriteFile(broken, []byte("b sha256:12 locks:*:read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := AddToken(broken, "x", []string{"*:*:read"}); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("AddToken on a broken file: %v, want its line", err)
	}
	// Only the file is left in the directory: no temporary file.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only tokens and broken", names)
	}
}

// TestAddTokenConcurrent: adders at once lose nobody's token.
func TestAddTokenConcurrent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	const n = 16
	secrets := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			s, err := AddToken(path, "t"+strings.Repeat("x", i), []string{"locks:*:read"})
			secrets[i] = s
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ts, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if ts.Len() != n {
		t.Fatalf("%d tokens in the file, want %d", ts.Len(), n)
	}
	for i, s := range secrets {
		if ts.Authenticate(s) == nil {
			t.Errorf("secret %d does not authenticate", i)
		}
	}
}

func TestLoadTokensErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := LoadTokens(filepath.Join(dir, "missing")); err == nil || !errors.Is(err, os.ErrNotExist) ||
		!strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := LoadTokens(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
}

// FuzzTokensFile: the parser never panics, and whatever it accepts is a
// consistent set of tokens whose permissions print back as they parse.
func FuzzTokensFile(f *testing.F) {
	for _, seed := range []string{
		"",
		"# comment\n",
		"billing " + hashA + " locks:billing-:write leases:*:write\n",
		"ops " + hashB + " *:*:admin\r\nviewer " + hashA + " *:*:read",
		"b " + hashA + " queues:jobs-*:read double-barriers:x:write",
		"b sha256:zz locks:*:read",
		"b " + hashA + " lockz:*:read",
		"b " + hashA + " locks::read",
		"\xff " + hashA + " locks:*:read",
		"b " + hashA + " :::",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := parseTokens("fuzz", data)
		if err != nil {
			var te *TokensError
			if !errors.As(err, &te) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q is not a one-line TokensError", err)
			}
			return
		}
		if ts.Len() != len(ts.names) {
			t.Fatalf("%d hashes for %d names", ts.Len(), len(ts.names))
		}
		for _, tok := range ts.byHash {
			if err := validTokenName(tok.Name); err != nil {
				t.Fatalf("accepted a bad name: %v", err)
			}
			if len(tok.Permissions) == 0 {
				t.Fatalf("token %q has no permission", tok.Name)
			}
			for _, p := range tok.Permissions {
				again, err := parsePermission(p.String())
				if err != nil || again != p {
					t.Fatalf("permission %v prints as %q, which parses as %v, %v", p, p.String(), again, err)
				}
			}
		}
	})
}
