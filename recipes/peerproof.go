package recipes

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/zkgate/zkgate/internal/peer"
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

// proofs signs this gateway's registration and lease records and checks
// the others'.
type proofs struct {
	secret *peer.Secret // nil: no shared secret
	root   string
	log    *slog.Logger

	mu     sync.Mutex
	logged map[string]time.Time // path -> when it was last logged
}

// rejectLogEvery bounds the log lines about one path that does not check
// out; maxRejectPaths bounds the paths remembered for that.
const (
	rejectLogEvery = time.Minute
	maxRejectPaths = 1024
)

// registration is the proof of a gateway's registration: its id and the
// address it is reached at, under this root.
func (p *proofs) registration(id, advertise string) string {
	if p.secret == nil {
		return ""
	}
	return p.secret.Sign("registration", p.root, id, advertise)
}

// lease is the proof of a lease record: the lease and its gateway.
func (p *proofs) lease(id, gateway string) string {
	if p.secret == nil {
		return ""
	}
	return p.secret.Sign("lease", p.root, id, gateway)
}

// registrationOK checks the registration at path (logged when it does not
// check out). Without a secret every registration passes.
func (p *proofs) registrationOK(path, id, advertise, proof string) bool {
	if p.secret == nil || p.secret.Check(proof, "registration", p.root, id, advertise) {
		return true
	}
	p.reject(path, "registration", slog.String("gateway", id), slog.String("advertise", advertise))
	return false
}

// leaseOK checks the lease record at path (logged when it does not check
// out). Without a secret every record passes.
func (p *proofs) leaseOK(path, id, gateway, proof string) bool {
	if p.secret == nil || p.secret.Check(proof, "lease", p.root, id, gateway) {
		return true
	}
	p.reject(path, "lease record", slog.String("lease", id), slog.String("gateway", gateway))
	return false
}

// reject logs a node that does not check out, at most once a minute for
// each path: anyone may write such nodes, as many as they like.
func (p *proofs) reject(path, what string, attrs ...slog.Attr) {
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
	p.log.LogAttrs(context.Background(), slog.LevelWarn, "ignored a "+what+" that does not check out with --peer-secret-file: "+
		"written by something that does not hold the gateways' secret, or by a gateway with another secret", attrs...)
}
