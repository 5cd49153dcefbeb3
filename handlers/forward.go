package handlers

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/zkgate/zkgate/auth/peers"
	"github.com/zkgate/zkgate/recipes"
)

// LeaseEndsHeader is set on every answer of a draining gateway: every lease
// it keeps ends at that time (RFC 3339), so a client should take a new lease
// through another gateway before then.
const LeaseEndsHeader = "X-Zkgate-Lease-Ends"

// TimeHeader carries the gateway's clock (RFC 3339) on every answer that
// carries a lease's expires_at or LeaseEndsHeader, so that a client whose
// clock is set differently can tell how far ahead they are: the answer's
// times less this one, counted from when it sent its request.
const TimeHeader = "X-Zkgate-Time"

// stampTime sets TimeHeader to now.
func stampTime(h http.Header) { h.Set(TimeHeader, time.Now().UTC().Format(time.RFC3339Nano)) }

// elsewhere is a lease that lives on another gateway, as lookup finds it.
// Behind a load balancer, a client's requests reach any gateway; the one
// that keeps the lease (its ZooKeeper session holds the lease's nodes) must
// serve them, so the route's handler forwards the request there (see
// API.forward) rather than serve it.
type elsewhere struct {
	lease  string
	keeper recipes.Keeper
	via    *peers.Credential
	// moved: this gateway drains, so the client should send the lease's
	// requests to its keeper (MovedToHeader) rather than here.
	moved bool
}

// MovedToHeader, on an answer of a draining gateway about a lease that
// another gateway keeps (handed over to it, or always kept there), is the
// base URL of that gateway: a client that sends its requests to the
// draining gateway's address sends those of the lease there instead, since
// the draining gateway is going away. The lease itself goes on.
const MovedToHeader = "X-Zkgate-Lease-Moved-To"

// forward is a route's step for a lease that another gateway keeps (away):
// the request is passed on to that gateway, and its answer relayed. A
// request is passed on once: one that another gateway forwarded here
// already is answered with a problem instead (see elsewhere.problem).
func (a *API) forward(w http.ResponseWriter, r *http.Request, away *elsewhere) error {
	if peers.CallOf(r.Context()) != nil {
		return away.problem(w.Header())
	}
	return away.forward(w, r)
}

// forward passes r, whose JSON body decodeJSON kept, to the gateway that
// keeps the lease, with this gateway's proof and the caller's name (never
// the client's secret), and relays its answer once proven. It returns the
// problem to answer instead when the request cannot be passed on, or the
// keeper is gone.
func (e *elsewhere) forward(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, peers.MaxBody+1))
	switch {
	case err != nil:
		return invalid("could not read the body: %v", err)
	case len(body) > peers.MaxBody:
		return recipes.Errorf(recipes.CodeTooLarge, "the body is larger than %d bytes", peers.MaxBody)
	}
	caller := ""
	if c := CallerOf(r.Context()); c != nil {
		caller = c.Name
	}
	answer, err := e.via.Ask(r.Context(), e.keeper, r.Method, r.URL.RequestURI(), r.Header.Get("Content-Type"),
		w.Header().Get("X-Request-Id"), caller, body)
	if err != nil {
		return err
	}
	if answer.Status == http.StatusMisdirectedRequest {
		// Another gateway serves the keeper's address now: the keeper is
		// gone, and its leases with it (an address names one gateway).
		w.Header().Set(peers.ServedByHeader, e.keeper.Advertise)
		return &recipes.Error{Code: recipes.CodeLeaseExpired, Extra: map[string]any{"reason": recipes.EndSessionLost},
			Detail: fmt.Sprintf("lease %q has ended: %s (its gateway %s at %s is gone; another gateway serves that address now)",
				e.lease, recipes.EndSessionLost, e.keeper.Gateway, e.keeper.Advertise)}
	}
	h := w.Header()
	// The keeper's answer says when its own leases end, on its own clock:
	// whatever this gateway would have said of its own leases is not about
	// this one.
	h.Del(LeaseEndsHeader)
	h.Del(TimeHeader)
	for k, v := range answer.Header {
		if peers.Relayed(k) {
			h[k] = v
		}
	}
	h.Set(peers.ServedByHeader, e.keeper.Advertise)
	if e.moved {
		h.Set(MovedToHeader, e.via.BaseURL(e.keeper.Advertise))
		e.via.NoteMoved()
	}
	w.WriteHeader(answer.Status)
	_, _ = w.Write(answer.Body)
	return nil
}

// problem is the answer about a lease kept elsewhere to a request that is
// not passed on: one forwarded here already, for a lease kept by a third
// gateway. The forwarder's view of the records is behind this one's (or
// the lease was handed over from here a moment ago); the lease lives, so
// the client should ask again. h gets where the lease went when this
// gateway drains.
func (e *elsewhere) problem(h http.Header) *recipes.Error {
	if e.moved {
		h.Set(MovedToHeader, e.via.BaseURL(e.keeper.Advertise))
		e.via.NoteMoved()
	}
	return &recipes.Error{Code: recipes.CodeUnavailable, Detail: fmt.Sprintf(
		"lease %q is kept by gateway %s now, which the forwarding gateway had not seen yet; retry", e.lease, e.keeper.Gateway)}
}
