package zk

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	_testConfigName   = "zoo.cfg"
	_testMyIDFileName = "myid"
)

type TestServer struct {
	Port   int
	Path   string
	Srv    *server
	Config ServerConfigServer
}

type TestCluster struct {
	Path    string
	Config  ServerConfig
	Servers []TestServer
}

// TODO: pull this into its own package to allow for better isolation of integration tests vs. unit
// testing. This should be used on CI systems and local only when needed whereas unit tests should remain
// fast and not rely on external dependencies.
func StartTestCluster(t *testing.T, size int, stdout, stderr io.Writer) (*TestCluster, error) {
	t.Helper()
	return startTestCluster(t, size, stdout, stderr, freePorts)
}

// startAttempts bounds how often a cluster is started on fresh ports when a
// server exits before it serves.
const startAttempts = 3

// startTestCluster starts size servers on ports from pickPorts. The ports
// were free when picked but are not held until ZooKeeper binds them, so
// another process (another test package's client, say) can take one in
// between; ZooKeeper then exits. Such a start is retried on fresh ports.
func startTestCluster(t *testing.T, size int, stdout, stderr io.Writer, pickPorts func(*testing.T, int) []int) (*TestCluster, error) {
	t.Helper()

	if testing.Short() {
		t.Skip("ZK cluster tests skipped in short case.")
	}

	if testing.Verbose() {
		// if testing verbose we just spam the server logs as many issues with tests will have the ZK server
		// logs have the cause of the failure in it.
		if stdout == nil {
			stdout = os.Stderr
		} else {
			stdout = io.MultiWriter(stdout, os.Stderr)
		}
	}

	tmpPath := t.TempDir()
	for attempt := 1; ; attempt++ {
		cluster, err := startClusterOnce(t, filepath.Join(tmpPath, fmt.Sprint(attempt)), size, pickPorts(t, 3*size), stdout, stderr)
		var exited *serverExitedError
		if err == nil || !errors.As(err, &exited) || attempt == startAttempts {
			return cluster, err
		}
		t.Logf("attempt %d of %d: %v; starting again on fresh ports", attempt, startAttempts, err)
	}
}

// startClusterOnce starts size servers on ports (three per server: client,
// peer, election) in directories under dir, and waits until they serve. On
// an error every server it started is stopped.
func startClusterOnce(t *testing.T, dir string, size int, ports []int, stdout, stderr io.Writer) (*TestCluster, error) {
	t.Helper()

	requireNoErrorf(t, os.Mkdir(dir, 0700), "failed to make cluster path")
	success := false
	cluster := &TestCluster{Path: dir}

	defer func() {
		if !success {
			cluster.Stop()
		}
	}()

	for serverN := 0; serverN < size; serverN++ {
		srvPath := filepath.Join(dir, fmt.Sprintf("srv%d", serverN+1))
		requireNoErrorf(t, os.Mkdir(srvPath, 0700), "failed to make server path")

		cfg := ServerConfig{
			ClientPort:        ports[serverN*3],
			ClientPortAddress: "127.0.0.1",
			DataDir:           srvPath,
		}

		for i := 0; i < size; i++ {
			serverNConfig := ServerConfigServer{
				ID:                 i + 1,
				Host:               "127.0.0.1",
				PeerPort:           ports[i*3+1],
				LeaderElectionPort: ports[i*3+2],
			}

			cfg.Servers = append(cfg.Servers, serverNConfig)
		}

		cfgPath := filepath.Join(srvPath, _testConfigName)
		fi, err := os.Create(cfgPath)
		requireNoErrorf(t, err)

		requireNoErrorf(t, cfg.Marshall(fi))
		fi.Close()

		fi, err = os.Create(filepath.Join(srvPath, _testMyIDFileName))
		requireNoErrorf(t, err)

		_, err = fmt.Fprintf(fi, "%d\n", serverN+1)
		fi.Close()
		requireNoErrorf(t, err)

		srv, err := NewIntegrationTestServer(t, cfgPath, stdout, stderr)
		requireNoErrorf(t, err)

		if err := srv.Start(); err != nil {
			return nil, err
		}

		cluster.Servers = append(cluster.Servers, TestServer{
			Path:   srvPath,
			Port:   cfg.ClientPort,
			Srv:    srv,
			Config: cfg.Servers[serverN],
		})
		cluster.Config = cfg
	}

	if err := cluster.waitForStart(startTimeout); err != nil {
		return nil, err
	}

	success = true

	return cluster, nil
}

// freePorts returns n distinct loopback ports that were free a moment ago:
// every listener stays open until all are chosen, so none repeats.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		requireNoErrorf(t, err, "failed to pick a free port")
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

func (tc *TestCluster) Connect(idx int) (*Conn, <-chan Event, error) {
	return Connect([]string{fmt.Sprintf("127.0.0.1:%d", tc.Servers[idx].Port)}, time.Second*15)
}

