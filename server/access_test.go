package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/zkgate/zkgate"
	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/internal/gwtest"
	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/recipes"
	"github.com/zkgate/zkgate/server"
)

// servedRoutes walks the router server.New builds, on a real session, and
// returns every "METHOD PATTERN" it serves.
func servedRoutes(t *testing.T) map[string]bool {
	t.Helper()
	return routesOf(servedRules(t))
}

// routesOf is the set of the routes of rules.
func routesOf(rules map[string]servedRule) map[string]bool {
	routes := make(map[string]bool, len(rules))
	for r := range rules {
		routes[r] = true
	}
	return routes
}

// servedRule is the rule of a served route; ok is false when it has none.
type servedRule struct {
	server.RouteRule
	ok bool
}

// servedRules walks the router server.New builds, on a real session, and
// returns every "METHOD PATTERN" it serves with the rule the front door
// checks it by.
func servedRules(t *testing.T) map[string]servedRule {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	sess, err := recipes.Connect(ctx, recipes.SessionConfig{Servers: []string{gwtest.ZK(t).Addr()},
		Timeout: 5 * time.Second, Root: gwtest.UniqueRoot(t), Logger: log})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(sess.Close)
	svc := recipes.New(sess, recipes.Config{GatewayID: "routes-test", Logger: log})
	t.Cleanup(svc.Close)
	h := server.New(server.Deps{Service: svc, API: apiOf(svc), Metrics: server.NewMetrics(0), Log: log, OpenAPI: zkgate.OpenAPI})
	mux, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("server.New returned a %T, not a chi router", h)
	}
	routes := map[string]servedRule{}
	if err := chi.Walk(mux, func(method, route string, h http.Handler, _ ...func(http.Handler) http.Handler) error {
		ru, ok := server.RuleOf(h)
		routes[method+" "+route] = servedRule{ru, ok}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(routes) == 0 {
		t.Fatal("chi.Walk found no routes")
	}
	return routes
}

// TestAccessRuleForEveryRoute: every route the router serves is an entry
// of the one table in routes.go, behind the front door, with its rule.
// (TestOpenAPIMatchesRoutes checks the same routes against openapi.yaml.)
func TestAccessRuleForEveryRoute(t *testing.T) {
	rules := servedRules(t)
	for _, r := range specSortedKeys(routesOf(rules)) {
		if !rules[r].ok {
			t.Errorf("route %s has no access rule: it must be an entry of the table in server/routes.go, with its rule", r)
		}
	}
}

// secured is a zkgate process with tokens.
type secured struct {
	*gwtest.Proc
	file   string
	secret map[string]string // token name -> secret
}

// The tokens of the secured gateways.
var securedTokens = []struct {
	name  string
	perms []string
}{
	{"writer", []string{"*:*:write"}},
	{"other", []string{"*:*:write"}},
	{"reader", []string{"*:*:read"}},
	{"admin", []string{"*:*:admin"}},
	{"billing", []string{"locks:billing-:write", "leases:*:write"}},
	{"locker", []string{"locks:*:write"}},
}

// newTokensFile makes a tokens file of securedTokens.
func newTokensFile(t *testing.T) (string, map[string]string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens")
	secrets := map[string]string{}
	for _, tok := range securedTokens {
		s, err := auth.AddToken(file, tok.name, tok.perms)
		if err != nil {
			t.Fatal(err)
		}
		secrets[tok.name] = s
	}
	return file, secrets
}

func startSecured(t *testing.T, opts gwtest.GatewayOptions, file string, secrets map[string]string) *secured {
	t.Helper()
	opts.Extra = append([]string{"--auth-file", file, "--log-level", "info"}, opts.Extra...)
	p := gwtest.StartProcess(t, opts)
	s := &secured{Proc: p, file: file, secret: secrets}
	t.Cleanup(func() {
		logs := p.Logs()
		for name, secret := range secrets {
			if strings.Contains(logs, secret) {
				t.Errorf("the secret of token %s is in the gateway's log", name)
			}
		}
	})
	return s
}

// TestAuditIgnoresTheLogLevel: the audit trail of admin acts on other
// tokens' leases is written whatever --log-level says (it was dropped below
// info).
func TestAuditIgnoresTheLogLevel(t *testing.T) {
	file, secrets := newTokensFile(t)
	g := startSecured(t, gwtest.GatewayOptions{Extra: []string{"--log-level", "error"}}, file, secrets)
	lease := g.newLeaseAs(t, "billing")
	mustStatus(t, g.as(t, "admin", "DELETE", "/v1/leases/"+lease, nil), 204, "admin revokes")
	gwtest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(g.Logs(), "audit=admin_lease_action") {
			return errorf("no audit record with --log-level error")
		}
		return nil
	})
}

