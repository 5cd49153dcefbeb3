package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/zkgate/zkgate"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
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
	t.Parallel()
	rules := servedRules(t)
	for _, r := range specSortedKeys(routesOf(rules)) {
		if !rules[r].ok {
			t.Errorf("route %s has no access rule: it must be an entry of the table in server/routes.go, with its rule", r)
		}
	}
}

// secured is a zkgate process with tokens (see gwtest.Secured), with
// the short names the server's tests call it by.
type secured struct{ *gwtest.Secured }

func newTokensFile(t *testing.T) (string, map[string]string) {
	t.Helper()
	return gwtest.NewTokensFile(t)
}

func startSecured(t *testing.T, opts gwtest.GatewayOptions, file string, secrets map[string]string) *secured {
	t.Helper()
	return &secured{gwtest.StartSecured(t, opts, file, secrets)}
}

func (s *secured) as(t *testing.T, token, method, path string, body any) gwtest.Response {
	t.Helper()
	return s.As(t, token, method, path, body)
}

func (s *secured) newLeaseAs(t *testing.T, token string) string {
	t.Helper()
	return s.NewLeaseAs(t, token)
}

var noRedirects = gwtest.NoRedirects

func doAs(t *testing.T, base, secret, method, path string, body any) gwtest.Response {
	t.Helper()
	return gwtest.DoAs(t, base, secret, method, path, body)
}

func sendAs(ctx context.Context, base, secret, method, path string, body any) (gwtest.Response, error) {
	return gwtest.SendAs(ctx, base, secret, method, path, body)
}

func wantProblem(t *testing.T, r gwtest.Response, status int, code, what string) map[string]any {
	t.Helper()
	return gwtest.WantProblem(t, r, status, code, what)
}

var errorf = fmt.Errorf

