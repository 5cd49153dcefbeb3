package zkgate_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/proc"
	"github.com/zkgate/zkgate/internal/zk"
)

// The doc tests: every code block of README.md and docs/*.md is fenced
// and marked, after its language, `run` (this test runs it against a real
// gateway) or `norun` (a reader's example that cannot run here: an install
// from a registry, a cluster, systemd, an output listing). GitHub shows the
// first word of the info string alone, so ```sh run renders as ```sh.
//
// A run block's expected output is written in it as a comment a reader sees:
// a line `# => TEXT` (`// => TEXT` in js and go), alone or after a command,
// is what the commands since the previous such line printed (stdout and
// stderr), `…` standing for any text; several in a row are several lines.
// Every command's status is checked as well: one that fails fails the block.
//
// The blocks of a file run in order in one bash, which keeps their
// variables (a $LEASE set by one and used by the next), in a fresh
// directory holding the files the docs take as given (docFixtures) and a
// node_modules/zkgate that is client/node. A python, js or go block runs as
// a program of its own, from that directory; a go block without a package
// clause is the body of main, with ctx, and the functions the examples call
// as their own code (writeInvoices, send...) do nothing (docPreludes). The
// gateway is the zkgate binary built from the tree, one per file, on the
// test ZooKeeper with a root of its own, on a free loopback port, with the
// defaults of zkgate serve; the only substitution is its address for the
// documented default, localhost:8080 and 127.0.0.1:8080. ZKGATE_URL is set
// to it, zkgate is first on PATH, and client/python on PYTHONPATH.

const (
	markRun   = "run"
	markNoRun = "norun"
)

// docRunners are the languages a run block may have.
var docRunners = map[string]bool{"sh": true, "bash": true, "python": true, "js": true, "go": true}

// docFixtures are the files the docs' examples take as given.
var docFixtures = map[string]string{
	"message.eml":       "From: billing@example.com\nSubject: your invoice\n\nIt is attached.\n",
	"bill-customers.sh": "#!/bin/sh\necho \"bill-customers.sh: $ZKGATE_LOCK, token $ZKGATE_FENCING_TOKEN\"\n",
	"export.sh":         "#!/bin/sh\necho \"export.sh: $ZKGATE_LOCK, token $ZKGATE_FENCING_TOKEN\"\n",
	"transfer.sh":       "#!/bin/sh\necho \"transfer.sh: $ZKGATE_LOCK, tokens $ZKGATE_FENCING_TOKENS\"\n",
	"scheduler":         "#!/bin/sh\necho \"scheduler: leading $ZKGATE_ELECTION\"\n",
}

// docPreludes are put before a python or js block: the functions the
// examples call as the reader's own code.
var docPreludes = map[string]string{
	"python": "def write_invoices(fencing_token):\n    pass\n\n\ndef send(data):\n    pass\n\n\n",
	"js":     "async function writeInvoices({ fencingToken }) {}\nasync function send(data) {}\n\n",
}

// goFragment is a go block without a package clause: its imports go on
// top, the rest into main.
const goFragment = `package main

import (
	"context"
	"errors"
	"time"
)

%s

var _, _ = errors.Is, time.Second

func writeInvoices(ctx context.Context, token int64) error { return nil }

func main() {
	ctx := context.Background()
	_ = ctx
%s
}
`

// A codeBlock is a code block of a Markdown file.
type codeBlock struct {
	file   string
	line   int // of its opening fence (of its first line when indented)
	fenced bool
	lang   string   // the info string's first word
	marks  []string // its other words
	text   string
}

func (b codeBlock) where() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

func (b codeBlock) marked(mark string) bool {
	for _, m := range b.marks {
		if m == mark {
			return true
		}
	}
	return false
}