// noRedirects shows a redirect instead of following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// as sends a request with token's secret ("" sends none; a string that is
// not a token name is sent as it is).
func (s *secured) as(t *testing.T, token, method, path string, body any) gwtest.Response {
	t.Helper()
	return doAs(t, s.URL, s.secretOf(token), method, path, body)
}

func (s *secured) secretOf(token string) string {
	if sec, ok := s.secret[token]; ok {
		return sec
	}
	return token
}

func doAs(t *testing.T, base, secret, method, path string, body any) gwtest.Response {
	t.Helper()
	r, err := sendAs(context.Background(), base, secret, method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// sendAs is doAs without a test, for goroutines: a string body is sent as
// raw bytes, anything else as JSON.
func sendAs(ctx context.Context, base, secret, method, path string, body any) (gwtest.Response, error) {
	var rd io.Reader
	ct := ""
	switch b := body.(type) {
	case nil:
	case string:
		rd, ct = strings.NewReader(b), "application/octet-stream"
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return gwtest.Response{}, err
		}
		rd, ct = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return gwtest.Response{}, err
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		return gwtest.Response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return gwtest.Response{Status: resp.StatusCode, Header: resp.Header, Body: data}, err
}

var errorf = fmt.Errorf

const hangup = syscall.SIGHUP

// newLeaseAs makes a lease for token.
func (s *secured) newLeaseAs(t *testing.T, token string) string {
	t.Helper()
	r := s.as(t, token, "POST", "/v1/leases", map[string]any{"ttl": "1m", "holder": token})
	mustStatus(t, r, 201, "lease for "+token)
	return r.JSON(t)["id"].(string)
}

func wantProblem(t *testing.T, r gwtest.Response, status int, code, what string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Errorf("%s: status %d, want %d: %s", what, r.Status, status, r.Body)
		return nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want a problem", what, ct)
		return nil
	}
	var p map[string]any
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Errorf("%s: %v", what, err)
		return nil
	}
	if p["code"] != code {
		t.Errorf("%s: code %v, want %s: %s", what, p["code"], code, r.Body)
	}
	return p
}

// accessCase is a request that exercises one route: lease is the id of a
// lease of the "writer" token made for it, item an item id of queue q1.
type accessCase struct {
	path func(lease string) string
	body func(lease string) any
	// usesLease: the request acts with the lease, so another token using it
	// must be refused.
	usesLease bool
}

func fixed(p string) func(string) string { return func(string) string { return p } }

