package server_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// zkPassword is the password ZooKeeper 3.8 gives session id
// (ZooKeeperServer.generatePasswd: new Random(id ^ 0xB3415C00L) fills 16
// bytes): anyone who knows a session id knows its password.
func zkPassword(id int64) []byte {
	const mult, mask = 0x5DEECE66D, 1<<48 - 1
	seed := (id ^ 0xB3415C00 ^ mult) & mask
	p := make([]byte, 16)
	for i := 0; i < len(p); {
		seed = (seed*mult + 0xB) & mask
		rnd := int32(seed >> 16)
		for n := min(len(p)-i, 4); n > 0; n-- {
			p[i] = byte(rnd)
			rnd >>= 8
			i++
		}
	}
	return p
}

// attackAsNobody is run by Debian's python3 (it has kazoo) as user nobody: what a local user tried
// against the embedded ZooKeeper, each printed as "name: done" or
// "name: refused (why)". argv: address, session id, its password (hex),
// the data dir, a transaction log file.
const attackAsNobody = `
import os, socket, sys
from kazoo.client import KazooClient
addr, sid, pw, data, log = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3]), sys.argv[4], sys.argv[5]
host, port = addr.rsplit(":", 1)
def attempt(name, fn):
    try:
        fn()
        print(name + ": done", flush=True)
    except Exception as e:
        print(name + ": refused (" + type(e).__name__ + ")", flush=True)
def read_item():
    zk = KazooClient(hosts=addr, timeout=3)
    zk.start(timeout=4)
    try:
        zk.get_children("/")
    finally:
        zk.stop(); zk.close()
def close_session():
    zk = KazooClient(hosts=addr, timeout=3, client_id=(sid, pw))
    zk.start(timeout=4)
    zk.stop(); zk.close()
def dump():
    s = socket.create_connection((host, int(port)), timeout=3)
    s.settimeout(3)
    s.sendall(b"dump")
    out = s.recv(65536)
    if b"ession" not in out:
        raise RuntimeError("no dump: %r" % out[:40])
def read_log():
    with open(log, "rb") as f:
        f.read(16)
attempt("read the znodes", read_item)
attempt("close the gateway's session", close_session)
attempt("dump", dump)
attempt("list the data dir", lambda: os.listdir(data))
attempt("read the transaction log", read_log)
`

// TestEmbeddedZooKeeperAdmitsTheGatewayAlone: the embedded ZooKeeper (the
// default without --zk) is no way around the gateway for another local
// user. As user nobody, kazoo cannot read a znode, nor resume the gateway's
// session with its computed password and close it; dump answers nothing;
// the data dir and the transaction log cannot be read. Before, each of
// these worked: the plain port on 127.0.0.1 with an open ACL and every
// four-letter word, and a data dir of 0755 and a log of 0644.
func TestEmbeddedZooKeeperAdmitsTheGatewayAlone(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("acts as user nobody through setpriv, which needs root (as CI runs): run the suite as root to check this")
	}
	// A data dir that others may enter, as ./zkgate-data usually is: only
	// what the gateway makes of it may keep them out.
	base, err := os.MkdirTemp("", "zkgate-trust-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(base, "data")
	g := gwtest.StartProcess(t, gwtest.GatewayOptions{Embedded: true, DataDir: dataDir})
	lease := newLease(t, g.URL, "1m", "held")
	mustStatus(t, acquire(t, g.URL, "trust", lease, "0s"), 200, "acquire")
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/queues/trust/items", "secret item"), 201, "produce")

	sid := holderSession(t, g.URL, "trust")
	// The premise: the password of a session is its id's.
	own := g.ZKClient(t, 5*time.Second)
	if got, want := fmt.Sprintf("%x", own.Password()), fmt.Sprintf("%x", zkPassword(own.SessionID())); got != want {
		t.Fatalf("a session's password is %s, its id's computed one %s: the attack below would prove nothing", got, want)
	}

	zkDir := filepath.Join(dataDir, "zookeeper")
	logs, _ := filepath.Glob(filepath.Join(zkDir, "version-2", "log.*"))
	if len(logs) == 0 {
		t.Fatalf("no transaction log in %s", zkDir)
	}
	cmd := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",
		"/usr/bin/python3", "-c", attackAsNobody, g.ZK, strconv.FormatInt(sid, 10),
		fmt.Sprintf("%x", zkPassword(sid)), zkDir, logs[0])
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the attack as nobody: %v\n%s", err, out)
	}
	for _, what := range []string{"read the znodes", "close the gateway's session", "dump", "list the data dir", "read the transaction log"} {
		if !strings.Contains(string(out), what+": refused") {
			t.Errorf("as nobody, %q was not refused:\n%s", what, out)
		}
	}
	// The gateway's session, and so the lease and its lock, live on.
	mustStatus(t, gwtest.Do(t, "GET", g.URL+"/v1/leases/"+lease, nil), 200, "the lease after the attack")
	// The gateway's user, with what --embedded-zk-credentials wrote, reads
	// it with kazoo as docs/security.md says.
	creds := filepath.Join(dataDir, "zk-credentials")
	kazoo := exec.Command("/usr/bin/python3", "-c", `
import sys
from kazoo.client import KazooClient
creds = sys.argv[2]
zk = KazooClient(hosts=sys.argv[1], use_ssl=True, certfile=creds + "/client.pem", keyfile=creds + "/client.pem", ca=creds + "/ca.pem")
zk.start(timeout=10)
print(zk.get_children(sys.argv[3]))
zk.stop(); zk.close()
`, g.ZK, creds, g.Root+"/queues/trust/entries")
	if out, err := kazoo.CombinedOutput(); err != nil || !strings.Contains(string(out), "entry-") {
		t.Errorf("kazoo with the exported credentials: %v\n%s", err, out)
	}
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}
