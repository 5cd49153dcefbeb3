package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestGroupCommands: zkgate group join holds a membership while CMD runs
// (CMD sees its group, member and lease), group list shows it with its
// holder and value, and the member leaves (and its lease ends) with CMD.
func TestGroupCommands(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	stdin, feed := io.Pipe()
	defer feed.Close()
	z := startZkgate(t, g.URL, stdin, "group", "join", "--holder", "web-1", "--member", "w1", "--value", "10.0.0.7:8080", "web", "--",
		"sh", "-c", `echo "$ZKGATE_GROUP $ZKGATE_MEMBER $ZKGATE_LEASE"; read line`)
	gwtest.Eventually(t, 30*time.Second, func() error {
		if !strings.HasPrefix(z.stdout.String(), "web w1 ") {
			return fmt.Errorf("no environment printed yet: %q %q", z.stdout, z.stderr)
		}
		return nil
	})
	code, out, stderr := runZkgate(t, g.URL, nil, "group", "list", "web")
	if code != 0 || !strings.Contains(out, "w1") || !strings.Contains(out, "web-1") || !strings.Contains(out, "10.0.0.7:8080") {
		t.Fatalf("group list web: %d %q %s", code, out, stderr)
	}
	code, out, _ = runZkgate(t, g.URL, nil, "group", "list", "--json", "web")
	var st client.GroupState
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || len(st.Members) != 1 || st.Members[0].Lease == "" {
		t.Fatalf("group list --json web: %d %q %v", code, out, err)
	}
	if code, out, _ = runZkgate(t, g.URL, nil, "group", "list"); code != 0 || out != "web\t1\n" {
		t.Fatalf("group list: %d %q", code, out)
	}
	io.WriteString(feed, "done\n")
	feed.Close()
	if code := z.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d: %s", code, z.stderr)
	}
	if code, out, _ = runZkgate(t, g.URL, nil, "group", "list", "web"); code != 0 || out != "" {
		t.Fatalf("the group after CMD: %d %q", code, out)
	}
	noLeases(t, g.URL)
	if code, _, _ := runZkgate(t, g.URL, nil, "group", "join", "--member", "a/b", "web", "--", "true"); code != exitUsage {
		t.Fatalf("a bad member id: %d", code)
	}
}
