package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// A draining gateway hands each of its ZooKeeper sessions, with the leases
// made in it, to another gateway (see recipes.Handover): POST
// HandoverPath, a proven peer call (see Peers) and nothing else. The
// session's password is what owns the session: over plain HTTP it travels
// sealed with the gateways' shared secret, bound to the session, the giver
// and the taker; under TLS with the peers' CA alone (no secret) the
// connection keeps it.

// HandoverPath is the route that takes a handover.
const HandoverPath = "/peer/v1/handover"

// handoverWire is a recipes.Handover as it travels: the password sealed.
type handoverWire struct {
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
func (p *Peers) SendHandover(ctx context.Context, k recipes.Keeper, h *recipes.Handover) error {
	if !p.proven() {
		return &recipes.Error{Code: recipes.CodeUnavailable, Detail: noCredential}
	}
	var wire handoverWire
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
	answer, err := p.ask(ctx, k, http.MethodPost, HandoverPath, "application/json", "", "", body)
	if err != nil {
		return err
	}
	switch answer.status {
	case http.StatusOK:
		return nil
	case http.StatusGone:
		return recipes.ErrSessionGone
	}
	return fmt.Errorf("the gateway at %s answered the handover %d: %s", k.Advertise, answer.status, Clip(string(answer.body), 500))
}

// TakeHandover is POST HandoverPath: another gateway hands over one of its
// sessions. Only a gateway that proved itself may; a draining gateway
// takes none.
func (a *API) TakeHandover() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		received := time.Now()
		if err := peersOnly(r, "hand leases over"); err != nil {
			return err
		}
		if a.Adopt == nil || a.draining() {
			return &recipes.Error{Code: recipes.CodeUnavailable, Detail: "this gateway takes no handover now"}
		}
		h, err := a.openHandover(r, received)
		if err != nil {
			return err
		}
		err = a.Adopt(r.Context(), h)
		if errors.Is(err, recipes.ErrSessionGone) {
			return &recipes.Error{Code: recipes.CodeLeaseExpired, Extra: map[string]any{"reason": recipes.EndSessionLost},
				Detail: "the session handed over has expired: its leases are gone"}
		}
		if err != nil {
			return &recipes.Error{Code: recipes.CodeUnavailable, Detail: "the handover could not be taken: " + err.Error()}
		}
		writeJSON(w, http.StatusOK, map[string]any{"leases": len(h.Leases)})
		return nil
	})
}

// openHandover reads the handover in r's body, sent by the proven peer of
// r, and opens its session's password.
func (a *API) openHandover(r *http.Request, received time.Time) (*recipes.Handover, error) {
	pc := PeerOf(r.Context())
	var wire handoverWire
	if err := decodeJSON(r, &wire); err != nil {
		return nil, err
	}
	if wire.From != pc.Gateway {
		return nil, Forbidden("a handover of gateway %q's session sent by gateway %q", wire.From, pc.Gateway)
	}
	h := &recipes.Handover{From: wire.From, Leases: wire.Leases, Received: received}
	h.Session.ID = wire.Session.ID
	switch {
	case a.Peers.secret != nil:
		pw, err := a.Peers.secret.Open(wire.Session.Sealed, sealContext(wire.Session.ID, wire.From, a.Peers.self))
		if err != nil {
			return nil, Forbidden("a handover whose session password does not open with --peer-secret-file")
		}
		h.Session.Password = pw
	default:
		h.Session.Password = wire.Session.Password
	}
	if h.Session.ID == 0 || len(h.Session.Password) == 0 {
		return nil, invalid("a handover names a session and its password")
	}
	return h, nil
}
