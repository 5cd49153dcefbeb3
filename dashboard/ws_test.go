package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/zkgate/zkgate/internal/harness/dashtest"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/zk"
)

// startWS starts a gateway for a test that must leave no goroutine behind,
// with a context for its dashboards that ends after d at the latest.
func startWS(t *testing.T, d time.Duration) (*gwtest.Gateway, context.Context) {
	t.Helper()
	gwtest.NoGoroutinesLeft(t)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return g, ctx
}

// checkUpsertedEscaped: f, the fragment that showed a thing (what) taken by
// a lease labelled markupLabel, upserts it into the list by its key, with
// the label escaped.
func checkUpsertedEscaped(t *testing.T, f dashtest.Frag, what, list, key string) {
	t.Helper()
	if f.Op != "upsert" || f.Parent != list || f.Key != key {
		t.Errorf("the %s should be upserted into %s by name: %+v", what, list, f)
	}
	if strings.Contains(f.HTML, "<img") || !strings.Contains(f.HTML, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Errorf("the holder label must be escaped:\n%s", f.HTML)
	}
}

// TestWSSnapshotThenUpdates checks the protocol of /ws: a snapshot of the
// page on connect, then the fragments of a lock taken and released through
// the HTTP API, pushed without asking, with the holder's label escaped.
func TestWSSnapshotThenUpdates(t *testing.T) {
	// Serial: counts the binary's goroutines (StartChecked).
	g, ctx := startWS(t, 20*time.Second)
	c := dashtest.Dial(t, ctx, g.URL, "locks", nil)

	snap, err := dashtest.Read(ctx, c)
	if err != nil {
		t.Fatalf("first message: %v", err)
	}
	if !snap.Snapshot || snap.Now == 0 {
		t.Fatalf("the first message must be a snapshot: %+v", snap)
	}
	ids := map[string]bool{}
	for _, f := range snap.Frags {
		if f.Op != "replace" {
			t.Errorf("a snapshot only replaces: %+v", f)
		}
		ids[f.ID] = true
	}
	for _, id := range []string{"zk-state", "count-locks", "locks-summary", "locks-list"} {
		if !ids[id] {
			t.Errorf("the snapshot has no %s: %v", id, ids)
		}
	}

	var view dashtest.View
	view.Apply(snap)
	lease := gwtest.NewLease(t, g.URL, "30s", markupLabel)
	gwtest.MustStatus(t, gwtest.Acquire(t, g.URL, "ws-lock", lease, "0s"), 200, "acquire")
	f := view.WaitFrag(t, ctx, c, "the lock to appear", func(f dashtest.Frag) bool {
		return f.ID == "lock-ws-lock" && strings.Contains(f.HTML, `data-lease="`+lease+`"`)
	})
	checkUpsertedEscaped(t, f, "lock", "locks-list", "ws-lock")
	view.Until(t, ctx, c, "the lock count", func(v *dashtest.View) bool {
		return strings.Contains(v.HTML["count-locks"], ">1<") && strings.Contains(v.HTML["locks-summary"], "1 lock ")
	})

	gwtest.MustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/locks/ws-lock/release", map[string]any{"lease": lease}), 204, "release")
	view.WaitFrag(t, ctx, c, "the lock to go", func(f dashtest.Frag) bool { return f.ID == "lock-ws-lock" && f.Op == "remove" })
	gwtest.MustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}

