package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zkgate/zkgate/internal/gwtest"
)

func TestMain(m *testing.M) { gwtest.Main(m) }

// TestPageFromTheProgram: the page made from the real binary documents every
// flag of the README's Configuration table with its environment twin, holds
// zkgate help, and groff reads it without a warning.
func TestPageFromTheProgram(t *testing.T) {
	u, err := Usage(gwtest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	page := Render(u)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)` \\| `(ZKGATE_[A-Z0-9_]+)` \\|").FindAllStringSubmatch(string(readme), -1)
	if len(rows) < 20 {
		t.Fatalf("found %d flags in the README's Configuration table", len(rows))
	}
	for _, r := range rows {
		flag := `\-\-` + strings.ReplaceAll(r[1], "-", `\-`)
		if !strings.Contains(page, ".BI \""+flag+" \"") && !strings.Contains(page, ".B "+flag+"\n") {
			t.Errorf("the page has no entry for --%s", r[1])
		}
		if !strings.Contains(page, ".B "+r[2]+"\nas \\fB"+flag+"\\fR") {
			t.Errorf("the page does not name %s as the twin of --%s", r[2], r[1])
		}
	}
	if !strings.Contains(page, `zkgate lock [\-\-wait 30s]`) {
		t.Error("the page does not hold zkgate help")
	}
	file := filepath.Join(t.TempDir(), "zkgate.1")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("groff", "-man", "-Tutf8", "-ww", "-z", file).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("groff: %v\n%s", err, out)
	}
}

// TestRoffControlCharacters: a line of text that starts with a dot or a
// quote is text, not a roff request.
func TestRoffControlCharacters(t *testing.T) {
	var b strings.Builder
	writeLiteral(&b, ".hidden\n'quoted\nplain -x\n\n\\back")
	want := "\\&.hidden\n\\&'quoted\nplain \\-x\n.sp\n\\eback\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}
