package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/zkserver"
)

// zkTLSFiles are a CA, ZooKeeper's PEM keystore of a certificate it signed,
// and a client certificate pair it signed, for a ZooKeeper with a TLS port
// (zkserver's netty-codec on the classpath serves it from Debian's jar).
type zkTLSFiles struct{ ca, keyStore, clientCert, clientKey string }

func newZKTLSFiles(t *testing.T) zkTLSFiles {
	t.Helper()
	dir := t.TempDir()
	ca := gwtest.NewCA(t, dir, "zk-ca")
	serverCert, serverKey := ca.IssuePair(t, 10, dir, "zk", time.Now().Add(-time.Minute))
	f := zkTLSFiles{ca: ca.File, keyStore: filepath.Join(dir, "zk-keystore.pem")}
	pemKeyStore(t, serverCert, serverKey, f.keyStore)
	f.clientCert, f.clientKey = ca.IssuePair(t, 11, dir, "gw", time.Now().Add(-time.Minute))
	return f
}

// config is the zoo.cfg lines of the TLS port, asking clients for a
// certificate as clientAuth says (need, want or none).
func (f zkTLSFiles) config(clientAuth string) map[string]string {
	return map[string]string{
		"serverCnxnFactory":        "org.apache.zookeeper.server.NettyServerCnxnFactory",
		"ssl.keyStore.location":    f.keyStore,
		"ssl.keyStore.type":        "PEM",
		"ssl.trustStore.location":  f.ca,
		"ssl.trustStore.type":      "PEM",
		"ssl.clientAuth":           clientAuth,
		"ssl.hostnameVerification": "false",
		"client.portUnification":   "false",
	}
}

// gatewayFlags reach the TLS port with the client certificate.
func (f zkTLSFiles) gatewayFlags() []string {
	return []string{"--zk-tls-ca", f.ca, "--zk-tls-cert", f.clientCert, "--zk-tls-key", f.clientKey}
}

// pemKeyStore writes the certificate and its key (PKCS #8) into one PEM
// file, the keystore ZooKeeper reads with ssl.keyStore.type=PEM.
func pemKeyStore(t *testing.T, certFile, keyFile, out string) {
	t.Helper()
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(keyPEM)
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey((*ecdsa.PrivateKey)(key))
	if err != nil {
		t.Fatal(err)
	}
	data := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), certPEM...)
	if err := os.WriteFile(out, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestZooKeeperTLS: with --zk-tls-ca (and a client certificate pair) the
// gateway reaches ZooKeeper on its TLS port, which asks for client
// certificates, and serves as usual.
func TestZooKeeperTLS(t *testing.T) {
	t.Parallel()
	files := newZKTLSFiles(t)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	zs, err := zkserver.Start(ctx, zkserver.Options{
		MinSessionTimeout: 400 * time.Millisecond, MaxSessionTimeout: time.Minute,
		SecureClientPort: true, Config: files.config("need"),
	})
	if err != nil {
		t.Fatalf("ZooKeeper with a TLS port: %v", err)
	}
	t.Cleanup(func() { _ = zs.Stop() })
	secure := zs.SecureAddr()

	g := gwtest.StartGateway(t, gwtest.GatewayOptions{ZK: []string{secure},
		Extra: files.gatewayFlags()})
	lease := newLease(t, g.URL, "1m", "over TLS")
	mustStatus(t, acquire(t, g.URL, "tls", lease, "0s"), 200, "acquire over a TLS session")
	// The node is there, seen through the plain port.
	conn := gwtest.Client(t, []string{zs.Addr()}, 5*time.Second)
	kids, _, err := conn.Children(g.Root + "/locks/tls")
	if err != nil || len(kids) != 1 {
		t.Fatalf("lock nodes %v, %v: want the one the gateway made over TLS", kids, err)
	}
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}
