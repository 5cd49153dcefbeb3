package server

import (
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/auth/peers"
	"github.com/zkgate/zkgate/handlers"
	"github.com/zkgate/zkgate/kinds"
	"github.com/zkgate/zkgate/recipes"
)

// rule is what a route needs of the caller's token (see route). A route
// whose rule is none of open, peer or of a kind has none: the front door
// refuses it, and a test keeps this from happening.
type rule struct {
	// open routes need no token: health, readiness, the spec, the sign-in
	// page and the dashboard's static files.
	open bool
	// kind is the permission kind of what the route acts on: a
	// kinds.Kind's Permission, "leases", or "*" for routes that show every
	// kind (the dashboard, /metrics).
	kind  string
	level auth.Level
	// param names the URL parameter that names the target (a primitive's
	// name, a lease id); query a query parameter that gives a name prefix
	// (?prefix=). Neither: the route covers every name, and only a
	// permission with the prefix "*" grants it.
	param, query string
	// lease marks the routes of leases themselves: the owner of a lease may
	// use it whatever its permissions, so the handler decides (see
	// auth.UseOfLease).
	lease bool
	// filtered routes show a token what it may read and nothing else (the
	// handler leaves the rest out): any token may ask.
	filtered bool
	// body routes name their targets in the request's body (a set of
	// locks): the front door asks for the level on some name of the kind,
	// and the handler checks each name (see auth.Need.Body).
	body bool
	// page routes answer a browser without a token with the sign-in page.
	page bool
	// form routes are the dashboard's forms: a signed-in browser posts them
	// with its sign-in cookie and the form's token (auth.CheckForm), from
	// the gateway's own origin, as a form (not as JSON).
	form bool
	// peer routes are between the gateways of the root only: a request
	// that is not a proven peer call is refused before anything, and one
	// that is needs no token (the gateway proved itself).
	peer bool
	// waiter marks the routes that take ?wait=: a request with a wait
	// above 0 counts against the waiter limits while it runs.
	waiter bool
	// probe routes answer at once from memory (health, readiness): they
	// count against no limit, so that they answer at every cap.
	probe bool
	// makesLeases marks the routes that may make a lease: POST /v1/leases,
	// and those that make one when given a ttl instead of a lease. Without
	// a token, the lease limits count such a lease against the client's
	// address, which the front door gives them.
	makesLeases bool
	// fansOut marks the reads that ask every gateway (the lease list, the
	// contention figures): a client's are paced by --fan-out-rate before
	// anything is spent on them (see limits.pace), and those another
	// gateway asks are not (that gateway paced its caller).
	fansOut bool
}

var (
	openRoute  = rule{open: true}
	probeRoute = rule{open: true, probe: true}
	dashRead   = rule{kind: "*", level: auth.LevelRead}
)

func read(k kinds.Kind) rule { return rule{kind: k.Permission(), level: auth.LevelRead, param: "name"} }
func write(k kinds.Kind) rule {
	return rule{kind: k.Permission(), level: auth.LevelWrite, param: "name"}
}
func readAll(k kinds.Kind) rule { return rule{kind: k.Permission(), level: auth.LevelRead} }

// waiter is r for a route that takes ?wait=.
func waiter(r rule) rule { r.waiter = true; return r }

// fanningOut is r for a read that asks every gateway.
func fanningOut(r rule) rule { r.fansOut = true; return r }

// readFanningOut is read, for a read of a name that asks every gateway.
func readFanningOut(k kinds.Kind) rule { return fanningOut(read(k)) }

// makingLeases is r for a route that may make a lease.
func makingLeases(r rule) rule { r.makesLeases = true; return r }

func leaseRule(l auth.Level) rule {
	return rule{kind: "leases", level: l, param: "id", lease: true}
}

// known reports whether ru is a rule at all: the zero rule is none.
func (ru rule) known() bool { return ru.open || ru.peer || ru.kind != "" }

// target is the name a request acts on under r, or "*" for every name.
func (ru rule) target(req *http.Request) string {
	switch {
	case ru.param != "":
		return chi.URLParam(req, ru.param)
	case ru.query != "":
		if p := req.URL.Query().Get(ru.query); p != "" {
			return p
		}
	}
	return "*"
}