// problem is what is wrong with a block's marking, or "".
func (b codeBlock) problem() string {
	switch {
	case !b.fenced:
		return "an indented code block: fence it (```sh run, or ```sh norun when it cannot run here)"
	case b.lang == "" || b.lang == markRun || b.lang == markNoRun:
		return "no language: ```sh run, ```python run, ```text norun..."
	case b.marked(markRun) == b.marked(markNoRun):
		return "marked neither run nor norun (```" + b.lang + " run, or ```" + b.lang + " norun when it cannot run here)"
	case b.marked(markRun) && !docRunners[b.lang]:
		return "marked run, but " + b.lang + " blocks cannot be run (sh, bash, python, js and go can)"
	}
	return ""
}

var (
	fenceLine = regexp.MustCompile("^( *)(`{3,}|~{3,})(.*)$")
	listItem  = regexp.MustCompile(`^( *)([-*+]|[0-9]{1,9}[.)])( +)\S`)
)

func indentOf(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

// codeBlocks are the code blocks of a Markdown text: fenced ones, and
// indented ones (four spaces past the text they are in, after a blank
// line, in a list item too).
func codeBlocks(file, text string) []codeBlock {
	lines := strings.Split(strings.ReplaceAll(text, "\t", "    "), "\n")
	var blocks []codeBlock
	listIndent := -1 // the content's indentation in the list item we are in
	blank := true
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := fenceLine.FindStringSubmatch(line); m != nil && !(m[2][0] == '`' && strings.Contains(m[3], "`")) {
			indent, fence := len(m[1]), m[2]
			b := codeBlock{file: file, line: i + 1, fenced: true}
			if words := strings.Fields(m[3]); len(words) > 0 {
				b.lang, b.marks = words[0], words[1:]
			}
			var body []string
			for i++; i < len(lines); i++ {
				l := lines[i]
				if t := strings.TrimSpace(l); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
					break
				}
				body = append(body, l[min(indent, indentOf(l)):])
			}
			b.text = strings.Join(body, "\n")
			blocks = append(blocks, b)
			blank = false
			continue
		}
		if strings.TrimSpace(line) == "" {
			blank = true
			continue
		}
		ind := indentOf(line)
		if m := listItem.FindStringSubmatch(line); m != nil && (listIndent < 0 || ind < listIndent+4) {
			listIndent = len(m[1]) + len(m[2]) + len(m[3])
			blank = false
			continue
		}
		base := 0
		if listIndent >= 0 {
			if ind >= listIndent || !blank {
				base = listIndent
			} else {
				listIndent = -1
			}
		}
		if blank && ind >= base+4 {
			b := codeBlock{file: file, line: i + 1}
			var body []string
			last := i
			for j := i; j < len(lines); j++ {
				if strings.TrimSpace(lines[j]) == "" {
					body = append(body, "")
					continue
				}
				if indentOf(lines[j]) < base+4 {
					break
				}
				body = append(body, lines[j][base+4:])
				last = j
			}
			b.text = strings.Join(body[:last-i+1], "\n")
			blocks = append(blocks, b)
			i = last
		}
		blank = false
	}
	return blocks
}

// docFiles are README.md and docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, files...)
}

// docBlocks are the code blocks of the doc files, and what is wrong with
// their marking.
func docBlocks(t *testing.T) (map[string][]codeBlock, []string) {
	t.Helper()
	blocks := map[string][]codeBlock{}
	var problems []string
	for _, f := range docFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range codeBlocks(f, string(data)) {
			if p := b.problem(); p != "" {
				problems = append(problems, b.where()+": "+p)
			}
			blocks[f] = append(blocks[f], b)
		}
	}
	return blocks, problems
}

// TestDocBlocksMarked: every code block of README.md and docs/*.md is
// fenced and marked run or norun, so that a new example cannot escape the
// doc tests unseen; and some of them run.
func TestDocBlocksMarked(t *testing.T) {
	blocks, problems := docBlocks(t)
	if len(problems) > 0 {
		t.Fatalf("code blocks of the docs (see docs/development.md, \"Examples in the docs\"):\n  %s", strings.Join(problems, "\n  "))
	}
	runs := 0
	for _, bs := range blocks {
		for _, b := range bs {
			if b.marked(markRun) {
				runs++
			}
		}
	}
	if runs < 5 {
		t.Fatalf("only %d blocks are marked run", runs)
	}
}

