package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestExampleLockScript runs examples/lock.sh, as its header says, against
// a real gateway and the built zkgate: curl and zkgate lock both write
// through the fencing check, a late write is refused, the queue is drained.
func TestExampleLockScript(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("examples/lock.sh needs curl: apt-get install -y curl (or scripts/deps.sh test)")
	}
	g := cliGateway(t)
	script, err := filepath.Abs(filepath.Join("..", "..", "examples", "lock.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", script)
	cmd.Env = append(cmd.Environ(), "ZKGATE_URL="+g.URL, "ZKGATE="+gwtest.Binary(t))
	cmd.WaitDelay = 10 * time.Second
	done := make(chan struct{})
	var out []byte
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("examples/lock.sh still runs after 2 minutes:\n%s", out)
	}
	t.Logf("examples/lock.sh:\n%s", out)
	if err != nil {
		t.Fatalf("examples/lock.sh: %v", err)
	}
	text := string(out)
	m := regexp.MustCompile(`written with curl \(token (\d+)\)\nwritten under zkgate lock \(token (\d+)\)\n`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("the ledger should hold the curl write, then the zkgate lock write")
	}
	first, _ := strconv.ParseInt(m[1], 10, 64)
	second, _ := strconv.ParseInt(m[2], 10, 64)
	if second <= first {
		t.Fatalf("tokens %d then %d: they must grow", first, second)
	}
	for _, want := range []string{
		"storage: refused token " + m[1] + ", stale (409)",
		"curl handled: job a", "zkgate handled: job b", "zkgate handled: job c", "== done",
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("the output lacks %q", want)
		}
	}
	if strings.Contains(text, "a late write") {
		t.Fatal("the late write reached the ledger")
	}
	noLeases(t, g.URL)
}
