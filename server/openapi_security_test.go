package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestOpenAPISecurity drives a gateway with tokens and tight limits through
// the answers that only tokens and limits give (401, 403, 429, the sign-in's
// redirects and pages) and validates each against openapi.yaml.
func TestOpenAPISecurity(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	g := startSecured(t, gwtest.GatewayOptions{Extra: []string{"--max-leases-per-token", "2", "--max-waiters-per-name", "1"}}, file, secrets)
	served := gwtest.Do(t, "GET", g.URL+"/openapi.yaml", nil)
	mustStatus(t, served, 200, "openapi.yaml without a token")
	s := newSpecChecker(t, g.URL, specLoad(t, served.Body))
	writer, reader, billing := secrets["writer"], secrets["reader"], secrets["billing"]

	// Open operations stay open.
	s.do(t, 200, specReq("GET", "/healthz", nil))
	s.do(t, 200, specReq("GET", "/readyz", nil))
	s.do(t, 200, specReq("GET", "/ui/static/dashboard.css", nil))

	// Operations.
	r := s.do(t, 401, specReq("GET", "/metrics", nil))
	if r.Header.Get("WWW-Authenticate") != `Bearer realm="zkgate"` {
		t.Errorf("401 without WWW-Authenticate: %v", r.Header)
	}
	s.do(t, 401, specReq("GET", "/metrics", nil, specToken("zkg_unknown")))
	s.do(t, 403, specReq("GET", "/metrics", nil, specToken(billing)))
	s.do(t, 200, specReq("GET", "/metrics", nil, specToken(reader)))

	s.dashboardSignIn(t, reader, billing)
	s.dashboardActions(t, g, secrets)

	// The API: 401, 403 and 429 of leases, locks and waits.
	s.do(t, 401, specReq("POST", "/v1/leases", map[string]any{"ttl": "1m"}))
	specWantCode(t, s.do(t, 403, specReq("POST", "/v1/leases", map[string]any{"ttl": "1m"}, specToken(writer),
		specHeader("Sec-Fetch-Site", "cross-site"))), "forbidden")
	s.do(t, 403, specReq("POST", "/v1/leases", map[string]any{"ttl": "1m"}, specToken(reader)))
	lease := specJSON(t, s.do(t, 201, specReq("POST", "/v1/leases", map[string]any{"ttl": "1m"}, specToken(writer))))["id"].(string)
	s.do(t, 201, specReq("POST", "/v1/leases", map[string]any{"ttl": "1m"}, specToken(writer)))
	s.do(t, 429, specReq("POST", "/v1/leases", map[string]any{"ttl": "1m"}, specToken(writer)))
	s.do(t, 429, specReq("POST", "/v1/locks/spec/acquire", map[string]any{"ttl": "1m"}, specToken(writer)))
	s.do(t, 200, specReq("GET", "/v1/leases/"+lease, nil, specToken(writer)))
	s.do(t, 403, specReq("GET", "/v1/leases/"+lease, nil, specToken(secrets["locker"])))
	s.do(t, 403, specReq("POST", "/v1/leases/"+lease+"/keepalive", nil, specToken(secrets["other"])))
	s.do(t, 403, specReq("DELETE", "/v1/leases/"+lease, nil, specToken(reader)))
	s.do(t, 401, specReq("POST", "/v1/locks/spec/acquire", map[string]any{"lease": lease}))
	s.do(t, 403, specReq("POST", "/v1/locks/spec/acquire", map[string]any{"lease": lease}, specToken(secrets["other"])))
	s.do(t, 403, specReq("POST", "/v1/locks/orders/acquire", map[string]any{"ttl": "1m"}, specToken(billing)))
	s.do(t, 200, specReq("POST", "/v1/locks/spec/acquire", map[string]any{"lease": lease}, specToken(writer)))
	s.do(t, 403, specReq("GET", "/v1/locks", nil, specToken(billing)))                 // every lock
	s.do(t, 200, specReq("GET", "/v1/locks?prefix=billing-", nil, specToken(billing))) // its own
	s.do(t, 200, specReq("GET", "/v1/leases", nil, specToken(secrets["locker"])))

	// One blocking read of spec is let in; the next waits over the cap.
	st := s.do(t, 200, specReq("GET", "/v1/locks/spec", nil, specToken(reader)))
	idx := st.Header.Get("X-Zkgate-Index")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = sendAs(ctx, g.URL, reader, "GET", "/v1/locks/spec?index="+idx+"&wait=1m", nil)
	}()
	gwtest.Eventually(t, 10*time.Second, func() error {
		if v := g.metric(t, "zkgate_waiting_requests"); v != 1 {
			return errorf("%v waiting", v)
		}
		return nil
	})
	tm := s.do(t, 429, specReq("GET", "/v1/locks/spec?index="+idx+"&wait=1m", nil, specToken(reader)))
	if tm.Header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
	s.do(t, 429, specReq("POST", "/v1/locks/spec/acquire?wait=10s", map[string]any{"lease": lease}, specToken(writer)))
	cancel()
	<-done
	mustStatus(t, doAs(t, g.URL, writer, http.MethodDelete, "/v1/leases/"+lease, nil), 204, "revoke")
}

