package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestTrustedProxiesGiveTheClientAddress: behind a proxy every client has
// the proxy's address, and so shares its caps. With --trusted-proxies,
// from those addresses alone, the client's address is taken from
// X-Forwarded-For (the nearest that is no trusted proxy) or Forwarded:
// each client behind the proxy has caps of its own, and the access log
// names it (and the proxy); from any other address those headers are not
// believed.
func TestTrustedProxiesGiveTheClientAddress(t *testing.T) {
	t.Parallel()
	g := gwtest.StartProcess(t, gwtest.GatewayOptions{Extra: []string{"--trusted-proxies", "127.0.0.1, 10.9.0.0/16",
		"--max-leases-per-token", "1", "--log-level", "info"}})
	proxy, _ := fromAddr("127.0.0.1")
	stranger, _ := fromAddr("127.0.0.2")
	lease := func(c *http.Client, header map[string]string) int {
		req, err := http.NewRequest("POST", g.URL+"/v1/leases", strings.NewReader(`{"ttl":"1m"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		return gwtest.MustSend(t, c, req).Status
	}
	for _, c := range []struct {
		what   string
		c      *http.Client
		header map[string]string
		want   int
	}{
		{"client A through the proxy", proxy, map[string]string{"X-Forwarded-For": "203.0.113.1"}, 201},
		{"client A again: its own cap", proxy, map[string]string{"X-Forwarded-For": "203.0.113.1"}, 429},
		{"client B through two proxies", proxy, map[string]string{"X-Forwarded-For": "198.51.100.7, 203.0.113.2, 10.9.3.4"}, 201},
		{"client B's chain: the nearest that is no proxy", proxy, map[string]string{"X-Forwarded-For": "203.0.113.2"}, 429},
		{"client C by Forwarded", proxy, map[string]string{"Forwarded": `for="[2001:db8::5]:4711";proto=http`}, 201},
		{"a stranger's header is not believed", stranger, map[string]string{"X-Forwarded-For": "192.0.2.1"}, 201},
		{"nor its next", stranger, map[string]string{"X-Forwarded-For": "192.0.2.2"}, 429},
	} {
		if got := lease(c.c, c.header); got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}
	logs := g.Logs()
	for _, want := range []string{"remote=203.0.113.1:0 via=127.0.0.1:", "remote=[2001:db8::5]:0 via=127.0.0.1:", "remote=127.0.0.2:"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the access log does not have %q", want)
		}
	}
}
