package zkgate_test

import (
	"os"
	"os/exec"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var (
	// [text](target "title") and ![alt](target), and [id]: target.
	inlineLink    = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	referenceLink = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	inlineCode    = regexp.MustCompile("`+[^`]*`+")
	htmlAnchor    = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	scheme        = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// markdownFiles are the project's Markdown files: every *.md that git
// tracks or does not ignore (a new page is checked before it is committed)
// but the upstream ones of go-zookeeper's copy (its PATCHES.md is zkgate's).
func markdownFiles(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	for _, f := range strings.Fields(string(out)) {
		if f == "internal/zk/PATCHES.md" || !strings.HasPrefix(f, "internal/zk/") {
			files = append(files, f)
		}
	}
	return files
}

// prose is a Markdown file without its code blocks and inline code, where
// a link is an example, not a link.
func prose(text string) string {
	return inlineCode.ReplaceAllString(outsideCodeBlocks(text), "")
}

// outsideCodeBlocks is a Markdown file with its fenced and indented code
// blocks blanked, line for line.
func outsideCodeBlocks(text string) string {
	var b strings.Builder
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
		case fence != "" && strings.HasPrefix(trimmed, fence):
			fence = ""
		case fence == "" && !strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "\t"):
			b.WriteString(line)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// anchors are the fragments that a Markdown file's headings (as GitHub
// makes them: lower case, punctuation dropped, inline code's text kept,
// spaces to hyphens, repeats numbered) and HTML anchors give it.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range htmlAnchor.FindAllStringSubmatch(prose(text), -1) {
		out[m[1]] = true
	}
	for _, line := range strings.Split(outsideCodeBlocks(text), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var slug strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
				slug.WriteRune(r)
			}
		}
		s := slug.String()
		for i := 1; out[s]; i++ {
			s = slug.String() + "-" + strconv.Itoa(i)
		}
		out[s] = true
	}
	return out
}

// linkTargets are the targets of a Markdown text's links, inline and
// reference, outside code.
func linkTargets(text string) []string {
	text = prose(text)
	var targets []string
	for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
		targets = append(targets, m[1])
	}
	for _, m := range referenceLink.FindAllStringSubmatch(text, -1) {
		targets = append(targets, m[1])
	}
	return targets
}

// brokenLinks lists the relative links of the Markdown file at file (a path
// from the repository's root) that name no file, or a heading that the
// Markdown file they name does not have.
func brokenLinks(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var broken []string
	for _, target := range linkTargets(string(data)) {
		if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
			continue // another site's: not checked offline
		}
		ref, fragment, _ := strings.Cut(target, "#")
		dest := file
		if ref != "" {
			if strings.HasPrefix(ref, "/") {
				dest = path.Clean(strings.TrimPrefix(ref, "/"))
			} else {
				dest = path.Join(path.Dir(file), ref)
			}
			if _, err := os.Stat(dest); err != nil {
				broken = append(broken, file+": "+target+" (no "+dest+")")
				continue
			}
		}
		if fragment == "" || !strings.HasSuffix(dest, ".md") {
			continue
		}
		destText, err := os.ReadFile(dest)
		if err != nil {
			broken = append(broken, file+": "+target+" ("+err.Error()+")")
			continue
		}
		if !anchors(string(destText))[fragment] {
			broken = append(broken, file+": "+target+" (no heading #"+fragment+" in "+dest+")")
		}
	}
	return broken
}

// TestMarkdownLinks: every relative link of the project's Markdown files
// (README.md, BENCHMARKS.md, the clients' READMEs, deploy/, docs/) names a
// file of the repository, and a link to a heading names one that exists.
func TestMarkdownLinks(t *testing.T) {
	files := markdownFiles(t)
	if len(files) < 4 {
		t.Fatalf("found only %v", files)
	}
	var broken []string
	for _, f := range files {
		broken = append(broken, brokenLinks(t, f)...)
	}
	if len(broken) > 0 {
		t.Fatalf("broken links:\n  %s", strings.Join(broken, "\n  "))
	}
}

