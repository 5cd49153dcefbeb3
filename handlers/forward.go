package handlers

import (
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/zkgate/zkgate/recipes"
)

// forwardedHeader marks a request one gateway passed to another, so that
// it is never passed on again.
const forwardedHeader = "X-Zkgate-Forwarded"

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
	proxy.ServeHTTP(w, r)
	return true
}

func asElsewhere(err error) (*elsewhere, bool) {
	var e *elsewhere
	return e, errors.As(err, &e)
}
