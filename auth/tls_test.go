package auth_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestHTTPS: with --tls-cert and --tls-key the gateway serves HTTPS with
// HTTP/2; a renewed certificate is served from the next handshake on, and
// a broken one written over it is refused while the old one stays.
func TestHTTPS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := gwtest.NewCA(t, dir, "ca")
	certFile, keyFile := ca.IssuePair(t, 100, dir, "gw", time.Now().Add(-time.Minute))
	client := gwtest.TLSClient(ca, nil)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{Client: client,
		Extra: []string{"--tls-cert", certFile, "--tls-key", keyFile}})
	if !strings.HasPrefix(g.URL, "https://") {
		t.Fatalf("the gateway says it listens on %s, want https://", g.URL)
	}
	resp, _ := gwtest.TLSGet(t, client, g.URL+"/readyz")
	if resp.ProtoMajor != 2 {
		t.Errorf("protocol %s, want HTTP/2", resp.Proto)
	}
	if s := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); s != 100 {
		t.Errorf("serial %d served, want 100", s)
	}
	// Plain HTTP on the TLS port is refused.
	if r, err := http.Get("http://" + strings.TrimPrefix(g.URL, "https://") + "/readyz"); err == nil {
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode == 200 {
			t.Errorf("plain HTTP answered 200 on the TLS port: %s", body)
		}
	}

	// A renewal.
	ca.Issue(t, 101, certFile, keyFile, time.Now().Add(-time.Minute))
	gwtest.Eventually(t, 10*time.Second, func() error {
		resp, _ := gwtest.TLSGet(t, client, g.URL+"/readyz")
		if s := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); s != 101 {
			return fmt.Errorf("serial %d served, want the renewed 101", s)
		}
		return nil
	})
	// A key that does not match: the renewed certificate stays in service.
	other := filepath.Join(dir, "other.key")
	ca.Issue(t, 102, filepath.Join(dir, "other.pem"), other, time.Now().Add(-time.Minute))
	data, _ := os.ReadFile(other)
	if err := os.WriteFile(keyFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		resp, _ := gwtest.TLSGet(t, client, g.URL+"/readyz")
		if s := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); s != 101 {
			t.Fatalf("serial %d served after a broken renewal, want 101 still", s)
		}
	}
	lease := gwtest.NewLeaseTLS(t, client, g.URL)
	resp, body := gwtest.TLSGet(t, client, g.URL+"/v1/leases/"+lease)
	if resp.StatusCode != 200 {
		t.Fatalf("lease over HTTPS: %d %s", resp.StatusCode, body)
	}
}

// TestHTTPSClientCertificatesAndForwarding: with --tls-client-ca a client
// without a certificate of that CA cannot even connect; gateways forward
// to each other over TLS, showing their own certificates, which
// --tls-peer-ca signed: with no shared secret, those certificates are the
// proof both ways, and a client's certificate is none.
func TestHTTPSClientCertificatesAndForwarding(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := gwtest.NewCA(t, dir, "ca")
	peers := gwtest.NewCA(t, dir, "peers")
	a, b, client := startMutualTLSPair(t, dir, ca, peers)

	noConnectionWithoutClientCA(t, dir, peers, a.URL)

	// Forwarding over TLS: a lease of a, used through b.
	lease := gwtest.NewLeaseTLS(t, client, a.URL)
	r := gwtest.PostTLS(t, client, b.URL+"/v1/locks/tls-lock/acquire", `{"lease":"`+lease+`"}`)
	if r.Status != 200 || r.Header.Get("X-Zkgate-Served-By") != strings.TrimPrefix(a.URL, "https://") {
		t.Fatalf("acquire through b: %d served by %q: %s", r.Status, r.Header.Get("X-Zkgate-Served-By"), r.Body)
	}

	clientCannotForward(t, client, a.URL, lease)

	req, _ := http.NewRequest("DELETE", b.URL+"/v1/leases/"+lease, nil)
	if r := gwtest.MustSend(t, client, req); r.Status != 204 {
		t.Fatalf("revoke through b: %d", r.Status)
	}
}

