package auth

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/zkgate/zkgate/kinds"
)

// The tokens file (--auth-file) names each client token with the hash of
// its secret and its permissions, one token a line:
//
//	# NAME      SECRET HASH          PERMISSION...
//	billing     sha256:9f86d081…     locks:billing-:write leases:*:write
//	dashboard   sha256:2c26b46b…     *:*:read
//
// A permission is KIND:PREFIX:LEVEL: KIND is one of permKinds or "*", PREFIX is
// "*" (every name) or the start of the names it covers, and LEVEL is read,
// write or admin, each including the ones before it.
//
// Only hashes are stored. A secret is 32 random bytes made by
// `zkgate token new`, so a plain SHA-256 is enough: a slow password hash
// (bcrypt, scrypt, argon2) exists to make guessing low-entropy passwords
// expensive, and nobody can guess 2^256 secrets however fast the hash is;
// a fast hash keeps checking a token cheap on every request.

// permKinds are the kinds of permission, one per kind of primitive plus leases.
var permKinds = append(kinds.Names(), "leases")

// secretPrefix starts every secret `zkgate token new` makes, so that a
// leaked one is easy to recognise (and to search for in logs and code).
const secretPrefix = "zkg_"

// maxSecretLen bounds what is hashed of an Authorization header.
const maxSecretLen = 512

// maxTokensFile bounds the tokens file read at start and on SIGHUP.
const maxTokensFile = 8 << 20

// Permission is one KIND:PREFIX:LEVEL.
type Permission struct {
	Kind   string // a kind, or "*"
	Prefix string // "" covers every name (written "*")
	Level  Level
}

func (p Permission) String() string {
	prefix := p.Prefix
	if prefix == "" {
		prefix = "*"
	}
	return p.Kind + ":" + prefix + ":" + p.Level.String()
}

// covers reports whether p grants level on name of kind. kind "*" asks for
// every kind and name "*" for every name (the dashboard, /metrics, listings
// without a prefix): only a permission as wide grants them.
func (p Permission) covers(kind, name string, level Level) bool {
	if p.Level < level {
		return false
	}
	if p.Kind != "*" && p.Kind != kind {
		return false
	}
	if p.Prefix == "" {
		return true
	}
	return name != "*" && strings.HasPrefix(name, p.Prefix)
}

// Token is one client token of the file.
type Token struct {
	Name        string
	hash        [sha256.Size]byte
	Permissions []Permission
}

// Permits reports whether the token holds level on name of kind.
func (t *Token) Permits(kind, name string, level Level) bool {
	return slices.ContainsFunc(t.Permissions, func(p Permission) bool { return p.covers(kind, name, level) })
}

// PermitsSome reports whether the token holds level on some name of kind.
func (t *Token) PermitsSome(kind string, level Level) bool {
	return slices.ContainsFunc(t.Permissions, func(p Permission) bool {
		return p.Level >= level && (p.Kind == "*" || p.Kind == kind)
	})
}

// Tokens are the tokens of one version of the file.
type Tokens struct {
	byHash map[[sha256.Size]byte]*Token
	names  map[string]*Token
}

// Len is the number of tokens.
func (ts *Tokens) Len() int { return len(ts.byHash) }

// Authenticate returns the token whose secret is secret, or nil. The
// lookup is by the secret's hash, so timing tells nothing about any
// stored secret; the hashes are then compared in constant time all the same.
func (ts *Tokens) Authenticate(secret string) *Token {
	if ts == nil || secret == "" || len(secret) > maxSecretLen {
		return nil
	}
	sum := sha256.Sum256([]byte(secret))
	t, ok := ts.byHash[sum]
	if !ok || subtle.ConstantTimeCompare(t.hash[:], sum[:]) != 1 {
		return nil
	}
	return t
}

// Named returns the token called name, or nil: for a request another
// gateway forwarded, which names its caller's token, never its secret.
func (ts *Tokens) Named(name string) *Token {
	if ts == nil {
		return nil
	}
	return ts.names[name]
}

// TokensError is a bad tokens file: its path and line say where.
type TokensError struct {
	Path string
	Line int // 0: the file as a whole
	Msg  string
	Err  error // the cause, if the file could not be read
}

