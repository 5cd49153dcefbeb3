// Package auth is who may do what on the gateway: the client tokens and
// their file, the authorization of a request by its route's rule, the
// lease-ownership check, the dashboard's sign-in and the gateway's TLS.
// The server's front door and the handlers both use it, so it sits below
// them and imports neither.
package auth

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/zkgate/zkgate/recipes"
)

// SessionCookie keeps a dashboard user's token (see SignIn).
const SessionCookie = "zkgate_token"

// Need is what a request needs of its caller's token: its route's rule
// (the server's route table holds each route's), applied to the request.
type Need struct {
	// Kind is what the route acts on: a kind of permKinds, or "*" for routes
	// that show every kind (the dashboard, /metrics).
	Kind  string
	Level Level
	// Target is the name the request acts on, or "*" for every name.
	Target string
	// Route is the route's method and pattern.
	Route string
	// Lease marks the routes of leases themselves: the owner of a lease may
	// use it whatever its permissions, so the handler decides (see
	// UseOfLease).
	Lease bool
	// Filtered routes show a token what it may read and nothing else (the
	// handler leaves the rest out): any token may ask.
	Filtered bool
	// Body routes name their targets in the request's body (a set of
	// locks): the token must hold Level on some name of Kind, and the
	// handler checks each name it is given (Caller.MayAll).
	Body bool
	// Page routes answer a browser without a token with the sign-in page.
	Page bool
	// Form routes are the dashboard's forms, which a signed-in browser
	// posts: the sign-in cookie counts on a POST too (the handler checks the
	// form's token, see CheckForm).
	Form bool
}

// Forwarder is the gateway that forwarded a request, proven, and the name
// of the token it was made with there (empty: tokens are off there).
type Forwarder struct{ Gateway, Caller string }

// ErrSignIn is the refusal of a page asked for without a token: Authorize
// has sent the browser to the sign-in page.
var ErrSignIn = errors.New("auth: sent to the sign-in page")

// Authorize returns the caller of a request by the tokens in force and its
// route's need. The caller of a request another gateway forwarded (fwd) is
// the token that gateway names. A refusal is ErrSignIn, answered, or an
// error to answer as a problem: 401 (its challenge header set on w) or 403.
func Authorize(w http.ResponseWriter, r *http.Request, tokens *Tokens, need Need, fwd *Forwarder) (*Caller, error) {
	if fwd != nil {
		return authorizeForwarded(w, tokens, need, fwd)
	}
	secret, fromCookie := secretOf(r, need.Form)
	var tok *Token
	if secret != "" {
		tok = tokens.Authenticate(secret)
	}
	if tok != nil {
		return permit(w, tok, need)
	}
	switch {
	case need.Page && r.Method == http.MethodGet:
		if fromCookie {
			clearSessionCookie(w, r)
		}
		http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return nil, ErrSignIn
	case secret == "" && r.Header.Get("Authorization") != "":
		return nil, unauthenticated(w, true, "the Authorization header must be \"Bearer <token>\"")
	case secret == "":
		return nil, unauthenticated(w, false, "this gateway needs a token: send \"Authorization: Bearer <token>\"")
	default:
		return nil, unauthenticated(w, true, "unknown token")
	}
}

// authorizeForwarded authorizes a forwarded request as the token its
// gateway names, looked up in this gateway's own tokens file (the gateways
// of a root share it).
func authorizeForwarded(w http.ResponseWriter, tokens *Tokens, need Need, fwd *Forwarder) (*Caller, error) {
	if fwd.Caller == "" {
		return nil, unauthenticated(w, false, "gateway "+strconv.Quote(fwd.Gateway)+" forwarded a request without a token "+
			"(tokens are off there): the gateways of a root must share --auth-file")
	}
	tok := tokens.Named(fwd.Caller)
	if tok == nil {
		return nil, unauthenticated(w, true, "the token "+strconv.Quote(fwd.Caller)+" of gateway "+strconv.Quote(fwd.Gateway)+
			" is not in this gateway's tokens file: the gateways of a root must share --auth-file")
	}
	return permit(w, tok, need)
}

// permit checks tok against the need: it returns the caller, or 403.
func permit(w http.ResponseWriter, tok *Token, need Need) (*Caller, error) {
	granted := tok.Permits(need.Kind, need.Target, need.Level)
	if need.Body {
		granted = tok.PermitsSome(need.Kind, need.Level)
	}
	if !granted && need.Body {
		return nil, Forbidden("token %q holds no permission %s:PREFIX:%s, which %s needs on each name it is given", tok.Name, need.Kind,
			need.Level, need.Route)
	}
	if !granted && !need.Lease && !need.Filtered {
		want := Permission{Kind: need.Kind, Prefix: need.Target, Level: need.Level}
		if need.Target == "*" {
			want.Prefix = ""
		}
		return nil, Forbidden("token %q lacks the permission %s", tok.Name, want)
	}
	return &Caller{Name: tok.Name, Kind: need.Kind, Target: need.Target, Route: need.Route,
		RequestID: w.Header().Get("X-Request-Id"), Granted: granted, Permits: tok.Permits, PermitsSome: tok.PermitsSome}, nil
}

// unauthenticated sets the challenge of RFC 6750 on w and returns the 401
// problem.
func unauthenticated(w http.ResponseWriter, invalidToken bool, detail string) error {
	challenge := `Bearer realm="zkgate"`
	if invalidToken {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	return &recipes.Error{Code: CodeUnauthenticated, Detail: detail}
}

// secretOf returns the secret a request carries: its bearer token, or on
// a GET (or a POST of a dashboard form: form) the dashboard's sign-in
// cookie (SameSite=Strict, so another site cannot make a browser send it).
func secretOf(r *http.Request, form bool) (secret string, fromCookie bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(rest), false
		}
		return "", false
	}
	if r.Method == http.MethodGet || form && r.Method == http.MethodPost {
		if c, err := r.Cookie(SessionCookie); err == nil {
			return c.Value, true
		}
	}
	return "", false
}
