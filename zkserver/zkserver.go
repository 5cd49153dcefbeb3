// Package zkserver starts and stops real Apache ZooKeeper server processes:
// a standalone server (zkgate's embedded default, most tests, benchmarks) or
// an ensemble of QuorumPeerMain members on loopback (failover tests).
//
// Every server is a child JVM in its own process group that the kernel kills
// if this process dies, so nothing outlives the program that started it.
// Readiness is decided by asking the server itself (`srvr`), never by
// sleeping.
package zkserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkgate/zkgate/internal/proc"
)

// Options configures one server (or each member of an ensemble).
type Options struct {
	// TickTime is ZooKeeper's tickTime; default 200ms, so sessions can be
	// made to expire in about a second.
	TickTime time.Duration
	// DataDir is where data lives; empty means a fresh temp dir removed by
	// Stop. For an ensemble, member N uses DataDir/zkN.
	DataDir string
	// Host is the loopback address every port binds to; default "127.0.0.1".
	Host string
	// ClientPort is the client port; 0 picks a free one. Must be 0 for an
	// ensemble.
	ClientPort int
	// SecureClientPort has a standalone server (Start, with ClientPort 0)
	// also listen for TLS clients (secureClientPort) on a second free
	// port, picked with the first and picked again with it when a start
	// finds one taken; SecureAddr names it. The TLS settings themselves
	// (ssl.*, serverCnxnFactory) go in Config.
	SecureClientPort bool
	// ClientAuth has a standalone server admit one client alone: it serves
	// clients over TLS only (no plain port; Addr is the TLS port), and asks
	// each for a certificate (ssl.clientAuth=need) that only ClientTLS
	// holds. Start makes a CA, the server's certificate and that client's,
	// for this start only, and keeps the client's private key in memory.
	// The data dir and everything in it become this user's alone (0700 and
	// 0600, the JVM's files too), and only the srvr four-letter word is
	// answered (to the client). What the server holds, other local users
	// can then neither read, nor reach through ZooKeeper. The TLS port
	// needs netty-codec, which Debian's libnetty-java (a dependency of its
	// zookeeper package) has.
	ClientAuth bool
	// MinSessionTimeout and MaxSessionTimeout override ZooKeeper's clamp of
	// client session timeouts (default 2*TickTime .. 20*TickTime).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// ContainerCheckInterval is how often empty CONTAINER znodes are
	// collected (-Dznode.container.checkIntervalMs); default 100ms.
	ContainerCheckInterval time.Duration
	// ContainerMaxPerMinute bounds the empty CONTAINER znodes collected a
	// minute (-Dznode.container.maxPerMinute); 0 keeps ZooKeeper's 10,000,
	// which paces the collection at 6 ms a node: the thousands of empty
	// parents a test leaves take that long to go.
	ContainerMaxPerMinute int
	// Output receives the JVM's stdout and stderr; nil means the file
	// "zookeeper.out" in the data dir (appended to across restarts).
	Output io.Writer
	// StartTimeout bounds the wait for readiness; default 30s.
	StartTimeout time.Duration
	// JVMArgs are appended after DefaultJVMArgs (so they win: later -X/-XX
	// flags override earlier ones).
	JVMArgs []string
	// ZooKeeperHome is an Apache ZooKeeper release directory or jar; empty
	// means $ZOOKEEPER_HOME, else Debian's /usr/share/java/zookeeper.jar.
	ZooKeeperHome string
	// FastSync sets forceSync=no: transactions are not fsynced. It is always
	// on when DataDir is empty, since a temp dir has nothing worth an fsync.
	FastSync bool
	// Config adds or overrides zoo.cfg lines (key -> value). Overriding
	// clientPort, clientPortAddress or dataDir makes Addr and DataDir lie.
	Config map[string]string
}

// DefaultJVMArgs keep a server small and quick to start: several share a
// 2-core machine in tests. A 256 MiB heap suits tests; zkgate's embedded
// ZooKeeper is given the heap its caps call for (server/heap.go) through
// Options.JVMArgs. Measured on one (Java 17, ZooKeeper 3.8): ready in
// about 0.5 s standalone; C1-only or a disabled CDS archive gained nothing.
// The serial collector needs no GC threads and a small heap pauses briefly.
var DefaultJVMArgs = []string{
	"-Xms32m",
	"-Xmx256m",
	"-XX:+UseSerialGC",
	// Die loudly rather than limp on in a half-working state.
	"-XX:+ExitOnOutOfMemoryError",
	"-Djava.awt.headless=true",
	"-Djava.net.preferIPv4Stack=true",
}