func withLease(extra map[string]any) func(string) any {
	return func(lease string) any {
		b := map[string]any{"lease": lease}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
}

// accessCases has a request for every route; a route without one fails
// TestAccessEveryRoute, so that no route is left untested.
var accessCases = map[string]accessCase{
	"POST /peer/v1/handover": {path: fixed("/peer/v1/handover"), body: func(string) any {
		return map[string]any{"session": map[string]any{"id": 1, "password": "c2VjcmV0"}, "from": "gw-x", "leases": []any{}}
	}},
	"GET /peer/v1/contention":               {path: fixed("/peer/v1/contention")},
	"GET /peer/v1/contention/{kind}/{name}": {path: fixed("/peer/v1/contention/lock/a1")},
	"POST /peer/v1/waits":                   {path: fixed("/peer/v1/waits"), body: func(string) any { return map[string]any{"leases": []any{}} }},
	"GET /healthz":                          {path: fixed("/healthz")},
	"GET /readyz":                           {path: fixed("/readyz")},
	"GET /openapi.yaml":                     {path: fixed("/openapi.yaml")},
	"GET /metrics":                          {path: fixed("/metrics")},
	"GET /":                                 {path: fixed("/")},
	"GET /ui/{page}":                        {path: fixed("/ui/locks")},
	"GET /ui/static/{file}":                 {path: fixed("/ui/static/dashboard.css")},
	"GET /ws":                               {path: fixed("/ws?page=overview")},
	"GET /signin":                           {path: fixed("/signin")},
	"POST /signin":                          {path: fixed("/signin")},
	"POST /signout":                         {path: fixed("/signout")},

	"POST /v1/leases":                {path: fixed("/v1/leases"), body: func(string) any { return map[string]any{"ttl": "10s"} }},
	"GET /v1/leases":                 {path: fixed("/v1/leases")},
	"GET /v1/leases/{id}":            {path: func(l string) string { return "/v1/leases/" + l }, usesLease: true},
	"DELETE /v1/leases/{id}":         {path: func(l string) string { return "/v1/leases/" + l }, usesLease: true},
	"POST /v1/leases/{id}/keepalive": {path: func(l string) string { return "/v1/leases/" + l + "/keepalive" }, usesLease: true},

	"GET /v1/locks":                 {path: fixed("/v1/locks?prefix=a")},
	"GET /v1/locks/{name}":          {path: fixed("/v1/locks/a1")},
	"POST /v1/locks/{name}/acquire": {path: fixed("/v1/locks/a1/acquire"), body: withLease(nil), usesLease: true},
	"POST /v1/locks/{name}/release": {path: fixed("/v1/locks/a1/release"), body: withLease(nil), usesLease: true},
	"GET /v1/locks/{name}/fence":    {path: fixed("/v1/locks/a1/fence?token=1")},
	"GET /v1/locks/{name}/stats":    {path: fixed("/v1/locks/a1/stats")},
	"GET /v1/contention":            {path: fixed("/v1/contention")},

	"GET /v1/semaphores":                 {path: fixed("/v1/semaphores")},
	"GET /v1/semaphores/{name}":          {path: fixed("/v1/semaphores/s1")},
	"POST /v1/semaphores/{name}/acquire": {path: fixed("/v1/semaphores/s1/acquire"), body: withLease(map[string]any{"limit": 2}), usesLease: true},
	"POST /v1/semaphores/{name}/release": {path: fixed("/v1/semaphores/s1/release"), body: withLease(nil), usesLease: true},
	"GET /v1/semaphores/{name}/stats":    {path: fixed("/v1/semaphores/s1/stats")},

	"GET /v1/elections":                  {path: fixed("/v1/elections")},
	"GET /v1/elections/{name}":           {path: fixed("/v1/elections/e1")},
	"POST /v1/elections/{name}/campaign": {path: fixed("/v1/elections/e1/campaign"), body: withLease(map[string]any{"value": "v"}), usesLease: true},
	"POST /v1/elections/{name}/resign":   {path: fixed("/v1/elections/e1/resign"), body: withLease(nil), usesLease: true},
	"PUT /v1/elections/{name}/value":     {path: fixed("/v1/elections/e1/value"), body: withLease(map[string]any{"value": "w"}), usesLease: true},

	"GET /v1/barriers":              {path: fixed("/v1/barriers")},
	"GET /v1/barriers/{name}":       {path: fixed("/v1/barriers/b1")},
	"PUT /v1/barriers/{name}":       {path: fixed("/v1/barriers/b1")},
	"DELETE /v1/barriers/{name}":    {path: fixed("/v1/barriers/b1")},
	"POST /v1/barriers/{name}/wait": {path: fixed("/v1/barriers/b1/wait")},

	"GET /v1/double-barriers":               {path: fixed("/v1/double-barriers")},
	"GET /v1/double-barriers/{name}":        {path: fixed("/v1/double-barriers/d1")},
	"POST /v1/double-barriers/{name}/enter": {path: fixed("/v1/double-barriers/d1/enter"), body: withLease(map[string]any{"member": "m", "count": 2}), usesLease: true},
	"POST /v1/double-barriers/{name}/leave": {path: fixed("/v1/double-barriers/d1/leave"), body: withLease(map[string]any{"member": "m"}), usesLease: true},

	"GET /v1/queues":                         {path: fixed("/v1/queues")},
	"GET /v1/queues/{name}":                  {path: fixed("/v1/queues/q1")},
	"DELETE /v1/queues/{name}":               {path: fixed("/v1/queues/q9")},
	"POST /v1/queues/{name}/items":           {path: fixed("/v1/queues/q1/items"), body: func(string) any { return "payload" }},
	"GET /v1/queues/{name}/items/{id}":       {path: fixed("/v1/queues/q1/items/entry-100-0000000000")},
	"POST /v1/queues/{name}/items/{id}/ack":  {path: fixed("/v1/queues/q1/items/entry-100-0000000000/ack"), body: withLease(nil), usesLease: true},
	"POST /v1/queues/{name}/items/{id}/nack": {path: fixed("/v1/queues/q1/items/entry-100-0000000000/nack"), body: withLease(nil), usesLease: true},
	"POST /v1/queues/{name}/take":            {path: fixed("/v1/queues/q1/take")},
	"POST /v1/queues/{name}/claim":           {path: fixed("/v1/queues/q1/claim"), body: withLease(nil), usesLease: true},
}

// TestAccessEveryRoute sends every route of the router, on a real zkgate
// process with tokens, without a token (401 with WWW-Authenticate; the
// dashboard's pages send the browser to the sign-in), with an unknown one
// (401 invalid_token), with a read-only one (403 on every route that writes)
// and with another token's lease (403 on every route that acts with a
// lease); then with the right token, which gets through. Open routes stay
// open. Nothing answers 500.
func TestAccessEveryRoute(t *testing.T) {
	rules := servedRules(t)
	routes := routesOf(rules)
	file, secrets := newTokensFile(t)
	g := startSecured(t, gwtest.GatewayOptions{}, file, secrets)

	for _, route := range specSortedKeys(routes) {
		c, ok := accessCases[route]
		if !ok {
			t.Errorf("route %s has no case in accessCases: add one", route)
			continue
		}
		ru := rules[route]
		method, _, _ := strings.Cut(route, " ")
		if ru.Peer {
			// Between gateways only: every client is refused, whatever its
			// token (a gateway's own call is tested with the handover).
			var body any
			if c.body != nil {
				body = c.body("")
			}
			for _, who := range []string{"", "zkg_not-a-known-token", "reader", "writer"} {
				wantProblem(t, g.as(t, who, method, c.path(""), body), 403, "forbidden", route+" as "+who)
			}
			continue
		}
		t.Run(strings.NewReplacer("/", "_", " ", "_", "{", "", "}", "").Replace(route), func(t *testing.T) {
			lease := g.newLeaseAs(t, "writer")
			call := routeCall{g: g, rule: ru.RouteRule, method: method, path: c.path(lease), lease: lease}
			if c.body != nil {
				call.body = c.body(lease)
			}
			call.withoutValidToken(t)
			if ru.Open {
				return
			}
			call.readOnly(t)
			if c.usesLease {
				call.anotherTokensLease(t)
			}
			call.rightToken(t)
		})
	}
	for route := range accessCases {
		if !routes[route] {
			t.Errorf("accessCases has %s, which the server does not route", route)
		}
	}
}

// routeCall is one request of TestAccessEveryRoute, sent as one token
// after another.
type routeCall struct {
	g            *secured
	rule         server.RouteRule
	method, path string
	body         any
	lease        string // the writer's, which the request acts with
}

// noServerError fails on a 5xx.
func (c routeCall) noServerError(t *testing.T, r gwtest.Response, who string) {
	t.Helper()
	if r.Status >= 500 {
		t.Errorf("%s %s as %s: %d: %s", c.method, c.path, who, r.Status, r.Body)
	}
}

// withoutValidToken: no token, an unknown one and a Basic header are
// 401 with the challenge, or the sign-in for a page; an open route asks
// for no credentials.
func (c routeCall) withoutValidToken(t *testing.T) {
	for _, who := range []string{"", "zkg_not-a-known-token", "Basic"} {
		var r gwtest.Response
		if who == "Basic" {
			r = rawAuth(t, c.g.URL, c.method, c.path, "Basic d3JpdGVyOnNlY3JldA==", c.body)
		} else {
			r = c.g.as(t, who, c.method, c.path, c.body)
		}
		c.noServerError(t, r, "anonymous")
		switch {
		case c.rule.Open:
			// The sign-in's own answer to a bad token is its page
			// (401, as HTML); no open route asks for credentials.
			if strings.Contains(string(r.Body), `"code":"unauthenticated"`) || strings.Contains(string(r.Body), `"code":"forbidden"`) {
				t.Errorf("open route answered %d with credentials %q: %s", r.Status, who, r.Body)
			}
		case c.rule.Page:
			if r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/signin?next=") {
				t.Errorf("a page without a valid token (%q): %d to %q, want 303 to the sign-in", who, r.Status, r.Header.Get("Location"))
			}
		default:
			wantProblem(t, r, 401, "unauthenticated", "with credentials "+who)
			challenge := r.Header.Get("WWW-Authenticate")
			want := `Bearer realm="zkgate"`
			if who != "" {
				want += `, error="invalid_token"`
			}
			if challenge != want {
				t.Errorf("WWW-Authenticate %q, want %q", challenge, want)
			}
		}
	}
}

