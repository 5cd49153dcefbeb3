package server_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/zkgate/zkgate"
	"github.com/zkgate/zkgate/handlers"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/recipes"
)

// specLoad parses and validates an OpenAPI document.
func specLoad(t *testing.T, data []byte) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Fatalf("openapi.yaml declares OpenAPI %q, want 3.0.3", doc.OpenAPI)
	}
	return doc
}

// specOperations lists "METHOD /path/{param}" for every operation of doc.
func specOperations(doc *openapi3.T) map[string]bool {
	ops := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ops[method+" "+path] = true
		}
	}
	return ops
}

func specSortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIMatchesRoutes walks the chi router that server.New builds and
// compares its routes with the operations of openapi.yaml, both ways: a
// route added without its spec, or a spec operation without a route, fails.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc := specLoad(t, zkgate.OpenAPI)
	// The router is built as server.Run builds it, on a real session.
	routes := servedRoutes(t)
	spec := specOperations(doc)
	t.Logf("%d routes, %d operations in openapi.yaml", len(routes), len(spec))
	for _, r := range specSortedKeys(routes) {
		if !spec[r] {
			t.Errorf("route %s is served but not described in openapi.yaml", r)
		}
	}
	for _, op := range specSortedKeys(spec) {
		if !routes[op] {
			t.Errorf("openapi.yaml describes %s, which the server does not route", op)
		}
	}
}

// apiOf wires every service of svc into the handlers, field by field of
// the same name, as server.Run does, so that a service added to both is
// wired here too.
func apiOf(svc *recipes.Service) *handlers.API {
	api := &handlers.API{Limits: handlers.Limits{MaxWait: time.Minute}}
	av, sv := reflect.ValueOf(api).Elem(), reflect.ValueOf(svc).Elem()
	for i := 0; i < av.NumField(); i++ {
		f := av.Type().Field(i)
		if src := sv.FieldByName(f.Name); f.Type.Kind() == reflect.Interface && src.IsValid() && src.Type().AssignableTo(f.Type) {
			av.Field(i).Set(src)
		}
	}
	return api
}

// specChecker sends requests to a gateway and validates each request and
// its real response against the spec.
type specChecker struct {
	base   string
	doc    *openapi3.T
	router routers.Router

	mu        sync.Mutex
	exercised map[string]map[int]bool // operation -> statuses seen
}

func newSpecChecker(t *testing.T, base string, doc *openapi3.T) *specChecker {
	t.Helper()
	// The spec names the default listen address as its server; match any
	// host instead, the gateway under test listens on a random port.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("router from openapi.yaml: %v", err)
	}
	return &specChecker{base: base, doc: doc, router: router, exercised: map[string]map[int]bool{}}
}

// specCall is one request of a scenario.
type specCall struct {
	method, path string // path with its query
	body         []byte
	contentType  string // sent as is; "" sends none
	chunked      bool   // send the body without a Content-Length
	// specRejects says the spec itself forbids this request (bad name,
	// unknown field...): ValidateRequest must fail on it, and the server
	// must refuse it too.
	specRejects bool
	// token is sent as "Authorization: Bearer <token>" when not empty.
	token string
	// form says the body is a real HTML form, validated as one (an API body
	// with curl's form type is JSON, see check).
	form bool
	// header holds more request headers.
	header http.Header
}

type specOption func(*specCall)

// specContentType sends ct instead of application/json ("" sends none).
func specContentType(ct string) specOption { return func(c *specCall) { c.contentType = ct } }
func specChunked() specOption              { return func(c *specCall) { c.chunked = true } }
func specRejects() specOption              { return func(c *specCall) { c.specRejects = true } }
func specToken(tok string) specOption      { return func(c *specCall) { c.token = tok } }

// specHeader adds a request header.
func specHeader(k, v string) specOption {
	return func(c *specCall) {
		if c.header == nil {
			c.header = http.Header{}
		}
		c.header.Set(k, v)
	}
}

// specForm sends an HTML form.
func specForm(values url.Values) specOption {
	return func(c *specCall) {
		c.body, c.contentType, c.form = []byte(values.Encode()), "application/x-www-form-urlencoded", true
	}
}

// specAuthenticate checks a request against a security scheme of the spec
// as far as the spec can tell: the credential is there, in the right place.
// The anonymous requirement ({}) of a gateway without tokens needs none.
func specAuthenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	switch in.SecuritySchemeName {
	case "bearerAuth":
		if !strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
			return fmt.Errorf("no bearer token")
		}
		return nil
	case "signInCookie":
		if _, err := in.RequestValidationInput.Request.Cookie("zkgate_token"); err != nil {
			return err
		}
		return nil
	}
	return fmt.Errorf("unknown security scheme %q", in.SecuritySchemeName)
}

func specReq(method, path string, body any, opts ...specOption) specCall {
	c := specCall{method: method, path: path}
	switch b := body.(type) {
	case nil:
	case string:
		c.body, c.contentType = []byte(b), "application/json"
	case []byte:
		c.body, c.contentType = b, "application/json"
	default:
		data, err := json.Marshal(b)
		if err != nil {
			panic(err)
		}
		c.body, c.contentType = data, "application/json"
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// specSent is a response with the time it took.
type specSent struct {
	resp    gwtest.Response
	err     error
	elapsed time.Duration
}

// specOnlyReader hides the concrete type of a body so that net/http cannot
// learn its length and sends it chunked.
type specOnlyReader struct{ io.Reader }

// specClient is the default client, except that it shows redirects (the
// sign-in's) instead of following them.
var specClient = &http.Client{
	Transport:     http.DefaultTransport,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// send performs c. wrote, if not nil, is called once the request is on the wire.
func (s *specChecker) send(ctx context.Context, c specCall, wrote func()) specSent {
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
		if c.chunked {
			body = specOnlyReader{body}
		}
	}
	if wrote != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { wrote() },
		})
	}
	req, err := http.NewRequestWithContext(ctx, c.method, s.base+c.path, body)
	if err != nil {
		return specSent{err: err}
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	start := time.Now()
	r, err := gwtest.Send(specClient, req)
	return specSent{resp: r, err: err, elapsed: time.Since(start)}
}

// do sends c, checks the status, and validates request and response
// against the spec.
func (s *specChecker) do(t *testing.T, want int, c specCall) gwtest.Response {
	t.Helper()
	r := s.send(context.Background(), c, nil)
	s.check(t, want, c, r)
	return r.resp
}

// check validates a sent call.
func (s *specChecker) check(t *testing.T, want int, c specCall, r specSent) {
	t.Helper()
	what := c.method + " " + c.path
	if r.err != nil {
		t.Fatalf("%s: %v", what, r.err)
	}
	resp := r.resp
	if resp.Status != want {
		t.Errorf("%s: status %d, want %d: %s", what, resp.Status, want, resp.Body)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("%s: no X-Request-Id", what)
	}
	// Every error of the API is a problem document; outside /v1 some are
	// not (the dashboard's static files and WebSocket, /readyz).
	if isProblem := resp.Header.Get("Content-Type") == "application/problem+json"; isProblem ||
		resp.Status >= 400 && strings.HasPrefix(c.path, "/v1/") {
		specCheckProblem(t, what, resp)
	}

	// The request as the spec sees it. The server reads a body without a
	// Content-Type, or with curl's default form type or text/plain, as
	// JSON (see the spec's conventions), so such a body is validated as
	// the application/json it is read as.
	vreq, err := http.NewRequest(c.method, s.base+c.path, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.body == nil {
		vreq.Body = http.NoBody
	}
	ct := c.contentType
	if mt, _, _ := strings.Cut(ct, ";"); c.body != nil && !c.form && (mt == "" || strings.HasSuffix(mt, "+json") ||
		mt == "application/x-www-form-urlencoded" || mt == "text/plain") {
		ct = "application/json"
	}
	if ct != "" {
		vreq.Header.Set("Content-Type", ct)
	}
	if c.token != "" {
		vreq.Header.Set("Authorization", "Bearer "+c.token)
	}
	if cookie := c.header.Get("Cookie"); cookie != "" {
		vreq.Header.Set("Cookie", cookie)
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, SkipSettingDefaults: true, MultiError: true,
		AuthenticationFunc: specAuthenticate}
	route, params, err := s.router.FindRoute(vreq)
	if err != nil {
		// Not an operation of the spec (unknown route, wrong method): the
		// server must answer with a problem of its own.
		if !c.specRejects {
			t.Errorf("%s: not in the spec (%v)", what, err)
		}
		s.checkSchema(t, what, "RouteProblem", resp.Body)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: opts}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	switch {
	case c.specRejects && reqErr == nil:
		t.Errorf("%s: the spec accepts this request, which the server answers %d: %s", what, resp.Status, resp.Body)
	case !c.specRejects && reqErr != nil:
		t.Errorf("%s: request does not match the spec: %v", what, reqErr)
	case c.specRejects && resp.Status < 400:
		t.Errorf("%s: the spec rejects this request (%v) but the server answered %d", what, reqErr, resp.Status)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.Status,
		Header: resp.Header, Options: opts}
	out.SetBodyBytes(resp.Body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s: response %d does not match the spec: %v\nbody: %s", what, resp.Status, err, resp.Body)
	}
	op := route.Method + " " + route.Path
	s.mu.Lock()
	if s.exercised[op] == nil {
		s.exercised[op] = map[int]bool{}
	}
	s.exercised[op][resp.Status] = true
	s.mu.Unlock()
}

// checkSchema validates a JSON body against a schema of the spec's components.
func (s *specChecker) checkSchema(t *testing.T, what, schema string, body []byte) {
	t.Helper()
	ref := s.doc.Components.Schemas[schema]
	if ref == nil {
		t.Fatalf("no schema %s in openapi.yaml", schema)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("%s: body is not JSON: %v: %s", what, err, body)
		return
	}
	if err := ref.Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		t.Errorf("%s: body does not match schema %s: %v\nbody: %s", what, schema, err, body)
	}
}

// specCheckProblem checks what the spec cannot say of a problem document.
func specCheckProblem(t *testing.T, what string, resp gwtest.Response) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: problem Content-Type %q", what, ct)
		return
	}
	var p map[string]any
	if err := json.Unmarshal(resp.Body, &p); err != nil {
		t.Errorf("%s: problem is not JSON: %s", what, resp.Body)
		return
	}
	if p["type"] != "urn:zkgate:problem:"+fmt.Sprint(p["code"]) {
		t.Errorf("%s: problem type %v does not match its code %v", what, p["type"], p["code"])
	}
	if p["status"] != float64(resp.Status) {
		t.Errorf("%s: problem status %v, HTTP status %d", what, p["status"], resp.Status)
	}
	if p["instance"] != "urn:zkgate:request:"+resp.Header.Get("X-Request-Id") {
		t.Errorf("%s: problem instance %v, X-Request-Id %q", what, p["instance"], resp.Header.Get("X-Request-Id"))
	}
	if resp.Status == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		t.Errorf("%s: 503 without Retry-After", what)
	}
}

func specJSON(t *testing.T, r gwtest.Response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not a JSON object (%v): %s", err, r.Body)
	}
	return m
}

func specWantCode(t *testing.T, r gwtest.Response, code string) map[string]any {
	t.Helper()
	p := specJSON(t, r)
	if p["code"] != code {
		t.Errorf("problem code %v, want %s: %s", p["code"], code, r.Body)
	}
	return p
}