// TestBrokenLinksFound: the checker finds a missing file, a missing
// heading, and passes what exists, and ignores code and other sites.
func TestBrokenLinksFound(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.MkdirAll("docs", 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile("docs/guide.md", []byte("# Guide\n\n## Set-up, on a fresh machine\n\n## Set-up, on a fresh machine\n"), 0o644)
	os.WriteFile("README.md", []byte(strings.Join([]string{
		"# Top", "",
		"[ok](docs/guide.md) [ok](docs/guide.md#set-up-on-a-fresh-machine) [ok](docs/guide.md#set-up-on-a-fresh-machine-1)",
		"[ok](#top) [ok](/docs/) ![ok](docs/guide.md \"title\") [site](https://example.com/x) `[code](nope.md)`",
		"[gone](docs/nope.md) [bad heading](docs/guide.md#setup) [self](#nowhere)",
		"[ref]: docs/missing.png",
		"```", "[fenced](fenced.md)", "```",
	}, "\n")), 0o644)
	got := brokenLinks(t, "README.md")
	want := []string{
		"README.md: docs/nope.md (no docs/nope.md)",
		"README.md: docs/guide.md#setup (no heading #setup in docs/guide.md)",
		"README.md: #nowhere (no heading #nowhere in README.md)",
		"README.md: docs/missing.png (no docs/missing.png)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("broken links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAnchorsKeepInlineCode: a heading's anchor keeps the text of its
// inline code, as GitHub makes it ("From the shell: `zkgate lock`" is
// #from-the-shell-zkgate-lock), and a link from a page in docs/ resolves
// from docs/.
func TestAnchorsKeepInlineCode(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.MkdirAll("docs", 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile("README.md", []byte("# Top\n\n## From the shell: `zkgate lock`, `elect`\n"), 0o644)
	os.WriteFile("docs/cli.md", []byte(strings.Join([]string{
		"# CLI", "",
		"[ok](../README.md#from-the-shell-zkgate-lock-elect) [ok](../README.md) [ok](cli.md#cli)",
		"[bad heading](../README.md#from-the-shell-) [gone](api.md) [gone](../docs/api.md#x)",
	}, "\n")), 0o644)
	got := brokenLinks(t, "docs/cli.md")
	want := []string{
		"docs/cli.md: ../README.md#from-the-shell- (no heading #from-the-shell- in README.md)",
		"docs/cli.md: api.md (no docs/api.md)",
		"docs/cli.md: ../docs/api.md#x (no docs/api.md)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("broken links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// unreachableDocs lists the pages of docs/ among files that the README does
// not link to, or that do not link back to it in their opening lines.
func unreachableDocs(t *testing.T, files []string) []string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, target := range linkTargets(string(readme)) {
		ref, _, _ := strings.Cut(target, "#")
		linked[path.Clean(ref)] = true
	}
	var missing []string
	for _, f := range files {
		if path.Dir(f) != "docs" || !strings.HasSuffix(f, ".md") {
			continue
		}
		if !linked[f] {
			missing = append(missing, f+": not in the README's links")
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		opening := strings.SplitN(string(data), "\n", 9)
		if !strings.Contains(strings.Join(opening[:min(8, len(opening))], "\n"), "](../README.md") {
			missing = append(missing, f+": no link back to ../README.md in its first lines")
		}
	}
	return missing
}

// TestDocsReachable: the README links to every page of docs/, and each page
// links back to the README where it opens, so that a reader finds every
// page from the front one and finds the way back.
func TestDocsReachable(t *testing.T) {
	files := markdownFiles(t)
	var docs int
	for _, f := range files {
		if path.Dir(f) == "docs" {
			docs++
		}
	}
	if docs < 5 {
		t.Fatalf("found only %d pages in docs/: %v", docs, files)
	}
	if missing := unreachableDocs(t, files); len(missing) > 0 {
		t.Fatalf("pages of docs/:\n  %s", strings.Join(missing, "\n  "))
	}
}

// TestUnreachableDocsFound: the check finds a page the README does not
// link to, and one without its link back.
func TestUnreachableDocsFound(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.MkdirAll("docs", 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile("README.md", []byte("# Top\n\n[API](docs/api.md#leases) [CLI](./docs/cli.md) `[code](docs/code.md)`\n"), 0o644)
	os.WriteFile("docs/api.md", []byte("# API\n\nLeases. Back to the [README](../README.md).\n"), 0o644)
	os.WriteFile("docs/cli.md", []byte("# CLI\n\nCommands.\n"), 0o644)
	os.WriteFile("docs/code.md", []byte("# Code\n\n[README](../README.md)\n"), 0o644)
	os.WriteFile("docs/orphan.md", []byte("# Orphan\n\n[README](../README.md)\n"), 0o644)
	got := unreachableDocs(t, []string{"README.md", "docs/api.md", "docs/cli.md", "docs/code.md", "docs/orphan.md"})
	want := []string{
		"docs/cli.md: no link back to ../README.md in its first lines",
		"docs/code.md: not in the README's links",
		"docs/orphan.md: not in the README's links",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