// need is what a request under ru needs of its caller's token.
func (ru rule) need(route, target string) auth.Need {
	return auth.Need{Kind: ru.kind, Level: ru.level, Target: target, Route: route, Lease: ru.lease, Filtered: ru.filtered, Body: ru.body, Page: ru.page,
		Form: ru.form}
}

// admit authenticates and authorizes a request before it reaches rt, the
// route the router matched for it, by the route's rule, and then counts it
// against the limits of its client: the slot, if held, must be released
// when the request ends. rt is nil for a request no route serves, which
// the router answers 404 or 405. When ok is false, admit has answered.
func (fd *frontDoor) admit(w http.ResponseWriter, r *http.Request, rt *route) (_ *http.Request, _ slot, ok bool) {
	_, forwarded := r.Header[peers.ForwardedHeader]
	// A request another gateway forwarded names it by its --advertise
	// address, and is proven below.
	if !forwarded && !fd.auth.Enabled() && !fd.hosts.allows(r.Host) {
		handlers.WriteError(w, r, fd.hosts.refusal(r.Host))
		return r, slot{}, false
	}
	if rt == nil {
		return r, slot{}, true
	}
	ru, route := rt.access, rt.method+" "+rt.pattern
	if !ru.known() {
		// Fail closed; a test keeps this from happening.
		handlers.Problem(w, r, auth.CodeForbidden, "no access rule for "+route)
		return r, slot{}, false
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if refusal := fromBrowser(r, !ru.open && ru.kind != "*" && !ru.form); refusal != nil {
			handlers.WriteError(w, r, refusal)
			return r, slot{}, false
		}
	}
	if ru.peer && !forwarded {
		handlers.WriteError(w, r, auth.Forbidden("%s is for the gateways of this root only", route))
		return r, slot{}, false
	}
	if forwarded {
		// Another gateway's request, or a forgery: proven before anything.
		var err error
		// The proof covers the body: it is read up to the route's own cap
		// (a handover's is far more than a megabyte).
		if r, err = fd.peers.AdmitUpTo(r, max(rt.body, 0)); err != nil {
			handlers.WriteError(w, r, err)
			return r, slot{}, false
		}
	}
	target := ru.target(r)
	var caller *auth.Caller
	if !ru.open && !ru.peer && fd.auth.Enabled() {
		var err error
		if caller, err = auth.Authorize(w, r, fd.auth.Tokens(), ru.need(route, target), forwarder(r)); err != nil {
			if !errors.Is(err, auth.ErrSignIn) {
				handlers.WriteError(w, r, err)
			}
			return r, slot{}, false
		}
		r = r.WithContext(auth.WithCaller(r.Context(), caller))
	}
	if fd.limits == nil || ru.probe {
		return r, slot{}, true
	}
	c := clientOf(r, caller)
	if ru.makesLeases && caller == nil {
		r = r.WithContext(withLeaseClient(r.Context(), c))
	}
	if ru.fansOut && !forwarded {
		if err := fd.limits.pace(r.Context(), c); err != nil {
			handlers.WriteError(w, r, err)
			return r, slot{}, false
		}
	}
	s, err := fd.limits.admit(r, c, ru.waiter, ru.kind, target)
	if err != nil {
		handlers.WriteError(w, r, err)
		return r, slot{}, false
	}
	if s.waiting != "" && target == "*" && ru.body {
		// A wait whose names are in its body (a set of locks) counts
		// against each name's cap once its handler has read them.
		kind := ru.kind
		r = r.WithContext(handlers.WithNameWaits(r.Context(), func(names []string) (func(), error) {
			return fd.limits.admitNames(kind, names)
		}))
	}
	return r, s, true
}

// forwarder is the gateway that forwarded r, proven (nil: none).
func forwarder(r *http.Request) *auth.Forwarder {
	if pc := peers.CallOf(r.Context()); pc != nil {
		return &auth.Forwarder{Gateway: pc.Gateway, Caller: pc.Caller}
	}
	return nil
}

