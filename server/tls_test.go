package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/gwtest"
	"github.com/zkgate/zkgate/server"
)

// testCA is a certificate authority made by the test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its certificate, PEM
	pool *x509.CertPool
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(dir, name+".pem")
	writePEM(t, file, "CERTIFICATE", der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, file: file, pool: pool}
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue makes a certificate for 127.0.0.1 (server and client use), valid
// from notBefore for a day, and writes it and its key to certFile and
// keyFile by renaming, as a renewal does.
func (ca *testCA) issue(t *testing.T, serial int64, certFile, keyFile string, notBefore time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "zkgate test " + fmt.Sprint(serial)},
		NotBefore:    notBefore,
		NotAfter:     notBefore.Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile+".new", "EC PRIVATE KEY", keyDER)
	writePEM(t, certFile+".new", "CERTIFICATE", der)
	for _, f := range []string{keyFile, certFile} {
		if err := os.Rename(f+".new", f); err != nil {
			t.Fatal(err)
		}
	}
	cert, _ := x509.ParseCertificate(der)
	return cert
}

// tlsClient trusts ca, shows clientCert (if any) and speaks HTTP/2; a new
// connection for every request, so that each sees the certificate served now.
func tlsClient(ca *testCA, clientCert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: ca.pool}
	if clientCert != nil {
		cfg.Certificates = []tls.Certificate{*clientCert}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: cfg, ForceAttemptHTTP2: true, DisableKeepAlives: true}}
}

func tlsGet(t *testing.T, c *http.Client, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// TestHTTPS: with --tls-cert and --tls-key the gateway serves HTTPS with
// HTTP/2; a renewed certificate is served from the next handshake on, and
// a broken one written over it is refused while the old one stays.
func TestHTTPS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	certFile, keyFile := filepath.Join(dir, "gw.pem"), filepath.Join(dir, "gw.key")
	ca.issue(t, 100, certFile, keyFile, time.Now().Add(-time.Minute))
	client := tlsClient(ca, nil)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{Client: client,
		Extra: []string{"--tls-cert", certFile, "--tls-key", keyFile}})
	if !strings.HasPrefix(g.URL, "https://") {
		t.Fatalf("the gateway says it listens on %s, want https://", g.URL)
	}
	resp, _ := tlsGet(t, client, g.URL+"/readyz")
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
	ca.issue(t, 101, certFile, keyFile, time.Now().Add(-time.Minute))
	gwtest.Eventually(t, 10*time.Second, func() error {
		resp, _ := tlsGet(t, client, g.URL+"/readyz")
		if s := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); s != 101 {
			return fmt.Errorf("serial %d served, want the renewed 101", s)
		}
		return nil
	})
	// A key that does not match: the renewed certificate stays in service.
	other := filepath.Join(dir, "other.key")
	ca.issue(t, 102, filepath.Join(dir, "other.pem"), other, time.Now().Add(-time.Minute))
	data, _ := os.ReadFile(other)
	if err := os.WriteFile(keyFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		resp, _ := tlsGet(t, client, g.URL+"/readyz")
		if s := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); s != 101 {
			t.Fatalf("serial %d served after a broken renewal, want 101 still", s)
		}
	}
	lease := newLeaseTLS(t, client, g.URL)
	resp, body := tlsGet(t, client, g.URL+"/v1/leases/"+lease)
	if resp.StatusCode != 200 {
		t.Fatalf("lease over HTTPS: %d %s", resp.StatusCode, body)
	}
}

