//go:build linux

package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The A/B runner: every comparison of the gateway (A) with another client
// (B) alternates them in ABBA order, so that drift of the shared machine
// hits both alike.

// abbaBlocks runs total iterations of each side in blocks of at most block:
// gateway then other, other then gateway, and so on; between runs after
// each pair of blocks (nil: nothing). It returns the pairs of blocks run.
func abbaBlocks(total, block int, side func(n int, gateway bool) error, between func(n int) error) (int, error) {
	blocks := 0
	for done := 0; done < total; blocks++ {
		n := min(block, total-done)
		first := blocks%2 == 0 // ABBA: G D, D G, G D, ...
		if err := side(n, first); err != nil {
			return blocks, err
		}
		if err := side(n, !first); err != nil {
			return blocks, err
		}
		if between != nil {
			if err := between(n); err != nil {
				return blocks, err
			}
		}
		done += n
	}
	return blocks, nil
}

// abbaOrder is rounds of ts then ts reversed: a, b, b, a for two.
func abbaOrder[T any](rounds int, ts ...T) []T {
	var order []T
	for range rounds {
		order = append(order, ts...)
		for i := len(ts) - 1; i >= 0; i-- {
			order = append(order, ts[i])
		}
	}
	return order
}

// amount is what a side runs for: iterations or a duration.
type amount interface{ ~int | ~int64 }

// abbaStep is one run of abbaHalves.
type abbaStep[T amount] struct {
	gateway bool
	n       T
	measure bool // false: a warm-up, checked but not counted
	name    string
}

// abbaHalves runs a warm-up of each side, then total of each in two halves:
// gateway, other, other, gateway.
func abbaHalves[T amount](warm, total T, run func(s abbaStep[T]) error) error {
	half := total / 2
	for _, s := range []abbaStep[T]{
		{true, warm, false, "gateway warm-up"},
		{false, warm, false, "direct warm-up"},
		{true, half, true, "gateway"},
		{false, half, true, "direct"},
		{false, total - half, true, "direct"},
		{true, total - half, true, "gateway"},
	} {
		if err := run(s); err != nil {
			return err
		}
	}
	return nil
}

// inHalves runs a phase of dur on each side in ABBA halves, each side after
// a warm-up of a second (or half of dur if shorter) into warmGW and
// warmDirect, which are not counted.
func inHalves[S any](dur time.Duration, gwRun, directRun func(time.Duration, *S) error, warmGW, warmDirect, gw, direct *S) error {
	return abbaHalves(min(time.Second, dur/2), dur, func(s abbaStep[time.Duration]) error {
		run, into := directRun, direct
		switch {
		case s.gateway && s.measure:
			run, into = gwRun, gw
		case s.gateway:
			run, into = gwRun, warmGW
		case !s.measure:
			into = warmDirect
		}
		if err := run(s.n, into); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		return nil
	})
}

// window counts the cycles of one measured window: all of them, and those
// whose grant came before its deadline, with their times when kept.
type window struct {
	deadline  time.Time
	total, in atomic.Int64
	lats      []dist // per worker; nil: not kept
}

// newWindow is a window of d from now for n workers.
func newWindow(d time.Duration, n int, keepTimes bool) *window {
	w := &window{deadline: time.Now().Add(d)}
	if keepTimes {
		w.lats = make([]dist, n)
	}
	return w
}

// done counts worker i's cycle, sent at t0 and granted at at.
func (w *window) done(i int, t0, at time.Time) {
	w.total.Add(1)
	if at.Before(w.deadline) {
		w.in.Add(1)
		if w.lats != nil {
			w.lats[i] = append(w.lats[i], time.Since(t0))
		}
	}
}

// workers is goroutines each running a step in a loop until a deadline.
type workers struct {
	wg   sync.WaitGroup
	errs chan error
}

// loopUntil starts n goroutines, each calling step(i) until deadline passes
// or ctx ends; a goroutine whose step fails stops there.
func loopUntil(ctx context.Context, n int, deadline time.Time, step func(i int) error) *workers {
	w := &workers{errs: make(chan error, n)}
	for i := range n {
		w.wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if err := step(i); err != nil {
					w.errs <- err
					return
				}
			}
		})
	}
	return w
}

// wait waits for every goroutine and returns ctx's error, else the first
// step's error, else nil.
func (w *workers) wait(ctx context.Context) error {
	w.wg.Wait()
	close(w.errs)
	if err := ctx.Err(); err != nil {
		return err
	}
	return <-w.errs
}

// doneCh is closed once wg's count is zero, for a select that waits on
// more than wg.
func doneCh(wg *sync.WaitGroup) <-chan struct{} {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// waitOrCancel is wait, except that it returns ctx's error as soon as ctx
// ends: a zk.Lock takes no context, so a blocked Lock ends only when the
// caller closes its connection.
func (w *workers) waitOrCancel(ctx context.Context) error {
	select {
	case <-doneCh(&w.wg):
	case <-ctx.Done():
		return ctx.Err()
	}
	return w.wait(ctx)
}