// TestCodeBlocksFound: fenced blocks with their info strings, indented
// ones at the top and in list items, and none in a list item's text or a
// paragraph's wrapped lines.
func TestCodeBlocksFound(t *testing.T) {
	text := strings.Join([]string{
		"# Title", "",
		"```sh run", "curl x", "```", "",
		"Text", "    not code: the paragraph goes on", "",
		"    make run", "", "    make test", "",
		"- **item** with text", "  that wraps", "",
		"      sudo systemctl enable --now zkgate", "",
		"  more of the item", "",
		"1. step", "   ~~~python norun", "   print(1)", "   ~~~", "",
		"````", "```", "````", "",
		"After `inline ``` code`.",
	}, "\n")
	var got []string
	for _, b := range codeBlocks("x.md", text) {
		got = append(got, fmt.Sprintf("%d fenced=%v %q %v %q %q", b.line, b.fenced, b.lang, b.marks, b.text, b.problem()))
	}
	want := []string{
		`3 fenced=true "sh" [run] "curl x" ""`,
		`10 fenced=false "" [] "make run\n\nmake test" "an indented code block: fence it (` + "```sh run, or ```sh norun when it cannot run here)\"",
		`17 fenced=false "" [] "sudo systemctl enable --now zkgate" "an indented code block: fence it (` + "```sh run, or ```sh norun when it cannot run here)\"",
		`22 fenced=true "python" [norun] "print(1)" ""`,
		`26 fenced=true "" [] "` + "```" + `" "no language: ` + "```sh run, ```python run, ```text norun...\"",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("blocks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, c := range []struct {
		b    codeBlock
		want string
	}{
		{codeBlock{fenced: true, lang: "sh"}, "marked neither run nor norun"},
		{codeBlock{fenced: true, lang: "sh", marks: []string{"x"}}, "marked neither run nor norun"},
		{codeBlock{fenced: true, lang: "yaml", marks: []string{"run"}}, "marked run, but yaml blocks cannot be run"},
	} {
		if p := c.b.problem(); !strings.HasPrefix(p, c.want) {
			t.Errorf("%+v: %q, want %q", c.b, p, c.want)
		}
	}
}

// A docStep is the part of a run block up to an expected output, or to its
// end: the commands, and what they must print.
type docStep struct {
	block *codeBlock
	line  int      // the line of the file where it starts
	code  string   // the shell lines that run it
	want  []string // the expected output's lines; nil: not checked
}

// expectation is the expected output a line of a block states, alone (the
// whole line) or after a command.
func expectation(line, comment string) (want string, alone, ok bool) {
	if rest, ok := strings.CutPrefix(strings.TrimSpace(line), comment+" =>"); ok {
		return strings.TrimSpace(rest), true, true
	}
	if _, rest, ok := strings.Cut(line, " "+comment+" => "); ok {
		return strings.TrimSpace(rest), false, true
	}
	return "", false, false
}

// shellSteps cuts a shell block into its steps.
func shellSteps(b *codeBlock) []docStep {
	var steps []docStep
	cur := docStep{block: b, line: b.line + 1}
	var code []string
	flush := func(next int) {
		if len(code) > 0 || cur.want != nil {
			cur.code = strings.Join(code, "\n")
			steps = append(steps, cur)
		}
		cur, code = docStep{block: b, line: next}, nil
	}
	for k, line := range strings.Split(b.text, "\n") {
		n := b.line + 1 + k
		want, alone, ok := expectation(line, "#")
		if ok && alone {
			cur.want = append(cur.want, want)
			code = append(code, line)
			continue
		}
		if cur.want != nil {
			flush(n)
		}
		code = append(code, line)
		if ok {
			cur.want = []string{want}
		}
	}
	flush(0)
	return steps
}

// programWant is what a python, js or go block's expected-output comments
// say it prints.
func programWant(b *codeBlock) []string {
	comment := "//"
	if b.lang == "python" {
		comment = "#"
	}
	var want []string
	for _, line := range strings.Split(b.text, "\n") {
		if w, _, ok := expectation(line, comment); ok {
			want = append(want, w)
		}
	}
	return want
}

// goProgram is a go block as a program: as it is when it has a package
// clause, else its imports on top and the rest as the body of main.
func goProgram(text string) string {
	if regexp.MustCompile(`(?m)^package `).MatchString(text) {
		return text
	}
	var imports, body []string
	inImport := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case inImport:
			imports = append(imports, line)
			inImport = strings.TrimSpace(line) != ")"
		case strings.HasPrefix(line, "import "):
			imports = append(imports, line)
			inImport = strings.HasSuffix(strings.TrimSpace(line), "(")
		default:
			body = append(body, "\t"+line)
		}
	}
	return fmt.Sprintf(goFragment, strings.Join(imports, "\n"), strings.Join(body, "\n"))
}