const (
	defaultTickTime       = 200 * time.Millisecond
	defaultHost           = "127.0.0.1"
	defaultContainerCheck = 100 * time.Millisecond
	defaultStartTimeout   = 30 * time.Second

	// stopGrace is how long Stop waits after SIGTERM before SIGKILL; a JVM
	// normally exits in well under a second.
	stopGrace = 5 * time.Second
	// killWait bounds the wait after SIGKILL; only a process stuck in the
	// kernel takes longer.
	killWait = 10 * time.Second
	// startAttempts covers the race where a port we picked is taken before
	// the JVM binds it.
	startAttempts = 3
	pollInterval  = 50 * time.Millisecond

	outputFile = "zookeeper.out"
	configFile = "zoo.cfg"
)

// testHookPortPicked lets tests steal a picked port to exercise the retry.
var testHookPortPicked func(port int)

// ErrStopped is returned by Restart after Stop.
var ErrStopped = errors.New("zkserver: server was stopped")

func (o Options) withDefaults() Options {
	if o.TickTime <= 0 {
		o.TickTime = defaultTickTime
	}
	if o.Host == "" {
		o.Host = defaultHost
	}
	if o.ContainerCheckInterval <= 0 {
		o.ContainerCheckInterval = defaultContainerCheck
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = defaultStartTimeout
	}
	return o
}

// Server is one ZooKeeper server process (standalone or ensemble member). Its
// methods are safe for concurrent use.
type Server struct {
	opts       Options // with defaults
	inst       install
	dataDir    string
	tempDir    bool         // dataDir was made by us and is removed by Stop
	myid       int          // ensemble member id; 0 when standalone
	servers    string       // the ensemble's server.N lines; empty when standalone
	clientPort int          // fixed once ready
	securePort int          // with Options.SecureClientPort; fixed once ready
	creds      *credentials // with Options.ClientAuth

	// opMu serializes lifecycle transitions (spawn, Stop, Kill, Restart) but
	// is not held while waiting for readiness, so Stop and Kill can always
	// interrupt a start.
	opMu sync.Mutex

	mu      sync.Mutex // guards p and stopped
	p       *process
	stopped bool
}

// process is one run of the JVM.
type process struct {
	cmd  *exec.Cmd
	out  *outputTail
	done chan struct{} // closed once the process is reaped
	err  error         // cmd.Wait's result, valid after done
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the JVM to exit (SIGTERM; ZooKeeper shuts down cleanly), then
// SIGKILLs it after grace, and waits until it is reaped.
func (p *process) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	if grace > 0 {
		if err := terminateSignal(p.cmd.Process); err != nil {
			return p.kill(err)
		}
		if p.exitedWithin(grace) {
			return nil
		}
	}
	return p.kill(nil)
}

// exitedWithin waits up to d for the process to exit and tells whether it
// did.
func (p *process) exitedWithin(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

func (p *process) kill(prev error) error {
	if err := killSignal(p.cmd.Process); err != nil {
		return errors.Join(prev, fmt.Errorf("zkserver: kill pid %d: %w", p.cmd.Process.Pid, err))
	}
	if !p.exitedWithin(killWait) {
		return fmt.Errorf("zkserver: pid %d still running %v after SIGKILL", p.cmd.Process.Pid, killWait)
	}
	return nil
}

// Start runs a standalone ZooKeeper server and returns once it serves
// clients. On error nothing is left behind: no process, no temp dir.
func Start(ctx context.Context, opts Options) (*Server, error) {
	opts = opts.withDefaults()
	if opts.SecureClientPort && opts.ClientPort != 0 {
		return nil, errors.New("zkserver: Options.SecureClientPort picks both ports: ClientPort must be 0")
	}
	if opts.ClientAuth && opts.SecureClientPort {
		return nil, errors.New("zkserver: Options.ClientAuth serves TLS alone, on the client port: leave SecureClientPort off")
	}
	inst, err := locate(opts)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, inst: inst, clientPort: opts.ClientPort}
	if err := s.prepareDataDir(opts.DataDir); err != nil {
		return nil, err
	}
	if opts.ClientAuth {
		if err := s.prepareClientAuth(); err != nil {
			s.removeTempDir()
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		if opts.ClientPort == 0 {
			n := 1
			if opts.SecureClientPort {
				n = 2
			}
			ports, err := freePorts(opts.Host, n)
			if err != nil {
				s.removeTempDir()
				return nil, err
			}
			s.clientPort = ports[0]
			if opts.SecureClientPort {
				s.securePort = ports[1]
			}
			if testHookPortPicked != nil {
				testHookPortPicked(s.clientPort)
			}
		}
		err := s.writeConfig()
		var p *process
		if err == nil {
			p, err = s.spawn()
		}
		if err == nil {
			if err = s.waitReady(ctx, p); err != nil {
				err = errors.Join(err, p.kill(nil))
			}
		}
		if err == nil {
			return s, nil
		}
		if opts.ClientPort == 0 && errors.Is(err, errAddrInUse) && attempt < startAttempts && ctx.Err() == nil {
			continue // someone grabbed our port: pick another
		}
		s.markStopped()
		s.removeTempDir()
		return nil, err
	}
}

func (s *Server) prepareDataDir(dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "zkserver-*")
		if err != nil {
			return fmt.Errorf("zkserver: temp data dir: %w", err)
		}
		s.dataDir, s.tempDir = d, true
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("zkserver: data dir: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return fmt.Errorf("zkserver: data dir: %w", err)
	}
	s.dataDir = abs
	return nil
}

