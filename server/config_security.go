package server

import (
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/internal/peer"
)

// parseSecurity checks the security flags and loads what they name: the
// tokens file, the certificates, the ZooKeeper credentials.
func (cfg *Config) parseSecurity(zkAuthFile string) error {
	for _, step := range []func() error{cfg.parseTokens, cfg.parseSideListeners, cfg.parseHTTPS, cfg.parsePeerSecret} {
		if err := step(); err != nil {
			return err
		}
	}
	if err := cfg.parseZKAuth(zkAuthFile); err != nil {
		return err
	}
	return cfg.parseZKTLS()
}

// parseTokens loads --auth-file, and refuses a gateway that anyone could
// reach without one.
func (cfg *Config) parseTokens() error {
	if err := loadFile("--auth-file", cfg.AuthFile, auth.LoadTokens, &cfg.tokens); err != nil {
		return err
	}
	if cfg.AuthFile == "" && !cfg.Insecure && !loopback(cfg.Listen) {
		return usagef("--listen %s is not a loopback address and there is no --auth-file: anyone reaching it would own every lock; "+
			"make tokens with \"zkgate token new --auth-file FILE --name NAME PERMISSION...\" and pass --auth-file FILE, or pass --insecure", cfg.Listen)
	}
	return nil
}

// parseSideListeners checks --metrics-listen and --debug-listen.
func (cfg *Config) parseSideListeners() error {
	if cfg.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(cfg.MetricsListen); err != nil {
			return usagef("--metrics-listen %q is not host:port", cfg.MetricsListen)
		}
	}
	if cfg.DebugListen != "" {
		if _, _, err := net.SplitHostPort(cfg.DebugListen); err != nil {
			return usagef("--debug-listen %q is not host:port", cfg.DebugListen)
		}
		if !cfg.Insecure && !loopback(cfg.DebugListen) {
			return usagef("--debug-listen %s is not a loopback address: profiles show the gateway's insides to anyone reaching it; "+
				"listen on 127.0.0.1 (and tunnel to it), or pass --insecure", cfg.DebugListen)
		}
	}
	return nil
}

// parseHTTPS loads the gateway's certificate and the CAs of its clients
// and of its peers.
func (cfg *Config) parseHTTPS() error {
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	if cfg.TLSCert == "" && (cfg.TLSClientCA != "" || cfg.TLSPeerCA != "") {
		return usagef("--tls-client-ca and --tls-peer-ca need --tls-cert and --tls-key")
	}
	if cfg.TLSCert == "" {
		return nil
	}
	g, err := auth.NewGatewayTLS(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return usagef("--tls-cert: %v", err)
	}
	if err := loadFile("--tls-client-ca", cfg.TLSClientCA, auth.LoadCAs, &g.ClientCA); err != nil {
		return err
	}
	if err := loadFile("--tls-peer-ca", cfg.TLSPeerCA, auth.LoadCAs, &g.PeerCA); err != nil {
		return err
	}
	// A certificate of --tls-peer-ca is a gateway's, which may act as any
	// token: a CA that signs clients must not be one.
	for _, p := range g.PeerCA {
		if slices.ContainsFunc(g.ClientCA, p.Equal) {
			return usagef("--tls-peer-ca: the CA %q is also in --tls-client-ca: every client would pass for a gateway; "+
				"sign the gateways' certificates with a CA of their own", p.Subject.CommonName)
		}
	}
	cfg.gatewayTLS = g
	return nil
}

// parsePeerSecret loads the secret the gateways of a root share.
func (cfg *Config) parsePeerSecret() error {
	if err := loadFile("--peer-secret-file", cfg.PeerSecretFile, peer.LoadSecret, &cfg.peerSecret); err != nil {
		return err
	}
	cfg.warnReadable("--peer-secret-file", cfg.PeerSecretFile, "whoever reads it can pass for a gateway of the root")
	switch cfg.PeerProofs {
	case "strict", "":
	case "compat":
		if cfg.peerSecret != nil {
			cfg.Warnings = append(cfg.Warnings, "--peer-proofs compat: the registrations and lease records of gateways of earlier versions "+
				"are believed, and a copy of one of them, replayed by any ZooKeeper client that may write under the root, too; "+
				"drop it once every gateway of the root runs this version")
		}
	default:
		return usagef("--peer-proofs must be strict or compat")
	}
	return nil
}

// warnReadable adds a warning when file, the value of flag, may be read by
// every user of the machine, saying what such a reader can do and how to
// close it. Its group may read it: that is how a service's group shares it
// (the packaged unit's zkgate group, a Kubernetes Secret volume's fsGroup).
// A warning, not a refusal: a secret mounted into a container (a
// Kubernetes Secret volume is 0644 unless its defaultMode says otherwise)
// has no other user to hide from.
func (cfg *Config) warnReadable(flag, file, what string) {
	if file == "" {
		return
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm()&0o007 == 0 {
		return
	}
	cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("%s %s may be read by every user of the machine (mode %04o): %s; "+
		"make it the gateway user's (and its group's) alone: chmod 640 %s", flag, file, st.Mode().Perm(), what, file))
}

// loadFile loads file, the value of flag, into dst with load; no file
// leaves dst as it is.
func loadFile[T any](flag, file string, load func(string) (T, error), dst *T) error {
	if file == "" {
		return nil
	}
	v, err := load(file)
	if err != nil {
		return usagef("%s: %v", flag, err)
	}
	*dst = v
	return nil
}