func specIndex(t *testing.T, r gwtest.Response) int64 {
	t.Helper()
	n, err := strconv.ParseInt(r.Header.Get("X-Zkgate-Index"), 10, 64)
	if err != nil {
		t.Fatalf("X-Zkgate-Index %q: %v", r.Header.Get("X-Zkgate-Index"), err)
	}
	return n
}

// specInt reads a JSON number field as the int64 it is (float64 would lose
// precision on zxids).
func specInt(t *testing.T, r gwtest.Response, field string) int64 {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body: %v: %s", err, r.Body)
	}
	n, err := strconv.ParseInt(string(m[field]), 10, 64)
	if err != nil {
		t.Fatalf("%s %s: %v", field, m[field], err)
	}
	return n
}

func specHolderLeases(t *testing.T, list any) []string {
	t.Helper()
	items, ok := list.([]any)
	if !ok {
		t.Fatalf("holders are not a list: %v", list)
	}
	var out []string
	for _, it := range items {
		out = append(out, fmt.Sprint(it.(map[string]any)["lease"]))
	}
	return out
}

// specBlockingRead is a call (a blocking read, or any waiting call) sent
// from another goroutine.
type specBlockingRead struct {
	wrote chan struct{} // closed once the request is on the wire (or failed)
	done  chan specSent
	call  specCall
}

// startRead sends GET path from another goroutine.
func (s *specChecker) startRead(path string) *specBlockingRead {
	return s.startCall(specReq("GET", path, nil))
}

// startCall sends c from another goroutine.
func (s *specChecker) startCall(c specCall) *specBlockingRead {
	b := &specBlockingRead{wrote: make(chan struct{}), done: make(chan specSent, 1), call: c}
	var once sync.Once
	wrote := func() { once.Do(func() { close(b.wrote) }) }
	go func() {
		r := s.send(context.Background(), b.call, wrote)
		wrote() // in case it failed before
		b.done <- r
	}()
	return b
}

// wait returns the call's response once it has come back; it must not
// outlast deadline.
func (b *specBlockingRead) wait(t *testing.T, deadline time.Duration) specSent {
	t.Helper()
	return gwtest.Receive(t, b.done, deadline, b.call.path+" returning")
}

// quietRead sends a blocking read of path at index idx while nothing
// changes it: it must wait out its wait and return the unchanged state. It
// returns the index it got.
func (s *specChecker) quietRead(t *testing.T, path string, idx int64) int64 {
	t.Helper()
	_, got, early := s.blockingRead(t, path, idx, 300*time.Millisecond)
	if early != "" {
		t.Error(early)
	}
	return max(got, idx)
}

// blockingRead sends a blocking read of path from index idx that waits up
// to wait, checks it against the spec, and returns its answer and index.
// A read must return a newer index or wait out its wait: early says how it
// did neither, or is empty.
func (s *specChecker) blockingRead(t *testing.T, path string, idx int64, wait time.Duration) (r specSent, got int64, early string) {
	t.Helper()
	c := specReq("GET", fmt.Sprintf("%s?index=%d&wait=%s", path, idx, wait), nil)
	r = s.send(context.Background(), c, nil)
	s.check(t, 200, c, r)
	got = specIndex(t, r.resp)
	if got <= idx && r.elapsed < wait {
		early = fmt.Sprintf("GET %s returned index %d after %s, before its wait was over", c.path, got, r.elapsed)
	}
	return r, got, early
}

// staleRead reads path (of a kind) at index 1, an index that is not the
// current one: the read must return the current state at once.
func (s *specChecker) staleRead(t *testing.T, path, kind string) {
	t.Helper()
	c := specReq("GET", path+"?index=1&wait=1m", nil)
	r := s.send(context.Background(), c, nil)
	s.check(t, 200, c, r)
	if specIndex(t, r.resp) <= 1 || r.elapsed >= time.Minute {
		t.Errorf("a %s read with an old index must return the current state at once: index %d after %s",
			kind, specIndex(t, r.resp), r.elapsed)
	}
}

// wokenByRelease starts a blocking read of path (a lock or semaphore)
// from index idx, then releases lease's hold on it: the read must return
// with a newer index, or at the end of its wait. It returns the read.
func (s *specChecker) wokenByRelease(t *testing.T, path string, idx int64, lease string) specSent {
	t.Helper()
	pending := s.startRead(fmt.Sprintf("%s?index=%d&wait=1m", path, idx))
	<-pending.wrote
	s.do(t, 204, specReq("POST", path+"/release", map[string]any{"lease": lease}))
	r := pending.wait(t, 2*time.Minute)
	s.check(t, 200, pending.call, r)
	if got := specIndex(t, r.resp); got <= idx && r.elapsed < time.Minute {
		t.Errorf("GET %s returned index %d after %s, neither after the release nor after its wait",
			pending.call.path, got, r.elapsed)
	}
	return r
}

// readUntil follows path with blocking reads from index idx, as a client
// watching it would, until done says the state is reached. Every read must
// return a newer index or wait out its wait.
func (s *specChecker) readUntil(t *testing.T, path string, idx int64, what string, done func(map[string]any) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r, got, early := s.blockingRead(t, path, idx, 10*time.Second)
		if early != "" {
			t.Fatal(early)
		}
		if done(specJSON(t, r.resp)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached %s: %s", path, what, r.resp.Body)
		}
		idx = max(got, idx)
	}
}

// eventually polls GET path until done says the state is reached. (The
// blocking reads of semaphores cannot be used to wait: see
// TestOpenAPISemaphoreBlockingRead.)
func (s *specChecker) eventually(t *testing.T, path, what string, done func(map[string]any) bool) {
	t.Helper()
	gwtest.Eventually(t, 30*time.Second, func() error {
		r := s.do(t, 200, specReq("GET", path, nil))
		if !done(specJSON(t, r)) {
			return fmt.Errorf("%s is not at %s yet: %s", path, what, r.Body)
		}
		return nil
	})
}

const specUnknownLease = "00000000-0000-4000-8000-000000000000"

// TestOpenAPIScenario drives every operation of openapi.yaml through a real
// gateway and ZooKeeper, success and error paths, and validates every
// request and response against the spec the gateway serves.
func TestOpenAPIScenario(t *testing.T) {
	t.Parallel()
	// A session timeout of 10s: the short lease of leases (5s) is shorter
	// than what the session keeps, and lives long enough on a busy machine.
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{MaxWait: time.Minute, SessionTimeout: 10 * time.Second})
	conn := gwtest.Client(t, g.ZK, 10*time.Second)
	s := servedSpecChecker(t, g.URL)
	s.operations(t)
	a, b, c := s.leases(t)
	s.leaseErrors(t, a)
	tokenA := s.locks(t, a, b, c)
	s.lockReads(t, a)
	s.lockReleased(t, a, b, tokenA)
	s.lockErrors(t, a)
	s.lockSets(t, a, b)
	s.semaphores(t, a, b, c)
	s.semaphoreErrors(t, a)

	// Contention: the figures of what the scenario did so far.
	s.contention(t, tokenA)
	s.revoked(t, a)

	s.dashboard(t)
	s.elections(t)
	s.barriers(t, conn, g.Root)
	s.doubleBarriers(t)
	s.queues(t)
	s.groups(t)
	s.counters(t, conn, g.Root)
	s.outsideRoutes(t)

	// Clean up and check that nothing is left in ZooKeeper.
	for _, id := range specLeaseIDs(t, s.do(t, 200, specReq("GET", "/v1/leases", nil))) {
		s.do(t, 204, specReq("DELETE", "/v1/leases/"+id, nil))
	}
	gwtest.NoZnodesLeft(t, conn, g.Root)

	s.everyOperationExercised(t)
}

// servedSpecChecker checks the spec under test, the one the gateway at
// base serves, which must be the one in the repository.
func servedSpecChecker(t *testing.T, base string) *specChecker {
	t.Helper()
	served := gwtest.Do(t, "GET", base+"/openapi.yaml", nil)
	if served.Status != http.StatusOK {
		t.Fatalf("GET /openapi.yaml: %d", served.Status)
	}
	onDisk, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served.Body, onDisk) {
		t.Fatalf("the served /openapi.yaml differs from openapi.yaml in the repository")
	}
	return newSpecChecker(t, base, specLoad(t, served.Body))
}

// operations: the health, readiness, metrics and spec routes.
func (s *specChecker) operations(t *testing.T) {
	t.Helper()
	s.do(t, 200, specReq("GET", "/healthz", nil))
	if r := s.do(t, 200, specReq("GET", "/readyz", nil)); specJSON(t, r)["zookeeper"] != "live" {
		t.Errorf("readyz: %s", r.Body)
	}
	if r := s.do(t, 200, specReq("GET", "/metrics", nil)); !bytes.Contains(r.Body, []byte("zkgate_http_requests_total")) {
		t.Errorf("metrics lack zkgate_http_requests_total")
	}
	s.do(t, 200, specReq("GET", "/openapi.yaml", nil))
}

// leases makes leases with and without a body, in each content type read
// as JSON, lists them whole and in pages, and keeps one alive; it returns
// three of them (alice's, bob's, carol's), left alive.
func (s *specChecker) leases(t *testing.T) (a, b, c string) {
	t.Helper()
	created := s.do(t, 201, specReq("POST", "/v1/leases", map[string]any{"ttl": "30s", "holder": "alice"}))
	a = specJSON(t, created)["id"].(string)
	if loc := created.Header.Get("Location"); loc != "/v1/leases/"+a {
		t.Errorf("Location %q, want /v1/leases/%s", loc, a)
	}
	// curl -d sends application/x-www-form-urlencoded: read as JSON.
	b = specJSON(t, s.do(t, 201, specReq("POST", "/v1/leases", `{"ttl":"30s","holder":"bob"}`,
		specContentType("application/x-www-form-urlencoded"))))["id"].(string)
	// No Content-Type at all: read as JSON.
	c = specJSON(t, s.do(t, 201, specReq("POST", "/v1/leases", `{"ttl":"30s","holder":"carol"}`, specContentType(""))))["id"].(string)
	// No body: every default.
	d := s.do(t, 201, specReq("POST", "/v1/leases", nil))
	if m := specJSON(t, d); m["ttl"] != "15s" || m["holder"] != "" {
		t.Errorf("a lease without a body: ttl %v holder %v, want 15s and empty", m["ttl"], m["holder"])
	}
	dID := specJSON(t, d)["id"].(string)
	s.do(t, 201, specReq("POST", "/v1/leases", `{"holder":"dave"}`, specContentType("text/plain; charset=utf-8")))
	s.do(t, 201, specReq("POST", "/v1/leases", `{"holder":"erin"}`, specContentType("application/merge-patch+json")))

	list := specJSON(t, s.do(t, 200, specReq("GET", "/v1/leases", nil)))["leases"].([]any)
	if len(list) != 6 {
		t.Errorf("GET /v1/leases lists %d leases, want 6", len(list))
	}
	// A page at a time: the same leases in the same order, then no next.
	first := specJSON(t, s.do(t, 200, specReq("GET", "/v1/leases?limit=4", nil)))
	second := specJSON(t, s.do(t, 200, specReq("GET", "/v1/leases?limit=4&after="+url.QueryEscape(first["next"].(string)), nil)))
	if paged := append(first["leases"].([]any), second["leases"].([]any)...); !reflect.DeepEqual(specIDs(paged), specIDs(list)) || second["next"] != nil {
		t.Errorf("GET /v1/leases in pages of 4: %v then next %v; want %v", specIDs(paged), second["next"], specIDs(list))
	}
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/leases?limit=0", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/leases?limit=1001", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/leases?after=bm90LWEtY3Vyc29y", nil)), "invalid_request")
	s.do(t, 200, specReq("GET", "/v1/leases/"+a, nil))
	// A TTL shorter than what the session keeps (6 to 9.5s here): a
	// keepalive moves expires_at, the end of the TTL.
	short := specJSON(t, s.do(t, 201, specReq("POST", "/v1/leases", `{"ttl":"5s"}`)))["id"].(string)
	before := specJSON(t, s.do(t, 200, specReq("GET", "/v1/leases/"+short, nil)))["expires_at"].(string)
	after := specJSON(t, s.do(t, 200, specReq("POST", "/v1/leases/"+short+"/keepalive", nil)))["expires_at"].(string)
	if !specLater(t, after, before) {
		t.Errorf("keepalive did not move expires_at: %s then %s", before, after)
	}
	s.do(t, 204, specReq("DELETE", "/v1/leases/"+short, nil))
	s.do(t, 204, specReq("DELETE", "/v1/leases/"+dID, nil))
	return a, b, c
}

