// Package dashtest drives the dashboard from outside, as a browser does:
// its /ws stream of fragments read and applied by id, and headless
// Chromium. The tests of the dashboard and of the pages around it (the
// sign-in, the cross-site checks) share it.
package dashtest

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
)

// Msg is a message of /ws.
type Msg struct {
	Snapshot bool   `json:"snapshot"`
	Now      int64  `json:"now"`
	Frags    []Frag `json:"frags"`
}

// Frag is one fragment of a message.
type Frag struct {
	Op     string `json:"op"`
	ID     string `json:"id"`
	Parent string `json:"parent"`
	Key    string `json:"key"`
	HTML   string `json:"html"`
}

// URL is the address of the stream of page of the gateway at base.
func URL(base, page string) string {
	return "ws" + strings.TrimPrefix(base, "http") + "/ws?page=" + page
}

// Dial opens the stream of page, closed when the test ends.
func Dial(t testing.TB, ctx context.Context, base, page string, opts *websocket.DialOptions) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.Dial(ctx, URL(base, page), opts)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial /ws?page=%s: %v (HTTP %d)", page, err, status)
	}
	c.SetReadLimit(16 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// Read reads the next message of a stream.
func Read(ctx context.Context, c *websocket.Conn) (Msg, error) {
	_, data, err := c.Read(ctx)
	if err != nil {
		return Msg{}, err
	}
	var m Msg
	return m, json.Unmarshal(data, &m)
}

// View is what a browser would show of a page: the HTML of each fragment
// by id, as the messages replace, upsert and remove them.
type View struct {
	HTML map[string]string
	Msgs int
}

// Apply takes in a message.
func (v *View) Apply(m Msg) {
	if v.HTML == nil {
		v.HTML = map[string]string{}
	}
	v.Msgs++
	for _, f := range m.Frags {
		if f.Op == "remove" {
			delete(v.HTML, f.ID)
		} else {
			v.HTML[f.ID] = f.HTML
		}
	}
}

// Until reads messages into v until ok says v is as wanted.
func (v *View) Until(t testing.TB, ctx context.Context, c *websocket.Conn, what string, ok func(*View) bool) {
	t.Helper()
	for !ok(v) {
		m, err := Read(ctx, c)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		v.Apply(m)
	}
}

// WaitFrag reads messages into v until one has a fragment that satisfies ok.
func (v *View) WaitFrag(t testing.TB, ctx context.Context, c *websocket.Conn, what string, ok func(Frag) bool) Frag {
	t.Helper()
	for {
		m, err := Read(ctx, c)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		v.Apply(m)
		for _, f := range m.Frags {
			if ok(f) {
				return f
			}
		}
	}
}

// ChromiumPath is Debian's Chromium (apt-get install -y chromium).
const ChromiumPath = "/usr/bin/chromium"

// StartBrowser runs headless Chromium for the test, with the flags of
// FACTS.md and any more given. A missing Chromium fails the test: it is
// never skipped.
func StartBrowser(t testing.TB, more ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		t.Fatalf("this test needs headless Chromium at %s (%v): install it with: apt-get install -y chromium", ChromiumPath, err)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}, more...)...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first action starts the browser, bound to ctx (no deadline);
	// each step after runs with a deadline of its own.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", ChromiumPath, err)
	}
	return ctx
}

// Step runs browser actions with a deadline.
func Step(t testing.TB, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

// Eval evaluates js in the page and returns its value.
func Eval[T any](t testing.TB, ctx context.Context, js string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("browser: %s: %v", js, err)
	}
	return v
}

// CSPRecorder keeps every Content-Security-Policy violation of every page
// of the origin in sessionStorage, where the test reads them. It is
// injected by the browser itself (page.AddScriptToEvaluateOnNewDocument),
// so the policy does not apply to it.
const CSPRecorder = `document.addEventListener('securitypolicyviolation', function (e) {
  var v = JSON.parse(sessionStorage.getItem('csp') || '[]');
  v.push(e.violatedDirective + ' ' + (e.blockedURI || '') + ' ' + (e.sourceFile || '') + ':' + e.lineNumber);
  sessionStorage.setItem('csp', JSON.stringify(v));
});`
