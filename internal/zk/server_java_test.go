package zk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkgate/zkgate/zkserver"
)

type ErrMissingServerConfigField string

func (e ErrMissingServerConfigField) Error() string {
	return fmt.Sprintf("zk: missing server config field '%s'", string(e))
}

const (
	DefaultServerTickTime                 = 500
	DefaultServerInitLimit                = 10
	DefaultServerSyncLimit                = 5
	DefaultServerAutoPurgeSnapRetainCount = 3
	DefaultPeerPort                       = 2888
	DefaultLeaderElectionPort             = 3888
)

type server struct {
	stdout, stderr io.Writer
	cmdString      string
	cmdArgs        []string
	cmdEnv         []string
	cmd            *exec.Cmd
	// this cancel will kill the command being run in this case the server itself.
	cancelFunc context.CancelFunc
	// exited is closed when the process started last ends; waitErr is then
	// how it ended. A server that exits while its cluster waits for it to
	// serve (its port was taken, say) is reported at once, not after
	// startTimeout.
	exited  chan struct{}
	waitErr error
}

func NewIntegrationTestServer(t *testing.T, configPath string, stdout, stderr io.Writer) (*server, error) {
	zkPath, err := zooKeeperBinPath()
	if err != nil {
		return nil, err
	}
	// password is 'test'
	superString := `SERVER_JVMFLAGS=-Dzookeeper.DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=`
	// enable TTL
	superString += ` -Dzookeeper.extendedTypesEnabled=true -Dzookeeper.emulate353TTLNodes=true`
	// A member that starts after the others would otherwise back off up to
	// 60 s between election rounds (zkserver sets the same).
	superString += ` -Dzookeeper.fastleader.maxNotificationInterval=2000`
	// Small, quick JVMs: several share the machine.
	superString += " " + strings.Join(zkserver.DefaultJVMArgs, " ")

	return &server{
		cmdString: filepath.Join(zkPath, "zkServer.sh"),
		cmdArgs:   []string{"start-foreground", configPath},
		cmdEnv:    []string{superString},
		stdout:    stdout, stderr: stderr,
	}, nil
}

func (srv *server) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	srv.cancelFunc = cancel

	srv.cmd = exec.CommandContext(ctx, srv.cmdString, srv.cmdArgs...)
	srv.cmd.Stdout = srv.stdout
	srv.cmd.Stderr = srv.stderr
	srv.cmd.Env = append(os.Environ(), srv.cmdEnv...)

	if err := srv.cmd.Start(); err != nil {
		srv.exited = nil
		return err
	}
	exited := make(chan struct{})
	srv.exited = exited
	go func() {
		srv.waitErr = srv.cmd.Wait()
		close(exited)
	}()
	return nil
}

// hasExited reports whether the process started last has ended, and how.
func (srv *server) hasExited() (bool, error) {
	if srv.exited == nil {
		return false, nil
	}
	select {
	case <-srv.exited:
		return true, srv.waitErr
	default:
		return false, nil
	}
}

func (srv *server) Stop() error {
	srv.cancelFunc()
	if srv.exited == nil {
		return nil
	}
	<-srv.exited
	return srv.waitErr
}

// debianZooKeeperBin holds the scripts of Debian's zookeeper package, whose
// jar is the one zkgate's zkserver package runs when ZOOKEEPER_HOME is unset.
const debianZooKeeperBin = "/usr/share/zookeeper/bin"

// zooKeeperBinPath is the directory of the zkServer.sh the integration tests
// start: $ZOOKEEPER_BIN_PATH, else that of the installation zkgate's zkserver
// package runs ($ZOOKEEPER_HOME/bin, else Debian's). A missing one is an error
// that says how to install it, so the tests fail rather than pass unrun.
func zooKeeperBinPath() (string, error) {
	zkPath, source := os.Getenv("ZOOKEEPER_BIN_PATH"), "$ZOOKEEPER_BIN_PATH"
	if zkPath == "" {
		if err := zkserver.Check(zkserver.Options{}); err != nil {
			return "", err
		}
		zkPath, source = debianZooKeeperBin, "Debian's zookeeper package"
		if home := os.Getenv("ZOOKEEPER_HOME"); home != "" {
			zkPath, source = filepath.Join(home, "bin"), "$ZOOKEEPER_HOME/bin"
		}
	}
	script := filepath.Join(zkPath, "zkServer.sh")
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("zk: no zkServer.sh for the integration tests in %s (%s): %v\n"+
			"    install ZooKeeper with:  sudo apt-get install -y zookeeper\n"+
			"    (or set ZOOKEEPER_BIN_PATH to the bin directory of an Apache ZooKeeper release)", zkPath, source, err)
	}
	return zkPath, nil
}

type ServerConfigServer struct {
	ID                 int
	Host               string
	PeerPort           int
	LeaderElectionPort int
}