// leaseErrors: bad lease requests, and unknown leases (a is alive).
func (s *specChecker) leaseErrors(t *testing.T, a string) {
	t.Helper()
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/leases", map[string]any{"ttl": "soon"}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/leases", map[string]any{"ttl": 15}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/leases", map[string]any{"ttl": "-5s"}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/leases", map[string]any{"ttl": "30s", "color": "red"}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/leases", `{"ttl":`, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/leases", `[]`, specRejects())), "invalid_request")
	// Trailing data: kin-openapi reads the first JSON value only, so the
	// spec's validator cannot tell; the server refuses it.
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/leases", `{} {}`)), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/leases", map[string]any{"holder": strings.Repeat("h", 201)}, specRejects())), "invalid_request")
	// Beyond what a schema can know: the TTL bounds (1s .. --max-ttl).
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/leases", map[string]any{"ttl": "2h"})), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/leases", map[string]any{"ttl": "10ms"})), "invalid_request")
	specWantCode(t, s.do(t, 415, specReq("POST", "/v1/leases", `<lease/>`, specContentType("application/xml"), specRejects())), "unsupported_media_type")
	huge := map[string]any{"holder": strings.Repeat("x", 70<<10)}
	specWantCode(t, s.do(t, 413, specReq("POST", "/v1/leases", huge, specRejects())), "too_large")
	specWantCode(t, s.do(t, 413, specReq("POST", "/v1/leases", huge, specChunked(), specRejects())), "too_large")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/leases/not-a-lease", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/leases/"+strings.ToUpper(a), nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 404, specReq("GET", "/v1/leases/"+specUnknownLease, nil)), "lease_not_found")
	specWantCode(t, s.do(t, 404, specReq("POST", "/v1/leases/"+specUnknownLease+"/keepalive", nil)), "lease_not_found")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/leases/nope/keepalive", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 404, specReq("DELETE", "/v1/leases/"+specUnknownLease, nil)), "lease_not_found")
	specWantCode(t, s.do(t, 400, specReq("DELETE", "/v1/leases/nope", nil, specRejects())), "invalid_request")
}

// locks: a's grant of orders, its idempotent retry, b's try and c's wait
// that time out, the fence and the list of locks; it returns a's token.
func (s *specChecker) locks(t *testing.T, a, b, c string) (tokenA int64) {
	t.Helper()
	grantA := s.do(t, 200, specReq("POST", "/v1/locks/orders/acquire", map[string]any{"lease": a}))
	tokenA = specInt(t, grantA, "token")
	again := s.do(t, 200, specReq("POST", "/v1/locks/orders/acquire", map[string]any{"lease": a, "mode": "exclusive"}))
	if specInt(t, again, "token") != tokenA || specJSON(t, again)["node"] != specJSON(t, grantA)["node"] {
		t.Errorf("a retried acquire must return the same grant: %s then %s", grantA.Body, again.Body)
	}
	holds := specJSON(t, s.do(t, 200, specReq("GET", "/v1/leases/"+a, nil)))["holds"].([]any)
	if len(holds) != 1 || holds[0].(map[string]any)["state"] != "held" || holds[0].(map[string]any)["name"] != "orders" {
		t.Errorf("lease %s holds %v, want the lock orders", a, holds)
	}
	// Try once (the default wait=0): 409 timeout with the lock's state.
	busy := specWantCode(t, s.do(t, 409, specReq("POST", "/v1/locks/orders/acquire", map[string]any{"lease": b})), "timeout")
	if got := specHolderLeases(t, busy["holders"]); len(got) != 1 || got[0] != a {
		t.Errorf("timeout holders %v, want [%s]", got, a)
	}
	if busy["position"] != float64(1) || busy["waiters"] == nil {
		t.Errorf("timeout position %v waiters %v, want position 1 and a count", busy["position"], busy["waiters"])
	}
	// A real wait that ends first.
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/locks/orders/acquire?wait=200ms", map[string]any{"lease": c})), "timeout")
	s.do(t, 200, specReq("GET", fmt.Sprintf("/v1/locks/orders/fence?token=%d", tokenA), nil))
	locks := specJSON(t, s.do(t, 200, specReq("GET", "/v1/locks", nil)))["locks"].([]any)
	if len(locks) != 1 || locks[0].(map[string]any)["name"] != "orders" || locks[0].(map[string]any)["holders"] != float64(1) {
		t.Errorf("GET /v1/locks: %v", locks)
	}
	if l := specJSON(t, s.do(t, 200, specReq("GET", "/v1/locks?prefix=ord", nil)))["locks"].([]any); len(l) != 1 {
		t.Errorf("GET /v1/locks?prefix=ord: %v", l)
	}
	if l := specJSON(t, s.do(t, 200, specReq("GET", "/v1/locks?prefix=zzz", nil)))["locks"].([]any); len(l) != 0 {
		t.Errorf("GET /v1/locks?prefix=zzz: %v", l)
	}
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/locks?prefix=a%2Fb", nil, specRejects())), "invalid_request")
	// A cursor belongs to its list.
	leasePage := specJSON(t, s.do(t, 200, specReq("GET", "/v1/leases?limit=1", nil)))
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/locks?after="+url.QueryEscape(leasePage["next"].(string)), nil)), "invalid_request")
	return tokenA
}

// lockReads: blocking reads of orders, held by a, return at once with an
// old index and when a releases it with the current one. They are served
// by the gateway's watch cache, which may be a moment behind the fresh
// plain read that gave idx; and an index may move with no visible change.
// So a read may return at once, but only with a newer index.
func (s *specChecker) lockReads(t *testing.T, a string) {
	t.Helper()
	st := s.do(t, 200, specReq("GET", "/v1/locks/orders", nil))
	idx := specIndex(t, st)
	if got := specHolderLeases(t, specJSON(t, st)["holders"]); len(got) != 1 || got[0] != a {
		t.Errorf("lock holders %v, want [%s]", got, a)
	}
	// An index that is not the current one returns at once.
	s.staleRead(t, "/v1/locks/orders", "lock")
	// The current index and no change: 200 with the unchanged state once the wait is over.
	idx = s.quietRead(t, "/v1/locks/orders", idx)
	// The current index: returns when another client changes the lock.
	r := s.wokenByRelease(t, "/v1/locks/orders", idx, a)
	s.readUntil(t, "/v1/locks/orders", specIndex(t, r.resp), "no holders", func(st map[string]any) bool {
		return len(st["holders"].([]any)) == 0
	})
}

// lockReleased: released by a, orders fences a's token no more and goes
// to b with a larger one; a read/write lock and the implicit leases.
func (s *specChecker) lockReleased(t *testing.T, a, b string, tokenA int64) {
	t.Helper()
	// Released: the token is stale, a second release holds nothing.
	stale409 := specWantCode(t, s.do(t, 409, specReq("GET", fmt.Sprintf("/v1/locks/orders/fence?token=%d", tokenA), nil)), "stale_token")
	if specInt(t, s.do(t, 409, specReq("GET", fmt.Sprintf("/v1/locks/orders/fence?token=%d", tokenA), nil)), "token") != tokenA {
		t.Errorf("stale_token body %v does not repeat the token %d", stale409, tokenA)
	}
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/locks/orders/release", map[string]any{"lease": a})), "not_held")
	grantB := s.do(t, 200, specReq("POST", "/v1/locks/orders/acquire?wait=5s", map[string]any{"lease": b}))
	if tb := specInt(t, grantB, "token"); tb <= tokenA {
		t.Errorf("fencing tokens must grow: %d then %d", tokenA, tb)
	}
	s.do(t, 204, specReq("POST", "/v1/locks/orders/release", map[string]any{"lease": b, "mode": "exclusive"}))

	// Read/write: a reader may not ask to write too.
	s.do(t, 200, specReq("POST", "/v1/locks/catalog/acquire", map[string]any{"lease": a, "mode": "read"}))
	s.do(t, 200, specReq("POST", "/v1/locks/catalog/acquire", map[string]any{"lease": b, "mode": "read"}))
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/locks/catalog/acquire", map[string]any{"lease": a, "mode": "write"})), "would_deadlock")
	rw := specJSON(t, s.do(t, 200, specReq("GET", "/v1/locks/catalog", nil)))
	if h := rw["holders"].([]any); len(h) != 2 {
		t.Errorf("catalog holders %v, want the two readers", h)
	}
	s.do(t, 204, specReq("POST", "/v1/locks/catalog/release", map[string]any{"lease": a, "mode": "read"}))
	s.do(t, 204, specReq("POST", "/v1/locks/catalog/release", map[string]any{"lease": b}))

	// Implicit lease: ttl and holder instead of lease.
	implicit := s.do(t, 200, specReq("POST", "/v1/locks/jobs/acquire", map[string]any{"ttl": "20s", "holder": "cron"}))
	e := specJSON(t, implicit)["lease"].(string)
	if m := specJSON(t, s.do(t, 200, specReq("GET", "/v1/leases/"+e, nil))); m["holder"] != "cron" || len(m["holds"].([]any)) != 1 {
		t.Errorf("implicit lease: %v", m)
	}
	// No body at all: a lease with every default, revoked again since the lock is busy.
	leasesBefore := len(specLeaseIDs(t, s.do(t, 200, specReq("GET", "/v1/leases", nil))))
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/locks/jobs/acquire", nil)), "timeout")
	if n := len(specLeaseIDs(t, s.do(t, 200, specReq("GET", "/v1/leases", nil)))); n != leasesBefore {
		t.Errorf("a failed acquire left its implicit lease behind: %d leases, was %d", n, leasesBefore)
	}
	s.do(t, 204, specReq("POST", "/v1/locks/jobs/release", map[string]any{"lease": e}))
}

