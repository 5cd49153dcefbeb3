package server_test

// Interoperability of queues and elections with real peers on the real
// ZooKeeper: kazoo's LockingQueue and Curator's LeaderLatch share
// {root}/queues/{name} and {root}/elections/{name} with zkgate. The peers
// and their line protocols are those of interop_test.go.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/zk"
)

// icQueue is what the gateway says of a queue.
type icQueue struct {
	Length  int `json:"length"`
	Claimed int `json:"claimed"`
	Head    []struct {
		ID        string  `json:"id"`
		Priority  int     `json:"priority"`
		Size      int     `json:"size"`
		ClaimedBy *string `json:"claimed_by"`
	} `json:"head"`
}

func icQueueState(t *testing.T, g *gwtest.Gateway, name string) icQueue {
	t.Helper()
	r := gwtest.Do(t, "GET", g.URL+"/v1/queues/"+name+"?head=50", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET queue %s: %d %s", name, r.Status, r.Body)
	}
	var st icQueue
	ioDecode(t, r, &st)
	return st
}

// icWaitQueue polls the queue's state until ok accepts it.
func icWaitQueue(t *testing.T, g *gwtest.Gateway, name string, ok func(icQueue) error) icQueue {
	t.Helper()
	var st icQueue
	gwtest.Eventually(t, interopWait, func() error {
		st = icQueueState(t, g, name)
		if err := ok(st); err != nil {
			return fmt.Errorf("%v; state: %+v", err, st)
		}
		return nil
	})
	return st
}

// icItem is one queue item as a test knows it.
type icItem struct {
	priority int
	data     []byte
}

// icHex is a value on the kazoo peer's wire: hex, "-" for empty.
func icHex(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	return hex.EncodeToString(b)
}

// icGot waits for the kazoo peer's answer to `get <qid>` and returns the
// entry it locked and its value.
func icGot(t *testing.T, p *interopPeer, qid string) (entry string, value []byte) {
	t.Helper()
	f := strings.Fields(p.expect("GOT "+qid+" ", interopWait))
	if len(f) != 4 {
		t.Fatalf("kazoo peer: bad GOT line %q", f)
	}
	if f[3] != "-" {
		var err error
		if value, err = hex.DecodeString(f[3]); err != nil {
			t.Fatalf("kazoo peer: GOT value %q: %v", f[3], err)
		}
	}
	return f[2], value
}

// icClaim is POST /v1/queues/{name}/claim?wait=.
func icClaim(ctx context.Context, g *gwtest.Gateway, name, lease, wait string) (gwtest.Response, error) {
	return gwtest.DoCtx(ctx, "POST", g.URL+"/v1/queues/"+name+"/claim?wait="+wait, map[string]any{"lease": lease})
}

func icMustClaim(t *testing.T, g *gwtest.Gateway, name, lease, wait string) (id string, data []byte) {
	t.Helper()
	r, err := icClaim(context.Background(), g, name, lease, wait)
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("claim from %s (wait %s): %v %d %s", name, wait, err, r.Status, r.Body)
	}
	return r.Header.Get("X-Zkgate-Item-Id"), r.Body
}

func icNothingToClaim(t *testing.T, g *gwtest.Gateway, name, lease, why string) {
	t.Helper()
	r, err := icClaim(context.Background(), g, name, lease, "0s")
	if err != nil || r.Status != http.StatusNoContent {
		t.Fatalf("claim from %s with wait=0 (%s): %v %d %q, want 204", name, why, err, r.Status, r.Body)
	}
}

// icDeleteKazooParents deletes the empty PERSISTENT nodes that kazoo's
// LockingQueue made with ensure_path ({queue}/entries, {queue}/taken and
// {queue} itself): ZooKeeper never removes them, unlike zkgate's CONTAINER
// parents. That is kazoo's doing, not zkgate's.
func icDeleteKazooParents(t *testing.T, conn *zk.Conn, queuePath string) {
	t.Helper()
	for _, p := range []string{queuePath + "/entries", queuePath + "/taken", queuePath} {
		if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("delete kazoo's parent %s: %v", p, err)
		}
	}
}

