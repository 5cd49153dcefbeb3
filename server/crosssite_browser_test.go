package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// attackerPage is a page of another site that does what any page may do
// without asking (no CORS preflight), reading no answer: a form post that
// takes, and so destroys, a queue's item, and text/plain no-cors fetches
// that produce an item and take a lock for an hour. GW is the gateway.
const attackerPage = `<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="take" method="POST" target="sink" action="GW/v1/queues/inbox/take"><input name="x" value="1"></form>
<script>
document.getElementById('take').submit();
fetch("GW/v1/queues/inbox/items", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: "planted"});
fetch("GW/v1/locks/victim/acquire", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
  body: JSON.stringify({ttl: "1h", holder: "attacker"})});
</script></body></html>`

// requestsTo sums zkgate_http_requests_total of a route and method, over
// every status.
func requestsTo(t *testing.T, base, method, route string) int {
	t.Helper()
	r := gwtest.Do(t, "GET", base+"/metrics", nil)
	n := 0
	for _, line := range strings.Split(string(r.Body), "\n") {
		if !strings.HasPrefix(line, "zkgate_http_requests_total{") ||
			!strings.Contains(line, `method="`+method+`"`) || !strings.Contains(line, `route="`+route+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		n += int(v)
	}
	return n
}

// TestBrowserCrossSiteChangesNothing: a page of another site (attacker.test,
// which Chromium is told is 127.0.0.1) and one of the same site (another
// port of 127.0.0.1) post a form and text/plain fetches to a gateway without
// tokens: the gateway gets them and refuses them, and nothing changes (the
// item is still there, no item is added, the lock is not held, no lease
// is made). The same page took the item, produced one and held the lock for
// an hour. A fetch from the gateway's own page, and curl's requests, still
// act.
func TestBrowserCrossSiteChangesNothing(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	item := produce(t, g.URL, "inbox", []byte("precious"), 100)
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, strings.ReplaceAll(attackerPage, "GW", g.URL))
	}))
	defer attacker.Close()
	ctx := startBrowser(t, chromedp.Flag("host-resolver-rules", "MAP attacker.test 127.0.0.1"))

	routes := []struct{ method, route string }{
		{"POST", "/v1/queues/{name}/take"}, {"POST", "/v1/queues/{name}/items"}, {"POST", "/v1/locks/{name}/acquire"},
	}
	port := attacker.URL[strings.LastIndexByte(attacker.URL, ':'):]
	for _, page := range []string{"http://attacker.test" + port + "/", attacker.URL + "/"} {
		before := make([]int, len(routes))
		for i, rt := range routes {
			before[i] = requestsTo(t, g.URL, rt.method, rt.route)
		}
		step(t, ctx, "open "+page, chromedp.Navigate(page))
		// The page's requests reach the gateway (whatever it answers).
		gwtest.Eventually(t, 15*time.Second, func() error {
			for i, rt := range routes {
				if n := requestsTo(t, g.URL, rt.method, rt.route); n == before[i] {
					return fmt.Errorf("%s: no %s %s yet", page, rt.method, rt.route)
				}
			}
			return nil
		})
		q := gwtest.Do(t, "GET", g.URL+"/v1/queues/inbox", nil).JSON(t)
		head, _ := q["head"].([]any)
		if q["length"] != float64(1) || len(head) != 1 || head[0].(map[string]any)["id"] != item {
			t.Errorf("after %s: the queue is %v, want the one item %s", page, q, item)
		}
		if l := gwtest.Do(t, "GET", g.URL+"/v1/locks/victim", nil).JSON(t); len(l["holders"].([]any)) != 0 {
			t.Errorf("after %s: the lock is held: %v", page, l)
		}
		if ls := gwtest.Do(t, "GET", g.URL+"/v1/leases", nil).JSON(t)["leases"].([]any); len(ls) != 0 {
			t.Errorf("after %s: %d leases were made: %v", page, len(ls), ls)
		}
	}
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/queues/inbox/take", nil), 200, "a take sent by a client (no Origin)")

	// The gateway's own page may act (its origin, named by address).
	step(t, ctx, "open the dashboard", chromedp.Navigate(g.URL+"/ui/locks"))
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	status, err := chromedp.Run(sctx, chromedp.Evaluate[int](`fetch("/v1/locks/own/acquire", {method: "POST",
		headers: {"Content-Type": "application/json"}, body: JSON.stringify({ttl: "1m", holder: "own page"})}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("browser: a fetch from the gateway's own page: %v", err)
	}
	if status != 200 {
		t.Errorf("an acquire from the gateway's own page: %d, want 200", status)
	}
}
