package handlers

import (
	"net/http"
)

// handler is a route that returns its error rather than writing it; its
// ServeHTTP is the one place that turns a route's error into its answer.
type handler func(w http.ResponseWriter, r *http.Request) error

// ServeHTTP runs h and answers its error, if any, with a problem document
// (WriteError). A route whose lease another gateway keeps has answered
// already, with that gateway's answer (see API.forward).
func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h(w, r); err != nil {
		WriteError(w, r, err)
	}
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
