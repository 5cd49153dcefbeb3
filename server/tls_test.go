package server_test

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/server"
)

// TestTLSBadFilesAtStart: a missing, mismatched, expired or not-yet-valid
// certificate is one clear line at start (a usage error: exit 2).
func TestTLSBadFilesAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := gwtest.NewCA(t, dir, "ca")
	good, goodKey := ca.IssuePair(t, 1, dir, "good", time.Now().Add(-time.Minute))
	expired, expiredKey := ca.IssuePair(t, 2, dir, "expired", time.Now().Add(-48*time.Hour))
	future, futureKey := ca.IssuePair(t, 3, dir, "future", time.Now().Add(48*time.Hour))
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", filepath.Join(dir, "missing.pem"), "--tls-key", goodKey}, "no such file"},
		{[]string{"--tls-cert", good, "--tls-key", expiredKey}, "private key does not match"},
		{[]string{"--tls-cert", expired, "--tls-key", expiredKey}, "expired on"},
		{[]string{"--tls-cert", future, "--tls-key", futureKey}, "not valid before"},
		{[]string{"--tls-cert", good}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-client-ca", ca.File}, "need --tls-cert"},
		{[]string{"--tls-cert", good, "--tls-key", goodKey, "--tls-client-ca", goodKey}, "holds no PEM certificate"},
		{[]string{"--tls-cert", good, "--tls-key", goodKey, "--tls-client-ca", ca.File, "--tls-peer-ca", ca.File}, "is also in --tls-client-ca"},
		{[]string{"--tls-cert", good, "--tls-key", goodKey, "--tls-peer-ca", goodKey}, "--tls-peer-ca: "},
		{[]string{"--peer-secret-file", filepath.Join(dir, "missing")}, "--peer-secret-file: "},
		{[]string{"--auth-file", filepath.Join(dir, "missing")}, "--auth-file: "},
	}
	for _, c := range cases {
		_, err := server.ParseConfig(append([]string{"--zk", "127.0.0.1:2181"}, c.args...), func(string) string { return "" }, io.Discard)
		var usage *server.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want a one-line usage error with %q", c.args, err, c.want)
		}
	}
}
