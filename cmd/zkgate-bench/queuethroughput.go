//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

var queueThroughputPhase = phase{
	name: "queue-throughput",
	flags: func(fs *flag.FlagSet, c *config) {
		fs.IntVar(&c.qItems, "queue-items", 2000, "sequential queue test: items per client, produced by one producer and then taken by one consumer, in two ABBA runs of half each")
		fs.IntVar(&c.qProducers, "queue-producers", 4, "concurrent queue test: producers")
		fs.IntVar(&c.qConsumers, "queue-consumers", 4, "concurrent queue test: consumers")
		fs.DurationVar(&c.qDur, "queue-duration", 6*time.Second, "concurrent queue test: run time, each for the gateway and for the direct client (run as two halves, ABBA)")
		fs.IntVar(&c.qBacklog, "queue-backlog", 32, "concurrent queue test: producers wait while this many items are produced and not yet taken")
		fs.IntVar(&c.qBytes, "queue-bytes", 100, "size of each queue item")
	},
	quick: map[string]func(c *config){
		"queue-items":    func(c *config) { c.qItems = 300 },
		"queue-duration": func(c *config) { c.qDur = 2 * time.Second },
	},
	check: func(c *config) error {
		switch {
		case c.qItems < 2:
			return errors.New("-queue-items must be at least 2")
		case c.qBytes < 32:
			return errors.New("-queue-bytes must be at least 32 (the items carry a unique id)")
		}
		return firstError(positive(c.qProducers, c.qConsumers, c.qBacklog), durations(c.qDur >= 200*time.Millisecond))
	},
	announce: func(c config) string {
		return fmt.Sprintf("5. queue throughput: %d items sequentially, then %d producers and %d consumers for %s, each for gateway and direct",
			c.qItems, c.qProducers, c.qConsumers, c.qDur)
	},
	what: "queue throughput",
	run: func(ctx context.Context, e *env, rep *report) (err error) {
		rep.queue, err = e.queueThroughput(ctx)
		return err
	},
}

