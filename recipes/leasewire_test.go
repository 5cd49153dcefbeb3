package recipes

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"
)

// The golden files of testdata were written by the code before LeaseTerms
// and the typed lease record (leaseRecord): what running gateways write
// today, which the new code must read as they meant it and write again
// byte for byte, so that gateways of both versions interoperate across a
// rolling upgrade and a journal or handover of the old version resumes.

var (
	goldenCreated = time.Date(2026, 11, 30, 9, 15, 42, 123456789, time.UTC)
	goldenLease   = "0b5c6f7e-1a2b-4c3d-8e9f-001122334455"
)

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimRight(b, "\n")
}

// TestLeaseStateOfEarlierVersionsReads: a journal line and a handed-over
// lease (LeaseState, every field set, and one with none but its id, TTL
// and times) of the earlier code read back to the same values, and are
// written again byte for byte.
func TestLeaseStateOfEarlierVersionsReads(t *testing.T) {
	t.Parallel()
	full := LeaseState{
		LeaseTerms: LeaseTerms{ID: goldenLease, Holder: "worker", Owner: "billing", TTL: Duration(90 * time.Second),
			LockDelay: Duration(1500 * time.Millisecond), CreatedAt: goldenCreated},
		Left: Duration(42 * time.Second), ExpiresAt: goldenCreated.Add(time.Minute),
		Holds: []HoldState{{Kind: "lock", Key: "lock:/a", Name: "a", Since: goldenCreated,
			Nodes:   []NodeState{{Role: "lock", Path: "/zkgate/locks/a/_c_x-lock-0000000001", Czxid: 77}},
			Granted: true, Token: 77, GrantedAt: goldenCreated, Told: true, Mode: "write"}}}
	bare := LeaseState{LeaseTerms: LeaseTerms{ID: goldenLease, TTL: Duration(15 * time.Second), CreatedAt: goldenCreated},
		ExpiresAt: goldenCreated}

	line := readGolden(t, "journal-lease-v1.jsonl")
	var rec journalRecord
	if err := json.Unmarshal(line, &rec); err != nil || rec.Lease == nil {
		t.Fatalf("the journal line of the earlier version: %v (%+v)", err, rec)
	}
	if !reflect.DeepEqual(*rec.Lease, full) {
		t.Errorf("the journal line of the earlier version read as\n%+v\nwant\n%+v", *rec.Lease, full)
	}
	if got, _ := json.Marshal(journalRecord{Lease: &full}); !bytes.Equal(got, line) {
		t.Errorf("a journal line:\n got %s\nwant %s", got, line)
	}

	raw := readGolden(t, "lease-state-v1-bare.json")
	var st LeaseState
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st, bare) {
		t.Errorf("a bare lease state of the earlier version read as %+v, want %+v", st, bare)
	}
	if got, _ := json.Marshal(bare); !bytes.Equal(got, raw) {
		t.Errorf("a bare lease state:\n got %s\nwant %s", got, raw)
	}
}
