package client_test

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestExamples runs the package's examples against a real gateway and
// checks what they print.
func TestExamples(t *testing.T) {
	// Serial: sets the environment (t.Setenv) and os.Stdout.
	g, _ := gateway(t)
	t.Setenv("ZKGATE_URL", g.URL)
	cases := []struct {
		name string
		run  func()
		want string
	}{
		{"Example", Example, "holding invoices in mode exclusive\nthe fencing token is current\nreleased\n"},
		{"ExampleLease_Claim", ExampleLease_Claim, "sending \"hello\"\nno more mail\n"},
		{"ExampleClient_WatchElection", ExampleClient_WatchElection, "no leader\nleader: 10.0.0.5:8080\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := captureStdout(t, c.run); got != c.want {
				t.Fatalf("printed %q, want %q", got, c.want)
			}
		})
	}
}

// captureStdout runs fn with os.Stdout sent to a pipe and returns what it
// wrote.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		out <- string(b)
	}()
	func() {
		defer func() { os.Stdout = saved }()
		fn()
	}()
	w.Close()
	s := <-out
	r.Close()
	return s
}

// TestOnlyStandardLibrary: the package can be imported by any Go module
// without pulling in the gateway or a ZooKeeper client.
func TestOnlyStandardLibrary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}",
		"github.com/zkgate/zkgate/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if deps := strings.Fields(string(out)); len(deps) != 1 || deps[0] != "github.com/zkgate/zkgate/client" {
		t.Fatalf("client imports more than the standard library: %v", deps)
	}
}