// dashboardSignIn: the dashboard and its sign-in, with the tokens reader
// (which may read it) and billing (which may not).
func (s *specChecker) dashboardSignIn(t *testing.T, reader, billing string) {
	t.Helper()
	s.do(t, 303, specReq("GET", "/", nil))
	s.do(t, 303, specReq("GET", "/ui/locks", nil, specToken("zkg_unknown")))
	s.do(t, 403, specReq("GET", "/ui/locks", nil, specToken(billing)))
	s.do(t, 200, specReq("GET", "/ui/locks", nil, specToken(reader)))
	s.do(t, 401, specReq("GET", "/ws?page=overview", nil))
	s.do(t, 403, specReq("GET", "/ws?page=overview", nil, specToken(billing)))
	s.do(t, 200, specReq("GET", "/signin?next=/ui/leases", nil))
	s.do(t, 401, specReq("POST", "/signin", nil, specForm(url.Values{"token": {"zkg_unknown"}})))
	s.do(t, 403, specReq("POST", "/signin", nil, specForm(url.Values{"token": {billing}})))
	specWantCode(t, s.do(t, 403, specReq("POST", "/signin", nil, specForm(url.Values{"token": {reader}}),
		specHeader("Sec-Fetch-Site", "cross-site"))), "forbidden")
	in := s.do(t, 303, specReq("POST", "/signin", nil, specForm(url.Values{"token": {reader}, "next": {"//evil.example/x"}}),
		specHeader("Sec-Fetch-Site", "same-origin")))
	if loc := in.Header.Get("Location"); loc != "/" {
		t.Errorf("a sign-in with next=//evil.example goes to %q, want /", loc)
	}
	if c := in.Header.Get("Set-Cookie"); !strings.Contains(c, "zkgate_token=") || !strings.Contains(c, "HttpOnly") || !strings.Contains(c, "SameSite=Strict") {
		t.Errorf("sign-in cookie %q", c)
	}
	out := s.do(t, 303, specReq("POST", "/signout", nil))
	if c := out.Header.Get("Set-Cookie"); !strings.Contains(c, "Max-Age=0") {
		t.Errorf("sign-out cookie %q, want it expired", c)
	}
	specWantCode(t, s.do(t, 403, specReq("POST", "/signout", nil, specHeader("Sec-Fetch-Site", "cross-site"))), "forbidden")
}

// cookiesOf is the Cookie header of the cookies a sign-in set.
func cookiesOf(r gwtest.Response) string {
	var out []string
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		out = append(out, c.Name+"="+c.Value)
	}
	return strings.Join(out, "; ")
}

// dashboardActions: an admin's confirmation pages and forms (a release, a
// revoke), and their refusals.
func (s *specChecker) dashboardActions(t *testing.T, g *secured, secrets map[string]string) {
	t.Helper()
	signIn := func(token string) string {
		t.Helper()
		return cookiesOf(s.do(t, 303, specReq("POST", "/signin", nil, specForm(url.Values{"token": {secrets[token]}, "next": {"/ui/leases"}}))))
	}
	admin, reader := signIn("admin"), signIn("reader")
	lease := g.newLeaseAs(t, "writer")
	mustStatus(t, g.as(t, "writer", "POST", "/v1/locks/spec-dash/acquire", map[string]any{"lease": lease}), 200, "acquire")
	revoke, release := "/ui/leases/"+lease+"/revoke", "/ui/leases/"+lease+"/release"
	as := func(cookie string) specOption { return specHeader("Cookie", cookie) }

	s.do(t, 303, specReq("GET", revoke, nil))
	specWantCode(t, s.do(t, 403, specReq("GET", revoke, nil, as(reader))), "forbidden")
	s.do(t, 404, specReq("GET", "/ui/leases/00000000-0000-4000-8000-000000000000/revoke", nil, as(admin)))
	s.do(t, 404, specReq("GET", release+"?kind=lock&name=nope", nil, as(admin)))
	page := string(s.do(t, 200, specReq("GET", release+"?kind=lock&name=spec-dash", nil, as(admin))).Body)
	_, rest, _ := strings.Cut(page, `name="form_token" value="`)
	token, _, _ := strings.Cut(rest, `"`)
	if token == "" {
		t.Fatalf("the confirmation has no form token:\n%s", page)
	}
	s.do(t, 200, specReq("GET", revoke, nil, as(admin)))

	s.do(t, 401, specReq("POST", revoke, nil, specForm(url.Values{"form_token": {token}})))
	specWantCode(t, s.do(t, 403, specReq("POST", revoke, nil, specForm(url.Values{"form_token": {token}}), as(reader))), "forbidden")
	specWantCode(t, s.do(t, 403, specReq("POST", revoke, nil, specForm(url.Values{}), as(admin), specRejects())), "forbidden")
	specWantCode(t, s.do(t, 403, specReq("POST", revoke, nil, specForm(url.Values{"form_token": {token}}), as(admin),
		specHeader("Sec-Fetch-Site", "cross-site"))), "forbidden")
	specWantCode(t, s.do(t, 400, specReq("POST", release, nil, specForm(url.Values{"form_token": {token}, "kind": {"double-barrier"}, "name": {"x"}}),
		as(admin), specRejects())), "invalid_request")
	s.do(t, 303, specReq("POST", release, nil, specForm(url.Values{"form_token": {token}, "kind": {"lock"}, "name": {"spec-dash"}}), as(admin)))
	s.do(t, 409, specReq("POST", release, nil, specForm(url.Values{"form_token": {token}, "kind": {"lock"}, "name": {"spec-dash"}}), as(admin)))
	s.do(t, 303, specReq("POST", revoke, nil, specForm(url.Values{"form_token": {token}}), as(admin)))
	s.do(t, 410, specReq("POST", revoke, nil, specForm(url.Values{"form_token": {token}}), as(admin)))
}
