package recipes

import (
	"encoding/json"
	"time"

	"github.com/zkgate/zkgate/auth/nodeproof"
)

// A lease's record, {root}/leases/{id}, is what every gateway reads of a
// lease it does not keep: which gateway keeps it (where its requests are
// forwarded, see Locate), its terms for the dashboards, and the proofs
// that a gateway wrote it (see auth/nodeproof). It is written and read by
// encodeLeaseRecord and decodeLeaseRecord alone.
//
// Its fields are in the order of their names, as json.Marshal wrote the
// map the record was made of before it had a type: the bytes are those of
// earlier versions, so the gateways of both versions read, and prove, each
// other's records (TestLeaseRecordOfEarlierVersionsReads). The node proof
// ("proof2", see peer.SignNode) is added after them as the last field.

// leaseRecord is the data of a lease's record.
type leaseRecord struct {
	// CreatedAt keeps the lease's age in a record made anew by a handover;
	// zero in a record of a version that did not write it.
	CreatedAt time.Time `json:"created_at"`
	Gateway   string    `json:"gateway"` // the id of the gateway that keeps the lease
	Holder    string    `json:"holder"`
	LockDelay Duration  `json:"lock_delay,omitempty"`
	Owner     string    `json:"owner,omitempty"`
	Proof     string    `json:"proof,omitempty"` // the earlier proof, of the lease and its gateway (see nodeproof.Proofs.Lease)
	TTL       Duration  `json:"ttl"`
}

// recordOf is the data of l's record: what every gateway reads of it, with
// this gateway as its keeper (signed, with the gateways' secret, for the
// node that session owner makes).
func (ls *Leases) recordOf(l *Lease, owner int64) []byte {
	rec := recordOfTerms(l.LeaseTerms, ls.cfg.GatewayID, ls.proofs.Lease(l.ID, ls.cfg.GatewayID))
	return ls.proofs.Node(nodeproof.LeaseProof, l.ID, owner, encodeLeaseRecord(rec))
}

// recordOfTerms is the record of a lease of terms t kept by gateway, with
// the earlier proof proof ("" without a secret).
func recordOfTerms(t LeaseTerms, gateway, proof string) leaseRecord {
	return leaseRecord{CreatedAt: t.CreatedAt.UTC(), Gateway: gateway, Holder: t.Holder, LockDelay: t.LockDelay, Owner: t.Owner,
		Proof: proof, TTL: t.TTL}
}

// info is what the record of lease id says of it: its terms and gateway.
func (r leaseRecord) info(id string) LeaseInfo {
	return LeaseInfo{LeaseTerms: LeaseTerms{ID: id, Holder: r.Holder, Owner: r.Owner, TTL: r.TTL, LockDelay: r.LockDelay,
		CreatedAt: r.CreatedAt}, Gateway: r.Gateway}
}

// encodeLeaseRecord is the data of record r, before its node proof.
func encodeLeaseRecord(r leaseRecord) []byte {
	data, _ := json.Marshal(r) // of strings, a time and durations: it does not fail
	return data
}

// decodeLeaseRecord reads the data of a lease's record (its node proof
// aside: see nodeproof.Proofs.LeaseOK for that). A field it cannot read is an error,
// and leaves the fields read before it as they were read (encoding/json):
// the gateway and the proofs come before the TTL, so that a record with a
// TTL not read here still names its gateway, as it did when readers read
// only that.
func decodeLeaseRecord(data []byte) (leaseRecord, error) {
	var r leaseRecord
	err := json.Unmarshal(data, &r)
	return r, err
}
