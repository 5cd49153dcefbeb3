package zk

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// writeRecorder is a net.Conn that keeps each Write's packets (their
// opcodes) and answers nothing.
type writeRecorder struct {
	net.Conn
	mu     sync.Mutex
	writes [][]int32
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	var ops []int32
	for b := p; len(b) >= 12; {
		size := int(binary.BigEndian.Uint32(b[:4]))
		ops = append(ops, int32(binary.BigEndian.Uint32(b[8:12])))
		b = b[4+size:]
	}
	w.mu.Lock()
	w.writes = append(w.writes, ops)
	w.mu.Unlock()
	return len(p), nil
}

func (w *writeRecorder) SetWriteDeadline(time.Time) error { return nil }
func (w *writeRecorder) Close() error                     { return nil }

// unsentConn is a Conn with no loops running: what its callers queue stays
// on sendChan for the test to take.
func unsentConn(bufSize int) (*Conn, *writeRecorder) {
	w := &writeRecorder{}
	return &Conn{
		shouldQuit: make(chan struct{}),
		closeChan:  make(chan struct{}),
		sendChan:   make(chan *request, sendChanSize),
		requests:   make(map[int32]*request),
		buf:        make([]byte, bufSize),
		conn:       w,
		logger:     DefaultLogger,
	}, w
}

// TestCreateThenChildrenQueuedAsOne: the create and the listing of
// CreateWithStatThenChildren reach the send loop as one piece. Queued one
// after the other, the send loop could take and write the create before the
// caller had queued the listing (a caller descheduled in between, as under
// the race detector), and the listing then went out after the create's
// reply had come back: a round trip more for the waiters it is for.
func TestCreateThenChildrenQueuedAsOne(t *testing.T) {
	c, w := unsentConn(bufferSize)
	go func() {
		_, _, _, _ = c.CreateWithStatThenChildren("/q/entry-", []byte("x"), FlagSequence, WorldACL(PermAll), "/q")
	}()
	first := <-c.sendChan
	if first.opcode != opCreate2 || first.then == nil || first.then.opcode != opGetChildren2 || first.then.then != nil {
		t.Fatalf("the send loop took the create without the listing behind it: %+v", first)
	}
	select {
	case r := <-c.sendChan:
		t.Fatalf("a request queued apart: %+v", r)
	default:
	}
	if _, err := c.sendBatch(first, nil); err != nil {
		t.Fatal(err)
	}
	if len(w.writes) != 1 || len(w.writes[0]) != 2 || w.writes[0][0] != opCreate2 || w.writes[0][1] != opGetChildren2 {
		t.Fatalf("writes %v; want the create and the listing in one", w.writes)
	}
	close(c.shouldQuit) // the caller gives up waiting
}

// TestGroupStartsAfterABatchItDoesNotFit: requests queued as one that do
// not fit behind the batch before them are written after it, together; a
// group longer than the whole buffer goes out in order, a Write at a time.
func TestGroupStartsAfterABatchItDoesNotFit(t *testing.T) {
	const size = 4096
	c, w := unsentConn(size)
	get := func(p string) *request {
		return c.newRequest(opGetData, &getDataRequest{Path: p}, &getDataResponse{}, nil)
	}
	create := func(data int) *request {
		return c.newRequest(opCreate, &CreateRequest{Path: "/big", Data: make([]byte, data), Acl: WorldACL(PermAll)}, &createResponse{}, nil)
	}
	// A batch of a third of the buffer, then a group that needs more than
	// what is left: the batch alone, then the group.
	lead := create(size / 3)
	c.queueRequests(create(size*2/3), get("/after"))
	if _, err := c.sendBatch(lead, nil); err != nil {
		t.Fatal(err)
	}
	want := "[[1] [1 4]]"
	if got := opsOf(w); got != want {
		t.Fatalf("writes %s, want %s", got, want)
	}
	// A group longer than the buffer: each in order, as it fits.
	w.writes = nil
	head := create(size * 2 / 3)
	head.then = create(size * 2 / 3)
	head.then.then = get("/last")
	if _, err := c.sendBatch(head, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := opsOf(w), "[[1] [1 4]]"; got != want {
		t.Fatalf("writes %s, want %s", got, want)
	}
	// One that cannot be encoded at all is answered with its error; the
	// rest of its group is sent.
	w.writes = nil
	huge := create(size * 2)
	huge.then = get("/still")
	if _, err := c.sendBatch(huge, nil); err != nil {
		t.Fatal(err)
	}
	if r := <-huge.recvChan; r.err != ErrShortBuffer {
		t.Fatalf("the request longer than the buffer: %v, want ErrShortBuffer", r.err)
	}
	if got, want := opsOf(w), "[[4]]"; got != want {
		t.Fatalf("writes %s, want %s", got, want)
	}
}

func opsOf(w *writeRecorder) string { return fmt.Sprint(w.writes) }
