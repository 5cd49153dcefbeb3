package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// problemProse is what openapi.yaml's prose says of one problem code at one
// place: a response of an operation, or one of the components' responses
// that the operations refer to.
type problemProse struct {
	where  string // "POST /v1/locks/{name}/acquire 409", or "components Unavailable"
	status int
	code   string
	text   string
	fields map[string]string // the problem's members it names, with the value it gives ("" for none)
	header []string          // the headers it names
}

var (
	proseCode  = regexp.MustCompile("`([a-z_]+)`: ")
	proseNamed = regexp.MustCompile("`([^`]+)`")
)

// problemProses reads every problem code's description in doc: each
// "`code`: what it means" of a 4xx or 5xx response's description.
func problemProses(t *testing.T, doc *openapi3.T) []problemProse {
	t.Helper()
	problem := doc.Components.Schemas["Problem"].Value
	codes := map[string]bool{}
	for _, c := range problem.Properties["code"].Value.Enum {
		codes[c.(string)] = true
	}
	var out []problemProse
	read := func(where string, status int, desc string) {
		marks := proseCode.FindAllStringSubmatchIndex(desc, -1)
		for i, m := range marks {
			code := desc[m[2]:m[3]]
			if !codes[code] {
				continue
			}
			end := len(desc)
			if i+1 < len(marks) {
				end = marks[i+1][0]
			}
			p := problemProse{where: where, status: status, code: code, text: strings.Join(strings.Fields(desc[m[1]:end]), " "),
				fields: map[string]string{}}
			for _, n := range proseNamed.FindAllStringSubmatch(p.text, -1) {
				name, value, _ := strings.Cut(n[1], ": ")
				switch {
				case name != "code" && problem.Properties[name] != nil && !codes[name]:
					p.fields[name] = value
				case strings.HasPrefix(name, "Retry-After") || strings.HasPrefix(name, "WWW-Authenticate"):
					p.header = append(p.header, name)
				}
			}
			out = append(out, p)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for key, ref := range op.Responses.Map() {
				status, err := strconv.Atoi(key)
				if err != nil || status < 400 || ref.Ref != "" || ref.Value.Description == nil {
					continue
				}
				read(method+" "+path+" "+key, status, *ref.Value.Description)
			}
		}
	}
	for name, ref := range doc.Components.Responses {
		if ref.Value.Description == nil {
			continue
		}
		status := 0
		if mt := ref.Value.Content.Get("application/problem+json"); mt != nil && mt.Schema != nil {
			for _, part := range mt.Schema.Value.AllOf {
				if st := part.Value.Properties["status"]; st != nil && len(st.Value.Enum) == 1 {
					status = int(st.Value.Enum[0].(float64))
				}
			}
		}
		read("components "+name, status, *ref.Value.Description)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].where+out[i].code < out[j].where+out[j].code })
	return out
}

