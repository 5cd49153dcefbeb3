package auth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/zkgate/zkgate/recipes"
)

// TestAuthorize: a request's token against its route's need, without a
// gateway: the caller it gets, or the refusal, with the challenge of RFC
// 6750 on a 401 and the sign-in for a page.
func TestAuthorize(t *testing.T) {
	t.Parallel()
	ts, err := parseTokens("f", []byte("billing "+hashA+" locks:billing-:write\nviewer "+hashB+" *:*:read\n"))
	if err != nil {
		t.Fatal(err)
	}
	write := Need{Kind: "locks", Level: LevelWrite, Target: "billing-eu", Route: "POST /v1/locks/{name}/acquire"}
	page := Need{Kind: "*", Level: LevelRead, Target: "*", Route: "GET /", Page: true}
	cases := []struct {
		name          string
		need          Need
		method, auth  string
		cookie        string
		fwd           *Forwarder
		wantCaller    string
		wantCode      recipes.Code
		wantChallenge string
		wantDetail    string
	}{
		{name: "granted", need: write, auth: "Bearer test", wantCaller: "billing"},
		{name: "scheme in any case", need: write, auth: "bearer test", wantCaller: "billing"},
		{name: "no token", need: write, wantCode: CodeUnauthenticated, wantChallenge: `Bearer realm="zkgate"`, wantDetail: "needs a token"},
		{name: "not bearer", need: write, auth: "Basic dGVzdA==", wantCode: CodeUnauthenticated,
			wantChallenge: `Bearer realm="zkgate", error="invalid_token"`, wantDetail: `"Bearer <token>"`},
		{name: "unknown token", need: write, auth: "Bearer nope", wantCode: CodeUnauthenticated,
			wantChallenge: `Bearer realm="zkgate", error="invalid_token"`, wantDetail: "unknown token"},
		{name: "lacks the permission", need: write, auth: "Bearer foo", wantCode: CodeForbidden,
			wantDetail: `token "viewer" lacks the permission locks:billing-eu:write`},
		{name: "lacks it on every name", need: Need{Kind: "locks", Level: LevelWrite, Target: "*"}, auth: "Bearer test",
			wantCode: CodeForbidden, wantDetail: "locks:*:write"},
		{name: "a lease's route lets the handler decide", need: Need{Kind: "leases", Level: LevelWrite, Target: "x", Lease: true},
			auth: "Bearer foo", wantCaller: "viewer"},
		{name: "page by cookie", need: page, cookie: "foo", wantCaller: "viewer"},
		{name: "page without a token", need: page},
		{name: "cookie only on GET", need: write, method: http.MethodPost, cookie: "test", wantCode: CodeUnauthenticated},
		{name: "forwarded as the token named", need: write, fwd: &Forwarder{Gateway: "gw-a", Caller: "billing"}, wantCaller: "billing"},
		{name: "forwarded from tokens off", need: write, fwd: &Forwarder{Gateway: "gw-a"}, wantCode: CodeUnauthenticated,
			wantChallenge: `Bearer realm="zkgate"`, wantDetail: "must share --auth-file"},
		{name: "forwarded as a token not here", need: write, fwd: &Forwarder{Gateway: "gw-a", Caller: "ghost"}, wantCode: CodeUnauthenticated,
			wantChallenge: `Bearer realm="zkgate", error="invalid_token"`, wantDetail: `"ghost"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := c.method
			if method == "" {
				method = http.MethodGet
			}
			r := httptest.NewRequest(method, "/ui/locks?x=1", nil)
			if c.auth != "" {
				r.Header.Set("Authorization", c.auth)
			}
			if c.cookie != "" {
				r.AddCookie(&http.Cookie{Name: SessionCookie, Value: c.cookie})
			}
			w := httptest.NewRecorder()
			caller, err := Authorize(w, r, ts, c.need, c.fwd)
			if c.wantCaller != "" {
				if err != nil || caller == nil || caller.Name != c.wantCaller || caller.Route != c.need.Route || caller.Target != c.need.Target {
					t.Fatalf("caller %+v, %v: want %s", caller, err, c.wantCaller)
				}
				return
			}
			if c.wantCode == "" { // a page: sent to the sign-in
				if !errors.Is(err, ErrSignIn) || w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/signin?next=%2Fui%2Flocks%3Fx%3D1" {
					t.Fatalf("%v, %d to %q: want the sign-in", err, w.Code, w.Header().Get("Location"))
				}
				return
			}
			var e *recipes.Error
			if !errors.As(err, &e) || e.Code != c.wantCode || !strings.Contains(e.Detail, c.wantDetail) {
				t.Fatalf("refusal %v, want %s with %q", err, c.wantCode, c.wantDetail)
			}
			if got := w.Header().Get("WWW-Authenticate"); c.wantChallenge != "" && got != c.wantChallenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, c.wantChallenge)
			}
		})
	}
}

// TestUseOfLease: its owner uses a lease, an admin on what the route acts
// on too (to be audited), anyone else is refused with the lease named; a
// token granted the route's own permission reads it.
func TestUseOfLease(t *testing.T) {
	t.Parallel()
	l := &recipes.Lease{LeaseTerms: recipes.LeaseTerms{ID: "l1", Owner: "billing"}}
	admin := &Caller{Name: "root", Kind: "locks", Target: "a", Permits: func(string, string, Level) bool { return true }}
	reader := &Caller{Name: "viewer", Kind: "leases", Target: "l1", Granted: true, Permits: func(_, _ string, l Level) bool { return l == LevelRead }}
	for _, c := range []struct {
		name          string
		check         func(*Caller, *recipes.Lease) (bool, error)
		caller        *Caller
		byAdmin, fail bool
	}{
		{"tokens off", UseOfLease, nil, false, false},
		{"owner", UseOfLease, &Caller{Name: "billing"}, false, false},
		{"admin", UseOfLease, admin, true, false},
		{"another token", UseOfLease, reader, false, true},
		{"another token reads", ReadOfLease, reader, false, false},
		{"another token without read", ReadOfLease, &Caller{Name: "other"}, false, true},
	} {
		byAdmin, err := c.check(c.caller, l)
		if byAdmin != c.byAdmin || (err != nil) != c.fail {
			t.Errorf("%s: byAdmin %v, err %v", c.name, byAdmin, err)
		}
		var e *recipes.Error
		if err != nil && (!errors.As(err, &e) || e.Code != CodeForbidden || e.Extra["lease"] != "l1") {
			t.Errorf("%s: refusal %v, want forbidden naming the lease", c.name, err)
		}
	}
}
