package auth_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/zkgate/zkgate/internal/harness/dashtest"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// cspRecorder keeps every Content-Security-Policy violation of every page
// of the origin in sessionStorage, where the test reads them. It is
// injected by the browser itself, so the policy does not apply to it.
const cspRecorder = `document.addEventListener('securitypolicyviolation', function (e) {
  var v = JSON.parse(sessionStorage.getItem('csp') || '[]');
  v.push(e.violatedDirective + ' ' + (e.blockedURI || '') + ' ' + (e.sourceFile || '') + ':' + e.lineNumber);
  sessionStorage.setItem('csp', JSON.stringify(v));
});`

// TestBrowserSignIn: with tokens on, the dashboard sends a browser to its
// sign-in page; an unknown token and one that may not read everything are
// refused there; a reading token is kept in an HttpOnly, SameSite=Strict
// cookie, the dashboard shows live updates, and sign-out forgets it. No page
// breaks its Content-Security-Policy (no inline script or style).
func TestBrowserSignIn(t *testing.T) {
	t.Parallel()
	file, secrets := gwtest.NewTokensFile(t)
	g := gwtest.StartSecured(t, gwtest.GatewayOptions{}, file, secrets)
	ctx := dashtest.StartBrowser(t)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorder}); err != nil {
		t.Fatal(err)
	}

	sentToSignIn(t, ctx, g)
	signIn := func(secret string) {
		t.Helper()
		dashtest.Step(t, ctx, "sign in",
			chromedp.WaitVisible(chromedp.CSS(`#token`)),
			chromedp.SetValue(chromedp.CSS(`#token`), secret),
			chromedp.Submit(chromedp.CSS(`#token`)))
	}
	signIn("zkg_not-a-token")
	dashtest.Step(t, ctx, "an unknown token", chromedp.WaitVisible(chromedp.CSS(`#signin-error`)))
	if msg := dashtest.Eval[string](t, ctx, `document.getElementById('signin-error').textContent`); !strings.Contains(msg, "Unknown token") {
		t.Errorf("error %q", msg)
	}
	signIn(secrets["billing"])
	dashtest.Step(t, ctx, "a token without *:*:read", chromedp.WaitVisible(chromedp.CSS(`#signin-error`)))
	if msg := dashtest.Eval[string](t, ctx, `document.getElementById('signin-error').textContent`); !strings.Contains(msg, "*:*:read") {
		t.Errorf("error %q, want it to name *:*:read", msg)
	}
	signIn(secrets["reader"])
	signedIn(t, ctx, g)
	liveUpdate(t, ctx, g)
	signedOut(t, ctx, g)

	if v := dashtest.Eval[string](t, ctx, `sessionStorage.getItem('csp') || '[]'`); v != "[]" {
		t.Errorf("Content-Security-Policy violations: %s", v)
	}
	pageHeaders(t, g.URL+"/ui/locks", secrets["reader"])
}

// sentToSignIn: a page asked for without a token sends the browser to the
// sign-in, which comes back to it; and the CSP recorder sees a planted
// inline style (then forgets it).
func sentToSignIn(t *testing.T, ctx context.Context, g *gwtest.Secured) {
	dashtest.Step(t, ctx, "open a page without signing in",
		chromedp.Navigate(g.URL+"/ui/locks"),
		chromedp.WaitVisible(chromedp.CSS(`form.signin-form`)))
	if loc := dashtest.Eval[string](t, ctx, `location.pathname + location.search`); loc != "/signin?next=%2Fui%2Flocks" {
		t.Errorf("sent to %q, want the sign-in with next=/ui/locks", loc)
	}
	// The recorder works: an inline style attribute is a violation.
	_ = dashtest.Eval[bool](t, ctx, `(document.body.setAttribute('style', 'color: red'), true)`)
	if n := dashtest.Eval[int](t, ctx, `JSON.parse(sessionStorage.getItem('csp') || '[]').length`); n != 1 {
		t.Fatalf("the CSP recorder saw %d violations of a planted inline style, want 1", n)
	}
	_ = dashtest.Eval[bool](t, ctx, `(sessionStorage.removeItem('csp'), true)`)
}

// signedIn: the reader lands on the page it asked for, live, under its
// name, its token in an HttpOnly, SameSite=Strict cookie no script reads.
func signedIn(t *testing.T, ctx context.Context, g *gwtest.Secured) {
	dashtest.Step(t, ctx, "land on the page asked for, live",
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = "yes"`))
	if loc := dashtest.Eval[string](t, ctx, `location.pathname`); loc != "/ui/locks" {
		t.Errorf("signed in to %q, want /ui/locks", loc)
	}
	if who := dashtest.Eval[string](t, ctx, `document.querySelector('.signout .who').textContent`); who != "reader" {
		t.Errorf("the header says signed in as %q, want reader", who)
	}
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{g.URL}})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, c := range cookies.Cookies {
		if c.Name != "zkgate_token" {
			continue
		}
		found = true
		if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict || c.Secure {
			t.Errorf("cookie HttpOnly %v SameSite %v Secure %v, want HttpOnly, Strict, not Secure over plain HTTP", c.HTTPOnly, c.SameSite, c.Secure)
		}
	}
	if !found {
		t.Fatalf("no zkgate_token cookie: %+v", cookies.Cookies)
	}
	if got := dashtest.Eval[string](t, ctx, `document.cookie`); strings.Contains(got, "zkgate_token") {
		t.Errorf("the page's script can read the token: %q", got)
	}
}

// liveUpdate: a lock taken through the API appears without a reload, and
// the other pages serve the signed-in browser.
func liveUpdate(t *testing.T, ctx context.Context, g *gwtest.Secured) {
	lease := g.NewLeaseAs(t, "writer")
	gwtest.MustStatus(t, g.As(t, "writer", "POST", "/v1/locks/signed-in/acquire", map[string]any{"lease": lease}), 200, "acquire")
	dashtest.Step(t, ctx, "see the holder appear",
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#lock-signed-in li.node.holds[data-lease=%q]`, lease))))
	if got := dashtest.Eval[string](t, ctx, `window.sameDocument`); got != "yes" {
		t.Fatalf("the page was reloaded: updates must come over the WebSocket")
	}
	dashtest.Step(t, ctx, "other pages", chromedp.Navigate(g.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)),
		chromedp.Navigate(g.URL+"/ui/znodes"), chromedp.WaitVisible(chromedp.CSS(`main`)))
}

// signedOut: sign-out takes the cookie away, and the dashboard asks again.
func signedOut(t *testing.T, ctx context.Context, g *gwtest.Secured) {
	dashtest.Step(t, ctx, "sign out", chromedp.Click(chromedp.CSS(`.signout button`)), chromedp.WaitVisible(chromedp.CSS(`form.signin-form`)))
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{g.URL}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cookies.Cookies {
		if c.Name == "zkgate_token" {
			t.Errorf("the cookie is still there after sign-out")
		}
	}
	dashtest.Step(t, ctx, "the dashboard asks again", chromedp.Navigate(g.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`form.signin-form`)))
}

// pageHeaders: a page carries a Content-Security-Policy without inline
// code, and nosniff.
func pageHeaders(t *testing.T, url, secret string) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %s", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy %q allows inline code", csp)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("no X-Content-Type-Options: nosniff")
	}
}
