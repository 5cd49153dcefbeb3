package handlers

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// TestLeaseDocIsTheContract: the lease JSON the API answers, made from a
// lease's LeaseInfo at the edge, is byte for byte what the gateway
// answered when recipes.LeaseInfo itself was marshalled (testdata, captured
// from that code): field names, their order, owner left out when empty, an
// empty holds list as [], and a gateway reads it back (peerLeases) as it was.
func TestLeaseDocIsTheContract(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 11, 30, 9, 15, 42, 123456789, time.UTC)
	const id = "0b5c6f7e-1a2b-4c3d-8e9f-001122334455"
	for _, tt := range []struct {
		golden string
		info   recipes.LeaseInfo
	}{
		{"testdata/lease-v1.json", recipes.LeaseInfo{
			LeaseTerms: recipes.LeaseTerms{ID: id, Holder: "worker", Owner: "billing", TTL: recipes.Duration(90 * time.Second),
				LockDelay: recipes.Duration(1500 * time.Millisecond), CreatedAt: created},
			Gateway: "gw-a", ExpiresAt: created.Add(time.Minute), RenewedAt: created.Add(time.Second),
			Holds: []recipes.HoldInfo{{Kind: "lock", Name: "a", Mode: "write", Token: 77, State: "held", Node: "_c_x-lock-0000000001", Since: created}}}},
		{"testdata/lease-v1-bare.json", recipes.LeaseInfo{
			LeaseTerms: recipes.LeaseTerms{ID: id, TTL: recipes.Duration(15 * time.Second), CreatedAt: created},
			Gateway:    "gw-a", Holds: []recipes.HoldInfo{}}},
	} {
		want, err := os.ReadFile(tt.golden)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(leaseDocOf(tt.info))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", tt.golden, got, want)
		}
		var back leaseDoc
		if err := json.Unmarshal(want, &back); err != nil {
			t.Fatal(err)
		}
		if again, _ := json.Marshal(back); string(again) != string(want) {
			t.Errorf("%s read back and written again:\n got %s\nwant %s", tt.golden, again, want)
		}
	}
}
