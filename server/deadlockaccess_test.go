package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestDeadlockShowsWhatTheWaiterMayRead: the 409 deadlock of a wait shows
// the cycle as /v1/contention does to its token: a step on a name the token
// may not read is its kind alone ("hidden"), with no lease, holder or node,
// and the detail names it "a party you may not read". Three tokens each
// reach two of three locks; the third wait closes the cycle and is ended,
// and its token may not read the lock that the first waits for. Before,
// the answer named every party, lease ids and holder labels included.
func TestDeadlockShowsWhatTheWaiterMayRead(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	secrets := map[string]string{}
	for name, perms := range map[string][]string{
		"alice": {"locks:dx:write", "locks:dy:write", "leases:*:write"},
		"bob":   {"locks:dy:write", "locks:dz:write", "leases:*:write"},
		"carol": {"locks:dz:write", "locks:dx:write", "leases:*:write"},
	} {
		s, err := auth.AddToken(file, name, perms)
		if err != nil {
			t.Fatal(err)
		}
		secrets[name] = s
	}
	g := gwtest.StartProcess(t, gwtest.GatewayOptions{Extra: []string{"--auth-file", file, "--deadlock-check", "200ms"}})
	leases := map[string]string{}
	for name, held := range map[string]string{"alice": "dx", "bob": "dy", "carol": "dz"} {
		r := gwtest.DoAs(t, g.URL, secrets[name], "POST", "/v1/leases", map[string]any{"ttl": "1m", "holder": name + "'s job"})
		mustStatus(t, r, 201, name+"'s lease")
		var l struct{ ID string }
		if err := json.Unmarshal(r.Body, &l); err != nil {
			t.Fatal(err)
		}
		leases[name] = l.ID
		mustStatus(t, gwtest.DoAs(t, g.URL, secrets[name], "POST", "/v1/locks/"+held+"/acquire", map[string]any{"lease": l.ID}), 200, name+" holds "+held)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wait := func(name, lock string) <-chan gwtest.Response {
		ch := make(chan gwtest.Response, 1)
		go func() {
			r, _ := gwtest.SendAs(ctx, g.URL, secrets[name], "POST", "/v1/locks/"+lock+"/acquire?wait=20s", map[string]any{"lease": leases[name]})
			ch <- r
		}()
		return ch
	}
	// In order, so that carol's wait is the newest, the one ended.
	aliceWaits := wait("alice", "dy")
	waitFor(t, g.URL, secrets["alice"], "dy", 1)
	bobWaits := wait("bob", "dz")
	waitFor(t, g.URL, secrets["bob"], "dz", 1)
	r := <-wait("carol", "dx")
	p := wantProblem(t, r, 409, "deadlock", "carol's wait that closes the cycle")
	if p == nil {
		t.FailNow()
	}
	cycle, _ := p["cycle"].([]any)
	hidden := 0
	for _, s := range cycle {
		step := s.(map[string]any)
		if step["hidden"] == true {
			hidden++
			if len(step) != 2 || step["kind"] != "lock" {
				t.Errorf("a hidden step shows more than its kind: %v", step)
			}
		}
	}
	if len(cycle) != 3 || hidden != 1 {
		t.Errorf("the cycle %v: want 3 steps, 1 of them hidden (alice's wait for dy)", cycle)
	}
	// alice's lease and label may show: alice holds dx, which carol may
	// read (GET /v1/locks/dx shows them too); what alice waits for may not.
	if strings.Contains(string(r.Body), "dy") {
		t.Errorf("carol's 409 names dy, which carol may not read:\n%s", r.Body)
	}
	if d, _ := p["detail"].(string); !strings.Contains(d, "a party you may not read") || !strings.Contains(d, "bob's job") {
		t.Errorf("detail %q: want bob's job and a party carol may not read", d)
	}
	for name, id := range leases {
		mustStatus(t, gwtest.DoAs(t, g.URL, secrets[name], "DELETE", "/v1/leases/"+id, nil), 204, "revoke "+name+"'s lease")
	}
	<-aliceWaits
	<-bobWaits
}

// waitFor waits until lock has n waiters, read with secret.
func waitFor(t *testing.T, url, secret, lock string, n int) {
	t.Helper()
	gwtest.Eventually(t, 10*time.Second, func() error {
		var st struct{ Waiters []any }
		r := gwtest.DoAs(t, url, secret, "GET", "/v1/locks/"+lock, nil)
		if err := json.Unmarshal(r.Body, &st); err != nil || len(st.Waiters) != n {
			return fmt.Errorf("%s: not %d waiters yet: %s", lock, n, r.Body)
		}
		return nil
	})
}

// TestSessionIDsForAdminsAlone: a contender's ZooKeeper session id (the
// gateway's own, for its leases' nodes) is shown to a token with admin on
// the name and to nobody else: with it, a client that may connect to
// ZooKeeper can take the session over (its password derives from it).
// Before, every reader of a lock, a semaphore or an election saw it.
func TestSessionIDsForAdminsAlone(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	s := startSecured(t, gwtest.GatewayOptions{}, file, secrets)
	lease := s.newLeaseAs(t, "writer")
	mustStatus(t, s.as(t, "writer", "POST", "/v1/locks/sess/acquire", map[string]any{"lease": lease}), 200, "acquire")
	mustStatus(t, s.as(t, "writer", "POST", "/v1/semaphores/sess/acquire", map[string]any{"lease": lease, "limit": 2}), 200, "semaphore")
	mustStatus(t, s.as(t, "writer", "POST", "/v1/elections/sess/campaign", map[string]any{"lease": lease, "value": "v"}), 200, "campaign")
	for _, path := range []string{"/v1/locks/sess", "/v1/semaphores/sess", "/v1/elections/sess"} {
		for tok, shown := range map[string]bool{"reader": false, "writer": false, "admin": true} {
			r := s.as(t, tok, "GET", path, nil)
			mustStatus(t, r, 200, tok+" reads "+path)
			if got := strings.Contains(string(r.Body), `"session":"0x`); got != shown {
				t.Errorf("%s reads %s: a session id shown: %v, want %v\n%s", tok, path, got, shown, r.Body)
			}
		}
	}
	// A wait that ends names the holders (409 timeout): their session ids
	// go to admins alone there too.
	for tok, shown := range map[string]bool{"writer": false, "admin": true} {
		waiter := s.newLeaseAs(t, tok)
		for _, path := range []string{"/v1/locks/sess/acquire?wait=0s", "/v1/semaphores/sess1/acquire?wait=0s"} {
			if path == "/v1/semaphores/sess1/acquire?wait=0s" {
				mustStatus(t, s.as(t, "writer", "POST", path, map[string]any{"lease": lease, "limit": 1}), 200, "the semaphore's slot")
			}
			body := map[string]any{"lease": waiter}
			if strings.Contains(path, "semaphores") {
				body["limit"] = 1
			}
			r := s.as(t, tok, "POST", path, body)
			mustStatus(t, r, 409, tok+"'s wait that ends")
			if got := strings.Contains(string(r.Body), `"session":"0x`); got != shown {
				t.Errorf("%s's timeout of %s: a session id shown: %v, want %v\n%s", tok, path, got, shown, r.Body)
			}
			if path == "/v1/semaphores/sess1/acquire?wait=0s" {
				mustStatus(t, s.as(t, "writer", "POST", "/v1/semaphores/sess1/release", map[string]any{"lease": lease}), 204, "the slot released")
			}
		}
		mustStatus(t, s.as(t, tok, "DELETE", "/v1/leases/"+waiter, nil), 204, "revoke the waiter")
	}
	mustStatus(t, s.as(t, "writer", "DELETE", "/v1/leases/"+lease, nil), 204, "revoke")
}
