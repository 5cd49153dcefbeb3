package zkserver

import (
	"crypto/tls"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// TestClientAuth: a server of Options.ClientAuth serves its one client, over
// TLS with the certificate ClientTLS holds, and nobody else: a plain
// connection gets no session and no four-letter word, a TLS one without the
// certificate (or with another start's) is refused in the handshake, and
// the words it answers are srvr alone. Its data dir and files, the JVM's
// transaction log included, are this user's alone; after a Restart the
// client still connects.
func TestClientAuth(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dir, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old", "left"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startStandalone(t, Options{ClientAuth: true, DataDir: dir})
	other := startStandalone(t, Options{ClientAuth: true})
	cfg := s.ClientTLS()
	if cfg == nil || len(cfg.Certificates) != 1 {
		t.Fatalf("ClientTLS() = %+v; want a client certificate", cfg)
	}
	if mode, err := s.Mode(testContext(t, 5*time.Second)); err != nil || mode != "standalone" {
		t.Fatalf("Mode() = %q, %v", mode, err)
	}
	dialTLS := func(c *tls.Config) func(string, string, time.Duration) (net.Conn, error) {
		return func(network, addr string, timeout time.Duration) (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, c)
		}
	}
	conn, _, err := zk.Connect([]string{s.Addr()}, 4*time.Second, zk.WithDialer(dialTLS(cfg)), zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	createEventually(t, conn, "/admitted", 15*time.Second)

	// Nobody else: plain, TLS without a certificate, another start's. The
	// server answers srvr to its client: to these the connection ends
	// before any word is answered, or it is held until the handshake
	// times out (a plain one).
	for name, c := range map[string]*tls.Config{
		"plain":              nil,
		"no certificate":     {RootCAs: cfg.RootCAs, ServerName: cfg.ServerName},
		"another start's":    other.ClientTLS(),
		"no server checking": {InsecureSkipVerify: true},
	} {
		if reply, err := FourLetterWordTLS(testContext(t, 3*time.Second), s.Addr(), "srvr", c); err == nil || strings.Contains(reply, "Mode") {
			t.Errorf("%s: srvr answered %q, %v", name, reply, err)
		}
	}
	ctx := testContext(t, 10*time.Second)
	if reply, err := FourLetterWordTLS(ctx, s.Addr(), "srvr", cfg); err != nil || !strings.Contains(reply, "Mode: standalone") {
		t.Errorf("srvr to the client: %q, %v", reply, err)
	}
	if reply, err := FourLetterWordTLS(ctx, s.Addr(), "dump", cfg); err == nil && strings.Contains(reply, "ession") {
		t.Errorf("dump answered, even to the client: %q", reply)
	}

	// Private files, those made before and the JVM's own.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %04o, want none for group and others", p, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if logs, _ := filepath.Glob(filepath.Join(dir, "version-2", "log.*")); len(logs) == 0 {
		t.Errorf("no transaction log in %s to check", dir)
	}

	if err := s.Restart(testContext(t, 60*time.Second)); err != nil {
		t.Fatal(err)
	}
	createEventually(t, conn, "/after-restart", 20*time.Second)
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
