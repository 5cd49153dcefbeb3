package server_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestEmbeddedZooKeeperSupervised: the embedded ZooKeeper is the gateway's
// child; when it dies (SIGKILL), the gateway starts it again on the same
// data dir and port and is ready again. When it cannot (its port is taken),
// the gateway exits non-zero with the reason, for its own supervisor to act.
func TestEmbeddedZooKeeperSupervised(t *testing.T) {
	t.Parallel()
	g := gwtest.StartProcess(t, gwtest.GatewayOptions{Embedded: true, SessionTimeout: 2 * time.Second})
	lease := newLease(t, g.URL, "1m", "before")
	mustStatus(t, acquire(t, g.URL, "guarded", lease, "0s"), http.StatusOK, "acquire")

	killEmbedded(t, g)
	gwtest.Eventually(t, 60*time.Second, func() error {
		if !strings.Contains(g.Logs(), "embedded ZooKeeper restarted") {
			return fmt.Errorf("no restart yet")
		}
		if r := gwtest.Do(t, "GET", g.URL+"/readyz", nil); r.Status != http.StatusOK {
			return fmt.Errorf("readyz %d", r.Status)
		}
		return nil
	})
	// The old lease either kept its session (ZooKeeper keeps sessions in its
	// data, and the restart beat the timeout) and so its lock, or ended with
	// it; it never answers anything else.
	switch r := gwtest.Do(t, "GET", g.URL+"/v1/leases/"+lease, nil); r.Status {
	case http.StatusOK, http.StatusGone:
	default:
		t.Fatalf("the old lease after the restart: %d %s", r.Status, r.Body)
	}
	fresh := newLease(t, g.URL, "1m", "after")
	if r := acquire(t, g.URL, "fresh", fresh, "0s"); r.Status != http.StatusOK {
		t.Fatalf("acquire after the restart: %d %s", r.Status, r.Body)
	}

	// Now it cannot come back: its port is taken.
	port := killEmbedded(t, g)
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("take the embedded ZooKeeper's port: %v", err)
	}
	defer ln.Close()
	select {
	case <-g.Done():
	case <-time.After(2 * time.Minute):
		t.Fatal("the gateway kept running without its ZooKeeper")
	}
	if _, code := g.Exited(); code == 0 {
		t.Fatal("the gateway exited 0 without its ZooKeeper")
	}
	if !strings.Contains(g.Logs(), "could not be restarted") {
		t.Fatalf("the gateway's last words do not say why:\n%s", tail(g.Logs(), 2000))
	}
}

// killEmbedded SIGKILLs the gateway's ZooKeeper child and returns its
// client port.
func killEmbedded(t *testing.T, g *gwtest.Proc) int {
	t.Helper()
	var pid int
	gwtest.Eventually(t, 30*time.Second, func() error {
		out, err := exec.Command("pgrep", "-P", strconv.Itoa(g.Pid()), "java").Output()
		fields := strings.Fields(string(out))
		if err != nil || len(fields) != 1 {
			return fmt.Errorf("the embedded ZooKeeper's pid: %q %v", out, err)
		}
		pid, _ = strconv.Atoi(fields[0])
		return nil
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gwtest.Eventually(t, 10*time.Second, func() error {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			return fmt.Errorf("pid %d still there", pid)
		}
		return nil
	})
	_, port, _ := net.SplitHostPort(g.ZK)
	n, _ := strconv.Atoi(port)
	return n
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
