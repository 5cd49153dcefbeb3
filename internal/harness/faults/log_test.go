package faults

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// overlapWriter records whether two Writes ever ran at once.
type overlapWriter struct {
	inFlight atomic.Int32
	overlap  atomic.Bool
}

func (w *overlapWriter) Write(p []byte) (int, error) {
	if w.inFlight.Add(1) > 1 {
		w.overlap.Store(true)
	}
	for i := 0; i < 10; i++ {
		runtime.Gosched() // a Write that takes a while, as a file's or a pipe's can
	}
	w.inFlight.Add(-1)
	return len(p), nil
}

// The fault loops log at once; each progress line reaches Config.Log as a
// Write of its own, never beside another, so a writer that is not safe for
// concurrent use (a bytes.Buffer, a test's log) is not raced.
func TestProgressLinesAreWrittenOneAtATime(t *testing.T) {
	t.Parallel()
	w := &overlapWriter{}
	r := &runner{cfg: Config{Log: w}}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				r.logf("loop %d line %d", g, i)
			}
		}(g)
	}
	wg.Wait()
	if w.overlap.Load() {
		t.Fatal("two progress lines were written to Config.Log at once")
	}
}
