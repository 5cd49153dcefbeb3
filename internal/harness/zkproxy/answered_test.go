package zkproxy_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zkproxy"
)

// packet frames a getData-shaped request: xid, opcode, path, watch.
func packet(xid int32, path string) []byte {
	body := binary.BigEndian.AppendUint32(nil, uint32(xid))
	body = binary.BigEndian.AppendUint32(body, opGetData)
	body = binary.BigEndian.AppendUint32(body, uint32(len(path)))
	body = append(append(body, path...), 0)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	raw := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(r, raw)
	return raw, err
}

// eventually polls until ok, for at most 30 seconds.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
	}
}

// Requests a client writes together count the replies it had when it wrote
// them, even when one of them is answered before the proxy notes the next:
// here the reply to an earlier request reaches the client between the
// proxy's noting of the two. Counting at the noting made the second look
// sent after that reply (a flake of TestAnUncontendedAcquireIsTwoRequests
// under -race). The far end is a listener of this test that frames
// packets as ZooKeeper does; the proxy sees only the framing.
func TestRequestsWrittenTogetherCountTheSameReplies(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	answerA := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer s.Close()
		s.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := readFrame(s); err != nil { // the connect request
			served <- err
			return
		}
		if _, err := s.Write(binary.BigEndian.AppendUint32(nil, 0)); err != nil {
			served <- err
			return
		}
		if _, err := readFrame(s); err != nil { // a
			served <- err
			return
		}
		<-answerA
		reply := binary.BigEndian.AppendUint32(nil, 16)
		reply = binary.BigEndian.AppendUint32(reply, 1) // a's xid
		reply = append(reply, make([]byte, 12)...)      // zxid, err
		_, err = s.Write(reply)
		served <- err
		io.Copy(io.Discard, s)
	}()

	p := zkproxy.New(t, ln.Addr().String())
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, 1), 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := readFrame(c); err != nil { // the connect response
		t.Fatal(err)
	}
	if _, err := c.Write(packet(1, "/a")); err != nil {
		t.Fatal(err)
	}
	// When the proxy notes b, a is answered and its reply passed to the
	// client before the proxy goes on to c.
	p.OnRequest(func(r zkproxy.Request) zkproxy.Action {
		if r.Path == "/b" {
			close(answerA)
			if err := <-served; err != nil {
				t.Error(err)
			}
			if raw, err := readFrame(c); err != nil || binary.BigEndian.Uint32(raw) != 1 {
				t.Errorf("the client's reply to a: %x, %v; want xid 1", raw, err)
			}
		}
		return zkproxy.Pass
	})
	eventually(t, "a noted", func() bool { return len(p.Requests("/a")) == 1 })
	if _, err := c.Write(append(packet(2, "/b"), packet(3, "/c")...)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "c noted", func() bool { return len(p.Requests("/c")) == 1 })
	b, cc := p.Requests("/b"), p.Requests("/c")
	if len(b) != 1 || len(cc) != 1 {
		t.Fatalf("noted %+v and %+v, want b and c once each", b, cc)
	}
	if b[0].Answered != 0 || cc[0].Answered != 0 {
		t.Fatalf("b counted %d replies and c %d; both were written before a's reply, want 0 and 0", b[0].Answered, cc[0].Answered)
	}
}
