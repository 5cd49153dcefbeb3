//go:build linux

package faults

import "testing"

// A member whose node goes within the session timeout (and the allowance)
// of its lease's record passes; one seen much later is member_outlived_lease;
// one the observer never saw, or saw while out of session, is not judged.
func TestCheckGroups(t *testing.T) {
	h := cleanHistory()
	h.Members = []*GroupMember{
		{Lease: "a", Node: "/m/a__party__", Seen: true, Gone: at(3050 + 2500)}, // within 2s + 2 ticks + 500ms
		{Lease: "b", Node: "/m/b__party__", Seen: true, Gone: at(1000)},        // left before its lease ended
	}
	if v, _ := Check(h); len(v) != 0 {
		t.Fatalf("a clean history: %v", v)
	}
	h.Members = append(h.Members, &GroupMember{Lease: "b", Node: "/m/late__party__", Seen: true, Gone: at(2100 + 3000), Silent: true})
	v, counts := Check(h)
	if counts[VMemberOutlivedLease] != 1 || len(v) != 1 {
		t.Fatalf("a member 3s past its lease: %v", v)
	}
	h.Members[2].Seen = false
	if v, _ := Check(h); len(v) != 0 {
		t.Fatalf("a member never seen is not judged: %v", v)
	}
	h.Members[2].Seen = true
	h.ObserverOut = []Span{{From: at(2500), To: at(2600)}}
	if v, _ := Check(h); len(v) != 0 {
		t.Fatalf("a member seen late while the observer was out is not judged: %v", v)
	}
	h.ObserverOut = nil
	// A silent member is judged against its TTL too, unless a keepalive
	// may have extended the lease unseen.
	h.Members = []*GroupMember{{Lease: "b", Node: "/m/silent__party__", Seen: true, Gone: at(1000 + 3000), Silent: true, EndsBy: at(1000)}}
	if _, counts := Check(h); counts[VMemberOutlivedLease] != 1 {
		t.Fatalf("a silent member 3s past its TTL: %v", counts)
	}
	h.Members[0].Unsure = true
	if v, _ := Check(h); len(v) != 0 {
		t.Fatalf("an unsure silent member is not judged against its TTL: %v", v)
	}
}
