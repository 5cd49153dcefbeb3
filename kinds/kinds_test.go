package kinds

import "testing"

// TestKindsAreDistinct: every kind has its own name, which ByName finds.
func TestKindsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range All() {
		if k.Name == "" || seen[k.Name] {
			t.Errorf("kind %q: empty or twice in All", k.Name)
		}
		seen[k.Name] = true
		if got, ok := ByName(k.Name); !ok || got != k {
			t.Errorf("ByName(%q) = %v, %v", k.Name, got, ok)
		}
	}
	if _, ok := ByName("leases"); ok {
		t.Error("leases are not a kind of primitive")
	}
}
