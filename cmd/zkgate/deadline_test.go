package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// lastBeat reads the newest heartbeat (nanoseconds of the wall clock) that
// CMD appended to path, one a line.
func lastBeat(t *testing.T, path string) (time.Time, bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	// The last line may be half written: take the newest whole one.
	for i := len(lines) - 1; i >= 0; i-- {
		if n, err := strconv.ParseInt(lines[i], 10, 64); err == nil && len(lines[i]) >= 19 {
			return time.Unix(0, n), true
		}
	}
	return time.Time{}, false
}

// TestLockStopsByTheDeadline: `zkgate lock` holds a lock through gateway A
// while CMD works, appending a heartbeat every few milliseconds and
// ignoring SIGTERM, so that only SIGKILL stops it. Then A goes away,
// frozen (SIGSTOP, past its session timeout) or drained (SIGTERM,
// --drain-timeout 3s), and a second holder asks for the lock through
// gateway B. CMD's last heartbeat must come before B's grant (acquired_at;
// one machine, one clock): zkgate kills CMD by the deadline A last
// confirmed, which ZooKeeper and the drain keep, whatever the lease's TTL
// of 15s says. Before, CMD was stopped only once the TTL had passed
// without a keepalive, and worked on for seconds beside the second holder.
// The long-grace cases have a grace that only SIGTERM sent that long before
// the deadline keeps within it: SIGTERM at the deadline would leave CMD a
// second past it. `zkgate elect` is held to the same, against the second
// candidate's election (its since).
func TestLockStopsByTheDeadline(t *testing.T) {
	// Serial: sets the environment (t.Setenv).
	pause := func(t *testing.T, a *gwtest.Proc) { a.Pause(t) }
	for _, c := range []struct {
		name    string
		command string        // lock or elect
		session time.Duration // A's session timeout
		grace   string
		gone    func(t *testing.T, a *gwtest.Proc)
	}{
		{"frozen", "lock", 2 * time.Second, "200ms", pause},
		{"drained", "lock", 2 * time.Second, "200ms", func(_ *testing.T, a *gwtest.Proc) { a.Terminate() }},
		{"frozen-long-grace", "lock", 4 * time.Second, "1s", pause},
		{"elect-frozen-long-grace", "elect", 4 * time.Second, "1s", pause},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := gwtest.StartProcess(t, gwtest.GatewayOptions{SessionTimeout: c.session, DrainTimeout: 3 * time.Second})
			defer a.Resume()
			b := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: a.Root})
			beats := filepath.Join(t.TempDir(), "beats")
			t.Setenv("BEATS", beats)
			z := startZkgate(t, a.URL, nil, c.command, "--ttl", "15s", "--kill-grace", c.grace, "held", "--",
				"sh", "-c", `trap '' TERM; while :; do date +%s%N >> "$BEATS"; sleep 0.005; done`)
			gwtest.Eventually(t, 30*time.Second, func() error {
				if _, ok := lastBeat(t, beats); !ok {
					return fmt.Errorf("CMD does not beat yet: %q", z.stderr)
				}
				return nil
			})
			c.gone(t, a)
			select {
			case <-z.done:
				t.Fatalf("zkgate ended before A went away: %s", z.stderr)
			default:
			}
			path := "/v1/locks/held/acquire?wait=50s"
			if c.command == "elect" {
				path = "/v1/elections/held/campaign?wait=50s"
			}
			second := gwtest.Do(t, "POST", b.URL+path, map[string]any{"ttl": "30s", "holder": "second"})
			if second.Status != 200 {
				t.Fatalf("the second holder's acquire through B: %d %s", second.Status, second.Body)
			}
			var g struct {
				AcquiredAt time.Time `json:"acquired_at"`
				Since      time.Time `json:"since"` // an election's
			}
			if err := json.Unmarshal(second.Body, &g); err != nil || g.AcquiredAt.IsZero() && g.Since.IsZero() {
				t.Fatalf("grant %s: %v", second.Body, err)
			}
			if c.command == "elect" {
				g.AcquiredAt = g.Since
			}
			a.Resume()
			if code := z.wait(t, time.Minute); code != exitLost {
				t.Fatalf("zkgate exit %d, want %d: %s", code, exitLost, z.stderr)
			}
			last, ok := lastBeat(t, beats)
			if !ok {
				t.Fatal("no heartbeat")
			}
			if overlap := last.Sub(g.AcquiredAt); overlap >= 0 {
				t.Fatalf("CMD worked %s after the second holder's grant (stderr %q)", overlap, z.stderr)
			}
			t.Logf("CMD's last heartbeat %s before the second holder's grant; zkgate: %s",
				g.AcquiredAt.Sub(last).Round(time.Millisecond), strings.TrimSpace(z.stderr.String()))
		})
	}
}