// TestOpenAPIProblemProse: each problem code that openapi.yaml's prose
// describes, where it describes it, is answered by a live gateway: with the
// status it stands under, and the members and headers it names (with the
// value it gives them); and a code described anew fails here until a case
// answers it. The cases also check what the prose says that a schema
// cannot: the permission a 403 names, the 64 KiB cap, the default
// --body-timeout.
func TestOpenAPIProblemProse(t *testing.T) {
	t.Parallel()
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := specLoad(t, spec)
	proses := problemProses(t, doc)
	if len(proses) < 25 {
		t.Fatalf("only %d problem codes described in openapi.yaml", len(proses))
	}

	g := gwtest.StartGateway(t, gwtest.GatewayOptions{MaxWait: time.Minute,
		Extra: []string{"--max-waiters-per-name", "1", "--max-queue-items", "1", "--body-timeout", "1s"}})
	// Of the same root without the peer secret: it cannot prove itself to g.
	stranger := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: g.Root, NoPeerSecret: true})
	file, secrets := newTokensFile(t)
	sec := startSecured(t, gwtest.GatewayOptions{}, file, secrets)
	s := newSpecChecker(t, g.URL, specLoad(t, spec))
	ss := newSpecChecker(t, sec.URL, specLoad(t, spec))
	n := 0
	name := func() string { n++; return fmt.Sprintf("prose-%d", n) }
	lease := func() string {
		return specJSON(t, s.do(t, 201, specReq("POST", "/v1/leases", map[string]any{"ttl": "1m"})))["id"].(string)
	}
	with := func(l string, more ...any) map[string]any {
		m := map[string]any{"lease": l}
		for i := 0; i+1 < len(more); i += 2 {
			m[more[i].(string)] = more[i+1]
		}
		return m
	}
	// background starts a call that waits, and waits until its lease waits
	// for kind name.
	background := func(c specCall, l, kind, nm string) *specBlockingRead {
		b := s.startCall(c)
		gwtest.WaitsFor(t, g.URL, l, kind, nm)
		return b
	}
	// deadlock makes two leases wait for what the other holds, of kind
	// ("locks" or "semaphores"), and returns the answer of the wait that was
	// ended to break it.
	deadlock := func(kind string) gwtest.Response {
		a, b, x, y := lease(), lease(), name(), name()
		extra := []any{}
		if kind == "semaphores" {
			extra = []any{"limit", 1}
		}
		s.do(t, 200, specReq("POST", "/v1/"+kind+"/"+x+"/acquire", with(a, extra...)))
		s.do(t, 200, specReq("POST", "/v1/"+kind+"/"+y+"/acquire", with(b, extra...)))
		singular := strings.TrimSuffix(kind, "s")
		first := background(specReq("POST", "/v1/"+kind+"/"+y+"/acquire?wait=30s", with(a, extra...)), a, singular, y)
		second := s.startCall(specReq("POST", "/v1/"+kind+"/"+x+"/acquire?wait=30s", with(b, extra...)))
		// The wait ended keeps what its lease holds: its lease is revoked,
		// and the other wait is granted.
		var ended specSent
		var victim, other *specBlockingRead
		select {
		case ended = <-first.done:
			victim, other = first, second
			s.do(t, 204, specReq("DELETE", "/v1/leases/"+a, nil))
		case ended = <-second.done:
			victim, other = second, first
			s.do(t, 204, specReq("DELETE", "/v1/leases/"+b, nil))
		case <-time.After(time.Minute):
			t.Fatalf("no wait of the %s deadlock ended within a minute", kind)
		}
		s.check(t, 409, victim.call, ended)
		s.check(t, 200, other.call, other.wait(t, time.Minute))
		return ended.resp
	}
	// releasedWhileWaiting: lease a holds what b waits for as kind, and b
	// releases (resigns) it while it waits.
	releasedWhileWaiting := func(kind, acquire, release string, extra ...any) gwtest.Response {
		a, b, nm := lease(), lease(), name()
		s.do(t, 200, specReq("POST", "/v1/"+kind+"/"+nm+"/"+acquire, with(a, extra...)))
		singular := map[string]string{"locks": "lock", "semaphores": "semaphore", "elections": "election"}[kind]
		w := background(specReq("POST", "/v1/"+kind+"/"+nm+"/"+acquire+"?wait=30s", with(b, extra...)), b, singular, nm)
		s.do(t, 204, specReq("POST", "/v1/"+kind+"/"+nm+"/"+release, with(b)))
		r := w.wait(t, time.Minute)
		s.check(t, 409, w.call, r)
		return r.resp
	}

	cases := map[string]func() gwtest.Response{
		"POST /v1/locks/{name}/acquire 409 timeout": func() gwtest.Response {
			a, b, nm := lease(), lease(), name()
			s.do(t, 200, specReq("POST", "/v1/locks/"+nm+"/acquire", with(a)))
			return s.do(t, 409, specReq("POST", "/v1/locks/"+nm+"/acquire?wait=100ms", with(b)))
		},
		"POST /v1/locks/{name}/acquire 409 would_deadlock": func() gwtest.Response {
			a, nm := lease(), name()
			s.do(t, 200, specReq("POST", "/v1/locks/"+nm+"/acquire", with(a, "mode", "read")))
			return s.do(t, 409, specReq("POST", "/v1/locks/"+nm+"/acquire?wait=1s", with(a, "mode", "write")))
		},
		"POST /v1/locks/{name}/acquire 409 deadlock": func() gwtest.Response { return deadlock("locks") },
		"POST /v1/locks/{name}/acquire 409 not_held": func() gwtest.Response {
			return releasedWhileWaiting("locks", "acquire", "release")
		},
		"POST /v1/locks/{name}/release 409 not_held": func() gwtest.Response {
			return s.do(t, 409, specReq("POST", "/v1/locks/"+name()+"/release", with(lease())))
		},
		"POST /v1/locks/release 409 not_held": func() gwtest.Response {
			a, held, free := lease(), name(), name()
			s.do(t, 200, specReq("POST", "/v1/locks/"+held+"/acquire", with(a)))
			r := s.do(t, 409, specReq("POST", "/v1/locks/release", with(a, "locks", []map[string]string{{"name": held}, {"name": free}})))
			if got := specJSON(t, r)["locks"]; !reflect.DeepEqual(got, []any{free}) {
				t.Errorf("the set's release names %v as not held, want [%s]", got, free)
			}
			return r
		},
		"GET /v1/locks/{name}/fence 409 stale_token": func() gwtest.Response {
			return s.do(t, 409, specReq("GET", "/v1/locks/"+name()+"/fence?token=1", nil))
		},
		"POST /v1/semaphores/{name}/acquire 409 timeout": func() gwtest.Response {
			a, b, nm := lease(), lease(), name()
			s.do(t, 200, specReq("POST", "/v1/semaphores/"+nm+"/acquire", with(a, "limit", 1)))
			return s.do(t, 409, specReq("POST", "/v1/semaphores/"+nm+"/acquire?wait=100ms", with(b, "limit", 1)))
		},
		"POST /v1/semaphores/{name}/acquire 409 limit_mismatch": func() gwtest.Response {
			a, b, nm := lease(), lease(), name()
			s.do(t, 200, specReq("POST", "/v1/semaphores/"+nm+"/acquire", with(a, "limit", 2)))
			return s.do(t, 409, specReq("POST", "/v1/semaphores/"+nm+"/acquire", with(b, "limit", 3)))
		},
		"POST /v1/semaphores/{name}/acquire 409 deadlock": func() gwtest.Response { return deadlock("semaphores") },
		"POST /v1/semaphores/{name}/acquire 409 not_held": func() gwtest.Response {
			return releasedWhileWaiting("semaphores", "acquire", "release", "limit", 1)
		},
		"POST /v1/semaphores/{name}/release 409 not_held": func() gwtest.Response {
			return s.do(t, 409, specReq("POST", "/v1/semaphores/"+name()+"/release", with(lease())))
		},
		"POST /v1/elections/{name}/campaign 409 not_held": func() gwtest.Response {
			return releasedWhileWaiting("elections", "campaign", "resign", "value", "v")
		},
		"POST /v1/elections/{name}/resign 409 not_held": func() gwtest.Response {
			return s.do(t, 409, specReq("POST", "/v1/elections/"+name()+"/resign", with(lease())))
		},
		"PUT /v1/elections/{name}/value 409 not_leader": func() gwtest.Response {
			return s.do(t, 409, specReq("PUT", "/v1/elections/"+name()+"/value", with(lease(), "value", "v")))
		},
		"POST /v1/barriers/{name}/wait 409 timeout": func() gwtest.Response {
			nm := name()
			s.do(t, 201, specReq("PUT", "/v1/barriers/"+nm, nil))
			defer s.do(t, 204, specReq("DELETE", "/v1/barriers/"+nm, nil))
			return s.do(t, 409, specReq("POST", "/v1/barriers/"+nm+"/wait?wait=100ms", nil))
		},
		"POST /v1/double-barriers/{name}/enter 409 timeout": func() gwtest.Response {
			// Without a lease: one is made for the call, and named.
			return s.do(t, 409, specReq("POST", "/v1/double-barriers/"+name()+"/enter?wait=100ms",
				map[string]any{"ttl": "1m", "holder": "prose", "member": "m1", "count": 2}))
		},
		"POST /v1/double-barriers/{name}/enter 409 count_mismatch": func() gwtest.Response {
			nm := name()
			s.do(t, 409, specReq("POST", "/v1/double-barriers/"+nm+"/enter?wait=0s", with(lease(), "member", "m1", "count", 2)))
			return s.do(t, 409, specReq("POST", "/v1/double-barriers/"+nm+"/enter?wait=0s", with(lease(), "member", "m2", "count", 3)))
		},
		"POST /v1/double-barriers/{name}/leave 409 timeout": func() gwtest.Response {
			nm, a, b := name(), lease(), lease()
			s.do(t, 409, specReq("POST", "/v1/double-barriers/"+nm+"/enter", with(a, "member", "m1", "count", 2)))
			s.do(t, 200, specReq("POST", "/v1/double-barriers/"+nm+"/enter", with(b, "member", "m2", "count", 2)))
			return s.do(t, 409, specReq("POST", "/v1/double-barriers/"+nm+"/leave?wait=100ms", with(a, "member", "m1")))
		},
		"POST /v1/double-barriers/{name}/leave 409 not_held": func() gwtest.Response {
			return s.do(t, 409, specReq("POST", "/v1/double-barriers/"+name()+"/leave", with(lease(), "member", "m1")))
		},
		"POST /v1/groups/{name}/leave 409 not_held": func() gwtest.Response {
			return s.do(t, 409, specReq("POST", "/v1/groups/"+name()+"/leave", with(lease(), "member", "m1")))
		},
		"DELETE /v1/queues/{name} 409 not_empty": func() gwtest.Response {
			nm := name()
			s.do(t, 201, specReq("POST", "/v1/queues/"+nm+"/items", []byte("x"), specContentType("application/octet-stream")))
			return s.do(t, 409, specReq("DELETE", "/v1/queues/"+nm, nil))
		},
		"POST /v1/queues/{name}/items 507 queue_full": func() gwtest.Response {
			nm := name()
			s.do(t, 201, specReq("POST", "/v1/queues/"+nm+"/items", []byte("x"), specContentType("application/octet-stream")))
			return s.do(t, 507, specReq("POST", "/v1/queues/"+nm+"/items", []byte("y"), specContentType("application/octet-stream")))
		},
		"GET /v1/queues/{name}/items/{id} 404 not_found": func() gwtest.Response {
			return s.do(t, 404, specReq("GET", "/v1/queues/"+name()+"/items/entry-000-0000000000", nil))
		},
		"components BadRequest invalid_request": func() gwtest.Response {
			// A wait above --max-wait is one of them.
			return s.do(t, 400, specReq("POST", "/v1/locks/"+name()+"/acquire?wait=2m", with(lease())))
		},
		"components LeaseNotFound lease_not_found": func() gwtest.Response {
			return s.do(t, 404, specReq("GET", "/v1/leases/8f0b6a9e-4c1d-4f7a-9a57-1b2c3d4e5f60", nil))
		},
		"components LeaseExpired lease_expired": func() gwtest.Response {
			a := lease()
			s.do(t, 204, specReq("DELETE", "/v1/leases/"+a, nil))
			r := s.do(t, 410, specReq("POST", "/v1/leases/"+a+"/keepalive", nil))
			if reason := specJSON(t, r)["reason"]; reason != "revoked" {
				t.Errorf("a revoked lease's reason: %v", reason)
			}
			return r
		},
		"components NotClaimed not_claimed": func() gwtest.Response {
			nm := name()
			id := specJSON(t, s.do(t, 201, specReq("POST", "/v1/queues/"+nm+"/items", []byte("x"),
				specContentType("application/octet-stream"))))["id"].(string)
			defer s.do(t, 200, specReq("POST", "/v1/queues/"+nm+"/take", nil))
			return s.do(t, 409, specReq("POST", "/v1/queues/"+nm+"/items/"+id+"/ack", with(lease())))
		},
		"components TooLarge too_large": func() gwtest.Response {
			// 64 KiB is let in (a bad request, not a large one); a byte more is not.
			pad := strings.Repeat("x", 64<<10-len(`{"ttl":"1m","pad":""}`))
			s.do(t, 400, specReq("POST", "/v1/leases", `{"ttl":"1m","pad":"`+pad+`"}`, specRejects()))
			return s.do(t, 413, specReq("POST", "/v1/leases", `{"ttl":"1m","pad":"`+pad+`x"}`, specRejects()))
		},
		"components BodyTimeout body_timeout": func() gwtest.Response {
			// --body-timeout 1s here: a body promised and never sent.
			r := rawRequest(t, g.URL, "POST /v1/leases HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n")
			s.checkSchema(t, "body timeout", "BodyTimeoutProblem", r.Body)
			return r
		},
		"components UnsupportedMediaType unsupported_media_type": func() gwtest.Response {
			return s.do(t, 415, specReq("POST", "/v1/leases", `{"ttl":"1m"}`, specContentType("application/xml"), specRejects()))
		},
		"components Unavailable unavailable": func() gwtest.Response {
			// A request for g's lease through a gateway that cannot prove
			// itself to g.
			a := lease()
			r := newSpecChecker(t, stranger.URL, specLoad(t, spec)).do(t, 503, specReq("POST", "/v1/leases/"+a+"/keepalive", nil))
			if d, _ := specJSON(t, r)["detail"].(string); !strings.Contains(d, "the gateway at "+strings.TrimPrefix(g.URL, "http://")) {
				t.Errorf("the 503's detail does not say which gateway it could not ask: %q", d)
			}
			return r
		},
		"components TooMany too_many": func() gwtest.Response {
			// --max-waiters-per-name 1: one wait is let in, the next is not.
			nm := name()
			s.do(t, 201, specReq("PUT", "/v1/barriers/"+nm, nil))
			w := s.startCall(specReq("POST", "/v1/barriers/"+nm+"/wait?wait=30s", nil))
			// The first wait counted before the second is sent: a second sent
			// first was let in and waited its 30 s itself.
			gwtest.Eventually(t, 10*time.Second, func() error {
				if !bytes.Contains(gwtest.Do(t, "GET", g.URL+"/metrics", nil).Body, []byte("\nzkgate_waiting_requests 1\n")) {
					return fmt.Errorf("the first wait is not waiting yet")
				}
				return nil
			})
			r := s.send(context.Background(), specReq("POST", "/v1/barriers/"+nm+"/wait?wait=30s", nil), nil).resp
			if r.Status != 429 {
				t.Errorf("a second wait: %d %s, want 429", r.Status, r.Body)
			}
			s.do(t, 204, specReq("DELETE", "/v1/barriers/"+nm, nil))
			w.wait(t, time.Minute)
			return r
		},
		"components Unauthenticated unauthenticated": func() gwtest.Response {
			r := ss.do(t, 401, specReq("POST", "/v1/leases", map[string]any{"ttl": "1m"}))
			if r.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
			return r
		},
		"POST /ui/leases/{id}/revoke 403 forbidden": func() gwtest.Response {
			// Tokens off: the dashboard has no actions (the admin's cases are
			// dashboard/actions_test.go's).
			r := s.do(t, 403, specReq("POST", "/ui/leases/"+lease()+"/revoke", nil, specForm(url.Values{"form_token": {"forged"}})))
			specWantCode(t, r, "forbidden")
			return r
		},
		"components Forbidden forbidden": func() gwtest.Response {
			r := ss.do(t, 403, specReq("POST", "/v1/locks/orders/acquire", map[string]any{"ttl": "1m"}, specToken(secrets["billing"])))
			if d, _ := specJSON(t, r)["detail"].(string); !strings.Contains(d, "locks:orders:write") {
				t.Errorf("the 403's detail does not name the permission as KIND:PREFIX:LEVEL: %q", d)
			}
			// And X-Zkgate-Forwarded without a gateway's proof, tokens off.
			specWantCode(t, s.do(t, 403, specReq("POST", "/v1/leases", map[string]any{"ttl": "1m"},
				specHeader("X-Zkgate-Forwarded", "1"))), "forbidden")
			return r
		},
	}
	maps.Copy(cases, counterProseCases(t, s, name))

	var uncovered []string
	for _, p := range proses {
		key := p.where + " " + p.code
		run, ok := cases[key]
		if !ok {
			uncovered = append(uncovered, fmt.Sprintf("%s: %q", key, p.text))
			continue
		}
		delete(cases, key)
		start := time.Now()
		r := run()
		t.Logf("%s: %s", key, time.Since(start).Round(time.Millisecond))
		what := key + " (" + p.text + ")"
		if r.Status != p.status {
			t.Errorf("%s: status %d, want %d: %s", what, r.Status, p.status, r.Body)
			continue
		}
		body := specJSON(t, r)
		if body["code"] != p.code {
			t.Errorf("%s: code %v: %s", what, body["code"], r.Body)
		}
		for f, want := range p.fields {
			v, ok := body[f]
			switch {
			case !ok:
				t.Errorf("%s: no %s in the answer: %s", what, f, r.Body)
			case want != "" && fmt.Sprint(v) != want:
				t.Errorf("%s: %s is %v, the prose says %s", what, f, v, want)
			}
		}
		for _, h := range p.header {
			if r.Header.Get(h) == "" {
				t.Errorf("%s: no %s header: %v", what, h, r.Header)
			}
		}
	}
	if len(uncovered) > 0 {
		t.Errorf("problem codes openapi.yaml describes that no case of this test answers:\n  %s", strings.Join(uncovered, "\n  "))
	}
	if len(cases) > 0 {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range cases {
				if !yield(k) {
					return
				}
			}
		})
		t.Errorf("cases for problem codes openapi.yaml does not describe there: %v", keys)
	}
}