// TestAuditIgnoresTheLogLevel: the audit trail of admin acts on other
// tokens' leases is written whatever --log-level says, even above
// info.
func TestAuditIgnoresTheLogLevel(t *testing.T) {
	t.Parallel()
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

// A set of locks needs write on each of its locks: a token that may
// write billing- locks alone is refused a set with another lock in it,
// naming that lock, and holds none of the set after; its own set it gets.
func TestALockSetNeedsEachLocksPermission(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	g := startSecured(t, gwtest.GatewayOptions{}, file, secrets)
	lease := g.newLeaseAs(t, "billing")
	set := func(names ...string) map[string]any {
		var locks []map[string]string
		for _, n := range names {
			locks = append(locks, map[string]string{"name": n})
		}
		return map[string]any{"lease": lease, "locks": locks}
	}
	r := g.as(t, "billing", "POST", "/v1/locks/acquire", set("billing-a", "ops-b"))
	wantProblem(t, r, 403, "forbidden", "a set with a lock the token may not write")
	if !strings.Contains(string(r.Body), "locks:ops-b:write") {
		t.Errorf("the refusal does not name the permission it lacks: %s", r.Body)
	}
	wantProblem(t, g.as(t, "billing", "POST", "/v1/locks/release", set("billing-a", "ops-b")), 403, "forbidden", "a release of the same set")
	mustStatus(t, g.as(t, "billing", "POST", "/v1/locks/acquire", set("billing-b", "billing-a")), 200, "its own set")
	r = g.as(t, "reader", "GET", "/v1/locks/billing-a", nil)
	mustStatus(t, r, 200, "the state of billing-a")
	if strings.Count(string(r.Body), `"lease":"`+lease+`"`) != 1 {
		t.Errorf("billing-a is not held by the set's lease alone: %s", r.Body)
	}
	r = g.as(t, "reader", "POST", "/v1/locks/acquire", set("billing-a"))
	wantProblem(t, r, 403, "forbidden", "a set asked for by a reader")
	if !strings.Contains(string(r.Body), "holds no permission locks:PREFIX:write") {
		t.Errorf("the refusal of a reader's set does not say what it lacks: %s", r.Body)
	}
	mustStatus(t, g.as(t, "billing", "POST", "/v1/locks/release", set("billing-a", "billing-b")), 204, "its own set released")
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
	"GET /ui/leases/{id}/revoke":            {path: func(l string) string { return "/ui/leases/" + l + "/revoke" }},
	"POST /ui/leases/{id}/revoke":           {path: func(l string) string { return "/ui/leases/" + l + "/revoke" }},
	"GET /ui/leases/{id}/release":           {path: func(l string) string { return "/ui/leases/" + l + "/release?kind=lock&name=a1" }},
	"POST /ui/leases/{id}/release":          {path: func(l string) string { return "/ui/leases/" + l + "/release" }},

	"POST /v1/leases":                {path: fixed("/v1/leases"), body: func(string) any { return map[string]any{"ttl": "10s"} }},
	"GET /v1/leases":                 {path: fixed("/v1/leases")},
	"GET /v1/leases/{id}":            {path: func(l string) string { return "/v1/leases/" + l }, usesLease: true},
	"DELETE /v1/leases/{id}":         {path: func(l string) string { return "/v1/leases/" + l }, usesLease: true},
	"POST /v1/leases/{id}/keepalive": {path: func(l string) string { return "/v1/leases/" + l + "/keepalive" }, usesLease: true},

	"GET /v1/locks":                 {path: fixed("/v1/locks?prefix=a")},
	"GET /v1/locks/{name}":          {path: fixed("/v1/locks/a1")},
	"POST /v1/locks/{name}/acquire": {path: fixed("/v1/locks/a1/acquire"), body: withLease(nil), usesLease: true},
	"POST /v1/locks/{name}/release": {path: fixed("/v1/locks/a1/release"), body: withLease(nil), usesLease: true},
	"POST /v1/locks/acquire": {path: fixed("/v1/locks/acquire"), body: withLease(map[string]any{"locks": []map[string]string{{"name": "a1"}, {"name": "a2"}}}),
		usesLease: true},
	"POST /v1/locks/release": {path: fixed("/v1/locks/release"), body: withLease(map[string]any{"locks": []map[string]string{{"name": "a1"}, {"name": "a2"}}}),
		usesLease: true},
	"GET /v1/locks/{name}/fence": {path: fixed("/v1/locks/a1/fence?token=1")},
	"GET /v1/locks/{name}/stats": {path: fixed("/v1/locks/a1/stats")},
	"GET /v1/contention":         {path: fixed("/v1/contention")},

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
	"GET /v1/groups":                        {path: fixed("/v1/groups")},
	"GET /v1/groups/{name}":                 {path: fixed("/v1/groups/g1")},
	"POST /v1/groups/{name}/join":           {path: fixed("/v1/groups/g1/join"), body: withLease(map[string]any{"member": "m"}), usesLease: true},
	"POST /v1/groups/{name}/leave":          {path: fixed("/v1/groups/g1/leave"), body: withLease(map[string]any{"member": "m"}), usesLease: true},

	"GET /v1/queues":                         {path: fixed("/v1/queues")},
	"GET /v1/queues/{name}":                  {path: fixed("/v1/queues/q1")},
	"DELETE /v1/queues/{name}":               {path: fixed("/v1/queues/q9")},
	"POST /v1/queues/{name}/items":           {path: fixed("/v1/queues/q1/items"), body: func(string) any { return "payload" }},
	"GET /v1/queues/{name}/items/{id}":       {path: fixed("/v1/queues/q1/items/entry-100-0000000000")},
	"POST /v1/queues/{name}/items/{id}/ack":  {path: fixed("/v1/queues/q1/items/entry-100-0000000000/ack"), body: withLease(nil), usesLease: true},
	"POST /v1/queues/{name}/items/{id}/nack": {path: fixed("/v1/queues/q1/items/entry-100-0000000000/nack"), body: withLease(nil), usesLease: true},
	"POST /v1/queues/{name}/take":            {path: fixed("/v1/queues/q1/take")},
	"POST /v1/queues/{name}/claim":           {path: fixed("/v1/queues/q1/claim"), body: withLease(nil), usesLease: true},

	// Counters.
	"GET /v1/counters":             {path: fixed("/v1/counters")},
	"GET /v1/counters/{name}":      {path: fixed("/v1/counters/c1")},
	"PUT /v1/counters/{name}":      {path: fixed("/v1/counters/c1"), body: func(string) any { return map[string]any{"value": 1} }},
	"DELETE /v1/counters/{name}":   {path: fixed("/v1/counters/c9")},
	"POST /v1/counters/{name}/add": {path: fixed("/v1/counters/c1/add"), body: func(string) any { return map[string]any{"delta": 1} }},
}

// TestAccessEveryRoute sends every route of the router, on a real zkgate
// process with tokens, without a token (401 with WWW-Authenticate; the
// dashboard's pages send the browser to the sign-in), with an unknown one
// (401 invalid_token), with a read-only one (403 on every route that writes)
// and with another token's lease (403 on every route that acts with a
// lease); then with the right token, which gets through. Open routes stay
// open. Nothing answers 500.
func TestAccessEveryRoute(t *testing.T) {
	t.Parallel()
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
		if p != nil && !c.rule.Lease && !strings.Contains(p["detail"].(string), ":"+c.rule.Level) {
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

// rightToken: the lease's own token gets through; on an admin's route
// (the dashboard's actions) it is refused, and an admin gets through the
// front door, to a handler that acts for a signed-in browser alone (a
// bearer token has the API).
func (c routeCall) rightToken(t *testing.T) {
	r := c.g.as(t, "writer", c.method, c.path, c.body)
	c.noServerError(t, r, "writer")
	if c.rule.Level == "admin" {
		wantProblem(t, r, 403, "forbidden", "the lease's own token on an admin's route")
		r = c.g.as(t, "admin", c.method, c.path, c.body)
		c.noServerError(t, r, "admin")
		if r.Status == 401 || strings.Contains(string(r.Body), "lacks the permission") {
			t.Errorf("an admin was refused at the front door: %d %s", r.Status, r.Body)
		}
		if r.Status == 403 && !strings.Contains(string(r.Body), "signed-in browser") && !strings.Contains(string(r.Body), "Sign in to the dashboard") {
			t.Errorf("an admin's bearer token on a dashboard page or form: %d %s, want the refusal of a bearer token", r.Status, r.Body)
		}
		return
	}
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
	return gwtest.MustSend(t, noRedirects, req)
}