// prepareClientAuth makes the data dir private and the credentials of
// Options.ClientAuth for this start.
func (s *Server) prepareClientAuth() error {
	if err := privatize(s.dataDir); err != nil {
		return fmt.Errorf("zkserver: make the data dir private: %w", err)
	}
	creds, err := newCredentials(s.dataDir, s.opts.Host)
	if err != nil {
		return err
	}
	s.creds = creds
	return nil
}

// ClientTLS is the TLS configuration of the one client a server of
// Options.ClientAuth admits (nil without it). Each call returns a copy.
func (s *Server) ClientTLS() *tls.Config {
	if s.creds == nil {
		return nil
	}
	return s.creds.client.Clone()
}

// clientTLS is the TLS configuration of the server's own checks (nil: plain).
func (s *Server) clientTLS() *tls.Config {
	if s.creds == nil {
		return nil
	}
	return s.creds.client
}

func (s *Server) removeTempDir() error {
	if !s.tempDir {
		return nil
	}
	if err := os.RemoveAll(s.dataDir); err != nil {
		return fmt.Errorf("zkserver: remove temp data dir: %w", err)
	}
	return nil
}

func (s *Server) markStopped() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

// config renders zoo.cfg.
func (s *Server) config() string {
	o := s.opts
	kv := map[string]string{
		"tickTime":          ms(o.TickTime),
		"dataDir":           s.dataDir,
		"clientPort":        strconv.Itoa(s.clientPort),
		"clientPortAddress": o.Host, // loopback only, never all interfaces
		// The AdminServer would take 8080, zkgate's default listen port.
		"admin.enableServer":     "false",
		"4lw.commands.whitelist": "*",
		"maxClientCnxns":         "0",
		// Files are preallocated in 4 MiB steps instead of 64 MiB, and
		// snapshots are taken every 10k transactions: small disks, quick
		// restarts. Autopurge keeps a long-lived data dir from growing
		// without bound (run by QuorumPeerMain, standalone too).
		"preAllocSize":              "4096",
		"snapCount":                 "10000",
		"autopurge.snapRetainCount": "3",
		"autopurge.purgeInterval":   "1",
	}
	if s.securePort != 0 {
		kv["secureClientPort"] = strconv.Itoa(s.securePort)
		kv["secureClientPortAddress"] = o.Host
	}
	if s.creds != nil {
		delete(kv, "clientPort")
		delete(kv, "clientPortAddress")
		maps.Copy(kv, map[string]string{
			"secureClientPort":         strconv.Itoa(s.clientPort),
			"secureClientPortAddress":  o.Host,
			"serverCnxnFactory":        "org.apache.zookeeper.server.NettyServerCnxnFactory",
			"ssl.keyStore.location":    s.creds.keyStore,
			"ssl.keyStore.type":        "PEM",
			"ssl.trustStore.location":  s.creds.trustStore,
			"ssl.trustStore.type":      "PEM",
			"ssl.clientAuth":           "need",
			"ssl.hostnameVerification": "false",
			"client.portUnification":   "false",
			"4lw.commands.whitelist":   "srvr",
		})
	}
	if o.FastSync || s.tempDir {
		kv["forceSync"] = "no"
	}
	if o.MinSessionTimeout > 0 {
		kv["minSessionTimeout"] = ms(o.MinSessionTimeout)
	}
	if o.MaxSessionTimeout > 0 {
		kv["maxSessionTimeout"] = ms(o.MaxSessionTimeout)
	}
	if s.myid > 0 {
		kv["initLimit"] = "20"
		kv["syncLimit"] = "10"
		// A 1-member ensemble stays a quorum (reports "leader") instead of
		// silently falling back to standalone.
		kv["standaloneEnabled"] = "false"
	}
	maps.Copy(kv, o.Config)
	var b strings.Builder
	b.WriteString("# written by zkgate's zkserver package\n")
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		fmt.Fprintf(&b, "%s=%s\n", k, propEscaper.Replace(kv[k]))
	}
	b.WriteString(s.servers)
	return b.String()
}

