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
	run: func(ctx context.Context, e *env, rep *report) (err error) {
		rep.wake, err = e.queueWakeup(ctx)
		return err
	},
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

// queueWakeup measures how soon a consumer blocked on an empty queue gets
// an item: through the gateway, a POST take?wait=30s, and directly, a
// consumer blocked on a children watch of the entries; each time from just
// before the produce is sent to the item taken (so the produce is
// included), in alternating blocks (ABBA).
func (e *env) queueWakeup(ctx context.Context) (res wakeResult, err error) {
	cfg := e.cfg
	res.n = cfg.qWakeups
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
	gq := gwQueue{c, queueWake}
	dq := directQueue{base: directRoot + "/queues/" + queueWake, producers: []*zk.Conn{prod}, consumers: []*zk.Conn{cons}}
	defer func() { // runs before res.took is set
		res.cleanup, res.left = e.removeQueues(ctx, []gwQueue{gq}, []directQueue{dq})
	}()
	if err := dq.ensure(e.conn); err != nil {
		return res, err
	}

	var seq int64
	gwOnce := func(settle time.Duration) (lat, produce time.Duration, err error) {
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
			st, b, err := c.do(tctx, http.MethodPost, gq.takePath(takeWakeWait), nil)
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
		case <-time.After(settle):
		case a := <-answers:
			return 0, 0, early(a)
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
		seq++
		data := payload("gw", seq, cfg.qBytes)
		t0 := time.Now()
		st, b, perr := c.doRaw(ctx, http.MethodPost, gq.producePath(), data)
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

	directOnce := func(settle time.Duration) (lat, produce time.Duration, err error) {
		type answer struct {
			at   time.Time
			data []byte
			ok   bool
			err  error
		}
		ready := make(chan error, 1)
		answers := make(chan answer, 1)
		go func() {
			names, _, ch, err := cons.ChildrenW(dq.entries())
			if err == nil && len(names) > 0 {
				err = fmt.Errorf("the queue is not empty: %v", names)
			}
			ready <- err
			if err != nil {
				return
			}
			select {
			case <-ch:
			case <-ctx.Done():
				answers <- answer{err: ctx.Err()}
				return
			}
			data, ok, _, err := dq.takeOnce(cons)
			if err == nil && !ok { // woken by something else: wait on
				data, ok, err = dq.takeOn(ctx, cons, takeWakeWait)
			}
			answers <- answer{time.Now(), data, ok, err}
		}()
		if err := <-ready; err != nil {
			return 0, 0, fmt.Errorf("zk ChildrenW: %w", err)
		}
		select {
		case <-time.After(settle):
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
		seq++
		data := payload("dw", seq, cfg.qBytes)
		t0 := time.Now()
		perr := dq.produce(ctx, 0, data)
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

	// Warm up both, and time the gateway's take of the empty queue: a
	// waiting take does the same before it parks, so a few times that is
	// long enough to be sure it is parked before the produce.
	warm := min(10, max(2, res.n/10))
	var empty dist
	for i := 0; i < 20; i++ {
		t0 := time.Now()
		_, ok, err := gq.take(ctx, 0, 0)
		if err != nil {
			return res, err
		}
		if ok {
			return res, fmt.Errorf("queue %s is not empty", queueWake)
		}
		empty = append(empty, time.Since(t0))
	}
	res.emptyTake = summarize(empty)
	res.settle = min(max(settleFloor, settleFactor*res.emptyTake.p90), settleCap)
	for i := 0; i < warm; i++ {
		if _, _, err := gwOnce(res.settle); err != nil {
			return res, fmt.Errorf("gateway warm-up: %w", err)
		}
		if _, _, err := directOnce(res.settle); err != nil {
			return res, fmt.Errorf("direct warm-up: %w", err)
		}
	}

	block := min(wakeBlock, max(1, res.n/4))
	var gw, gwP, d, dP dist
	runBlock := func(n int, gateway bool) error {
		p0, err := e.packets(ctx)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if gateway {
				lat, p, err := gwOnce(res.settle)
				if err != nil {
					return fmt.Errorf("gateway: %w", err)
				}
				gw, gwP = append(gw, lat), append(gwP, p)
			} else {
				lat, p, err := directOnce(res.settle)
				if err != nil {
					return fmt.Errorf("direct: %w", err)
				}
				d, dP = append(d, lat), append(dP, p)
			}
		}
		p1, err := e.packets(ctx)
		if err != nil {
			return err
		}
		if gateway {
			res.gwPackets += p1 - p0
		} else {
			res.directPackets += p1 - p0
		}
		return nil
	}
	for done, b := 0, 0; done < res.n; b++ {
		n := min(block, res.n-done)
		first := b%2 == 0 // ABBA: G D, D G, ...
		if err := runBlock(n, first); err != nil {
			return res, err
		}
		if err := runBlock(n, !first); err != nil {
			return res, err
		}
		done += n
		res.blocks = b + 1
	}
	res.gw, res.gwProduce = summarize(gw), summarize(gwP)
	res.direct, res.directProduce = summarize(d), summarize(dP)
	res.finished = true
	return res, nil
}
