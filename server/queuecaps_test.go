package server_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/server"
	"github.com/zkgate/zkgate/zkserver"
)

// TestQueueCapsKeepZooKeeperUp fills the queues of a gateway on its
// embedded ZooKeeper to each cap (small ones, set by flags): every produce
// past a cap is 507 queue_full as openapi.yaml has it, naming the cap, its
// value and what the queue and all queues hold, and adds nothing;
// ZooKeeper answers srvr all along and /readyz stays 200; a take
// makes room again. The embedded ZooKeeper runs with the heap that the
// caps call for.
func TestQueueCapsKeepZooKeeperUp(t *testing.T) {
	t.Parallel()
	caps := []string{"--max-item-bytes", "16KiB", "--max-queue-items", "6", "--max-queue-bytes", "64KiB",
		"--max-queues-items", "40", "--max-queues-bytes", "160KiB"}
	g := gwtest.StartProcess(t, gwtest.GatewayOptions{Embedded: true, Extra: caps})
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := newSpecChecker(t, g.URL, specLoad(t, spec))
	conn := g.ZKClient(t, 10*time.Second)

	q := &queueCaps{t: t, s: s, g: g, conn: conn}
	produce, zooKeeperUp, fill := q.produce, q.zooKeeperUp, q.fill
	fill("b", 1, "max-queue-items", 6, 6)
	fill("a", 16<<10, "max-queue-bytes", 64<<10, 4)
	fill("f", 16<<10, "max-queue-bytes", 64<<10, 4)
	// a and f hold 128 KiB and b 6 bytes: room for one more of 16 KiB.
	all := fill("h", 16<<10, "max-queues-bytes", 160<<10, 1)["all_queues"].(map[string]any)
	if all["bytes"] != float64(9*16<<10+6) || all["items"] != float64(4*3+15) {
		t.Fatalf("all queues hold %v, want %d bytes and %d items (15, and 3 a queue)", all, 9*16<<10+6, 4*3+15)
	}
	// 27 items; each new queue counts 3 more.
	fill("i", 0, "max-queue-items", 6, 6)
	fill("j", 0, "max-queues-items", 40, 1)

	// A take makes room at once.
	mustStatus(t, gwtest.Do(t, "POST", g.URL+"/v1/queues/b/take", nil), 200, "take")
	if r := produce("b", 1); r.Status != 201 {
		t.Fatalf("a produce after a take: %d %s", r.Status, r.Body)
	}
	zooKeeperUp("at the end")

	// The embedded ZooKeeper's heap is the one the caps call for.
	cfg, err := server.ParseConfig(append([]string{"--zk", "127.0.0.1:2181"}, caps...), func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pgrep", "-a", "-P", strconv.Itoa(g.Pid()), "java").Output()
	if want := fmt.Sprintf(" -Xmx%dm ", server.EmbeddedHeap(cfg)>>20); err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("the embedded ZooKeeper runs as %q (%v), want %q in it", out, err, want)
	}
}

// queueCaps fills the queues of the gateway g (on its embedded ZooKeeper,
// read through conn), checking every answer against openapi.yaml with s.
type queueCaps struct {
	t    *testing.T
	s    *specChecker
	g    *gwtest.Proc
	conn *zk.Conn
}

// produce sends an item, and checks the answer against openapi.yaml.
func (q *queueCaps) produce(queue string, size int) gwtest.Response {
	q.t.Helper()
	c := specReq("POST", "/v1/queues/"+queue+"/items", make([]byte, size), specContentType("application/octet-stream"))
	r := q.s.send(context.Background(), c, nil)
	q.s.check(q.t, r.resp.Status, c, r)
	return r.resp
}

// zooKeeperUp: ZooKeeper answers srvr (to the gateway's certificate: it
// admits nobody else), and /readyz is 200.
func (q *queueCaps) zooKeeperUp(when string) {
	t, g := q.t, q.g
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if out, err := zkserver.FourLetterWordTLS(ctx, g.ZK, "srvr", g.ZKTLS); err != nil || !strings.Contains(out, "Mode: standalone") {
		t.Fatalf("%s: srvr answered %q, %v", when, out, err)
	}
	mustStatus(t, gwtest.Do(t, "GET", g.URL+"/readyz", nil), 200, when+": readyz")
}

// fill produces items of size into queue until one is refused, which
// must be at limit with the queue holding items, and returns the
// problem.
func (q *queueCaps) fill(queue string, size int, limit string, max float64, items int) map[string]any {
	t := q.t
	t.Helper()
	for made := 0; ; made++ {
		r := q.produce(queue, size)
		if r.Status == 201 {
			continue
		}
		p := wantProblem(t, r, 507, "queue_full", "a produce into "+queue+" past "+limit)
		if p == nil {
			t.FailNow()
		}
		qs, _ := p["queue"].(map[string]any)
		if p["exceeded"] != limit || p["max"] != max || qs["name"] != queue || qs["items"] != float64(made) ||
			qs["bytes"] != float64(made*size) || made != items || !strings.Contains(p["detail"].(string), "--"+limit) {
			t.Fatalf("%s refused after %d items of %d bytes: %s; want %s (max %v) after %d", queue, made, size, r.Body, limit, max, items)
		}
		kids, _, err := q.conn.Children(q.g.Root + "/queues/" + queue + "/entries")
		if err != nil || len(kids) != items {
			t.Fatalf("%d items of %s in ZooKeeper (%v), want %d", len(kids), queue, err, items)
		}
		q.zooKeeperUp("at " + limit)
		return p
	}
}