// lockErrors: bad lock requests, and unknown leases (a is alive).
func (s *specChecker) lockErrors(t *testing.T, a string) {
	t.Helper()
	for _, bad := range []string{"bad%20name", "..", ".", strings.Repeat("n", 201), "a%2Fb", "caf%C3%A9"} {
		specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/"+bad+"/acquire", map[string]any{"lease": a}, specRejects())), "invalid_request")
		specWantCode(t, s.do(t, 400, specReq("GET", "/v1/locks/"+bad, nil, specRejects())), "invalid_request")
	}
	s.do(t, 200, specReq("GET", "/v1/locks/"+strings.Repeat("n", 200), nil))
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/orders/acquire?wait=soon", map[string]any{"lease": a}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/orders/acquire?wait=-1s", map[string]any{"lease": a}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/orders/acquire?wait=10", map[string]any{"lease": a}, specRejects())), "invalid_request")
	// Above --max-wait (1m here): only the server knows its cap.
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/orders/acquire?wait=2m", map[string]any{"lease": a})), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/orders/acquire", map[string]any{"lease": a, "mode": "shared"}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/orders/acquire", map[string]any{"lease": a, "color": "red"}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/orders/acquire", map[string]any{"lease": 5}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/orders/acquire", map[string]any{"lease": "nope"}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/orders/acquire", map[string]any{"lease": a, "ttl": "5s"}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/orders/acquire", map[string]any{"lease": a, "holder": "x"}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 404, specReq("POST", "/v1/locks/orders/acquire", map[string]any{"lease": specUnknownLease})), "lease_not_found")
	specWantCode(t, s.do(t, 415, specReq("POST", "/v1/locks/orders/acquire", `lease=x`, specContentType("multipart/form-data; boundary=x"), specRejects())), "unsupported_media_type")
	specWantCode(t, s.do(t, 413, specReq("POST", "/v1/locks/orders/acquire", map[string]any{"lease": a, "holder": strings.Repeat("x", 70<<10)}, specRejects())), "too_large")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/orders/release", map[string]any{}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/orders/release", map[string]any{"lease": a, "mode": "shared"}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 404, specReq("POST", "/v1/locks/orders/release", map[string]any{"lease": specUnknownLease})), "lease_not_found")
	specWantCode(t, s.do(t, 415, specReq("POST", "/v1/locks/orders/release", `{}`, specContentType("image/png"), specRejects())), "unsupported_media_type")
	specWantCode(t, s.do(t, 413, specReq("POST", "/v1/locks/orders/release", map[string]any{"lease": a, "pad": strings.Repeat("x", 70<<10)}, specChunked(), specRejects())), "too_large")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/locks/orders?index=abc", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/locks/orders?index=-1", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/locks/orders?index=1&wait=2m", nil)), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/locks/orders/fence", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/locks/orders/fence?token=0", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/locks/orders/fence?token=abc", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/locks/../fence?token=5", nil, specRejects())), "invalid_request")
}

// lockSets: a takes a set, b times out on it (none of b's held after),
// a releases it, and sets that are not are refused.
func (s *specChecker) lockSets(t *testing.T, a, b string) {
	t.Helper()
	set := []map[string]any{{"name": "set-y", "mode": "write"}, {"name": "set-x"}}
	got := s.do(t, 200, specReq("POST", "/v1/locks/acquire?wait=1s", map[string]any{"lease": a, "locks": set}))
	if !strings.Contains(string(got.Body), `"name":"set-x"`) {
		t.Fatalf("the set's grants: %s", got.Body)
	}
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/locks/acquire?wait=100ms", map[string]any{"lease": b, "locks": []map[string]any{{"name": "set-w"}, {"name": "set-y"}}})), "timeout")
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/locks/release", map[string]any{"lease": b, "locks": []map[string]any{{"name": "set-w"}}})), "not_held")
	s.do(t, 204, specReq("POST", "/v1/locks/release", map[string]any{"lease": a, "locks": set}))
	many := make([]map[string]any, 33)
	for i := range many {
		many[i] = map[string]any{"name": fmt.Sprintf("set-%d", i)}
	}
	for _, bad := range [][]map[string]any{nil, {}, many, {{"name": "set-x", "mode": "shared"}}, {{"mode": "read"}}} {
		specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/acquire", map[string]any{"lease": a, "locks": bad}, specRejects())), "invalid_request")
	}
	// A lock named twice: only the server sees it.
	twice := []map[string]any{{"name": "set-x"}, {"name": "set-x", "mode": "read"}}
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/acquire", map[string]any{"lease": a, "locks": twice})), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/locks/release", map[string]any{"lease": a}, specRejects())), "invalid_request")
}

// semaphores: the semaphore pool of limit 2 held by a and b, c timed out,
// the limit checked, read, listed and released.
func (s *specChecker) semaphores(t *testing.T, a, b, c string) {
	t.Helper()
	semA := s.do(t, 200, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": a, "limit": 2}))
	if again := s.do(t, 200, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": a, "limit": 2})); specInt(t, again, "token") != specInt(t, semA, "token") {
		t.Errorf("a retried semaphore acquire must return the same grant: %s then %s", semA.Body, again.Body)
	}
	s.do(t, 200, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": b, "limit": 2}))
	full := specWantCode(t, s.do(t, 409, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": c, "limit": 2})), "timeout")
	if got := specHolderLeases(t, full["holders"]); len(got) != 2 {
		t.Errorf("semaphore timeout holders %v, want two", got)
	}
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/semaphores/pool/acquire?wait=200ms", map[string]any{"lease": c, "limit": 2})), "timeout")
	if p := specWantCode(t, s.do(t, 409, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": c, "limit": 3})), "limit_mismatch"); p["limit"] != float64(2) {
		t.Errorf("limit_mismatch carries limit %v, want 2", p["limit"])
	}
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": a, "limit": 5})), "limit_mismatch")
	semList := specJSON(t, s.do(t, 200, specReq("GET", "/v1/semaphores", nil)))["semaphores"].([]any)
	if len(semList) != 1 || semList[0].(map[string]any)["name"] != "pool" || semList[0].(map[string]any)["holders"] != float64(2) ||
		semList[0].(map[string]any)["limit"] != float64(2) {
		t.Errorf("the semaphore list: %v", semList)
	}
	sem := s.do(t, 200, specReq("GET", "/v1/semaphores/pool", nil))
	specIndex(t, sem)
	if m := specJSON(t, sem); m["limit"] != float64(2) || len(m["holders"].([]any)) != 2 {
		t.Errorf("semaphore state %s, want limit 2 and two holders", sem.Body)
	}
	// An index that is not the current one returns at once (blocking reads
	// of a semaphore have a test of their own below).
	s.staleRead(t, "/v1/semaphores/pool", "semaphore")
	s.do(t, 204, specReq("POST", "/v1/semaphores/pool/release", map[string]any{"lease": b}))
	s.eventually(t, "/v1/semaphores/pool", "one holder", func(st map[string]any) bool {
		return len(st["holders"].([]any)) == 1
	})
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/semaphores/pool/release", map[string]any{"lease": b})), "not_held")
	implicitSem := s.do(t, 200, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"ttl": "20s", "holder": "batch", "limit": 2}))
	s.do(t, 204, specReq("DELETE", "/v1/leases/"+specJSON(t, implicitSem)["lease"].(string), nil))
}

// semaphoreErrors: bad semaphore requests, and unknown leases (a is
// alive).
func (s *specChecker) semaphoreErrors(t *testing.T, a string) {
	t.Helper()
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": a}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": a, "limit": 0}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": a, "limit": 100001}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": a, "limit": "2"}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": a, "limit": 1.5}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/semaphores/pool/acquire?wait=2m", map[string]any{"lease": a, "limit": 2})), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/semaphores/bad%20name/acquire", map[string]any{"lease": a, "limit": 2}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 404, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": specUnknownLease, "limit": 2})), "lease_not_found")
	specWantCode(t, s.do(t, 415, specReq("POST", "/v1/semaphores/pool/acquire", `{}`, specContentType("text/html"), specRejects())), "unsupported_media_type")
	specWantCode(t, s.do(t, 413, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": a, "limit": 2, "holder": strings.Repeat("x", 70<<10)}, specRejects())), "too_large")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/semaphores/pool/release", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/semaphores/pool/release", map[string]any{"lease": a, "limit": 2}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/semaphores/../release", map[string]any{"lease": a}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 404, specReq("POST", "/v1/semaphores/pool/release", map[string]any{"lease": specUnknownLease})), "lease_not_found")
	specWantCode(t, s.do(t, 415, specReq("POST", "/v1/semaphores/pool/release", `{}`, specContentType("application/xml"), specRejects())), "unsupported_media_type")
	specWantCode(t, s.do(t, 413, specReq("POST", "/v1/semaphores/pool/release", map[string]any{"lease": a, "pad": strings.Repeat("x", 70<<10)}, specRejects())), "too_large")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/semaphores/pool?index=x", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/semaphores/pool?wait=forever", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/semaphores/"+strings.Repeat("s", 201), nil, specRejects())), "invalid_request")
}

// revoked: a revoked lease (a) releases everything, and its id answers
// 410 from then on.
func (s *specChecker) revoked(t *testing.T, a string) {
	t.Helper()
	s.do(t, 204, specReq("DELETE", "/v1/leases/"+a, nil))
	for _, cl := range []specCall{
		specReq("GET", "/v1/leases/"+a, nil),
		specReq("POST", "/v1/leases/"+a+"/keepalive", nil),
		specReq("DELETE", "/v1/leases/"+a, nil),
		specReq("POST", "/v1/locks/orders/acquire", map[string]any{"lease": a}),
		specReq("POST", "/v1/locks/orders/release", map[string]any{"lease": a}),
		specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": a, "limit": 2}),
		specReq("POST", "/v1/semaphores/pool/release", map[string]any{"lease": a}),
	} {
		if p := specWantCode(t, s.do(t, 410, cl), "lease_expired"); p["reason"] != "revoked" {
			t.Errorf("%s %s: reason %v, want revoked", cl.method, cl.path, p["reason"])
		}
	}
	s.eventually(t, "/v1/semaphores/pool", "no holders", func(st map[string]any) bool {
		return len(st["holders"].([]any)) == 0
	})
}

// outsideRoutes: 404 and 405 outside the routes.
func (s *specChecker) outsideRoutes(t *testing.T) {
	t.Helper()
	specWantCode(t, s.do(t, 404, specReq("GET", "/nope", nil, specRejects())), "not_found")
	specWantCode(t, s.do(t, 404, specReq("GET", "/v1/nope", nil, specRejects())), "not_found")
	specWantCode(t, s.do(t, 404, specReq("POST", "/v1/locks/orders/steal", nil, specRejects())), "not_found")
	specWantCode(t, s.do(t, 405, specReq("PUT", "/v1/leases", nil, specRejects())), "method_not_allowed")
	specWantCode(t, s.do(t, 405, specReq("DELETE", "/v1/locks/orders", nil, specRejects())), "method_not_allowed")
}

// everyOperationExercised: every operation of the spec was exercised,
// with at least one success.
func (s *specChecker) everyOperationExercised(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, op := range specSortedKeys(specOperations(s.doc)) {
		if strings.Contains(op, " /peer/") {
			continue // between gateways only: TestHandoverToAPeer takes one, with a real session; TestContentionAcrossGateways asks for figures
		}
		if strings.Contains(op, " /ui/leases/") {
			continue // an admin's, with tokens only: TestOpenAPISecurity acts with them
		}
		statuses := s.exercised[op]
		ok := false
		for st := range statuses {
			ok = ok || st < 300 || st == http.StatusSeeOther // a form post's success
		}
		if !ok {
			t.Errorf("operation %s was not exercised with a success (statuses seen: %v)", op, statuses)
		}
	}
}

