package server

import (
	"context"
	"crypto/tls"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/zkgate/zkgate/zkserver"
)

// exposureProbe bounds the check of each server of the ensemble.
const exposureProbe = 5 * time.Second

// warnExposedEnsemble says once, at start, when the ensemble of --zk admits
// a client that shows no credential, and what such a client can do: a
// session's password is derived from its id, which is no secret (the
// ephemeralOwner of every node the gateway makes), so any client that may
// connect can resume the gateway's session and close it, ending every
// lease. Only TLS with ssl.clientAuth=need on every port keeps it out
// (go-zookeeper speaks no SASL, and a digest identity is added after the
// connection). Over TLS with a client certificate, each server is asked
// for srvr without one: a server that answers admits anyone.
func warnExposedEnsemble(ctx context.Context, servers []string, tc *tls.Config, log *slog.Logger) {
	const what = "can resume the gateway's ZooKeeper session (its password is derived from its id, which every lock node's " +
		"ephemeralOwner shows) and close it, ending every lease, and read and change every node the ACLs leave open"
	const fix = "serve ZooKeeper over TLS alone (secureClientPort, no clientPort) with ssl.clientAuth=need, and give the gateway " +
		"--zk-tls-ca, --zk-tls-cert and --zk-tls-key (docs/security.md, ZooKeeper)"
	switch {
	case tc == nil:
		log.Warn("ZooKeeper is reached without TLS: any client that reaches it connects without a credential, and "+what, "zookeeper", strings.Join(servers, ","), "fix", fix)
		return
	case len(tc.Certificates) == 0:
		log.Warn("ZooKeeper is reached over TLS without a client certificate, so it asks none of its clients for one: any client that reaches it "+what, "zookeeper", strings.Join(servers, ","), "fix", fix)
		return
	}
	anonymous := tc.Clone()
	anonymous.Certificates = nil
	var mu sync.Mutex
	var open []string
	var wg sync.WaitGroup
	for _, addr := range servers {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, exposureProbe)
			defer cancel()
			if reply, err := zkserver.FourLetterWordTLS(pctx, addr, "srvr", anonymous); err == nil && reply != "" {
				mu.Lock()
				open = append(open, addr)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(open) > 0 {
		log.Warn("ZooKeeper answers a TLS client that shows no certificate (ssl.clientAuth is not need): any client that reaches it "+what,
			"open", strings.Join(open, ","), "fix", fix)
		return
	}
	log.Info("ZooKeeper admits only TLS clients with a certificate", "zookeeper", strings.Join(servers, ","))
}
