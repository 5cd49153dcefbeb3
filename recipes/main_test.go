package recipes

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/zkserver"
)

// The tests of this package run against real ZooKeeper servers: one
// standalone server shared by the package, and servers of their own for the
// tests that stop them.
var sharedZK struct {
	once sync.Once
	srv  *zkserver.Server
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedZK.srv != nil {
		_ = sharedZK.srv.Stop()
	}
	os.Exit(code)
}

// zkOptions are those of every test server: a short tick, so that session
// timeouts (and expiry tests) are short.
func zkOptions() zkserver.Options {
	return zkserver.Options{MinSessionTimeout: 400 * time.Millisecond, MaxSessionTimeout: time.Minute}
}

// sharedServer returns the package's ZooKeeper. A missing ZooKeeper fails
// the test with the command that installs it: it is never skipped.
func sharedServer(t testing.TB) *zkserver.Server {
	t.Helper()
	sharedZK.once.Do(func() {
		if err := zkserver.Check(zkserver.Options{}); err != nil {
			sharedZK.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sharedZK.srv, sharedZK.err = zkserver.Start(ctx, zkOptions())
	})
	if sharedZK.err != nil {
		t.Fatalf("ZooKeeper is needed by this test and could not be started: %v", sharedZK.err)
	}
	return sharedZK.srv
}

// ownServer starts a ZooKeeper server for one test, stopped at its end.
func ownServer(t testing.TB) *zkserver.Server {
	t.Helper()
	sharedServer(t) // the same loud failure when ZooKeeper is missing
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := zkserver.Start(ctx, zkOptions())
	if err != nil {
		t.Fatalf("start ZooKeeper: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

func uniqueRoot(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	if len(name) > 50 {
		name = name[:50]
	}
	return "/r-" + name + "-" + hex.EncodeToString(b[:])
}

// testService is a Service on its own session and root, closed at the end
// of the test.
type testService struct {
	*Service
	sess *Session
	root string
}

type serviceOptions struct {
	servers []string
	timeout time.Duration // session timeout, default 1s
	hosts   func() zk.HostProvider
	leases  LeaseConfig
	queues  QueueConfig
	root    string // default: a root of its own
	gateway string // default gw-test
}

func newService(t testing.TB, o serviceOptions) *testService {
	t.Helper()
	if len(o.servers) == 0 {
		o.servers = []string{sharedServer(t).Addr()}
	}
	if o.timeout == 0 {
		o.timeout = time.Second
	}
	root := o.root
	if root == "" {
		root = uniqueRoot(t)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := Connect(ctx, SessionConfig{Servers: o.servers, Timeout: o.timeout, Root: root, Logger: log, hosts: o.hosts})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if o.gateway == "" {
		o.gateway = "gw-test"
	}
	svc := New(sess, Config{GatewayID: o.gateway, Logger: log, Leases: o.leases, Queues: o.queues})
	t.Cleanup(func() {
		svc.Close()
		sess.Close()
	})
	return &testService{Service: svc, sess: sess, root: root}
}

// rawClient is a plain go-zookeeper client, for looking at what the recipes
// left in ZooKeeper and for playing other clients.
func rawClient(t testing.TB, servers ...string) *zk.Conn {
	t.Helper()
	if len(servers) == 0 {
		servers = []string{sharedServer(t).Addr()}
	}
	conn, events, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietLog{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn
			}
		case <-deadline:
			t.Fatal("no ZooKeeper session for the raw client")
		}
	}
}

type quietLog struct{}

func (quietLog) Printf(string, ...any) {}

// treeUnder lists every znode below p (p excluded), depth first.
func treeUnder(t testing.TB, conn *zk.Conn, p string) []string {
	t.Helper()
	var out []string
	var walk func(string)
	walk = func(p string) {
		kids, _, err := conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		if err != nil {
			t.Fatalf("list %s: %v", p, err)
		}
		for _, k := range kids {
			out = append(out, p+"/"+k)
			walk(p + "/" + k)
		}
	}
	walk(p)
	return out
}

// ephemeralsUnder lists the ephemeral znodes below p: what a lease holds.
func ephemeralsUnder(t testing.TB, conn *zk.Conn, p string) []string {
	t.Helper()
	var out []string
	for _, n := range treeUnder(t, conn, p) {
		_, st, err := conn.Exists(n)
		if err == nil && st != nil && st.EphemeralOwner != 0 {
			out = append(out, n)
		}
	}
	return out
}

// eventually polls fn until it returns nil, failing the test with its last
// error once within has passed.
func eventually(t testing.TB, within time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %v", within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proxy is a TCP proxy in front of a ZooKeeper server that a test can
// pause (bytes stop flowing both ways, connections stay open) and resume.
type proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	paused bool
	resume chan struct{}
	held   []byte // what came in while paused
	conns  []net.Conn
	wg     sync.WaitGroup
	sent   []zkRequest // the requests clients sent through it, in order
	// holdEvents keeps the watch events servers send back, in events, until
	// ReleaseEvents.
	holdEvents bool
	events     []heldEvents
	// unknown are opcodes the proxy answers itself, as a server too old to
	// know them: "unimplemented", then it closes the connection.
	unknown map[int32]bool
}

// heldEvents are watch events held back from the client of conn.
type heldEvents struct {
	conn    net.Conn
	packets []byte
}

// zkRequest is a request a client sent through a proxy: its opcode and, for
// the requests that begin with one, its path (a multi's: its first
// operation's).
type zkRequest struct {
	op   int32
	path string
	// answered is how many replies to requests the proxy had passed to the
	// client on this connection when the client sent this one.
	answered int
}

// replyCounter counts the replies a server sends one client: every packet
// after the connect response but watch events (xid -1) and pings (xid -2).
type replyCounter struct {
	framer
	replies int
}

// feed counts the replies among the packets b completes, and returns those
// packets whole (length prefix included) in two lists: the watch events
// when holdEvents is set, and everything else.
func (r *replyCounter) feed(b []byte, holdEvents bool) (pass, events []byte) {
	for _, pkt := range r.framer.packets(b) {
		xid := int32(-3)
		if !pkt.connect && len(pkt.raw) >= 8 {
			xid = int32(binary.BigEndian.Uint32(pkt.raw[4:]))
		}
		if xid >= 0 {
			r.replies++
		}
		if holdEvents && xid == -1 {
			events = append(events, pkt.raw...)
		} else {
			pass = append(pass, pkt.raw...)
		}
	}
	return pass, events
}

// framer splits one direction of a ZooKeeper connection into its packets
// (each a 4-byte length, then the body); the first is the connect request
// or response, which has no header.
type framer struct {
	buf       []byte
	connected bool
}

// framedPacket is one packet, length prefix included; connect says that it
// is the connect request or response.
type framedPacket struct {
	raw     []byte
	connect bool
}

// packets returns the whole packets that b completes, the connect one too.
func (f *framer) packets(b []byte) []framedPacket {
	f.buf = append(f.buf, b...)
	var out []framedPacket
	for len(f.buf) >= 4 {
		n := int(binary.BigEndian.Uint32(f.buf))
		if len(f.buf) < 4+n {
			break
		}
		out = append(out, framedPacket{raw: f.buf[: 4+n : 4+n], connect: !f.connected})
		f.connected = true
		f.buf = f.buf[4+n:]
	}
	return out
}

// requestParser reads the requests a client sends: after the connect
// request, each packet is xid, opcode and body.
type requestParser struct{ framer }

// parsedPacket is one whole packet a client sent (length prefix included),
// and the request it is (but for the connect request).
type parsedPacket struct {
	raw     []byte
	request *zkRequest
	xid     int32
}

func (r *requestParser) feed(b []byte) []parsedPacket {
	var out []parsedPacket
	for _, fp := range r.framer.packets(b) {
		out = append(out, parsedPacket{raw: fp.raw})
		pkt := fp.raw[4:]
		if fp.connect || len(pkt) < 8 {
			continue
		}
		req := zkRequest{op: int32(binary.BigEndian.Uint32(pkt[4:8]))}
		out[len(out)-1].xid = int32(binary.BigEndian.Uint32(pkt[:4]))
		at := 8
		if req.op == opMulti {
			at += 9 // the first operation's header: type, done, err
		}
		if len(pkt) >= at+4 {
			if l := int(int32(binary.BigEndian.Uint32(pkt[at : at+4]))); l > 0 && at+4+l <= len(pkt) {
				req.path = string(pkt[at+4 : at+4+l])
			}
		}
		out[len(out)-1].request = &req
	}
	return out
}

// Unknown makes the proxy answer requests of opcode op itself as a
// ZooKeeper older than op does: "unimplemented" (-6), then it closes the
// connection.
func (p *proxy) Unknown(op int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.unknown == nil {
		p.unknown = map[int32]bool{}
	}
	p.unknown[op] = true
}

// Sent returns the opcodes of the requests sent so far whose path is under
// (or is) prefix, in order.
func (p *proxy) Sent(prefix string) []int32 {
	var ops []int32
	for _, r := range p.Requests(prefix) {
		ops = append(ops, r.op)
	}
	return ops
}

// Requests returns the requests sent so far whose path is under (or is)
// prefix, in order.
func (p *proxy) Requests(prefix string) []zkRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []zkRequest
	for _, r := range p.sent {
		if r.path == prefix || strings.HasPrefix(r.path, prefix+"/") {
			out = append(out, r)
		}
	}
	return out
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, resume: make(chan struct{})}
	close(p.resume)
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		replies := &replyCounter{}
		go p.pipe(c, s, nil, replies)
		go p.pipe(s, c, &requestParser{}, replies)
	}
}