// contention reads the figures of the locks and semaphores the scenario
// used: orders was granted to a (tokenA), then to b; one try and one wait
// of c timed out.
func (s *specChecker) contention(t *testing.T, tokenA int64) {
	t.Helper()
	rep := specJSON(t, s.do(t, 200, specReq("GET", "/v1/contention?window=15m&limit=2", nil)))
	names := rep["names"].([]any)
	if len(names) != 2 || rep["window"] != "15m" {
		t.Errorf("GET /v1/contention?limit=2: %v", rep)
	}
	if all := specJSON(t, s.do(t, 200, specReq("GET", "/v1/contention", nil)))["names"].([]any); len(all) < 4 {
		t.Errorf("GET /v1/contention lists %d names, want orders, catalog, jobs and pool at least: %v", len(all), all)
	}
	orders := specJSON(t, s.do(t, 200, specReq("GET", "/v1/locks/orders/stats?window=1h", nil)))
	if orders["grants"].(float64) < 2 || orders["timeouts"].(float64) < 2 || orders["kind"] != "lock" {
		t.Errorf("orders: %v", orders)
	}
	holds := orders["recent_holds"].([]any)
	if len(holds) < 2 || holds[0].(map[string]any)["token"] != float64(tokenA) || holds[0].(map[string]any)["until"] == nil {
		t.Errorf("orders' recent holds %v, want a's (token %d) ended first", holds, tokenA)
	}
	if pool := specJSON(t, s.do(t, 200, specReq("GET", "/v1/semaphores/pool/stats?window=1m", nil))); pool["kind"] != "semaphore" || pool["grants"].(float64) < 2 {
		t.Errorf("pool: %v", pool)
	}
	s.do(t, 200, specReq("GET", "/v1/locks/unused/stats", nil))
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/contention?window=2h", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/contention?limit=0", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/contention?limit=x", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/locks/orders/stats?window=5m", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/locks/bad%20name/stats", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/semaphores/../stats", nil, specRejects())), "invalid_request")
	// Another gateway's routes are not a client's.
	specWantCode(t, s.do(t, 403, specReq("GET", "/peer/v1/contention", nil)), "forbidden")
	specWantCode(t, s.do(t, 403, specReq("POST", "/peer/v1/waits", map[string]any{"leases": []string{}})), "forbidden")
}

func (s *specChecker) newLease(t *testing.T, holder string) string {
	t.Helper()
	return specJSON(t, s.do(t, 201, specReq("POST", "/v1/leases", map[string]any{"ttl": "1m", "holder": holder})))["id"].(string)
}

// holdKinds lists "kind name mode state" of what a lease holds.
func (s *specChecker) holdKinds(t *testing.T, lease string) []string {
	t.Helper()
	var out []string
	for _, h := range specJSON(t, s.do(t, 200, specReq("GET", "/v1/leases/"+lease, nil)))["holds"].([]any) {
		m := h.(map[string]any)
		detail := m["mode"] // a lock's mode, a member's name or a claimed item's id
		if detail == nil {
			detail = cmp.Or(m["member"], m["item"])
		}
		out = append(out, fmt.Sprintf("%v %v %v %v", m["kind"], m["name"], detail, m["state"]))
	}
	return out
}

// dashboard drives the dashboard's pages, static files and stream.
func (s *specChecker) dashboard(t *testing.T) {
	s.do(t, 200, specReq("GET", "/", nil))
	s.do(t, 200, specReq("GET", "/?q=orders", nil))
	for _, page := range []string{"locks", "semaphores", "leases", "contention", "elections", "barriers", "queues", "znodes"} {
		s.do(t, 200, specReq("GET", "/ui/"+page, nil))
	}
	s.do(t, 200, specReq("GET", "/ui/contention?window=1h&kind=lock&name=orders", nil))
	s.do(t, 400, specReq("GET", "/ui/contention?window=2h", nil, specRejects()))
	s.do(t, 400, specReq("GET", "/ui/contention?kind=queue&name=orders", nil, specRejects()))
	s.do(t, 400, specReq("GET", "/ui/contention?kind=lock&name=..", nil))
	s.do(t, 426, specReq("GET", "/ws?page=contention&window=1m&kind=semaphore&name=pool", nil))
	specWantCode(t, s.do(t, 400, specReq("GET", "/ws?page=contention&window=5m", nil, specRejects())), "invalid_request")
	s.do(t, 200, specReq("GET", "/ui/znodes?view=hex&page=0", nil))
	specWantCode(t, s.do(t, 404, specReq("GET", "/ui/nope", nil, specRejects())), "not_found")
	for _, f := range []string{"dashboard.css", "dashboard.js", "favicon.svg"} {
		s.do(t, 200, specReq("GET", "/ui/static/"+f, nil))
	}
	s.do(t, 404, specReq("GET", "/ui/static/nope.css", nil))
	specWantCode(t, s.do(t, 400, specReq("GET", "/ws", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/ws?page=nope", nil, specRejects())), "invalid_request")
	s.do(t, 426, specReq("GET", "/ws?page=overview", nil)) // not a WebSocket handshake
	// Without tokens the dashboard acts for no one.
	specWantCode(t, s.do(t, 403, specReq("GET", "/ui/leases/00000000-0000-4000-8000-000000000000/revoke", nil)), "forbidden")

	// Without tokens there is nothing to sign in to: the sign-in sends the
	// browser to the dashboard.
	for _, c := range []specCall{
		specReq("GET", "/signin?next=/ui/locks", nil),
		specReq("POST", "/signin", nil, specForm(url.Values{"token": {"anything"}})),
		specReq("POST", "/signout", nil),
	} {
		r := s.do(t, http.StatusSeeOther, c)
		if loc := r.Header.Get("Location"); c.path != "/signout" && loc != "/" {
			t.Errorf("%s %s without tokens: Location %q, want /", c.method, c.path, loc)
		}
	}

	// The stream: a snapshot of the page first.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := specReq("GET", "/ws?page=overview", nil)
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.base, "http")+c.path, nil)
	if err != nil {
		t.Fatalf("dial /ws: %v", err)
	}
	defer conn.CloseNow()
	s.check(t, http.StatusSwitchingProtocols, c, specSent{resp: gwtest.Response{Status: resp.StatusCode, Header: resp.Header}})
	if typ, msg, err := conn.Read(ctx); err != nil || typ != websocket.MessageText || len(msg) == 0 {
		t.Errorf("the first message of /ws: %v %d bytes, %v", typ, len(msg), err)
	}
	_ = conn.Close(websocket.StatusNormalClosure, "")
}

// elections drives /v1/elections.
func (s *specChecker) elections(t *testing.T) {
	x, y := s.newLease(t, "x"), s.newLease(t, "y")
	campaign := specCampaign

	lead := s.do(t, 200, specReq("POST", "/v1/elections/primary/campaign", campaign(x, "10.0.0.5:8080")))
	again := s.do(t, 200, specReq("POST", "/v1/elections/primary/campaign?wait=5s", campaign(x, "10.0.0.5:8080")))
	if specInt(t, again, "token") != specInt(t, lead, "token") || specJSON(t, again)["node"] != specJSON(t, lead)["node"] {
		t.Errorf("a retried campaign must return the same leadership: %s then %s", lead.Body, again.Body)
	}
	line := specJSON(t, s.do(t, 202, specReq("POST", "/v1/elections/primary/campaign", campaign(y, "10.0.0.6:8080"))))
	if line["position"] != float64(1) || line["leader"].(map[string]any)["lease"] != x {
		t.Errorf("a candidate in line: %v", line)
	}
	s.do(t, 202, specReq("POST", "/v1/elections/primary/campaign?wait=200ms", campaign(y, "10.0.0.6:8080")))
	if got := s.holdKinds(t, x); len(got) != 1 || got[0] != "election primary <nil> held" {
		t.Errorf("the leader's lease holds %v", got)
	}
	st := s.do(t, 200, specReq("GET", "/v1/elections/primary", nil))
	if m := specJSON(t, st); m["leader"].(map[string]any)["value"] != "10.0.0.5:8080" || len(m["candidates"].([]any)) != 2 {
		t.Errorf("election state %s", st.Body)
	}
	if l := specJSON(t, s.do(t, 200, specReq("GET", "/v1/elections", nil)))["elections"].([]any); len(l) != 1 {
		t.Errorf("GET /v1/elections: %v", l)
	}
	proclaimed := specJSON(t, s.do(t, 200, specReq("PUT", "/v1/elections/primary/value", campaign(x, "10.0.0.5:9090"))))
	if proclaimed["value"] != "10.0.0.5:9090" {
		t.Errorf("proclaim: %v", proclaimed)
	}
	specWantCode(t, s.do(t, 409, specReq("PUT", "/v1/elections/primary/value", campaign(y, "me"))), "not_leader")

	// The leader resigns: a waiting read sees the next one lead.
	idx := specIndex(t, st)
	pending := s.startRead(fmt.Sprintf("/v1/elections/primary?index=%d&wait=1m", idx))
	<-pending.wrote
	s.do(t, 204, specReq("POST", "/v1/elections/primary/resign", map[string]any{"lease": x}))
	r := pending.wait(t, 2*time.Minute)
	s.check(t, 200, pending.call, r)
	if got := specIndex(t, r.resp); got <= idx && r.elapsed < time.Minute {
		t.Errorf("GET %s returned index %d after %s, neither after the resignation nor after its wait", pending.call.path, got, r.elapsed)
	}
	s.readUntil(t, "/v1/elections/primary", idx, "y leading", func(st map[string]any) bool {
		l, _ := st["leader"].(map[string]any)
		return l != nil && l["lease"] == y
	})
	s.do(t, 200, specReq("POST", "/v1/elections/primary/campaign", campaign(y, "10.0.0.6:8080")))
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/elections/primary/resign", map[string]any{"lease": x})), "not_held")
	specWantCode(t, s.do(t, 409, specReq("PUT", "/v1/elections/primary/value", campaign(x, "me"))), "not_leader")

	// A lease made by the campaign itself.
	implicit := specJSON(t, s.do(t, 202, specReq("POST", "/v1/elections/primary/campaign", map[string]any{"ttl": "20s", "holder": "z"})))
	s.do(t, 204, specReq("DELETE", "/v1/leases/"+implicit["lease"].(string), nil))

	s.electionErrors(t, x, y)

	// No leader is reported, not skipped.
	s.do(t, 204, specReq("POST", "/v1/elections/primary/resign", map[string]any{"lease": y}))
	if m := specJSON(t, s.do(t, 200, specReq("GET", "/v1/elections/primary", nil))); m["leader"] != nil || len(m["candidates"].([]any)) != 0 {
		t.Errorf("an election without candidates: %v", m)
	}
	s.do(t, 204, specReq("DELETE", "/v1/leases/"+x, nil))
	for _, cl := range []specCall{
		specReq("POST", "/v1/elections/primary/campaign", campaign(x, "v")),
		specReq("POST", "/v1/elections/primary/resign", map[string]any{"lease": x}),
		specReq("PUT", "/v1/elections/primary/value", campaign(x, "v")),
	} {
		specWantCode(t, s.do(t, 410, cl), "lease_expired")
	}
	s.do(t, 204, specReq("DELETE", "/v1/leases/"+y, nil))
}

// specCampaign is the body of a campaign (or a proclaim) of lease with
// value.
func specCampaign(lease, value string) map[string]any {
	return map[string]any{"lease": lease, "value": value}
}

// electionErrors: bad election requests, and unknown leases (x and y are
// alive, y leads).
func (s *specChecker) electionErrors(t *testing.T, x, y string) {
	t.Helper()
	campaign := specCampaign
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/elections/bad%20name/campaign", campaign(x, "v"), specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/elections/primary/campaign?wait=2m", campaign(x, "v"))), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/elections/primary/campaign", map[string]any{"lease": x, "value": 5}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/elections/primary/campaign", map[string]any{"lease": x, "ttl": "5s"}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 404, specReq("POST", "/v1/elections/primary/campaign", campaign(specUnknownLease, "v"))), "lease_not_found")
	specWantCode(t, s.do(t, 415, specReq("POST", "/v1/elections/primary/campaign", `{}`, specContentType("application/xml"), specRejects())), "unsupported_media_type")
	specWantCode(t, s.do(t, 413, specReq("POST", "/v1/elections/primary/campaign", campaign(x, strings.Repeat("v", 70<<10)), specRejects())), "too_large")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/elections/primary/resign", map[string]any{}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 404, specReq("POST", "/v1/elections/primary/resign", map[string]any{"lease": specUnknownLease})), "lease_not_found")
	specWantCode(t, s.do(t, 415, specReq("POST", "/v1/elections/primary/resign", `{}`, specContentType("text/html"), specRejects())), "unsupported_media_type")
	specWantCode(t, s.do(t, 413, specReq("POST", "/v1/elections/primary/resign", map[string]any{"lease": x, "pad": strings.Repeat("x", 70<<10)}, specRejects())), "too_large")
	specWantCode(t, s.do(t, 400, specReq("PUT", "/v1/elections/primary/value", map[string]any{"lease": y}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 404, specReq("PUT", "/v1/elections/primary/value", campaign(specUnknownLease, "v"))), "lease_not_found")
	specWantCode(t, s.do(t, 415, specReq("PUT", "/v1/elections/primary/value", `{}`, specContentType("application/xml"), specRejects())), "unsupported_media_type")
	specWantCode(t, s.do(t, 413, specReq("PUT", "/v1/elections/primary/value", campaign(y, strings.Repeat("v", 70<<10)), specRejects())), "too_large")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/elections/primary?index=x", nil, specRejects())), "invalid_request")
}

