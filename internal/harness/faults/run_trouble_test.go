//go:build linux

package faults

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A member whose replica diverged is named in the report; the errors of
// members that merely lost their leader are not.
func TestZooKeeperTrouble(t *testing.T) {
	dir := t.TempDir()
	logs := map[string]string{
		"zk1": "2026-11-25T16:50:12.171 [SyncThread:1] ERROR org.apache.zookeeper.server.ZooKeeperCriticalThread - Severe unrecoverable error, from thread : SyncThread:1\n" +
			"2026-11-25T16:50:15.117 [main] ERROR org.apache.zookeeper.server.DataTree - First digest mismatch on txn: 216173257570320384,1537,21474837615,1795625409524,15\n",
		"zk2": "2026-11-25T16:50:21.157 [FollowerRequestProcessor:2] ERROR org.apache.zookeeper.server.ZooKeeperCriticalThread - Severe unrecoverable error, from thread : FollowerRequestProcessor:2\n",
	}
	for member, text := range logs {
		if err := os.MkdirAll(filepath.Join(dir, member), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, member, "zookeeper.out"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := zooKeeperTrouble(dir)
	if len(got) != 1 || !strings.HasPrefix(got[0], "zk1: ") || !strings.Contains(got[0], "First digest mismatch") {
		t.Fatalf("trouble %q, want zk1's digest mismatch alone", got)
	}
}
