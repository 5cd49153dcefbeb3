package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

func TestMain(m *testing.M) { gwtest.Main(m) }

// TestPagesFromTheProgram: the real binary writes a page for every command
// that zkgate help lists, down to each subcommand, each of which groff reads
// without a warning; zkgate-serve(1) documents every flag of the
// Configuration table (docs/operations.md) with its environment twin.
func TestPagesFromTheProgram(t *testing.T) {
	bin := gwtest.Binary(t)
	dir := t.TempDir()
	stale := filepath.Join(dir, "zkgate-gone.1")
	if err := os.WriteFile(stale, []byte(".TH GONE 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Generate(bin, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("the page of a command no longer there was left")
	}
	want := listedPages(t, bin)
	for _, top := range []string{"serve", "lock", "elect", "status", "queue", "barrier", "lease", "token", "peer-secret", "completion", "version"} {
		if !want["zkgate-"+top+".1"] {
			t.Errorf("zkgate help does not list %s", top)
		}
	}
	for _, sub := range []string{"queue-claim", "queue-ack", "lease-grant", "token-new", "completion-bash"} {
		if !want["zkgate-"+sub+".1"] {
			t.Errorf("the help of zkgate does not lead to %s", sub)
		}
	}
	checkPages(t, dir, want)
	checkServeFlags(t, filepath.Join(dir, "zkgate-serve.1"))
}

// listedPages names the page of every command and subcommand the program
// bin lists, from its own help: the lines "  NAME   what it does" of its
// lists of commands.
func listedPages(t *testing.T, bin string) map[string]bool {
	t.Helper()
	commandLine := regexp.MustCompile(`(?m)^  ([a-z][a-z-]*) +\S`)
	want := map[string]bool{"zkgate.1": true}
	var walk func(path []string)
	walk = func(path []string) {
		out, err := exec.Command(bin, append(path, "--help")...).Output()
		if err != nil {
			t.Fatalf("zkgate %v --help: %v", path, err)
		}
		for _, m := range commandLine.FindAllStringSubmatch(string(out), -1) {
			if m[1] == "help" || m[1] == "zkgate" {
				continue
			}
			sub := append(append([]string{}, path...), m[1])
			want["zkgate-"+strings.Join(sub, "-")+".1"] = true
			walk(sub)
		}
	}
	walk(nil)
	return want
}

// checkPages: the pages in dir are the pages in want, each read by groff
// without a warning.
func checkPages(t *testing.T, dir string, want map[string]bool) {
	t.Helper()
	got, err := filepath.Glob(filepath.Join(dir, "*.1"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range got {
		have[filepath.Base(f)] = true
		out, err := exec.Command("groff", "-man", "-Tutf8", "-ww", "-z", f).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("groff %s: %v\n%s", filepath.Base(f), err, out)
		}
	}
	for page := range want {
		if !have[page] {
			t.Errorf("no page %s (pages: %v)", page, have)
		}
	}
	if len(have) != len(want) {
		t.Errorf("pages %v, want %v", have, want)
	}
}

// checkServeFlags: the page zkgate-serve(1) at file has an entry for every
// flag of the Configuration table of docs/operations.md, naming its
// environment twin.
func checkServeFlags(t *testing.T, file string) {
	t.Helper()
	serve, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	table, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)` \\| `(ZKGATE_[A-Z0-9_]+)` \\|").FindAllStringSubmatch(string(table), -1)
	if len(rows) < 20 {
		t.Fatalf("found %d flags in the Configuration table of docs/operations.md", len(rows))
	}
	page := string(serve)
	for _, r := range rows {
		dash := `(?:\\-|-)` // roff's minus, or md2man's plain hyphen
		name := strings.ReplaceAll(regexp.QuoteMeta(r[1]), "-", dash)
		entry := regexp.MustCompile(`\\fB` + dash + dash + name + `\\fP(?:=|\[=).*\n.*\(` + r[2] + `\)`)
		if !entry.MatchString(page) {
			t.Errorf("zkgate-serve(1) has no entry for --%s naming %s", r[1], r[2])
		}
	}
}
