// Command modproxy serves a module's source tree at one version from a
// file-based Go module proxy (GOPROXY=file://DIR), laid out as a proxy
// serves a tag: @v/list, VERSION.info, VERSION.mod and VERSION.zip in the
// module zip format, with the same files kept and dropped as the Go command
// (vendor/, nested modules, .git). scripts/test-install.sh uses it to check
// that `go install github.com/zkgate/zkgate/cmd/zkgate@VERSION` works.
//
//	go run ./tools/modproxy -dir SRC -version v0.0.1 -o PROXYDIR
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func main() {
	dir := flag.String("dir", ".", "the module's root: a clean copy of a commit")
	version := flag.String("version", "", "the version to serve it as (a semantic version, e.g. v0.0.1)")
	out := flag.String("o", "", "the proxy's root directory (made if missing)")
	flag.Parse()
	if err := run(*dir, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

// run writes the module at dir into the proxy at out as version.
func run(dir, version, out string) error {
	if out == "" {
		return errors.New("-o is required")
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return fmt.Errorf("%s/go.mod names no module", dir)
	}
	mv := module.Version{Path: path, Version: version}
	if err := module.Check(path, version); err != nil {
		return err
	}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	at := filepath.Join(out, escaped, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	zipFile, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		return err
	}
	if err := modzip.CreateFromDir(zipFile, mv, dir); err != nil {
		zipFile.Close()
		return fmt.Errorf("module zip: %w", err)
	}
	if err := zipFile.Close(); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	files := map[string][]byte{
		version + ".info": info,
		version + ".mod":  gomod,
		"list":            []byte(version + "\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