// rawRequest writes head to the gateway at base as it is, and reads the
// answer.
func rawRequest(t *testing.T, base, head string) gwtest.Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	return gwtest.Response{Status: resp.StatusCode, Header: resp.Header, Body: []byte(b.String())}
}

// specBullet is the bullet of info.description that opens with
// "**title.**", its lines joined.
func specBullet(t *testing.T, doc *openapi3.T, title string) string {
	t.Helper()
	desc := doc.Info.Description
	start := strings.Index(desc, "- **"+title+".**")
	if start < 0 {
		t.Fatalf("openapi.yaml's info.description has no bullet %q", title)
	}
	rest := desc[start+2:]
	if end := strings.Index(rest, "\n- **"); end >= 0 {
		rest = rest[:end]
	}
	if end := strings.Index(rest, "\n\n"); end >= 0 {
		rest = rest[:end]
	}
	return strings.Join(strings.Fields(rest), " ")
}

// TestOpenAPISeveralGateways: what the "Several gateways" paragraph of
// openapi.yaml says, sentence by sentence, against three gateways of one
// root (the third without the peer secret): a request naming another
// gateway's lease is forwarded and says who served it; one through a
// gateway that cannot prove itself is 503 unavailable; X-Zkgate-Forwarded
// without its proof is 403; an ended lease is 410 with its reason through
// every gateway, until the history forgets it (--max-lease-history), then
// 404 lease_not_found.
func TestOpenAPISeveralGateways(t *testing.T) {
	t.Parallel()
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := specLoad(t, spec)
	para := specBullet(t, doc, "Several gateways")
	for _, claim := range []string{
		"A request that names a lease owned by another gateway (found through the lease records under `{root}/leases`) is forwarded to that gateway and its answer relayed, with `X-Zkgate-Served-By: <host:port>`",
		"or that does not prove itself a gateway of the same root (`--peer-secret-file`, `--tls-peer-ca`), is `503 unavailable`, and so is every such request to a gateway without either",
		"a request that carries it without its proof is `403 forbidden`",
		"Once a lease has ended, every gateway of the root answers `410` with the reason",
		"for as long as it is remembered (`--max-lease-history`, an hour at most); then `404 lease_not_found`",
	} {
		if !strings.Contains(para, claim) {
			t.Errorf("the paragraph no longer says what this test checks; update both:\n  says: %s\n  test: %s", para, claim)
		}
	}

	history := []string{"--max-lease-history", "2"}
	g1 := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: history})
	g2 := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: g1.Root, Extra: history})
	stranger := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: g1.Root, NoPeerSecret: true, Extra: history})
	s1, s2, s3 := newSpecChecker(t, g1.URL, specLoad(t, spec)), newSpecChecker(t, g2.URL, specLoad(t, spec)),
		newSpecChecker(t, stranger.URL, specLoad(t, spec))
	lease := func() string {
		return specJSON(t, s1.do(t, 201, specReq("POST", "/v1/leases", map[string]any{"ttl": "1m"})))["id"].(string)
	}

	// Forwarded, and said so.
	a := lease()
	r := s2.do(t, 200, specReq("POST", "/v1/leases/"+a+"/keepalive", nil))
	if by := r.Header.Get("X-Zkgate-Served-By"); by != strings.TrimPrefix(g1.URL, "http://") {
		t.Errorf("a keepalive of g1's lease through g2: X-Zkgate-Served-By %q, want g1's %s", by, strings.TrimPrefix(g1.URL, "http://"))
	}
	s2.do(t, 200, specReq("POST", "/v1/locks/several/acquire", map[string]any{"lease": a}))
	// Not through a gateway that cannot prove itself.
	specWantCode(t, s3.do(t, 503, specReq("POST", "/v1/leases/"+a+"/keepalive", nil)), "unavailable")
	// X-Zkgate-Forwarded is for gateways only.
	specWantCode(t, s2.do(t, 403, specReq("POST", "/v1/leases/"+a+"/keepalive", nil, specHeader("X-Zkgate-Forwarded", "1"))), "forbidden")

	// Ended: 410 with the reason through every gateway of the root.
	s2.do(t, 204, specReq("DELETE", "/v1/leases/"+a, nil))
	for i, s := range []*specChecker{s1, s2, s3} {
		for _, c := range []specCall{specReq("GET", "/v1/leases/"+a, nil), specReq("POST", "/v1/leases/"+a+"/keepalive", nil),
			specReq("POST", "/v1/locks/several/acquire", map[string]any{"lease": a})} {
			p := specWantCode(t, s.do(t, 410, c), "lease_expired")
			if p["reason"] != "revoked" {
				t.Errorf("gateway %d, %s %s: reason %v, want revoked", i+1, c.method, c.path, p["reason"])
			}
		}
	}
	// Remembered while the history has room (2 here), then forgotten.
	b, c := lease(), lease()
	s1.do(t, 204, specReq("DELETE", "/v1/leases/"+b, nil))
	s2.do(t, 204, specReq("DELETE", "/v1/leases/"+c, nil))
	// The gateways count the history 32 s after they start, and more often
	// as it fills up.
	gwtest.Eventually(t, time.Minute, func() error {
		r := s1.send(context.Background(), specReq("GET", "/v1/leases/"+a, nil), nil).resp
		if r.Status != 404 {
			return fmt.Errorf("the oldest of three ended leases, two remembered: %d %s", r.Status, r.Body)
		}
		return nil
	})
	for _, s := range []*specChecker{s1, s2, s3} {
		specWantCode(t, s.do(t, 404, specReq("GET", "/v1/leases/"+a, nil)), "lease_not_found")
		for _, id := range []string{b, c} {
			specWantCode(t, s.do(t, 410, specReq("GET", "/v1/leases/"+id, nil)), "lease_expired")
		}
	}
}