func (e *TokensError) Unwrap() error { return e.Err }

func (e *TokensError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("tokens file %s, line %d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("tokens file %s: %s", e.Path, e.Msg)
}

// LoadTokens reads and checks a tokens file.
func LoadTokens(path string) (*Tokens, error) {
	data, err := readTokensFile(path)
	if err != nil {
		return nil, err
	}
	return parseTokens(path, data)
}

func readTokensFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &TokensError{Path: path, Msg: unwrapPathError(err), Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &TokensError{Path: path, Msg: unwrapPathError(err)}
	}
	if !st.Mode().IsRegular() {
		return nil, &TokensError{Path: path, Msg: "not a regular file"}
	}
	if st.Size() > maxTokensFile {
		return nil, &TokensError{Path: path, Msg: fmt.Sprintf("larger than %d bytes", maxTokensFile)}
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, &TokensError{Path: path, Msg: unwrapPathError(err)}
	}
	return buf.Bytes(), nil
}

func unwrapPathError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// parseTokens parses the text of a tokens file; path only names it in errors.
func parseTokens(path string, data []byte) (*Tokens, error) {
	ts := &Tokens{byHash: map[[sha256.Size]byte]*Token{}, names: map[string]*Token{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		t, err := parseTokenLine(text)
		if err != nil {
			return nil, &TokensError{Path: path, Line: line, Msg: err.Error()}
		}
		if ts.names[t.Name] != nil {
			return nil, &TokensError{Path: path, Line: line, Msg: fmt.Sprintf("token name %q is given twice", t.Name)}
		}
		if _, dup := ts.byHash[t.hash]; dup {
			return nil, &TokensError{Path: path, Line: line, Msg: fmt.Sprintf("token %q has the same secret hash as another token", t.Name)}
		}
		ts.names[t.Name] = t
		ts.byHash[t.hash] = t
	}
	if err := sc.Err(); err != nil {
		return nil, &TokensError{Path: path, Line: line + 1, Msg: "line longer than 64 KiB"}
	}
	if !utf8.Valid(data) {
		return nil, &TokensError{Path: path, Msg: "not UTF-8 text"}
	}
	return ts, nil
}

// parseTokenLine reads "NAME sha256:HEX PERMISSION...".
func parseTokenLine(text string) (*Token, error) {
	fields := strings.Fields(text)
	if len(fields) < 3 {
		return nil, errors.New(`want "NAME sha256:HASH PERMISSION...", with at least one permission`)
	}
	t := &Token{Name: fields[0]}
	if err := validTokenName(t.Name); err != nil {
		return nil, err
	}
	hexHash, ok := strings.CutPrefix(fields[1], "sha256:")
	if !ok {
		return nil, fmt.Errorf("token %q: the second field must be sha256:<64 hex digits> (the hash of the secret, never the secret)", t.Name)
	}
	raw, err := hex.DecodeString(hexHash)
	if err != nil || len(raw) != sha256.Size {
		return nil, fmt.Errorf("token %q: the hash must be sha256: followed by 64 hex digits", t.Name)
	}
	copy(t.hash[:], raw)
	for _, f := range fields[2:] {
		p, err := parsePermission(f)
		if err != nil {
			return nil, fmt.Errorf("token %q: %v", t.Name, err)
		}
		t.Permissions = append(t.Permissions, p)
	}
	return t, nil
}

// validTokenName accepts 1-64 characters of [A-Za-z0-9._-]: a name is
// logged and written into lease records.
func validTokenName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("token name %q must be 1 to 64 characters", name)
	}
	for i := 0; i < len(name); i++ {
		if !nameChar(name[i]) {
			return fmt.Errorf("token name %q may only hold A-Z, a-z, 0-9, '.', '_' and '-'", name)
		}
	}
	return nil
}