// propEscaper escapes what java.util.Properties would otherwise eat in a
// value (a backslash in a path, a line break).
var propEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`)

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func (s *Server) writeConfig() error {
	if s.myid > 0 {
		if err := os.WriteFile(filepath.Join(s.dataDir, "myid"), []byte(strconv.Itoa(s.myid)+"\n"), s.fileMode()); err != nil {
			return fmt.Errorf("zkserver: write myid: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.dataDir, configFile), []byte(s.config()), s.fileMode()); err != nil {
		return fmt.Errorf("zkserver: write %s: %w", configFile, err)
	}
	return nil
}

// fileMode is the mode of the files the server's data dir gets from us.
func (s *Server) fileMode() os.FileMode {
	if s.creds != nil {
		return 0o600
	}
	return 0o644
}

func (s *Server) javaArgs() []string {
	o := s.opts
	args := append([]string(nil), DefaultJVMArgs...)
	args = append(args, o.JVMArgs...)
	if o.ContainerMaxPerMinute > 0 {
		args = append(args, "-Dznode.container.maxPerMinute="+strconv.Itoa(o.ContainerMaxPerMinute))
	}
	args = append(args,
		"-Dznode.container.checkIntervalMs="+ms(o.ContainerCheckInterval),
		// TTL znodes (zk.CreateTTL) need the extended types.
		"-Dzookeeper.extendedTypesEnabled=true",
		// Default 60s: after a quorum loss, a waiting member would back off
		// that long between election rounds.
		"-Dzookeeper.fastleader.maxNotificationInterval=2000",
		// For Debian's slf4j-simple binding (ignored by other backends).
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS",
		"-cp", s.inst.classpath,
		// QuorumPeerMain for standalone too: it runs ZooKeeperServerMain when
		// no server.N lines exist, plus the autopurge task that
		// ZooKeeperServerMain alone lacks.
		"org.apache.zookeeper.server.quorum.QuorumPeerMain",
		filepath.Join(s.dataDir, configFile),
	)
	return args
}

// spawn starts the JVM and its reaper. The caller holds opMu or owns s alone.
func (s *Server) spawn() (*process, error) {
	var w io.Writer = s.opts.Output
	var file *os.File
	if w == nil {
		f, err := os.OpenFile(filepath.Join(s.dataDir, outputFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, s.fileMode())
		if err != nil {
			return nil, fmt.Errorf("zkserver: output file: %w", err)
		}
		file, w = f, f
	}
	out := newOutputTail(w)
	cmd := exec.Command(s.inst.java, s.javaArgs()...)
	if s.creds != nil {
		// The files the JVM makes (transaction logs, snapshots) are this
		// user's alone: Go sets no umask of a child, so a shell does,
		// then becomes the JVM (exec: the same process).
		cmd = exec.Command("/bin/sh", append([]string{"-c", `umask 077 && exec "$0" "$@"`, s.inst.java}, s.javaArgs()...)...)
	}
	cmd.Dir = s.dataDir
	cmd.Stdout, cmd.Stderr = out, out // same writer: one copying goroutine
	cmd.WaitDelay = time.Second       // never hang in Wait on a pipe
	// Its own process group: signals reach the JVM (and anything it spawns)
	// but not us, and a terminal's Ctrl-C does not race our Stop.
	if err := proc.Start(cmd, true); err != nil {
		if file != nil {
			file.Close()
		}
		return nil, fmt.Errorf("zkserver: start java: %w", err)
	}
	p := &process{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.close()
		if file != nil {
			file.Close()
		}
		close(p.done)
	}()
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
	return p, nil
}

// errAddrInUse marks a start that failed because a port was taken.
var errAddrInUse = errors.New("address already in use")

// waitReady polls `srvr` until the server serves in the expected mode, p
// exits, or the start timeout or ctx ends.
func (s *Server) waitReady(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	addr := s.Addr()
	t := time.NewTimer(0)
	defer t.Stop()
	var lastErr error
	for {
		select {
		case <-p.done:
			return s.startError(p, fmt.Errorf("exited before ready (%v)", p.err))
		case <-ctx.Done():
			if lastErr == nil {
				lastErr = ctx.Err()
			}
			return s.startError(p, fmt.Errorf("not ready: %w (last check: %v)", ctx.Err(), lastErr))
		case <-t.C:
		}
		if p.out.sawBindError() {
			return s.startError(p, errAddrInUse)
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		mode, err := modeOf(pctx, addr, s.clientTLS())
		pcancel()
		if err == nil && s.readyMode(mode) {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("mode %s", mode)
		}
		lastErr = err
		t.Reset(pollInterval)
	}
}

func (s *Server) readyMode(mode string) bool {
	if s.myid == 0 {
		return mode == "standalone"
	}
	return mode == "leader" || mode == "follower"
}

func (s *Server) startError(p *process, cause error) error {
	what := "ZooKeeper"
	if s.myid > 0 {
		what = fmt.Sprintf("ZooKeeper ensemble member %d", s.myid)
	}
	err := fmt.Errorf("zkserver: %s on %s (pid %d, data %s): %w", what, s.Addr(), p.cmd.Process.Pid, s.dataDir, cause)
	if p.out.sawBindError() && !errors.Is(cause, errAddrInUse) {
		err = fmt.Errorf("%w [%w]", err, errAddrInUse)
	}
	if tail := p.out.lastLines(tailLines); tail != "" {
		err = fmt.Errorf("%w\n--- last output lines ---\n%s", err, tail)
	}
	return err
}

// freePorts returns n distinct ports that were free on host a moment ago.
// All listeners stay open until every port is chosen so none repeats; the
// race with other processes afterwards is handled by retrying Start.
func freePorts(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("zkserver: pick a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Addr is the client address, "host:port".
func (s *Server) Addr() string {
	return net.JoinHostPort(s.opts.Host, strconv.Itoa(s.clientPort))
}

// SecureAddr is "host:port" of the TLS client port (Options.SecureClientPort);
// empty without one.
func (s *Server) SecureAddr() string {
	if s.securePort == 0 {
		return ""
	}
	return net.JoinHostPort(s.opts.Host, strconv.Itoa(s.securePort))
}

// DataDir is the server's data directory (holding zoo.cfg and, unless Output
// was set, zookeeper.out).
func (s *Server) DataDir() string { return s.dataDir }

func (s *Server) current() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

// Running reports whether the JVM is alive (not necessarily serving).
func (s *Server) Running() bool {
	p := s.current()
	return p != nil && !p.exited()
}

// PID is the JVM's process id, 0 when it is not running.
func (s *Server) PID() int {
	if p := s.current(); p != nil && !p.exited() {
		return p.cmd.Process.Pid
	}
	return 0
}

// Mode asks the server with `srvr`: "standalone", "leader" or "follower".
// It fails when the server is down or not serving (ErrNotServing).
func (s *Server) Mode(ctx context.Context) (string, error) {
	if !s.Running() {
		return "", fmt.Errorf("zkserver: %s is not running", s.Addr())
	}
	return modeOf(ctx, s.Addr(), s.clientTLS())
}

// Stop ends the server: SIGTERM, SIGKILL after a few seconds, wait for exit,
// then remove the data dir if Start created it. Repeated calls return nil.
func (s *Server) Stop() error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	p := s.p
	s.mu.Unlock()
	var err error
	if p != nil {
		err = p.stop(stopGrace)
	}
	return errors.Join(err, s.removeTempDir())
}

// Exited returns a channel closed when the server process running now
// exits, for any reason (a crash, Kill, Stop); nil when none runs.
func (s *Server) Exited() <-chan struct{} {
	if p := s.current(); p != nil {
		return p.done
	}
	return nil
}

// Kill SIGKILLs the server now and waits for it to exit, keeping its data
// (simulating a crash). Restart brings it back.
func (s *Server) Kill() error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if p := s.current(); p != nil {
		return p.stop(0)
	}
	return nil
}

// Restart starts the server again on the same ports and data dir (stopping
// it first if it runs) and waits until it serves again; an ensemble member
// must be leader or follower, so it only succeeds while a quorum can form.
// If it fails, the process it started is killed.
func (s *Server) Restart(ctx context.Context) error {
	s.opMu.Lock()
	s.mu.Lock()
	stopped, old := s.stopped, s.p
	s.mu.Unlock()
	if stopped {
		s.opMu.Unlock()
		return ErrStopped
	}
	if old != nil {
		if err := old.stop(stopGrace); err != nil {
			s.opMu.Unlock()
			return err
		}
	}
	p, err := s.spawn()
	s.opMu.Unlock()
	if err != nil {
		return err
	}
	if err := s.waitReady(ctx, p); err != nil {
		return errors.Join(err, p.kill(nil))
	}
	return nil
}
