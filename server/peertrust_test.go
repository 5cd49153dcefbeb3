package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/peer"
	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/server"
)

// plantedHolder marks every answer of a stranger: a gateway that relays
// one has taken an answer from something that is no gateway.
const plantedHolder = "planted-by-a-stranger"

// plantedLease is the lease a stranger lists as its own.
const plantedLease = "00000000-0000-4000-8000-0000000e1111"

// stranger is an HTTP server that is no gateway: it records every request
// that reaches it and answers each as a gateway would, with plantedHolder.
type stranger struct{ recorder }

// recorder is a test server that keeps a copy of every request reaching it.
type recorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []recorded
}

// record keeps a copy of r and returns its body, which it has read.
func (rc *recorder) record(r *http.Request) []byte {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got = append(rc.got, recorded{Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(), Body: body})
	rc.mu.Unlock()
	return body
}

// addr is the server's host:port.
func (rc *recorder) addr() string { return strings.TrimPrefix(rc.srv.URL, "http://") }

// requests is what reached the server so far.
func (rc *recorder) requests() []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]recorded(nil), rc.got...)
}

// recorded is a request as it reached a server.
type recorded struct {
	Method, URI string
	Header      http.Header
	Body        []byte
}

func newStranger(t *testing.T) *stranger {
	t.Helper()
	s := &stranger{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/leases" {
			_ = json.NewEncoder(w).Encode(map[string]any{"leases": []map[string]any{{
				"id": plantedLease, "gateway": "evil", "ttl": "1m0s", "holder": plantedHolder, "lock_delay": "0s",
				"expires_at": time.Now().Add(time.Minute), "created_at": time.Now(), "holds": []any{}}}})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"name": "x", "mode": "exclusive", "lease": plantedLease,
			"holder": plantedHolder, "token": 1, "node": "/planted", "acquired_at": time.Now()})
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// registerAs writes a registration {root}/gateways/{id} that advertises
// addr, as any ZooKeeper client may under the default open ACL.
func registerAs(t *testing.T, conn *zk.Conn, root, id, addr string) {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"advertise": addr, "version": "dev", "started_at": time.Now().UTC()})
	if _, err := conn.Create(root+"/gateways/"+id, data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
}