// pipe copies src to dst; with requests, it notes the requests of what
// goes through (src is a client), else it counts the replies in replies.
func (p *proxy) pipe(dst, src net.Conn, requests *requestParser, replies *replyCounter) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.resume
			if p.paused {
				p.held = append(p.held, buf[:n]...)
			}
			var out []byte    // whole packets only
			var refuse []byte // the answer of an unknown request, to src
			if requests != nil {
				for _, pkt := range requests.feed(buf[:n]) {
					if r := pkt.request; r != nil {
						r.answered = replies.replies
						p.sent = append(p.sent, *r)
						if p.unknown[r.op] {
							refuse = binary.BigEndian.AppendUint32(nil, 16)
							refuse = binary.BigEndian.AppendUint32(refuse, uint32(pkt.xid))
							refuse = binary.BigEndian.AppendUint64(refuse, 0)
							refuse = binary.BigEndian.AppendUint32(refuse, uint32(0xfffffffa)) // -6
							break
						}
					}
					out = append(out, pkt.raw...)
				}
			} else {
				// A server's bytes go to the client in whole packets.
				var events []byte
				out, events = replies.feed(buf[:n], p.holdEvents)
				if len(events) > 0 {
					p.events = append(p.events, heldEvents{dst, events})
				}
			}
			p.mu.Unlock()
			<-gate
			if _, werr := dst.Write(out); werr != nil {
				return
			}
			if refuse != nil {
				_, _ = src.Write(refuse)
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// HoldEvents holds the watch events servers send from now on, until
// ReleaseEvents; replies still go through.
func (p *proxy) HoldEvents() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdEvents = true
}

// ReleaseEvents sends the held watch events on, in order, and stops holding
// them. It holds p.mu while it writes, so that no packet overtakes them.
func (p *proxy) ReleaseEvents() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdEvents = false
	for _, h := range p.events {
		_, _ = h.conn.Write(h.packets)
	}
	p.events = nil
}

// HeldEvents is how many bytes of watch events are held.
func (p *proxy) HeldEvents() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, h := range p.events {
		n += len(h.packets)
	}
	return n
}

// Pause holds every byte from now on until Resume.
func (p *proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused = true
		p.held = nil
		p.resume = make(chan struct{})
	}
}

// Resume lets the held bytes through.
func (p *proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.resume)
	}
}

// Held reports whether the bytes held since the pause contain b.
func (p *proxy) Held(b string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Contains(string(p.held), b)
}

// Drop closes every connection made so far (what they held is lost);
// new ones are accepted as before.
func (p *proxy) Drop() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.held = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *proxy) close() {
	p.Resume()
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
