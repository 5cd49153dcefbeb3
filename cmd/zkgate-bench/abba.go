//go:build linux

package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// amount is what a side runs for: iterations or a duration.
type amount interface{ ~int | ~int64 }

// ab is the A/B runner. Every comparison of the gateway with another client
// (or with other binaries) runs its sides in passes, each pass every side
// once for the same amount, every other pass in reverse order: gateway
// other, other gateway, gateway other, ... (ABBA) for two sides; base this
// floor, floor this base for three. So drift of the shared machine hits
// every side alike. A warm-up runs every side once in order before, checked
// but not counted.
type ab[T amount] struct {
	// sides are the sides' names, the gateway's first: "gateway", "direct".
	sides []string
	// run runs one side for s.n.
	run func(s abRun[T]) error
	// between runs after each measured pass (nil: nothing).
	between func(n T) error
}

// abRun is one run of one side.
type abRun[T amount] struct {
	side int // its index in sides; 0: the gateway
	n    T
	warm bool   // a warm-up: checked, not counted
	name string // its side's name, "gateway warm-up" for a warm-up
}

// gateway says whether the run is the gateway's (side 0).
func (s abRun[T]) gateway() bool { return s.side == 0 }

// intoSides is a runner's run for two sides whose runs add into figures of
// their own: sums[side] for a measured run, warm[side] for a warm-up (checked,
// not counted). A run's error is named by its side.
func intoSides[S any](sums, warm [2]*S, run func(s abRun[time.Duration], into *S) error) func(abRun[time.Duration]) error {
	return func(s abRun[time.Duration]) error {
		into := sums[s.side]
		if s.warm {
			into = warm[s.side]
		}
		if err := run(s, into); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		return nil
	}
}

// warm runs a warm-up of n of each side, in order.
func (r ab[T]) warm(n T) error {
	for i, name := range r.sides {
		if err := r.run(abRun[T]{i, n, true, name + " warm-up"}); err != nil {
			return err
		}
	}
	return nil
}

// passes runs a measured pass of each of ns, every other one in reverse
// order, and returns the passes run.
func (r ab[T]) passes(ns ...T) (int, error) {
	for p, n := range ns {
		for k := range r.sides {
			i := k
			if p%2 == 1 {
				i = len(r.sides) - 1 - k
			}
			if err := r.run(abRun[T]{i, n, false, r.sides[i]}); err != nil {
				return p, err
			}
		}
		if r.between != nil {
			if err := r.between(n); err != nil {
				return p, err
			}
		}
	}
	return len(ns), nil
}

// blocks runs total of each side in passes of block, the last one short:
// G D, D G, G D, ...; it returns the passes (pairs of blocks) run.
func (r ab[T]) blocks(total, block T) (int, error) {
	var ns []T
	for done := T(0); done < total; done += min(block, total-done) {
		ns = append(ns, min(block, total-done))
	}
	return r.passes(ns...)
}

// halves runs total of each side in two passes, halves: G D D G.
func (r ab[T]) halves(total T) error {
	_, err := r.passes(total/2, total-total/2)
	return err
}

// warmHalves is a warm-up of warm, then halves of total: G D (warm-ups),
// G D D G.
func (r ab[T]) warmHalves(warm, total T) error {
	if err := r.warm(warm); err != nil {
		return err
	}
	return r.halves(total)
}

// rounds runs rounds pairs of passes of each of each side: B T T B,
// rounds times, for two sides.
func (r ab[T]) rounds(rounds int, each T) error {
	ns := make([]T, 2*rounds)
	for i := range ns {
		ns[i] = each
	}
	_, err := r.passes(ns...)
	return err
}

// warmUp is the warm-up of each side of a timed comparison of d: a second,
// or half of d if shorter.
func warmUp(d time.Duration) time.Duration { return min(time.Second, d/2) }

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
