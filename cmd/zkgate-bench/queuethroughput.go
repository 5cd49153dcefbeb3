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

// queueThroughputPhase is section 5: produce + take, sequentially and
// concurrently.
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
	run:  storeIn(func(r *report) *queueResult { return &r.queue }, queueThroughput),
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

// queueBench is the queue-throughput phase's queues on both sides.
type queueBench struct {
	e             *env
	res           *queueResult
	gwSeq, gwConc gwQueue
	dSeq, dConc   directQueue
	gwNext, dNext atomic.Int64 // the items' ids, per side
}

// queueThroughput measures produce + take through the gateway and with the
// same recipe on direct connections: sequentially (one producer fills the
// queue, then one consumer empties it) and concurrently (producers and
// consumers at once), in ABBA order, checking that every item is taken
// exactly once.
func queueThroughput(ctx context.Context, e *env) (res queueResult, err error) {
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

	q := &queueBench{e: e, res: &res, gwSeq: gwQueue{c, queueSeq}, gwConc: gwQueue{c, queueConc},
		dSeq:  directQueue{base: directRoot + "/queues/" + queueSeq, producers: prods, consumers: cons},
		dConc: directQueue{base: directRoot + "/queues/" + queueConc, producers: prods, consumers: cons}}
	defer func() { // runs before res.took is set
		res.cleanup, res.left = removeQueues(ctx, e.conn, []gwQueue{q.gwSeq, q.gwConc}, []directQueue{q.dSeq, q.dConc})
	}()
	for _, dq := range []directQueue{q.dSeq, q.dConc} {
		if err := dq.ensure(e.conn); err != nil {
			return res, err
		}
	}
	if err := q.sequential(ctx); err != nil {
		return res, err
	}
	if err := q.concurrent(ctx); err != nil {
		return res, err
	}
	res.finished = true
	return res, nil
}

// sequential runs the sequential test: warm-ups (checked, not counted),
// then G D D G, with the gateway's own figures read around the measured
// runs.
func (q *queueBench) sequential(ctx context.Context) error {
	e, res := q.e, q.res
	gwLed, dLed := newLedger(), newLedger()
	var before map[string]float64
	scraped := false
	err := ab[int]{sides: []string{"gateway", "direct"}, run: func(s abRun[int]) (err error) {
		qc, side, led, next, tag, client := queueClient(q.dSeq), &res.direct, dLed, &q.dNext, "ds", "direct"
		if s.gateway() {
			qc, side, led, next, tag, client = q.gwSeq, &res.gw, gwLed, &q.gwNext, "gs", "gateway"
		}
		if s.n == 0 {
			return nil
		}
		if !s.warm && !scraped {
			if before, err = e.gw.scrape(ctx); err != nil {
				return err
			}
			scraped = true
		}
		run, fifo, err := q.sequentialRun(ctx, qc, tag, next, led, s.n)
		side.fifoViolations += fifo
		if err != nil {
			return fmt.Errorf("sequential %s: %w", tag, err)
		}
		if !s.warm {
			run.client = client
			res.runs = append(res.runs, run)
			side.addSequential(run)
		}
		return nil
	}}.warmHalves(min(100, max(1, e.cfg.qItems/10)), e.cfg.qItems)
	if err != nil {
		return err
	}
	after, err := e.gw.scrape(ctx)
	if err != nil {
		return err
	}
	res.serverProduce = serverMean(before, after, "/v1/queues/{name}/items")
	res.serverTake = serverMean(before, after, "/v1/queues/{name}/take")
	res.gw.seq, res.direct.seq = gwLed.check(), dLed.check()
	return nil
}

// addSequential adds one measured sequential run.
func (s *queueSide) addSequential(run queueRun) {
	s.seqItems += run.items
	s.seqProduce += run.produce
	s.seqTake += run.take
	s.seqProducePackets += run.producePackets
	s.seqTakePackets += run.takePackets
}

// concurrent runs the concurrent test: warm-ups, then G D D G halves.
func (q *queueBench) concurrent(ctx context.Context) error {
	e, res := q.e, q.res
	gwLed, dLed := newLedger(), newLedger()
	gwPaths := [2]string{gatewayRoot + "/queues/" + queueConc + "/entries", gatewayRoot + "/queues/" + queueConc + "/taken"}
	err := ab[time.Duration]{sides: []string{"gateway", "direct"}, run: func(st abRun[time.Duration]) error {
		qc, paths, s, led, next, tag := queueClient(q.dConc), [2]string{q.dConc.entries(), q.dConc.taken()}, &res.direct, dLed, &q.dNext, "dc"
		if st.gateway() {
			qc, paths, s, led, next, tag = q.gwConc, gwPaths, &res.gw, gwLed, &q.gwNext, "gc"
		}
		seg, err := q.concurrentSegment(ctx, qc, paths, tag, next, led, st.n)
		if err != nil {
			return fmt.Errorf("concurrent %s: %w", tag, err)
		}
		if !st.warm {
			s.produced += seg.producedIn
			s.taken += seg.takenIn
			s.segItems += seg.taken
			s.segPackets += seg.packets
			s.elapsed += st.n
			s.segments++
			s.maxDrain = max(s.maxDrain, seg.drain)
		}
		return nil
	}}.warmHalves(min(time.Second, e.cfg.qDur/2/4), e.cfg.qDur)
	if err != nil {
		return err
	}
	res.gw.conc, res.direct.conc = gwLed.check(), dLed.check()
	return nil
}