// readOnly: a read-only token reads, and is refused everything that
// writes.
func (c routeCall) readOnly(t *testing.T) {
	r := c.g.as(t, "reader", c.method, c.path, c.body)
	c.noServerError(t, r, "reader")
	switch {
	case c.rule.Level == "read":
		if r.Status == 401 || r.Status == 403 {
			t.Errorf("a read route refused the read-only token: %d %s", r.Status, r.Body)
		}
	default:
		p := wantProblem(t, r, 403, "forbidden", "the read-only token on a write route")
		if p != nil && !c.rule.Lease && !strings.Contains(p["detail"].(string), ":write") {
			t.Errorf("the 403 should name the permission it lacks: %v", p["detail"])
		}
	}
}

// anotherTokensLease: another token's lease is refused, whatever that
// token may do.
func (c routeCall) anotherTokensLease(t *testing.T) {
	r := c.g.as(t, "other", c.method, c.path, c.body)
	if c.method == "GET" {
		// Read on leases lets a token read any lease ("other" has
		// it through *:*:write): use one without it.
		r = c.g.as(t, "locker", c.method, c.path, c.body)
	}
	p := wantProblem(t, r, 403, "forbidden", "another token's lease")
	if p != nil && p["lease"] != c.lease {
		t.Errorf("the 403 should name the lease: %v", p)
	}
}

