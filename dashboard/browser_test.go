package dashboard_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/zkgate/zkgate/internal/harness/dashtest"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/zk"
)

// TestBrowserDashboardLive opens the dashboard in headless Chromium, takes a
// lock through the API and sees its holder appear without a reload, releases
// it and sees it go; the holder's label is markup that must stay text. Then
// it fills the gateway with locks, a foreign node, a semaphore and leases,
// and saves a screenshot of the overview (to $ZKGATE_DASHBOARD_PNG too, if
// set: that is how docs/dashboard.png is made).
func TestBrowserDashboardLive(t *testing.T) {
	t.Parallel()
	opts := gwtest.GatewayOptions{}
	docs := os.Getenv("ZKGATE_DASHBOARD_PNG")
	if docs != "" {
		opts.Root = "/zkgate" // as a real gateway shows it
	}
	g := gwtest.StartGateway(t, opts)
	ctx := dashtest.StartBrowser(t)

	var dialogs atomic.Int32
	go func() {
		for ev, err := range chromedp.Events(ctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			dialogs.Add(1)
			t.Logf("a dialog opened: %q", ev.Message)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{})
		}
	}()

	dashtest.Step(t, ctx, "open the locks page",
		chromedp.Navigate(g.URL+"/ui/locks"),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = "yes"`))

	lease := gwtest.NewLease(t, g.URL, "1m", markupLabel)
	gwtest.MustStatus(t, gwtest.Acquire(t, g.URL, "e2e-orders", lease, "0s"), 200, "acquire")
	holder := fmt.Sprintf(`#lock-e2e-orders li.node.holds[data-lease=%q]`, lease)
	dashtest.Step(t, ctx, "see the holder appear", chromedp.WaitVisible(chromedp.CSS(holder)))
	if got := dashtest.Eval[string](t, ctx, `document.querySelector('`+holder+` .label').textContent`); got != markupLabel {
		t.Errorf("the holder's label shows as %q, want the text %q", got, markupLabel)
	}
	if n := dashtest.Eval[int](t, ctx, `document.querySelectorAll('img').length`); n != 0 {
		t.Errorf("the label became markup: %d img elements", n)
	}
	if got := dashtest.Eval[string](t, ctx, `document.getElementById('count-locks').textContent`); got != "1" {
		t.Errorf("the locks count shows %q, want 1", got)
	}

	gwtest.MustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/locks/e2e-orders/release", map[string]any{"lease": lease}), 204, "release")
	dashtest.Step(t, ctx, "see the lock go", chromedp.WaitNotPresent(chromedp.CSS(`#lock-e2e-orders`)))
	if got := dashtest.Eval[string](t, ctx, `window.sameDocument`); got != "yes" {
		t.Fatalf("the page was reloaded (%q): updates must come over the WebSocket", got)
	}
	gwtest.MustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")

	// A dashboard worth a screenshot.
	leases, stop := fillDashboard(t, g)
	defer stop()
	if docs != "" {
		demoTraffic(t, g, leases, 12*time.Second)
	}
	dashtest.Step(t, ctx, "open the overview",
		chromedp.Navigate(g.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#lock-payments li.node.foreign`)),
		chromedp.WaitVisible(chromedp.CSS(`#lock-orders li.node.waits + li.node.waits`)),
		chromedp.WaitVisible(chromedp.CSS(`#sem-db-pool li.node.waits`)),
		chromedp.WaitVisible(chromedp.CSS(`.servers .badge.mode-ok`)))
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	out := filepath.Join(t.ArtifactDir(), "dashboard.png")
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", out)
	if docs != "" {
		if err := os.WriteFile(docs, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n := dialogs.Load(); n != 0 {
		t.Fatalf("%d JavaScript dialogs opened: markup got into the page", n)
	}
}

// fillDashboard makes locks with holders and waiters (one held by a foreign
// node, as Curator would make it), read locks, a semaphore with a waiter,
// leases, a queue and a barrier. stop ends the waits.
func fillDashboard(t *testing.T, g *gwtest.Gateway) (leases map[string]string, stop func()) {
	t.Helper()
	leases = map[string]string{}
	for _, l := range []struct{ holder, ttl string }{
		{"billing-worker-3", "5m"}, {"api-7", "5m"}, {"reporting-2", "2m"}, {"etl-nightly", "45s"}, {"deploy-bot", "10m"},
	} {
		leases[l.holder] = gwtest.NewLease(t, g.URL, l.ttl, l.holder)
	}
	take := func(path, holder string, body map[string]any) {
		t.Helper()
		body["lease"] = leases[holder]
		gwtest.MustStatus(t, gwtest.Do(t, "POST", g.URL+path, body), 200, path+" for "+holder)
	}

	// A foreign holder of "payments": a Curator-style node whose data is
	// the client's address, not zkgate's JSON.
	conn := gwtest.Client(t, g.ZK, 5*time.Second)
	parent := g.Root + "/locks/payments"
	for {
		_, err := conn.Create(parent+"/_c_9f4b2a67-1c3d-4e5f-8a9b-0c1d2e3f4a5b-lock-", []byte("10.0.0.7"),
			zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
		if err == nil {
			break
		}
		if _, err := conn.CreateContainer(parent, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			t.Fatalf("create %s: %v", parent, err)
		}
	}

	take("/v1/locks/orders/acquire", "billing-worker-3", map[string]any{})
	take("/v1/locks/config/acquire", "api-7", map[string]any{"mode": "read"})
	take("/v1/locks/config/acquire", "reporting-2", map[string]any{"mode": "read"})
	take("/v1/locks/schema-migration/acquire", "deploy-bot", map[string]any{})
	for _, h := range []string{"billing-worker-3", "api-7", "reporting-2"} {
		take("/v1/semaphores/db-pool/acquire", h, map[string]any{"limit": 3})
	}
	gwtest.MustStatus(t, gwtest.Do(t, "PUT", g.URL+"/v1/barriers/release-train", nil), 201, "raise barrier")
	for i := range 3 {
		gwtest.MustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/queues/emails/items", []byte(fmt.Sprintf("mail %d", i))), 201, "produce")
	}

	// Waiters, in this order.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wait := func(path, holder string, body map[string]any, node string) {
		body["lease"] = leases[holder]
		wg.Go(func() {
			_, _ = gwtest.DoCtx(ctx, "POST", g.URL+path+"?wait=50s", body)
		})
		// The next waiter queues behind this one.
		gwtest.Eventually(t, 10*time.Second, func() error {
			st := gwtest.Do(t, "GET", g.URL+node, nil)
			if !strings.Contains(string(st.Body), leases[holder]) {
				return fmt.Errorf("%s is not waiting on %s yet", holder, node)
			}
			return nil
		})
	}
	wait("/v1/locks/orders/acquire", "api-7", map[string]any{}, "/v1/locks/orders")
	wait("/v1/locks/orders/acquire", "etl-nightly", map[string]any{}, "/v1/locks/orders")
	wait("/v1/locks/payments/acquire", "deploy-bot", map[string]any{}, "/v1/locks/payments")
	wait("/v1/semaphores/db-pool/acquire", "etl-nightly", map[string]any{"limit": 3}, "/v1/semaphores/db-pool")
	return leases, func() {
		cancel()
		wg.Wait()
		for _, id := range leases {
			gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+id, nil)
		}
	}
}

// demoTraffic keeps the leases alive at a varying rate for a while, so that
// the picture in the docs has a request rate to show.
func demoTraffic(t *testing.T, g *gwtest.Gateway, leases map[string]string, d time.Duration) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i, end := 0, time.Now().Add(d); time.Now().Before(end); i++ {
		<-tick.C
		n := 2 + int(3+3*math.Sin(float64(i)/8))
		for j := 0; j < n; j++ {
			for _, id := range leases {
				gwtest.Do(t, "POST", g.URL+"/v1/leases/"+id+"/keepalive", nil)
			}
		}
	}
}

// TestBrowserDashboardFilterAsksTheGateway types into the filter box of the
// locks page: once typing pauses, the page shows what the gateway answers
// for ?q=, from its first page, and stays live.
func TestBrowserDashboardFilterAsksTheGateway(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	lease := gwtest.NewLease(t, g.URL, "1m", "filter")
	for _, name := range []string{"alpha-1", "alpha-2", "beta-1"} {
		gwtest.MustStatus(t, gwtest.Acquire(t, g.URL, name, lease, "0s"), 200, "acquire "+name)
	}
	ctx := dashtest.StartBrowser(t)
	dashtest.Step(t, ctx, "open the locks page",
		chromedp.Navigate(g.URL+"/ui/locks"),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#lock-alpha-1`)))
	dashtest.Step(t, ctx, "filter the locks",
		chromedp.SendKeys(chromedp.CSS(`#locks-filter`), "BETA"),
		chromedp.WaitNotPresent(chromedp.CSS(`#lock-alpha-1`)),
		chromedp.WaitVisible(chromedp.CSS(`#lock-beta-1`)),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)))
	if got := dashtest.Eval[string](t, ctx, `location.search`); got != "?q=BETA" {
		t.Errorf("the page's query is %q, want ?q=BETA", got)
	}
	gwtest.MustStatus(t, gwtest.Acquire(t, g.URL, "beta-2", lease, "0s"), 200, "acquire beta-2")
	gwtest.MustStatus(t, gwtest.Acquire(t, g.URL, "alpha-3", lease, "0s"), 200, "acquire alpha-3")
	dashtest.Step(t, ctx, "see a new match appear", chromedp.WaitVisible(chromedp.CSS(`#lock-beta-2`)))
	if n := dashtest.Eval[int](t, ctx, `document.querySelectorAll('#locks-list .item').length`); n != 2 {
		t.Errorf("the filtered page shows %d locks, want beta-1 and beta-2", n)
	}
	gwtest.MustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}