// sequentialRun produces n items with producer 0, then takes n with
// consumer 0 (no wait: the queue is full), and counts takes out of FIFO
// order.
func (qb *queueBench) sequentialRun(ctx context.Context, q queueClient, tag string, next *atomic.Int64, led *ledger, n int) (queueRun, int, error) {
	e := qb.e
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

// segment is one concurrent segment on one side.
type segment struct {
	e                                    *env
	q                                    queueClient
	tag                                  string
	next                                 *atomic.Int64
	led                                  *ledger
	deadline                             time.Time
	tokens                               chan struct{} // items produced and not yet taken
	cctx                                 context.Context
	cancel                               context.CancelFunc
	errs                                 chan error
	produced, taken, producedIn, takenIn atomic.Int64
}

// fail records err and stops the segment.
func (s *segment) fail(err error) {
	s.errs <- err
	s.cancel()
}

// concurrentSegment runs the producers and consumers for d; a producer
// waits while cfg.qBacklog items are produced and not yet taken, so the
// queue stays short. Then the producers stop and the consumers drain the
// queue. paths are the queue's entries and taken directories, to tell
// when it is empty.
func (qb *queueBench) concurrentSegment(ctx context.Context, q queueClient, paths [2]string, tag string, next *atomic.Int64, led *ledger, d time.Duration) (segResult, error) {
	e := qb.e
	var res segResult
	np, nc := e.cfg.qProducers, e.cfg.qConsumers
	s := &segment{e: e, q: q, tag: tag, next: next, led: led, tokens: make(chan struct{}, e.cfg.qBacklog), errs: make(chan error, np+nc)}
	s.cctx, s.cancel = context.WithCancel(ctx)
	defer s.cancel()
	p0, err := e.packets(ctx)
	if err != nil {
		return res, err
	}
	s.deadline = time.Now().Add(d)
	pctx, pcancel := context.WithDeadline(s.cctx, s.deadline)
	defer pcancel()
	var pwg, cwg sync.WaitGroup
	for i := 0; i < np; i++ {
		pwg.Go(func() { s.produce(pctx, i) })
	}
	for i := 0; i < nc; i++ {
		cwg.Go(func() { s.consume(i) })
	}
	pwg.Wait()
	drainStart := time.Now()
	drainErr := s.drain(paths)
	res.drain = time.Since(drainStart)
	// Stop the consumers with one stop item each rather than by cutting
	// their takes off: a take whose client is gone is work the gateway may
	// still be doing when the queue is deleted.
	if drainErr == nil && s.cctx.Err() == nil {
		for i := 0; i < nc; i++ {
			if err := q.produce(s.cctx, i%np, payload(string(stopItem[:len(stopItem)-1]), int64(i), e.cfg.qBytes)); err != nil {
				s.fail(err)
				break
			}
		}
	} else {
		s.cancel()
	}
	cwg.Wait()
	s.cancel()
	close(s.errs)
	if err := firstError(ctx.Err(), <-s.errs, drainErr); err != nil {
		return res, err
	}
	p1, err := e.packets(ctx)
	if err != nil {
		return res, err
	}
	res.packets = p1 - p0
	res.producedIn, res.takenIn = s.producedIn.Load(), s.takenIn.Load()
	res.produced, res.taken = s.produced.Load(), s.taken.Load()
	return res, nil
}

// produce is producer i: it produces until pctx ends, waiting for a token
// of the backlog before each item.
func (s *segment) produce(pctx context.Context, i int) {
	for {
		select {
		case s.tokens <- struct{}{}:
		case <-pctx.Done():
			return
		}
		if pctx.Err() != nil {
			<-s.tokens
			return
		}
		data := payload(s.tag, s.next.Add(1), s.e.cfg.qBytes)
		// Not pctx: a produce cut off at the deadline could add an item
		// without our knowing.
		if err := s.q.produce(s.cctx, i, data); err != nil {
			if s.cctx.Err() == nil {
				s.fail(err)
			}
			return
		}
		s.led.addProduced(data)
		s.produced.Add(1)
		if time.Now().Before(s.deadline) {
			s.producedIn.Add(1)
		}
	}
}

// consume is consumer i: it takes, waiting on an empty queue, until it
// takes a stop item or the segment ends.
func (s *segment) consume(i int) {
	for s.cctx.Err() == nil {
		data, ok, err := s.q.take(s.cctx, i, concurrentTakeWait)
		if ok && bytes.HasPrefix(data, stopItem) {
			return
		}
		if ok {
			s.led.addTaken(data)
			s.taken.Add(1)
			if time.Now().Before(s.deadline) {
				s.takenIn.Add(1)
			}
			select {
			case <-s.tokens:
			default:
			}
		}
		if s.cctx.Err() != nil {
			return
		}
		if err != nil {
			s.fail(err)
			return
		}
	}
}

// drain waits until every item produced is taken, or ZooKeeper shows the
// queue empty with takes missing (lost items: the ledger tells), or 60s.
func (s *segment) drain(paths [2]string) error {
	limit := time.Now().Add(time.Minute)
	var emptySeen int
	var lastCheck time.Time
	for s.cctx.Err() == nil && s.taken.Load() < s.produced.Load() {
		if time.Now().After(limit) {
			return fmt.Errorf("%d items produced and not taken a minute after the producers stopped", s.produced.Load()-s.taken.Load())
		}
		if time.Since(lastCheck) > 250*time.Millisecond {
			lastCheck = time.Now()
			empty, err := s.empty(paths)
			if err != nil {
				return err
			}
			if empty {
				emptySeen++
			} else {
				emptySeen = 0
			}
			if emptySeen >= 3 {
				return nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// empty says whether ZooKeeper shows the queue's directories empty; it
// lists both every time, so that every drain costs ZooKeeper the same.
func (s *segment) empty(paths [2]string) (bool, error) {
	empty := true
	for _, p := range paths {
		kids, _, err := s.e.conn.Children(p)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return false, err
		}
		empty = empty && len(kids) == 0
	}
	return empty, nil
}
