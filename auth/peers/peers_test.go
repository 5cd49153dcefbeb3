package peers

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/internal/peer"
	"github.com/zkgate/zkgate/recipes"
)

// TestParseProof: the forwarding header is read strictly; what a gateway
// writes reads back the same.
func TestParseProof(t *testing.T) {
	good := proof{from: "gw-a", to: "gw-b", caller: "billing", nonce: "AAAAAAAAAAAAAAAAAAAAAA", at: 1700000000, mac: "bWFj"}
	got, err := parseProof(good.String())
	if err != nil || got != good {
		t.Fatalf("parseProof(%q) = %+v, %v", good.String(), got, err)
	}
	noCaller := good
	noCaller.caller, noCaller.mac = "", ""
	if got, err := parseProof(noCaller.String()); err != nil || got != noCaller {
		t.Errorf("a proof without caller nor mac: %+v, %v", got, err)
	}
	for _, h := range []string{
		"",
		"v2 from=a to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller=",
		"from=a to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller=",
		"v1 to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller=",                                   // no from
		"v1 from=a to=b n=AAAAAAAAAAAAAAAAAAAAAA caller=",                                // no t
		"v1 from=a to=b t=1 caller=",                                                     // no nonce
		"v1 from=a to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA",                                    // no caller
		"v1 from=a from=c to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller=",                     // twice
		"v1 from=a to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller= extra=1",                    // unknown field
		"v1 from=a to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller= mac",                        // no value
		"v1 from=a to=b t=soon n=AAAAAAAAAAAAAAAAAAAAAA caller=",                         // not a time
		"v1 from=a to=b t=1 n=AAAA caller=",                                              // short nonce
		"v1 from=a to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller=ad/min",                      // not a name
		"v1 from= to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller=",                             // empty id
		"v1 from=a to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller=" + strings.Repeat("x", 201), // too long
	} {
		if f, err := parseProof(h); err == nil {
			t.Errorf("parseProof(%q) = %+v, want an error", h, f)
		}
	}
}

// TestAnswerFieldsCoverWhatIsRelayed: the proof of an answer covers every
// header relayed to the client, and none that is not.
func TestAnswerFieldsCoverWhatIsRelayed(t *testing.T) {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Zkgate-Index", "7")
	h.Set("X-Request-Id", "r1")
	base := strings.Join(answerFields("n", 200, h, []byte("{}")), "|")
	for name, change := range map[string]func(http.Header){
		"a relayed header changed": func(h http.Header) { h.Set("X-Zkgate-Index", "8") },
		"a relayed header added":   func(h http.Header) { h.Set("Location", "/v1/leases/x") },
		"a relayed header removed": func(h http.Header) { h.Del("Content-Type") },
	} {
		c := h.Clone()
		change(c)
		if strings.Join(answerFields("n", 200, c, []byte("{}")), "|") == base {
			t.Errorf("%s: the proof covers the same", name)
		}
	}
	c := h.Clone()
	c.Set("X-Request-Id", "r2")
	c.Set(ServedByHeader, "elsewhere")
	if strings.Join(answerFields("n", 200, c, []byte("{}")), "|") != base {
		t.Error("a header that is not relayed changed what the proof covers")
	}
	for name, other := range map[string][]string{
		"status": answerFields("n", 201, h, []byte("{}")),
		"body":   answerFields("n", 200, h, []byte("[]")),
		"nonce":  answerFields("m", 200, h, []byte("{}")),
	} {
		if strings.Join(other, "|") == base {
			t.Errorf("another %s: the proof covers the same", name)
		}
	}
}

// signedRequest is a request as gateway "gw-a" sends it to "gw-b", its
// proof made at time at.
func signedRequest(t *testing.T, secret *peer.Secret, method, uri, body string, at time.Time, caller string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, uri, strings.NewReader(body))
	var n [16]byte
	_, _ = rand.Read(n[:])
	f := proof{from: "gw-a", to: "gw-b", caller: caller, nonce: base64.RawURLEncoding.EncodeToString(n[:]), at: at.Unix()}
	f.mac = secret.Sign("request", f.requestFields(method, r.RequestURI, []byte(body))...)
	r.Header.Set(ForwardedHeader, f.String())
	return r
}

