package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/zkserver"
)

// resumeAndClose is run by Debian's python3 (it has kazoo): it resumes the
// session of argv[2] with its derived password (argv[3], hex) through
// ZooKeeper at argv[1], plain, then over TLS trusting argv[4] with no
// client certificate, and closes it; it prints "plain: done" or
// "plain: refused (why)", likewise "tls:".
const resumeAndClose = `
import sys
from kazoo.client import KazooClient
addr, sid, pw, ca = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3]), sys.argv[4]
for name, extra in (("plain", {}), ("tls", {"use_ssl": True, "ca": ca})):
    try:
        zk = KazooClient(hosts=addr, timeout=3, client_id=(sid, pw), **extra)
        zk.start(timeout=4)
        zk.stop(); zk.close()
        print(name + ": done", flush=True)
    except Exception as e:
        print(name + ": refused (" + type(e).__name__ + ")", flush=True)
`

// holderSession is the ZooKeeper session id of the one holder of lock
// name, as GET /v1/locks/{name} shows it.
func holderSession(t *testing.T, url, name string) int64 {
	t.Helper()
	var state struct {
		Holders []struct{ Session string } `json:"holders"`
	}
	r := gwtest.Do(t, "GET", url+"/v1/locks/"+name, nil)
	if err := json.Unmarshal(r.Body, &state); err != nil || len(state.Holders) != 1 {
		t.Fatalf("the holder of %s: %s, %v", name, r.Body, err)
	}
	sid, err := strconv.ParseUint(strings.TrimPrefix(state.Holders[0].Session, "0x"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return int64(sid)
}

// TestEnsembleThatAdmitsTheGatewaysAlone: the configuration docs/security.md
// gives for an external ensemble (TLS alone, ssl.clientAuth=need; here a
// zkserver of Options.ClientAuth, whose certificate the gateway is given
// with --zk-tls-*) keeps out a client that knows the gateway's session id
// and so its password: neither a plain connection nor a TLS one without a
// certificate resumes the session to close it, and the lease lives on. The
// gateway says at start that its ensemble admits only clients with a
// certificate; on a plain ensemble, and on a TLS port that does not ask for
// one, it warns, saying what such a client can do and how to close it.
func TestEnsembleThatAdmitsTheGatewaysAlone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	zs, err := zkserver.Start(ctx, zkserver.Options{ClientAuth: true, MinSessionTimeout: 400 * time.Millisecond, MaxSessionTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zs.Stop() })
	creds := filepath.Join(t.TempDir(), "creds")
	if err := zs.WriteClientCredentials(creds); err != nil {
		t.Fatal(err)
	}
	client, ca := filepath.Join(creds, "client.pem"), filepath.Join(creds, "ca.pem")
	g := gwtest.StartProcess(t, gwtest.GatewayOptions{ZK: []string{zs.Addr()},
		Extra: []string{"--zk-tls-ca", ca, "--zk-tls-cert", client, "--zk-tls-key", client, "--log-level", "info"}})
	waitLog(t, g, "ZooKeeper admits only TLS clients with a certificate")
	if strings.Contains(g.Logs(), "level=WARN msg=\"ZooKeeper") {
		t.Errorf("a warning about an ensemble that admits the gateway alone:\n%s", g.Logs())
	}

	lease := newLease(t, g.URL, "1m", "held")
	mustStatus(t, acquire(t, g.URL, "closed", lease, "0s"), 200, "acquire")
	sid := holderSession(t, g.URL, "closed")
	out, err := exec.Command("/usr/bin/python3", "-c", resumeAndClose, zs.Addr(), strconv.FormatInt(sid, 10),
		fmt.Sprintf("%x", zkPassword(sid)), ca).CombinedOutput()
	if err != nil {
		t.Fatalf("kazoo: %v\n%s", err, out)
	}
	for _, how := range []string{"plain", "tls"} {
		if !strings.Contains(string(out), how+": refused") {
			t.Errorf("a %s client without a certificate resumed the gateway's session:\n%s", how, out)
		}
	}
	mustStatus(t, gwtest.Do(t, "GET", g.URL+"/v1/leases/"+lease, nil), 200, "the lease after the attempts")

	// A plain ensemble: the warning, with what a client can do and the fix.
	plain := gwtest.StartProcess(t, gwtest.GatewayOptions{})
	waitLog(t, plain, "ZooKeeper is reached without TLS")
	for _, w := range []string{"close it, ending every lease", "ssl.clientAuth=need", "--zk-tls-cert"} {
		if !strings.Contains(plain.Logs(), w) {
			t.Errorf("the warning does not say %q:\n%s", w, plain.Logs())
		}
	}

	// A TLS port that asks for no certificate, though the gateway shows one.
	files := newZKTLSFiles(t)
	lax, err := zkserver.Start(ctx, zkserver.Options{SecureClientPort: true, Config: files.config("none")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lax.Stop() })
	laxGW := gwtest.StartProcess(t, gwtest.GatewayOptions{ZK: []string{lax.SecureAddr()}, Extra: files.gatewayFlags()})
	waitLog(t, laxGW, "ZooKeeper answers a TLS client that shows no certificate")
	if !strings.Contains(laxGW.Logs(), "open="+lax.SecureAddr()) {
		t.Errorf("the warning does not name the server:\n%s", laxGW.Logs())
	}
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}

// waitLog waits until the gateway's log has line.
func waitLog(t *testing.T, p *gwtest.Proc, line string) {
	t.Helper()
	gwtest.Eventually(t, 30*time.Second, func() error {
		if !strings.Contains(p.Logs(), line) {
			return fmt.Errorf("no %q in the log yet", line)
		}
		return nil
	})
}
