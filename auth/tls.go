package auth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// certReloader serves a certificate pair from files and loads them again
// when they change (a renewal by certbot or cert-manager), checked with a
// stat at each handshake. A pair that does not load (say, a key written
// before its certificate) keeps the previous one in service, and is tried
// again at the next handshake once the files change again.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu     sync.Mutex
	cert   *tls.Certificate
	stamp  fileStamp
	failed fileStamp // the stamp that last failed to load, not logged twice
}

type fileStamp struct {
	certMod, keyMod   time.Time
	certSize, keySize int64
}

func stampOf(certFile, keyFile string) (fileStamp, error) {
	c, err := os.Stat(certFile)
	if err != nil {
		return fileStamp{}, err
	}
	k, err := os.Stat(keyFile)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{certMod: c.ModTime(), keyMod: k.ModTime(), certSize: c.Size(), keySize: k.Size()}, nil
}

// LoadPair loads and checks a certificate pair: it must parse, match, and
// be valid now.
func LoadPair(certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certificate %s with key %s: %w", certFile, keyFile, FileError(err))
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("certificate %s: %w", certFile, err)
	}
	now := time.Now()
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("certificate %s expired on %s", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return nil, fmt.Errorf("certificate %s is not valid before %s", certFile, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	cert.Leaf = leaf
	return &cert, nil
}

// FileError is err without the operation of a path error: "FILE: REASON".
func FileError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}

func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	stamp, err := stampOf(certFile, keyFile)
	if err != nil {
		return nil, FileError(err)
	}
	cert, err := LoadPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &certReloader{certFile: certFile, keyFile: keyFile, log: log, cert: cert, stamp: stamp}, nil
}

// current returns the certificate in service, reloading it first if the
// files changed.
func (c *certReloader) current() *tls.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	stamp, err := stampOf(c.certFile, c.keyFile)
	if err != nil || stamp == c.stamp || stamp == c.failed {
		return c.cert
	}
	cert, err := LoadPair(c.certFile, c.keyFile)
	if err != nil {
		c.failed = stamp
		c.log.Error("TLS certificate not reloaded; keeping the previous one", "err", err)
		return c.cert
	}
	c.cert, c.stamp = cert, stamp
	c.log.Info("TLS certificate reloaded", "file", c.certFile, "not_after", cert.Leaf.NotAfter.UTC())
	return cert
}

// LoadCAs reads a PEM file of one or more CA certificates.
func LoadCAs(file string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, FileError(err)
	}
	var certs []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return certs, nil
}

// PoolOf is a pool of base (nil: empty) plus certs.
func PoolOf(base *x509.CertPool, certs ...[]*x509.Certificate) *x509.CertPool {
	pool := base
	if pool == nil {
		pool = x509.NewCertPool()
	}
	for _, list := range certs {
		for _, c := range list {
			pool.AddCert(c)
		}
	}
	return pool
}

// GatewayTLS is the gateway's HTTPS side: the server's configuration and
// the transport with which it forwards requests to other gateways.
type GatewayTLS struct {
	certs    *certReloader
	ClientCA []*x509.Certificate // none: no client certificates asked for
	PeerCA   []*x509.Certificate // CAs of the other gateways; none: their certificates prove nothing
}

// NewGatewayTLS serves the certificate pair of certFile and keyFile,
// reloaded when the files change. A pair that does not load is an error
// here; later reloads are logged (see SetLog).
func NewGatewayTLS(certFile, keyFile string) (*GatewayTLS, error) {
	certs, err := newCertReloader(certFile, keyFile, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, err
	}
	return &GatewayTLS{certs: certs}, nil
}

// SetLog is where the reloads of the certificate are logged.
func (g *GatewayTLS) SetLog(log *slog.Logger) { g.certs.log = log }

// ProvesPeers reports whether a client certificate may prove a gateway
// (--tls-peer-ca).
func (g *GatewayTLS) ProvesPeers() bool { return len(g.PeerCA) > 0 }

// ServerConfig asks for client certificates: of --tls-client-ca from every
// client when it is given, and of --tls-peer-ca from the other gateways
// (see peers), which need not show one of --tls-client-ca.
func (g *GatewayTLS) ServerConfig() *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return g.certs.current(), nil
		},
	}
	switch {
	case len(g.ClientCA) > 0:
		cfg.ClientCAs = PoolOf(nil, g.ClientCA, g.PeerCA)
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case len(g.PeerCA) > 0:
		cfg.ClientCAs = PoolOf(nil, g.PeerCA)
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg
}

// ForwardTransport reaches the other gateways over TLS, showing this
// gateway's own certificate to those that ask for a client certificate. It
// trusts --tls-peer-ca alone when it is given: a certificate of any other
// CA (the system's roots, --tls-client-ca) is no gateway's. Without it, the
// system's roots serve for privacy, and the shared secret (which the
// configuration then requires for forwarding) for proof.
func (g *GatewayTLS) ForwardTransport() http.RoundTripper {
	var roots *x509.CertPool
	if len(g.PeerCA) > 0 {
		roots = PoolOf(nil, g.PeerCA)
	} else if system, err := x509.SystemCertPool(); err == nil {
		roots = system
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    roots,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return g.certs.current(), nil
		},
	}
	t.ForceAttemptHTTP2 = true
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return t
}

// VerifyPeer is the TLS side of the peer credential: with --tls-peer-ca,
// a connection is a gateway's when its client certificate verifies
// against that CA alone (the handshake may have taken it for
// --tls-client-ca). Without it, nil: no certificate proves a gateway.
func (g *GatewayTLS) VerifyPeer() func(*tls.ConnectionState) bool {
	if len(g.PeerCA) == 0 {
		return nil
	}
	roots := PoolOf(nil, g.PeerCA)
	return func(cs *tls.ConnectionState) bool {
		if len(cs.PeerCertificates) == 0 {
			return false
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err == nil
	}
}