func newLeaseTLS(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	resp, err := c.Post(base+"/v1/leases", "application/json", strings.NewReader(`{"ttl":"1m"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != 201 || jsonDecode(resp.Body, &body) != nil {
		t.Fatalf("lease: %d", resp.StatusCode)
	}
	return body.ID
}

// TestHTTPSClientCertificatesAndForwarding: with --tls-client-ca a client
// without a certificate of that CA cannot even connect; gateways forward
// to each other over TLS, showing their own certificates, which
// --tls-peer-ca signed: with no shared secret, those certificates are the
// proof both ways, and a client's certificate is none.
func TestHTTPSClientCertificatesAndForwarding(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	peers := newTestCA(t, dir, "peers")
	a, b, client := startMutualTLSPair(t, dir, ca, peers)

	noConnectionWithoutClientCA(t, dir, peers, a.URL)

	// Forwarding over TLS: a lease of a, used through b.
	lease := newLeaseTLS(t, client, a.URL)
	resp, err := client.Post(b.URL+"/v1/locks/tls-lock/acquire", "application/json", strings.NewReader(`{"lease":"`+lease+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Zkgate-Served-By") != strings.TrimPrefix(a.URL, "https://") {
		t.Fatalf("acquire through b: %d served by %q: %s", resp.StatusCode, resp.Header.Get("X-Zkgate-Served-By"), body)
	}

	clientCannotForward(t, client, a.URL, lease)

	req, _ := http.NewRequest("DELETE", b.URL+"/v1/leases/"+lease, nil)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("revoke through b: %d", resp.StatusCode)
	}
}

// startMutualTLSPair starts two gateways of one root that ask for client
// certificates of ca and forward to each other with certificates of
// peers, and no shared secret; client shows a certificate of ca.
func startMutualTLSPair(t *testing.T, dir string, ca, peers *testCA) (a, b *gwtest.Gateway, client *http.Client) {
	clientCertFile, clientKeyFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	ca.issue(t, 200, clientCertFile, clientKeyFile, time.Now().Add(-time.Minute))
	clientCert, err := tls.LoadX509KeyPair(clientCertFile, clientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	client = tlsClient(peers, &clientCert)
	root := gwtest.UniqueRoot(t)
	var gws []*gwtest.Gateway
	for i := range 2 {
		certFile, keyFile := filepath.Join(dir, fmt.Sprintf("gw%d.pem", i)), filepath.Join(dir, fmt.Sprintf("gw%d.key", i))
		peers.issue(t, int64(300+i), certFile, keyFile, time.Now().Add(-time.Minute))
		gws = append(gws, gwtest.StartGateway(t, gwtest.GatewayOptions{Root: root, Client: client, NoPeerSecret: true,
			Extra: []string{"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", ca.file, "--tls-peer-ca", peers.file}}))
	}
	return gws[0], gws[1], client
}

// noConnectionWithoutClientCA: a client with no client certificate, or
// one of another CA, cannot even connect to url.
func noConnectionWithoutClientCA(t *testing.T, dir string, peers *testCA, url string) {
	stranger := newTestCA(t, dir, "stranger")
	strangerCertFile, strangerKeyFile := filepath.Join(dir, "s.pem"), filepath.Join(dir, "s.key")
	stranger.issue(t, 400, strangerCertFile, strangerKeyFile, time.Now().Add(-time.Minute))
	strangerCert, err := tls.LoadX509KeyPair(strangerCertFile, strangerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*http.Client{"no certificate": tlsClient(peers, nil), "another CA's": tlsClient(peers, &strangerCert)} {
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
		_, body := tlsGet(t, client, url+"/v1/leases/"+lease)
		var l struct{ Gateway string }
		if err := jsonUnmarshal(body, &l); err != nil || l.Gateway == "" {
			return fmt.Errorf("no gateway in %s", body)
		}
		id = l.Gateway
		return nil
	})
	forged, _ := http.NewRequest("DELETE", url+"/v1/leases/"+lease, nil)
	forged.Header.Set("X-Zkgate-Forwarded", "v1 from=gw to="+id+" t="+fmt.Sprint(time.Now().Unix())+" n=AAAAAAAAAAAAAAAAAAAAAA caller=")
	resp, err := client.Do(forged)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	p := wantProblem(t, gwtest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, 403, "forbidden",
		"a forwarded request over a client's connection")
	if detail, _ := p["detail"].(string); !strings.Contains(detail, "certificate of --tls-peer-ca") {
		t.Errorf("the refusal should say that the connection has no certificate of the peer CA: %q", detail)
	}
}

// TestTLSBadFilesAtStart: a missing, mismatched, expired or not-yet-valid
// certificate is one clear line at start (a usage error: exit 2).
func TestTLSBadFilesAtStart(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	good, goodKey := filepath.Join(dir, "good.pem"), filepath.Join(dir, "good.key")
	ca.issue(t, 1, good, goodKey, time.Now().Add(-time.Minute))
	expired, expiredKey := filepath.Join(dir, "expired.pem"), filepath.Join(dir, "expired.key")
	ca.issue(t, 2, expired, expiredKey, time.Now().Add(-48*time.Hour))
	future, futureKey := filepath.Join(dir, "future.pem"), filepath.Join(dir, "future.key")
	ca.issue(t, 3, future, futureKey, time.Now().Add(48*time.Hour))
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", filepath.Join(dir, "missing.pem"), "--tls-key", goodKey}, "no such file"},
		{[]string{"--tls-cert", good, "--tls-key", expiredKey}, "private key does not match"},
		{[]string{"--tls-cert", expired, "--tls-key", expiredKey}, "expired on"},
		{[]string{"--tls-cert", future, "--tls-key", futureKey}, "not valid before"},
		{[]string{"--tls-cert", good}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-client-ca", ca.file}, "need --tls-cert"},
		{[]string{"--tls-cert", good, "--tls-key", goodKey, "--tls-client-ca", goodKey}, "holds no PEM certificate"},
		{[]string{"--tls-cert", good, "--tls-key", goodKey, "--tls-client-ca", ca.file, "--tls-peer-ca", ca.file}, "is also in --tls-client-ca"},
	}
	for _, c := range cases {
		_, err := server.ParseConfig(append([]string{"--zk", "127.0.0.1:2181"}, c.args...), func(string) string { return "" }, io.Discard)
		var usage *server.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want a one-line usage error with %q", c.args, err, c.want)
		}
	}
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
