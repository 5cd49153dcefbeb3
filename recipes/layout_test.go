package recipes

import (
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fileRefs is the package's code read as a graph of files: for each pair
// of its non-test files (from, to), how many times from uses something
// to declares (a function, type, variable, constant, field or method).
type fileRefs struct {
	files []string
	refs  map[[2]string]int
	// service are the uses of Service itself (its type, fields and
	// methods; not what it embeds), by file.
	service map[string]int
}

// readFileRefs type-checks the package (its imports from the export data
// go list gives) and counts its files' references to each other.
func readFileRefs(t *testing.T) fileRefs {
	t.Helper()
	out, err := exec.Command("go", "list", "-export", "-deps", "-json", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	exports := map[string]string{}
	var self struct{ ImportPath, Dir, Export string }
	var names []string
	for dec := json.NewDecoder(strings.NewReader(string(out))); ; {
		var p struct {
			ImportPath, Dir, Export string
			GoFiles                 []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		self.ImportPath, self.Dir, names = p.ImportPath, p.Dir, p.GoFiles // the package itself comes last
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, n := range names {
		f, err := parser.ParseFile(fset, filepath.Join(self.Dir, n), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	})}
	pkg, err := conf.Check(self.ImportPath, fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	service := map[types.Object]bool{}
	svc := pkg.Scope().Lookup("Service")
	service[svc] = true
	st := svc.Type().Underlying().(*types.Struct)
	for i := range st.NumFields() {
		if f := st.Field(i); !f.Embedded() {
			service[f] = true
		}
	}
	ms := types.NewMethodSet(types.NewPointer(svc.Type()))
	for i := range ms.Len() {
		if m := ms.At(i); len(m.Index()) == 1 { // declared on Service, not promoted
			service[m.Obj()] = true
		}
	}
	fr := fileRefs{files: names, refs: map[[2]string]int{}, service: map[string]int{}}
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !declaredAtTop(pkg, obj) {
			continue
		}
		from, to := filepath.Base(fset.Position(id.Pos()).Filename), filepath.Base(fset.Position(obj.Pos()).Filename)
		if service[obj] && from != "service.go" {
			fr.service[from]++
		}
		if from != to {
			fr.refs[[2]string{from, to}]++
		}
	}
	return fr
}

// declaredAtTop says whether obj is the package's own: declared at its top
// level, or a field or method of one of its types (not a local).
func declaredAtTop(pkg *types.Package, obj types.Object) bool {
	switch o := obj.(type) {
	case *types.PkgName, *types.Label:
		return false
	case *types.Var:
		return o.IsField() || o.Parent() == pkg.Scope()
	case *types.Func:
		return true
	}
	return obj.Parent() == pkg.Scope()
}

// Service bundles the recipes (doc.go); each recipe gets what it uses of
// the session (its lines, its watch cache, who keeps a lease), never the
// Service: only the files that make, hand over or span the whole bundle
// use it, and leases.go's table keeps a pointer back for Lease.service.
func TestOnlyTheBundleUsesService(t *testing.T) {
	t.Parallel()
	bundle := []string{"handover.go", "deadlock.go", "dashboard.go", "contentionreport.go", "leases.go"}
	for file, n := range readFileRefs(t).service {
		if !slices.Contains(bundle, file) {
			t.Errorf("%s uses Service %d times: give the recipe what it uses (lines, the cache, keepers) in New", file, n)
		}
	}
}

// At most one in five of the references between the package's files runs
// back up: the references that keep the file graph from having an order
// in which each file uses only those after it, counted for the order
// Eades, Lin and Smyth's greedy heuristic gives (it keeps such references
// few; the fewest is a hard problem). Before the recipes got narrow
// dependencies (line.go's lines), 55 of 289 did, every recipe's through
// the Service that bundles them.
func TestFewReferencesRunBackUp(t *testing.T) {
	t.Parallel()
	fr := readFileRefs(t)
	order := greedyOrder(fr.files, fr.refs)
	at := map[string]int{}
	for i, f := range order {
		at[f] = i
	}
	var up []string
	for e := range fr.refs {
		if at[e[0]] > at[e[1]] {
			up = append(up, e[0]+" -> "+e[1])
		}
	}
	slices.Sort(up)
	t.Logf("%d files, %d file-to-file references, %d run back up; in order: %s", len(fr.files), len(fr.refs), len(up),
		strings.Join(order, " "))
	if 6*len(up) > len(fr.refs) {
		t.Errorf("%d of %d references between files run back up (more than one in six):\n%s", len(up), len(fr.refs),
			strings.Join(up, "\n"))
	}
}

// greedyOrder orders files so that few references run from a file to one
// before it (Eades, Lin and Smyth 1993): a file nothing left uses goes
// first, one that uses nothing left goes last, else the one whose uses
// most outnumber its users goes first. Ties go by name.
func greedyOrder(files []string, refs map[[2]string]int) []string {
	left := map[string]bool{}
	for _, f := range files {
		left[f] = true
	}
	degrees := func(f string) (in, out int) {
		for e := range refs {
			if left[e[0]] && left[e[1]] {
				if e[0] == f {
					out++
				}
				if e[1] == f {
					in++
				}
			}
		}
		return in, out
	}
	remaining := func() []string {
		var s []string
		for f := range left {
			s = append(s, f)
		}
		slices.Sort(s)
		return s
	}
	var head, tail []string
	for len(left) > 0 {
		for moved := true; moved; {
			moved = false
			for _, f := range remaining() {
				switch in, out := degrees(f); {
				case out == 0:
					tail = append([]string{f}, tail...)
				case in == 0:
					head = append(head, f)
				default:
					continue
				}
				delete(left, f)
				moved = true
			}
		}
		best, most := "", 0
		for _, f := range remaining() {
			if in, out := degrees(f); best == "" || out-in > most {
				best, most = f, out-in
			}
		}
		if best != "" {
			head = append(head, best)
			delete(left, best)
		}
	}
	return append(head, tail...)
}
