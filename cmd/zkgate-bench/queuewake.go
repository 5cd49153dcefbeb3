//go:build linux

package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// queueWakeupPhase is section 6: a produce waking a waiting consumer.
var queueWakeupPhase = phase{
	name: "queue-wakeup",
	flags: func(fs *flag.FlagSet, c *config) {
		fs.IntVar(&c.qWakeups, "queue-wakeups", 300, "queue wake-up test: produces to a waiting consumer, each for the gateway and for the direct client")
	},
	quick: map[string]func(c *config){"queue-wakeups": func(c *config) { c.qWakeups = 50 }},
	check: func(c *config) error { return positive(c.qWakeups) },
	announce: func(c config) string {
		return fmt.Sprintf("6. queue take wake-up: %d each for gateway and direct", c.qWakeups)
	},
	what: "queue wake-up",
	run:  storeIn(func(r *report) *wakeResult { return &r.wake }, queueWakeup),
}

type wakeResult struct {
	n, blocks                int
	settle                   time.Duration
	emptyTake                summary // the gateway's take?wait=0 of the empty queue
	gw, direct               summary // produce sent .. item taken
	gwProduce, directProduce summary // the produce alone
	gwPackets, directPackets float64 // ZooKeeper packets received, all wake-ups
	cleanup, left            []string
	finished                 bool
	took                     time.Duration
}

func (r wakeResult) ratioP50() float64  { return float64(r.gw.p50) / float64(r.direct.p50) }
func (r wakeResult) ratioMean() float64 { return float64(r.gw.mean) / float64(r.direct.mean) }

const (
	takeWakeWait = 30 * time.Second
	wakeBlock    = 25
	// The pause between a waiting take's request written and the produce:
	// settleFactor times the p90 of a take of the empty queue, within
	// settleFloor..settleCap.
	settleFactor = 3
	settleFloor  = 20 * time.Millisecond
	settleCap    = 100 * time.Millisecond
)

// wakeRun is the wake-up test's clients and samples.
type wakeRun struct {
	ctx        context.Context
	c          *client
	gq         gwQueue
	dq         directQueue
	cons       *zk.Conn // the direct consumer's connection
	size       int      // of each item
	seq        int64
	gw, gwP    dist // wake-ups; the produce alone
	d, dP      dist
	gwPackets  float64
	dPackets   float64
	settle     time.Duration
	packetsNow func(context.Context) (float64, error)
}

// queueWakeup measures how soon a consumer blocked on an empty queue gets
// an item: through the gateway, a POST take?wait=30s, and directly, a
// consumer blocked on a children watch of the entries; each time from just
// before the produce is sent to the item taken (so the produce is
// included), in alternating blocks (ABBA).
func queueWakeup(ctx context.Context, e *env) (res wakeResult, err error) {
	res.n = e.cfg.qWakeups
	start := time.Now()
	defer func() { res.took = time.Since(start) }()
	c := newClient(e.gw.url, 4, takeWakeWait+time.Minute)
	defer c.close()
	conns, closeConns, err := dialConns(ctx, e.zkAddr, 2)
	if err != nil {
		return res, err
	}
	defer closeConns()
	prod, cons := conns[0], conns[1]
	w := &wakeRun{ctx: ctx, c: c, gq: gwQueue{c, queueWake}, cons: cons, size: e.cfg.qBytes, packetsNow: e.packets,
		dq: directQueue{base: directRoot + "/queues/" + queueWake, producers: []*zk.Conn{prod}, consumers: []*zk.Conn{cons}}}
	defer func() { // runs before res.took is set
		res.cleanup, res.left = removeQueues(ctx, e.conn, []gwQueue{w.gq}, []directQueue{w.dq})
	}()
	if err := w.dq.ensure(e.conn); err != nil {
		return res, err
	}
	if res.emptyTake, err = w.calibrate(); err != nil {
		return res, err
	}
	res.settle = min(max(settleFloor, settleFactor*res.emptyTake.p90), settleCap)
	w.settle = res.settle
	// The warm-ups alternate one wake-up of each side.
	r := ab[int]{sides: []string{"gateway", "direct"}, run: w.run}
	for range min(10, max(2, res.n/10)) {
		if err := r.warm(1); err != nil {
			return res, err
		}
	}
	if res.blocks, err = r.blocks(res.n, min(wakeBlock, max(1, res.n/4))); err != nil {
		return res, err
	}
	res.gw, res.gwProduce = summarize(w.gw), summarize(w.gwP)
	res.direct, res.directProduce = summarize(w.d), summarize(w.dP)
	res.gwPackets, res.directPackets = w.gwPackets, w.dPackets
	res.finished = true
	return res, nil
}

// calibrate times the gateway's take of the empty queue: a waiting take
// does the same before it parks, so a few times that is long enough to be
// sure it is parked before the produce.
func (w *wakeRun) calibrate() (summary, error) {
	var empty dist
	for i := 0; i < 20; i++ {
		t0 := time.Now()
		_, ok, err := w.gq.take(w.ctx, 0, 0)
		if err != nil {
			return summary{}, err
		}
		if ok {
			return summary{}, fmt.Errorf("queue %s is not empty", queueWake)
		}
		empty = append(empty, time.Since(t0))
	}
	return summarize(empty), nil
}

