package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/zkgate/zkgate/internal/harness/dashtest"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestHostCheck: a gateway without tokens answers only requests that name
// it by an IP address, localhost, or a name of --allowed-hosts; every
// other name may be a rebound attacker's page (DNS rebinding), so reads,
// writes, the dashboard and its WebSocket are refused 403 for it, whatever
// the browser's headers say. Before, GETs of queue items and /v1/leases
// answered 200 to Host: evil.example and /ws streamed the dashboard. With
// tokens the check is off; --allowed-hosts '*' turns it off too.
func TestHostCheck(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	off := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	allowed := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: []string{"--allowed-hosts", "gw.example, Other.Example."}})
	anyHost := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: []string{"--allowed-hosts", "*"}})
	metricsAddr := gwtest.FreeAddr(t)
	on := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: []string{"--auth-file", file, "--metrics-listen", metricsAddr}})
	port := func(g *gwtest.Gateway) string { return g.URL[strings.LastIndexByte(g.URL, ':'):] }

	lease := newLease(t, off.URL, "1m", "host check")
	mustStatus(t, gwtest.Do(t, "POST", off.URL+"/v1/queues/hc/items", "x"), 201, "produce")
	rebound := map[string]string{"Host": "evil.example" + port(off), "Sec-Fetch-Site": "same-origin"}
	for _, path := range []string{"/v1/queues/hc/items", "/v1/leases", "/v1/leases/" + lease, "/ui/", "/v1/locks", "/metrics", "/nope"} {
		r := sendRaw(t, off.URL, "GET", path, rebound, "", "")
		if p := wantProblem(t, r, 403, "forbidden", "GET "+path+" at a DNS name"); p != nil &&
			(!strings.Contains(p["detail"].(string), "DNS rebinding") || !strings.Contains(p["detail"].(string), "--allowed-hosts")) {
			t.Errorf("GET %s: detail %q, want it to name DNS rebinding and --allowed-hosts", path, p["detail"])
		}
	}
	wantProblem(t, sendRaw(t, off.URL, "POST", "/v1/locks/hc/acquire", rebound, "application/json", `{"lease":"`+lease+`"}`),
		403, "forbidden", "an acquire at a DNS name")
	wantProblem(t, sendRaw(t, off.URL, "GET", "/v1/leases", map[string]string{"Host": "evil.example."}, "", ""),
		403, "forbidden", "a DNS name with its final dot, no browser headers")

	for _, host := range []string{"127.0.0.1" + port(off), "localhost" + port(off), "app.localhost" + port(off), "[::1]" + port(off), ""} {
		mustStatus(t, sendRaw(t, off.URL, "GET", "/v1/leases", map[string]string{"Host": host}, "", ""), 200, "GET at "+host)
	}
	for _, host := range []string{"gw.example" + port(allowed), "GW.example", "other.example" + port(allowed), "other.example."} {
		mustStatus(t, sendRaw(t, allowed.URL, "GET", "/v1/leases", map[string]string{"Host": host}, "", ""), 200, "an allowed name "+host)
	}
	wantProblem(t, sendRaw(t, allowed.URL, "GET", "/v1/leases", map[string]string{"Host": "evil.example"}, "", ""), 403, "forbidden", "a name not allowed")
	mustStatus(t, sendRaw(t, anyHost.URL, "GET", "/v1/leases", map[string]string{"Host": "evil.example"}, "", ""), 200, "--allowed-hosts *")
	mustStatus(t, sendRaw(t, on.URL, "GET", "/v1/leases", map[string]string{"Host": "evil.example", "Authorization": "Bearer " + secrets["reader"]}, "", ""),
		200, "tokens: a DNS name")
	// --metrics-listen takes no token, tokens or not: names are checked there.
	wantProblem(t, sendRaw(t, "http://"+metricsAddr, "GET", "/metrics", map[string]string{"Host": "evil.example"}, "", ""),
		403, "forbidden", "/metrics of --metrics-listen at a DNS name")
	mustStatus(t, sendRaw(t, "http://"+metricsAddr, "GET", "/metrics", nil, "", ""), 200, "/metrics of --metrics-listen at its address")

	// The dashboard's stream.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, dashtest.URL(off.URL, "overview"), &websocket.DialOptions{Host: "evil.example" + port(off),
		HTTPHeader: http.Header{"Origin": {"http://evil.example" + port(off)}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("/ws at a DNS name: err %v, resp %v; want 403", err, resp)
	}
	c := dashtest.Dial(t, ctx, allowed.URL, "overview", &websocket.DialOptions{Host: "gw.example" + port(allowed),
		HTTPHeader: http.Header{"Origin": {"http://gw.example" + port(allowed)}}})
	if m, err := dashtest.Read(ctx, c); err != nil || !m.Snapshot {
		t.Fatalf("/ws at an allowed name: %v %+v", err, m)
	}
	mustStatus(t, gwtest.Do(t, "DELETE", off.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}
