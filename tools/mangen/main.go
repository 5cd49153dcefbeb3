// Command mangen writes zkgate's man pages, zkgate(1) and one for each
// command (zkgate-serve(1), zkgate-queue-claim(1)...), made by cobra/doc's
// GenManTree from the program's own command definitions: the binary's
// hidden `zkgate __man DIR` writes them. The pages are made at build time
// (make man, make install, the release), never committed, so they cannot
// fall behind the program.
//
//	go run ./tools/mangen [-zkgate BINARY] [-dir build/man]
//
// Without -zkgate it builds ./cmd/zkgate into a temporary directory first.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	bin := flag.String("zkgate", "", "the zkgate binary to ask (default: build ./cmd/zkgate)")
	dir := flag.String("dir", "build/man", "the directory to write the pages into")
	flag.Parse()
	if err := run(*bin, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "mangen:", err)
		os.Exit(1)
	}
}

func run(bin, dir string) error {
	if bin == "" {
		tmp, err := os.MkdirTemp("", "mangen-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		bin = filepath.Join(tmp, "zkgate")
		build := exec.Command("go", "build", "-o", bin, "./cmd/zkgate")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build ./cmd/zkgate: %w", err)
		}
	}
	return Generate(bin, dir)
}

// Generate has the binary write its pages into dir, replacing the pages
// an older build left there (of commands since removed), with no ZKGATE_*
// variable set: the pages show the built-in defaults.
func Generate(bin, dir string) error {
	old, err := filepath.Glob(filepath.Join(dir, "zkgate*.1*"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ZKGATE_") {
			env = append(env, kv)
		}
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "__man", dir)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s __man %s: %w\n%s", bin, dir, err, out.Bytes())
	}
	return nil
}