// rewrite replaces the named JSON fields of the node at p, keeping the
// others, and returns the data it had.
func rewrite(t *testing.T, conn *zk.Conn, p string, fields map[string]any) []byte {
	t.Helper()
	data, stat, err := conn.Get(p)
	if err != nil {
		t.Fatalf("get %s: %v", p, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s holds no JSON object: %s", p, data)
	}
	for k, v := range fields {
		doc[k] = v
	}
	changed, _ := json.Marshal(doc)
	if _, err := conn.Set(p, changed, stat.Version); err != nil {
		t.Fatalf("set %s: %v", p, err)
	}
	return data
}

// leaseIDs are the ids of a GET /v1/leases answer.
func leaseIDs(t *testing.T, r gwtest.Response) map[string]bool {
	t.Helper()
	var doc struct {
		Leases []struct {
			ID, Holder string
		} `json:"leases"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatalf("not a lease list: %s", r.Body)
	}
	ids := map[string]bool{}
	for _, l := range doc.Leases {
		ids[l.ID] = true
		if l.Holder == plantedHolder {
			ids[plantedHolder] = true
		}
	}
	return ids
}

// TestFanOutAsksOnlyProvenPeers: a registration that anyone may write under
// {root}/gateways does not make its address a peer. GET /v1/leases with an
// admin's token sends that address nothing (no request, so no token), and
// the list holds no lease of its answer; the other gateway, a proven peer,
// is asked and its leases are listed.
func TestFanOutAsksOnlyProvenPeers(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	a := startSecured(t, gwtest.GatewayOptions{}, file, secrets)
	b := startSecured(t, gwtest.GatewayOptions{Root: a.Root}, file, secrets)
	evil := newStranger(t)
	conn := gwtest.Client(t, []string{gwtest.ZK(t).Addr()}, 5*time.Second)
	registerAs(t, conn, a.Root, "evil", evil.addr())
	onB := b.newLeaseAs(t, "writer")

	r := a.as(t, "admin", "GET", "/v1/leases", nil)
	mustStatus(t, r, 200, "the list of every gateway's leases")
	ids := leaseIDs(t, r)
	if !ids[onB] {
		t.Errorf("the lease of the other gateway is not listed: %s", r.Body)
	}
	if ids[plantedLease] || ids[plantedHolder] {
		t.Errorf("the stranger's answer is in the list: %s", r.Body)
	}
	for _, got := range evil.requests() {
		t.Errorf("the stranger received %s %s with Authorization %q", got.Method, got.URI, got.Header.Get("Authorization"))
	}
}

// TestForwardOnlyToProvenPeers: a lease record rewritten to name a gateway
// registered by a stranger, or the registration of the lease's own gateway
// rewritten to advertise the stranger, sends requests for the lease nowhere
// near the stranger; the answer is a problem of the gateway asked, never
// the stranger's.
func TestForwardOnlyToProvenPeers(t *testing.T) {
	t.Parallel()
	a := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	b := gwtest.StartProcess(t, gwtest.GatewayOptions{Root: a.Root, Extra: []string{"--log-level", "info"}})
	evil := newStranger(t)
	conn := gwtest.Client(t, a.ZK, 5*time.Second)
	registerAs(t, conn, a.Root, "evil", evil.addr())
	lease := newLease(t, a.URL, "1m", "on-a")
	record := a.Root + "/leases/" + lease

	notTheStranger := func(what string) {
		t.Helper()
		for _, r := range []gwtest.Response{
			acquire(t, b.URL, "x", lease, "0s"),
			gwtest.Do(t, "POST", b.URL+"/v1/leases/"+lease+"/keepalive", nil),
			gwtest.Do(t, "GET", b.URL+"/v1/leases/"+lease, nil),
		} {
			if r.Status == 200 || bytes.Contains(r.Body, []byte(plantedHolder)) {
				t.Errorf("%s: the stranger's answer was relayed: %d %s", what, r.Status, r.Body)
			}
		}
		for _, got := range evil.requests() {
			t.Errorf("%s: the stranger received %s %s", what, got.Method, got.URI)
		}
	}

	rewrite(t, conn, record, map[string]any{"gateway": "evil"})
	notTheStranger("a record naming the stranger's registration")
	// Set again, even with its own data, a record is no more believed: its
	// node proof holds for the node as its gateway made it.
	mustStatus(t, acquire(t, b.URL, "x", lease, "0s"), 503, "a record set again")

	other := newLease(t, a.URL, "1m", "on-a")
	raw, _, err := conn.Get(a.Root + "/leases/" + other)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ Gateway string }
	_ = json.Unmarshal(raw, &rec)
	mustStatus(t, acquire(t, b.URL, "x", other, "0s"), 200, "another lease of a, forwarded to a")
	mustStatus(t, gwtest.Do(t, "POST", b.URL+"/v1/locks/x/release", map[string]any{"lease": other}), 204, "release through b")

	lease = other
	registration := a.Root + "/gateways/" + rec.Gateway
	rewrite(t, conn, registration, map[string]any{"advertise": evil.addr()})
	notTheStranger("the registration of a rewritten to advertise the stranger")

	// Each node that does not check out is logged, once however often it is read.
	for _, p := range []string{record, registration} {
		if n := strings.Count(b.Logs(), "does not check out with --peer-secret-file"); n == 0 || strings.Count(b.Logs(), "path="+p+"\n") != 1 {
			t.Errorf("%d lines about nodes that do not check out, %d about %s, want one: %s", n, strings.Count(b.Logs(), "path="+p+"\n"), p, b.Logs())
		}
	}

	// The dashboard shows the stranger's registration for what it is.
	gwtest.Eventually(t, 10*time.Second, func() error {
		_, _, page := getPage(t, a.URL+"/")
		if i := strings.Index(page, evil.addr()); i < 0 || !strings.Contains(page[i:], ">unverified<") {
			return fmt.Errorf("a's overview does not mark the stranger's registration unverified")
		}
		return nil
	})
}

// TestAnswerOfAProvenAddressMustProveItself: a registration and a lease
// record that check out (here signed by the test, as by a gateway whose
// address a stranger took over) send a request to the stranger, without
// any client secret; its answer, which it cannot sign, is not relayed.
func TestAnswerOfAProvenAddressMustProveItself(t *testing.T) {
	t.Parallel()
	a := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	b := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: a.Root})
	secret, err := peer.LoadSecret(gwtest.PeerSecretFile(t, a.Root))
	if err != nil {
		t.Fatal(err)
	}
	evil := newStranger(t)
	conn := gwtest.Client(t, a.ZK, 5*time.Second)
	data, _ := json.Marshal(map[string]any{"advertise": evil.addr(), "version": "dev", "started_at": time.Now().UTC(),
		"proof": secret.Sign("registration", a.Root, "taken-over", evil.addr())})
	data = secret.SignNode("registration", a.Root, "taken-over", conn.SessionID(), data)
	if _, err := conn.Create(a.Root+"/gateways/taken-over", data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	lease := newLease(t, a.URL, "1m", "on-a")
	record, _ := json.Marshal(map[string]any{"holder": "on-a", "ttl": "1m0s", "gateway": "taken-over",
		"proof": secret.Sign("lease", a.Root, lease, "taken-over")})
	record = secret.SignNode("lease", a.Root, lease, conn.SessionID(), record)
	rp := a.Root + "/leases/" + lease
	if _, err := conn.Multi(&zk.DeleteRequest{Path: rp, Version: -1},
		&zk.CreateRequest{Path: rp, Data: record, Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeral}); err != nil {
		t.Fatal(err)
	}

	r := acquire(t, b.URL, "x", lease, "0s")
	p := wantProblem(t, r, 503, "unavailable", "an answer that does not prove itself")
	if detail, _ := p["detail"].(string); !strings.Contains(detail, "does not check out") {
		t.Errorf("the problem should say that the answer does not check out: %q", detail)
	}
	if bytes.Contains(r.Body, []byte(plantedHolder)) {
		t.Errorf("the stranger's answer was relayed: %s", r.Body)
	}
	got := evil.requests()
	if len(got) != 1 {
		t.Fatalf("the stranger received %d requests, want the one forwarded", len(got))
	}
	if got[0].Header.Get("Authorization") != "" || got[0].Header.Get("Cookie") != "" {
		t.Errorf("the forwarded request carries a client secret: %v", got[0].Header)
	}

	// Its list of leases is not taken either: b lists it as unreachable.
	list := gwtest.Do(t, "GET", b.URL+"/v1/leases", nil)
	mustStatus(t, list, 200, "the list of every gateway's leases")
	if ids := leaseIDs(t, list); ids[plantedLease] || !ids[lease] {
		t.Errorf("the list should hold a's lease and not the stranger's: %s", list.Body)
	}
	if !bytes.Contains(list.Body, []byte(`"gateway":"taken-over"`)) {
		t.Errorf("the stranger's address should be listed as unreachable: %s", list.Body)
	}
}

// TestPeersWithoutCredential: gateways without a peer credential serve
// their own leases as ever, and neither pass requests to each other nor
// take them: a request for the other's lease is a 503 that names the flag,
// and the list of leases names the other as unreachable.
func TestPeersWithoutCredential(t *testing.T) {
	t.Parallel()
	a := gwtest.StartGateway(t, gwtest.GatewayOptions{NoPeerSecret: true})
	b := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: a.Root, NoPeerSecret: true})
	lease := newLease(t, a.URL, "1m", "on-a")
	mustStatus(t, acquire(t, a.URL, "x", lease, "0s"), 200, "on its own gateway")

	p := wantProblem(t, acquire(t, b.URL, "y", lease, "0s"), 503, "unavailable", "through the other gateway")
	if detail, _ := p["detail"].(string); !strings.Contains(detail, "--peer-secret-file") {
		t.Errorf("the problem should name --peer-secret-file: %q", detail)
	}
	list := gwtest.Do(t, "GET", b.URL+"/v1/leases", nil)
	mustStatus(t, list, 200, "the list of every gateway's leases")
	if !bytes.Contains(list.Body, []byte("unreachable")) || !bytes.Contains(list.Body, []byte("--peer-secret-file")) {
		t.Errorf("a should be listed as unreachable, naming the flag: %s", list.Body)
	}
	mustStatus(t, gwtest.Do(t, "POST", a.URL+"/v1/locks/x/release", map[string]any{"lease": lease}), 204, "release")
}

// TestTokensNeedAPeerCredentialBesideOtherGateways: with tokens, a gateway
// without a peer credential does not start beside other gateways (a usage
// error naming the flag); one at its own address (a predecessor whose
// session has yet to expire) does not count.
func TestTokensNeedAPeerCredentialBesideOtherGateways(t *testing.T) {
	t.Parallel()
	file, _ := newTokensFile(t)
	a := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	cfg, err := server.ParseConfig([]string{"--listen", "127.0.0.1:0", "--zk", strings.Join(a.ZK, ","), "--root", a.Root,
		"--auth-file", file, "--log-level", "error"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout bytes.Buffer
	err = server.Run(ctx, cfg, &stdout, io.Discard)
	var usage *server.UsageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), "--peer-secret-file") || !strings.Contains(err.Error(), strings.TrimPrefix(a.URL, "http://")) {
		t.Fatalf("Run: %v, want a usage error naming --peer-secret-file and the other gateway", err)
	}
	if stdout.Len() > 0 {
		t.Errorf("the gateway served: %s", stdout.String())
	}

	// At a's address, a is its predecessor: it starts.
	cfg, err = server.ParseConfig([]string{"--listen", "127.0.0.1:0", "--advertise", strings.TrimPrefix(a.URL, "http://"),
		"--zk", strings.Join(a.ZK, ","), "--root", a.Root, "--auth-file", file, "--log-level", "error"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	serving := &firstWrite{done: make(chan struct{})}
	ran := make(chan error, 1)
	go func() { ran <- server.Run(ctx, cfg, serving, io.Discard) }()
	select {
	case <-serving.done:
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	case err := <-ran:
		t.Fatalf("a gateway at the address of the other did not start: %v", err)
	}
}

// firstWrite closes done at its first write.
type firstWrite struct {
	once sync.Once
	done chan struct{}
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.done) })
	return len(p), nil
}

// relay is a reverse proxy in front of a gateway that keeps a copy of every
// request it passes: what an eavesdropper between two gateways sees.
type relay struct {
	recorder
	target atomic.Pointer[url.URL]
}

func newRelay(t *testing.T) *relay {
	t.Helper()
	rl := &relay{}
	rl.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := rl.record(r)
		target := rl.target.Load()
		if target == nil {
			http.Error(w, "no target yet", http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
		}}).ServeHTTP(w, r)
	}))
	t.Cleanup(rl.srv.Close)
	return rl
}

// send sends a recorded request again, as it was, to base.
func (rec recorded) send(t *testing.T, base string, change func(*http.Request)) gwtest.Response {
	t.Helper()
	req, err := http.NewRequest(rec.Method, base+rec.URI, bytes.NewReader(rec.Body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range rec.Header {
		req.Header[k] = v
	}
	req.Header.Del("Accept-Encoding")
	if change != nil {
		change(req)
	}
	return gwtest.MustSend(t, http.DefaultClient, req)
}

// TestForwardedRequestsCarryNoSecret: a request that one gateway forwards
// to another carries no client secret (no Authorization, no sign-in
// cookie): an eavesdropper between them learns none. What it does carry
// cannot be sent again (a replay), nor changed, nor made up by a client that
// sets the forwarding header itself. The caller's permissions still apply
// on the lease's gateway.
func TestForwardedRequestsCarryNoSecret(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	rl := newRelay(t)
	a := startSecured(t, gwtest.GatewayOptions{Extra: []string{"--advertise", rl.addr()}}, file, secrets)
	target, _ := url.Parse(a.URL)
	rl.target.Store(target)
	b := startSecured(t, gwtest.GatewayOptions{Root: a.Root}, file, secrets)
	lease := a.newLeaseAs(t, "writer")
	other := a.newLeaseAs(t, "writer")

	r := b.as(t, "writer", "POST", "/v1/leases/"+lease+"/keepalive", nil)
	mustStatus(t, r, 200, "keepalive through b")
	if by := r.Header.Get("X-Zkgate-Served-By"); by != rl.addr() {
		t.Fatalf("served by %q, want a through the relay at %s", by, rl.addr())
	}
	got := rl.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests passed the relay, want the one forwarded", len(got))
	}
	fwd := got[0]
	for _, h := range []string{"Authorization", "Cookie"} {
		if v := fwd.Header.Get(h); v != "" {
			t.Errorf("the forwarded request carries %s: %q", h, v)
		}
	}
	for name, secret := range secrets {
		for k, v := range fwd.Header {
			if strings.Contains(strings.Join(v, " "), secret) {
				t.Errorf("the forwarded request carries the secret of %s in %s", name, k)
			}
		}
	}

	// The caller's permissions apply on a: reader may not keep writer's lease alive.
	r = b.as(t, "reader", "POST", "/v1/leases/"+lease+"/keepalive", nil)
	wantProblem(t, r, 403, "forbidden", "another token's lease, through b")
	if r.Header.Get("X-Zkgate-Served-By") == "" {
		t.Errorf("the refusal should be a's: %v", r.Header)
	}

	// The captured request, sent again: refused; to another gateway, which
	// it does not name: not served there either.
	wantProblem(t, fwd.send(t, a.URL, nil), 403, "forbidden", "the forwarded request replayed")
	wantProblem(t, fwd.send(t, b.URL, nil), 421, "misdirected", "the forwarded request sent to another gateway")
	// Changed to act on another lease: refused.
	wantProblem(t, fwd.send(t, a.URL, func(req *http.Request) {
		req.URL.Path = "/v1/leases/" + other + "/keepalive"
	}), 403, "forbidden", "the forwarded request changed")
	// A client's own forwarding header, with a token or without: refused.
	wantProblem(t, fwd.send(t, a.URL, func(req *http.Request) {
		req.Method, req.URL.Path = "DELETE", "/v1/leases/"+other
	}), 403, "forbidden", "a forwarding header made up for a revoke")
	for _, token := range []string{"admin", ""} {
		req, _ := http.NewRequest("GET", a.URL+"/v1/leases", nil)
		req.Header.Set("X-Zkgate-Forwarded", fwd.Header.Get("X-Zkgate-Forwarded"))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+secrets[token])
		}
		wantProblem(t, gwtest.MustSend(t, http.DefaultClient, req), 403, "forbidden",
			"a client's own forwarding header, token "+token)
	}
	mustStatus(t, a.as(t, "writer", "GET", "/v1/leases/"+other, nil), 200, "the other lease, untouched")
}

// TestNodesSetAgainOrCopiedAreIgnored: with the gateways' secret, a gateway's
// registration that another ZooKeeper client sets again with a field
// changed (draining_until, its earlier proof kept), or copies back into a
// node of its own session once the gateway has gone (a replay), is not
// believed: the overview marks it unverified, where before it showed a
// draining gateway and a departed one as live.
func TestNodesSetAgainOrCopiedAreIgnored(t *testing.T) {
	t.Parallel()
	a := gwtest.StartProcess(t, gwtest.GatewayOptions{Extra: []string{"--log-level", "info"}})
	b := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: a.Root})
	c := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: a.Root})
	conn := gwtest.Client(t, []string{a.ZK}, 5*time.Second)
	gatewayOf := func(url string) string {
		t.Helper()
		raw, _, err := conn.Get(a.Root + "/leases/" + newLease(t, url, "1m", "whose"))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct{ Gateway string }
		_ = json.Unmarshal(raw, &rec)
		return rec.Gateway
	}
	bID, cID := gatewayOf(b.URL), gatewayOf(c.URL)
	overviewSays := func(id, want, what string) {
		t.Helper()
		gwtest.Eventually(t, 10*time.Second, func() error {
			if item := gatewayItem(t, a.URL, id); !strings.Contains(item, ">"+want+"<") {
				return fmt.Errorf("%s: a's overview should mark it %s: %q", what, want, item)
			}
			return nil
		})
	}
	overviewSays(bID, "live", "b as it registered")

	// The dashboard's cache reads the registrations again when their list
	// changes: c's going, then its copy, make it read b's too.
	rewrite(t, conn, a.Root+"/gateways/"+bID, map[string]any{"draining_until": time.Now().Add(time.Hour).UTC()})
	reg := a.Root + "/gateways/" + cID
	copied, _, err := conn.Get(reg)
	if err != nil {
		t.Fatal(err)
	}
	c.Stop()
	gwtest.Eventually(t, 10*time.Second, func() error {
		if item := gatewayItem(t, a.URL, cID); item != "" {
			return fmt.Errorf("c is still listed once stopped: %q", item)
		}
		return nil
	})
	if _, err := conn.Create(reg, copied, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	overviewSays(cID, "unverified", "c's registration copied back once c had gone")
	overviewSays(bID, "unverified", "b's registration set again, draining")
	gwtest.Eventually(t, 10*time.Second, func() error {
		if logs := a.Logs(); !strings.Contains(logs, "copied or set again") {
			return fmt.Errorf("a should log the registrations that do not check out: %s", logs)
		}
		return nil
	})
}

// TestPeerProofsAcrossARollingUpgrade: the nodes a gateway writes still carry
// the proof that gateways of earlier versions check (so those forward to it
// during a rolling upgrade), and a node that carries only that proof, as
// theirs do, is believed with --peer-proofs compat alone: by default it is
// ignored, and the log names the flag.
func TestPeerProofsAcrossARollingUpgrade(t *testing.T) {
	t.Parallel()
	_, err := server.ParseConfig([]string{"--zk", "127.0.0.1:2181", "--peer-proofs", "v1"}, func(string) string { return "" }, io.Discard)
	var usage *server.UsageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), "--peer-proofs must be strict or compat") {
		t.Errorf("--peer-proofs v1: %v, want a usage error", err)
	}
	strict := gwtest.StartProcess(t, gwtest.GatewayOptions{Extra: []string{"--log-level", "info"}})
	compat := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: strict.Root, Extra: []string{"--peer-proofs", "compat"}})
	secret, err := peer.LoadSecret(gwtest.PeerSecretFile(t, strict.Root))
	if err != nil {
		t.Fatal(err)
	}
	conn := gwtest.Client(t, []string{strict.ZK}, 5*time.Second)
	lease := newLease(t, compat.URL, "1m", "on-compat")
	raw, _, err := conn.Get(strict.Root + "/leases/" + lease)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ Gateway, Proof string }
	_ = json.Unmarshal(raw, &rec)
	if !secret.Check(rec.Proof, "lease", strict.Root, lease, rec.Gateway) {
		t.Errorf("the record lacks the proof of earlier versions: %s", raw)
	}
	raw, _, err = conn.Get(strict.Root + "/gateways/" + rec.Gateway)
	if err != nil {
		t.Fatal(err)
	}
	var reg struct{ Advertise, Proof string }
	_ = json.Unmarshal(raw, &reg)
	if !secret.Check(reg.Proof, "registration", strict.Root, rec.Gateway, reg.Advertise) {
		t.Errorf("the registration lacks the proof of earlier versions: %s", raw)
	}

	// A gateway of an earlier version, as its nodes read: the proofs of a
	// few fields alone. Its requests are answered by a stranger, which
	// records what reaches it.
	older := newStranger(t)
	data, _ := json.Marshal(map[string]any{"advertise": older.addr(), "version": "dev", "started_at": time.Now().UTC(),
		"proof": secret.Sign("registration", strict.Root, "older", older.addr())})
	if _, err := conn.Create(strict.Root+"/gateways/older", data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	movedToOlder := func(url string) string {
		lease := newLease(t, url, "1m", "moved-to-older")
		rewrite(t, conn, strict.Root+"/leases/"+lease, map[string]any{"gateway": "older",
			"proof": secret.Sign("lease", strict.Root, lease, "older")})
		return lease
	}
	// Each gateway is asked of a lease another made: it looks its record up.
	lease = movedToOlder(compat.URL)
	wantProblem(t, acquire(t, strict.URL, "x", lease, "0s"), 503, "unavailable", "by default, a lease whose record has the earlier proof alone")
	if n := len(older.requests()); n != 0 {
		t.Errorf("by default, the older gateway received %d requests", n)
	}
	// The log reaches the test through a pipe: read until it is there.
	gwtest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(strict.Logs(), "--peer-proofs compat") {
			return fmt.Errorf("the log should name --peer-proofs compat for a node of an earlier version: %s", strict.Logs())
		}
		return nil
	})
	acquire(t, compat.URL, "x", movedToOlder(strict.URL), "0s")
	if n := len(older.requests()); n != 1 {
		t.Errorf("with --peer-proofs compat, the older gateway received %d requests, want the one forwarded", n)
	}
}
