// Package zkproxy is a TCP proxy for tests, in front of a ZooKeeper server,
// that reads both directions packet by packet (ZooKeeper's framing: a
// 4-byte length, then the body) and so can see, count, hold, refuse and
// lose requests and replies: a connection that stalls, pauses, loses a
// reply or meets an older server, at the moment a test chooses.
package zkproxy

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// Request is a request a client sent through the proxy.
type Request struct {
	Op  int32
	Xid int32
	// Path is the path the request begins with, if it does (a multi's: its
	// first operation's).
	Path string
	// Answered is how many replies the proxy had passed to the client on
	// this connection when the client sent this request: when the read
	// that brought the request's last byte from the client returned.
	// Requests the client wrote together arrive in one read, so they have
	// the same count however late the proxy gets round to parsing them.
	Answered int
	// Raw is the whole packet, length prefix included.
	Raw []byte
}

// Action is what the proxy does with a request (see OnRequest).
type Action int

const (
	// Pass sends the request on.
	Pass Action = iota
	// Stall holds the request, and every later packet of its connection,
	// until Release: a connection that stalls, as a partition does.
	Stall
	// Unimplemented answers the request as a ZooKeeper that does not know
	// it: "unimplemented" (-6), then the connection is closed.
	Unimplemented
	// LoseReply sends the request on, and nothing the server sends on its
	// connection reaches the client any more.
	LoseReply
)

// opMulti's requests begin with their first operation's header.
const opMulti = 14

// Proxy is a running proxy; see New.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu        sync.Mutex
	paused    bool
	resume    chan struct{} // closed while not paused
	held      []byte        // what came in while paused
	release   chan struct{} // closed by Release: stalled packets go on
	refuse    bool          // new connections are closed at once
	mute      bool          // what servers send is dropped
	conns     []net.Conn
	sent      []Request
	unknown   map[int32]bool
	onRequest func(Request) Action
	// holdEvents keeps the watch events servers send, in events, until
	// ReleaseEvents.
	holdEvents bool
	events     []heldEvents
}

// heldEvents are watch events held back from the client of conn.
type heldEvents struct {
	conn    net.Conn
	packets []byte
}

// New starts a proxy to target on a free loopback port, closed at the end
// of the test.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, resume: make(chan struct{}), release: make(chan struct{})}
	close(p.resume)
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address, for the clients' connect string.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// OnRequest calls fn with each request a client sends (not the connect
// request), in order, as it comes in; what fn returns is what happens to
// the request. fn runs on the connection's reader: while it blocks, no
// more of the connection's requests are read.
func (p *Proxy) OnRequest(fn func(Request) Action) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onRequest = fn
}

// Unknown makes the proxy answer requests of opcode op itself, as a
// ZooKeeper older than op does (see Unimplemented).
func (p *Proxy) Unknown(op int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.unknown == nil {
		p.unknown = map[int32]bool{}
	}
	p.unknown[op] = true
}

// Sent returns the opcodes of the requests sent so far whose path is under
// (or is) prefix, in order.
func (p *Proxy) Sent(prefix string) []int32 {
	var ops []int32
	for _, r := range p.Requests(prefix) {
		ops = append(ops, r.Op)
	}
	return ops
}

// Requests returns the requests sent so far whose path is under (or is)
// prefix, in order.
func (p *Proxy) Requests(prefix string) []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Request
	for _, r := range p.sent {
		if r.Path == prefix || strings.HasPrefix(r.Path, prefix+"/") {
			out = append(out, r)
		}
	}
	return out
}

// Pause holds every packet, both ways, from now on until Resume;
// connections stay open.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused = true
		p.held = nil
		p.resume = make(chan struct{})
	}
}

// Resume lets the held packets through.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.resume)
	}
}

// Held reports whether the packets held since the pause contain b.
func (p *Proxy) Held(b string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Contains(string(p.held), b)
}

// Release lets the stalled packets, and every later one, through; a
// proxy released stalls no more.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.release:
	default:
		close(p.release)
	}
}

// Refuse makes new connections close at once (or work again).
func (p *Proxy) Refuse(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = refuse
}

// Mute drops what servers send (or passes it again).
func (p *Proxy) Mute(mute bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mute = mute
}

// Drop closes every connection made so far (what they held is lost); new
// ones are accepted unless refused.
func (p *Proxy) Drop() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.held = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// HoldEvents holds the watch events servers send from now on, until
// ReleaseEvents; replies still go through.
func (p *Proxy) HoldEvents() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdEvents = true
}

// ReleaseEvents sends the held watch events on, in order, and stops holding
// them. It holds p.mu while it writes, so that no packet overtakes them.
func (p *Proxy) ReleaseEvents() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdEvents = false
	for _, h := range p.events {
		_, _ = h.conn.Write(h.packets)
	}
	p.events = nil
}

// HeldEvents is how many bytes of watch events are held.
func (p *Proxy) HeldEvents() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, h := range p.events {
		n += len(h.packets)
	}
	return n
}

func (p *Proxy) close() {
	p.Resume()
	p.Release()
	p.ln.Close()
	p.Drop()
	p.wg.Wait()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.refuse
		p.mu.Unlock()
		if refuse {
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		c := &conn{p: p, client: client, server: server, toServer: make(chan outgoing, 1024), forwarded: make(chan struct{})}
		p.wg.Add(3)
		go c.replies()
		go c.requests()
		go c.forward()
	}
}

// conn is one client's connection through the proxy.
type conn struct {
	p              *Proxy
	client, server net.Conn
	toServer       chan outgoing
	forwarded      chan struct{} // closed once forward has ended

	// Under p.mu:
	answered  int  // replies passed to the client
	loseReply bool // nothing more reaches the client
}

