package handlers

import (
	"errors"
	"net/http"

	"github.com/zkgate/zkgate/auth/peers"
)

// handler is a route that returns its error rather than writing it; its
// ServeHTTP is the one place that turns a route's error into its answer.
type handler func(w http.ResponseWriter, r *http.Request) error

// ServeHTTP runs h and answers its error in one of two ways. An error
// about a lease that another gateway keeps is the request's to pass on:
// forwarded to the keeper, whose answer is relayed (unless another gateway
// forwarded it here already: a request is passed on once). Any other error,
// and one the forwarding gives, is a problem document (WriteError).
func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	err := h(w, r)
	if e, ok := keeperElsewhere(err); ok && peers.CallOf(r.Context()) == nil {
		err = e.forward(w, r)
	}
	if err != nil {
		WriteError(w, r, err)
	}
}

// keeperElsewhere says whether err is about a lease that another gateway
// keeps, and which.
func keeperElsewhere(err error) (*elsewhere, bool) {
	var e *elsewhere
	return e, errors.As(err, &e)
}

// writeOK answers 200 with v, or returns err (for handler to answer) when
// the call that gave v failed.
func writeOK[T any](w http.ResponseWriter, v T, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