// TestAdmit: a forwarded request is taken once, only with a proof of the
// shared secret over what it asks, within ClockSkew of the receiver's
// clock; a proven request meant for another gateway is answered 421.
func TestAdmit(t *testing.T) {
	secret, err := peer.ParseSecret("f", []byte(strings.Repeat("s", 32)))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := peer.ParseSecret("f", []byte(strings.Repeat("o", 32)))
	b := New("gw-b", secret, nil, slog.New(slog.DiscardHandler))
	now := time.Now()

	r := signedRequest(t, secret, "POST", "/v1/locks/x/acquire?wait=1s", `{"lease":"l"}`, now, "billing")
	got, err := b.Admit(r)
	if err != nil {
		t.Fatalf("a proven request: %v", err)
	}
	if pc := CallOf(got.Context()); pc == nil || pc.Gateway != "gw-a" || pc.Caller != "billing" || !pc.signed {
		t.Fatalf("the proven call: %+v", pc)
	}
	if body, _ := io.ReadAll(got.Body); string(body) != `{"lease":"l"}` {
		t.Errorf("the body after the check: %q", body)
	}
	replay := httptest.NewRequest("POST", "/v1/locks/x/acquire?wait=1s", strings.NewReader(`{"lease":"l"}`))
	replay.Header = r.Header.Clone()
	if _, err := b.Admit(replay); recipes.ErrorCode(err) != auth.CodeForbidden || !strings.Contains(err.Error(), "replay") {
		t.Errorf("a replay: %v", err)
	}

	for name, c := range map[string]struct {
		r    *http.Request
		want string
	}{
		"another secret's": {signedRequest(t, other, "GET", "/v1/leases", "", now, ""), "does not check out"},
		"old":              {signedRequest(t, secret, "GET", "/v1/leases", "", now.Add(-ClockSkew-time.Minute), ""), "off this gateway's clock"},
		"from the future":  {signedRequest(t, secret, "GET", "/v1/leases", "", now.Add(ClockSkew+time.Minute), ""), "off this gateway's clock"},
		"malformed": {func() *http.Request {
			r := httptest.NewRequest("GET", "/v1/leases", nil)
			r.Header.Set(ForwardedHeader, "1")
			return r
		}(), "malformed"},
	} {
		if _, err := b.Admit(c.r); recipes.ErrorCode(err) != auth.CodeForbidden || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want forbidden, %q", name, err, c.want)
		}
	}
	for name, change := range map[string]func(*http.Request){
		"another body":   func(r *http.Request) { r.Body = io.NopCloser(strings.NewReader(`{"lease":"m"}`)) },
		"another method": func(r *http.Request) { r.Method = "DELETE" },
		"another query":  func(r *http.Request) { r.RequestURI = "/v1/locks/x/acquire?wait=1m" },
		"another caller": func(r *http.Request) {
			r.Header.Set(ForwardedHeader, strings.Replace(r.Header.Get(ForwardedHeader), "caller=billing", "caller=admin", 1))
		},
	} {
		r := signedRequest(t, secret, "POST", "/v1/locks/x/acquire?wait=1s", `{"lease":"l"}`, now, "billing")
		change(r)
		if _, err := b.Admit(r); recipes.ErrorCode(err) != auth.CodeForbidden || !strings.Contains(err.Error(), "does not check out") {
			t.Errorf("%s: %v, want forbidden", name, err)
		}
	}

	c := New("gw-c", secret, nil, slog.New(slog.DiscardHandler))
	if got, err := c.Admit(signedRequest(t, secret, "GET", "/v1/leases", "", now, "")); recipes.ErrorCode(err) != CodeMisdirected || CallOf(got.Context()) == nil {
		t.Errorf("a proven request meant for another gateway: %v, want misdirected with the call proven", err)
	}
	var none *Credential
	if _, err := none.Admit(signedRequest(t, secret, "GET", "/v1/leases", "", now, "")); recipes.ErrorCode(err) != auth.CodeForbidden ||
		!strings.Contains(err.Error(), "--peer-secret-file") {
		t.Errorf("a gateway without a credential: %v", err)
	}
}

