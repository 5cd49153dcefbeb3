package gwtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
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
)

// CA is a certificate authority made by a test, for the gateways' and
// ZooKeeper's TLS.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	File string // its certificate, PEM
	Pool *x509.CertPool
}

// NewCA makes a CA named name, its certificate written to dir/name.pem.
func NewCA(t testing.TB, dir, name string) *CA {
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
	return &CA{Cert: cert, Key: key, File: file, Pool: pool}
}

func writePEM(t testing.TB, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// IssuePair issues a certificate (see Issue) to dir/name.pem, with its key
// in dir/name.key, and returns the two files.
func (ca *CA) IssuePair(t testing.TB, serial int64, dir, name string, notBefore time.Time) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	ca.Issue(t, serial, certFile, keyFile, notBefore)
	return certFile, keyFile
}

// Issue makes a certificate for 127.0.0.1 (server and client use), valid
// from notBefore for a day, and writes it and its key to certFile and
// keyFile by renaming, as a renewal does.
func (ca *CA) Issue(t testing.TB, serial int64, certFile, keyFile string, notBefore time.Time) *x509.Certificate {
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
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

// TLSClient trusts ca, shows clientCert (if any) and speaks HTTP/2; a new
// connection for every request, so that each sees the certificate served now.
func TLSClient(ca *CA, clientCert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: ca.Pool}
	if clientCert != nil {
		cfg.Certificates = []tls.Certificate{*clientCert}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: cfg, ForceAttemptHTTP2: true, DisableKeepAlives: true}}
}

// TLSGet gets url with c, failing the test if it cannot.
func TLSGet(t testing.TB, c *http.Client, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// PostTLS posts the JSON body to url with c, failing the test if it gets
// no answer.
func PostTLS(t testing.TB, c *http.Client, url, body string) Response {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return MustSend(t, c, req)
}

// NewLeaseTLS makes a lease of a minute with c and returns its id.
func NewLeaseTLS(t testing.TB, c *http.Client, base string) string {
	t.Helper()
	resp, err := c.Post(base+"/v1/leases", "application/json", strings.NewReader(`{"ttl":"1m"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != 201 || json.NewDecoder(resp.Body).Decode(&body) != nil {
		t.Fatalf("lease: %d", resp.StatusCode)
	}
	return body.ID
}