// rightToken: the lease's own token gets through.
func (c routeCall) rightToken(t *testing.T) {
	r := c.g.as(t, "writer", c.method, c.path, c.body)
	c.noServerError(t, r, "writer")
	if r.Status == 401 || r.Status == 403 {
		t.Errorf("the lease's own token was refused: %d %s", r.Status, r.Body)
	}
}

func rawAuth(t *testing.T, base, method, path, authorization string, body any) gwtest.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", authorization)
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return gwtest.Response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// TestLeaseOwnership: a lease is its maker's. Another token, even one that
// may write everything, can neither keep it alive, revoke it, nor acquire or
// release with it; a token limited to billing- locks makes and uses its own;
// an admin may act on any lease, and each such act is in the audit log with
// the admin's name, never its secret. Listings show a token its own leases.
func TestLeaseOwnership(t *testing.T) {
	file, secrets := newTokensFile(t)
	g := startSecured(t, gwtest.GatewayOptions{}, file, secrets)
	conn := gwtest.Client(t, []string{gwtest.ZK(t).Addr()}, 5*time.Second)

	mine := g.newLeaseAs(t, "billing")
	ownerIsRecorded(t, g, conn, mine)
	othersCannotUse(t, g, mine)

	// A lease made on the fly by an acquire is its caller's.
	r := g.as(t, "other", "POST", "/v1/locks/o1/acquire", map[string]any{"ttl": "30s", "holder": "cron"})
	mustStatus(t, r, 200, "acquire with a lease made for it")
	implicit := r.JSON(t)["lease"].(string)
	wantProblem(t, g.as(t, "writer", "DELETE", "/v1/leases/"+implicit, nil), 403, "forbidden", "revoke the implicit lease of another")

	lockers := listingsShowOwnLeases(t, g)

	// The admin may: audited.
	mustStatus(t, g.as(t, "admin", "POST", "/v1/locks/billing-invoices/release", map[string]any{"lease": mine}), 204, "admin releases")
	mustStatus(t, g.as(t, "admin", "DELETE", "/v1/leases/"+mine, nil), 204, "admin revokes")
	mustStatus(t, g.as(t, "other", "DELETE", "/v1/leases/"+implicit, nil), 204, "owner revokes")
	mustStatus(t, g.as(t, "locker", "DELETE", "/v1/leases/"+lockers, nil), 204, "an owner without permissions on leases revokes its own")
	adminActsAudited(t, g, mine)
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// ownerIsRecorded: the lease's owner is its maker, in its answer and in
// its record in ZooKeeper (for the other gateways).
func ownerIsRecorded(t *testing.T, g *secured, conn *zk.Conn, lease string) {
	info := g.as(t, "billing", "GET", "/v1/leases/"+lease, nil)
	mustStatus(t, info, 200, "own lease")
	if info.JSON(t)["owner"] != "billing" {
		t.Errorf("the lease's owner: %s", info.Body)
	}
	raw, _, err := conn.Get(g.Root + "/leases/" + lease)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil || rec["owner"] != "billing" {
		t.Errorf("lease record %s: want owner billing", raw)
	}
}

// othersCannotUse: billing uses its lease within its prefix only, and
// another token, even one that may write everything, can neither keep it
// alive, revoke it, nor acquire or release with it.
func othersCannotUse(t *testing.T, g *secured, mine string) {
	mustStatus(t, g.as(t, "billing", "POST", "/v1/locks/billing-invoices/acquire", map[string]any{"lease": mine}), 200, "acquire own")
	wantProblem(t, g.as(t, "billing", "POST", "/v1/locks/orders/acquire", map[string]any{"lease": mine}), 403, "forbidden", "a lock outside its prefix")
	for _, r := range []struct{ method, path string }{
		{"POST", "/v1/leases/" + mine + "/keepalive"},
		{"DELETE", "/v1/leases/" + mine},
	} {
		wantProblem(t, g.as(t, "other", r.method, r.path, nil), 403, "forbidden", "other on "+r.path)
	}
	wantProblem(t, g.as(t, "other", "POST", "/v1/locks/billing-invoices/release", map[string]any{"lease": mine}), 403, "forbidden", "release with another's lease")
	wantProblem(t, g.as(t, "other", "POST", "/v1/locks/billing-x/acquire", map[string]any{"lease": mine}), 403, "forbidden", "acquire with another's lease")

	// The lock is still held by its owner after all that.
	st := g.as(t, "reader", "GET", "/v1/locks/billing-invoices", nil)
	mustStatus(t, st, 200, "lock state")
	if !strings.Contains(string(st.Body), mine) {
		t.Fatalf("the lock lost its holder: %s", st.Body)
	}
}

// listingsShowOwnLeases: each token lists its own leases; read on leases
// shows all. It returns the lease it makes for locker.
func listingsShowOwnLeases(t *testing.T, g *secured) (lockers string) {
	ids := func(who string) []string {
		var out []string
		for _, l := range g.as(t, who, "GET", "/v1/leases", nil).JSON(t)["leases"].([]any) {
			out = append(out, l.(map[string]any)["id"].(string))
		}
		sort.Strings(out)
		return out
	}
	r := g.as(t, "locker", "POST", "/v1/locks/l1/acquire", map[string]any{"ttl": "30s"})
	mustStatus(t, r, 200, "locker acquires with a lease made for it")
	lockers = r.JSON(t)["lease"].(string)
	if got := ids("locker"); len(got) != 1 || got[0] != lockers {
		t.Errorf("locker (no permission on leases) lists %v, want only its own %s", got, lockers)
	}
	if got := ids("reader"); len(got) != 3 {
		t.Errorf("reader (read on every lease) lists %v, want all 3 leases", got)
	}
	return lockers
}

// adminActsAudited: the admin's two acts on billing's lease are in the
// audit log with its name; an owner's own act is no admin act.
func adminActsAudited(t *testing.T, g *secured, lease string) {
	gwtest.Eventually(t, 10*time.Second, func() error {
		n := 0
		for _, line := range strings.Split(g.Logs(), "\n") {
			if strings.Contains(line, "audit=admin_lease_action") && strings.Contains(line, "actor=admin") &&
				strings.Contains(line, "owner=billing") && strings.Contains(line, "lease="+lease) {
				n++
			}
		}
		if n != 2 {
			return errorf("%d audit records of the admin's acts on %s, want 2", n, lease)
		}
		return nil
	})
	if strings.Contains(g.Logs(), "actor=other") {
		t.Errorf("an owner's own act is not an admin act: %s", g.Logs())
	}
}

// TestOwnershipAcrossGateways: a request for a lease of another gateway is
// forwarded with its token, and the lease's gateway checks the owner: the
// answer is the same whichever gateway the request reaches.
func TestOwnershipAcrossGateways(t *testing.T) {
	file, secrets := newTokensFile(t)
	a := startSecured(t, gwtest.GatewayOptions{}, file, secrets)
	b := startSecured(t, gwtest.GatewayOptions{Root: a.Root}, file, secrets)

	lease := a.newLeaseAs(t, "writer")
	r := b.as(t, "other", "POST", "/v1/locks/x/acquire", map[string]any{"lease": lease})
	wantProblem(t, r, 403, "forbidden", "another token's lease through the other gateway")
	if r.Header.Get("X-Zkgate-Served-By") == "" {
		t.Errorf("the refusal should come from the lease's gateway (forwarded): %v", r.Header)
	}
	wantProblem(t, b.as(t, "other", "POST", "/v1/leases/"+lease+"/keepalive", nil), 403, "forbidden", "keepalive through b")
	wantProblem(t, b.as(t, "other", "DELETE", "/v1/leases/"+lease, nil), 403, "forbidden", "revoke through b")
	wantProblem(t, b.as(t, "", "POST", "/v1/locks/x/acquire", map[string]any{"lease": lease}), 401, "unauthenticated", "no token through b")

	r = b.as(t, "writer", "POST", "/v1/locks/x/acquire", map[string]any{"lease": lease})
	mustStatus(t, r, 200, "the owner through b")
	if r.Header.Get("X-Zkgate-Served-By") == "" {
		t.Errorf("the acquire should have been forwarded to a")
	}
	mustStatus(t, b.as(t, "admin", "DELETE", "/v1/leases/"+lease, nil), 204, "an admin through b")
	gwtest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(a.Logs(), "actor=admin") {
			return errorf("no audit record on the lease's gateway")
		}
		return nil
	})
}