// fromBrowser refuses a request that would change something when a web
// page made a browser send it, whatever the page's script may do: a form
// or a no-cors fetch of another site is sent without asking (no CORS
// preflight), with the gateway's sign-in cookie when it is not SameSite's,
// and a gateway without tokens asks for nothing else. A request that
// carries neither Sec-Fetch-Site nor Origin is not a browser's (curl, the
// clients) and passes.
//
// A browser says where a request comes from in Sec-Fetch-Site, which no
// script can set; only same-origin and none (the user's own navigation)
// pass. Browsers too old to send it send Origin on cross-origin requests:
// it must be the gateway's own (its host as the request names it; "null",
// an opaque origin, is not). Past that, a request of the gateway's own
// origin on an API route (api) must not carry a body of a type a form or a
// no-cors fetch sends (text/plain, multipart/form-data,
// application/x-www-form-urlencoded, or none at all). (A page of the
// gateway's own origin may be an attacker's, rebound to the gateway by DNS:
// without tokens, hostCheck has refused every name but an address's.)
func fromBrowser(r *http.Request, api bool) error {
	site := r.Header.Get("Sec-Fetch-Site")
	origin := r.Header.Get("Origin")
	switch {
	case site == "" && origin == "":
		return nil
	case site == "same-origin" || site == "none":
	case site != "":
		return auth.Forbidden("a request from another site (Sec-Fetch-Site: %s) may not change anything on this gateway", handlers.Clip(site, 32))
	case !sameHost(origin, r.Host):
		return auth.Forbidden("a request from another origin (Origin: %s) may not change anything on this gateway", handlers.Clip(origin, 100))
	}
	if api && r.ContentLength != 0 && formType(r.Header.Get("Content-Type")) {
		return &recipes.Error{Code: handlers.CodeMediaType,
			Detail: "a browser must send an API body as application/json (a queue item: any type but text/plain and the form types)"}
	}
	return nil
}

// sameHost reports whether origin (scheme://host[:port]) names host.
func sameHost(origin, host string) bool {
	_, rest, ok := strings.Cut(origin, "://")
	return ok && rest == host
}

// hostCheck is what a gateway without tokens answers: requests that name
// it (their Host header) by an IP address, localhost, or a name of
// --allowed-hosts. Any other name may be an attacker's, whose DNS answers
// with the gateway's address once a visitor's browser has loaded the
// attacker's page (DNS rebinding): to the browser that page and the
// gateway are then one origin, so its script reads every answer, the
// dashboard's stream included, and no Origin or Sec-Fetch-Site header
// tells it apart. With tokens a rebound page has no token to send (the
// sign-in cookie belongs to the gateway's real name), so the check is off.
// It is etcd's --host-whitelist.
type hostCheck struct {
	any   bool
	names map[string]bool
}

func newHostCheck(allowed []string) hostCheck {
	c := hostCheck{names: map[string]bool{}}
	for _, h := range allowed {
		if h == "*" {
			c.any = true
		}
		c.names[strings.TrimSuffix(strings.ToLower(h), ".")] = true
	}
	return c
}

// allows reports whether a request whose Host header is host is answered.
func (c hostCheck) allows(host string) bool {
	// No Host at all (HTTP/1.0) is no browser's: browsers always send one.
	if c.any || host == "" || addressedByAddress(host) {
		return true
	}
	return c.names[strings.ToLower(strings.TrimSuffix(hostOf(host), "."))]
}

func (c hostCheck) refusal(host string) error {
	return auth.Forbidden("without tokens (and on --metrics-listen and --debug-listen, which take none) the gateway answers only "+
		"requests that name it by an IP address, localhost or a name of --allowed-hosts: %q may be any web page's, rebound to the "+
		"gateway by its DNS (DNS rebinding); add the name to --allowed-hosts (ZKGATE_ALLOWED_HOSTS)", handlers.Clip(host, 100))
}

// hostChecked is h behind c, for the side listeners (--metrics-listen,
// --debug-listen), which no token guards.
func hostChecked(c hostCheck, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.allows(r.Host) {
			handlers.WriteError(w, r, c.refusal(r.Host))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// addressedByAddress reports whether host (host[:port], as in the Host
// header) is an IP address, localhost or a name under .localhost, which
// browsers resolve to loopback themselves: no DNS answer can rebind them.
func addressedByAddress(host string) bool {
	host = hostOf(host)
	return strings.EqualFold(host, "localhost") || len(host) > len(".localhost") &&
		strings.EqualFold(host[len(host)-len(".localhost"):], ".localhost") || net.ParseIP(host) != nil
}

// formType reports whether a Content-Type is one that a page may send
// without a CORS preflight (the CORS-safelisted ones), or is missing.
func formType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	return mt == "" || strings.EqualFold(mt, "text/plain") || strings.EqualFold(mt, "multipart/form-data") ||
		strings.EqualFold(mt, "application/x-www-form-urlencoded")
}
