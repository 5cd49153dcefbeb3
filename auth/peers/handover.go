package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/recipes"
)

// A draining gateway hands each of its ZooKeeper sessions, with the leases
// made in it, to another gateway (see recipes.Handover): POST
// HandoverPath, a proven peer call and nothing else. The session's
// password is what owns the session: over plain HTTP it travels sealed with
// the gateways' shared secret, bound to the session, the giver and the
// taker; under TLS with the peers' CA alone (no secret) the connection
// keeps it.

// HandoverPath is the route that takes a handover.
const HandoverPath = "/peer/v1/handover"

// HandoverWire is a recipes.Handover as it travels: the password sealed.
type HandoverWire struct {
	Session struct {
		ID       int64  `json:"id"`
		Sealed   string `json:"sealed,omitempty"`
		Password []byte `json:"password,omitempty"` // under TLS without a secret only
	} `json:"session"`
	From   string               `json:"from"`
	Leases []recipes.LeaseState `json:"leases"`
}

// sealContext binds a sealed password to its session and both gateways.
func sealContext(session int64, from, to string) string {
	return fmt.Sprintf("handover session=%x from=%s to=%s", uint64(session), from, to)
}

// SendHandover hands h to the gateway k, which resumes its session and
// keeps its leases; it returns once k has (or says why not). A session
// that k finds expired is recipes.ErrSessionGone.
func (p *Credential) SendHandover(ctx context.Context, k recipes.Keeper, h *recipes.Handover) error {
	if !p.proven() {
		return &recipes.Error{Code: recipes.CodeUnavailable, Detail: noCredential}
	}
	var wire HandoverWire
	// The TTL left of each lease as it is when sent, not when it froze.
	wire.Session.ID, wire.From, wire.Leases = h.Session.ID, h.From, h.Aged().Leases
	if p.secret != nil {
		sealed, err := p.secret.Seal(h.Session.Password, sealContext(h.Session.ID, h.From, k.Gateway))
		if err != nil {
			return err
		}
		wire.Session.Sealed = sealed
	} else {
		wire.Session.Password = h.Session.Password // under TLS with the peers' CA: see proven
	}
	body, err := json.Marshal(wire)
	if err != nil {
		return err
	}
	answer, err := p.Ask(ctx, k, http.MethodPost, HandoverPath, "application/json", "", "", body)
	if err != nil {
		return err
	}
	switch answer.Status {
	case http.StatusOK:
		return nil
	case http.StatusGone:
		return recipes.ErrSessionGone
	}
	return fmt.Errorf("the gateway at %s answered the handover %d: %s", k.Advertise, answer.Status, auth.Clip(string(answer.Body), 500))
}

// OpenHandover is the handover wire that the proven peer call pc sent,
// received at received, with its session's password opened.
func (p *Credential) OpenHandover(pc *Call, wire *HandoverWire, received time.Time) (*recipes.Handover, error) {
	if wire.From != pc.Gateway {
		return nil, auth.Forbidden("a handover of gateway %q's session sent by gateway %q", wire.From, pc.Gateway)
	}
	h := &recipes.Handover{From: wire.From, Leases: wire.Leases, Received: received}
	h.Session.ID = wire.Session.ID
	switch {
	case p.secret != nil:
		pw, err := p.secret.Open(wire.Session.Sealed, sealContext(wire.Session.ID, wire.From, p.self))
		if err != nil {
			return nil, auth.Forbidden("a handover whose session password does not open with --peer-secret-file")
		}
		h.Session.Password = pw
	default:
		h.Session.Password = wire.Session.Password
	}
	if h.Session.ID == 0 || len(h.Session.Password) == 0 {
		return nil, recipes.Errorf(recipes.CodeInvalid, "a handover names a session and its password")
	}
	return h, nil
}