// startMutualTLSPair starts two gateways of one root that ask for client
// certificates of ca and forward to each other with certificates of
// peers, and no shared secret; client shows a certificate of ca.
func startMutualTLSPair(t *testing.T, dir string, ca, peers *gwtest.CA) (a, b *gwtest.Gateway, client *http.Client) {
	clientCertFile, clientKeyFile := ca.IssuePair(t, 200, dir, "client", time.Now().Add(-time.Minute))
	clientCert, err := tls.LoadX509KeyPair(clientCertFile, clientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	client = gwtest.TLSClient(peers, &clientCert)
	root := gwtest.UniqueRoot(t)
	var gws []*gwtest.Gateway
	for i := range 2 {
		certFile, keyFile := peers.IssuePair(t, int64(300+i), dir, fmt.Sprintf("gw%d", i), time.Now().Add(-time.Minute))
		gws = append(gws, gwtest.StartGateway(t, gwtest.GatewayOptions{Root: root, Client: client, NoPeerSecret: true,
			Extra: []string{"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", ca.File, "--tls-peer-ca", peers.File}}))
	}
	return gws[0], gws[1], client
}

// noConnectionWithoutClientCA: a client with no client certificate, or
// one of another CA, cannot even connect to url.
func noConnectionWithoutClientCA(t *testing.T, dir string, peers *gwtest.CA, url string) {
	stranger := gwtest.NewCA(t, dir, "stranger")
	strangerCertFile, strangerKeyFile := stranger.IssuePair(t, 400, dir, "s", time.Now().Add(-time.Minute))
	strangerCert, err := tls.LoadX509KeyPair(strangerCertFile, strangerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*http.Client{"no certificate": gwtest.TLSClient(peers, nil), "another CA's": gwtest.TLSClient(peers, &strangerCert)} {
		resp, err := c.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			t.Errorf("a client with %s got %d", name, resp.StatusCode)
			continue
		}
		// Under TLS 1.3 the server's refusal reaches the client as an
		// alert or as a closed connection, depending on timing.
		t.Logf("a client with %s: %v", name, err)
	}
}

// clientCannotForward: a client, whose certificate the peer CA did not
// sign, saying that it forwards a request for lease to its gateway (at
// url): refused.
func clientCannotForward(t *testing.T, client *http.Client, url, lease string) {
	var id string
	gwtest.Eventually(t, 10*time.Second, func() error {
		_, body := gwtest.TLSGet(t, client, url+"/v1/leases/"+lease)
		var l struct{ Gateway string }
		if err := json.Unmarshal(body, &l); err != nil || l.Gateway == "" {
			return fmt.Errorf("no gateway in %s", body)
		}
		id = l.Gateway
		return nil
	})
	forged, _ := http.NewRequest("DELETE", url+"/v1/leases/"+lease, nil)
	forged.Header.Set("X-Zkgate-Forwarded", "v1 from=gw to="+id+" t="+fmt.Sprint(time.Now().Unix())+" n=AAAAAAAAAAAAAAAAAAAAAA caller=")
	p := gwtest.WantProblem(t, gwtest.MustSend(t, client, forged), 403, "forbidden",
		"a forwarded request over a client's connection")
	if detail, _ := p["detail"].(string); !strings.Contains(detail, "certificate of --tls-peer-ca") {
		t.Errorf("the refusal should say that the connection has no certificate of the peer CA: %q", detail)
	}
}

// TestForwardingTrustsOnlyThePeerCA: under TLS a gateway forwards only to
// a gateway whose certificate --tls-peer-ca signed. A certificate of
// another CA, even one this gateway trusts for its clients
// (--tls-client-ca), is refused: the request is not forwarded.
func TestForwardingTrustsOnlyThePeerCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	peers, clients := gwtest.NewCA(t, dir, "peers"), gwtest.NewCA(t, dir, "clients")
	file := func(name string) string { return filepath.Join(dir, name) }
	clients.Issue(t, 500, file("a.pem"), file("a.key"), time.Now().Add(-time.Minute))
	peers.Issue(t, 501, file("b.pem"), file("b.key"), time.Now().Add(-time.Minute))
	clients.Issue(t, 502, file("client.pem"), file("client.key"), time.Now().Add(-time.Minute))
	clientCert, err := tls.LoadX509KeyPair(file("client.pem"), file("client.key"))
	if err != nil {
		t.Fatal(err)
	}
	both := x509.NewCertPool()
	both.AddCert(peers.Cert)
	both.AddCert(clients.Cert)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: both, Certificates: []tls.Certificate{clientCert}}, ForceAttemptHTTP2: true}}

	root := gwtest.UniqueRoot(t)
	a := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: root, Client: client,
		Extra: []string{"--tls-cert", file("a.pem"), "--tls-key", file("a.key")}})
	b := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: root, Client: client,
		Extra: []string{"--tls-cert", file("b.pem"), "--tls-key", file("b.key"), "--tls-client-ca", clients.File, "--tls-peer-ca", peers.File}})
	lease := gwtest.NewLeaseTLS(t, client, a.URL)
	gwtest.WantProblem(t, gwtest.PostTLS(t, client, b.URL+"/v1/locks/x/acquire", `{"lease":"`+lease+`"}`), 503, "unavailable",
		"a lease of a gateway whose certificate the peer CA did not sign")
}