// run runs s.n wake-ups of one side: a warm-up, not counted, or a block,
// with ZooKeeper's packets around it.
func (w *wakeRun) run(s abRun[int]) error {
	once, lats, produces, packets := w.directOnce, &w.d, &w.dP, &w.dPackets
	if s.gateway() {
		once, lats, produces, packets = w.gwOnce, &w.gw, &w.gwP, &w.gwPackets
	}
	if s.warm {
		for range s.n {
			if _, _, err := once(); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
		return nil
	}
	p0, err := w.packetsNow(w.ctx)
	if err != nil {
		return err
	}
	for range s.n {
		lat, p, err := once()
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		*lats, *produces = append(*lats, lat), append(*produces, p)
	}
	p1, err := w.packetsNow(w.ctx)
	if err != nil {
		return err
	}
	*packets += p1 - p0
	return nil
}

// gwOnce is one wake-up through the gateway: a take?wait= written, the
// settle pause, then the produce.
func (w *wakeRun) gwOnce() (lat, produce time.Duration, err error) {
	ctx := w.ctx
	type answer struct {
		at  time.Time
		st  int
		b   []byte
		err error
	}
	answers := make(chan answer, 1)
	wrote := make(chan struct{})
	var once sync.Once
	tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(wrote) }) }})
	go func() {
		st, b, err := w.c.do(tctx, http.MethodPost, w.gq.takePath(takeWakeWait), nil)
		answers <- answer{time.Now(), st, b, err}
	}()
	early := func(a answer) error {
		return fmt.Errorf("the waiting take answered before the produce: status %d, %v: %s", a.st, a.err, truncate(a.b, 200))
	}
	select {
	case <-wrote:
	case a := <-answers:
		return 0, 0, early(a)
	}
	select {
	case <-time.After(w.settle):
	case a := <-answers:
		return 0, 0, early(a)
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	w.seq++
	data := payload("gw", w.seq, w.size)
	t0 := time.Now()
	st, b, perr := w.c.doRaw(ctx, http.MethodPost, w.gq.producePath(), data)
	produce = time.Since(t0)
	if err := expect("produce", st, b, perr, http.StatusCreated); err != nil {
		return 0, 0, err // the take ends with its wait, or with ctx
	}
	a := <-answers
	got, ok, err := takeAnswer(a.st, a.b, a.err)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, fmt.Errorf("the waiting take answered 204 after %s", a.at.Sub(t0))
	}
	if !bytes.Equal(got, data) {
		return 0, 0, fmt.Errorf("took %q, produced %q", truncate(got, 40), truncate(data, 40))
	}
	return a.at.Sub(t0), produce, nil
}

// directAnswer is what the direct consumer took, and when.
type directAnswer struct {
	at   time.Time
	data []byte
	ok   bool
	err  error
}

// directOnce is one wake-up of the direct recipe: a consumer blocked on a
// children watch, the settle pause, then the Create.
func (w *wakeRun) directOnce() (lat, produce time.Duration, err error) {
	ctx := w.ctx
	ready := make(chan error, 1)
	answers := make(chan directAnswer, 1)
	go w.directConsumer(ready, answers)
	if err := <-ready; err != nil {
		return 0, 0, fmt.Errorf("zk ChildrenW: %w", err)
	}
	select {
	case <-time.After(w.settle):
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	w.seq++
	data := payload("dw", w.seq, w.size)
	t0 := time.Now()
	perr := w.dq.produce(ctx, 0, data)
	produce = time.Since(t0)
	if perr != nil {
		return 0, 0, perr // the consumer goes when the connection closes
	}
	a := <-answers
	if a.err != nil {
		return 0, 0, a.err
	}
	if !a.ok {
		return 0, 0, fmt.Errorf("the waiting consumer took nothing within %s", takeWakeWait)
	}
	if !bytes.Equal(a.data, data) {
		return 0, 0, fmt.Errorf("took %q, produced %q", truncate(a.data, 40), truncate(data, 40))
	}
	return a.at.Sub(t0), produce, nil
}

// directConsumer blocks on a children watch of the empty queue's entries
// (ready once it is set) and takes the item that fires it.
func (w *wakeRun) directConsumer(ready chan<- error, answers chan<- directAnswer) {
	names, _, ch, err := w.cons.ChildrenW(w.dq.entries())
	if err == nil && len(names) > 0 {
		err = fmt.Errorf("the queue is not empty: %v", names)
	}
	ready <- err
	if err != nil {
		return
	}
	select {
	case <-ch:
	case <-w.ctx.Done():
		answers <- directAnswer{err: w.ctx.Err()}
		return
	}
	data, ok, _, err := w.dq.takeOnce(w.cons)
	if err == nil && !ok { // woken by something else: wait on
		data, ok, err = w.dq.takeOn(w.ctx, w.cons, takeWakeWait)
	}
	answers <- directAnswer{time.Now(), data, ok, err}
}
