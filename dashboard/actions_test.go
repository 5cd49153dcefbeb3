package dashboard_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// dashUser is a browser signed in to the dashboard, as far as the gateway
// can tell: the sign-in's cookies, and an Origin of the gateway itself.
type dashUser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func signInAs(t *testing.T, g *gwtest.Secured, token string) *dashUser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	u := &dashUser{t: t, base: g.URL, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if status, _, body := u.post("/signin", url.Values{"token": {g.SecretOf(token)}, "next": {"/ui/leases"}}, nil); status != http.StatusSeeOther {
		t.Fatalf("sign in as %s: %d %s", token, status, body)
	}
	return u
}

func (u *dashUser) get(path string) (int, string) {
	u.t.Helper()
	resp, err := u.c.Get(u.base + path)
	if err != nil {
		u.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// post posts a form as the browser would from the gateway's own page, with
// the headers of header on top (another site's, say).
func (u *dashUser) post(path string, form url.Values, header map[string]string) (int, http.Header, string) {
	u.t.Helper()
	req, err := http.NewRequest("POST", u.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		u.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", u.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := u.c.Do(req)
	if err != nil {
		u.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

var formTokenRE = regexp.MustCompile(`name="form_token" value="([^"]+)"`)

// formToken opens the confirmation page path and returns its form's token.
func (u *dashUser) formToken(path string) (string, string) {
	u.t.Helper()
	status, page := u.get(path)
	m := formTokenRE.FindStringSubmatch(page)
	if status != http.StatusOK || m == nil {
		u.t.Fatalf("GET %s: %d, no form token:\n%s", path, status, page)
	}
	return m[1], page
}

// wantForbidden checks a refusal: 403, a forbidden problem.
func wantForbidden(t *testing.T, what string, status int, h http.Header, body string) {
	t.Helper()
	if status != http.StatusForbidden || h.Get("Content-Type") != "application/problem+json" || !strings.Contains(body, `"code":"forbidden"`) {
		t.Errorf("%s: %d %s %s, want 403 forbidden problem+json", what, status, h.Get("Content-Type"), body)
	}
}

// TestDashboardAdminActions: a signed-in admin sees the controls on the
// leases page, confirms on a page that names what ends, releases one hold
// (the lease lives on) and revokes the lease (its holder's next keepalive
// is 410, reason revoked, and its lock-delay holds its lock back); each is
// an audit line and an event on the page.
// A reader sees no control and is refused 403; so is a form without the
// sign-in session's token, with another session's, or from another site.
func TestDashboardAdminActions(t *testing.T) {
	t.Parallel()
	file, secrets := gwtest.NewTokensFile(t)
	// leases-admin may revoke any lease, and release nothing of a name.
	secret, err := auth.AddToken(file, "leases-admin", []string{"*:*:read", "leases:*:admin"})
	if err != nil {
		t.Fatal(err)
	}
	secrets["leases-admin"] = secret
	g := gwtest.StartSecured(t, gwtest.GatewayOptions{SessionTimeout: 10 * time.Second}, file, secrets)
	r := g.As(t, "writer", "POST", "/v1/leases", map[string]any{"ttl": "1m", "holder": "stuck-worker", "lock_delay": "1m"})
	gwtest.MustStatus(t, r, 201, "lease")
	lease := r.JSON(t)["id"].(string)
	gwtest.MustStatus(t, g.As(t, "writer", "POST", "/v1/locks/act-lock/acquire", map[string]any{"lease": lease}), 200, "lock")
	gwtest.MustStatus(t, g.As(t, "writer", "POST", "/v1/semaphores/act-sem/acquire", map[string]any{"lease": lease, "limit": 2}), 200, "semaphore")
	revokePage := "/ui/leases/" + lease + "/revoke"
	releasePage := "/ui/leases/" + lease + "/release?kind=semaphore&name=act-sem"

	admin, reader := signInAs(t, g, "admin"), signInAs(t, g, "reader")
	if _, page := admin.get("/ui/leases"); !strings.Contains(page, `href="`+revokePage+`"`) || !strings.Contains(page, `href="`+strings.ReplaceAll(releasePage, "&", "&amp;")+`"`) {
		t.Errorf("the admin's leases page has no revoke or release control:\n%s", page)
	}
	if _, page := reader.get("/ui/leases"); !strings.Contains(page, `id="lease-`+lease+`"`) || strings.Contains(page, "/revoke") || strings.Contains(page, "/release") {
		t.Errorf("the reader's leases page shows controls, or not the lease")
	}

	// A reader is refused the page and the form.
	status, body := reader.get(revokePage)
	if status != http.StatusForbidden || !strings.Contains(body, `"code":"forbidden"`) {
		t.Errorf("a reader's confirmation page: %d %s", status, body)
	}
	token, confirm := admin.formToken(revokePage)
	for _, want := range []string{"stuck-worker", "lock act-lock", "semaphore act-sem", "410 lease_expired", "lock-delay"} {
		if !strings.Contains(confirm, want) {
			t.Errorf("the revoke's confirmation does not name %q", want)
		}
	}
	status, h, body := reader.post(revokePage, url.Values{"form_token": {token}}, nil)
	wantForbidden(t, "a reader's revoke", status, h, body)

	// Forged forms.
	status, h, body = admin.post(revokePage, url.Values{}, nil)
	wantForbidden(t, "a revoke without a form token", status, h, body)
	status, h, body = admin.post(revokePage, url.Values{"form_token": {"forged"}}, nil)
	wantForbidden(t, "a revoke with a wrong form token", status, h, body)
	status, h, body = admin.post(revokePage, url.Values{"form_token": {token}}, map[string]string{"Sec-Fetch-Site": "cross-site"})
	wantForbidden(t, "a revoke from another site", status, h, body)
	status, h, body = admin.post(revokePage, url.Values{"form_token": {token}}, map[string]string{"Sec-Fetch-Site": "", "Origin": "http://evil.example"})
	wantForbidden(t, "a revoke from another origin", status, h, body)
	gwtest.MustStatus(t, g.As(t, "writer", "POST", "/v1/leases/"+lease+"/keepalive", nil), 200, "keepalive after the refusals")

	// A release needs admin on the name too.
	leasesAdmin := signInAs(t, g, "leases-admin")
	if status, page := leasesAdmin.get(releasePage); status != http.StatusForbidden || !strings.Contains(page, "semaphores:act-sem:admin") {
		t.Errorf("the release's confirmation for a token without admin on the name: %d, want 403 naming semaphores:act-sem:admin", status)
	}
	laToken, _ := leasesAdmin.formToken(revokePage)
	status, h, body = leasesAdmin.post("/ui/leases/"+lease+"/release", url.Values{"form_token": {laToken}, "kind": {"semaphore"}, "name": {"act-sem"}}, nil)
	wantForbidden(t, "a release without admin on the name", status, h, body)

	// Release one hold: the lease lives on.
	token, confirm = admin.formToken(releasePage)
	if !strings.Contains(confirm, "semaphore act-sem") || strings.Contains(confirm, "lock act-lock") {
		t.Errorf("the release's confirmation does not name the semaphore alone")
	}
	status, h, body = admin.post("/ui/leases/"+lease+"/release", url.Values{"form_token": {token}, "kind": {"semaphore"}, "name": {"act-sem"}}, nil)
	if status != http.StatusSeeOther || h.Get("Location") != "/ui/leases" {
		t.Fatalf("release: %d %s", status, body)
	}
	if r := g.As(t, "reader", "GET", "/v1/semaphores/act-sem", nil); strings.Contains(string(r.Body), lease) {
		t.Errorf("the semaphore still holds the lease: %s", r.Body)
	}
	gwtest.MustStatus(t, g.As(t, "writer", "POST", "/v1/leases/"+lease+"/keepalive", nil), 200, "keepalive after the release")

	// Revoke.
	token, _ = admin.formToken(revokePage)
	status, h, body = admin.post(revokePage, url.Values{"form_token": {token}}, nil)
	if status != http.StatusSeeOther || h.Get("Location") != "/ui/leases" {
		t.Fatalf("revoke: %d %s", status, body)
	}
	r = g.As(t, "writer", "POST", "/v1/leases/"+lease+"/keepalive", nil)
	if r.Status != http.StatusGone || r.JSON(t)["reason"] != "revoked" {
		t.Errorf("the holder's keepalive after the revoke: %d %s, want 410 reason revoked", r.Status, r.Body)
	}
	// Its lock-delay holds the lock back from the next lease: the revoke
	// was an admin's, not a release by its client.
	r = g.As(t, "other", "POST", "/v1/locks/act-lock/acquire?wait=0s", map[string]any{"ttl": "1m"})
	if r.Status != http.StatusConflict || !strings.Contains(string(r.Body), "lock_delay_until") {
		t.Errorf("an acquire right after the revoke: %d %s, want 409 held back by the lock-delay", r.Status, r.Body)
	}
	if _, page := reader.get("/ui/leases"); !strings.Contains(page, "revoked by <strong class=\"by\">admin</strong>") ||
		!strings.Contains(page, "semaphore act-sem of lease "+lease[:8]+" (stuck-worker) released") {
		t.Errorf("the leases page does not show the actions:\n%s", page)
	}
	gwtest.Eventually(t, 10*time.Second, func() error {
		logs := g.Logs()
		for _, want := range []string{"audit=dashboard_revoke", "audit=dashboard_release", "actor=admin", "remote=127.0.0.1:", "lease=" + lease} {
			if !strings.Contains(logs, want) {
				return &missing{want}
			}
		}
		return nil
	})
}

type missing struct{ what string }

func (m *missing) Error() string { return "the log has no " + m.what }

// TestDashboardRevokesALeaseOfAnotherGateway: the lease is kept by gateway
// b; an admin revokes it from gateway a's dashboard, whose revoke is the
// API's and so passed on to b. The holder's next keepalive at b is 410,
// reason revoked, and a writes the audit line.
func TestDashboardRevokesALeaseOfAnotherGateway(t *testing.T) {
	t.Parallel()
	file, secrets := gwtest.NewTokensFile(t)
	a := gwtest.StartSecured(t, gwtest.GatewayOptions{SessionTimeout: 10 * time.Second}, file, secrets)
	b := gwtest.StartSecured(t, gwtest.GatewayOptions{Root: a.Root, SessionTimeout: 10 * time.Second}, file, secrets)
	r := b.As(t, "writer", "POST", "/v1/leases", map[string]any{"ttl": "1m", "holder": "elsewhere"})
	gwtest.MustStatus(t, r, 201, "lease at b")
	lease := r.JSON(t)["id"].(string)
	gwtest.MustStatus(t, b.As(t, "writer", "POST", "/v1/locks/far-lock/acquire", map[string]any{"lease": lease}), 200, "lock at b")

	admin := signInAs(t, a, "admin")
	revoke := "/ui/leases/" + lease + "/revoke"
	var token string
	gwtest.Eventually(t, 10*time.Second, func() error {
		status, page := admin.get(revoke)
		m := formTokenRE.FindStringSubmatch(page)
		if status != http.StatusOK || m == nil || !strings.Contains(page, "lock far-lock") {
			return &missing{"confirmation of b's lease at a, with its lock"}
		}
		token = m[1]
		return nil
	})
	status, h, body := admin.post(revoke, url.Values{"form_token": {token}}, nil)
	if status != http.StatusSeeOther || h.Get("Location") != "/ui/leases" {
		t.Fatalf("revoke at a of b's lease: %d %s", status, body)
	}
	r = b.As(t, "writer", "POST", "/v1/leases/"+lease+"/keepalive", nil)
	if r.Status != http.StatusGone || r.JSON(t)["reason"] != "revoked" {
		t.Errorf("the holder's keepalive at b: %d %s, want 410 reason revoked", r.Status, r.Body)
	}
	gwtest.Eventually(t, 10*time.Second, func() error {
		if logs := a.Logs(); !strings.Contains(logs, "audit=dashboard_revoke") || !strings.Contains(logs, "lease="+lease) {
			return &missing{"audit line at a"}
		}
		return nil
	})
}
