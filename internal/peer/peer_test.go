package peer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, text string) *Secret {
	t.Helper()
	s, err := ParseSecret("f", []byte(text))
	if err != nil {
		t.Fatalf("ParseSecret(%q): %v", text, err)
	}
	return s
}

// TestProofs: a proof checks out for its own purpose and fields under the
// same secret, and for nothing else.
func TestProofs(t *testing.T) {
	a := mustParse(t, strings.Repeat("a", 32))
	b := mustParse(t, strings.Repeat("b", 32))
	p := a.Sign("lease", "/root", "id", "gw")
	if !a.Check(p, "lease", "/root", "id", "gw") {
		t.Fatal("a proof does not check out with its own secret")
	}
	for name, ok := range map[string]bool{
		"another secret":         b.Check(p, "lease", "/root", "id", "gw"),
		"another purpose":        a.Check(p, "registration", "/root", "id", "gw"),
		"another field":          a.Check(p, "lease", "/root", "id", "evil"),
		"fields split not alike": a.Check(a.Sign("lease", "ab", "c"), "lease", "a", "bc"),
		"a field more":           a.Check(p, "lease", "/root", "id", "gw", ""),
		"not base64":             a.Check("!"+p[1:], "lease", "/root", "id", "gw"),
		"cut short":              a.Check(p[:len(p)-2], "lease", "/root", "id", "gw"),
		"empty":                  a.Check("", "lease", "/root", "id", "gw"),
	} {
		if ok {
			t.Errorf("%s: the proof checks out", name)
		}
	}
}

// TestSecretRollover: of several secrets the first signs and each is taken.
func TestSecretRollover(t *testing.T) {
	old, next := strings.Repeat("o", 40), strings.Repeat("n", 40)
	before, during, after := mustParse(t, old), mustParse(t, "# rolling over\n"+old+"\n\n"+next+"\n"), mustParse(t, next)
	if !during.Check(before.Sign("x"), "x") || !during.Check(after.Sign("x"), "x") {
		t.Error("a file of two secrets should take the proofs of either")
	}
	if !before.Check(during.Sign("x"), "x") || after.Check(during.Sign("x"), "x") {
		t.Error("a file of two secrets should sign with its first")
	}
}

// TestSecretFile: a file without a secret, or with one shorter than 32
// bytes, is refused with what to do; a secret NewSecret made loads.
func TestSecretFile(t *testing.T) {
	dir := t.TempDir()
	for text, want := range map[string]string{
		"":                             "holds no secret",
		"# only a comment\n\n":         "holds no secret",
		"short\n":                      "at least 32",
		strings.Repeat("x", 31):        "at least 32",
		"\n" + strings.Repeat("x", 31): "line 2",
	} {
		if _, err := ParseSecret("f", []byte(text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSecret(%q): %v, want an error with %q", text, err, want)
		}
	}
	if _, err := LoadSecret(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing file: %v", err)
	}
	made, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewSecret()
	if made == other || len(made) < MinSecretLen {
		t.Fatalf("NewSecret made %q and %q", made, other)
	}
	f := filepath.Join(dir, "secret")
	if err := os.WriteFile(f, []byte(made+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSecret(f); err != nil {
		t.Errorf("a secret NewSecret made: %v", err)
	}
}

// TestNonces: a nonce is taken once, and remembered at least twice the
// window after it was taken (a proof is taken within a window of its time,
// on either side); the memory is bounded for each sender apart, so a
// sender that fills its own leaves the others their room.
func TestNonces(t *testing.T) {
	const w = time.Minute
	n := &Nonces{Window: w, Max: 3}
	t0 := time.Unix(1_700_000_000, 0)
	if err := n.Take("g1", "a", t0); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{0, w, 2 * w, 3*w + 59*time.Second} {
		if err := n.Take("g1", "a", t0.Add(at)); !errors.Is(err, ErrReplayed) {
			t.Errorf("taken again %s later: %v, want a replay", at, err)
		}
	}
	if err := n.Take("g2", "a", t0); err != nil {
		t.Errorf("another sender's nonce of the same text: %v", err)
	}
	if err := n.Take("g1", "b", t0.Add(2*w)); err != nil {
		t.Fatal(err)
	}
	if err := n.Take("g1", "c", t0.Add(2*w)); err != nil {
		t.Fatal(err)
	}
	if err := n.Take("g1", "d", t0.Add(2*w)); !errors.Is(err, ErrFull) {
		t.Errorf("over the bound: %v, want full", err)
	}
	// g1 is full; g2 still has its room.
	for _, nonce := range []string{"b", "c"} {
		if err := n.Take("g2", nonce, t0.Add(2*w)); err != nil {
			t.Errorf("g2 while g1 is full: %v", err)
		}
	}
	// Two generations later, "a" is forgotten, and there is room again.
	if err := n.Take("g1", "a", t0.Add(6*w)); err != nil {
		t.Errorf("long after: %v", err)
	}
}

// What one gateway seals, another with the same secret opens, for the same
// context only; a gateway with another secret cannot.
func TestSealOpen(t *testing.T) {
	a, err := ParseSecret("a", []byte("zkp_"+strings.Repeat("a", 40)+"\nzkp_"+strings.Repeat("b", 40)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ParseSecret("b", []byte("zkp_"+strings.Repeat("b", 40)))
	other, _ := ParseSecret("c", []byte("zkp_"+strings.Repeat("c", 40)))
	sealed, err := a.Seal([]byte("session password"), "handover 0x1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, "session password") {
		t.Fatal("sealed text shows the plaintext")
	}
	if got, err := a.Open(sealed, "handover 0x1"); err != nil || string(got) != "session password" {
		t.Fatalf("open: %q %v", got, err)
	}
	if _, err := a.Open(sealed, "handover 0x2"); err == nil {
		t.Fatal("opened for another context")
	}
	if _, err := other.Open(sealed, "handover 0x1"); err == nil {
		t.Fatal("opened with another secret")
	}
	// A rolled-over secret: the new first key seals, the old one still opens.
	sealedB, _ := b.Seal([]byte("x"), "c")
	if got, err := a.Open(sealedB, "c"); err != nil || string(got) != "x" {
		t.Fatalf("open with the second key: %q %v", got, err)
	}
}
