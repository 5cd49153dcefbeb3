package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/zkgate/zkgate/internal/harness/dashtest"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// browserSignIn signs a browser in with token's secret, to the leases page.
func browserSignIn(t *testing.T, ctx context.Context, g *gwtest.Secured, token string) {
	t.Helper()
	dashtest.Step(t, ctx, "sign in as "+token,
		chromedp.Navigate(g.URL+"/signin?next=/ui/leases"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SetValue(chromedp.CSS(`#token`), g.SecretOf(token)),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)))
}

// postFromPage posts a form to path with fetch from the page the browser
// shows, and returns the status.
func postFromPage(t *testing.T, ctx context.Context, path, form string) int {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	status, err := chromedp.Run(sctx, chromedp.Evaluate[int](fmt.Sprintf(`fetch(%q, {method: "POST",
		headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: %q, redirect: "manual"}).then(r => r.status)`, path, form),
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("browser: POST %s: %v", path, err)
	}
	return status
}

// TestBrowserAdminRevokes: in headless Chromium, an admin signs in, opens
// the lease's revoke, is shown what ends and confirms; the holder's next
// keepalive answers 410, reason revoked, and a reader watching the leases
// page sees "revoked by admin" arrive live. The reader sees no control, and
// a forged POST gets 403: the reader's own, the admin's without the form's
// token, and a form posted from another site's page.
func TestBrowserAdminRevokes(t *testing.T) {
	t.Parallel()
	// A session timeout of 10 s, not the harness's 2 s: two browsers on a
	// loaded machine have cost the gateway its session (session_lost).
	file, secrets := gwtest.NewTokensFile(t)
	g := gwtest.StartSecured(t, gwtest.GatewayOptions{SessionTimeout: 10 * time.Second}, file, secrets)
	r := g.As(t, "writer", "POST", "/v1/leases", map[string]any{"ttl": "1m", "holder": "stuck-worker"})
	gwtest.MustStatus(t, r, 201, "lease")
	lease := r.JSON(t)["id"].(string)
	gwtest.MustStatus(t, g.As(t, "writer", "POST", "/v1/locks/browser-lock/acquire", map[string]any{"lease": lease}), 200, "lock")
	revoke := "/ui/leases/" + lease + "/revoke"
	row := fmt.Sprintf(`#lease-%s`, lease)

	readerCtx := dashtest.StartBrowser(t)
	browserSignIn(t, readerCtx, g, "reader")
	dashtest.Step(t, readerCtx, "the reader sees the lease", chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = "yes"`))
	if n := dashtest.Eval[int](t, readerCtx, `document.querySelectorAll('a.act').length`); n != 0 {
		t.Errorf("the reader's leases page shows %d controls", n)
	}
	if status := postFromPage(t, readerCtx, revoke, "form_token=forged"); status != http.StatusForbidden {
		t.Errorf("the reader's forged revoke: %d, want 403", status)
	}

	adminCtx := dashtest.StartBrowser(t)
	browserSignIn(t, adminCtx, g, "admin")
	if status := postFromPage(t, adminCtx, revoke, "form_token=forged"); status != http.StatusForbidden {
		t.Errorf("the admin's revoke without the form's token: %d, want 403", status)
	}
	// Another site's page posts the admin's browser's form, token or not.
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><html><body><iframe name="sink"></iframe>
<form id="f" method="POST" target="sink" action="%s%s"><input name="form_token" value="guessed"></form>
<script>document.getElementById('f').submit();</script></body></html>`, g.URL, revoke)
	}))
	defer attacker.Close()
	dashtest.Step(t, adminCtx, "open another site's page", chromedp.Navigate(attacker.URL))
	gwtest.Eventually(t, 10*time.Second, func() error {
		if n := refusedPosts(t, g, "/ui/leases/{id}/revoke"); n < 3 {
			return fmt.Errorf("%d refused revokes, want the attacker's too", n)
		}
		return nil
	})
	gwtest.MustStatus(t, g.As(t, "writer", "POST", "/v1/leases/"+lease+"/keepalive", nil), 200, "keepalive after the forgeries")

	// The row is replaced live as its confirmed deadline moves: the script
	// follows the control on the press of the pointer (a click whose press
	// and release land on two renderings of the row is lost), which the
	// test makes on the element itself, as a pointer at a position may find
	// it gone.
	dashtest.Step(t, adminCtx, "the admin's leases page", chromedp.Navigate(g.URL+"/ui/leases"), chromedp.WaitVisible(chromedp.CSS(row+` a.revoke`)))
	screenshot(t, adminCtx, "admin-leases.png")
	href := dashtest.Eval[string](t, adminCtx, `document.querySelector('`+row+` a.revoke').getAttribute('href')`)
	if href != revoke {
		t.Errorf("the revoke control goes to %q, want %q", href, revoke)
	}
	dashtest.Step(t, adminCtx, "press the lease's revoke",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('`+row+` a.revoke').dispatchEvent(new PointerEvent('pointerdown', {bubbles: true, button: 0}))`),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-button`)))
	screenshot(t, adminCtx, "confirm-revoke.png")
	if ends := dashtest.Eval[string](t, adminCtx, `document.getElementById('confirm-ends').textContent`); !strings.Contains(ends, "lock browser-lock") {
		t.Errorf("the confirmation names %q, want the lock it holds", ends)
	}
	dashtest.Step(t, adminCtx, "confirm",
		chromedp.Click(chromedp.CSS(`#confirm-button`)),
		chromedp.WaitVisible(chromedp.CSS(`#actions .action`)))
	screenshot(t, adminCtx, "revoked.png")
	if loc := dashtest.Eval[string](t, adminCtx, `location.pathname`); loc != "/ui/leases" {
		t.Errorf("after the revoke the admin is at %s, want /ui/leases", loc)
	}
	r = g.As(t, "writer", "POST", "/v1/leases/"+lease+"/keepalive", nil)
	if r.Status != http.StatusGone || r.JSON(t)["reason"] != "revoked" {
		t.Errorf("the holder's keepalive after the revoke: %d %s, want 410 reason revoked", r.Status, r.Body)
	}
	dashtest.Step(t, readerCtx, "the reader sees the revoke live", chromedp.WaitVisible(chromedp.CSS(`#actions .action`)))
	if got := dashtest.Eval[string](t, readerCtx, `document.getElementById('actions').textContent`); !strings.Contains(got, "revoked by admin") ||
		!strings.Contains(got, "stuck-worker") {
		t.Errorf("the reader's page shows %q, want the lease revoked by admin", got)
	}
	if got := dashtest.Eval[string](t, readerCtx, `window.sameDocument`); got != "yes" {
		t.Errorf("the reader's page was reloaded: the event must come over the WebSocket")
	}
}

// refusedPosts counts the POSTs of route the gateway answered 403.
func refusedPosts(t *testing.T, g *gwtest.Secured, route string) int {
	t.Helper()
	return int(gwtest.Metric(t, g.URL, g.SecretOf("reader"), `zkgate_http_requests_total{code="403",method="POST",route="`+route+`"}`))
}

// screenshot saves what the browser shows in the test's artifacts.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	out := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", out)
}
