package handlers

import (
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// forwardedHeader marks a request one gateway passed to another, so that
// it is never passed on again.
const forwardedHeader = "X-Zkgate-Forwarded"

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

// elsewhere says that a lease lives on another gateway. Behind a load
// balancer, a client's requests reach any gateway; the one that owns the
// lease (its ZooKeeper session holds the lease's nodes) must serve them.
type elsewhere struct {
	owner string // host:port
	err   error  // lease_not_found, answered when forwarding is not possible
	via   Forwarding
}

// Forwarding is how a gateway reaches the others: over plain HTTP with the
// default transport, or over TLS (with this gateway's client certificate
// when they ask for one).
type Forwarding struct {
	TLS       bool
	Transport http.RoundTripper // nil: http.DefaultTransport
}

func (e *elsewhere) Error() string { return "lease owned by the gateway at " + e.owner }
func (e *elsewhere) Unwrap() error { return e.err }

// forward passes r, whose JSON body decodeJSON kept, to the owning gateway
// and relays its answer. It reports false when r may not be forwarded.
func forward(w http.ResponseWriter, r *http.Request, e *elsewhere) bool {
	if r.Header.Get(forwardedHeader) != "" {
		return false
	}
	target := &url.URL{Scheme: "http", Host: e.owner}
	if e.via.TLS {
		target.Scheme = "https"
	}
	proxy := &httputil.ReverseProxy{
		Transport: e.via.Transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = r.Host
			pr.Out.Header.Set(forwardedHeader, w.Header().Get("X-Request-Id"))
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Del("X-Request-Id") // ours is set already
			resp.Header.Set("X-Zkgate-Served-By", e.owner)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			WriteError(w, r, &recipes.Error{Code: recipes.CodeUnavailable,
				Detail: "the lease's gateway at " + e.owner + " does not answer", Err: err})
		},
	}
	// The owner's answer says when its own leases end, on its own clock:
	// whatever this gateway would have said of its own leases is not about
	// this one.
	w.Header().Del(LeaseEndsHeader)
	w.Header().Del(TimeHeader)
	proxy.ServeHTTP(w, r)
	return true
}

func asElsewhere(err error) (*elsewhere, bool) {
	var e *elsewhere
	return e, errors.As(err, &e)
}