// TestWSChecksOrigin accepts the dashboard's own origin (and clients that
// send none) and refuses any other site's.
func TestWSChecksOrigin(t *testing.T) {
	// Serial: counts the binary's goroutines (StartChecked).
	g, ctx := startWS(t, 20*time.Second)

	_, resp, err := websocket.Dial(ctx, dashtest.URL(g.URL, "overview"), &websocket.DialOptions{
		HTTPHeader: http.Header{"Origin": {"http://evil.example"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a foreign Origin must be refused with 403: err %v, resp %v", err, resp)
	}
	c := dashtest.Dial(t, ctx, g.URL, "overview", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {g.URL}}})
	if m, err := dashtest.Read(ctx, c); err != nil || !m.Snapshot {
		t.Fatalf("same origin: %v %+v", err, m)
	}
	c.Close(websocket.StatusNormalClosure, "")

	r := gwtest.Do(t, "GET", g.URL+"/ws?page=nope", nil)
	gwtest.MustStatus(t, r, http.StatusBadRequest, "unknown page")
}

// TestWSOneWatchPerPath connects many dashboards: the hub watches each path
// once for all of them.
func TestWSOneWatchPerPath(t *testing.T) {
	// Serial: counts the binary's goroutines (StartChecked).
	g, ctx := startWS(t, 20*time.Second)
	lease := gwtest.NewLease(t, g.URL, "30s", "watcher")
	for i := range 3 {
		gwtest.MustStatus(t, gwtest.Acquire(t, g.URL, fmt.Sprintf("watched-%d", i), lease, "0s"), 200, "acquire")
	}
	first := dashtest.Dial(t, ctx, g.URL, "locks", nil)
	new(dashtest.View).WaitFrag(t, ctx, first, "the snapshot with the 3 locks", func(f dashtest.Frag) bool {
		return f.ID == "locks-list" && strings.Count(f.HTML, `class="item lock"`) == 3
	})
	watched := gwtest.Metric(t, g.URL, "", "zkgate_watched_paths")
	if watched < 3+8 {
		t.Fatalf("the hub should watch the 8 kinds and the 3 locks: %v paths", watched)
	}
	for _, page := range []string{"locks", "overview", "leases", "semaphores", "locks"} {
		c := dashtest.Dial(t, ctx, g.URL, page, nil)
		if m, err := dashtest.Read(ctx, c); err != nil || !m.Snapshot {
			t.Fatalf("dashboard %s: %v", page, err)
		}
	}
	if now := gwtest.Metric(t, g.URL, "", "zkgate_watched_paths"); now > watched {
		t.Fatalf("more dashboards must not add watches: %v paths, then %v", watched, now)
	}
	if n := gwtest.Metric(t, g.URL, "", "zkgate_dashboard_clients"); n != 6 {
		t.Fatalf("zkgate_dashboard_clients = %v, want 6", n)
	}
	gwtest.MustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}

// TestWSDropsSlowReader connects a client that never reads, with a tiny
// receive buffer: once its queue is full the hub drops it and closes its
// connection, while a client that reads keeps its stream; a new connection
// resyncs from a snapshot.
func TestWSDropsSlowReader(t *testing.T) {
	// Serial: counts the binary's goroutines (StartChecked).
	g, ctx := startWS(t, 60*time.Second)

	dialer := &net.Dialer{Control: func(network, address string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048)
		})
		return errors.Join(err, serr)
	}}
	tinyBuffer := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	slow := dashtest.Dial(t, ctx, g.URL, "locks", &websocket.DialOptions{HTTPClient: tinyBuffer})
	fast := dashtest.Dial(t, ctx, g.URL, "locks", nil)
	// A dial returns once the upgrade is answered; the hub takes the
	// connection in after that. The nodes made below must come as updates,
	// after each client's snapshot, not inside it: a node already in the
	// snapshot is never sent again as an update of its own, and waiting for
	// one waited for the test's whole minute.
	var fastView dashtest.View
	if m, err := dashtest.Read(ctx, fast); err != nil || !m.Snapshot {
		t.Fatalf("the first message must be a snapshot: %v %+v", err, m)
	} else {
		fastView.Apply(m)
	}
	gwtest.Eventually(t, 30*time.Second, func() error {
		if n := gwtest.Metric(t, g.URL, "", "zkgate_dashboard_clients"); n != 2 {
			return fmt.Errorf("zkgate_dashboard_clients = %v, want 2", n)
		}
		return nil
	})

	// A foreign lock node (as Curator or kazoo would make) whose data is
	// big: its label, and so each message that shows it, is big too. Each
	// new node is one more message the slow client does not read.
	conn := gwtest.Client(t, g.ZK, 5*time.Second)
	parent := g.Root + "/locks/slow-reader"
	node := parent + "/_c_00000000-0000-4000-8000-000000000000-lock-"
	acl := zk.WorldACL(zk.PermAll)
	// A small holder keeps the container parent from being reaped.
	for {
		_, err := conn.Create(node, []byte("10.0.0.7"), zk.FlagEphemeral|zk.FlagSequence, acl)
		if err == nil {
			break
		}
		if _, err := conn.CreateContainer(parent, nil, zk.FlagContainer, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", parent, err)
		}
	}
	big := []byte(strings.Repeat("0123456789abcdef", 16<<10)) // 256 KiB
	start := time.Now()
	for gwtest.Metric(t, g.URL, "", "zkgate_dashboard_dropped_total") < 1 {
		if ctx.Err() != nil {
			t.Fatalf("the slow client was never dropped")
		}
		waiter, err := conn.Create(node, big, zk.FlagEphemeral|zk.FlagSequence, acl)
		if err != nil {
			t.Fatalf("create foreign lock node: %v", err)
		}
		// The client that reads sees every node.
		fastView.WaitFrag(t, ctx, fast, "the foreign node", func(f dashtest.Frag) bool {
			return f.ID == "lock-slow-reader" && strings.Contains(f.HTML, path.Base(waiter))
		})
		if err := conn.Delete(waiter, -1); err != nil {
			t.Fatalf("delete %s: %v", waiter, err)
		}
	}
	t.Logf("the slow client was dropped after %s", time.Since(start).Round(time.Millisecond))

	// Its connection is closed: reading drains what the kernel buffered,
	// then fails.
	for {
		if _, _, err := slow.Read(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("the dropped client's connection stayed open")
			}
			break
		}
	}
	if n := gwtest.Metric(t, g.URL, "", "zkgate_dashboard_dropped_total"); n != 1 {
		t.Fatalf("only the slow client should be dropped: %v dropped", n)
	}
	// The client that reads still gets updates.
	lease := gwtest.NewLease(t, g.URL, "30s", "after the drop")
	gwtest.MustStatus(t, gwtest.Acquire(t, g.URL, "after-drop", lease, "0s"), 200, "acquire")
	fastView.WaitFrag(t, ctx, fast, "an update after the drop", func(f dashtest.Frag) bool { return f.ID == "lock-after-drop" })
	// A reconnection starts over from a snapshot.
	again := dashtest.Dial(t, ctx, g.URL, "locks", nil)
	if m, err := dashtest.Read(ctx, again); err != nil || !m.Snapshot {
		t.Fatalf("reconnect: %v %+v", err, m.Snapshot)
	}
	gwtest.MustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}
