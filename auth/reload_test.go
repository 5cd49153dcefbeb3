package auth_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestTokensReloadOnHangup: SIGHUP loads a changed tokens file without
// touching leases or waits; a broken file is refused, logged, and the
// tokens in force stay.
func TestTokensReloadOnHangup(t *testing.T) {
	t.Parallel()
	file, secrets := gwtest.NewTokensFile(t)
	g := gwtest.StartSecured(t, gwtest.GatewayOptions{}, file, secrets)

	holder := g.NewLeaseAs(t, "writer")
	gwtest.MustStatus(t, g.As(t, "writer", "POST", "/v1/locks/r1/acquire", map[string]any{"lease": holder}), 200, "hold")
	waiter := g.NewLeaseAs(t, "other")
	waited := make(chan gwtest.Response, 1)
	go func() {
		r, err := gwtest.SendAs(context.Background(), g.URL, secrets["other"], "POST", "/v1/locks/r1/acquire?wait=1m", map[string]any{"lease": waiter})
		if err != nil {
			r = gwtest.Response{Status: 599, Body: []byte(err.Error())}
		}
		waited <- r
	}()
	gwtest.Eventually(t, 10*time.Second, func() error {
		st := g.As(t, "reader", "GET", "/v1/locks/r1", nil).JSON(t)
		if w, _ := st["waiters"].([]any); len(w) != 1 {
			return fmt.Errorf("waiters %v", st["waiters"])
		}
		return nil
	})

	added, err := auth.AddToken(file, "late", []string{"locks:*:read"})
	if err != nil {
		t.Fatal(err)
	}
	gwtest.WantProblem(t, g.As(t, added, "GET", "/v1/locks/r1", nil), 401, "unauthenticated", "a token added but not loaded")
	if err := g.Send(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	gwtest.Eventually(t, 10*time.Second, func() error {
		if r := g.As(t, added, "GET", "/v1/locks/r1", nil); r.Status != 200 {
			return fmt.Errorf("the new token after SIGHUP: %d", r.Status)
		}
		return nil
	})

	// A broken file: refused, logged, the tokens in force stay.
	good, _ := os.ReadFile(file)
	if err := os.WriteFile(file, append(good, []byte("broken sha256:00 bogus:*:read\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.Send(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	gwtest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(g.Logs(), "tokens file not reloaded") {
			return fmt.Errorf("no log line about the refused file")
		}
		return nil
	})
	gwtest.MustStatus(t, g.As(t, added, "GET", "/v1/locks/r1", nil), 200, "the tokens in force after a refused reload")

	// The lease and the wait went on through both reloads.
	gwtest.MustStatus(t, g.As(t, "writer", "POST", "/v1/leases/"+holder+"/keepalive", nil), 200, "keepalive after the reloads")
	gwtest.MustStatus(t, g.As(t, "writer", "POST", "/v1/locks/r1/release", map[string]any{"lease": holder}), 204, "release")
	select {
	case r := <-waited:
		gwtest.MustStatus(t, r, 200, "the waiter, granted after the reloads")
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter was not granted")
	}
}
