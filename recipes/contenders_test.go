package recipes

import (
	"strings"
	"testing"
)

func TestParseContender(t *testing.T) {
	t.Parallel()
	uuid := "0b5c6f7e-1a2b-4c3d-8e9f-001122334455"
	cases := []struct {
		name   string
		ok     bool
		seq    int64
		reader bool
		mode   string
		lease  string
	}{
		{"_c_" + uuid + "-lock-0000000007", true, 7, false, ModeExclusive, uuid},
		{"_c_" + uuid + "-__READ__0000000012", true, 12, true, ModeRead, uuid},
		{"_c_" + uuid + "-__WRIT__0000000003", true, 3, false, ModeWrite, uuid},
		{"d2a5f1e0c1f84a3b__lock__0000000002", true, 2, false, ModeExclusive, ""}, // kazoo Lock
		{"d2a5f1e0c1f84a3b__rlock__0000000004", true, 4, true, ModeRead, ""},      // kazoo ReadLock
		{"_c_abc-lock-0000000009", true, 9, false, ModeExclusive, ""},             // go-zookeeper's short guid
		{"lock-0000000001", true, 1, false, ModeExclusive, ""},
		{"_c_" + uuid + "-lock-lock-0000000005", true, 5, false, ModeExclusive, uuid}, // the last marker counts
		{"lock-", false, 0, false, "", ""},
		{"lock-12a", false, 0, false, "", ""},
		{"ready", false, 0, false, "", ""},
		{"lock--0000000001", false, 0, false, "", ""},
	}
	for _, c := range cases {
		got, ok := parseContender(c.name, lockMarkers)
		if ok != c.ok {
			t.Errorf("%s: ok %v, want %v", c.name, ok, c.ok)
			continue
		}
		if ok && (got.Seq != c.seq || got.Reader != c.reader || got.Mode != c.mode || got.Lease != c.lease) {
			t.Errorf("%s: got %+v", c.name, got)
		}
	}
}

// Sequences are compared as numbers: names differ in their prefixes, and a
// sequence past 9999999999 has more digits.
func TestSortContendersBySequence(t *testing.T) {
	t.Parallel()
	names := []string{"_c_zzz-lock-0000000010", "abc__lock__0000000002", "_c_aaa-lock-10000000000", "_c_mmm-lock-0000000001"}
	got := sortContenders(names, lockMarkers)
	var seqs []int64
	for _, c := range got {
		seqs = append(seqs, c.Seq)
	}
	want := []int64{1, 2, 10, 10000000000}
	for i := range want {
		if seqs[i] != want[i] {
			t.Fatalf("order %v, want %v", seqs, want)
		}
	}
}

func TestLockBlocker(t *testing.T) {
	t.Parallel()
	c := func(name string, reader bool, lease string) seqNode {
		return seqNode{Name: name, Reader: reader, Lease: lease}
	}
	// w1 r2 r3 w4 r5 (r5 of lease L, which also owns w4)
	cs := []seqNode{c("w1", false, "A"), c("r2", true, "B"), c("r3", true, "C"), c("w4", false, "L"), c("r5", true, "L")}
	want := []string{"", "w1", "w1", "r3", "w1"}
	for i := range cs {
		if got := lockBlocker(cs, i); got != want[i] {
			t.Errorf("blocker of %s = %q, want %q", cs[i].Name, got, want[i])
		}
	}
	holders, waiters := splitLock([]seqNode{c("r1", true, "A"), c("r2", true, "B"), c("w3", false, "C"), c("r4", true, "D")})
	if len(holders) != 2 || len(waiters) != 2 || waiters[0].Name != "w3" {
		t.Fatalf("readers before the first writer hold together: %v / %v", holders, waiters)
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "db-1", "A.b_c-d", strings.Repeat("x", 200), "..."} {
		if err := ValidName(ok); err != nil {
			t.Errorf("%q rejected: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", "é", strings.Repeat("x", 201), "a\x00"} {
		if err := ValidName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseItemID(t *testing.T) {
	t.Parallel()
	p, seq, err := ParseItemID("entry-007-0000000042")
	if err != nil || p != 7 || seq != 42 {
		t.Fatalf("got %d %d %v", p, seq, err)
	}
	for _, bad := range []string{"", "entry-7-0000000042", "entry-007-42", "entry-00a-0000000042", "entry-007-+000000042", "item-007-0000000042", "entry-007-0000000042/x"} {
		if _, _, err := ParseItemID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestProtectedID(t *testing.T) {
	t.Parallel()
	uuid := "0b5c6f7e-1a2b-4c3d-8e9f-001122334455"
	if got := protectedID("_c_" + uuid + "-latch-0000000001"); got != uuid {
		t.Fatalf("got %q", got)
	}
	if got := protectedID("_c_short-lock-0000000001"); got != "" {
		t.Fatalf("got %q", got)
	}
}

// The marker is the one right before the trailing digits; a name holding
// another marker's text earlier, or a sign, is read right.
func TestParseContenderTakesTheMarkerBeforeTheDigits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		ok     bool
		seq    int64
		reader bool
		mode   string
	}{
		{"x__READ__y-lock-0000000007", true, 7, false, ModeExclusive},
		{"lock-__READ__0000000003", true, 3, true, ModeRead},
		{"a__WRIT__b__READ__0000000004", true, 4, true, ModeRead},
		{"host__rlock__0000000009", true, 9, true, ModeRead},
		{"lock-+0000000001", false, 0, false, ""},
		{"lock--0000000001", false, 0, false, ""},
		{"lock-0000000001x", false, 0, false, ""},
		{"lock-", false, 0, false, ""},
		{"lock-99999999999999999999", false, 0, false, ""},
	}
	for _, tt := range tests {
		c, ok := parseContender(tt.name, lockMarkers)
		if ok != tt.ok || ok && (c.Seq != tt.seq || c.Reader != tt.reader || c.Mode != tt.mode) {
			t.Errorf("parseContender(%q) = %+v, %v; want seq %d reader %v mode %q, %v", tt.name, c, ok, tt.seq, tt.reader, tt.mode, tt.ok)
		}
	}
}
