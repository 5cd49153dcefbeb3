package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/zkgate/zkgate/internal/gwtest"
	"github.com/zkgate/zkgate/internal/zk"
)

// wsMsg is a message of /ws.
type wsMsg struct {
	Snapshot bool     `json:"snapshot"`
	Now      int64    `json:"now"`
	Frags    []wsFrag `json:"frags"`
}

type wsFrag struct {
	Op     string `json:"op"`
	ID     string `json:"id"`
	Parent string `json:"parent"`
	Key    string `json:"key"`
	HTML   string `json:"html"`
}

func wsURL(base, page string) string {
	return "ws" + strings.TrimPrefix(base, "http") + "/ws?page=" + page
}

func dialWS(t *testing.T, ctx context.Context, base, page string, opts *websocket.DialOptions) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.Dial(ctx, wsURL(base, page), opts)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial /ws?page=%s: %v (HTTP %d)", page, err, status)
	}
	c.SetReadLimit(16 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func readWS(ctx context.Context, c *websocket.Conn) (wsMsg, error) {
	_, data, err := c.Read(ctx)
	if err != nil {
		return wsMsg{}, err
	}
	var m wsMsg
	return m, json.Unmarshal(data, &m)
}

// wsView is what a browser would show of a page: the HTML of each fragment
// by id, as the messages replace, upsert and remove them.
type wsView struct {
	html map[string]string
	msgs int
}

func (v *wsView) apply(m wsMsg) {
	if v.html == nil {
		v.html = map[string]string{}
	}
	v.msgs++
	for _, f := range m.Frags {
		if f.Op == "remove" {
			delete(v.html, f.ID)
		} else {
			v.html[f.ID] = f.HTML
		}
	}
}

// until reads messages into v until ok says v is as wanted.
func (v *wsView) until(t *testing.T, ctx context.Context, c *websocket.Conn, what string, ok func(*wsView) bool) {
	t.Helper()
	for !ok(v) {
		m, err := readWS(ctx, c)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		v.apply(m)
	}
}

// waitFrag reads messages into v until one has a fragment that satisfies ok.
func (v *wsView) waitFrag(t *testing.T, ctx context.Context, c *websocket.Conn, what string, ok func(wsFrag) bool) wsFrag {
	t.Helper()
	for {
		m, err := readWS(ctx, c)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		v.apply(m)
		for _, f := range m.Frags {
			if ok(f) {
				return f
			}
		}
	}
}

// TestWSSnapshotThenUpdates checks the protocol of /ws: a snapshot of the
// page on connect, then the fragments of a lock taken and released through
// the HTTP API, pushed without asking, with the holder's label escaped.
func TestWSSnapshotThenUpdates(t *testing.T) {
	gwtest.NoGoroutinesLeft(t)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := dialWS(t, ctx, g.URL, "locks", nil)

	snap, err := readWS(ctx, c)
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

	var view wsView
	view.apply(snap)
	lease := newLease(t, g.URL, "30s", markupLabel)
	mustStatus(t, acquire(t, g.URL, "ws-lock", lease, "0s"), 200, "acquire")
	f := view.waitFrag(t, ctx, c, "the lock to appear", func(f wsFrag) bool {
		return f.ID == "lock-ws-lock" && strings.Contains(f.HTML, `data-lease="`+lease+`"`)
	})
	if f.Op != "upsert" || f.Parent != "locks-list" || f.Key != "ws-lock" {
		t.Errorf("the lock should be upserted into locks-list by name: %+v", f)
	}
	if strings.Contains(f.HTML, "<img") || !strings.Contains(f.HTML, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Errorf("the holder label must be escaped:\n%s", f.HTML)
	}
	view.until(t, ctx, c, "the lock count", func(v *wsView) bool {
		return strings.Contains(v.html["count-locks"], ">1<") && strings.Contains(v.html["locks-summary"], "1 lock ")
	})

	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/locks/ws-lock/release", map[string]any{"lease": lease}), 204, "release")
	view.waitFrag(t, ctx, c, "the lock to go", func(f wsFrag) bool { return f.ID == "lock-ws-lock" && f.Op == "remove" })
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}

// TestWSChecksOrigin accepts the dashboard's own origin (and clients that
// send none) and refuses any other site's.
func TestWSChecksOrigin(t *testing.T) {
	gwtest.NoGoroutinesLeft(t)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	_, resp, err := websocket.Dial(ctx, wsURL(g.URL, "overview"), &websocket.DialOptions{
		HTTPHeader: http.Header{"Origin": {"http://evil.example"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a foreign Origin must be refused with 403: err %v, resp %v", err, resp)
	}
	c := dialWS(t, ctx, g.URL, "overview", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {g.URL}}})
	if m, err := readWS(ctx, c); err != nil || !m.Snapshot {
		t.Fatalf("same origin: %v %+v", err, m)
	}
	c.Close(websocket.StatusNormalClosure, "")

	r := gwtest.Do(t, "GET", g.URL+"/ws?page=nope", nil)
	mustStatus(t, r, http.StatusBadRequest, "unknown page")
}

// TestWSOneWatchPerPath connects many dashboards: the hub watches each path
// once for all of them.
func TestWSOneWatchPerPath(t *testing.T) {
	gwtest.NoGoroutinesLeft(t)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lease := newLease(t, g.URL, "30s", "watcher")
	for i := range 3 {
		mustStatus(t, acquire(t, g.URL, fmt.Sprintf("watched-%d", i), lease, "0s"), 200, "acquire")
	}
	first := dialWS(t, ctx, g.URL, "locks", nil)
	new(wsView).waitFrag(t, ctx, first, "the snapshot with the 3 locks", func(f wsFrag) bool {
		return f.ID == "locks-list" && strings.Count(f.HTML, `class="item lock"`) == 3
	})
	watched := metricValue(t, g.URL, "zkgate_watched_paths")
	if watched < 3+8 {
		t.Fatalf("the hub should watch the 8 kinds and the 3 locks: %v paths", watched)
	}
	for _, page := range []string{"locks", "overview", "leases", "semaphores", "locks"} {
		c := dialWS(t, ctx, g.URL, page, nil)
		if m, err := readWS(ctx, c); err != nil || !m.Snapshot {
			t.Fatalf("dashboard %s: %v", page, err)
		}
	}
	if now := metricValue(t, g.URL, "zkgate_watched_paths"); now > watched {
		t.Fatalf("more dashboards must not add watches: %v paths, then %v", watched, now)
	}
	if n := metricValue(t, g.URL, "zkgate_dashboard_clients"); n != 6 {
		t.Fatalf("zkgate_dashboard_clients = %v, want 6", n)
	}
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}

// TestWSDropsSlowReader connects a client that never reads, with a tiny
// receive buffer: once its queue is full the hub drops it and closes its
// connection, while a client that reads keeps its stream; a new connection
// resyncs from a snapshot.
func TestWSDropsSlowReader(t *testing.T) {
	gwtest.NoGoroutinesLeft(t)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	dialer := &net.Dialer{Control: func(network, address string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048)
		})
		return errors.Join(err, serr)
	}}
	tinyBuffer := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	slow := dialWS(t, ctx, g.URL, "locks", &websocket.DialOptions{HTTPClient: tinyBuffer})
	fast := dialWS(t, ctx, g.URL, "locks", nil)
	var fastView wsView

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
	for metricValue(t, g.URL, "zkgate_dashboard_dropped_total") < 1 {
		if ctx.Err() != nil {
			t.Fatalf("the slow client was never dropped")
		}
		waiter, err := conn.Create(node, big, zk.FlagEphemeral|zk.FlagSequence, acl)
		if err != nil {
			t.Fatalf("create foreign lock node: %v", err)
		}
		// The client that reads sees every node.
		fastView.waitFrag(t, ctx, fast, "the foreign node", func(f wsFrag) bool {
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
	if n := metricValue(t, g.URL, "zkgate_dashboard_dropped_total"); n != 1 {
		t.Fatalf("only the slow client should be dropped: %v dropped", n)
	}
	// The client that reads still gets updates.
	lease := newLease(t, g.URL, "30s", "after the drop")
	mustStatus(t, acquire(t, g.URL, "after-drop", lease, "0s"), 200, "acquire")
	fastView.waitFrag(t, ctx, fast, "an update after the drop", func(f wsFrag) bool { return f.ID == "lock-after-drop" })
	// A reconnection starts over from a snapshot.
	again := dialWS(t, ctx, g.URL, "locks", nil)
	if m, err := readWS(ctx, again); err != nil || !m.Snapshot {
		t.Fatalf("reconnect: %v %+v", err, m.Snapshot)
	}
	mustStatus(t, gwtest.Do(t, "DELETE", g.URL+"/v1/leases/"+lease, nil), 204, "revoke")
}

// metricValue reads one unlabelled metric of /metrics.
func metricValue(t *testing.T, base, name string) float64 {
	t.Helper()
	return metricValueAs(t, base, "", name)
}

// metricValueAs is metricValue with a token ("" for none).
func metricValueAs(t *testing.T, base, secret, name string) float64 {
	t.Helper()
	r := doAs(t, base, secret, "GET", "/metrics", nil)
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestWSClosedWhenItsTokenGoes: a reload of the tokens file (SIGHUP) closes,
// with 1008 (policy violation), the dashboard streams of a token it
// removed (shown through a bearer token) or changed (through the sign-in
// cookie); a token it left as it was keeps streaming, and the removed one
// cannot connect again. They streamed on for minutes.
func TestWSClosedWhenItsTokenGoes(t *testing.T) {
	file, secrets := newTokensFile(t)
	g := startSecured(t, gwtest.GatewayOptions{}, file, secrets)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bearer := func(tok string) *websocket.DialOptions {
		return &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + secrets[tok]}}}
	}
	removed := dialWS(t, ctx, g.URL, "overview", bearer("reader"))
	changed := dialWS(t, ctx, g.URL, "locks", &websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {"zkgate_token=" + secrets["admin"]}}})
	kept := dialWS(t, ctx, g.URL, "overview", bearer("writer"))
	for _, c := range []*websocket.Conn{removed, changed, kept} {
		if m, err := readWS(ctx, c); err != nil || !m.Snapshot {
			t.Fatalf("first message: %v %+v", err, m)
		}
	}
	// Read on in the background: a close arrives as a read's error.
	ended := func(c *websocket.Conn) chan error {
		ch := make(chan error, 1)
		go func() {
			for {
				if _, err := readWS(ctx, c); err != nil {
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
	_, resp, err := websocket.Dial(ctx, wsURL(g.URL, "overview"), bearer("reader"))
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the removed token connects again: %v %v", err, resp)
	}
}