// TestTokensReloadOnHangup: SIGHUP loads a changed tokens file without
// touching leases or waits; a broken file is refused, logged, and the
// tokens in force stay.
func TestTokensReloadOnHangup(t *testing.T) {
	file, secrets := newTokensFile(t)
	g := startSecured(t, gwtest.GatewayOptions{}, file, secrets)

	holder := g.newLeaseAs(t, "writer")
	mustStatus(t, g.as(t, "writer", "POST", "/v1/locks/r1/acquire", map[string]any{"lease": holder}), 200, "hold")
	waiter := g.newLeaseAs(t, "other")
	waited := make(chan gwtest.Response, 1)
	go func() {
		r, err := sendAs(context.Background(), g.URL, secrets["other"], "POST", "/v1/locks/r1/acquire?wait=1m", map[string]any{"lease": waiter})
		if err != nil {
			r = gwtest.Response{Status: 599, Body: []byte(err.Error())}
		}
		waited <- r
	}()
	gwtest.Eventually(t, 10*time.Second, func() error {
		st := g.as(t, "reader", "GET", "/v1/locks/r1", nil).JSON(t)
		if w, _ := st["waiters"].([]any); len(w) != 1 {
			return errorf("waiters %v", st["waiters"])
		}
		return nil
	})

	added, err := auth.AddToken(file, "late", []string{"locks:*:read"})
	if err != nil {
		t.Fatal(err)
	}
	wantProblem(t, g.as(t, added, "GET", "/v1/locks/r1", nil), 401, "unauthenticated", "a token added but not loaded")
	if err := g.Send(hangup); err != nil {
		t.Fatal(err)
	}
	gwtest.Eventually(t, 10*time.Second, func() error {
		if r := g.as(t, added, "GET", "/v1/locks/r1", nil); r.Status != 200 {
			return errorf("the new token after SIGHUP: %d", r.Status)
		}
		return nil
	})

	// A broken file: refused, logged, the tokens in force stay.
	good, _ := os.ReadFile(file)
	if err := os.WriteFile(file, append(good, []byte("broken sha256:00 bogus:*:read\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.Send(hangup); err != nil {
		t.Fatal(err)
	}
	gwtest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(g.Logs(), "tokens file not reloaded") {
			return errorf("no log line about the refused file")
		}
		return nil
	})
	mustStatus(t, g.as(t, added, "GET", "/v1/locks/r1", nil), 200, "the tokens in force after a refused reload")

	// The lease and the wait went on through both reloads.
	mustStatus(t, g.as(t, "writer", "POST", "/v1/leases/"+holder+"/keepalive", nil), 200, "keepalive after the reloads")
	mustStatus(t, g.as(t, "writer", "POST", "/v1/locks/r1/release", map[string]any{"lease": holder}), 204, "release")
	select {
	case r := <-waited:
		mustStatus(t, r, 200, "the waiter, granted after the reloads")
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter was not granted")
	}
}