// outgoing is a packet on its way to the server; refuse, if set, is sent
// to the client instead, and the connection closed.
type outgoing struct {
	raw    []byte
	stall  bool
	refuse []byte
}

// readPacket reads one whole packet, length prefix included.
func readPacket(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	raw := make([]byte, 4+int(binary.BigEndian.Uint32(size[:])))
	copy(raw, size[:])
	_, err := io.ReadFull(r, raw[4:])
	return raw, err
}

// countingReader notes, after each read from the client, how many replies
// had been passed to it by then.
type countingReader struct {
	c        *conn
	answered int
}

func (r *countingReader) Read(b []byte) (int, error) {
	n, err := r.c.client.Read(b)
	r.c.p.mu.Lock()
	r.answered = r.c.answered
	r.c.p.mu.Unlock()
	return n, err
}

// requests reads what the client sends, notes each request and queues it
// for forward. It reads through a buffer, so that a packet that came with
// the one before it (in the same read) is counted as sent with it: the
// count of replies is the one at that read, not at the packet's parsing,
// which may come after the packet before it has been answered.
func (c *conn) requests() {
	defer c.p.wg.Done()
	defer close(c.toServer)
	counted := &countingReader{c: c}
	in := bufio.NewReader(counted)
	for first := true; ; first = false {
		raw, err := readPacket(in)
		if err != nil {
			return
		}
		out := outgoing{raw: raw}
		if first { // the connect request has no header
			c.p.hold(raw)
		} else {
			out = c.request(raw, counted.answered)
		}
		select {
		case c.toServer <- out:
		case <-c.forwarded:
			return
		}
		if out.refuse != nil {
			return
		}
	}
}

// request notes one request and decides what becomes of it.
func (c *conn) request(raw []byte, answered int) outgoing {
	r := parse(raw)
	r.Answered = answered
	p := c.p
	p.mu.Lock()
	p.sent = append(p.sent, r)
	unknown, hook := p.unknown[r.Op], p.onRequest
	p.mu.Unlock()
	action := Pass
	if unknown {
		action = Unimplemented
	} else if hook != nil {
		action = hook(r)
	}
	switch action {
	case Unimplemented:
		refuse := binary.BigEndian.AppendUint32(nil, 16)
		refuse = binary.BigEndian.AppendUint32(refuse, uint32(r.Xid))
		refuse = binary.BigEndian.AppendUint64(refuse, 0)                  // zxid
		refuse = binary.BigEndian.AppendUint32(refuse, uint32(0xfffffffa)) // -6
		return outgoing{refuse: refuse}
	case LoseReply:
		p.mu.Lock()
		c.loseReply = true
		p.mu.Unlock()
	}
	p.hold(raw)
	return outgoing{raw: raw, stall: action == Stall}
}

// parse reads a request's header: xid, opcode, then its path if it begins
// with one.
func parse(raw []byte) Request {
	r := Request{Raw: raw}
	pkt := raw[4:]
	if len(pkt) < 8 {
		return r
	}
	r.Xid = int32(binary.BigEndian.Uint32(pkt[:4]))
	r.Op = int32(binary.BigEndian.Uint32(pkt[4:8]))
	at := 8
	if r.Op == opMulti {
		at += 9 // the first operation's header: type, done, err
	}
	if len(pkt) >= at+4 {
		if l := int(int32(binary.BigEndian.Uint32(pkt[at : at+4]))); l > 0 && at+4+l <= len(pkt) {
			r.Path = string(pkt[at+4 : at+4+l])
		}
	}
	return r
}

// hold records raw as held if the proxy is paused.
func (p *Proxy) hold(raw []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.held = append(p.held, raw...)
	}
}

// gate returns what to wait on before a packet goes on: the resume of a
// pause (closed unless paused).
func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resume
}

// forward writes the queued requests to the server, in order, each after
// any pause, and a stalled one (with all after it) after the release.
func (c *conn) forward() {
	defer c.p.wg.Done()
	defer close(c.forwarded)
	defer c.server.Close()
	defer c.client.Close()
	stalled := false
	for out := range c.toServer {
		if out.refuse != nil {
			_, _ = c.client.Write(out.refuse)
			return
		}
		stalled = stalled || out.stall
		if stalled {
			<-c.p.release
		}
		<-c.p.gate()
		if _, err := c.server.Write(out.raw); err != nil {
			return
		}
	}
}

// replies passes what the server sends to the client, packet by packet:
// counted (a reply is any packet after the connect response but watch
// events, xid -1, and pings, xid -2), dropped while muted, watch events
// held while asked.
func (c *conn) replies() {
	defer c.p.wg.Done()
	defer c.client.Close()
	defer c.server.Close()
	p := c.p
	for first := true; ; first = false {
		raw, err := readPacket(c.server)
		if err != nil {
			return
		}
		xid := int32(-3)
		if !first && len(raw) >= 8 {
			xid = int32(binary.BigEndian.Uint32(raw[4:]))
		}
		p.mu.Lock()
		if xid >= 0 {
			c.answered++
		}
		drop := p.mute || c.loseReply
		holdEvent := !drop && p.holdEvents && xid == -1
		if holdEvent {
			p.events = append(p.events, heldEvents{c.client, raw})
		}
		if p.paused && !drop {
			p.held = append(p.held, raw...)
		}
		gate := p.resume
		p.mu.Unlock()
		if drop || holdEvent {
			continue
		}
		<-gate
		if _, err := c.client.Write(raw); err != nil {
			return
		}
	}
}