// queueRun is one sequential run: n items produced by one producer, then
// taken by one consumer.
type queueRun struct {
	client                      string
	items                       int
	produce, take               time.Duration
	producePackets, takePackets float64 // ZooKeeper packets received meanwhile
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// queueSide is one client's results.
type queueSide struct {
	// Sequential, the measured runs together.
	seqItems                          int
	seqProduce, seqTake               time.Duration
	seqProducePackets, seqTakePackets float64
	fifoViolations                    int
	seq                               delivery // warm-up included

	// Concurrent, the measured windows together.
	produced, taken int64 // inside the windows
	segItems        int64 // all items of the measured segments, drains included
	segPackets      float64
	elapsed         time.Duration
	segments        int
	maxDrain        time.Duration
	conc            delivery // warm-up included
}

func (s queueSide) seqProduceRate() float64 { return rate(int64(s.seqItems), s.seqProduce) }
func (s queueSide) seqTakeRate() float64    { return rate(int64(s.seqItems), s.seqTake) }

// seqRate is items per second through the queue: produced, then taken.
func (s queueSide) seqRate() float64 { return rate(int64(s.seqItems), s.seqProduce+s.seqTake) }

func (s queueSide) concRate() float64        { return rate(s.taken, s.elapsed) }
func (s queueSide) concProduceRate() float64 { return rate(s.produced, s.elapsed) }

func perItem(packets float64, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return packets / float64(n)
}

type queueResult struct {
	items, producers, consumers, size, backlog int
	runs                                       []queueRun
	gw, direct                                 queueSide
	serverProduce, serverTake                  time.Duration
	cleanup                                    []string // what went wrong removing the queues
	left                                       []string // queue paths still in ZooKeeper at the end
	finished                                   bool
	took                                       time.Duration
}

func (r queueResult) seqRatio() float64  { return r.gw.seqRate() / r.direct.seqRate() }
func (r queueResult) concRatio() float64 { return r.gw.concRate() / r.direct.concRate() }

func (r queueResult) delivery() delivery {
	return r.gw.seq.add(r.gw.conc).add(r.direct.seq).add(r.direct.conc)
}

func (r queueResult) fifoViolations() int { return r.gw.fifoViolations + r.direct.fifoViolations }

// queueThroughput measures produce + take through the gateway and with the
// same recipe on direct connections: sequentially (one producer fills the
// queue, then one consumer empties it) and concurrently (producers and
// consumers at once), in ABBA order, checking that every item is taken
// exactly once.
func (e *env) queueThroughput(ctx context.Context) (res queueResult, err error) {
	cfg := e.cfg
	np, nc := cfg.qProducers, cfg.qConsumers
	res = queueResult{items: cfg.qItems, producers: np, consumers: nc, size: cfg.qBytes, backlog: cfg.qBacklog}
	start := time.Now()
	defer func() { res.took = time.Since(start) }()
	c := newClient(e.gw.url, 2*(np+nc)+4, time.Minute)
	defer c.close()
	prods, closeProds, err := dialConns(ctx, e.zkAddr, np)
	if err != nil {
		return res, err
	}
	defer closeProds()
	cons, closeCons, err := dialConns(ctx, e.zkAddr, nc)
	if err != nil {
		return res, err
	}
	defer closeCons()

	gwSeq, gwConc := gwQueue{c, queueSeq}, gwQueue{c, queueConc}
	dSeq := directQueue{base: directRoot + "/queues/" + queueSeq, producers: prods, consumers: cons}
	dConc := directQueue{base: directRoot + "/queues/" + queueConc, producers: prods, consumers: cons}
	defer func() { // runs before res.took is set
		res.cleanup, res.left = e.removeQueues(ctx, []gwQueue{gwSeq, gwConc}, []directQueue{dSeq, dConc})
	}()
	for _, q := range []directQueue{dSeq, dConc} {
		if err := q.ensure(e.conn); err != nil {
			return res, err
		}
	}

	// Sequential: warm-ups (checked, not counted), then G D D G.
	gwLed, dLed := newLedger(), newLedger()
	var gwNext, dNext atomic.Int64
	warm := min(100, max(1, cfg.qItems/10))
	half := cfg.qItems / 2
	type seqStep struct {
		q       queueClient
		side    *queueSide
		led     *ledger
		next    *atomic.Int64
		tag     string
		n       int
		measure bool
	}
	gwStep := func(n int, measure bool) seqStep {
		return seqStep{gwSeq, &res.gw, gwLed, &gwNext, "gs", n, measure}
	}
	dStep := func(n int, measure bool) seqStep {
		return seqStep{dSeq, &res.direct, dLed, &dNext, "ds", n, measure}
	}
	var before map[string]float64
	for i, st := range []seqStep{gwStep(warm, false), dStep(warm, false),
		gwStep(half, true), dStep(half, true), dStep(cfg.qItems-half, true), gwStep(cfg.qItems-half, true)} {
		if st.n == 0 {
			continue
		}
		if i == 2 {
			if before, err = e.gw.scrape(ctx); err != nil {
				return res, err
			}
		}
		run, fifo, err := e.sequentialRun(ctx, st.q, st.tag, st.next, st.led, st.n)
		st.side.fifoViolations += fifo
		if err != nil {
			return res, fmt.Errorf("sequential %s: %w", st.tag, err)
		}
		if !st.measure {
			continue
		}
		run.client = "gateway"
		if st.side == &res.direct {
			run.client = "direct"
		}
		res.runs = append(res.runs, run)
		s := st.side
		s.seqItems += run.items
		s.seqProduce += run.produce
		s.seqTake += run.take
		s.seqProducePackets += run.producePackets
		s.seqTakePackets += run.takePackets
	}
	after, err := e.gw.scrape(ctx)
	if err != nil {
		return res, err
	}
	res.serverProduce = serverMean(before, after, "/v1/queues/{name}/items")
	res.serverTake = serverMean(before, after, "/v1/queues/{name}/take")
	res.gw.seq, res.direct.seq = gwLed.check(), dLed.check()

	// Concurrent: warm-ups, then G D D G halves.
	gwLed, dLed = newLedger(), newLedger()
	halfDur := cfg.qDur / 2
	warmDur := min(time.Second, halfDur/4)
	type concStep struct {
		q       queueClient
		paths   [2]string
		side    *queueSide
		led     *ledger
		next    *atomic.Int64
		tag     string
		d       time.Duration
		measure bool
	}
	gwPaths := [2]string{gatewayRoot + "/queues/" + queueConc + "/entries", gatewayRoot + "/queues/" + queueConc + "/taken"}
	gwC := func(d time.Duration, measure bool) concStep {
		return concStep{gwConc, gwPaths, &res.gw, gwLed, &gwNext, "gc", d, measure}
	}
	dC := func(d time.Duration, measure bool) concStep {
		return concStep{dConc, [2]string{dConc.entries(), dConc.taken()}, &res.direct, dLed, &dNext, "dc", d, measure}
	}
	for _, st := range []concStep{gwC(warmDur, false), dC(warmDur, false),
		gwC(halfDur, true), dC(halfDur, true), dC(cfg.qDur-halfDur, true), gwC(cfg.qDur-halfDur, true)} {
		seg, err := e.concurrentSegment(ctx, st.q, st.paths, st.tag, st.next, st.led, st.d)
		if err != nil {
			return res, fmt.Errorf("concurrent %s: %w", st.tag, err)
		}
		if !st.measure {
			continue
		}
		s := st.side
		s.produced += seg.producedIn
		s.taken += seg.takenIn
		s.segItems += seg.taken
		s.segPackets += seg.packets
		s.elapsed += st.d
		s.segments++
		s.maxDrain = max(s.maxDrain, seg.drain)
	}
	res.gw.conc, res.direct.conc = gwLed.check(), dLed.check()
	res.finished = true
	return res, nil
}

// sequentialRun produces n items with producer 0, then takes n with
// consumer 0 (no wait: the queue is full), and counts takes out of FIFO
// order.
func (e *env) sequentialRun(ctx context.Context, q queueClient, tag string, next *atomic.Int64, led *ledger, n int) (queueRun, int, error) {
	run := queueRun{items: n}
	p0, err := e.packets(ctx)
	if err != nil {
		return run, 0, err
	}
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return run, 0, err
		}
		data := payload(tag, next.Add(1), e.cfg.qBytes)
		if err := q.produce(ctx, 0, data); err != nil {
			return run, 0, err
		}
		led.addProduced(data)
	}
	run.produce = time.Since(t0)
	p1, err := e.packets(ctx)
	if err != nil {
		return run, 0, err
	}
	fifo := 0
	last := int64(-1)
	t1 := time.Now()
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return run, fifo, err
		}
		data, ok, err := q.take(ctx, 0, 0)
		if err != nil {
			return run, fifo, err
		}
		if !ok {
			return run, fifo, fmt.Errorf("the queue was empty after %d of %d takes", i, n)
		}
		led.addTaken(data)
		if s, ok := payloadSeq(data); !ok || s <= last {
			fifo++
		} else {
			last = s
		}
	}
	run.take = time.Since(t1)
	p2, err := e.packets(ctx)
	if err != nil {
		return run, fifo, err
	}
	run.producePackets, run.takePackets = p1-p0, p2-p1
	return run, fifo, nil
}

