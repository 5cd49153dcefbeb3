package server

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/go-chi/chi/v5"
	"github.com/zkgate/zkgate/handlers"
)

// rule is what a route needs of the caller's token: the one table of them,
// routeAccess, sits beside routes.go, and a test walks the router to make
// sure that no route lacks one.
type rule struct {
	// open routes need no token: health, readiness, the spec, the sign-in
	// page and the dashboard's static files.
	open bool
	// kind is what the route acts on: a kind of Kinds, or "*" for routes
	// that show every kind (the dashboard, /metrics).
	kind  string
	level handlers.Level
	// param names the URL parameter that names the target (a primitive's
	// name, a lease id); query a query parameter that gives a name prefix
	// (?prefix=). Neither: the route covers every name, and only a
	// permission with the prefix "*" grants it.
	param, query string
	// lease marks the routes of leases themselves: the owner of a lease may
	// use it whatever its permissions, so the handler decides (see
	// handlers.Caller.Granted).
	lease bool
	// page routes answer a browser without a token with the sign-in page.
	page bool
	// waits marks the routes that take ?wait=: a request with a wait above
	// 0 counts against the waiter limits while it runs.
	waits bool
}

var (
	openRoute = rule{open: true}
	dashRead  = rule{kind: "*", level: handlers.LevelRead}
)

func read(kind string) rule    { return rule{kind: kind, level: handlers.LevelRead, param: "name"} }
func write(kind string) rule   { return rule{kind: kind, level: handlers.LevelWrite, param: "name"} }
func readAll(kind string) rule { return rule{kind: kind, level: handlers.LevelRead} }

// waiting is r for a route that takes ?wait=.
func waiting(r rule) rule { r.waits = true; return r }

func leaseRule(l handlers.Level) rule {
	return rule{kind: "leases", level: l, param: "id", lease: true}
}

// routeAccess maps every route ("METHOD PATTERN", as chi.Walk names it) to
// what it needs of the caller's token.
var routeAccess = map[string]rule{
	"GET /healthz":          openRoute,
	"GET /readyz":           openRoute,
	"GET /openapi.yaml":     openRoute,
	"GET /metrics":          dashRead,
	"GET /":                 {kind: "*", level: handlers.LevelRead, page: true},
	"GET /ui/{page}":        {kind: "*", level: handlers.LevelRead, page: true},
	"GET /ui/static/{file}": openRoute,
	"GET /ws":               dashRead,
	"GET /signin":           openRoute,
	"POST /signin":          openRoute,
	"POST /signout":         openRoute,

	"POST /v1/leases":                {kind: "leases", level: handlers.LevelWrite},
	"GET /v1/leases":                 {kind: "leases", level: handlers.LevelRead, lease: true},
	"GET /v1/leases/{id}":            leaseRule(handlers.LevelRead),
	"DELETE /v1/leases/{id}":         leaseRule(handlers.LevelWrite),
	"POST /v1/leases/{id}/keepalive": leaseRule(handlers.LevelWrite),

	"GET /v1/locks":                 {kind: "locks", level: handlers.LevelRead, query: "prefix"},
	"GET /v1/locks/{name}":          waiting(read("locks")),
	"POST /v1/locks/{name}/acquire": waiting(write("locks")),
	"POST /v1/locks/{name}/release": write("locks"),
	"GET /v1/locks/{name}/fence":    read("locks"),

	"GET /v1/semaphores":                 readAll("semaphores"),
	"GET /v1/semaphores/{name}":          waiting(read("semaphores")),
	"POST /v1/semaphores/{name}/acquire": waiting(write("semaphores")),
	"POST /v1/semaphores/{name}/release": write("semaphores"),

	"GET /v1/elections":                  readAll("elections"),
	"GET /v1/elections/{name}":           waiting(read("elections")),
	"POST /v1/elections/{name}/campaign": waiting(write("elections")),
	"POST /v1/elections/{name}/resign":   write("elections"),
	"PUT /v1/elections/{name}/value":     write("elections"),

	"GET /v1/barriers":              readAll("barriers"),
	"GET /v1/barriers/{name}":       waiting(read("barriers")),
	"PUT /v1/barriers/{name}":       write("barriers"),
	"DELETE /v1/barriers/{name}":    write("barriers"),
	"POST /v1/barriers/{name}/wait": waiting(read("barriers")),

	"GET /v1/double-barriers":               readAll("double-barriers"),
	"GET /v1/double-barriers/{name}":        waiting(read("double-barriers")),
	"POST /v1/double-barriers/{name}/enter": waiting(write("double-barriers")),
	"POST /v1/double-barriers/{name}/leave": waiting(write("double-barriers")),

	"GET /v1/queues":                         readAll("queues"),
	"GET /v1/queues/{name}":                  waiting(read("queues")),
	"DELETE /v1/queues/{name}":               write("queues"),
	"POST /v1/queues/{name}/items":           write("queues"),
	"GET /v1/queues/{name}/items/{id}":       read("queues"),
	"POST /v1/queues/{name}/items/{id}/ack":  write("queues"),
	"POST /v1/queues/{name}/items/{id}/nack": write("queues"),
	"POST /v1/queues/{name}/take":            waiting(write("queues")),
	"POST /v1/queues/{name}/claim":           waiting(write("queues")),
}

// target is the name a request acts on under r, or "*" for every name.
func (ru rule) target(req *http.Request, rctx *chi.Context) string {
	switch {
	case ru.param != "":
		return rctx.URLParam(ru.param)
	case ru.query != "":
		if p := req.URL.Query().Get(ru.query); p != "" {
			return p
		}
	}
	return "*"
}

// sessionCookie keeps a dashboard user's token (see signin.go).
const sessionCookie = "zkgate_token"

