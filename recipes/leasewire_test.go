package recipes

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/zkgate/zkgate/auth/nodeproof"
	"github.com/zkgate/zkgate/internal/peer"
	"github.com/zkgate/zkgate/internal/zk"
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

// todaysRecordReading is how the earlier code read a lease record: Locate
// and recordedKeeper its gateway and proof, the dashboard its holder, TTL,
// gateway and age. Gateways of that version read the records of this one
// so.
func todaysRecordReading(raw []byte) (gateway, proof, holder, ttl string, created *time.Time, err error) {
	var located struct {
		Gateway string `json:"gateway"`
		Proof   string `json:"proof"`
	}
	if err := json.Unmarshal(raw, &located); err != nil {
		return "", "", "", "", nil, err
	}
	var shown struct {
		Holder, TTL, Gateway string
		CreatedAt            *time.Time `json:"created_at"`
	}
	err = json.Unmarshal(raw, &shown)
	return located.Gateway, located.Proof, shown.Holder, shown.TTL, shown.CreatedAt, err
}

// TestLeaseRecordOfEarlierVersionsReads: a lease record of the earlier code
// (every field: created_at, the gateway, holder, lock_delay, owner, the
// earlier proof, ttl and the node proof; and one with only those always
// written), with the gateways' secret and without, reads to the same terms
// and gateway with decodeLeaseRecord, checks out with the gateways' secret,
// and is what this code writes for the same lease byte for byte, so the
// earlier code reads (and proves) this one's records as its own.
func TestLeaseRecordOfEarlierVersionsReads(t *testing.T) {
	t.Parallel()
	secret, err := peer.ParseSecret("golden", []byte("golden-secret-of-the-lease-record-test-0123456789\n"))
	if err != nil {
		t.Fatal(err)
	}
	const session = 0x1234abcd
	full := LeaseTerms{ID: goldenLease, Holder: "worker \"7\" <\u00e9>", Owner: "billing", TTL: Duration(90 * time.Second),
		LockDelay: Duration(1500 * time.Millisecond), CreatedAt: goldenCreated}
	bare := LeaseTerms{ID: goldenLease, TTL: Duration(15 * time.Second), CreatedAt: goldenCreated}
	for _, tt := range []struct {
		golden string
		secret *peer.Secret
		terms  LeaseTerms
	}{
		{"lease-record-v1.json", nil, full},
		{"lease-record-v1-bare.json", nil, bare},
		{"lease-record-v1-signed.json", secret, full},
		{"lease-record-v1-signed-bare.json", secret, bare},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			raw := readGolden(t, tt.golden)
			ls := &Leases{sess: &Session{cfg: SessionConfig{Root: "/zkgate"}}, cfg: LeaseConfig{GatewayID: "gw-a"},
				proofs: nodeproof.New(tt.secret, "/zkgate", false, slog.New(slog.DiscardHandler))}

			written := ls.recordOf(&Lease{LeaseTerms: tt.terms}, session)
			if !bytes.Equal(written, raw) {
				t.Errorf("the record written:\n got %s\nwant %s", written, raw)
			}

			rec, err := decodeLeaseRecord(raw)
			if err != nil {
				t.Fatal(err)
			}
			want := LeaseInfo{LeaseTerms: tt.terms, Gateway: "gw-a"}
			if got := rec.info(goldenLease); !reflect.DeepEqual(got, want) {
				t.Errorf("the record read as\n%+v\nwant\n%+v", got, want)
			}
			if rec.Proof != ls.proofs.Lease(goldenLease, "gw-a") {
				t.Errorf("the earlier proof read as %q, want %q", rec.Proof, ls.proofs.Lease(goldenLease, "gw-a"))
			}
			stat := &zk.Stat{EphemeralOwner: session}
			if gw, proven := ls.recordGateway(goldenLease, stat, raw); gw != "gw-a" || !proven {
				t.Errorf("recordGateway of the record: %q, proven %v; want gw-a, proven", gw, proven)
			}
			if tt.secret != nil {
				if _, proven := ls.recordGateway(goldenLease, &zk.Stat{EphemeralOwner: session + 1}, raw); proven {
					t.Error("the record checked out as another session's node")
				}
			}

			gateway, proof, holder, ttl, created, err := todaysRecordReading(written)
			if err != nil || gateway != "gw-a" || proof != rec.Proof || holder != tt.terms.Holder || ttl != tt.terms.TTL.String() ||
				created == nil || !created.Equal(tt.terms.CreatedAt) {
				t.Errorf("the earlier code reads this code's record as gateway %q, proof %q, holder %q, ttl %q, created_at %v (%v)",
					gateway, proof, holder, ttl, created, err)
			}

			snap := &Snapshot{Children: []Node{{Name: goldenLease, Data: raw}}}
			if got := LeaseRecords(snap); len(got) != 1 || !reflect.DeepEqual(got[0], want) {
				t.Errorf("the dashboard reads the record as %+v, want %+v", got, want)
			}
		})
	}
}
