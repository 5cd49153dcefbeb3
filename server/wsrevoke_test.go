package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/zkgate/zkgate/internal/harness/dashtest"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestWSClosedWhenItsTokenGoes: a reload of the tokens file (SIGHUP) closes,
// with 1008 (policy violation), the dashboard streams of a token it
// removed (shown through a bearer token) or changed (through the sign-in
// cookie); a token it left as it was keeps streaming, and the removed one
// cannot connect again. They streamed on for minutes.
func TestWSClosedWhenItsTokenGoes(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	g := startSecured(t, gwtest.GatewayOptions{}, file, secrets)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bearer := func(tok string) *websocket.DialOptions {
		return &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + secrets[tok]}}}
	}
	removed := dashtest.Dial(t, ctx, g.URL, "overview", bearer("reader"))
	changed := dashtest.Dial(t, ctx, g.URL, "locks", &websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {"zkgate_token=" + secrets["admin"]}}})
	kept := dashtest.Dial(t, ctx, g.URL, "overview", bearer("writer"))
	for _, c := range []*websocket.Conn{removed, changed, kept} {
		if m, err := dashtest.Read(ctx, c); err != nil || !m.Snapshot {
			t.Fatalf("first message: %v %+v", err, m)
		}
	}
	// Read on in the background: a close arrives as a read's error.
	ended := func(c *websocket.Conn) chan error {
		ch := make(chan error, 1)
		go func() {
			for {
				if _, err := dashtest.Read(ctx, c); err != nil {
					ch <- err
					return
				}
			}
		}()
		return ch
	}
	removedEnd, changedEnd, keptEnd := ended(removed), ended(changed), ended(kept)

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "reader "):
			continue
		case strings.HasPrefix(line, "admin "):
			line = strings.Replace(line, "*:*:admin", "*:*:write", 1)
		}
		lines = append(lines, line)
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.Send(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for what, ch := range map[string]chan error{"the removed token's stream": removedEnd, "the changed token's stream": changedEnd} {
		select {
		case err := <-ch:
			if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
				t.Errorf("%s ended with %v, want a close with 1008 (policy violation)", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s still streams 10s after the reload", what)
		}
	}
	select {
	case err := <-keptEnd:
		t.Errorf("the stream of a token the reload left as it was ended: %v", err)
	default:
	}
	gwtest.Eventually(t, 10*time.Second, func() error {
		if n := metricValueAs(t, g.URL, secrets["writer"], "zkgate_dashboard_clients"); n != 1 {
			return fmt.Errorf("%v dashboards connected, want the one whose token stayed", n)
		}
		return nil
	})
	_, resp, err := websocket.Dial(ctx, dashtest.URL(g.URL, "overview"), bearer("reader"))
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the removed token connects again: %v %v", err, resp)
	}
}