// parseZKAuth reads the ZooKeeper identity (--zk-auth or its file) and the
// ACL of the nodes the gateway makes.
func (cfg *Config) parseZKAuth(zkAuthFile string) error {
	if zkAuthFile != "" {
		if cfg.ZKAuth != "" {
			return usagef("give --zk-auth or --zk-auth-file, not both")
		}
		data, err := os.ReadFile(zkAuthFile)
		if err != nil {
			return usagef("--zk-auth-file: %v", auth.FileError(err))
		}
		cfg.warnReadable("--zk-auth-file", zkAuthFile, "whoever reads it can act in ZooKeeper as the gateways")
		cfg.ZKAuth = strings.TrimSpace(string(data))
	}
	if cfg.ZKAuth != "" {
		digest, err := parseDigest(cfg.ZKAuth)
		if err != nil {
			return err
		}
		cfg.zkSecurity.Digest = digest
	}
	switch cfg.ZKACL {
	case "open":
	case "creator":
		if cfg.ZKAuth == "" {
			return usagef("--zk-acl creator needs --zk-auth (or --zk-auth-file): the nodes belong to that identity")
		}
		cfg.zkSecurity.CreatorACL = true
	default:
		return usagef("--zk-acl must be open or creator")
	}
	return nil
}

// parseZKTLS loads the CAs and the client certificate of ZooKeeper's TLS
// port.
func (cfg *Config) parseZKTLS() error {
	if (cfg.ZKTLSCert == "") != (cfg.ZKTLSKey == "") {
		return usagef("--zk-tls-cert and --zk-tls-key go together")
	}
	if cfg.ZKTLSCert != "" && cfg.ZKTLSCA == "" {
		return usagef("--zk-tls-cert needs --zk-tls-ca")
	}
	if cfg.ZKTLSCA == "" {
		return nil
	}
	cas, err := auth.LoadCAs(cfg.ZKTLSCA)
	if err != nil {
		return usagef("--zk-tls-ca: %v", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: auth.PoolOf(nil, cas)}
	if cfg.ZKTLSCert != "" {
		pair, err := auth.LoadPair(cfg.ZKTLSCert, cfg.ZKTLSKey)
		if err != nil {
			return usagef("--zk-tls-cert: %v", err)
		}
		tc.Certificates = []tls.Certificate{*pair}
	}
	if len(cfg.ZK) == 0 {
		return usagef("--zk-tls-ca needs --zk: the embedded ZooKeeper serves TLS already, to the gateway's own certificate")
	}
	cfg.zkSecurity.TLS = tc
	return nil
}

// parseDigest reads digest:USER:PASSWORD into USER:PASSWORD.
func parseDigest(s string) (string, error) {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || scheme != "digest" {
		return "", usagef("--zk-auth must be digest:USER:PASSWORD")
	}
	user, password, ok := strings.Cut(rest, ":")
	if !ok || user == "" || password == "" {
		return "", usagef("--zk-auth must be digest:USER:PASSWORD, with a user and a password")
	}
	if strings.ContainsAny(s, "\n\r") {
		return "", usagef("--zk-auth may not hold a line break")
	}
	return user + ":" + password, nil
}

// loopback reports whether host:port listens on loopback only. An empty
// host (":8080") listens on every interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseLimits reads the limit flags.
func parseLimits(maxLeases, perToken, rate, maxWaiters, waitersPerToken, perName, requestsPerToken, fanOutRate string) (Limits, error) {
	var l Limits
	counts := []struct {
		flag string
		raw  string
		dst  *int
	}{
		{"--max-leases", maxLeases, &l.MaxLeases},
		{"--max-leases-per-token", perToken, &l.MaxLeasesPerToken},
		{"--max-waiters", maxWaiters, &l.MaxWaiters},
		{"--max-waiters-per-token", waitersPerToken, &l.MaxWaitersPerToken},
		{"--max-waiters-per-name", perName, &l.MaxWaitersPerName},
		{"--max-requests-per-token", requestsPerToken, &l.MaxRequestsPerToken},
	}
	for _, c := range counts {
		if c.raw == "" && c.dst == &l.MaxWaitersPerToken {
			continue // half of --max-waiters, below
		}
		n, err := strconv.Atoi(c.raw)
		if err != nil || n < 1 || n > 10_000_000 {
			return Limits{}, usagef("%s %q must be a whole number from 1 to 10000000", c.flag, c.raw)
		}
		*c.dst = n
	}
	if waitersPerToken == "" {
		// Half: one token, or one address, never takes every slot.
		l.MaxWaitersPerToken = max(l.MaxWaiters/2, 1)
	}
	r, err := strconv.ParseFloat(rate, 64)
	if err != nil || math.IsNaN(r) || r < 0.01 || r > 1e6 {
		return Limits{}, usagef("--lease-rate %q must be a number of leases a second from 0.01 to 1000000", rate)
	}
	l.LeaseRate = r
	r, err = strconv.ParseFloat(fanOutRate, 64)
	if err != nil || math.IsNaN(r) || r < 0.1 || r > 1e6 {
		return Limits{}, usagef("--fan-out-rate %q must be a number of reads a second from 0.1 to 1000000", fanOutRate)
	}
	l.FanOutRate = r
	return l, nil
}