// icProduceMixed produces 20 items to the queue name through zkgate, with
// 5 priorities, one of them empty. It returns their ids in kazoo's order
// (priority, then sequence) and the data of each.
func icProduceMixed(t *testing.T, g *gwtest.Gateway, name string) ([]string, map[string][]byte) {
	t.Helper()
	priorities := []int{500, 1, 100, 999, 1, 42}
	var want []icItem
	ids := map[string]int{} // item id -> index in want
	for i := 0; i < 20; i++ {
		prio := priorities[i%len(priorities)]
		data := append([]byte(fmt.Sprintf("item %02d prio %03d ", i, prio)), 0x00, 0xff, '\n', byte(i))
		if i == 7 {
			data = nil // an empty item
		}
		id := produce(t, g.URL, name, data, prio)
		if !strings.HasPrefix(id, fmt.Sprintf("entry-%03d-", prio)) {
			t.Fatalf("item id %q for priority %d", id, prio)
		}
		ids[id] = len(want)
		want = append(want, icItem{prio, data})
	}
	order := make([]string, 0, len(ids))
	for id := range ids {
		order = append(order, id)
	}
	// kazoo's order: priority, then sequence; the names sort that way.
	sort.Slice(order, func(i, j int) bool {
		a, b := want[ids[order[i]]], want[ids[order[j]]]
		if a.priority != b.priority {
			return a.priority < b.priority
		}
		return ids[order[i]] < ids[order[j]]
	})
	if st := icQueueState(t, g, name); st.Length != 20 || st.Claimed != 0 {
		t.Fatalf("zkgate state after producing 20: %+v", st)
	}
	dataOf := map[string][]byte{}
	for id, i := range ids {
		dataOf[id] = want[i].data
	}
	return order, dataOf
}

// queue makes the kazoo peer's queue handle id, on the queue at path.
func (p *interopPeer) queue(id, path string) {
	p.t.Helper()
	p.send("queue %s %s", id, path)
	p.expect("QUEUE "+id, interopWait)
}

