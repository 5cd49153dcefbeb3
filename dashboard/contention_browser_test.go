package dashboard_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/zkgate/zkgate/internal/harness/dashtest"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestBrowserContention opens the contention page in headless Chromium:
// the names with the most time waited, a deadlock broken by the gateway
// drawn with its cycle, a new wait showing up without a reload, and, for a
// name chosen with the keyboard, a timeline of its holds (one bar each,
// coloured by holder) above its waits; in light and dark, with no
// Content-Security-Policy violation.
func TestBrowserContention(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	ctx := dashtest.StartBrowser(t)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: dashtest.CSPRecorder}); err != nil {
		t.Fatal(err)
	}

	brokenDeadlock(t, g.URL)

	dashtest.Step(t, ctx, "open the contention page",
		chromedp.Navigate(g.URL+"/ui/contention?window=15m"),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#contention-lock-ledger`)),
		chromedp.WaitVisible(chromedp.CSS(`#contention-lock-invoices`)),
		chromedp.WaitVisible(chromedp.CSS(`li.deadlock svg.cycle .party.victim`)),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = "yes"`))
	if got := dashtest.Eval[string](t, ctx, `document.querySelector('li.deadlock svg.cycle').getAttribute('aria-label')`); !strings.Contains(got, "billing-b waits for lock invoices") ||
		!strings.Contains(got, "billing-a waits for lock ledger") {
		t.Errorf("the deadlock drawn is %q, want billing-b waiting for invoices and billing-a for ledger", got)
	}

	// A new line forms: it shows up live, with its waiter counted.
	c, d := gwtest.NewLease(t, g.URL, "1m", "report-c"), gwtest.NewLease(t, g.URL, "1m", "report-d")
	gwtest.MustStatus(t, gwtest.Acquire(t, g.URL, "reports", c, "0s"), 200, "c takes reports")
	dCtx, stopD := context.WithCancel(context.Background())
	defer stopD()
	go func() {
		_, _ = gwtest.DoCtx(dCtx, "POST", g.URL+"/v1/locks/reports/acquire?wait=30s", map[string]any{"lease": d})
	}()
	dashtest.Step(t, ctx, "see the new line appear", chromedp.WaitVisible(chromedp.CSS(`#contention-lock-reports`)))
	if got := dashtest.Eval[string](t, ctx, `window.sameDocument`); got != "yes" {
		t.Fatalf("the page was reloaded (%q): updates must come over the WebSocket", got)
	}

	// Choose invoices with the keyboard: its timeline, holds above waits.
	checkTimeline(t, ctx)

	// Light and dark: the page follows the system's scheme.
	light, dark := schemeShot(t, ctx, "light"), schemeShot(t, ctx, "dark")
	if light == dark {
		t.Errorf("light and dark look the same: %s", light)
	}
	if v := dashtest.Eval[string](t, ctx, `sessionStorage.getItem('csp') || '[]'`); v != "[]" {
		t.Errorf("Content-Security-Policy violations: %s", v)
	}
	t.Logf("screenshots in %s", t.ArtifactDir())
}

// brokenDeadlock makes a deadlock of two leases on the gateway at base,
// which the gateway breaks (b's wait, the newest), then lets a's wait be
// granted.
func brokenDeadlock(t *testing.T, base string) {
	t.Helper()
	a, b := gwtest.NewLease(t, base, "1m", "billing-a"), gwtest.NewLease(t, base, "1m", "billing-b")
	gwtest.MustStatus(t, gwtest.Acquire(t, base, "invoices", a, "0s"), 200, "a takes invoices")
	gwtest.MustStatus(t, gwtest.Acquire(t, base, "ledger", b, "0s"), 200, "b takes ledger")
	aWaits := make(chan gwtest.Response, 1)
	go func() {
		r, _ := gwtest.DoCtx(context.Background(), "POST", base+"/v1/locks/ledger/acquire?wait=30s", map[string]any{"lease": a})
		aWaits <- r
	}()
	gwtest.WaitsFor(t, base, a, "lock", "ledger")
	if r := gwtest.Acquire(t, base, "invoices", b, "30s"); r.Status != 409 || !strings.Contains(string(r.Body), `"deadlock"`) {
		t.Fatalf("b's wait closing the cycle: %d %s", r.Status, r.Body)
	}
	gwtest.MustStatus(t, gwtest.Do(t, "POST", base+"/v1/locks/ledger/release", map[string]any{"lease": b}), 204, "b lets ledger go")
	if r := <-aWaits; r.Status != 200 {
		t.Fatalf("a's wait: %d %s", r.Status, r.Body)
	}
}

// checkTimeline chooses invoices with the keyboard and checks its
// timeline: a's hold above a's grant and b's wait ended by the deadlock.
func checkTimeline(t *testing.T, ctx context.Context) {
	t.Helper()
	dashtest.Step(t, ctx, "choose invoices with the keyboard",
		chromedp.Focus(chromedp.CSS(`#contention-lock-invoices a.name`)),
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS(`svg.timeline rect.bar.hold`)),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)))
	if loc := dashtest.Eval[string](t, ctx, `location.search`); !strings.Contains(loc, "kind=lock") || !strings.Contains(loc, "name=invoices") {
		t.Errorf("choosing a name went to %q", loc)
	}
	holds := dashtest.Eval[[]string](t, ctx, `Array.from(document.querySelectorAll('svg.timeline rect.bar.hold title')).map(e => e.textContent)`)
	if len(holds) != 1 || !strings.HasPrefix(holds[0], "billing-a held it") {
		t.Errorf("holds drawn: %q, want billing-a's", holds)
	}
	waits := dashtest.Eval[[]string](t, ctx, `Array.from(document.querySelectorAll('svg.timeline rect.bar.wait')).map(e => e.getAttribute('class'))`)
	if strings.Join(waits, ",") != "bar wait granted,bar wait deadlock" {
		t.Errorf("waits drawn: %q, want a's grant then b's wait ended by the deadlock", waits)
	}
	holdY := dashtest.Eval[float64](t, ctx, `Number(document.querySelector('svg.timeline rect.bar.hold').getAttribute('y'))`)
	waitY := dashtest.Eval[float64](t, ctx, `Math.min(...Array.from(document.querySelectorAll('svg.timeline rect.bar.wait')).map(e => Number(e.getAttribute('y'))))`)
	if waitY <= holdY {
		t.Errorf("the waits (y %v) are not drawn below the holds (y %v)", waitY, holdY)
	}
}

// schemeShot shows the page in the colour scheme (light or dark), saves a
// screenshot, and returns the colours of the page and of a hold's bar.
func schemeShot(t *testing.T, ctx context.Context, scheme string) string {
	t.Helper()
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
		t.Fatalf("emulate %s: %v", scheme, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "contention-"+scheme+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	return dashtest.Eval[string](t, ctx, `getComputedStyle(document.body).backgroundColor + ' ' + getComputedStyle(document.querySelector('svg.timeline rect.bar.hold')).fill`)
}
