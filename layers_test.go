package zkgate_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// The layers of the tree (docs/architecture.md): what no package may
// import, by the rule it would break. Tests are not held to them.
func TestLayers(t *testing.T) {
	t.Parallel()
	const mod = "github.com/zkgate/zkgate/"
	pkgs := listPackages(t)
	rules := []struct {
		why          string
		applies      func(pkg string) bool
		mayNotImport func(imp string) bool
	}{
		{"internal/'s libraries are the bottom of the tree: they import no other zkgate package but internal/'s libraries",
			func(p string) bool { return isInternalLibrary(mod, p) },
			func(i string) bool { return strings.HasPrefix(i, mod) && !isInternalLibrary(mod, i) }},
		{"the test harnesses (internal/harness) serve tests and the bench and fault commands, never the product",
			func(p string) bool {
				return !strings.HasPrefix(p, mod+"internal/harness/") && p != mod+"cmd/zkgate-bench" && !strings.HasPrefix(p, mod+"cmd/zkgate-bench/") &&
					p != mod+"cmd/zkgate-faults"
			},
			func(i string) bool { return strings.HasPrefix(i, mod+"internal/harness/") }},
		{"the dashboard is a presentation of its own: it uses no part of the API's transport (handlers)",
			func(p string) bool { return p == mod+"dashboard" },
			func(i string) bool { return i == mod+"handlers" }},
		{"trust (auth) draws no page: the dashboard draws the sign-in page",
			func(p string) bool { return p == mod+"auth" },
			func(i string) bool { return i == mod+"views" || i == mod+"static" || i == mod+"dashboard" }},
		{"the proof between gateways is auth/peers': the handlers call it, and never use the gateways' secret (internal/peer) themselves",
			func(p string) bool { return p == mod+"handlers" || p == mod+"dashboard" },
			func(i string) bool { return i == mod+"internal/peer" }},
		{"auth/peers is trust between gateways: it uses no part of the API's transport (handlers) nor of the front door (server)",
			func(p string) bool { return p == mod+"auth/peers" },
			func(i string) bool { return i == mod+"handlers" || i == mod+"server" || i == mod+"dashboard" }},
		{"the node proofs (auth/nodeproof) are trust alone, below the recipes that call them: they import nothing of zkgate but internal/'s libraries",
			func(p string) bool { return p == mod+"auth/nodeproof" },
			func(i string) bool { return strings.HasPrefix(i, mod) && !isInternalLibrary(mod, i) }},
		{"kinds is the registry every package reads: it imports nothing of zkgate",
			func(p string) bool { return p == mod+"kinds" },
			func(i string) bool { return strings.HasPrefix(i, mod) }},
		{"the client is the standard library's alone",
			func(p string) bool { return p == mod+"client" },
			func(i string) bool { return strings.Contains(strings.Split(i, "/")[0], ".") }},
	}
	for _, p := range pkgs {
		for _, r := range rules {
			if !r.applies(p.ImportPath) {
				continue
			}
			for _, imp := range p.Imports {
				if r.mayNotImport(imp) {
					t.Errorf("%s imports %s: %s", p.ImportPath, imp, r.why)
				}
			}
		}
	}
}

// isInternalLibrary says whether p is one of internal/'s libraries (not a
// harness).
func isInternalLibrary(mod, p string) bool {
	return strings.HasPrefix(p, mod+"internal/") && !strings.HasPrefix(p, mod+"internal/harness/")
}

type listedPackage struct {
	ImportPath string
	Imports    []string
}

// listPackages lists the module's packages with what their non-test files
// import.
func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(out)
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	return pkgs
}