// segResult is one concurrent segment.
type segResult struct {
	producedIn, takenIn int64 // inside the window
	produced, taken     int64 // all
	packets             float64
	drain               time.Duration
}

// stopItem starts the items that tell a consumer to stop.
var stopItem = []byte("stop-")

// concurrentTakeWait is the wait of each take of the concurrent test: a
// consumer that finds the queue empty blocks instead of polling.
const concurrentTakeWait = 5 * time.Second

// concurrentSegment runs the producers and consumers for d; a producer
// waits while cfg.qBacklog items are produced and not yet taken, so the
// queue stays short. Then the producers stop and the consumers drain the
// queue. paths are the queue's entries and taken directories, to tell
// when it is empty.
func (e *env) concurrentSegment(ctx context.Context, q queueClient, paths [2]string, tag string, next *atomic.Int64, led *ledger, d time.Duration) (segResult, error) {
	var res segResult
	np, nc := e.cfg.qProducers, e.cfg.qConsumers
	var produced, taken, producedIn, takenIn atomic.Int64
	tokens := make(chan struct{}, e.cfg.qBacklog)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, np+nc)
	fail := func(err error) {
		errs <- err
		cancel()
	}
	p0, err := e.packets(ctx)
	if err != nil {
		return res, err
	}
	deadline := time.Now().Add(d)
	pctx, pcancel := context.WithDeadline(cctx, deadline)
	defer pcancel()
	var pwg, cwg sync.WaitGroup
	for i := 0; i < np; i++ {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for {
				select {
				case tokens <- struct{}{}:
				case <-pctx.Done():
					return
				}
				if pctx.Err() != nil {
					<-tokens
					return
				}
				data := payload(tag, next.Add(1), e.cfg.qBytes)
				// Not pctx: a produce cut off at the deadline could add an
				// item without our knowing.
				if err := q.produce(cctx, i, data); err != nil {
					if cctx.Err() == nil {
						fail(err)
					}
					return
				}
				led.addProduced(data)
				produced.Add(1)
				if time.Now().Before(deadline) {
					producedIn.Add(1)
				}
			}
		}()
	}
	for i := 0; i < nc; i++ {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for cctx.Err() == nil {
				data, ok, err := q.take(cctx, i, concurrentTakeWait)
				if ok && bytes.HasPrefix(data, stopItem) {
					return
				}
				if ok {
					led.addTaken(data)
					taken.Add(1)
					if time.Now().Before(deadline) {
						takenIn.Add(1)
					}
					select {
					case <-tokens:
					default:
					}
				}
				if cctx.Err() != nil {
					return
				}
				if err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	pwg.Wait()

	// Drain: until every item produced is taken, or ZooKeeper shows the
	// queue empty with takes missing (lost items), or 60s.
	drainStart := time.Now()
	limit := drainStart.Add(time.Minute)
	var emptySeen int
	var lastCheck time.Time
	var drainErr error
	for cctx.Err() == nil && taken.Load() < produced.Load() {
		if time.Now().After(limit) {
			drainErr = fmt.Errorf("%d items produced and not taken a minute after the producers stopped", produced.Load()-taken.Load())
			break
		}
		if time.Since(lastCheck) > 250*time.Millisecond {
			lastCheck = time.Now()
			empty := true
			for _, p := range paths {
				kids, _, err := e.conn.Children(p)
				if err != nil && !errors.Is(err, zk.ErrNoNode) {
					drainErr = err
					break
				}
				empty = empty && len(kids) == 0
			}
			if drainErr != nil {
				break
			}
			if empty {
				emptySeen++
			} else {
				emptySeen = 0
			}
			if emptySeen >= 3 {
				break // the missing items are lost; the ledger tells
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.drain = time.Since(drainStart)
	// Stop the consumers with one stop item each rather than by cutting
	// their takes off: a take whose client is gone is work the gateway may
	// still be doing when the queue is deleted.
	if drainErr == nil && cctx.Err() == nil {
		for i := 0; i < nc; i++ {
			if err := q.produce(cctx, i%np, payload(string(stopItem[:len(stopItem)-1]), int64(i), e.cfg.qBytes)); err != nil {
				fail(err)
				break
			}
		}
	} else {
		cancel()
	}
	cwg.Wait()
	cancel()
	close(errs)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if err := <-errs; err != nil {
		return res, err
	}
	if drainErr != nil {
		return res, drainErr
	}
	p1, err := e.packets(ctx)
	if err != nil {
		return res, err
	}
	res.packets = p1 - p0
	res.producedIn, res.takenIn = producedIn.Load(), takenIn.Load()
	res.produced, res.taken = produced.Load(), taken.Load()
	return res, nil
}

// removeQueues deletes the gateway's queues with DELETE /v1/queues/{name}
// and the direct client's recursively, and lists what is left.
func (e *env) removeQueues(ctx context.Context, gws []gwQueue, ds []directQueue) (problems, left []string) {
	if ctx.Err() != nil {
		ctx = context.Background() // interrupted: still clean up
	}
	var paths []string
	for _, q := range gws {
		if err := q.remove(ctx, e.conn); err != nil {
			problems = append(problems, err.Error())
		}
		paths = append(paths, gatewayRoot+"/queues/"+q.name)
	}
	for _, q := range ds {
		if err := q.remove(e.conn); err != nil {
			problems = append(problems, fmt.Sprintf("delete %s: %v", q.base, err))
		}
		paths = append(paths, q.base)
	}
	left, err := leftovers(e.conn, paths...)
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, p := range left {
		problems = append(problems, fmt.Sprintf("%s was still in ZooKeeper after its DELETE: removed recursively", p))
		if err := deleteTree(e.conn, p); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return problems, left
}