// TestLockDelayAndGraceFlags: --lock-delay reaches the lease of lock and
// elect; a --kill-grace that does not fit in the gateway's first promise
// (SIGTERM would come before a keepalive could extend it) is a usage error
// before CMD runs, and the lease is revoked.
func TestLockDelayAndGraceFlags(t *testing.T) {
	// Serial: sets the environment (t.Setenv).
	g := cliGateway(t)
	dir := t.TempDir()
	t.Setenv("DIR", dir)
	for _, cmd := range []string{"lock", "elect"} {
		z := startZkgate(t, g.URL, nil, cmd, "--lock-delay", "3s", "delayed-"+cmd, "--",
			"sh", "-c", `echo "$ZKGATE_LEASE"; while [ ! -e "$DIR/go" ]; do sleep 0.02; done`)
		var id string
		gwtest.Eventually(t, 30*time.Second, func() error {
			id = strings.TrimSpace(z.stdout.String())
			if id == "" {
				return fmt.Errorf("CMD has not started: %q", z.stderr)
			}
			return nil
		})
		r := gwtest.Do(t, "GET", g.URL+"/v1/leases/"+id, nil)
		if lease := r.JSON(t); r.Status != 200 || lease["lock_delay"] != "3s" || lease["ttl"] != "10s" {
			t.Fatalf("%s: the lease %d %s: want lock_delay 3s and the default ttl 10s", cmd, r.Status, r.Body)
		}
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if code := z.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("%s: exit %d %s", cmd, code, z.stderr)
		}
		os.Remove(filepath.Join(dir, "go"))

		ran := filepath.Join(dir, "ran-"+cmd)
		code, _, stderr := runZkgate(t, g.URL, nil, cmd, "--kill-grace", "9s", "graceless-"+cmd, "--", "touch", ran)
		if code != exitUsage || !strings.Contains(stderr, "--kill-grace 9s does not fit") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Fatalf("%s --kill-grace 9s: exit %d, stderr %q", cmd, code, stderr)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("%s: CMD ran with a grace that does not fit", cmd)
		}
		if code, _, stderr := runZkgate(t, g.URL, nil, cmd, "--lock-delay", "-1s", "n", "--", "true"); code != exitUsage {
			t.Fatalf("%s --lock-delay -1s: exit %d %q", cmd, code, stderr)
		}
	}
	noLeases(t, g.URL)
}

// TestDefaultGraceFitsAShortSessionTimeout: against a gateway whose
// deadlines are shorter than the default --kill-grace allows (its
// --session-timeout is 2s), lock and elect with their defaults run CMD and
// exit 0; a --kill-grace given that does not fit is still refused. Before,
// the defaults exited 2 ("--kill-grace 2s does not fit in the 1.8s the
// gateway promised"), though the user asked for no grace.
func TestDefaultGraceFitsAShortSessionTimeout(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{SessionTimeout: 2 * time.Second})
	dir := t.TempDir()
	for _, cmd := range []string{"lock", "elect"} {
		ran := filepath.Join(dir, "ran-"+cmd)
		if code, _, stderr := runZkgate(t, g.URL, nil, cmd, "short-"+cmd, "--", "touch", ran); code != 0 {
			t.Fatalf("%s with the defaults: exit %d, stderr %q", cmd, code, stderr)
		}
		if _, err := os.Stat(ran); err != nil {
			t.Fatalf("%s: CMD did not run: %v", cmd, err)
		}
		code, _, stderr := runZkgate(t, g.URL, nil, cmd, "--kill-grace", "2s", "short-"+cmd, "--", "true")
		if code != exitUsage || !strings.Contains(stderr, "--kill-grace 2s does not fit") {
			t.Fatalf("%s --kill-grace 2s: exit %d, stderr %q; want it refused", cmd, code, stderr)
		}
	}
	noLeases(t, g.URL)
}
