// Command mangen writes zkgate's man page, zkgate(1), from the program's own
// usage: what `zkgate help` prints, and the flags that `zkgate serve -h`
// lists. The page is made at build time (make man, make install, the
// release), never committed, so it cannot fall behind the program.
//
//	go run ./tools/mangen [-zkgate BINARY] -o zkgate.1
//
// Without -zkgate it builds ./cmd/zkgate into a temporary directory first.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

func main() {
	bin := flag.String("zkgate", "", "the zkgate binary to ask (default: build ./cmd/zkgate)")
	out := flag.String("o", "zkgate.1", "where to write the page")
	flag.Parse()
	if err := run(*bin, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mangen:", err)
		os.Exit(1)
	}
}

func run(bin, out string) error {
	if bin == "" {
		dir, err := os.MkdirTemp("", "mangen-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "zkgate")
		build := exec.Command("go", "build", "-o", bin, "./cmd/zkgate")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build ./cmd/zkgate: %w", err)
		}
	}
	usage, err := Usage(bin)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, []byte(Render(usage)), 0o644)
}

// ProgramUsage is what the program says of itself.
type ProgramUsage struct {
	Version string // the line of zkgate version
	Help    string // zkgate help
	Flags   string // zkgate serve -h: the flag set's PrintDefaults
}

// Usage asks the binary for its usage, with no ZKGATE_* variable set: those
// would show as the flags' defaults.
func Usage(bin string) (ProgramUsage, error) {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ZKGATE_") {
			env = append(env, kv)
		}
	}
	ask := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return "", fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), err)
		}
		return stdout.String() + stderr.String(), nil
	}
	var u ProgramUsage
	var err error
	if u.Version, err = ask("version"); err != nil {
		return u, err
	}
	if u.Help, err = ask("help"); err != nil {
		return u, err
	}
	// -h is a usage error (exit 2) whose output lists the flags.
	if u.Flags, err = ask("serve", "-h"); err != nil {
		return u, err
	}
	if !strings.Contains(u.Flags, "  -listen") {
		return u, fmt.Errorf("zkgate serve -h listed no flags:\n%s", u.Flags)
	}
	return u, nil
}

// Flag is one flag of zkgate serve.
type Flag struct {
	Name, Arg, Text string
}

var flagLine = regexp.MustCompile(`^  -([a-z0-9-]+)(?: (\S+))?$`)

// ParseFlags reads the output of flag.PrintDefaults.
func ParseFlags(defaults string) []Flag {
	var flags []Flag
	for _, line := range strings.Split(defaults, "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			flags = append(flags, Flag{Name: m[1], Arg: m[2]})
			continue
		}
		if text, ok := strings.CutPrefix(line, "    \t"); ok && len(flags) > 0 {
			f := &flags[len(flags)-1]
			f.Text = strings.TrimSpace(f.Text + " " + text)
		}
	}
	return flags
}

var envName = regexp.MustCompile(`\((ZKGATE_[A-Z0-9_]+)\)`)

// Render is the page in roff (man macros).
func Render(u ProgramUsage) string {
	var b strings.Builder
	version := strings.TrimSpace(u.Version)
	fmt.Fprintf(&b, ".TH ZKGATE 1 \"\" %q \"User Commands\"\n", version)
	b.WriteString(".SH NAME\nzkgate \\- ZooKeeper's coordination recipes over HTTP: the gateway and its command-line client\n")
	b.WriteString(".SH SYNOPSIS\n.B zkgate\n[\\fIcommand\\fR] [\\fIflags\\fR]\n")
	b.WriteString(".SH DESCRIPTION\n")
	b.WriteString("zkgate serves ZooKeeper's recipes (leases, locks, read/write locks, semaphores, elections, barriers, queues) " +
		"over an HTTP API with a live dashboard, and is the command-line client of that API. What follows is what " +
		"\\fBzkgate help\\fR prints.\n")
	b.WriteString(".PP\n.nf\n")
	writeLiteral(&b, u.Help)
	b.WriteString(".fi\n")
	flags := ParseFlags(u.Flags)
	b.WriteString(".SH SERVE FLAGS\nThe flags of \\fBzkgate serve\\fR, the default command. " +
		"Each has an environment twin, named in parentheses, which the flag overrides.\n")
	for _, f := range flags {
		b.WriteString(".TP\n")
		if f.Arg != "" {
			fmt.Fprintf(&b, ".BI \"\\-\\-%s \" %s\n", escape(f.Name), escape(f.Arg))
		} else {
			fmt.Fprintf(&b, ".B \\-\\-%s\n", escape(f.Name))
		}
		writeText(&b, f.Text)
	}
	b.WriteString(".SH ENVIRONMENT\n")
	for _, f := range flags {
		if m := envName.FindStringSubmatch(f.Text); m != nil {
			fmt.Fprintf(&b, ".TP\n.B %s\nas \\fB\\-\\-%s\\fR\n", m[1], escape(f.Name))
		}
	}
	b.WriteString(".TP\n.B ZKGATE_URL, ZKGATE_TOKEN\nthe gateway and the token of the client commands\n")
	b.WriteString(".SH FILES\n.TP\n.I /etc/zkgate/zkgate.env\nthe ZKGATE_* settings of the packaged systemd unit, zkgate.service\n" +
		".TP\n.I /var/lib/zkgate\nits state directory: the embedded ZooKeeper's data when no ensemble is given\n")
	b.WriteString(".SH SIGNALS\n\\fBSIGTERM\\fR drains the gateway for up to \\-\\-drain\\-timeout, then stops it; " +
		"\\fBSIGHUP\\fR reloads the \\-\\-auth\\-file tokens.\n")
	b.WriteString(".SH SEE ALSO\nThe README of zkgate, and its openapi.yaml, the HTTP API.\n")
	return b.String()
}

// escape makes text safe inside a roff line.
func escape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	return strings.ReplaceAll(s, "-", `\-`)
}

// writeText writes a paragraph; a line may not start with a control character.
func writeText(w io.Writer, s string) {
	s = escape(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	fmt.Fprintln(w, s)
}

// writeLiteral writes preformatted lines (inside .nf/.fi); an empty line
// stays an empty line of the block.
func writeLiteral(w io.Writer, s string) {
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if line == "" {
			fmt.Fprintln(w, ".sp")
			continue
		}
		writeText(w, line)
	}
}