// TestPlainName: an id or a name carried as it is is 1 to most bytes of
// [A-Za-z0-9._-]; an empty one, a longer one, or one with any other byte
// (a space, a quote, a newline, a non-ASCII letter) is not.
func TestPlainName(t *testing.T) {
	for _, tt := range []struct {
		s    string
		most int
		ok   bool
	}{
		{"req-1", 64, true},
		{"A.b_C-9", 64, true},
		{strings.Repeat("x", 64), 64, true},
		{strings.Repeat("x", 65), 64, false},
		{"", 64, false},
		{"a b", 64, false},
		{`a"b`, 64, false},
		{"a\nb", 64, false},
		{"é", 64, false},
		{"a/b", 64, false},
	} {
		if got := PlainName(tt.s, tt.most); got != tt.ok {
			t.Errorf("PlainName(%q, %d) = %v, want %v", tt.s, tt.most, got, tt.ok)
		}
	}
}

// TestEarlyRefusalIsLoggedAsWhatItIs: a gateway that refuses a forwarded
// request before checking its proof (a body too large, a cap, a drain)
// answers without a proof of its own; the sender logs that refusal as what
// it is, with its status and code, and tells its caller so; it relays
// neither that nor an answer without a proof that is no such refusal,
// which it still logs as one that does not prove itself. Before, both were
// logged as answers that do not prove themselves (forgeries).
func TestEarlyRefusalIsLoggedAsWhatItIs(t *testing.T) {
	secret, err := peer.ParseSecret("f", []byte(strings.Repeat("s", 32)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, ct, body string
		status         int
		log, detail    string
	}{
		{"too large", "application/problem+json", `{"code":"too_large","detail":"the body is larger than 1048576 bytes"}`, 413,
			"refused the request before checking its proof", "refused the request: 413 too_large"},
		{"a cap", "application/problem+json", `{"code":"too_many","detail":"max-requests-per-token"}`, 429,
			"refused the request before checking its proof", "refused the request: 429 too_many"},
		{"a forged 200", "application/json", `{"name":"x"}`, 200, "does not prove itself", "does not check out"},
		{"a 413 of another code", "application/problem+json", `{"code":"unavailable"}`, 413, "does not prove itself", "does not check out"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", c.ct)
			w.WriteHeader(c.status)
			_, _ = io.WriteString(w, c.body)
		}))
		var logs strings.Builder
		a := New("gw-a", secret, nil, slog.New(slog.NewTextHandler(&logs, nil)))
		_, err := a.Ask(t.Context(), recipes.Keeper{Gateway: "gw-b", Advertise: strings.TrimPrefix(srv.URL, "http://")},
			"POST", "/v1/locks/x/acquire", "application/json", "req-1", "", []byte(`{}`))
		srv.Close()
		if recipes.ErrorCode(err) != recipes.CodeUnavailable || !strings.Contains(err.Error(), c.detail) {
			t.Errorf("%s: %v, want unavailable saying %q", c.name, err, c.detail)
		}
		if !strings.Contains(logs.String(), c.log) {
			t.Errorf("%s: the log does not say %q:\n%s", c.name, c.log, logs.String())
		}
	}
}

// FuzzParseProof: the forwarding header, which anyone may send, never
// panics the parser, and what it takes writes back to a header that reads
// the same.
func FuzzParseProof(f *testing.F) {
	f.Add("v1 from=gw-a to=gw-b t=1700000000 n=AAAAAAAAAAAAAAAAAAAAAA caller=billing mac=bWFj")
	f.Add("v1 from=a to=b t=-1 n=AAAAAAAAAAAAAAAAAAAAAA caller=")
	f.Add("v1 caller==x from=a")
	f.Fuzz(func(t *testing.T, h string) {
		p, err := parseProof(h)
		if err != nil {
			return
		}
		again, err := parseProof(p.String())
		if err != nil || again != p {
			t.Fatalf("%q read as %+v, written as %q, read back as %+v, %v", h, p, p.String(), again, err)
		}
	})
}
