package zkserver

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

const (
	tailBytes = 64 << 10 // enough for the stack trace of a failed start
	tailLines = 20
)

// bindMarker is what the JVM prints when a port we picked was taken before
// ZooKeeper could bind it (java.net.BindException).
var bindMarker = []byte("Address already in use")

// outputTail forwards the JVM's output to the configured writer while keeping
// its last bytes in memory: start failures quote them, and a bind error is
// noticed even when Output is not a file we could re-read, and even when the
// JVM keeps running (an ensemble member that cannot bind its election port).
type outputTail struct {
	w io.Writer

	mu     sync.Mutex
	buf    []byte
	bound  bool // bindMarker seen
	werr   error
	closed bool
}

func newOutputTail(w io.Writer) *outputTail { return &outputTail{w: w} }

func (t *outputTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Search the seam too: the marker may straddle two writes.
	seam := len(t.buf) - len(bindMarker) + 1
	t.buf = append(t.buf, p...)
	if !t.bound && bytes.Contains(t.buf[max(seam, 0):], bindMarker) {
		t.bound = true
	}
	if len(t.buf) > tailBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
	}
	// A failing user writer must not stall or kill the JVM (a full pipe would
	// block it): remember the error, keep draining.
	if t.w != nil && t.werr == nil && !t.closed {
		if _, err := t.w.Write(p); err != nil {
			t.werr = err
		}
	}
	return len(p), nil
}

// close stops forwarding; later writes (none are expected once the process is
// reaped) only feed the tail.
func (t *outputTail) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

func (t *outputTail) sawBindError() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bound
}

// lastLines returns up to n trailing lines of output.
func (t *outputTail) lastLines(n int) string {
	t.mu.Lock()
	s := strings.TrimRight(string(t.buf), "\n")
	t.mu.Unlock()
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
