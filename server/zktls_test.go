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

	"github.com/zkgate/zkgate/internal/gwtest"
	"github.com/zkgate/zkgate/zkserver"
)

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
	dir := t.TempDir()
	ca := gwtest.NewCA(t, dir, "zk-ca")
	serverCert, serverKey := ca.IssuePair(t, 10, dir, "zk", time.Now().Add(-time.Minute))
	keyStore := filepath.Join(dir, "zk-keystore.pem")
	pemKeyStore(t, serverCert, serverKey, keyStore)
	clientCert, clientKey := ca.IssuePair(t, 11, dir, "gw", time.Now().Add(-time.Minute))

	// Debian's zookeeper.jar names the netty jars of its plain port on its
	// manifest classpath, but not netty-codec, which the TLS port needs: a
	// release-style directory adds it.
	home := filepath.Join(dir, "zookeeper")
	for link, target := range map[string]string{
		"zookeeper-3.jar":  "/usr/share/java/zookeeper.jar",
		"netty-codec.jar":  "/usr/share/java/netty-codec.jar",
		"slf4j-simple.jar": "/usr/share/java/slf4j-simple.jar",
	} {
		if _, err := os.Stat(target); err != nil {
			t.Fatalf("ZooKeeper's TLS port needs %s (apt-get install -y zookeeper libnetty-java): %v", target, err)
		}
		if err := os.MkdirAll(filepath.Join(home, "lib"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(home, "lib", link)); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	zs, err := zkserver.Start(ctx, zkserver.Options{
		MinSessionTimeout: 400 * time.Millisecond, MaxSessionTimeout: time.Minute, ZooKeeperHome: home,
		SecureClientPort: true,
		Config: map[string]string{
			"serverCnxnFactory":        "org.apache.zookeeper.server.NettyServerCnxnFactory",
			"ssl.keyStore.location":    keyStore,
			"ssl.keyStore.type":        "PEM",
			"ssl.trustStore.location":  ca.File,
			"ssl.trustStore.type":      "PEM",
			"ssl.clientAuth":           "need",
			"ssl.hostnameVerification": "false",
			"client.portUnification":   "false",
		},
	})
	if err != nil {
		t.Fatalf("ZooKeeper with a TLS port: %v", err)
	}
	t.Cleanup(func() { _ = zs.Stop() })
	secure := zs.SecureAddr()

	g := gwtest.StartGateway(t, gwtest.GatewayOptions{ZK: []string{secure},
		Extra: []string{"--zk-tls-ca", ca.File, "--zk-tls-cert", clientCert, "--zk-tls-key", clientKey}})
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