func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// parsePermission reads KIND:PREFIX:LEVEL.
func parsePermission(s string) (Permission, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Permission{}, fmt.Errorf("permission %q must be KIND:PREFIX:LEVEL, such as locks:billing-:write or *:*:read", s)
	}
	kind, prefix, level := parts[0], parts[1], parts[2]
	p := Permission{Kind: kind}
	if kind != "*" && !slices.Contains(permKinds, kind) {
		return Permission{}, fmt.Errorf("permission %q: unknown kind %q (want one of %s, or *)", s, kind, strings.Join(permKinds, ", "))
	}
	// "billing-*" is read as the prefix "billing-", as people write it.
	prefix = strings.TrimSuffix(prefix, "*")
	if len(prefix) > 200 {
		return Permission{}, fmt.Errorf("permission %q: the prefix is longer than a name can be (200)", s)
	}
	for i := 0; i < len(prefix); i++ {
		if !nameChar(prefix[i]) {
			return Permission{}, fmt.Errorf("permission %q: the prefix may only hold A-Z, a-z, 0-9, '.', '_', '-' (or be *)", s)
		}
	}
	p.Prefix = prefix
	if p.Level = levelNamed(level); p.Level == LevelNone {
		return Permission{}, fmt.Errorf("permission %q: unknown level %q (want read, write or admin)", s, level)
	}
	return p, nil
}

// levelNamed is the level a permission names (see Level.String), or
// LevelNone.
func levelNamed(name string) Level {
	for l := LevelRead; l <= LevelAdmin; l++ {
		if l.String() == name {
			return l
		}
	}
	return LevelNone
}

// newSecret makes a client secret: 32 random bytes, URL-safe base64.
func newSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// hashSecret is what the tokens file stores of a secret.
func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// AddToken adds a token named name with perms to the tokens file at path
// (made if missing, mode 0600), and returns its secret. The file is
// rewritten whole to a temporary file and renamed over the old one, so a
// reader (a gateway reloading on SIGHUP) sees the old file or the new one,
// never half of one; an existing file keeps its mode. Concurrent adders are
// serialised with a lock on the file.
func AddToken(path, name string, perms []string) (string, error) {
	if err := validTokenName(name); err != nil {
		return "", err
	}
	if len(perms) == 0 {
		return "", errors.New("give at least one permission, such as locks:billing-:write or *:*:read")
	}
	for _, p := range perms {
		if _, err := parsePermission(p); err != nil {
			return "", err
		}
	}
	unlock, err := lockTokensFile(path)
	if err != nil {
		return "", err
	}
	defer unlock()

	mode := fs.FileMode(0o600)
	old, err := readTokensFile(path)
	switch {
	case err == nil:
		st, serr := os.Stat(path)
		if serr == nil {
			mode = st.Mode().Perm()
		}
		ts, perr := parseTokens(path, old)
		if perr != nil {
			return "", perr
		}
		if ts.names[name] != nil {
			return "", fmt.Errorf("tokens file %s already has a token named %q", path, name)
		}
	case errors.Is(err, fs.ErrNotExist):
		old = []byte("# zkgate tokens: NAME  SECRET-HASH  PERMISSION... (see zkgate token new)\n")
	default:
		return "", err
	}
	secret, err := newSecret()
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	buf.Write(old)
	if len(old) > 0 && old[len(old)-1] != '\n' {
		buf.WriteByte('\n')
	}
	fmt.Fprintf(&buf, "%s %s %s\n", name, hashSecret(secret), strings.Join(perms, " "))
	// The result must load: never write a file the gateway would refuse.
	if _, err := parseTokens(path, buf.Bytes()); err != nil {
		return "", err
	}
	if err := writeFileAtomic(path, buf.Bytes(), mode); err != nil {
		return "", err
	}
	return secret, nil
}

// writeFileAtomic writes data to a temporary file beside path, syncs it and
// renames it over path.
func writeFileAtomic(path string, data []byte, mode fs.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write tokens file: %w", err)
	}
	name := tmp.Name()
	defer os.Remove(name) // after a successful rename there is nothing left to remove
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write tokens file: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write tokens file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write tokens file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write tokens file: %w", err)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("write tokens file: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// lockTokensFile takes an exclusive lock on the file's directory (the file
// itself is replaced by each write), so that two `zkgate token new` never
// lose one another's token.
func lockTokensFile(path string) (unlock func(), err error) {
	f, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("lock tokens file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock tokens file: %w", err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
