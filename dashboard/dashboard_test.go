package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/zk"
)

// The markup a user could try to slip into the dashboard, through a lease's
// holder label and through a znode's data.
const (
	markupLabel = `<img src=x onerror=alert(1)>`
	markupData  = `<script>alert(1)</script>`
)

// TestDashboardPagesRenderEscaped renders every page of the dashboard with a
// lock held by a lease whose label is markup, and checks the label comes out
// as text, never as an element.
func TestDashboardPagesRenderEscaped(t *testing.T) {
	// Serial: counts the binary's goroutines (NoGoroutinesLeft).
	gwtest.NoGoroutinesLeft(t)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	lease := gwtest.NewLease(t, g.URL, "30s", markupLabel)
	gwtest.MustStatus(t, gwtest.Acquire(t, g.URL, "pages-lock", lease, "0s"), 200, "acquire")
	gwtest.MustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/semaphores/pages-sem/acquire", map[string]any{"lease": lease, "limit": 2}), 200, "semaphore")

	for _, page := range []string{"/", "/ui/locks", "/ui/semaphores", "/ui/leases", "/ui/elections", "/ui/barriers", "/ui/queues", "/ui/groups", "/ui/counters", "/ui/znodes"} {
		status, h, body := gwtest.GetPage(t, g.URL+page)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", page, status, body)
		}
		if ct := h.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", page, ct)
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", page, csp)
		}
		if strings.Contains(body, "<img src=x") {
			t.Errorf("GET %s: the holder label came out as markup", page)
		}
		for _, asset := range []string{"/ui/static/dashboard.css?v=", "/ui/static/dashboard.js?v="} {
			if !strings.Contains(body, asset) {
				t.Errorf("GET %s: no %s", page, asset)
			}
		}
	}
	_, _, locks := gwtest.GetPage(t, g.URL+"/ui/locks")
	for _, want := range []string{`id="lock-pages-lock"`, `data-lease="` + lease + `"`, "&lt;img src=x onerror=alert(1)&gt;"} {
		if !strings.Contains(locks, want) {
			t.Errorf("locks page: no %s", want)
		}
	}
	_, _, leases := gwtest.GetPage(t, g.URL+"/ui/leases")
	if !strings.Contains(leases, `id="lease-`+lease+`"`) || !strings.Contains(leases, "semaphore pages-sem") {
		t.Errorf("leases page does not show the lease and its semaphore slot")
	}
	_, _, filtered := gwtest.GetPage(t, g.URL+"/ui/locks?q=nothing-like-it")
	if strings.Contains(filtered, `id="lock-pages-lock"`) {
		t.Errorf("?q= should filter the locks")
	}

	status, _, body := gwtest.GetPage(t, g.URL+"/ui/nope")
	if status != http.StatusNotFound {
		t.Errorf("unknown page: %d %s", status, body)
	}
	status, h, js := gwtest.GetPage(t, g.URL+"/ui/static/dashboard.js")
	if status != http.StatusOK || !strings.Contains(h.Get("Content-Type"), "javascript") || !strings.Contains(js, "WebSocket") {
		t.Errorf("dashboard.js: %d %q", status, h.Get("Content-Type"))
	}
	if status, _, _ := gwtest.GetPage(t, g.URL+"/ui/static/nope.js"); status != http.StatusNotFound {
		t.Errorf("unknown static file: %d", status)
	}
	gwtest.MustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}

// TestDashboardZnodeBrowser shows znodes under the root as text, JSON or
// hex, and nothing outside it; data that is markup stays text.
func TestDashboardZnodeBrowser(t *testing.T) {
	// Serial: counts the binary's goroutines (StartChecked).
	g, conn := gwtest.StartChecked(t, gwtest.GatewayOptions{})
	nodes := map[string][]byte{
		"xss":    []byte(markupData),
		"json":   []byte(`{"holder":"a","n":[1,2]}`),
		"binary": {0x00, 0xff, 0x10, '<', 'b', '>'},
	}
	for name, data := range nodes {
		if _, err := conn.Create(g.Root+"/"+name, data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	browse := func(p, view string) (int, string) {
		u := g.URL + "/ui/znodes?path=" + url.QueryEscape(p)
		if view != "" {
			u += "&view=" + view
		}
		status, _, body := gwtest.GetPage(t, u)
		return status, body
	}

	status, body := browse(g.Root+"/xss", "")
	if status != 200 || strings.Contains(body, markupData) || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("znode with markup data: %d, escaped text not found", status)
	}
	if _, body = browse(g.Root+"/xss", "hex"); !strings.Contains(body, "3c 73 63 72 69 70 74 3e") {
		t.Errorf("hex view: no hex dump of <script>")
	}
	if _, body = browse(g.Root+"/json", ""); !strings.Contains(body, "\n  &#34;holder&#34;: &#34;a&#34;,") {
		t.Errorf("JSON data should be pretty-printed:\n%s", body)
	}
	if _, body = browse(g.Root+"/binary", ""); !strings.Contains(body, "00 ff 10 3c 62 3e") || strings.Contains(body, "<b>") {
		t.Errorf("binary data should be a hex dump")
	}
	if _, body = browse(g.Root, ""); !strings.Contains(body, url.QueryEscape(g.Root+"/xss")) {
		t.Errorf("the root should list its children")
	}
	if status, _ = browse("/zookeeper", ""); status != http.StatusBadRequest {
		t.Errorf("a path outside the root: %d, want 400", status)
	}
	if status, _ = browse(g.Root+"/../zookeeper", ""); status != http.StatusBadRequest {
		t.Errorf("a path climbing out of the root: %d, want 400", status)
	}
	if status, _ = browse(g.Root+"/missing", ""); status != http.StatusNotFound {
		t.Errorf("a missing znode: %d, want 404", status)
	}
}