// matchOutput reports whether got (what the commands printed) is want, a
// line each, `…` standing for any text; spaces at the ends of lines and
// blank lines around are not compared.
func matchOutput(want []string, got string) bool {
	var re strings.Builder
	re.WriteString(`^`)
	for i, part := range strings.Split(strings.Join(want, "\n"), "…") {
		if i > 0 {
			re.WriteString(`(?s:.*?)`)
		}
		re.WriteString(regexp.QuoteMeta(part))
	}
	re.WriteString(`$`)
	return regexp.MustCompile(re.String()).MatchString(normalOutput(got))
}

func normalOutput(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " \t\r")
	}
	return strings.Trim(strings.Join(lines, "\n"), "\n")
}

// TestOutputMatched: the expected output's `…` stands for any text, on a
// line or across lines; anything else must be as written.
func TestOutputMatched(t *testing.T) {
	for _, c := range []struct {
		want []string
		got  string
		ok   bool
	}{
		{[]string{`{"name":"invoices","token":…}`}, "{\"name\":\"invoices\",\"token\":31}\n", true},
		{[]string{`{"name":"invoices","token":…}`}, "{\"name\":\"orders\",\"token\":31}\n", false},
		{[]string{`{"name":"invoices"}`}, "{\"name\":\"invoices\",\"token\":31}\n", false},
		{[]string{`HTTP/1.1 401 Unauthorized`}, "\nHTTP/1.1 401 Unauthorized\r\n", true},
		{[]string{"a…", "c"}, "a\nb\nc", true},
		{[]string{"a", "c"}, "a\nb\nc", false},
		{[]string{"x.y"}, "xzy", false},
	} {
		if matchOutput(c.want, c.got) != c.ok {
			t.Errorf("matchOutput(%q, %q) = %v", c.want, c.got, !c.ok)
		}
	}
	b := &codeBlock{line: 10, lang: "sh", text: strings.Join([]string{
		"A=$(curl a)", "curl b   # => {…}", "# => second line", "curl c", "# => c", "curl d",
	}, "\n")}
	var got []string
	for _, s := range shellSteps(b) {
		got = append(got, fmt.Sprintf("%d %q %q", s.line, s.code, s.want))
	}
	want := []string{
		`11 "A=$(curl a)\ncurl b   # => {…}\n# => second line" ["{…}" "second line"]`,
		`14 "curl c\n# => c" ["c"]`,
		`16 "curl d" []`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDocBlocksRun runs the run blocks of each doc file against a gateway
// of its own (see the top of this file), one file after the other: each
// gateway has the default root, /zkgate, which is wiped between files.
func TestDocBlocksRun(t *testing.T) {
	blocks, problems := docBlocks(t)
	if len(problems) > 0 {
		t.Fatalf("unmarked code blocks (TestDocBlocksMarked says which)")
	}
	for _, tool := range []string{"bash", "curl", "jq", "python3", "node", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the docs' examples need %s: run scripts/deps.sh test (as root) or install it", tool)
		}
	}
	zkAddr := gwtest.ZK(t).Addr()
	conn := gwtest.Client(t, []string{zkAddr}, 10*time.Second)
	for _, f := range docFiles(t) {
		var run []codeBlock
		for _, b := range blocks[f] {
			if b.marked(markRun) {
				run = append(run, b)
			}
		}
		if len(run) == 0 {
			continue
		}
		t.Run(f, func(t *testing.T) { runDocBlocks(t, zkAddr, run) })
		zktest.Eventually(t, 10*time.Second, func() error {
			if err := wipe(conn, docRoot); err != nil {
				return fmt.Errorf("wiping %s after %s: %w", docRoot, f, err)
			}
			return nil
		})
	}
}

// wipe deletes p and everything under it. A node that goes meanwhile (an
// empty container that ZooKeeper removes, the ephemeral node of a session
// that just ended) is gone as asked: the wipe goes on with the others,
// and says whether p is gone at the end.
func wipe(conn *zk.Conn, p string) error {
	nodes, err := zktest.Tree(conn, p, nil)
	if err != nil {
		return err
	}
	return wipeNodes(conn, p, nodes)
}

// wipeNodes is wipe of p, whose tree was listed as nodes.
func wipeNodes(conn *zk.Conn, p string, nodes []string) error {
	for i := len(nodes) - 1; i >= 0; i-- {
		if err := conn.Delete(nodes[i], -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	if ok, _, err := conn.Exists(p); err != nil || ok {
		return fmt.Errorf("%s is still there (%v)", p, err)
	}
	return nil
}

// A node of the tree that goes while the tree is wiped (ZooKeeper removes
// an empty container, a session's ephemeral node goes with it) does not
// stop the wipe: the rest goes too. (Before, the wipe stopped at the first
// node already gone, and the next doc file's gateway found the previous
// one's counter and queue: TestDocBlocksRun/docs/api.md failed in CI.)
func TestWipeGoesOnPastANodeAlreadyGone(t *testing.T) {
	t.Parallel()
	conn := gwtest.Client(t, []string{gwtest.ZK(t).Addr()}, 10*time.Second)
	root := zktest.UniqueRoot(t)
	for _, p := range []string{root, root + "/counters", root + "/counters/hits", root + "/groups", root + "/groups/workers"} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	nodes, err := zktest.Tree(conn, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The last listed goes before the wipe reaches it (the wipe deletes
	// the last first).
	if err := conn.Delete(nodes[len(nodes)-1], -1); err != nil {
		t.Fatal(err)
	}
	if err := wipeNodes(conn, root, nodes); err != nil {
		t.Fatal(err)
	}
	if left, err := zktest.Tree(conn, root, nil); err != nil || len(left) > 0 {
		t.Fatalf("the wipe left %v (%v)", left, err)
	}
}

// docRoot is the gateways' root: the default, as the docs show it.
const docRoot = "/zkgate"

func runDocBlocks(t *testing.T, zkAddr string, blocks []codeBlock) {
	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	g := gwtest.StartProcess(t, gwtest.GatewayOptions{ZK: []string{zkAddr}, Root: docRoot,
		SessionTimeout: 10 * time.Second, MaxWait: 5 * time.Minute})
	// Stopped gracefully, so that its session and what it holds end with it.
	defer func() {
		g.Terminate()
		select {
		case <-g.Done():
		case <-time.After(30 * time.Second):
			t.Errorf("the gateway did not stop within 30s of SIGTERM")
		}
	}()
	addr := strings.TrimPrefix(g.URL, "http://")
	work := t.TempDir()
	progs := filepath.Join(work, ".doc")
	for _, dir := range []string{progs, filepath.Join(work, "node_modules")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range docFixtures {
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(repo, "client", "node"), filepath.Join(work, "node_modules", "zkgate")); err != nil {
		t.Fatal(err)
	}

	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	mark := "@@zkgate-doc-" + hex.EncodeToString(nonce)
	var script strings.Builder
	fmt.Fprintf(&script, "exec 2>&1\n__doc_mark=%s\n", mark)
	script.WriteString("__doc_err() { printf '\\n%s err %s %s\\n' \"$__doc_mark\" \"$1\" \"${2//$'\\n'/ }\"; }\n")
	script.WriteString("trap '__doc_err \"$?\" \"$BASH_COMMAND\"' ERR\n")
	var steps []docStep
	for i := range blocks {
		b := &blocks[i]
		b.text = strings.NewReplacer("localhost:8080", addr, "127.0.0.1:8080", addr).Replace(b.text)
		switch b.lang {
		case "sh", "bash":
			steps = append(steps, shellSteps(b)...)
			continue
		}
		var file, code string
		switch b.lang {
		case "python":
			file = filepath.Join(progs, fmt.Sprintf("block%d.py", b.line))
			code = "python3 " + file
			err = os.WriteFile(file, []byte(docPreludes["python"]+b.text+"\n"), 0o644)
		case "js":
			file = filepath.Join(progs, fmt.Sprintf("block%d.mjs", b.line))
			code = "node " + file
			err = os.WriteFile(file, []byte(docPreludes["js"]+b.text+"\n"), 0o644)
		case "go":
			file = filepath.Join(progs, fmt.Sprintf("block%d.go", b.line))
			code = fmt.Sprintf("(cd %s && go build -o %s %s) && %s", repo, file+".bin", file, file+".bin")
			err = os.WriteFile(file, []byte(goProgram(b.text)), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, docStep{block: b, line: b.line + 1, code: code, want: programWant(b)})
	}
	for i, s := range steps {
		fmt.Fprintf(&script, "printf '\\n%%s step %d\\n' \"$__doc_mark\"\n%s\n", i, s.code)
	}
	scriptFile := filepath.Join(progs, "script.sh")
	if err := os.WriteFile(scriptFile, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command("bash", "--noprofile", "--norc", scriptFile)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "ZKGATE_URL="+g.URL, "ZKGATE_TOKEN=",
		"PATH="+filepath.Dir(gwtest.Binary(t))+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PYTHONPATH="+filepath.Join(repo, "client", "python"), "PYTHONDONTWRITEBYTECODE=1")
	var out gwtest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := proc.Start(cmd, true); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	const within = 3 * time.Minute
	select {
	case err = <-done:
	case <-time.After(within):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("the blocks still ran after %v:\n%s", within, out.String())
	}
	// What a block left running in the background goes with it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if err != nil {
		t.Errorf("bash: %v", err)
	}

	// The output, cut at the marks: each step's output, and its commands
	// that failed.
	outputs := make([]string, len(steps))
	failed := make([][]string, len(steps))
	cur := -1
	for _, line := range strings.SplitAfter(out.String(), "\n") {
		rest, ok := strings.CutPrefix(line, mark+" ")
		switch {
		case ok && strings.HasPrefix(rest, "step "):
			fmt.Sscanf(rest, "step %d", &cur)
		case ok && strings.HasPrefix(rest, "err ") && cur >= 0:
			failed[cur] = append(failed[cur], strings.TrimSpace(strings.TrimPrefix(rest, "err ")))
		case cur >= 0:
			outputs[cur] += line
		}
	}
	if cur != len(steps)-1 {
		t.Errorf("bash stopped at step %d of %d:\n%s", cur+1, len(steps), out.String())
	}
	for i, s := range steps {
		where := fmt.Sprintf("%s:%d", s.block.file, s.line)
		for _, f := range failed[i] {
			status, command, _ := strings.Cut(f, " ")
			t.Errorf("%s: %s exited %s; the output:\n%s", where, command, status, outputs[i])
		}
		if s.want != nil && !matchOutput(s.want, outputs[i]) {
			t.Errorf("%s: the output is not what the doc says\n--- the doc:\n%s\n--- the output:\n%s",
				where, strings.Join(s.want, "\n"), normalOutput(outputs[i]))
		}
	}
}

func TestMain(m *testing.M) { gwtest.Main(m) }
