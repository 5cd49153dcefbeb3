package dashboard

import (
	"testing"

	"github.com/zkgate/zkgate/kinds"
)

// TestEveryKindIsInTheTable: each kind of the registry, and the leases'
// and gateways' records, has its entry in dashKinds, which reads it either
// whole from its node or name by name, and nothing else is in the table.
func TestEveryKindIsInTheTable(t *testing.T) {
	for _, k := range kinds.All() {
		d, ok := dashKinds[k.Name]
		if !ok {
			t.Errorf("kind %q is in package kinds but not in the dashboard's table (dashboard/model.go, dashKinds)", k.Name)
			continue
		}
		if named := d.load != nil; named != k.Named || (d.paths != nil) != k.Named || (d.items != nil) != k.Named || (d.whole == nil) != k.Named {
			t.Errorf("kind %q (Named %t): its entry must have paths, load and items if Named, whole if not", k.Name, k.Named)
		}
		if d.merge == nil {
			t.Errorf("kind %q: its entry has no merge", k.Name)
		}
	}
	if len(dashKinds) != len(allKinds) {
		t.Errorf("the table has %d kinds, allKinds %d", len(dashKinds), len(allKinds))
	}
	for _, k := range allKinds {
		if _, ok := dashKinds[k]; !ok {
			t.Errorf("%q is read by the dashboard but not in its table", k)
		}
	}
}