// auth holds the tokens in force; nil while tokens are off. SIGHUP swaps
// in a new set without touching anything else.
type auth struct {
	tokens atomic.Pointer[Tokens]
}

func (a *auth) enabled() bool { return a != nil && a.tokens.Load() != nil }

// secretOf returns the secret a request carries: its bearer token, or on
// a GET the dashboard's sign-in cookie (SameSite=Strict, so another site
// cannot make a browser send it).
func secretOf(r *http.Request) (secret string, fromCookie bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(rest), false
		}
		return "", false
	}
	if r.Method == http.MethodGet {
		if c, err := r.Cookie(sessionCookie); err == nil {
			return c.Value, true
		}
	}
	return "", false
}

// admit authenticates and authorizes a request before it reaches its
// route, by the route's rule, and then applies the limits on waiting
// requests: release, if not nil, must be called when the request ends.
// Routes are found with the router itself, so that the rule is the one of
// the route that will serve the request. When ok is false, admit has
// answered.
func (fd *frontDoor) admit(w http.ResponseWriter, r *http.Request) (_ *http.Request, release func(), ok bool) {
	rctx := chi.NewRouteContext()
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	pattern := fd.mux.Find(rctx, r.Method, path)
	if pattern == "" {
		return r, nil, true // the router answers 404 or 405
	}
	route := r.Method + " " + pattern
	ru, known := routeAccess[route]
	if !known {
		// Fail closed; a test keeps this from happening.
		handlers.Problem(w, r, handlers.CodeForbidden, "no access rule for "+route)
		return r, nil, false
	}
	if _, forwarded := r.Header[handlers.ForwardedHeader]; forwarded {
		// Another gateway's request, or a forgery: proven before anything.
		var err error
		if r, err = fd.peers.Admit(r); err != nil {
			routeAnswered(r, pattern)
			handlers.WriteError(w, r, err)
			return r, nil, false
		}
	}
	target := ru.target(r, rctx)
	if !ru.open && fd.auth.enabled() {
		caller, allowed := authorize(w, r, fd.auth.tokens.Load(), ru, route, target)
		if !allowed {
			routeAnswered(r, pattern)
			return r, nil, false
		}
		r = r.WithContext(handlers.WithCaller(r.Context(), caller))
	}
	if fd.limits != nil && ru.waits {
		rel, err := fd.limits.admitWaiter(r, ru.kind, target)
		if err != nil {
			routeAnswered(r, pattern)
			handlers.WriteError(w, r, err)
			return r, nil, false
		}
		return r, rel, true
	}
	return r, nil, true
}

// authorize answers 401 or 403 and reports false, or returns the caller.
// The caller of a request another gateway forwarded is the token it names.
func authorize(w http.ResponseWriter, r *http.Request, tokens *Tokens, ru rule, route, target string) (*handlers.Caller, bool) {
	if pc := handlers.PeerOf(r.Context()); pc != nil {
		return authorizePeer(w, r, tokens, pc, ru, route, target)
	}
	secret, fromCookie := secretOf(r)
	var tok *Token
	if secret != "" {
		tok = tokens.Authenticate(secret)
	}
	if tok == nil {
		if ru.page && r.Method == http.MethodGet {
			if fromCookie {
				clearSessionCookie(w, r)
			}
			http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return nil, false
		}
		switch {
		case secret == "" && r.Header.Get("Authorization") != "":
			handlers.Unauthenticated(w, r, true, "the Authorization header must be \"Bearer <token>\"")
		case secret == "":
			handlers.Unauthenticated(w, r, false, "this gateway needs a token: send \"Authorization: Bearer <token>\"")
		default:
			handlers.Unauthenticated(w, r, true, "unknown token")
		}
		return nil, false
	}
	return permit(w, r, tok, ru, route, target)
}

// authorizePeer authorizes a forwarded request as the token its gateway
// names, looked up in this gateway's own tokens file (the gateways of a
// root share it).
func authorizePeer(w http.ResponseWriter, r *http.Request, tokens *Tokens, pc *handlers.PeerCall, ru rule, route, target string) (*handlers.Caller, bool) {
	if pc.Caller == "" {
		handlers.Unauthenticated(w, r, false, "gateway "+strconv.Quote(pc.Gateway)+" forwarded a request without a token "+
			"(tokens are off there): the gateways of a root must share --auth-file")
		return nil, false
	}
	tok := tokens.Named(pc.Caller)
	if tok == nil {
		handlers.Unauthenticated(w, r, true, "the token "+strconv.Quote(pc.Caller)+" of gateway "+strconv.Quote(pc.Gateway)+
			" is not in this gateway's tokens file: the gateways of a root must share --auth-file")
		return nil, false
	}
	return permit(w, r, tok, ru, route, target)
}

// permit checks tok against the route's rule: it answers 403 and reports
// false, or returns the caller.
func permit(w http.ResponseWriter, r *http.Request, tok *Token, ru rule, route, target string) (*handlers.Caller, bool) {
	granted := tok.Permits(ru.kind, target, ru.level)
	if !granted && !ru.lease {
		need := Permission{Kind: ru.kind, Prefix: target, Level: ru.level}
		if target == "*" {
			need.Prefix = ""
		}
		handlers.WriteError(w, r, handlers.Forbidden("token %q lacks the permission %s", tok.Name, need))
		return nil, false
	}
	return &handlers.Caller{Name: tok.Name, Kind: ru.kind, Target: target, Route: route,
		RequestID: w.Header().Get("X-Request-Id"), Granted: granted, Permits: tok.Permits}, true
}

// routeAnswered records the route of a request answered before routing,
// so that its log line and metrics name the route, as for any other.
func routeAnswered(r *http.Request, pattern string) {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		rc.RoutePatterns = []string{pattern}
	}
}
