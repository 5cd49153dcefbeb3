package nodeproof

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/zkgate/zkgate/internal/peer"
	"github.com/zkgate/zkgate/internal/zk"
)

func secret(t *testing.T, c string) *peer.Secret {
	t.Helper()
	s, err := peer.ParseSecret("test", []byte(strings.Repeat(c, 32)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A registration this gateway signs checks out for its node alone: not
// copied into another session, not set again, not under another secret;
// one with the earlier proof alone passes with --peer-proofs compat only,
// and each refusal is logged once a minute for its path. Without a secret
// nothing is signed and everything passes.
func TestRegistrationProofs(t *testing.T) {
	t.Parallel()
	const owner, path = int64(0x1234), "/zkgate/gateways/gw-a"
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	p := New(secret(t, "a"), "/zkgate", false, log)
	earlier := p.Registration("gw-a", "127.0.0.1:1")
	data, _ := json.Marshal(map[string]string{"advertise": "127.0.0.1:1", "proof": earlier})
	signed := p.Node(RegistrationProof, "gw-a", owner, data)
	ok := func(p *Proofs, stat *zk.Stat, data []byte) bool {
		return p.RegistrationOK(path, "gw-a", stat, data, "127.0.0.1:1", earlier)
	}
	if !ok(p, &zk.Stat{EphemeralOwner: owner}, signed) {
		t.Fatalf("the registration does not check out for its own node: %s", signed)
	}
	for name, c := range map[string]struct {
		p    *Proofs
		stat *zk.Stat
		data []byte
	}{
		"copied into another session": {p, &zk.Stat{EphemeralOwner: owner + 1}, signed},
		"set again":                   {p, &zk.Stat{EphemeralOwner: owner, Version: 1}, signed},
		"another secret":              {New(secret(t, "b"), "/zkgate", false, log), &zk.Stat{EphemeralOwner: owner}, signed},
		"the earlier proof alone":     {p, &zk.Stat{EphemeralOwner: owner}, data},
	} {
		if ok(c.p, c.stat, c.data) {
			t.Errorf("%s: the registration checks out", name)
		}
	}
	if compat := New(secret(t, "a"), "/zkgate", true, log); !ok(compat, &zk.Stat{EphemeralOwner: owner}, data) {
		t.Errorf("with --peer-proofs compat, a registration with the earlier proof alone does not check out")
	}
	if n := strings.Count(logs.String(), "path="+path); n != 2 {
		// One for p (copied, set again and the earlier proof within the
		// minute), one for the other secret's Proofs.
		t.Errorf("%d log lines for the refused registrations, want 2:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "copied or set again") {
		t.Errorf("the log does not say that a copy is refused for its node: %s", logs.String())
	}
	var older bytes.Buffer
	if ok(New(secret(t, "a"), "/zkgate", false, slog.New(slog.NewTextHandler(&older, nil))), &zk.Stat{EphemeralOwner: owner}, data) ||
		!strings.Contains(older.String(), "run the new gateways with --peer-proofs compat") {
		t.Errorf("a registration with the earlier proof alone should be refused, and the log name --peer-proofs compat: %s", older.String())
	}

	none := New(nil, "/zkgate", false, log)
	if got := none.Node(RegistrationProof, "gw-a", owner, data); !bytes.Equal(got, data) || none.Registration("gw-a", "x") != "" {
		t.Errorf("without a secret the data is signed: %s", got)
	}
	if !ok(none, &zk.Stat{EphemeralOwner: owner + 1, Version: 3}, []byte("{}")) {
		t.Errorf("without a secret a registration does not pass")
	}
}

// A lease record's proofs are for its lease: the record of another lease
// id, or one whose gateway is changed, does not check out.
func TestLeaseRecordProofs(t *testing.T) {
	t.Parallel()
	const owner = int64(0x99)
	p := New(secret(t, "a"), "/zkgate", false, slog.New(slog.DiscardHandler))
	earlier := p.Lease("lease-1", "gw-a")
	data, _ := json.Marshal(map[string]string{"gateway": "gw-a", "proof": earlier})
	signed := p.Node(LeaseProof, "lease-1", owner, data)
	stat := &zk.Stat{EphemeralOwner: owner}
	if !p.LeaseOK("/zkgate/leases/lease-1", "lease-1", stat, signed, "gw-a", earlier) {
		t.Fatalf("the lease record does not check out for its own node")
	}
	if p.LeaseOK("/zkgate/leases/lease-2", "lease-2", stat, signed, "gw-a", earlier) {
		t.Errorf("the record of lease-1 checks out as lease-2's")
	}
	moved := bytes.Replace(signed, []byte(`"gw-a"`), []byte(`"gw-b"`), 1)
	if p.LeaseOK("/zkgate/leases/lease-1", "lease-1", stat, moved, "gw-b", earlier) {
		t.Errorf("a record whose gateway is changed checks out")
	}
}
