package gwtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkgate/zkgate/auth"
)

// Gateways with tokens, as the tests of auth and of the server start them,
// and the requests they send as one token or another.

// Secured is a zkgate process with tokens.
type Secured struct {
	*Proc
	File    string
	Secrets map[string]string // token name -> secret
}

// securedTokens are the tokens of NewTokensFile.
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

// NewTokensFile makes a tokens file of writer, other (*:*:write), reader
// (*:*:read), admin (*:*:admin), billing (locks:billing-:write and
// leases:*:write) and locker (locks:*:write), and returns it with their
// secrets.
func NewTokensFile(t testing.TB) (string, map[string]string) {
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

// StartSecured starts a zkgate process with the tokens file, logging at
// info; the test fails if a secret reaches its log.
func StartSecured(t testing.TB, opts GatewayOptions, file string, secrets map[string]string) *Secured {
	t.Helper()
	opts.Extra = append([]string{"--auth-file", file, "--log-level", "info"}, opts.Extra...)
	p := StartProcess(t, opts)
	s := &Secured{Proc: p, File: file, Secrets: secrets}
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

// As sends a request with token's secret ("" sends none; a string that is
// not a token name is sent as it is).
func (s *Secured) As(t testing.TB, token, method, path string, body any) Response {
	t.Helper()
	return DoAs(t, s.URL, s.SecretOf(token), method, path, body)
}

// SecretOf is the secret of the token named token, or token itself.
func (s *Secured) SecretOf(token string) string {
	if sec, ok := s.Secrets[token]; ok {
		return sec
	}
	return token
}

// NewLeaseAs makes a lease for token.
func (s *Secured) NewLeaseAs(t testing.TB, token string) string {
	t.Helper()
	r := s.As(t, token, "POST", "/v1/leases", map[string]any{"ttl": "1m", "holder": token})
	MustStatus(t, r, 201, "lease for "+token)
	return r.JSON(t)["id"].(string)
}

// NoRedirects shows a redirect instead of following it.
var NoRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// DoAs sends a request with the bearer secret ("" sends none), following
// no redirect.
func DoAs(t testing.TB, base, secret, method, path string, body any) Response {
	t.Helper()
	r, err := SendAs(context.Background(), base, secret, method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// SendAs is DoAs without a test, for goroutines: a string body is sent as
// raw bytes, anything else as JSON.
func SendAs(ctx context.Context, base, secret, method, path string, body any) (Response, error) {
	var rd io.Reader
	ct := ""
	switch b := body.(type) {
	case nil:
	case string:
		rd, ct = strings.NewReader(b), "application/octet-stream"
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return Response{}, err
		}
		rd, ct = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return Response{}, err
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	return Send(NoRedirects, req)
}

// WantProblem fails the test unless r is a problem document of status and
// code, and returns it.
func WantProblem(t testing.TB, r Response, status int, code, what string) map[string]any {
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
