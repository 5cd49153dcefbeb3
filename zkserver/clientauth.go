package zkserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// tlsDir is the folder of the data dir that holds the server's side of the
// credentials of Options.ClientAuth.
const tlsDir = "tls"

// credentials are what Options.ClientAuth makes at each Start: a CA, the
// server's certificate and the one client certificate the server admits.
// The client's private key is never written anywhere: only the process that
// called Start holds it.
type credentials struct {
	keyStore, trustStore string      // PEM files in the data dir, 0600
	client               *tls.Config // connects as the one admitted client
	clientPEM, caPEM     []byte      // the client's key and certificate, the CA's certificate
}

// newCredentials makes a CA, a server certificate for host and a client
// certificate, all signed by the CA and valid from a minute ago for ten
// years, and writes the server's keystore (its key and certificate) and the
// CA (its truststore) into dir/tls.
func newCredentials(dir, host string) (*credentials, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now().Add(-time.Minute)
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "zkgate embedded ZooKeeper CA"},
		NotBefore: now, NotAfter: now.AddDate(10, 0, 0), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	issue := func(cn string, usage x509.ExtKeyUsage, ips []net.IP) (*ecdsa.PrivateKey, []byte, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: cn}, NotBefore: now, NotAfter: now.AddDate(10, 0, 0),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		return key, der, err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("zkserver: ClientAuth needs an IP address as Host, not %q", host)
	}
	serverKey, serverDER, err := issue("zkgate embedded ZooKeeper", x509.ExtKeyUsageServerAuth, []net.IP{ip})
	if err != nil {
		return nil, err
	}
	clientKey, clientDER, err := issue("zkgate", x509.ExtKeyUsageClientAuth, nil)
	if err != nil {
		return nil, err
	}
	// ZooKeeper's PEM keystore: the key (PKCS#8), then the certificate.
	serverPKCS8, err := x509.MarshalPKCS8PrivateKey(serverKey)
	if err != nil {
		return nil, err
	}
	keyStore := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: serverPKCS8}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: serverDER})...)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	d := filepath.Join(dir, tlsDir)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nil, fmt.Errorf("zkserver: %w", err)
	}
	c := &credentials{keyStore: filepath.Join(d, "keystore.pem"), trustStore: filepath.Join(d, "ca.pem")}
	for file, data := range map[string][]byte{c.keyStore: keyStore, c.trustStore: caPEM} {
		if err := writePrivate(file, data); err != nil {
			return nil, err
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	clientPKCS8, err := x509.MarshalPKCS8PrivateKey(clientKey)
	if err != nil {
		return nil, err
	}
	c.clientPEM = append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: clientPKCS8}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: clientDER})...)
	c.caPEM = caPEM
	c.client = &tls.Config{
		MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: ip.String(),
		Certificates: []tls.Certificate{{Certificate: [][]byte{clientDER}, PrivateKey: clientKey}},
	}
	return c, nil
}

// WriteClientCredentials writes what the one client of Options.ClientAuth
// connects with into dir (made 0700): client.pem, its private key and
// certificate, and ca.pem, the CA that signed the server's certificate;
// each 0600. They are this start's: the next Start makes others.
func (s *Server) WriteClientCredentials(dir string) error {
	if s.creds == nil {
		return errors.New("zkserver: no client credentials: the server was not started with Options.ClientAuth")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("zkserver: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("zkserver: %w", err)
	}
	if err := writePrivate(filepath.Join(dir, "client.pem"), s.creds.clientPEM); err != nil {
		return err
	}
	return writePrivate(filepath.Join(dir, "ca.pem"), s.creds.caPEM)
}

// LoadClientCredentials reads what WriteClientCredentials wrote into dir as
// the TLS configuration that connects to the server at host (an IP address).
func LoadClientCredentials(dir, host string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.pem"))
	if err != nil {
		return nil, fmt.Errorf("zkserver: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return nil, fmt.Errorf("zkserver: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("zkserver: no certificate in %s", filepath.Join(dir, "ca.pem"))
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: host, Certificates: []tls.Certificate{pair}}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}

// writePrivate writes data to file, readable by this user alone.
func writePrivate(file string, data []byte) error {
	_ = os.Remove(file) // a file of another mode is made anew
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return fmt.Errorf("zkserver: %w", err)
	}
	return nil
}

// privatize makes dir and everything in it this user's alone: folders
// 0700, files 0600 (what an earlier version, or another umask, left
// readable by others included).
func privatize(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone meanwhile
			}
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		mode := fs.FileMode(0o600)
		if d.IsDir() {
			mode = 0o700
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm()&^mode == 0 {
			return nil
		}
		return os.Chmod(p, info.Mode().Perm()&mode)
	})
}
