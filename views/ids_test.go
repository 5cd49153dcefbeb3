package views_test

import (
	"io/fs"
	"regexp"
	"slices"
	"testing"

	"github.com/zkgate/zkgate/static"
	"github.com/zkgate/zkgate/views"
)

// The ids the script names: those it looks up (getElementById('x')) and
// those its selectors name ('#x').
var (
	scriptByID     = regexp.MustCompile(`getElementById\(\s*'([^']*)'\s*\)`)
	scriptSelector = regexp.MustCompile(`(?:querySelector(?:All)?|matches|closest)\(\s*'([^']*)'\s*\)`)
	selectorID     = regexp.MustCompile(`#([A-Za-z][\w-]*)`)
)

// scriptIDs lists the ids script names, as literals.
func scriptIDs(script string) []string {
	var ids []string
	for _, m := range scriptByID.FindAllStringSubmatch(script, -1) {
		ids = append(ids, m[1])
	}
	for _, m := range scriptSelector.FindAllStringSubmatch(script, -1) {
		for _, id := range selectorID.FindAllStringSubmatch(m[1], -1) {
			ids = append(ids, id[1])
		}
	}
	return ids
}

// TestScriptNamesOnlyTheIDsOfViews: every id the dashboard's script names
// is one of views.LiveIDs, the ids the components carry and the hub pushes
// by; an id the script spells on its own would find nothing once the
// components change theirs.
func TestScriptNamesOnlyTheIDsOfViews(t *testing.T) {
	b, err := fs.ReadFile(static.FS(), "dashboard.js")
	if err != nil {
		t.Fatal(err)
	}
	ids := scriptIDs(string(b))
	if !slices.Contains(ids, views.IDLive) {
		t.Fatalf("the script names the ids %q, not %q which it keeps: is the check still reading it?", ids, views.IDLive)
	}
	for _, id := range ids {
		if !slices.Contains(views.LiveIDs(), id) {
			t.Errorf("dashboard.js names the id %q, which views does not define (views/ids.go)", id)
		}
	}
}

// TestScriptIDsFound: the check finds the ids of each form the script
// may use, and only those.
func TestScriptIDsFound(t *testing.T) {
	script := `document.getElementById('a'); el.querySelector('#b .c'); el.closest('details#d'); el.matches('[data-x]'); x.getElementById(f.id);`
	if got, want := scriptIDs(script), []string{"a", "b", "d"}; !slices.Equal(got, want) {
		t.Errorf("scriptIDs = %q, want %q", got, want)
	}
}