// TestInteropKazooConsumesZkgateQueue: items produced through zkgate, with
// mixed priorities and arbitrary bytes, are consumed by a kazoo
// LockingQueue in kazoo's own order (priority, then sequence), byte-exact.
func TestInteropKazooConsumesZkgateQueue(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	g, conn, p := interopStart(t, startKazooPeer)
	const name = "jobs"
	queuePath := g.Root + "/queues/" + name

	// The kazoo consumer is set up first, as a long-lived worker would be:
	// its first call makes the queue's parents (PERSISTENT, kazoo's
	// ensure_path) and caches that they exist. (Had zkgate made them, they
	// would be CONTAINER nodes, which ZooKeeper removes whenever the queue
	// drains; kazoo, trusting its cache, then fails or misses items.)
	p.queue("q", queuePath)
	p.send("len q")
	if l := p.expect("LEN q ", interopWait); l != "LEN q 0" {
		t.Fatalf("kazoo sees %q in a new queue", l)
	}

	order, data := icProduceMixed(t, g, name)

	for n, id := range order {
		p.send("get q 5")
		entry, value := icGot(t, p, "q")
		if entry != id {
			t.Fatalf("kazoo get %d locked %s, want %s (order %v)", n, entry, id, order)
		}
		if w := data[id]; string(value) != string(w) {
			t.Fatalf("kazoo get %d (%s): %q, want %q", n, id, value, w)
		}
		if n == 0 {
			// kazoo's lock is a claim in zkgate's eyes: the item is hidden.
			st := icQueueState(t, g, name)
			if st.Claimed != 1 || len(st.Head) == 0 || st.Head[0].ID != id || st.Head[0].ClaimedBy == nil || *st.Head[0].ClaimedBy == "" {
				t.Fatalf("zkgate state while kazoo holds %s: %+v", id, st)
			}
		}
		p.send("consume q")
		if l := p.expect("CONSUMED q ", interopWait); l != "CONSUMED q True" {
			t.Fatalf("kazoo consume of %s: %q", id, l)
		}
	}
	if st := icQueueState(t, g, name); st.Length != 0 || st.Claimed != 0 {
		t.Fatalf("zkgate state after kazoo consumed everything: %+v", st)
	}
	p.send("get q 0.05")
	p.expect("EMPTY q", interopWait)
	lease := ioLease(t, g, "30s", "zkgate-consumer")
	icNothingToClaim(t, g, name, lease, "kazoo consumed everything")

	p.exit()
	ioRevoke(t, g, lease)
	icDeleteKazooParents(t, conn, queuePath)
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// TestInteropZkgateConsumesKazooQueue: items that kazoo put (one by one
// and with put_all) are claimed+acked and taken through zkgate in kazoo's
// order, byte-exact; an item a kazoo consumer has locked is hidden from
// zkgate until kazoo releases it or exits.
func TestInteropZkgateConsumesKazooQueue(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	g, conn, p := interopStart(t, startKazooPeer)
	const name = "inbox"
	queuePath := g.Root + "/queues/" + name
	lease := ioLease(t, g, "30s", "zkgate-consumer")

	p.queue("prod", queuePath)
	put := func(prio int, vals ...[]byte) {
		t.Helper()
		icPut(t, p, "prod", prio, vals...)
	}
	bin := []byte{0x00, 0x01, 0xfe, 0xff, ' ', '\n', '\r'}
	put(300, []byte("p300 first"))
	put(7, []byte("p7 a"), []byte("p7 b"), bin) // put_all: one transaction
	put(300, []byte("p300 second"))
	put(0, []byte{}) // empty, at the head
	put(7, []byte("p7 last"))
	want := [][]byte{{}, []byte("p7 a"), []byte("p7 b"), bin, []byte("p7 last"), []byte("p300 first"), []byte("p300 second")}
	if st := icQueueState(t, g, name); st.Length != len(want) {
		t.Fatalf("zkgate sees %+v, want %d items", st, len(want))
	}

	icConsumeInOrder(t, g, name, lease, want)
	if st := icQueueState(t, g, name); st.Length != 0 {
		t.Fatalf("zkgate state after consuming everything: %+v", st)
	}
	icNothingToClaim(t, g, name, lease, "all consumed")

	// A kazoo consumer locks the only item: zkgate cannot claim it.
	put(100, []byte("contended"))
	p.queue("cons", queuePath)
	p.send("get cons 5")
	entry, value := icGot(t, p, "cons")
	if string(value) != "contended" {
		t.Fatalf("kazoo got %q", value)
	}
	st := icQueueState(t, g, name)
	if st.Length != 1 || st.Claimed != 1 || st.Head[0].ID != entry || st.Head[0].ClaimedBy == nil {
		t.Fatalf("zkgate state while kazoo holds %s: %+v", entry, st)
	}
	icNothingToClaim(t, g, name, lease, "kazoo holds the only item")

	// kazoo releases it (LockingQueue.release): zkgate claims it.
	p.send("qrelease cons")
	if l := p.expect("QRELEASED cons ", interopWait); l != "QRELEASED cons True" {
		t.Fatalf("kazoo release: %q", l)
	}
	id, data := icMustClaim(t, g, name, lease, "5s")
	if id != entry || string(data) != "contended" {
		t.Fatalf("zkgate claimed %s %q after kazoo released, want %s", id, data, entry)
	}
	// ... and kazoo cannot get it while zkgate holds it.
	p.send("get cons 0.2")
	p.expect("EMPTY cons", interopWait)
	ioPost204(t, g.URL+"/v1/queues/"+name+"/items/"+id+"/nack", map[string]any{"lease": lease})
	icClaimAfterKazooExits(t, g, p, name, lease, entry)

	ioRevoke(t, g, lease)
	icDeleteKazooParents(t, conn, queuePath)
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// icPut puts vals into kazoo's queue qid of peer p with priority prio: one
// put, or a put_all (one transaction) of several.
func icPut(t *testing.T, p *interopPeer, qid string, prio int, vals ...[]byte) {
	t.Helper()
	if len(vals) == 1 {
		p.send("put %s %d %s", qid, prio, icHex(vals[0]))
	} else {
		hexes := make([]string, len(vals))
		for i, v := range vals {
			hexes[i] = icHex(v)
		}
		p.send("put-all %s %d %s", qid, prio, strings.Join(hexes, " "))
	}
	if l := p.expect("PUT "+qid+" ", interopWait); l != "PUT "+qid+" "+strconv.Itoa(len(vals)) {
		t.Fatalf("kazoo put: %q", l)
	}
}

// icConsumeInOrder consumes the queue name through zkgate, claim+ack for
// lease and a take every third item, and checks that it is want, in
// priority-then-sequence order.
func icConsumeInOrder(t *testing.T, g *gwtest.Gateway, name, lease string, want [][]byte) {
	t.Helper()
	lastPrio, lastID := -1, ""
	for i, w := range want {
		var id string
		var data []byte
		if i%3 == 2 {
			r := gwtest.Do(t, "POST", g.URL+"/v1/queues/"+name+"/take", nil)
			if r.Status != http.StatusOK {
				t.Fatalf("take %d: %d %s", i, r.Status, r.Body)
			}
			id, data = r.Header.Get("X-Zkgate-Item-Id"), r.Body
		} else {
			id, data = icMustClaim(t, g, name, lease, "0s")
			ioPost204(t, g.URL+"/v1/queues/"+name+"/items/"+id+"/ack", map[string]any{"lease": lease})
		}
		if string(data) != string(w) {
			t.Fatalf("item %d (%s): %q, want %q", i, id, data, w)
		}
		prio, err := strconv.Atoi(strings.Split(id, "-")[1])
		if err != nil || prio < lastPrio || (prio == lastPrio && id <= lastID) {
			t.Fatalf("item %d is %s, after %s: not in priority-then-sequence order", i, id, lastID)
		}
		lastPrio, lastID = prio, id
	}
}

// icClaimAfterKazooExits: kazoo (peer p) locks entry of the queue name
// again and exits: a waiting zkgate claim of lease gets it.
func icClaimAfterKazooExits(t *testing.T, g *gwtest.Gateway, p *interopPeer, name, lease, entry string) {
	t.Helper()
	p.send("get cons 5")
	if again, _ := icGot(t, p, "cons"); again != entry {
		t.Fatalf("kazoo got %s after the nack, want %s", again, entry)
	}
	icNothingToClaim(t, g, name, lease, "kazoo holds it again")
	claimed := make(chan ioAsync, 1)
	go func() {
		r, err := icClaim(context.Background(), g, name, lease, "20s")
		claimed <- ioAsync{r, err}
	}()
	icWaitQueue(t, g, name, func(st icQueue) error {
		if st.Claimed != 1 {
			return fmt.Errorf("want kazoo's claim")
		}
		return nil
	})
	ioNotYet(t, claimed, "the waiting zkgate claim")
	p.exit()
	res := gwtest.Receive(t, claimed, interopWait, "the zkgate claim served after kazoo's exit")
	if res.err != nil || res.r.Status != http.StatusOK || res.r.Header.Get("X-Zkgate-Item-Id") != entry || string(res.r.Body) != "contended" {
		t.Fatalf("zkgate claim after kazoo exited: %v %d %s %q", res.err, res.r.Status, res.r.Header.Get("X-Zkgate-Item-Id"), res.r.Body)
	}
	ioPost204(t, g.URL+"/v1/queues/"+name+"/items/"+entry+"/ack", map[string]any{"lease": lease})
	if st := icQueueState(t, g, name); st.Length != 0 || st.Claimed != 0 {
		t.Fatalf("zkgate state at the end: %+v", st)
	}
}

// icElection is what the gateway says of an election.
type icElection struct {
	Leader     *icCandidate  `json:"leader"`
	Candidates []icCandidate `json:"candidates"`
}

type icCandidate struct {
	Node    string `json:"node"`
	Lease   string `json:"lease"`
	Holder  string `json:"holder"`
	Value   string `json:"value"`
	Foreign bool   `json:"foreign"`
}

func (c *icCandidate) String() string {
	if c == nil {
		return "none"
	}
	if c.Foreign {
		return c.Node + "(foreign:" + c.Holder + ")"
	}
	return c.Node + "(" + c.Lease + ")"
}

func icWaitElection(t *testing.T, g *gwtest.Gateway, name string, ok func(icElection) error) icElection {
	t.Helper()
	var st icElection
	gwtest.Eventually(t, interopWait, func() error {
		r, err := gwtest.DoCtx(context.Background(), "GET", g.URL+"/v1/elections/"+name, nil)
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fmt.Errorf("GET election %s: %d %s", name, r.Status, r.Body)
		}
		st = icElection{}
		ioDecode(t, r, &st)
		if err := ok(st); err != nil {
			return fmt.Errorf("%v; leader %v, candidates %v", err, st.Leader, st.Candidates)
		}
		return nil
	})
	return st
}

// icLatch starts Curator LeaderLatch id on path and returns its node.
func icLatch(p *interopPeer, id int, path string) string {
	p.t.Helper()
	p.send("latch %d %s", id, path)
	f := strings.Fields(p.expect(fmt.Sprintf("WAITING %d ", id), interopWait))
	if len(f) != 3 || !strings.Contains(f[2], "-latch-") {
		p.t.Fatalf("Curator latch %d: %q", id, f)
	}
	return f[2]
}

// icLeads asks the Curator peer whether latch id has leadership.
func icLeads(p *interopPeer, id int) bool {
	p.t.Helper()
	p.send("leader %d", id)
	f := strings.Fields(p.expect(fmt.Sprintf("LEADER %d ", id), interopWait))
	return len(f) >= 3 && f[2] == "true"
}

// icCampaignBehindCurator: a zkgate campaign of lease a waits in line
// behind the Curator latch 1 of peer p (node1) that leads the election
// name, and is elected when Curator closes its latch.
func icCampaignBehindCurator(t *testing.T, g *gwtest.Gateway, p *interopPeer, name, a, node1 string) {
	t.Helper()
	campaignURL := g.URL + "/v1/elections/" + name + "/campaign?wait="
	body := map[string]any{"lease": a, "value": "10.0.0.5:8080"}
	r := gwtest.Do(t, "POST", campaignURL+"100ms", body)
	var c struct {
		Elected  bool         `json:"elected"`
		Position int          `json:"position"`
		Node     string       `json:"node"`
		Token    int64        `json:"token"`
		Leader   *icCandidate `json:"leader"`
	}
	ioDecode(t, r, &c)
	if r.Status != http.StatusAccepted || c.Elected || c.Position != 1 || c.Leader == nil || c.Leader.Node != node1 || !c.Leader.Foreign {
		t.Fatalf("zkgate campaign behind Curator: %d %s, want 202 at position 1 behind %s", r.Status, r.Body, node1)
	}
	ours := c.Node[strings.LastIndexByte(c.Node, '/')+1:]
	if !icLeads(p, 1) {
		t.Fatal("Curator lost leadership to a later zkgate candidate")
	}
	won := make(chan ioAsync, 1)
	go func() {
		r, err := gwtest.DoCtx(context.Background(), "POST", campaignURL+"20s", body)
		won <- ioAsync{r, err}
	}()
	ioNotYet(t, won, "the zkgate campaign")

	// Curator closes its latch: zkgate is elected.
	p.release(1)
	res := gwtest.Receive(t, won, interopWait, "zkgate elected after Curator closed its latch")
	ioDecode(t, res.r, &c)
	if res.err != nil || res.r.Status != http.StatusOK || !c.Elected || c.Token == 0 {
		t.Fatalf("zkgate campaign after Curator closed its latch: %v %d %s", res.err, res.r.Status, res.r.Body)
	}
	icWaitElection(t, g, name, func(st icElection) error {
		if st.Leader == nil || st.Leader.Lease != a || st.Leader.Foreign || st.Leader.Node != ours || len(st.Candidates) != 1 {
			return fmt.Errorf("want lease %s (%s) leading alone", a, ours)
		}
		return nil
	})
}

// TestInteropCuratorLeaderLatch: Curator LeaderLatch and zkgate candidates
// share one election, each waiting for the other to step down.
func TestInteropCuratorLeaderLatch(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	g, conn, p := interopStart(t, startCuratorPeer)
	const name = "svc"
	path := g.Root + "/elections/" + name
	a := ioLease(t, g, "30s", "zkgate-a")

	// Curator starts first and leads; zkgate shows it as a foreign leader.
	node1 := icLatch(p, 1, path)
	if got := p.acquired(1); got != node1 {
		t.Fatalf("Curator leads with %s, but started with %s", got, node1)
	}
	icWaitElection(t, g, name, func(st icElection) error {
		if st.Leader == nil || st.Leader.Node != node1 || !st.Leader.Foreign || st.Leader.Holder != "curator-latch-1" {
			return fmt.Errorf("want the Curator latch %s leading, foreign, holder curator-latch-1", node1)
		}
		return nil
	})

	icCampaignBehindCurator(t, g, p, name, a, node1)

	// A second Curator latch waits behind zkgate...
	node2 := icLatch(p, 2, path)
	icWaitElection(t, g, name, func(st icElection) error {
		if len(st.Candidates) != 2 || st.Candidates[0].Lease != a || st.Candidates[1].Node != node2 || !st.Candidates[1].Foreign {
			return fmt.Errorf("want lease %s leading and the Curator latch %s next", a, node2)
		}
		return nil
	})
	if icLeads(p, 2) {
		t.Fatal("the second Curator latch has leadership while zkgate leads")
	}
	p.blocked(2)

	// ... until zkgate resigns.
	ioPost204(t, g.URL+"/v1/elections/"+name+"/resign", map[string]any{"lease": a})
	if got := p.acquired(2); got != node2 {
		t.Fatalf("Curator leads with %s, but waited with %s", got, node2)
	}
	if !icLeads(p, 2) {
		t.Fatal("the second Curator latch said it leads, but hasLeadership is false")
	}
	icWaitElection(t, g, name, func(st icElection) error {
		if st.Leader == nil || st.Leader.Node != node2 || !st.Leader.Foreign || len(st.Candidates) != 1 {
			return fmt.Errorf("want the Curator latch %s leading alone", node2)
		}
		return nil
	})
	if r := gwtest.Do(t, "PUT", g.URL+"/v1/elections/"+name+"/value", map[string]any{"lease": a, "value": "x"}); r.Status != http.StatusConflict {
		t.Fatalf("proclaim by a resigned zkgate candidate while Curator leads: %d %s, want 409", r.Status, r.Body)
	}

	p.release(2)
	p.exit()
	ioRevoke(t, g, a)
	gwtest.NoZnodesLeft(t, conn, g.Root)
}

// TestInteropKazooGetsADelayedItemWhenDue: an item produced through zkgate
// with a delay is invisible to a kazoo LockingQueue until it is due, across
// a restart of the gateway between the produce and the due time: the next
// gateway moves it into the entries then, with nobody consuming through
// zkgate, and kazoo gets it, byte-exact.
func TestInteropKazooGetsADelayedItemWhenDue(t *testing.T) {
	// Serial: counts the binary's goroutines (interopStart checks NoGoroutinesLeft).
	g, conn, p := interopStart(t, startKazooPeer)
	const name = "reminders"
	queuePath := g.Root + "/queues/" + name
	p.queue("q", queuePath)

	data := []byte{'d', 'u', 'e', 0x00, 0xff}
	r := gwtest.Do(t, "POST", g.URL+"/v1/queues/"+name+"/items?delay=2s&priority=7", data)
	if r.Status != http.StatusCreated {
		t.Fatalf("delayed produce: %d %s", r.Status, r.Body)
	}
	var it struct {
		ID        string    `json:"id"`
		NotBefore time.Time `json:"not_before"`
	}
	ioDecode(t, r, &it)
	p.send("get q 0.05")
	p.expect("EMPTY q", interopWait)
	if st := icQueueState(t, g, name); st.Length != 0 {
		t.Fatalf("zkgate shows the delayed item in the queue: %+v", st)
	}
	g.Stop()
	next := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: g.Root})

	p.send("get q 20")
	entry, value := icGot(t, p, "q")
	if time.Now().Before(it.NotBefore) {
		t.Fatalf("kazoo got the item before its due time %v", it.NotBefore)
	}
	if !strings.HasPrefix(entry, "entry-007-") || string(value) != string(data) {
		t.Fatalf("kazoo got %s %q, want an entry-007- item %q", entry, value, data)
	}
	p.send("consume q")
	if l := p.expect("CONSUMED q ", interopWait); l != "CONSUMED q True" {
		t.Fatalf("kazoo consume: %q", l)
	}
	p.exit()
	if r := gwtest.Do(t, "DELETE", next.URL+"/v1/queues/"+name, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete the queue: %d %s", r.Status, r.Body)
	}
	gwtest.NoZnodesLeft(t, conn, g.Root)
}
