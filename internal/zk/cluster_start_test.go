package zk

import (
	"net"
	"testing"
)

// A port picked as free can be taken before ZooKeeper binds it; ZooKeeper
// then exits at once. The harness starts the cluster again on fresh ports
// rather than waiting startTimeout for a server that is gone.
func TestIntegration_StartRetriesAServerWhosePortWasTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	picks := 0
	pick := func(t *testing.T, n int) []int {
		picks++
		ports := freePorts(t, n)
		if picks == 1 {
			ports[0] = taken.Addr().(*net.TCPAddr).Port // the client port
		}
		return ports
	}
	ts, err := startTestCluster(t, 1, nil, logWriter{t: t, p: "[ZKERR] "}, pick)
	if err != nil {
		t.Fatalf("the cluster did not start after its client port was taken: %v", err)
	}
	defer ts.Stop()
	if picks != 2 {
		t.Fatalf("ports picked %d times, want 2 (the taken one, then fresh ones)", picks)
	}
	if port := taken.Addr().(*net.TCPAddr).Port; ts.Servers[0].Port == port {
		t.Fatalf("the cluster serves on the taken port %d", port)
	}
	zk, _, err := ts.Connect(0)
	if err != nil {
		t.Fatal(err)
	}
	defer zk.Close()
	if _, _, err := zk.Exists("/"); err != nil {
		t.Fatalf("exists on the restarted cluster: %v", err)
	}
}
