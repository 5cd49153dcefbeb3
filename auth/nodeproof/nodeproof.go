// Package nodeproof signs the nodes a gateway writes in ZooKeeper for the
// other gateways of its root to believe (its registration, its lease
// records), and checks theirs: the part of the trust between gateways
// (auth/peers) that lives in ZooKeeper rather than on the wire.
package nodeproof

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/zkgate/zkgate/internal/peer"
	"github.com/zkgate/zkgate/internal/zk"
)

// Anyone who may write under the root (with --zk-acl open, any ZooKeeper
// client) may write a registration {root}/gateways/{id} or rewrite the
// gateway of a lease record: what they say decides where a gateway sends
// requests and whose answers it relays. So with the gateways' shared secret
// (--peer-secret-file), each gateway signs what it writes there, and a
// registration or record that does not check out is ignored and logged.
// Without a secret nothing is signed nor checked here: the gateways then
// prove themselves by their certificates (--tls-peer-ca) when they connect,
// or not at all, and forward nothing.

// Each such node carries two proofs: the node proof (peer.Secret.SignNode),
// over every byte of its data, its name, the session that owns it and its
// data version, so that a copy made by another session, the same node set
// again with older data (a replay) or with one field changed (say
// draining_until) does not check out; and, beside it, the proof of earlier
// versions (of the lease and its gateway, or of a gateway and its address),
// which the gateways of those versions check during a rolling upgrade. A
// node that carries only the earlier proof is a gateway's of an earlier
// version, or a replay of such a node: it is taken only with --peer-proofs
// compat (olderOK), for the time of a rolling upgrade from those versions.

// Proofs signs this gateway's registration and lease records and checks
// the others'.
type Proofs struct {
	secret  *peer.Secret // nil: no shared secret
	root    string
	olderOK bool // --peer-proofs compat: a node with the earlier proof alone is taken
	log     *slog.Logger

	mu     sync.Mutex
	logged map[string]time.Time // path -> when it was last logged
}

// New signs and checks with secret (nil: nothing is signed, everything
// passes) under root; olderOK is --peer-proofs compat.
func New(secret *peer.Secret, root string, olderOK bool, log *slog.Logger) *Proofs {
	return &Proofs{secret: secret, root: root, olderOK: olderOK, log: log}
}

// rejectLogEvery bounds the log lines about one path that does not check
// out; maxRejectPaths bounds the paths remembered for that.
const (
	rejectLogEvery = time.Minute
	maxRejectPaths = 1024
)

// The purposes of the proofs.
const (
	RegistrationProof = "registration"
	LeaseProof        = "lease"
)

// Registration is the earlier proof of a gateway's registration: its id and
// the address it is reached at, under this root.
func (p *Proofs) Registration(id, advertise string) string {
	if p.secret == nil {
		return ""
	}
	return p.secret.Sign(RegistrationProof, p.root, id, advertise)
}

// Lease is the earlier proof of a lease record: the lease and its gateway.
func (p *Proofs) Lease(id, gateway string) string {
	if p.secret == nil {
		return ""
	}
	return p.secret.Sign(LeaseProof, p.root, id, gateway)
}

// Node is data (a JSON object) with the node proof of the node name, for
// purpose, that session owner makes now; data itself without a secret.
func (p *Proofs) Node(purpose, name string, owner int64, data []byte) []byte {
	if p.secret == nil {
		return data
	}
	return p.secret.SignNode(purpose, p.root, name, owner, data)
}

// RegistrationOK checks the registration of gateway id at path, whose
// node is stat and data (logged when it does not check out); advertise
// and proof are what data says, for the earlier proof. Without a secret
// every registration passes.
func (p *Proofs) RegistrationOK(path, id string, stat *zk.Stat, data []byte, advertise, proof string) bool {
	return p.nodeOK(path, RegistrationProof, id, stat, data, func() bool {
		return p.secret.Check(proof, RegistrationProof, p.root, id, advertise)
	}, "registration", slog.String("gateway", id), slog.String("advertise", advertise))
}

// LeaseOK checks the record of lease id at path, whose node is stat and
// data (logged when it does not check out); gateway and proof are what data
// says, for the earlier proof. Without a secret every record passes.
func (p *Proofs) LeaseOK(path, id string, stat *zk.Stat, data []byte, gateway, proof string) bool {
	return p.nodeOK(path, LeaseProof, id, stat, data, func() bool {
		return p.secret.Check(proof, LeaseProof, p.root, id, gateway)
	}, "lease record", slog.String("lease", id), slog.String("gateway", gateway))
}

// nodeOK checks the node proof of the node name at path, or, for a node
// with the earlier proof alone, that proof (older) with --peer-proofs
// compat; what and attrs say what the node is in the log.
func (p *Proofs) nodeOK(path, purpose, name string, stat *zk.Stat, data []byte, older func() bool, what string, attrs ...slog.Attr) bool {
	if p.secret == nil {
		return true
	}
	var owner int64
	var version int32
	if stat != nil {
		owner, version = stat.EphemeralOwner, stat.Version
	}
	signed, ok := p.secret.CheckNode(purpose, p.root, name, owner, version, data)
	switch {
	case ok:
		return true
	case signed:
		p.reject(path, what, "does not check out with --peer-secret-file: written by something that does not hold the gateways' secret, "+
			"by a gateway with another secret, or a gateway's node copied or set again by another ZooKeeper client", attrs...)
	case older():
		if p.olderOK {
			return true
		}
		p.reject(path, what, "carries only the proof of a gateway of an earlier version (or a copy of such a node): "+
			"it is ignored; during a rolling upgrade from such a version, run the new gateways with --peer-proofs compat", attrs...)
	default:
		p.reject(path, what, "does not check out with --peer-secret-file: written by something that does not hold the gateways' secret, "+
			"or by a gateway with another secret", attrs...)
	}
	return false
}

// reject logs a node that does not check out, at most once a minute for
// each path: anyone may write such nodes, as many as they like.
func (p *Proofs) reject(path, what, why string, attrs ...slog.Attr) {
	now := time.Now()
	p.mu.Lock()
	if p.logged == nil {
		p.logged = map[string]time.Time{}
	}
	if last, ok := p.logged[path]; ok && now.Sub(last) < rejectLogEvery {
		p.mu.Unlock()
		return
	}
	if len(p.logged) >= maxRejectPaths {
		for k, at := range p.logged {
			if now.Sub(at) >= rejectLogEvery {
				delete(p.logged, k)
			}
		}
		if len(p.logged) >= maxRejectPaths {
			p.mu.Unlock()
			return // a flood of them: what is logged already says so
		}
	}
	p.logged[path] = now
	p.mu.Unlock()
	attrs = append(attrs, slog.String("path", path))
	p.log.LogAttrs(context.Background(), slog.LevelWarn, "ignored a "+what+" that "+why, attrs...)
}
