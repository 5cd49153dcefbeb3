package server_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/zk"
)

// TestPausedGatewayNeverLies: a gateway frozen (SIGSTOP) for longer than its
// session timeout has lost its session, and with it every lock its leases
// held, which other clients may hold by now. Its first answers after it
// resumes, before it has heard from ZooKeeper, must not vouch for them: a
// keepalive, a read of the lease and a repeated acquire all answer 410.
func TestPausedGatewayNeverLies(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	g := gwtest.StartProcess(t, gwtest.GatewayOptions{SessionTimeout: timeout})
	lease := newLease(t, g.URL, "1h", "frozen")
	mustStatus(t, acquire(t, g.URL, "frozen", lease, "0s"), http.StatusOK, "acquire before the pause")

	g.Pause(t)
	// Past the session timeout, ZooKeeper has expired the session; another
	// gateway could have handed the lock to someone else.
	conn := gwtest.Client(t, []string{gwtest.ZK(t).Addr()}, 5*time.Second)
	gwtest.Eventually(t, 20*time.Second, func() error {
		return noChildren(conn, g.Root+"/locks/frozen")
	})
	g.Resume()

	for _, step := range []struct {
		what         string
		method, path string
		body         any
	}{
		{"keepalive", "POST", "/v1/leases/" + lease + "/keepalive", nil},
		{"lease read", "GET", "/v1/leases/" + lease, nil},
		{"acquire again", "POST", "/v1/locks/frozen/acquire", map[string]any{"lease": lease}},
	} {
		r := gwtest.Do(t, step.method, g.URL+step.path, step.body)
		if r.Status != http.StatusGone {
			t.Fatalf("%s right after the pause: %d %s, want 410 lease_expired", step.what, r.Status, r.Body)
		}
	}
}

// noChildren says whether p has no children (or is gone).
func noChildren(conn *zk.Conn, p string) error {
	kids, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) || err == nil && len(kids) == 0 {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%s still has %v", p, kids)
}
