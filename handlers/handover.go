package handlers

import (
	"errors"
	"net/http"
	"time"

	"github.com/zkgate/zkgate/auth/peers"
	"github.com/zkgate/zkgate/recipes"
)

// TakeHandover is POST peers.HandoverPath: another gateway hands over one
// of its sessions (its wire and the seal of its password are peers').
// Only a gateway that proved itself may; a draining gateway takes none.
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
	var wire peers.HandoverWire
	if err := decodeJSON(r, &wire); err != nil {
		return nil, err
	}
	return a.Peers.OpenHandover(peers.CallOf(r.Context()), &wire, received)
}