// barriers drives /v1/barriers.
func (s *specChecker) barriers(t *testing.T, conn *zk.Conn, root string) {
	raised := specJSON(t, s.do(t, 201, specReq("PUT", "/v1/barriers/deploy", nil)))
	if raised["raised"] != true {
		t.Errorf("raise: %v", raised)
	}
	s.do(t, 200, specReq("PUT", "/v1/barriers/deploy", nil))
	st := s.do(t, 200, specReq("GET", "/v1/barriers/deploy", nil))
	if m := specJSON(t, st); m["raised"] != true || m["since"] == nil {
		t.Errorf("a raised barrier: %s", st.Body)
	}
	if l := specJSON(t, s.do(t, 200, specReq("GET", "/v1/barriers", nil)))["barriers"].([]any); len(l) != 1 {
		t.Errorf("GET /v1/barriers: %v", l)
	}
	if p := specWantCode(t, s.do(t, 409, specReq("POST", "/v1/barriers/deploy/wait", nil)), "timeout"); p["raised"] != true {
		t.Errorf("a barrier wait that timed out: %v", p)
	}
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/barriers/deploy/wait?wait=200ms", nil)), "timeout")

	// Lowering releases a waiter, and a blocking read.
	idx := specIndex(t, st)
	waiter := s.startCall(specReq("POST", "/v1/barriers/deploy/wait?wait=1m", nil))
	read := s.startRead(fmt.Sprintf("/v1/barriers/deploy?index=%d&wait=1m", idx))
	<-waiter.wrote
	<-read.wrote
	s.do(t, 204, specReq("DELETE", "/v1/barriers/deploy", nil))
	r := waiter.wait(t, 2*time.Minute)
	s.check(t, 200, waiter.call, r)
	if specJSON(t, r.resp)["raised"] != false {
		t.Errorf("the released waiter got %s", r.resp.Body)
	}
	r = read.wait(t, 2*time.Minute)
	s.check(t, 200, read.call, r)
	if got := specIndex(t, r.resp); got <= idx && r.elapsed < time.Minute {
		t.Errorf("GET %s returned index %d after %s, neither after the change nor after its wait", read.call.path, got, r.elapsed)
	}
	s.readUntil(t, "/v1/barriers/deploy", idx, "lowered", func(st map[string]any) bool { return st["raised"] == false })
	s.do(t, 204, specReq("DELETE", "/v1/barriers/deploy", nil))
	s.do(t, 200, specReq("POST", "/v1/barriers/never-raised/wait", nil))

	// A node with children is no zkgate barrier.
	odd := root + "/barriers/odd"
	if _, err := conn.Create(odd, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(odd+"/child", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	specWantCode(t, s.do(t, 400, specReq("DELETE", "/v1/barriers/odd", nil)), "invalid_request")
	for _, p := range []string{odd + "/child", odd} {
		if err := conn.Delete(p, -1); err != nil {
			t.Fatal(err)
		}
	}

	specWantCode(t, s.do(t, 400, specReq("PUT", "/v1/barriers/..", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("DELETE", "/v1/barriers/a%20b", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/barriers/deploy/wait?wait=soon", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/barriers/deploy?index=-5", nil, specRejects())), "invalid_request")
}

// doubleBarriers drives /v1/double-barriers.
func (s *specChecker) doubleBarriers(t *testing.T) {
	p, q := s.newLease(t, "p"), s.newLease(t, "q")
	enter := func(lease, member string, count int) map[string]any {
		return map[string]any{"lease": lease, "member": member, "count": count}
	}
	timeout := specWantCode(t, s.do(t, 409, specReq("POST", "/v1/double-barriers/batch/enter", enter(p, "w1", 2))), "timeout")
	if timeout["count"] != float64(2) || len(timeout["members"].([]any)) != 1 {
		t.Errorf("an enter that timed out: %v", timeout)
	}
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/double-barriers/batch/enter?wait=200ms", enter(p, "w1", 2))), "timeout")
	if p := specWantCode(t, s.do(t, 409, specReq("POST", "/v1/double-barriers/batch/enter", enter(q, "w2", 3))), "count_mismatch"); p["count"] != float64(2) {
		t.Errorf("count_mismatch carries count %v, want 2", p["count"])
	}
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/double-barriers/batch/enter", enter(p, "w1", 3))), "count_mismatch")
	if got := s.holdKinds(t, p); len(got) != 1 || got[0] != "double-barrier batch w1 waiting" {
		t.Errorf("the member's lease holds %v", got)
	}
	st := s.do(t, 200, specReq("GET", "/v1/double-barriers/batch", nil))
	if m := specJSON(t, st); m["ready"] != false || m["count"] != float64(2) {
		t.Errorf("double barrier state %s", st.Body)
	}
	// The second member makes it ready, which releases the first.
	first := s.startCall(specReq("POST", "/v1/double-barriers/batch/enter?wait=1m", enter(p, "w1", 2)))
	<-first.wrote
	s.do(t, 200, specReq("POST", "/v1/double-barriers/batch/enter?wait=1m", enter(q, "w2", 2)))
	r := first.wait(t, 2*time.Minute)
	s.check(t, 200, first.call, r)
	if l := specJSON(t, s.do(t, 200, specReq("GET", "/v1/double-barriers", nil)))["double_barriers"].([]any); len(l) != 1 {
		t.Errorf("GET /v1/double-barriers: %v", l)
	}
	s.readUntil(t, "/v1/double-barriers/batch", specIndex(t, st), "ready", func(st map[string]any) bool { return st["ready"] == true })

	// Leaving: both wait for each other.
	leave := func(lease, member string) map[string]any { return map[string]any{"lease": lease, "member": member} }
	second := s.startCall(specReq("POST", "/v1/double-barriers/batch/leave?wait=1m", leave(q, "w2")))
	<-second.wrote
	s.do(t, 200, specReq("POST", "/v1/double-barriers/batch/leave?wait=1m", leave(p, "w1")))
	r = second.wait(t, 2*time.Minute)
	s.check(t, 200, second.call, r)
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/double-barriers/batch/leave", leave(p, "w1"))), "not_held")

	// A leave that times out: the other member is still in.
	s.do(t, 409, specReq("POST", "/v1/double-barriers/pair/enter", enter(p, "m1", 2)))
	s.do(t, 200, specReq("POST", "/v1/double-barriers/pair/enter", enter(q, "m2", 2)))
	s.readUntil(t, "/v1/double-barriers/pair", 1, "ready", func(st map[string]any) bool { return st["ready"] == true })
	if p := specWantCode(t, s.do(t, 409, specReq("POST", "/v1/double-barriers/pair/leave", leave(q, "m2"))), "timeout"); len(p["members"].([]any)) != 1 {
		t.Errorf("a leave that timed out: %v", p)
	}
	s.do(t, 200, specReq("POST", "/v1/double-barriers/pair/leave?wait=1m", leave(p, "m1")))
	s.do(t, 200, specReq("POST", "/v1/double-barriers/pair/leave?wait=1m", leave(q, "m2")))

	// A lease made by the enter itself.
	solo := specJSON(t, s.do(t, 200, specReq("POST", "/v1/double-barriers/solo/enter", map[string]any{"ttl": "20s", "holder": "solo", "member": "only", "count": 1})))
	s.do(t, 200, specReq("POST", "/v1/double-barriers/solo/leave", leave(solo["lease"].(string), "only")))
	s.do(t, 204, specReq("DELETE", "/v1/leases/"+solo["lease"].(string), nil))

	// Errors.
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/double-barriers/batch/enter", enter(p, "ready", 2), specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/double-barriers/batch/enter", enter(p, "a/b", 2), specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/double-barriers/batch/enter", enter(p, "w1", 0), specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/double-barriers/batch/enter", map[string]any{"lease": p, "member": "w1"}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/double-barriers/batch/enter?wait=2m", enter(p, "w1", 2))), "invalid_request")
	specWantCode(t, s.do(t, 404, specReq("POST", "/v1/double-barriers/batch/enter", enter(specUnknownLease, "w1", 2))), "lease_not_found")
	specWantCode(t, s.do(t, 415, specReq("POST", "/v1/double-barriers/batch/enter", `{}`, specContentType("application/xml"), specRejects())), "unsupported_media_type")
	specWantCode(t, s.do(t, 413, specReq("POST", "/v1/double-barriers/batch/enter", map[string]any{"holder": strings.Repeat("h", 70<<10)}, specRejects())), "too_large")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/double-barriers/batch/leave", map[string]any{"lease": p}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 404, specReq("POST", "/v1/double-barriers/batch/leave", leave(specUnknownLease, "w1"))), "lease_not_found")
	specWantCode(t, s.do(t, 415, specReq("POST", "/v1/double-barriers/batch/leave", `{}`, specContentType("application/xml"), specRejects())), "unsupported_media_type")
	specWantCode(t, s.do(t, 413, specReq("POST", "/v1/double-barriers/batch/leave", map[string]any{"pad": strings.Repeat("h", 70<<10)}, specRejects())), "too_large")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/double-barriers/batch?wait=-1s", nil, specRejects())), "invalid_request")
	s.do(t, 204, specReq("DELETE", "/v1/leases/"+p, nil))
	specWantCode(t, s.do(t, 410, specReq("POST", "/v1/double-barriers/batch/enter", enter(p, "w1", 2))), "lease_expired")
	specWantCode(t, s.do(t, 410, specReq("POST", "/v1/double-barriers/batch/leave", leave(p, "w1"))), "lease_expired")
	s.do(t, 204, specReq("DELETE", "/v1/leases/"+q, nil))
}

// queues drives /v1/queues.
func (s *specChecker) queues(t *testing.T) {
	k := s.newLease(t, "worker-1")
	raw := specRaw
	world := s.queueProduced(t)
	claim := specReq("POST", "/v1/queues/jobs/claim", map[string]any{"lease": k})
	s.queueClaims(t, k, world, claim)

	// An item claimed by k keeps the queue from being empty from here on
	// (the state of an empty queue has a test of its own), hidden from
	// takes and other claims.
	keep := specJSON(t, s.do(t, 201, raw("POST", "/v1/queues/jobs/items?priority=900", "keep")))["id"].(string)
	if r := s.do(t, 200, claim); r.Header.Get("X-Zkgate-Item-Id") != keep {
		t.Fatalf("claimed %s, want %s", r.Header.Get("X-Zkgate-Item-Id"), keep)
	}

	s.queueWaits(t)
	s.queueErrors(t, k, world)
	s.queueDelayed(t)

	// Queues are persistent: an empty one is deleted by hand.
	specWantCode(t, s.do(t, 409, specReq("DELETE", "/v1/queues/jobs", nil)), "not_empty")
	s.do(t, 204, specReq("POST", "/v1/queues/jobs/items/"+keep+"/ack", map[string]any{"lease": k}))
	s.do(t, 204, specReq("DELETE", "/v1/queues/jobs", nil))
	s.do(t, 204, specReq("DELETE", "/v1/queues/jobs", nil))

	s.do(t, 204, specReq("DELETE", "/v1/leases/"+k, nil))
	for _, cl := range []specCall{
		specReq("POST", "/v1/queues/jobs/claim", map[string]any{"lease": k}),
		specReq("POST", "/v1/queues/jobs/items/"+world+"/ack", map[string]any{"lease": k}),
		specReq("POST", "/v1/queues/jobs/items/"+world+"/nack", map[string]any{"lease": k}),
	} {
		specWantCode(t, s.do(t, 410, cl), "lease_expired")
	}
}

// specRaw is a call with data as an application/octet-stream body.
func specRaw(method, path, data string, opts ...specOption) specCall {
	return specReq(method, path, []byte(data), append([]specOption{specContentType("application/octet-stream")}, opts...)...)
}

// queueProduced: four items produced to jobs in each content type, the
// queue's state, list and peek, and a take of the first by priority; it
// returns the id of the next item ("world").
func (s *specChecker) queueProduced(t *testing.T) (world string) {
	t.Helper()
	raw := specRaw
	first := s.do(t, 201, raw("POST", "/v1/queues/jobs/items?priority=5", "hello"))
	hello := specJSON(t, first)["id"].(string)
	if loc := first.Header.Get("Location"); loc != "/v1/queues/jobs/items/"+hello {
		t.Errorf("Location %q for item %s", loc, hello)
	}
	world = specJSON(t, s.do(t, 201, raw("POST", "/v1/queues/jobs/items", "world")))["id"].(string)
	s.do(t, 201, raw("POST", "/v1/queues/jobs/items", `{"any":"bytes"}`, specContentType("application/json")))
	s.do(t, 201, specReq("POST", "/v1/queues/jobs/items", nil))
	st := specJSON(t, s.do(t, 200, specReq("GET", "/v1/queues/jobs", nil)))
	if st["length"] != float64(4) || st["head"].([]any)[0].(map[string]any)["id"] != hello {
		t.Errorf("queue state %v", st)
	}
	if h := specJSON(t, s.do(t, 200, specReq("GET", "/v1/queues/jobs?head=1", nil)))["head"].([]any); len(h) != 1 {
		t.Errorf("?head=1 gave %v", h)
	}
	if l := specJSON(t, s.do(t, 200, specReq("GET", "/v1/queues", nil)))["queues"].([]any); len(l) != 1 {
		t.Errorf("GET /v1/queues: %v", l)
	}
	if r := s.do(t, 200, specReq("GET", "/v1/queues/jobs/items/"+hello, nil)); string(r.Body) != "hello" || r.Header.Get("X-Zkgate-Item-Id") != hello {
		t.Errorf("peek: %q %v", r.Body, r.Header)
	}
	if r := s.do(t, 200, specReq("POST", "/v1/queues/jobs/take", nil)); string(r.Body) != "hello" {
		t.Errorf("take: %q, want the priority 5 item", r.Body)
	}
	specWantCode(t, s.do(t, 404, specReq("GET", "/v1/queues/jobs/items/"+hello, nil)), "not_found")
	return world
}

// queueClaims: claim, a call of k on jobs, gets world, the same item to a
// retry, served again after a nack, and gone after an ack.
func (s *specChecker) queueClaims(t *testing.T, k, world string, claim specCall) {
	t.Helper()
	c1 := s.do(t, 200, claim)
	if string(c1.Body) != "world" || c1.Header.Get("X-Zkgate-Lease") != k {
		t.Errorf("claim: %q %v", c1.Body, c1.Header)
	}
	if c2 := s.do(t, 200, claim); c2.Header.Get("X-Zkgate-Item-Id") != world {
		t.Errorf("a retried claim got item %s, want %s", c2.Header.Get("X-Zkgate-Item-Id"), world)
	}
	if got := s.holdKinds(t, k); len(got) != 1 || got[0] != "claim jobs "+world+" held" {
		t.Errorf("the claiming lease holds %v", got)
	}
	if st := specJSON(t, s.do(t, 200, specReq("GET", "/v1/queues/jobs", nil))); st["claimed"] != float64(1) {
		t.Errorf("queue state with a claim: %v", st)
	}
	s.do(t, 204, specReq("POST", "/v1/queues/jobs/items/"+world+"/nack", map[string]any{"lease": k}))
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/queues/jobs/items/"+world+"/nack", map[string]any{"lease": k})), "not_claimed")
	if c3 := s.do(t, 200, claim); c3.Header.Get("X-Zkgate-Item-Id") != world {
		t.Errorf("after a nack the claim got %s, want %s again", c3.Header.Get("X-Zkgate-Item-Id"), world)
	}
	s.do(t, 204, specReq("POST", "/v1/queues/jobs/items/"+world+"/ack", map[string]any{"lease": k}))
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/queues/jobs/items/"+world+"/ack", map[string]any{"lease": k})), "not_claimed")
	s.do(t, 200, specReq("POST", "/v1/queues/jobs/take?wait=1s", nil))
	s.do(t, 200, specReq("POST", "/v1/queues/jobs/take", nil))
	s.do(t, 204, specReq("POST", "/v1/queues/jobs/take", nil))
	s.do(t, 204, specReq("POST", "/v1/queues/jobs/take?wait=200ms", nil))
	s.do(t, 204, specReq("POST", "/v1/queues/jobs/claim?wait=200ms", map[string]any{"ttl": "10s", "holder": "late"}))
}

// queueWaits: a waiting take and a blocking read both see the next item,
// and an item claimed by a lease made for it is served again once that
// lease ends.
func (s *specChecker) queueWaits(t *testing.T) {
	t.Helper()
	raw := specRaw
	idx := specIndex(t, s.do(t, 200, specReq("GET", "/v1/queues/jobs", nil)))
	taker := s.startCall(specReq("POST", "/v1/queues/jobs/take?wait=1m", nil))
	read := s.startRead(fmt.Sprintf("/v1/queues/jobs?index=%d&wait=1m", idx))
	<-taker.wrote
	<-read.wrote
	s.do(t, 201, raw("POST", "/v1/queues/jobs/items", "late news"))
	r := taker.wait(t, 2*time.Minute)
	s.check(t, 200, taker.call, r)
	if string(r.resp.Body) != "late news" {
		t.Errorf("the waiting take got %q", r.resp.Body)
	}
	r = read.wait(t, 2*time.Minute)
	s.check(t, 200, read.call, r)
	if got := specIndex(t, r.resp); got <= idx && r.elapsed < time.Minute {
		t.Errorf("GET %s returned index %d after %s, neither after the change nor after its wait", read.call.path, got, r.elapsed)
	}
	// A claim by a lease made for it.
	s.do(t, 201, raw("POST", "/v1/queues/jobs/items", "for a new lease"))
	implicit := s.do(t, 200, specReq("POST", "/v1/queues/jobs/claim", map[string]any{"ttl": "20s", "holder": "w2"}))
	s.do(t, 204, specReq("DELETE", "/v1/leases/"+implicit.Header.Get("X-Zkgate-Lease"), nil))
	s.do(t, 200, specReq("POST", "/v1/queues/jobs/take", nil)) // served again once its lease ended
}

// queueDelayed: an item produced with a delay is not served before it is
// due, shows in the state, and is served to a take waiting for it; bad due
// times are refused.
func (s *specChecker) queueDelayed(t *testing.T) {
	t.Helper()
	r := s.do(t, 201, specRaw("POST", "/v1/queues/later/items?delay=400ms&priority=7", "later"))
	if it := specJSON(t, r); !strings.HasPrefix(it["id"].(string), "due-") || it["not_before"] == nil || r.Header.Get("Location") != "" {
		t.Errorf("a delayed produce answered %v, Location %q", it, r.Header.Get("Location"))
	}
	s.do(t, 201, specRaw("POST", "/v1/queues/later/items?not_before="+time.Now().Add(2*time.Second).UTC().Format(time.RFC3339), "much later"))
	st := specJSON(t, s.do(t, 200, specReq("GET", "/v1/queues/later", nil)))
	if st["delayed"] != float64(2) || st["next_due"] == nil {
		t.Errorf("the state with delayed items: %v", st)
	}
	if r := s.do(t, 200, specReq("POST", "/v1/queues/later/take?wait=1m", nil)); string(r.Body) != "later" {
		t.Errorf("the waiting take got %q", r.Body)
	}
	s.do(t, 204, specReq("POST", "/v1/queues/later/take", nil))
	specWantCode(t, s.do(t, 409, specReq("DELETE", "/v1/queues/later", nil)), "not_empty")
	if r := s.do(t, 200, specReq("POST", "/v1/queues/later/take?wait=1m", nil)); string(r.Body) != "much later" {
		t.Errorf("the waiting take got %q", r.Body)
	}
	s.do(t, 204, specReq("DELETE", "/v1/queues/later", nil))
	// The spec's pattern and format refuse these; its prose, the others
	// (the cap of 30 days, not both).
	for _, q := range []string{"delay=-1s", "delay=soon", "not_before=tomorrow"} {
		specWantCode(t, s.do(t, 400, specRaw("POST", "/v1/queues/later/items?"+q, "x", specRejects())), "invalid_request")
	}
	for _, q := range []string{"delay=721h", "not_before=2099-01-01T00:00:00Z", "delay=1s&not_before=" + time.Now().UTC().Format(time.RFC3339)} {
		specWantCode(t, s.do(t, 400, specRaw("POST", "/v1/queues/later/items?"+q, "x")), "invalid_request")
	}
}

// queueErrors: bad queue requests, and unknown leases (k is alive).
func (s *specChecker) queueErrors(t *testing.T, k, world string) {
	t.Helper()
	raw := specRaw
	specWantCode(t, s.do(t, 400, raw("POST", "/v1/queues/jobs/items?priority=1000", "x", specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, raw("POST", "/v1/queues/jobs/items?priority=high", "x", specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, raw("POST", "/v1/queues/bad%20name/items", "x", specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 413, raw("POST", "/v1/queues/jobs/items", strings.Repeat("x", 600<<10))), "too_large")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/queues/jobs?head=101", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/queues/jobs?head=-1", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/queues/jobs/items/nope", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/queues/jobs/items/nope/ack", map[string]any{"lease": k}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/queues/jobs/items/"+world+"/ack", map[string]any{}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 404, specReq("POST", "/v1/queues/jobs/items/"+world+"/ack", map[string]any{"lease": specUnknownLease})), "lease_not_found")
	specWantCode(t, s.do(t, 415, specReq("POST", "/v1/queues/jobs/items/"+world+"/ack", `{}`, specContentType("application/xml"), specRejects())), "unsupported_media_type")
	specWantCode(t, s.do(t, 413, specReq("POST", "/v1/queues/jobs/items/"+world+"/ack", map[string]any{"pad": strings.Repeat("x", 70<<10)}, specRejects())), "too_large")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/queues/jobs/items/nope/nack", map[string]any{"lease": k}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 404, specReq("POST", "/v1/queues/jobs/items/"+world+"/nack", map[string]any{"lease": specUnknownLease})), "lease_not_found")
	specWantCode(t, s.do(t, 415, specReq("POST", "/v1/queues/jobs/items/"+world+"/nack", `{}`, specContentType("application/xml"), specRejects())), "unsupported_media_type")
	specWantCode(t, s.do(t, 413, specReq("POST", "/v1/queues/jobs/items/"+world+"/nack", map[string]any{"pad": strings.Repeat("x", 70<<10)}, specRejects())), "too_large")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/queues/jobs/take?wait=2m", nil)), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/queues/jobs/claim", map[string]any{"lease": k, "mode": "x"}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 404, specReq("POST", "/v1/queues/jobs/claim", map[string]any{"lease": specUnknownLease})), "lease_not_found")
	specWantCode(t, s.do(t, 415, specReq("POST", "/v1/queues/jobs/claim", `{}`, specContentType("application/xml"), specRejects())), "unsupported_media_type")
	specWantCode(t, s.do(t, 413, specReq("POST", "/v1/queues/jobs/claim", map[string]any{"holder": strings.Repeat("x", 70<<10)}, specRejects())), "too_large")
	specWantCode(t, s.do(t, 400, specReq("DELETE", "/v1/queues/..", nil, specRejects())), "invalid_request")
}

func specLeaseIDs(t *testing.T, r gwtest.Response) []string {
	t.Helper()
	var out []string
	for _, l := range specJSON(t, r)["leases"].([]any) {
		out = append(out, l.(map[string]any)["id"].(string))
	}
	return out
}

func specLater(t *testing.T, a, b string) bool {
	t.Helper()
	ta, err := time.Parse(time.RFC3339Nano, a)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := time.Parse(time.RFC3339Nano, b)
	if err != nil {
		t.Fatal(err)
	}
	return ta.After(tb)
}

// TestOpenAPISemaphoreBlockingRead checks the blocking reads of a
// semaphore, whose state spans its slots and its admission queue.
func TestOpenAPISemaphoreBlockingRead(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	s := newSpecChecker(t, g.URL, specLoad(t, zkgate.OpenAPI))
	newLease := func(holder string) string {
		return specJSON(t, s.do(t, 201, specReq("POST", "/v1/leases", map[string]any{"ttl": "1m", "holder": holder})))["id"].(string)
	}
	a, b, c := newLease("a"), newLease("b"), newLease("c")
	s.do(t, 200, specReq("POST", "/v1/semaphores/pool/acquire", map[string]any{"lease": a, "limit": 1}))
	idx := specIndex(t, s.do(t, 200, specReq("GET", "/v1/semaphores/pool", nil)))

	// Nothing changes: the read waits out its wait, then returns the
	// unchanged state.
	idx = s.quietRead(t, "/v1/semaphores/pool", idx)

	// b waits for the slot: it holds the admission queue and makes a slot
	// node of its own.
	acquireB := specReq("POST", "/v1/semaphores/pool/acquire?wait=1m", map[string]any{"lease": b, "limit": 1})
	doneB := make(chan specSent, 1)
	go func() { doneB <- s.send(context.Background(), acquireB, nil) }()
	waiters := func(n int) func(map[string]any) bool {
		return func(st map[string]any) bool { return len(st["waiters"].([]any)) == n }
	}
	s.readUntil(t, "/v1/semaphores/pool", idx, "one waiter", waiters(1))
	idx = specIndex(t, s.do(t, 200, specReq("GET", "/v1/semaphores/pool", nil)))

	// c queues behind b: only the admission queue changes, and a read
	// waiting on the semaphore must see it.
	const wait = 20 * time.Second
	pending := s.startRead(fmt.Sprintf("/v1/semaphores/pool?index=%d&wait=%s", idx, wait))
	<-pending.wrote
	acquireC := specReq("POST", "/v1/semaphores/pool/acquire?wait=1m", map[string]any{"lease": c, "limit": 1})
	doneC := make(chan specSent, 1)
	go func() { doneC <- s.send(context.Background(), acquireC, nil) }()
	s.eventually(t, "/v1/semaphores/pool", "two waiters", waiters(2))
	r := pending.wait(t, 2*wait)
	s.check(t, 200, pending.call, r)
	if r.elapsed >= wait {
		t.Errorf("GET %s did not return when c joined the queue, only when its wait of %s ended (index %d, was %d)",
			pending.call.path, wait, specIndex(t, r.resp), idx)
	}

	// a's release wakes a waiting read, and hands the slot to b.
	idx = specIndex(t, s.do(t, 200, specReq("GET", "/v1/semaphores/pool", nil)))
	s.wokenByRelease(t, "/v1/semaphores/pool", idx, a)
	s.check(t, 200, acquireB, gwtest.Receive(t, doneB, time.Minute, "b getting the slot a released"))
	s.readUntil(t, "/v1/semaphores/pool", idx, "b holding, c waiting", func(st map[string]any) bool {
		h := specHolderLeases(t, st["holders"])
		return len(h) == 1 && h[0] == b && len(st["waiters"].([]any)) == 1
	})

	// b's release hands the slot to c.
	s.do(t, 204, specReq("POST", "/v1/semaphores/pool/release", map[string]any{"lease": b}))
	s.check(t, 200, acquireC, gwtest.Receive(t, doneC, time.Minute, "c getting the slot b released"))
	for _, l := range []string{a, b, c} {
		s.do(t, 204, specReq("DELETE", "/v1/leases/"+l, nil))
	}
}

// TestOpenAPIEmptyQueue checks the state of empty queues against the spec:
// "head" is a list, empty, never null.
func TestOpenAPIEmptyQueue(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	s := newSpecChecker(t, g.URL, specLoad(t, zkgate.OpenAPI))
	s.do(t, 200, specReq("GET", "/v1/queues/never", nil))
	s.do(t, 201, specReq("POST", "/v1/queues/drained/items", []byte("x"), specContentType("application/octet-stream")))
	s.do(t, 200, specReq("POST", "/v1/queues/drained/take", nil))
	s.do(t, 200, specReq("GET", "/v1/queues/drained", nil))
	s.do(t, 200, specReq("GET", "/v1/queues", nil))
	s.do(t, 204, specReq("DELETE", "/v1/queues/drained", nil))
}

// TestOpenAPIUnavailable checks the 503 answers of the spec against a
// gateway whose own ZooKeeper is killed and brought back: readiness, and a
// keepalive that extends the lease while answering 503.
func TestOpenAPIUnavailable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	zs := gwtest.OwnZK(t) // stopped after the gateway's own cleanup
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{ZK: []string{zs.Addr()}, SessionTimeout: 30 * time.Second})
	s := newSpecChecker(t, g.URL, specLoad(t, zkgate.OpenAPI))

	created := s.do(t, 201, specReq("POST", "/v1/leases", map[string]any{"ttl": "40s", "holder": "blip"}))
	id := specJSON(t, created)["id"].(string)
	firstExpiry := specJSON(t, created)["expires_at"].(string)
	s.do(t, 200, specReq("POST", "/v1/locks/blip/acquire", map[string]any{"lease": id}))

	if err := zs.Kill(); err != nil {
		t.Fatal(err)
	}
	readyz := specReq("GET", "/readyz", nil)
	gwtest.Eventually(t, 30*time.Second, func() error {
		if r := s.send(context.Background(), readyz, nil); r.err != nil || r.resp.Status != http.StatusServiceUnavailable {
			return fmt.Errorf("readyz still %d", r.resp.Status)
		}
		return nil
	})
	r := s.do(t, 503, readyz)
	if r.Header.Get("Retry-After") == "" || specJSON(t, r)["zookeeper"] == "live" {
		t.Errorf("readyz while ZooKeeper is down: %v %s", r.Header, r.Body)
	}
	specWantCode(t, s.do(t, 503, specReq("POST", "/v1/leases/"+id+"/keepalive", nil)), "unavailable")
	specWantCode(t, s.do(t, 503, specReq("GET", "/v1/leases/"+id, nil)), "unavailable")
	specWantCode(t, s.do(t, 503, specReq("POST", "/v1/leases", map[string]any{"ttl": "10s"})), "unavailable")
	specWantCode(t, s.do(t, 503, specReq("POST", "/v1/locks/blip/release", map[string]any{"lease": id})), "unavailable")
	specWantCode(t, s.do(t, 503, specReq("GET", "/v1/locks/blip/fence?token=1", nil)), "unavailable")
	if ids := specLeaseIDs(t, s.do(t, 200, specReq("GET", "/v1/leases", nil))); len(ids) != 1 || ids[0] != id {
		t.Errorf("GET /v1/leases while suspended: %v, want [%s]", ids, id)
	}

	if err := zs.Restart(ctx); err != nil {
		t.Fatalf("restart ZooKeeper: %v", err)
	}
	gwtest.WaitReady(t, g.URL, 30*time.Second)
	s.do(t, 200, readyz)
	back := specJSON(t, s.do(t, 200, specReq("GET", "/v1/leases/"+id, nil)))
	if !specLater(t, back["expires_at"].(string), firstExpiry) {
		t.Errorf("the keepalive answered 503 but did not extend the lease: expires_at %v, was %s", back["expires_at"], firstExpiry)
	}
	if h := back["holds"].([]any); len(h) != 1 {
		t.Errorf("after the blip the lease holds %v, want its lock", h)
	}
	s.do(t, 204, specReq("DELETE", "/v1/leases/"+id, nil))
}

// specIDs lists the "id" of each item.
func specIDs(items []any) []any {
	out := []any{}
	for _, it := range items {
		out = append(out, it.(map[string]any)["id"])
	}
	return out
}