func (tc *TestCluster) ConnectAll() (*Conn, <-chan Event, error) {
	return tc.ConnectAllTimeout(time.Second * 15)
}

func (tc *TestCluster) ConnectAllTimeout(sessionTimeout time.Duration) (*Conn, <-chan Event, error) {
	return tc.ConnectWithOptions(sessionTimeout)
}

func (tc *TestCluster) ConnectWithOptions(sessionTimeout time.Duration, options ...connOption) (*Conn, <-chan Event, error) {
	hosts := make([]string, len(tc.Servers))
	for i, srv := range tc.Servers {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", srv.Port)
	}
	zk, ch, err := Connect(hosts, sessionTimeout, options...)
	return zk, ch, err
}

func (tc *TestCluster) Stop() error {
	for _, srv := range tc.Servers {
		srv.Srv.Stop()
	}

	return tc.waitForStop(5 * time.Second)
}

// startTimeout bounds the wait for a cluster to serve: JVMs start slowly
// when the machine is busy (other test packages run alongside).
const startTimeout = 60 * time.Second

// pollInterval is how often the servers are asked whether they are up or down.
const pollInterval = 100 * time.Millisecond

// waitForStart blocks until every server answers srvr (a server answers it
// only once it serves requests), or fails after timeout.
func (tc *TestCluster) waitForStart(timeout time.Duration) error {
	serverAddrs := make([]string, len(tc.Servers))
	for i, s := range tc.Servers {
		serverAddrs[i] = fmt.Sprintf("127.0.0.1:%d", s.Port)
	}

	var stats []*ServerStats
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(pollInterval) {
		var ok bool
		if stats, ok = FLWSrvr(serverAddrs, time.Second); ok {
			return nil
		}
		for _, s := range tc.Servers {
			if exited, err := s.Srv.hasExited(); exited {
				return &serverExitedError{port: s.Port, err: err}
			}
		}
	}
	for _, s := range stats {
		if s.Error != nil {
			return fmt.Errorf("unable to verify health of servers: %s: %v", s.Server, s.Error)
		}
	}
	return fmt.Errorf("unable to verify health of servers")
}

// serverExitedError is a server's process ending before it served.
type serverExitedError struct {
	port int
	err  error
}

func (e *serverExitedError) Error() string {
	return fmt.Sprintf("the server of client port %d exited before it served (%v); its ports may have been taken", e.port, e.err)
}

// waitForStop blocks until no server answers ruok, or fails after timeout.
func (tc *TestCluster) waitForStop(timeout time.Duration) error {
	serverAddrs := make([]string, len(tc.Servers))
	for i, s := range tc.Servers {
		serverAddrs[i] = fmt.Sprintf("127.0.0.1:%d", s.Port)
	}

	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(pollInterval) {
		up := false
		for _, ok := range FLWRuok(serverAddrs, time.Second) {
			up = up || ok
		}
		if !up {
			return nil
		}
	}
	return fmt.Errorf("unable to verify servers are down")
}

func (tc *TestCluster) StartServer(server string) {
	for _, s := range tc.Servers {
		if strings.HasSuffix(server, fmt.Sprintf(":%d", s.Port)) {
			s.Srv.Start()
			return
		}
	}
	panic(fmt.Sprintf("unknown server: %s", server))
}

func (tc *TestCluster) StopServer(server string) {
	for _, s := range tc.Servers {
		if strings.HasSuffix(server, fmt.Sprintf(":%d", s.Port)) {
			s.Srv.Stop()
			return
		}
	}
	panic(fmt.Sprintf("unknown server: %s", server))
}

func (tc *TestCluster) StartAllServers() error {
	for _, s := range tc.Servers {
		if err := s.Srv.Start(); err != nil {
			return fmt.Errorf("failed to start server listening on port `%d` : %+v", s.Port, err)
		}
	}

	if err := tc.waitForStart(startTimeout); err != nil {
		return fmt.Errorf("failed to wait to startup zk servers: %v", err)
	}

	return nil
}

func (tc *TestCluster) StopAllServers() error {
	var err error
	for _, s := range tc.Servers {
		if err := s.Srv.Stop(); err != nil {
			err = fmt.Errorf("failed to stop server listening on port `%d` : %v", s.Port, err)
		}
	}
	if err != nil {
		return err
	}

	if err := tc.waitForStop(5 * time.Second); err != nil {
		return fmt.Errorf("failed to wait to startup zk servers: %v", err)
	}

	return nil
}

func requireNoErrorf(t *testing.T, err error, msgAndArgs ...interface{}) {
	t.Helper()

	if err != nil {
		t.Logf("received unexpected error: %v", err)
		t.Fatal(msgAndArgs...)
	}
}