type ServerConfig struct {
	TickTime                 int    // Number of milliseconds of each tick
	InitLimit                int    // Number of ticks that the initial synchronization phase can take
	SyncLimit                int    // Number of ticks that can pass between sending a request and getting an acknowledgement
	DataDir                  string // Direcrory where the snapshot is stored
	ClientPort               int    // Port at which clients will connect
	ClientPortAddress        string // Address the client port is bound to (all addresses if empty)
	AutoPurgeSnapRetainCount int    // Number of snapshots to retain in dataDir
	AutoPurgePurgeInterval   int    // Purge task internal in hours (0 to disable auto purge)
	Servers                  []ServerConfigServer
}

func (sc ServerConfig) Marshall(w io.Writer) error {
	// the admin server is not wanted in test cases as it slows the startup process and is
	// of little unit test value.
	fmt.Fprintln(w, "admin.enableServer=false")
	if sc.DataDir == "" {
		return ErrMissingServerConfigField("dataDir")
	}
	fmt.Fprintf(w, "dataDir=%s\n", sc.DataDir)
	if sc.TickTime <= 0 {
		sc.TickTime = DefaultServerTickTime
	}
	fmt.Fprintf(w, "tickTime=%d\n", sc.TickTime)
	if sc.InitLimit <= 0 {
		sc.InitLimit = DefaultServerInitLimit
	}
	fmt.Fprintf(w, "initLimit=%d\n", sc.InitLimit)
	if sc.SyncLimit <= 0 {
		sc.SyncLimit = DefaultServerSyncLimit
	}
	fmt.Fprintf(w, "syncLimit=%d\n", sc.SyncLimit)
	if sc.ClientPort <= 0 {
		sc.ClientPort = DefaultPort
	}
	fmt.Fprintf(w, "clientPort=%d\n", sc.ClientPort)
	if sc.ClientPortAddress != "" {
		fmt.Fprintf(w, "clientPortAddress=%s\n", sc.ClientPortAddress)
	}
	if sc.AutoPurgePurgeInterval > 0 {
		if sc.AutoPurgeSnapRetainCount <= 0 {
			sc.AutoPurgeSnapRetainCount = DefaultServerAutoPurgeSnapRetainCount
		}
		fmt.Fprintf(w, "autopurge.snapRetainCount=%d\n", sc.AutoPurgeSnapRetainCount)
		fmt.Fprintf(w, "autopurge.purgeInterval=%d\n", sc.AutoPurgePurgeInterval)
	}
	// enable reconfig.
	// TODO: allow setting this
	fmt.Fprintln(w, "reconfigEnabled=true")
	fmt.Fprintln(w, "4lw.commands.whitelist=*")
	// The data dirs are temporary: an fsync per transaction buys nothing.
	fmt.Fprintln(w, "forceSync=no")

	if len(sc.Servers) < 2 {
		// if we dont have more than 2 servers we just dont specify server list to start in standalone mode
		// see https://zookeeper.apache.org/doc/current/zookeeperStarted.html#sc_InstallingSingleMode for more details.
		return nil
	}
	// if we then have more than one server force it to be distributed
	fmt.Fprintln(w, "standaloneEnabled=false")

	for _, srv := range sc.Servers {
		if srv.PeerPort <= 0 {
			srv.PeerPort = DefaultPeerPort
		}
		if srv.LeaderElectionPort <= 0 {
			srv.LeaderElectionPort = DefaultLeaderElectionPort
		}
		fmt.Fprintf(w, "server.%d=%s:%d:%d\n", srv.ID, srv.Host, srv.PeerPort, srv.LeaderElectionPort)
	}
	return nil
}

// this is a helper to wait for the zk connection to at least get to the HasSession state
func waitForSession(ctx context.Context, eventChan <-chan Event) error {
	select {
	case event, ok := <-eventChan:
		// The eventChan is used solely to determine when the ZK conn has
		// stopped.
		if !ok {
			return fmt.Errorf("connection closed before state reached")
		}
		if event.State == StateHasSession {
			return nil
		}
	case <-ctx.Done():
		return ctx.Err()
	}

	return nil
}

func TestZooKeeperBinPathMissing(t *testing.T) {
	t.Setenv("ZOOKEEPER_BIN_PATH", t.TempDir())
	_, err := zooKeeperBinPath()
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y zookeeper") {
		t.Errorf("a bin path without zkServer.sh: %v, want an error naming the install command", err)
	}

	t.Setenv("ZOOKEEPER_BIN_PATH", "")
	t.Setenv("ZOOKEEPER_HOME", filepath.Join(t.TempDir(), "absent"))
	_, err = zooKeeperBinPath()
	if !errors.Is(err, zkserver.ErrNotInstalled) || !strings.Contains(err.Error(), "apt-get install -y zookeeper") {
		t.Errorf("a ZOOKEEPER_HOME that does not exist: %v, want zkserver.ErrNotInstalled naming the install command", err)
	}
}

func TestZooKeeperBinPathDefault(t *testing.T) {
	t.Setenv("ZOOKEEPER_BIN_PATH", "")
	t.Setenv("ZOOKEEPER_HOME", "")
	if p, err := zooKeeperBinPath(); err != nil || p != debianZooKeeperBin {
		t.Errorf("zooKeeperBinPath() = %q, %v; want %q (Debian's, installed here)", p, err, debianZooKeeperBin)
	}
}
