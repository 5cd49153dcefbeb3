// Package zk is a native Go client library for the ZooKeeper orchestration service.
package zk

/*
TODO:
* make sure a ping response comes back in a reasonable time

Possible watcher events:
* Event{Type: EventNotWatching, State: StateDisconnected, Path: path, Err: err}
*/

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNoServer indicates that an operation cannot be completed
// because attempts to connect to all servers in the list failed.
var ErrNoServer = errors.New("zk: could not connect to a server")

// ErrInvalidPath indicates that an operation was being attempted on
// an invalid path. (e.g. empty path).
var ErrInvalidPath = errors.New("zk: invalid path")

// DefaultLogger uses the stdlib log package for logging.
var DefaultLogger Logger = defaultLogger{}

const (
	bufferSize      = 1536 * 1024
	readBufferSize  = 64 * 1024 // the receive loop's read buffer; at most the packet buffer
	eventChanSize   = 6
	sendChanSize    = 16
	protectedPrefix = "_c_"
)

type watchType int

const (
	watchTypeData watchType = iota
	watchTypeExist
	watchTypeChild
)

type watchPathType struct {
	path  string
	wType watchType
}

// Dialer is a function to be used to establish a connection to a single host.
type Dialer func(network, address string, timeout time.Duration) (net.Conn, error)

// Logger is an interface that can be implemented to provide custom log output.
type Logger interface {
	Printf(string, ...interface{})
}

type authCreds struct {
	scheme string
	auth   []byte
}

// Conn is the client connection and tracks all details for communication with the server.
type Conn struct {
	lastZxid         int64
	sessionID        int64
	heard            int64 // see LastHeard: nanoseconds after monoBase, read and written atomically
	state            State // must be 32-bit aligned
	xid              uint32
	sessionTimeoutMs int32 // session timeout in milliseconds
	passwd           []byte

	dialer         Dialer
	hostProvider   HostProvider
	serverMu       sync.Mutex // protects server
	server         string     // remember the address/port of the current server
	conn           net.Conn
	eventChan      chan Event
	eventCallback  EventCallback // may be nil
	shouldQuit     chan struct{}
	shouldQuitOnce sync.Once
	pingInterval   time.Duration
	recvTimeout    time.Duration
	connectTimeout time.Duration
	maxBufferSize  int

	creds   []authCreds
	credsMu sync.Mutex // protects server

	sendChan     chan *request
	requests     map[int32]*request // Xid -> pending request
	requestsLock sync.Mutex
	watchers     map[watchPathType][]chan Event
	watchersLock sync.Mutex
	closeChan    chan struct{} // channel to tell send loop stop

	// watchSetMu orders the requests that set watches with the removals of
	// watches (see RemoveWatch): a removal is queued only while no request
	// that sets a watch in the same table of the server is unanswered.
	watchSetMu   sync.Mutex
	watchPending map[watchPathType]int  // guarded by watchersLock: requests setting a watch, by table
	removeLater  map[watchPathType]bool // guarded by watchersLock: removals waiting for those requests

	// Debug (used by unit tests)
	reconnectLatch   chan struct{}
	setWatchLimit    int
	setWatchCallback func([]*setWatchesRequest)

	// Debug (for recurring re-auth hang)
	debugCloseRecvLoop bool
	resendZkAuthFn     func(context.Context, *Conn) error

	logger  Logger
	logInfo bool // true if information messages are logged; false if only errors are logged

	buf []byte

	pingsMu sync.Mutex
	pings   []int64 // when each unanswered ping was sent (see LastHeard), oldest first

	passwdMu sync.Mutex    // guards passwd for Password, beside the connection goroutine that writes it
	connMu   sync.Mutex    // guards conn against Detach, which closes it
	loopDone chan struct{} // closed once the connection goroutine has returned
}

// monoBase is the origin of the monotonic clock readings kept as integers
// (request.sent, Conn.heard).
var monoBase = time.Now()

func monoNow() int64 { return int64(time.Since(monoBase)) }

// connOption represents a connection option.
type connOption func(c *Conn)

type request struct {
	xid        int32
	opcode     int32
	pkt        interface{}
	recvStruct interface{}
	recvChan   chan response

	// Because sending and receiving happen in separate go routines, there's
	// a possible race condition when creating watches from outside the read
	// loop. We must ensure that a watcher gets added to the list synchronously
	// with the response from the server on any request that creates a watch.
	// In order to not hard code the watch logic for each opcode in the recv
	// loop the caller can use recvFunc to insert some synchronously code
	// after a response.
	recvFunc func(*request, *responseHeader, error)

	sent int64 // when it was written (see LastHeard)

	// then is a request that goes out right behind this one, in the same
	// Write (see queueRequests): queued together, the send loop never
	// writes the first before the second is there.
	then *request
}

type response struct {
	zxid int64
	err  error
}

// Event is an Znode event sent by the server.
// Refer to EventType for more details.
type Event struct {
	Type   EventType
	State  State
	Path   string // For non-session events, the path of the watched node.
	Err    error
	Server string // For connection events
}

// HostProvider is used to represent a set of hosts a ZooKeeper client should connect to.
// It is an analog of the Java equivalent:
// http://svn.apache.org/viewvc/zookeeper/trunk/src/java/main/org/apache/zookeeper/client/HostProvider.java?view=markup
type HostProvider interface {
	// Init is called first, with the servers specified in the connection string.
	Init(servers []string) error
	// Len returns the number of servers.
	Len() int
	// Next returns the next server to connect to. retryStart will be true if we've looped through
	// all known servers without Connected() being called.
	Next() (server string, retryStart bool)
	// Notify the HostProvider of a successful connection.
	Connected()
}

// ConnectWithDialer establishes a new connection to a pool of zookeeper servers
// using a custom Dialer. See Connect for further information about session timeout.
// This method is deprecated and provided for compatibility: use the WithDialer option instead.
func ConnectWithDialer(servers []string, sessionTimeout time.Duration, dialer Dialer) (*Conn, <-chan Event, error) {
	return Connect(servers, sessionTimeout, WithDialer(dialer))
}

// Connect establishes a new connection to a pool of zookeeper
// servers. The provided session timeout sets the amount of time for which
// a session is considered valid after losing connection to a server. Within
// the session timeout it's possible to reestablish a connection to a different
// server and keep the same session. This is means any ephemeral nodes and
// watches are maintained.
func Connect(servers []string, sessionTimeout time.Duration, options ...connOption) (*Conn, <-chan Event, error) {
	if len(servers) == 0 {
		return nil, nil, errors.New("zk: server list must not be empty")
	}

	srvs := FormatServers(servers)

	// Randomize the order of the servers to avoid creating hotspots
	stringShuffle(srvs)

	ec := make(chan Event, eventChanSize)
	conn := &Conn{
		dialer:         net.DialTimeout,
		hostProvider:   NewDNSHostProvider(),
		conn:           nil,
		state:          StateDisconnected,
		eventChan:      ec,
		shouldQuit:     make(chan struct{}),
		connectTimeout: 1 * time.Second,
		sendChan:       make(chan *request, sendChanSize),
		requests:       make(map[int32]*request),
		watchers:       make(map[watchPathType][]chan Event),
		watchPending:   make(map[watchPathType]int),
		removeLater:    make(map[watchPathType]bool),
		passwd:         emptyPassword,
		logger:         DefaultLogger,
		logInfo:        true, // default is true for backwards compatability
		buf:            make([]byte, bufferSize),
		resendZkAuthFn: resendZkAuth,
	}

	// Set provided options.
	for _, option := range options {
		option(conn)
	}

	if err := conn.hostProvider.Init(srvs); err != nil {
		return nil, nil, err
	}

	conn.setTimeouts(int32(sessionTimeout / time.Millisecond))
	// TODO: This context should be passed in by the caller to be the connection lifecycle context.
	ctx := context.Background()

	conn.loopDone = make(chan struct{})
	go func() {
		defer close(conn.loopDone)
		conn.loop(ctx)
		conn.flushRequests(ErrClosing)
		conn.invalidateWatches(ErrClosing)
		close(conn.eventChan)
	}()
	return conn, ec, nil
}

// WithSession makes the connection resume the session id, whose password
// is passwd (see Password), instead of starting a new one: its ephemeral
// nodes stay. ZooKeeper moves a session to its newest connection and closes
// the older ones (see Detach, for the client that gives the session up). If
// the ensemble has expired the session, the first session event is
// StateExpired, after which the connection starts a new session as any
// does: a caller that wants the old session alone closes the connection
// then.
func WithSession(id int64, passwd []byte) connOption {
	return func(c *Conn) {
		c.sessionID = id
		c.passwd = append([]byte(nil), passwd...)
	}
}

// WithDialer returns a connection option specifying a non-default Dialer.
func WithDialer(dialer Dialer) connOption {
	return func(c *Conn) {
		c.dialer = dialer
	}
}

// WithHostProvider returns a connection option specifying a non-default HostProvider.
func WithHostProvider(hostProvider HostProvider) connOption {
	return func(c *Conn) {
		c.hostProvider = hostProvider
	}
}

// WithLogger returns a connection option specifying a non-default Logger.
func WithLogger(logger Logger) connOption {
	return func(c *Conn) {
		c.logger = logger
	}
}

// WithLogInfo returns a connection option specifying whether or not information messages
// should be logged.
func WithLogInfo(logInfo bool) connOption {
	return func(c *Conn) {
		c.logInfo = logInfo
	}
}

// EventCallback is a function that is called when an Event occurs.
type EventCallback func(Event)

// WithEventCallback returns a connection option that specifies an event
// callback.
// The callback must not block - doing so would delay the ZK go routines.
func WithEventCallback(cb EventCallback) connOption {
	return func(c *Conn) {
		c.eventCallback = cb
	}
}

// WithMaxBufferSize sets the maximum buffer size used to read and decode
// packets received from the Zookeeper server. The standard Zookeeper client for
// Java defaults to a limit of 1mb. For backwards compatibility, this Go client
// defaults to unbounded unless overridden via this option. A value that is zero
// or negative indicates that no limit is enforced.
//
// This is meant to prevent resource exhaustion in the face of potentially
// malicious data in ZK. It should generally match the server setting (which
// also defaults ot 1mb) so that clients and servers agree on the limits for
// things like the size of data in an individual znode and the total size of a
// transaction.
//
// For production systems, this should be set to a reasonable value (ideally
// that matches the server configuration). For ops tooling, it is handy to use a
// much larger limit, in order to do things like clean-up problematic state in
// the ZK tree. For example, if a single znode has a huge number of children, it
// is possible for the response to a "list children" operation to exceed this
// buffer size and cause errors in clients. The only way to subsequently clean
// up the tree (by removing superfluous children) is to use a client configured
// with a larger buffer size that can successfully query for all of the child
// names and then remove them. (Note there are other tools that can list all of
// the child names without an increased buffer size in the client, but they work
// by inspecting the servers' transaction logs to enumerate children instead of
// sending an online request to a server.
func WithMaxBufferSize(maxBufferSize int) connOption {
	return func(c *Conn) {
		c.maxBufferSize = maxBufferSize
	}
}

// WithMaxConnBufferSize sets maximum buffer size used to send and encode
// packets to Zookeeper server. The standard Zookeeper client for java defaults
// to a limit of 1mb. This option should be used for non-standard server setup
// where znode is bigger than default 1mb.
func WithMaxConnBufferSize(maxBufferSize int) connOption {
	return func(c *Conn) {
		c.buf = make([]byte, maxBufferSize)
	}
}

// Close will submit a close request with ZK and signal the connection to stop
// sending and receiving packets.
func (c *Conn) Close() {
	c.shouldQuitOnce.Do(func() {
		close(c.shouldQuit)

		select {
		case <-c.queueRequest(opClose, &closeRequest{}, &closeResponse{}, nil):
		case <-time.After(time.Second):
		}
	})
}

// Detach stops the connection without ending its session, and returns once
// it has stopped: no close request is sent, the connection to the server is
// closed, and it never connects again. The session lives on in the ensemble
// for its timeout, ephemeral nodes and all, for a client that presents its
// SessionID and Password (WithSession) to take over; nothing of this client
// can take it back after Detach returns. Pending requests are answered
// ErrClosing.
func (c *Conn) Detach() {
	c.shouldQuitOnce.Do(func() {
		c.connMu.Lock()
		close(c.shouldQuit)
		if c.conn != nil {
			c.conn.Close()
		}
		c.connMu.Unlock()
	})
	<-c.loopDone
}

// Password returns a copy of the current session's password: with
// SessionID, what resumes the session (WithSession). Whoever holds both
// owns the session: keep it secret.
func (c *Conn) Password() []byte {
	c.passwdMu.Lock()
	defer c.passwdMu.Unlock()
	return append([]byte(nil), c.passwd...)
}

// State returns the current state of the connection.
func (c *Conn) State() State {
	return State(atomic.LoadInt32((*int32)(&c.state)))
}

// SessionID returns the current session id of the connection.
func (c *Conn) SessionID() int64 {
	return atomic.LoadInt64(&c.sessionID)
}

// SessionTimeout returns the session timeout the server granted for the
// current session (it clamps the one asked for to its own bounds), or the
// one asked for until a session is established.
func (c *Conn) SessionTimeout() time.Duration {
	return time.Duration(atomic.LoadInt32(&c.sessionTimeoutMs)) * time.Millisecond
}

// LastHeard returns when the most recent request that the server answered
// within the session was sent (a ping, the connect request, or any
// operation, whatever its result, except an answer that the session has
// expired or moved), or the zero Time if none was. The server had not
// expired the session when it received that request, and it expires a
// session only after a whole SessionTimeout without hearing from its
// client, so the session, and its ephemeral nodes, live at least until
// LastHeard plus SessionTimeout (by the client's clock, as far as the two
// clocks run at the same rate). The time carries a monotonic clock reading.
func (c *Conn) LastHeard() time.Time {
	h := atomic.LoadInt64(&c.heard)
	if h == 0 {
		return time.Time{}
	}
	return monoBase.Add(time.Duration(h))
}

// noteHeard records that a request sent at sent (see monoNow) was answered.
func (c *Conn) noteHeard(sent int64) {
	for {
		cur := atomic.LoadInt64(&c.heard)
		if sent <= cur || atomic.CompareAndSwapInt64(&c.heard, cur, sent) {
			return
		}
	}
}

// SetLogger sets the logger to be used for printing errors.
// Logger is an interface provided by this package.
func (c *Conn) SetLogger(l Logger) {
	c.logger = l
}

func (c *Conn) setTimeouts(sessionTimeoutMs int32) {
	atomic.StoreInt32(&c.sessionTimeoutMs, sessionTimeoutMs)
	sessionTimeout := time.Duration(sessionTimeoutMs) * time.Millisecond
	c.recvTimeout = sessionTimeout * 2 / 3
	c.pingInterval = c.recvTimeout / 2
}

func (c *Conn) setState(state State) {
	atomic.StoreInt32((*int32)(&c.state), int32(state))
	c.sendEvent(Event{Type: EventSession, State: state, Server: c.Server()})
}

func (c *Conn) sendEvent(evt Event) {
	if c.eventCallback != nil {
		c.eventCallback(evt)
	}

	select {
	case c.eventChan <- evt:
	default:
		// panic("zk: event channel full - it must be monitored and never allowed to be full")
	}
}

func (c *Conn) connect() error {
	var retryStart bool
	for {
		c.serverMu.Lock()
		c.server, retryStart = c.hostProvider.Next()
		c.serverMu.Unlock()

		c.setState(StateConnecting)

		if retryStart {
			c.flushUnsentRequests(ErrNoServer)
			select {
			case <-time.After(time.Second):
				// pass
			case <-c.shouldQuit:
				c.setState(StateDisconnected)
				c.flushUnsentRequests(ErrClosing)
				return ErrClosing
			}
		}

		zkConn, err := c.dialer("tcp", c.Server(), c.connectTimeout)
		if err == nil {
			c.connMu.Lock()
			select {
			case <-c.shouldQuit:
				// Closed or detached meanwhile: a detached session must not
				// be taken back by a connect request of this client.
				c.connMu.Unlock()
				zkConn.Close()
				c.setState(StateDisconnected)
				c.flushUnsentRequests(ErrClosing)
				return ErrClosing
			default:
			}
			c.conn = zkConn
			c.connMu.Unlock()
			c.setState(StateConnected)
			if c.logInfo {
				c.logger.Printf("connected to %s", c.Server())
			}
			return nil
		}

		c.logger.Printf("failed to connect to %s: %v", c.Server(), err)
	}
}

func (c *Conn) sendRequest(
	opcode int32,
	req interface{},
	res interface{},
	recvFunc func(*request, *responseHeader, error),
) (
	<-chan response,
	error,
) {
	rq := &request{
		xid:        c.nextXid(),
		opcode:     opcode,
		pkt:        req,
		recvStruct: res,
		recvChan:   make(chan response, 1),
		recvFunc:   recvFunc,
	}

	if err := c.sendData(rq); err != nil {
		return nil, err
	}

	return rq.recvChan, nil
}

func (c *Conn) loop(ctx context.Context) {
	for {
		if err := c.connect(); err != nil {
			// c.Close() was called
			return
		}

		err := c.authenticate()
		switch {
		case err == ErrSessionExpired:
			c.logger.Printf("authentication failed: %s", err)
			c.invalidateWatches(err)
		case err != nil && c.conn != nil:
			c.logger.Printf("authentication failed: %s", err)
			c.conn.Close()
		case err == nil:
			if c.logInfo {
				c.logger.Printf("authenticated: id=%d, timeout=%d", c.SessionID(), c.sessionTimeoutMs)
			}
			c.hostProvider.Connected()        // mark success
			c.closeChan = make(chan struct{}) // channel to tell send loop stop

			var wg sync.WaitGroup

			wg.Add(1)
			go func() {
				defer c.conn.Close() // causes recv loop to EOF/exit
				defer wg.Done()

				if err := c.resendZkAuthFn(ctx, c); err != nil {
					c.logger.Printf("error in resending auth creds: %v", err)
					return
				}

				if err := c.sendLoop(); err != nil || c.logInfo {
					c.logger.Printf("send loop terminated: %v", err)
				}
			}()

			wg.Add(1)
			go func() {
				defer close(c.closeChan) // tell send loop to exit
				defer wg.Done()

				var err error
				if c.debugCloseRecvLoop {
					err = errors.New("DEBUG: close recv loop")
				} else {
					err = c.recvLoop(c.conn)
				}
				if err != io.EOF || c.logInfo {
					c.logger.Printf("recv loop terminated: %v", err)
				}
				if err == nil {
					panic("zk: recvLoop should never return nil error")
				}
			}()

			c.sendSetWatches()
			wg.Wait()
		}

		c.setState(StateDisconnected)

		select {
		case <-c.shouldQuit:
			c.flushRequests(ErrClosing)
			return
		default:
		}

		if err != ErrSessionExpired {
			err = ErrConnectionClosed
		}
		c.flushRequests(err)

		if c.reconnectLatch != nil {
			select {
			case <-c.shouldQuit:
				return
			case <-c.reconnectLatch:
			}
		}
	}
}

func (c *Conn) flushUnsentRequests(err error) {
	for {
		select {
		default:
			return
		case req := <-c.sendChan:
			for ; req != nil; req = req.then {
				req.recvChan <- response{-1, err}
			}
		}
	}
}

// Send error to all pending requests and clear request map
func (c *Conn) flushRequests(err error) {
	c.requestsLock.Lock()
	for _, req := range c.requests {
		req.recvChan <- response{-1, err}
	}
	c.requests = make(map[int32]*request)
	c.requestsLock.Unlock()
}

// Send event to all interested watchers
func (c *Conn) notifyWatches(ev Event) {
	var wTypes []watchType
	switch ev.Type {
	case EventNodeCreated:
		wTypes = []watchType{watchTypeExist}
	case EventNodeDataChanged:
		wTypes = []watchType{watchTypeExist, watchTypeData}
	case EventNodeChildrenChanged:
		wTypes = []watchType{watchTypeChild}
	case EventNodeDeleted:
		wTypes = []watchType{watchTypeExist, watchTypeData, watchTypeChild}
	}
	c.watchersLock.Lock()
	defer c.watchersLock.Unlock()
	for _, t := range wTypes {
		wpt := watchPathType{ev.Path, t}
		if watchers := c.watchers[wpt]; len(watchers) > 0 {
			for _, ch := range watchers {
				ch <- ev
				close(ch)
			}
			delete(c.watchers, wpt)
		}
	}
}

// Send error to all watchers and clear watchers map
func (c *Conn) invalidateWatches(err error) {
	c.watchersLock.Lock()
	defer c.watchersLock.Unlock()

	if len(c.watchers) >= 0 {
		for pathType, watchers := range c.watchers {
			ev := Event{Type: EventNotWatching, State: StateDisconnected, Path: pathType.path, Err: err}
			c.sendEvent(ev) // also publish globally
			for _, ch := range watchers {
				ch <- ev
				close(ch)
			}
		}
		c.watchers = make(map[watchPathType][]chan Event)
	}
}

func (c *Conn) sendSetWatches() {
	// The watches are read, and their requests queued, under watchSetMu, so
	// that a removal queued before them is left out of them and one queued
	// after them follows them (see RemoveWatch).
	go func() {
		c.watchSetMu.Lock()
		reqs := c.setWatchesRequests()
		if len(reqs) == 0 {
			c.watchSetMu.Unlock()
			return
		}
		if c.setWatchCallback != nil {
			c.setWatchCallback(reqs)
		}
		recvs := make([]<-chan response, len(reqs))
		for i, req := range reqs {
			recvs[i] = c.queueRequest(opSetWatches, req, &setWatchesResponse{}, nil)
		}
		c.watchSetMu.Unlock()
		for _, recv := range recvs {
			if err := c.await(recv); err != nil {
				c.logger.Printf("Failed to set previous watches: %v", err)
				break
			}
		}
	}()
}

// setWatchesRequests returns the requests that set the watches of
// c.watchers again on a new connection.
func (c *Conn) setWatchesRequests() []*setWatchesRequest {
	c.watchersLock.Lock()
	defer c.watchersLock.Unlock()

	if len(c.watchers) == 0 {
		return nil
	}

	// NB: A ZK server, by default, rejects packets >1mb. So, if we have too
	// many watches to reset, we need to break this up into multiple packets
	// to avoid hitting that limit. Mirroring the Java client behavior: we are
	// conservative in that we limit requests to 128kb (since server limit is
	// is actually configurable and could conceivably be configured smaller
	// than default of 1mb).
	limit := 128 * 1024
	if c.setWatchLimit > 0 {
		limit = c.setWatchLimit
	}

	var reqs []*setWatchesRequest
	var req *setWatchesRequest
	var sizeSoFar int

	n := 0
	for pathType, watchers := range c.watchers {
		if len(watchers) == 0 {
			continue
		}
		addlLen := 4 + len(pathType.path)
		if req == nil || sizeSoFar+addlLen > limit {
			if req != nil {
				// add to set of requests that we'll send
				reqs = append(reqs, req)
			}
			sizeSoFar = 28 // fixed overhead of a set-watches packet
			req = &setWatchesRequest{
				RelativeZxid: c.lastZxid,
				DataWatches:  make([]string, 0),
				ExistWatches: make([]string, 0),
				ChildWatches: make([]string, 0),
			}
		}
		sizeSoFar += addlLen
		switch pathType.wType {
		case watchTypeData:
			req.DataWatches = append(req.DataWatches, pathType.path)
		case watchTypeExist:
			req.ExistWatches = append(req.ExistWatches, pathType.path)
		case watchTypeChild:
			req.ChildWatches = append(req.ChildWatches, pathType.path)
		}
		n++
	}
	if n == 0 {
		return nil
	}
	if req != nil { // don't forget any trailing packet we were building
		reqs = append(reqs, req)
	}
	return reqs
}

func (c *Conn) authenticate() error {
	buf := make([]byte, 256)

	// Encode and send a connect request.
	n, err := encodePacket(buf[4:], &connectRequest{
		ProtocolVersion: protocolVersion,
		LastZxidSeen:    c.lastZxid,
		TimeOut:         atomic.LoadInt32(&c.sessionTimeoutMs),
		SessionID:       c.SessionID(),
		Passwd:          c.passwd,
	})
	if err != nil {
		return err
	}

	binary.BigEndian.PutUint32(buf[:4], uint32(n))

	sent := monoNow()
	// One deadline for the whole handshake: twice the session timeout (the
	// one negotiated last, or the one asked for). A server that takes the
	// connection and does not answer (one starting, or starved) is left for
	// another connection; ten read timeouts, with no bound on the answer's
	// body, held a reconnect for 67 s at a 10 s session timeout. (The Java
	// client's bound, the session timeout, fails go-zookeeper's
	// TestIntegration_SlowServer, whose handshake through a proxy of 2 s each
	// way takes as long as its session timeout.)
	c.conn.SetDeadline(time.Now().Add(2 * time.Duration(atomic.LoadInt32(&c.sessionTimeoutMs)) * time.Millisecond))
	defer c.conn.SetDeadline(time.Time{})
	_, err = c.conn.Write(buf[:n+4])
	if err != nil {
		return err
	}

	// Receive and decode a connect response.
	_, err = io.ReadFull(c.conn, buf[:4])
	if err != nil {
		return err
	}

	blen := int(binary.BigEndian.Uint32(buf[:4]))
	if cap(buf) < blen {
		buf = make([]byte, blen)
	}

	_, err = io.ReadFull(c.conn, buf[:blen])
	if err != nil {
		return err
	}

	r := connectResponse{}
	_, err = decodePacket(buf[:blen], &r)
	if err != nil {
		return err
	}
	if r.SessionID == 0 {
		atomic.StoreInt64(&c.sessionID, int64(0))
		c.passwdMu.Lock()
		c.passwd = emptyPassword
		c.passwdMu.Unlock()
		c.lastZxid = 0
		c.setState(StateExpired)
		return ErrSessionExpired
	}

	atomic.StoreInt64(&c.sessionID, r.SessionID)
	c.setTimeouts(r.TimeOut)
	c.passwdMu.Lock()
	c.passwd = r.Passwd
	c.passwdMu.Unlock()
	c.pingsMu.Lock()
	c.pings = c.pings[:0] // a new connection: no ping of the old one will be answered
	c.pingsMu.Unlock()
	c.noteHeard(sent)
	c.setState(StateHasSession)

	return nil
}

// encodeRequest encodes req as one packet (length, header, body) at the start
// of buf and returns the packet's length.
func encodeRequest(buf []byte, req *request) (int, error) {
	if len(buf) < 4 {
		return 0, ErrShortBuffer
	}
	header := requestHeader{req.xid, req.opcode}
	n, err := header.encode(buf[4:])
	if err != nil {
		return 0, err
	}

	n2, err := encodePacket(buf[4+n:], req.pkt)
	if err != nil {
		return 0, err
	}

	n += n2

	binary.BigEndian.PutUint32(buf[:4], uint32(n))
	return n + 4, nil
}

// sendData sends one request on its own; the send loop sends batches (see
// sendBatch).
func (c *Conn) sendData(req *request) error {
	n, err := encodeRequest(c.buf, req)
	if err != nil {
		req.recvChan <- response{-1, err}
		return nil
	}
	return c.writeRequests([]*request{req}, n)
}

// sendBatch sends req together with the requests already queued behind it on
// sendChan, encoded back to back in c.buf and written with one Write: a burst
// of requests costs one system call (and one write deadline) instead of one
// each. Queued requests are taken without waiting, while the batch fills less
// than half of c.buf; a request that does not fit in the rest of the buffer
// is sent after the batch before it, at the start of the buffer. Requests
// queued together (a request and its then, see queueRequests) are one piece
// here: they go in the same Write unless together they are longer than the
// buffer. As in sendData, a request that cannot be encoded is answered with
// its error alone, and a failed write answers every request of its batch and
// closes the connection. batch is scratch space, returned for reuse.
func (c *Conn) sendBatch(req *request, batch []*request) ([]*request, error) {
	n := 0
	yielded := false
	for req != nil {
		var err error
		batch, n, err = c.encodeGroup(req, batch, n)
		if err != nil {
			return batch, err
		}
		req = nil
		if n < len(c.buf)/2 {
			select {
			case req = <-c.sendChan:
			default:
				if !yielded {
					// Let the goroutines that are ready to run (callers
					// that the receive loop has just answered) queue
					// their next requests before the write, once per
					// batch: a yield costs far less than the write
					// system call each of them would otherwise take.
					yielded = true
					runtime.Gosched()
					select {
					case req = <-c.sendChan:
					default:
					}
				}
			}
		}
	}
	if len(batch) == 0 {
		return batch, nil
	}
	err := c.writeRequests(batch, n)
	for i := range batch {
		batch[i] = nil // let the requests go once answered
	}
	return batch[:0], err
}

// encodeGroup adds req and the requests queued with it to the batch of n
// bytes in c.buf. If they do not all fit behind the batch, the batch is
// written first and they are encoded at the start of the buffer; a group
// longer than the whole buffer is sent one request at a time, in order.
func (c *Conn) encodeGroup(req *request, batch []*request, n int) ([]*request, int, error) {
	at := n
	var errs []error
	for r := req; r != nil; r = r.then {
		m, err := encodeRequest(c.buf[at:], r)
		if err == ErrShortBuffer {
			if n == 0 {
				return c.encodeEach(req, batch, n)
			}
			if err := c.flushBatch(batch, n, req); err != nil {
				return batch[:0], 0, err
			}
			return c.encodeGroup(req, batch[:0], 0)
		}
		errs = append(errs, err)
		at += m
	}
	i := 0
	for r := req; r != nil; r, i = r.then, i+1 {
		if errs[i] != nil {
			r.recvChan <- response{-1, errs[i]}
		} else {
			batch = append(batch, r)
		}
	}
	return batch, at, nil
}

// encodeEach adds req and the requests queued with it to the batch one at a
// time, writing the batch whenever the next does not fit behind it.
func (c *Conn) encodeEach(req *request, batch []*request, n int) ([]*request, int, error) {
	for req != nil {
		m, err := encodeRequest(c.buf[n:], req)
		switch {
		case err == ErrShortBuffer && n > 0:
			if err := c.flushBatch(batch, n, req); err != nil {
				return batch[:0], 0, err
			}
			batch, n = batch[:0], 0
			continue
		case err != nil:
			req.recvChan <- response{-1, err}
		default:
			batch = append(batch, req)
			n += m
		}
		req = req.then
	}
	return batch, n, nil
}

// flushBatch writes the batch of n bytes. If the write fails, the requests
// from next on, not written, are answered ErrConnectionClosed too.
func (c *Conn) flushBatch(batch []*request, n int, next *request) error {
	err := c.writeRequests(batch, n)
	for i := range batch {
		batch[i] = nil
	}
	if err != nil {
		for r := next; r != nil; r = r.then {
			r.recvChan <- response{-1, ErrConnectionClosed}
		}
	}
	return err
}

// writeRequests registers reqs, whose packets are c.buf[:n], as pending and
// writes them with one Write.
//
// Every request gets exactly one response: from the receive loop, from
// flushRequests or from here. If the connection is closing, none is
// registered and each is answered ErrConnectionClosed. If the write fails,
// the requests that no reply has answered yet (a partial write may have
// carried some to the server) are taken out of the pending requests and
// answered ErrConnectionClosed, as they would be had the connection broken
// after the write: whether the server received them is unknown. The write
// error is returned and the connection is closed.
func (c *Conn) writeRequests(reqs []*request, n int) error {
	c.requestsLock.Lock()
	select {
	case <-c.closeChan:
		for _, req := range reqs {
			req.recvChan <- response{-1, ErrConnectionClosed}
		}
		c.requestsLock.Unlock()
		return ErrConnectionClosed
	default:
	}
	sent := monoNow()
	for _, req := range reqs {
		req.sent = sent
		c.requests[req.xid] = req
	}
	c.requestsLock.Unlock()

	c.conn.SetWriteDeadline(time.Now().Add(c.recvTimeout))
	_, err := c.conn.Write(c.buf[:n])
	c.conn.SetWriteDeadline(time.Time{})
	if err != nil {
		c.requestsLock.Lock()
		for _, req := range reqs {
			if c.requests[req.xid] == req {
				delete(c.requests, req.xid)
				req.recvChan <- response{-1, ErrConnectionClosed}
			}
		}
		c.requestsLock.Unlock()
		c.conn.Close()
		return err
	}

	return nil
}

func (c *Conn) sendLoop() error {
	pingTicker := time.NewTicker(c.pingInterval)
	defer pingTicker.Stop()

	var batch []*request
	for {
		select {
		case req := <-c.sendChan:
			var err error
			if batch, err = c.sendBatch(req, batch); err != nil {
				return err
			}
		case <-pingTicker.C:
			n, err := encodePacket(c.buf[4:], &requestHeader{Xid: -2, Opcode: opPing})
			if err != nil {
				panic("zk: opPing should never fail to serialize")
			}

			binary.BigEndian.PutUint32(c.buf[:4], uint32(n))

			c.pingsMu.Lock()
			c.pings = append(c.pings, monoNow())
			c.pingsMu.Unlock()
			c.conn.SetWriteDeadline(time.Now().Add(c.recvTimeout))
			_, err = c.conn.Write(c.buf[:n+4])
			c.conn.SetWriteDeadline(time.Time{})
			if err != nil {
				c.conn.Close()
				return err
			}
		case <-c.closeChan:
			return nil
		}
	}
}

func (c *Conn) recvLoop(conn net.Conn) error {
	sz := bufferSize
	if c.maxBufferSize > 0 && sz > c.maxBufferSize {
		sz = c.maxBufferSize
	}
	buf := make([]byte, sz)
	// Replies are read through a buffer, so that one read system call
	// carries every reply that has arrived instead of two calls per reply.
	rsz := readBufferSize
	if sz < rsz {
		rsz = sz
	}
	r := bufio.NewReaderSize(conn, rsz)
	// One header for every reply: a pointer to it goes to the request's
	// recvFunc, so one made per reply would be a heap allocation each.
	var res responseHeader
	for {
		// A packet must arrive within recvTimeout of the start of its
		// reading. A packet already whole in the read buffer needs no read
		// from the connection, so no deadline: setting one (and clearing
		// it) costs a timer change per packet. The deadline is not cleared
		// after a packet either, since every packet that reads from the
		// connection sets its own first.
		if !wholePacketBuffered(r) {
			if err := conn.SetReadDeadline(time.Now().Add(c.recvTimeout)); err != nil {
				c.logger.Printf("failed to set connection deadline: %v", err)
			}
		}
		// package length
		_, err := io.ReadFull(r, buf[:4])
		if err != nil {
			return fmt.Errorf("failed to read from connection: %v", err)
		}

		blen := int(binary.BigEndian.Uint32(buf[:4]))
		if cap(buf) < blen {
			if c.maxBufferSize > 0 && blen > c.maxBufferSize {
				return fmt.Errorf("received packet from server with length %d, which exceeds max buffer size %d", blen, c.maxBufferSize)
			}
			buf = make([]byte, blen)
		}

		_, err = io.ReadFull(r, buf[:blen])
		if err != nil {
			return err
		}

		_, err = res.decode(buf[:16])
		if err != nil {
			return err
		}

		if res.Xid == -1 {
			res := &watcherEvent{}
			_, err = decodePacket(buf[16:blen], res)
			if err != nil {
				return err
			}
			ev := Event{
				Type:  res.Type,
				State: res.State,
				Path:  res.Path,
				Err:   nil,
			}
			c.sendEvent(ev)
			c.notifyWatches(ev)
		} else if res.Xid == -2 {
			// Ping response: pings are answered in the order they were sent.
			c.pingsMu.Lock()
			if len(c.pings) > 0 {
				c.noteHeard(c.pings[0])
				c.pings = c.pings[1:]
			}
			c.pingsMu.Unlock()
		} else if res.Xid < 0 {
			c.logger.Printf("Xid < 0 (%d) but not ping or watcher event", res.Xid)
		} else {
			if res.Zxid > 0 {
				c.lastZxid = res.Zxid
			}

			c.requestsLock.Lock()
			req, ok := c.requests[res.Xid]
			if ok {
				delete(c.requests, res.Xid)
			}
			c.requestsLock.Unlock()

			if !ok {
				c.logger.Printf("Response for unknown request with xid %d", res.Xid)
			} else {
				if res.Err != errSessionExpired && res.Err != errSessionMoved {
					c.noteHeard(req.sent)
				}
				if res.Err != 0 {
					err = res.Err.toError()
				} else {
					_, err = decodePacket(buf[16:blen], req.recvStruct)
				}
				if req.recvFunc != nil {
					req.recvFunc(req, &res, err)
				}
				req.recvChan <- response{res.Zxid, err}
				if req.opcode == opClose {
					return io.EOF
				}
			}
		}
	}
}

// wholePacketBuffered reports whether r holds a whole packet (its length
// and as many bytes as that says), so that reading it reads nothing from the
// connection.
func wholePacketBuffered(r *bufio.Reader) bool {
	n := r.Buffered()
	if n < 4 {
		return false
	}
	l, err := r.Peek(4)
	if err != nil {
		return false
	}
	return uint64(n-4) >= uint64(binary.BigEndian.Uint32(l))
}

func (c *Conn) nextXid() int32 {
	return int32(atomic.AddUint32(&c.xid, 1) & 0x7fffffff)
}

func (c *Conn) addWatcher(path string, watchType watchType) <-chan Event {
	c.watchersLock.Lock()
	defer c.watchersLock.Unlock()

	ch := make(chan Event, 1)
	wpt := watchPathType{path, watchType}
	c.watchers[wpt] = append(c.watchers[wpt], ch)
	return ch
}

func (c *Conn) queueRequest(opcode int32, req interface{}, res interface{}, recvFunc func(*request, *responseHeader, error)) <-chan response {
	rq := c.newRequest(opcode, req, res, recvFunc)
	c.enqueue(rq)
	return rq.recvChan
}

// queueRequests queues first and then second behind it as one: the send
// loop writes them in the same Write (see sendBatch), so the second is on
// the wire before the reply to the first can come back.
func (c *Conn) queueRequests(first, second *request) (<-chan response, <-chan response) {
	first.then = second
	c.enqueue(first)
	return first.recvChan, second.recvChan
}

func (c *Conn) newRequest(opcode int32, req interface{}, res interface{}, recvFunc func(*request, *responseHeader, error)) *request {
	return &request{
		xid:        c.nextXid(),
		opcode:     opcode,
		pkt:        req,
		recvStruct: res,
		recvChan:   make(chan response, 2),
		recvFunc:   recvFunc,
	}
}

// enqueue hands rq (and the requests queued with it) to the send loop.
func (c *Conn) enqueue(rq *request) {
	fail := func() {
		for r := rq; r != nil; r = r.then {
			r.recvChan <- response{-1, ErrConnectionClosed}
		}
	}
	switch rq.opcode {
	case opClose:
		// always attempt to send close ops.
		select {
		case c.sendChan <- rq:
		case <-time.After(c.connectTimeout * 2):
			c.logger.Printf("gave up trying to send opClose to server")
			fail()
		}
	default:
		// otherwise avoid deadlocks for dumb clients who aren't aware that
		// the ZK connection is closed yet.
		select {
		case <-c.shouldQuit:
			fail()
		case c.sendChan <- rq:
			// check for a tie
			select {
			case <-c.shouldQuit:
				// maybe the caller gets this, maybe not- we tried.
				fail()
			default:
			}
		}
	}
}

func (c *Conn) request(opcode int32, req interface{}, res interface{}, recvFunc func(*request, *responseHeader, error)) (int64, error) {
	recv := c.queueRequest(opcode, req, res, recvFunc)
	select {
	case r := <-recv:
		return r.zxid, r.err
	case <-c.shouldQuit:
		// queueRequest() can be racy, double-check for the race here and avoid
		// a potential data-race. otherwise the client of this func may try to
		// access `res` fields concurrently w/ the async response processor.
		// NOTE: callers of this func should check for (at least) ErrConnectionClosed
		// and avoid accessing fields of the response object if such error is present.
		return -1, ErrConnectionClosed
	}
}

// AddAuth adds an authentication config to the connection.
func (c *Conn) AddAuth(scheme string, auth []byte) error {
	_, err := c.request(opSetAuth, &setAuthRequest{Type: 0, Scheme: scheme, Auth: auth}, &setAuthResponse{}, nil)

	if err != nil {
		return err
	}

	// Remember authdata so that it can be re-submitted on reconnect
	//
	// FIXME(prozlach): For now we treat "userfoo:passbar" and "userfoo:passbar2"
	// as two different entries, which will be re-submitted on reconnect. Some
	// research is needed on how ZK treats these cases and
	// then maybe switch to something like "map[username] = password" to allow
	// only single password for given user with users being unique.
	obj := authCreds{
		scheme: scheme,
		auth:   auth,
	}

	c.credsMu.Lock()
	c.creds = append(c.creds, obj)
	c.credsMu.Unlock()

	return nil
}

// Children returns the children of a znode.
func (c *Conn) Children(path string) ([]string, *Stat, error) {
	if err := validatePath(path, false); err != nil {
		return nil, nil, err
	}

	res := &getChildren2Response{}
	_, err := c.request(opGetChildren2, &getChildren2Request{Path: path, Watch: false}, res, nil)
	if err == ErrConnectionClosed {
		return nil, nil, err
	}
	return res.Children, &res.Stat, err
}

// Ephemerals returns the paths of the ephemeral nodes that the session owns
// whose path starts with prefix ("/" or "": all of them), in no particular
// order. It is ZooKeeper's getEphemerals (opcode 103), since 3.6: an older
// server answers ErrUnimplemented.
func (c *Conn) Ephemerals(prefix string) ([]string, error) {
	if prefix == "" {
		prefix = "/"
	}
	res := &getEphemeralsResponse{}
	_, err := c.request(opGetEphemerals, &getEphemeralsRequest{PrefixPath: prefix}, res, nil)
	if err != nil {
		return nil, err
	}
	return res.Ephemerals, nil
}

// ChildrenW returns the children of a znode and sets a watch.
func (c *Conn) ChildrenW(path string) ([]string, *Stat, <-chan Event, error) {
	if err := validatePath(path, false); err != nil {
		return nil, nil, nil, err
	}

	var ech <-chan Event
	res := &getChildren2Response{}
	err := c.requestWatch(path, watchTypeChild, opGetChildren2, &getChildren2Request{Path: path, Watch: true}, res, func(req *request, res *responseHeader, err error) {
		if err == nil {
			ech = c.addWatcher(path, watchTypeChild)
		}
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return res.Children, &res.Stat, ech, err
}

// Get gets the contents of a znode.
func (c *Conn) Get(path string) ([]byte, *Stat, error) {
	if err := validatePath(path, false); err != nil {
		return nil, nil, err
	}

	res := &getDataResponse{}
	_, err := c.request(opGetData, &getDataRequest{Path: path, Watch: false}, res, nil)
	if err == ErrConnectionClosed {
		return nil, nil, err
	}
	return res.Data, &res.Stat, err
}

// GetW returns the contents of a znode and sets a watch
func (c *Conn) GetW(path string) ([]byte, *Stat, <-chan Event, error) {
	if err := validatePath(path, false); err != nil {
		return nil, nil, nil, err
	}

	var ech <-chan Event
	res := &getDataResponse{}
	err := c.requestWatch(path, watchTypeData, opGetData, &getDataRequest{Path: path, Watch: true}, res, func(req *request, res *responseHeader, err error) {
		if err == nil {
			ech = c.addWatcher(path, watchTypeData)
		}
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return res.Data, &res.Stat, ech, err
}

// Set updates the contents of a znode.
func (c *Conn) Set(path string, data []byte, version int32) (*Stat, error) {
	if err := validatePath(path, false); err != nil {
		return nil, err
	}

	res := &setDataResponse{}
	_, err := c.request(opSetData, &SetDataRequest{path, data, version}, res, nil)
	if err == ErrConnectionClosed {
		return nil, err
	}
	return &res.Stat, err
}

// Create creates a znode.
// The returned path is the new path assigned by the server, it may not be the
// same as the input, for example when creating a sequence znode the returned path
// will be the input path with a sequence number appended.
func (c *Conn) Create(path string, data []byte, flags int32, acl []ACL) (string, error) {
	createMode, err := parseCreateMode(flags)
	if err != nil {
		return "", err
	}

	if err := validatePath(path, createMode.isSequential); err != nil {
		return "", err
	}

	if createMode.isTTL {
		return "", fmt.Errorf("Create with TTL flag disallowed: %w", ErrInvalidFlags)
	}

	res := &createResponse{}
	_, err = c.request(opCreate, &CreateRequest{path, data, acl, createMode.flag}, res, nil)
	if err == ErrConnectionClosed {
		return "", err
	}
	return res.Path, err
}

// CreateWithStat creates a znode like Create and also returns its Stat, as
// the server created it, with the same round trip (ZooKeeper's create2).
// The Stat is nil when an error is returned.
//
// Container and TTL znodes have operations of their own: CreateContainer and
// CreateTTL.
func (c *Conn) CreateWithStat(path string, data []byte, flags int32, acl []ACL) (string, *Stat, error) {
	createMode, err := parseCreateMode(flags)
	if err != nil {
		return "", nil, err
	}

	if err := validatePath(path, createMode.isSequential); err != nil {
		return "", nil, err
	}

	if createMode.isTTL || createMode.isContainer {
		return "", nil, fmt.Errorf("CreateWithStat with TTL or container flag disallowed: %w", ErrInvalidFlags)
	}

	res := &create2Response{}
	_, err = c.request(opCreate2, &CreateRequest{path, data, acl, createMode.flag}, res, nil)
	if err != nil {
		return "", nil, err
	}
	return res.Path, &res.Stat, nil
}

// ChildrenResult is the answer to the listing of CreateWithStatThenChildren:
// the children and Stat of the parent as Children returns them, or the
// listing's own error.
type ChildrenResult struct {
	Children []string
	Stat     *Stat
	Err      error
}

// CreateWithStatThenChildren is CreateWithStat of path followed by Children
// of parent, sent behind the create without waiting for its reply: both take
// one round trip. ZooKeeper executes a session's requests in the order it
// sent them, so when both succeed the listing was made after the create and
// shows the new node, unless it was deleted in between. This is the first
// step of a lock recipe: make a sequential node, then list its siblings.
//
// The returned error is the create's; the listing's is in the
// ChildrenResult. When the create fails, the listing is sent all the same
// and its result is meaningless for the create.
func (c *Conn) CreateWithStatThenChildren(path string, data []byte, flags int32, acl []ACL, parent string) (string, *Stat, ChildrenResult, error) {
	createMode, err := parseCreateMode(flags)
	if err != nil {
		return "", nil, ChildrenResult{}, err
	}
	if err := validatePath(path, createMode.isSequential); err != nil {
		return "", nil, ChildrenResult{}, err
	}
	if err := validatePath(parent, false); err != nil {
		return "", nil, ChildrenResult{}, err
	}
	if createMode.isTTL || createMode.isContainer {
		return "", nil, ChildrenResult{}, fmt.Errorf("CreateWithStatThenChildren with TTL or container flag disallowed: %w", ErrInvalidFlags)
	}

	res := &create2Response{}
	lres := &getChildren2Response{}
	// Queued as one: the send loop writes them together, in their order.
	created, listed := c.queueRequests(
		c.newRequest(opCreate2, &CreateRequest{path, data, acl, createMode.flag}, res, nil),
		c.newRequest(opGetChildren2, &getChildren2Request{Path: parent, Watch: false}, lres, nil))
	list := ChildrenResult{Err: c.await(listed)}
	if list.Err == nil {
		list.Children, list.Stat = lres.Children, &lres.Stat
	}
	if err := c.await(created); err != nil {
		return "", nil, list, err
	}
	return res.Path, &res.Stat, list, nil
}

// await waits for the response to a queued request, as request does.
func (c *Conn) await(recv <-chan response) error {
	select {
	case r := <-recv:
		return r.err
	case <-c.shouldQuit:
		return ErrConnectionClosed
	}
}

// CreateContainer creates a container znode and returns the path.
//
// Containers cannot be ephemeral or sequential, or have TTLs.
// Ensure that we reject flags for TTL, Sequence, and Ephemeral.
func (c *Conn) CreateContainer(path string, data []byte, flag int32, acl []ACL) (string, error) {
	createMode, err := parseCreateMode(flag)
	if err != nil {
		return "", err
	}

	if err := validatePath(path, createMode.isSequential); err != nil {
		return "", err
	}

	if !createMode.isContainer {
		return "", fmt.Errorf("CreateContainer requires container flag: %w", ErrInvalidFlags)
	}

	res := &createResponse{}
	_, err = c.request(opCreateContainer, &CreateRequest{path, data, acl, createMode.flag}, res, nil)
	return res.Path, err
}

// CreateTTL creates a TTL znode, which will be automatically deleted by server after the TTL.
func (c *Conn) CreateTTL(path string, data []byte, flag int32, acl []ACL, ttl time.Duration) (string, error) {
	createMode, err := parseCreateMode(flag)
	if err != nil {
		return "", err
	}

	if err := validatePath(path, createMode.isSequential); err != nil {
		return "", err
	}

	if !createMode.isTTL {
		return "", fmt.Errorf("CreateTTL requires TTL flag: %w", ErrInvalidFlags)
	}

	res := &createResponse{}
	_, err = c.request(opCreateTTL, &CreateTTLRequest{path, data, acl, createMode.flag, ttl.Milliseconds()}, res, nil)
	return res.Path, err
}

// CreateProtectedEphemeralSequential fixes a race condition if the server crashes
// after it creates the node. On reconnect the session may still be valid so the
// ephemeral node still exists. Therefore, on reconnect we need to check if a node
// with a GUID generated on create exists.
func (c *Conn) CreateProtectedEphemeralSequential(path string, data []byte, acl []ACL) (string, error) {
	if err := validatePath(path, true); err != nil {
		return "", err
	}

	var guid [16]byte
	_, err := io.ReadFull(rand.Reader, guid[:16])
	if err != nil {
		return "", err
	}
	guidStr := fmt.Sprintf("%x", guid)

	parts := strings.Split(path, "/")
	parts[len(parts)-1] = fmt.Sprintf("%s%s-%s", protectedPrefix, guidStr, parts[len(parts)-1])
	rootPath := strings.Join(parts[:len(parts)-1], "/")
	protectedPath := strings.Join(parts, "/")

	var newPath string
	for i := 0; i < 3; i++ {
		newPath, err = c.Create(protectedPath, data, FlagEphemeral|FlagSequence, acl)
		switch err {
		case ErrSessionExpired:
			// No need to search for the node since it can't exist. Just try again.
		case ErrConnectionClosed:
			children, _, err := c.Children(rootPath)
			if err != nil {
				return "", err
			}
			for _, p := range children {
				parts := strings.Split(p, "/")
				if pth := parts[len(parts)-1]; strings.HasPrefix(pth, protectedPrefix) {
					if g := pth[len(protectedPrefix) : len(protectedPrefix)+32]; g == guidStr {
						return rootPath + "/" + p, nil
					}
				}
			}
		case nil:
			return newPath, nil
		default:
			return "", err
		}
	}
	return "", err
}

// Delete deletes a znode.
func (c *Conn) Delete(path string, version int32) error {
	if err := validatePath(path, false); err != nil {
		return err
	}

	_, err := c.request(opDelete, &DeleteRequest{path, version}, &deleteResponse{}, nil)
	return err
}

// Exists tells the existence of a znode.
func (c *Conn) Exists(path string) (bool, *Stat, error) {
	if err := validatePath(path, false); err != nil {
		return false, nil, err
	}

	res := &existsResponse{}
	_, err := c.request(opExists, &existsRequest{Path: path, Watch: false}, res, nil)
	if err == ErrConnectionClosed {
		return false, nil, err
	}
	exists := true
	if err == ErrNoNode {
		exists = false
		err = nil
	}
	return exists, &res.Stat, err
}

// ExistsW tells the existence of a znode and sets a watch.
func (c *Conn) ExistsW(path string) (bool, *Stat, <-chan Event, error) {
	if err := validatePath(path, false); err != nil {
		return false, nil, nil, err
	}

	var ech <-chan Event
	res := &existsResponse{}
	err := c.requestWatch(path, watchTypeData, opExists, &existsRequest{Path: path, Watch: true}, res, func(req *request, res *responseHeader, err error) {
		if err == nil {
			ech = c.addWatcher(path, watchTypeData)
		} else if err == ErrNoNode {
			ech = c.addWatcher(path, watchTypeExist)
		}
	})
	exists := true
	if err == ErrNoNode {
		exists = false
		err = nil
	}
	if err != nil {
		return false, nil, nil, err
	}
	return exists, &res.Stat, ech, err
}

// GetACL gets the ACLs of a znode.
func (c *Conn) GetACL(path string) ([]ACL, *Stat, error) {
	if err := validatePath(path, false); err != nil {
		return nil, nil, err
	}

	res := &getAclResponse{}
	_, err := c.request(opGetAcl, &getAclRequest{Path: path}, res, nil)
	if err == ErrConnectionClosed {
		return nil, nil, err
	}
	return res.Acl, &res.Stat, err
}

// SetACL updates the ACLs of a znode.
func (c *Conn) SetACL(path string, acl []ACL, version int32) (*Stat, error) {
	if err := validatePath(path, false); err != nil {
		return nil, err
	}

	res := &setAclResponse{}
	_, err := c.request(opSetAcl, &setAclRequest{Path: path, Acl: acl, Version: version}, res, nil)
	if err == ErrConnectionClosed {
		return nil, err
	}
	return &res.Stat, err
}

// Sync flushes the channel between process and the leader of a given znode,
// you may need it if you want identical views of ZooKeeper data for 2 client instances.
// Please refer to the "Consistency Guarantees" section of ZK document for more details.
func (c *Conn) Sync(path string) (string, error) {
	if err := validatePath(path, false); err != nil {
		return "", err
	}

	res := &syncResponse{}
	_, err := c.request(opSync, &syncRequest{Path: path}, res, nil)
	if err == ErrConnectionClosed {
		return "", err
	}
	return res.Path, err
}

// MultiResponse is the result of a Multi call.
type MultiResponse struct {
	Stat   *Stat
	String string
	Error  error
}

// Multi executes multiple ZooKeeper operations or none of them. The provided
// ops must be one of *CreateRequest, *DeleteRequest, *SetDataRequest, or
// *CheckVersionRequest.
func (c *Conn) Multi(ops ...interface{}) ([]MultiResponse, error) {
	req := &multiRequest{
		Ops:        make([]multiRequestOp, 0, len(ops)),
		DoneHeader: multiHeader{Type: -1, Done: true, Err: -1},
	}
	for _, op := range ops {
		var opCode int32
		switch op.(type) {
		case *CreateRequest:
			opCode = opCreate
		case *SetDataRequest:
			opCode = opSetData
		case *DeleteRequest:
			opCode = opDelete
		case *CheckVersionRequest:
			opCode = opCheck
		default:
			return nil, fmt.Errorf("unknown operation type %T", op)
		}
		req.Ops = append(req.Ops, multiRequestOp{multiHeader{opCode, false, -1}, op})
	}
	res := &multiResponse{}
	_, err := c.request(opMulti, req, res, nil)
	if err == ErrConnectionClosed {
		return nil, err
	}
	mr := make([]MultiResponse, len(res.Ops))
	for i, op := range res.Ops {
		mr[i] = MultiResponse{Stat: op.Stat, String: op.String, Error: op.Err.toError()}
	}
	return mr, err
}

// IncrementalReconfig is the zookeeper reconfiguration api that allows adding and removing servers
// by lists of members. For more info refer to the ZK documentation.
//
// An optional version allows for conditional reconfigurations, -1 ignores the condition.
//
// Returns the new configuration znode stat.
func (c *Conn) IncrementalReconfig(joining, leaving []string, version int64) (*Stat, error) {
	// TODO: validate the shape of the member string to give early feedback.
	request := &reconfigRequest{
		JoiningServers: []byte(strings.Join(joining, ",")),
		LeavingServers: []byte(strings.Join(leaving, ",")),
		CurConfigId:    version,
	}

	return c.internalReconfig(request)
}

// Reconfig is the non-incremental update functionality for Zookeeper where the list provided
// is the entire new member list. For more info refer to the ZK documentation.
//
// An optional version allows for conditional reconfigurations, -1 ignores the condition.
//
// Returns the new configuration znode stat.
func (c *Conn) Reconfig(members []string, version int64) (*Stat, error) {
	request := &reconfigRequest{
		NewMembers:  []byte(strings.Join(members, ",")),
		CurConfigId: version,
	}

	return c.internalReconfig(request)
}

func (c *Conn) internalReconfig(request *reconfigRequest) (*Stat, error) {
	response := &reconfigReponse{}
	_, err := c.request(opReconfig, request, response, nil)
	return &response.Stat, err
}

// Server returns the current or last-connected server name.
func (c *Conn) Server() string {
	c.serverMu.Lock()
	defer c.serverMu.Unlock()
	return c.server
}

func resendZkAuth(ctx context.Context, c *Conn) error {
	shouldCancel := func() bool {
		select {
		case <-c.shouldQuit:
			return true
		case <-c.closeChan:
			return true
		default:
			return false
		}
	}

	c.credsMu.Lock()
	defer c.credsMu.Unlock()

	if c.logInfo {
		c.logger.Printf("re-submitting `%d` credentials after reconnect", len(c.creds))
	}

	for _, cred := range c.creds {
		// return early before attempting to send request.
		if shouldCancel() {
			return nil
		}
		// do not use the public API for auth since it depends on the send/recv loops
		// that are waiting for this to return
		resChan, err := c.sendRequest(
			opSetAuth,
			&setAuthRequest{Type: 0,
				Scheme: cred.scheme,
				Auth:   cred.auth,
			},
			&setAuthResponse{},
			nil, /* recvFunc*/
		)
		if err != nil {
			return fmt.Errorf("failed to send auth request: %v", err)
		}

		var res response
		select {
		case res = <-resChan:
		case <-c.closeChan:
			c.logger.Printf("recv closed, cancel re-submitting credentials")
			return nil
		case <-c.shouldQuit:
			c.logger.Printf("should quit, cancel re-submitting credentials")
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
		if res.err != nil {
			return fmt.Errorf("failed connection setAuth request: %v", res.err)
		}
	}

	return nil
}

// The server's tables of watches, as removeWatches names them: ZooKeeper
// keeps the watches that getData and exists set in one table (its data
// watches), those that getChildren sets in another.
const (
	watcherTypeChildren = 1
	watcherTypeData     = 2
)

// tableOf is the server's table of a watch of type t, as the key
// watchPending and removeLater use.
func tableOf(t watchType) watchType {
	if t == watchTypeChild {
		return watchTypeChild
	}
	return watchTypeData
}

// requestWatch sends a request that sets a watch on path in the server's
// table table (watchTypeData or watchTypeChild) and waits for its answer,
// as request does. While it is unanswered, no removal of a watch of that
// table and path is queued (see RemoveWatch).
func (c *Conn) requestWatch(path string, table watchType, opcode int32, req interface{}, res interface{}, recvFunc func(*request, *responseHeader, error)) error {
	key := watchPathType{path, table}
	c.watchSetMu.Lock()
	c.watchersLock.Lock()
	c.watchPending[key]++
	c.watchersLock.Unlock()
	recv := c.queueRequest(opcode, req, res, recvFunc)
	c.watchSetMu.Unlock()
	err := c.await(recv)
	c.settleWatch(key)
	return err
}

// settleWatch counts an answered request of requestWatch, and queues the
// removal that waited for it if no watch of key's table and path is left.
func (c *Conn) settleWatch(key watchPathType) {
	c.watchSetMu.Lock()
	defer c.watchSetMu.Unlock()
	c.watchersLock.Lock()
	c.watchPending[key]--
	send := false
	if c.watchPending[key] <= 0 {
		delete(c.watchPending, key)
		send = c.removeLater[key] && !c.watchedLocked(key)
		delete(c.removeLater, key)
	}
	c.watchersLock.Unlock()
	if send {
		// Nobody waits for the answer: an error means the watch is gone
		// anyway (it went with the connection) or cannot be removed.
		c.queueRequest(opRemoveWatches, removeRequestOf(key), &removeWatchesResponse{}, nil)
	}
}

// watchedLocked reports whether a watch of key's table and path has a
// channel; c.watchersLock must be held.
func (c *Conn) watchedLocked(key watchPathType) bool {
	if key.wType == watchTypeChild {
		return len(c.watchers[key]) > 0
	}
	return len(c.watchers[watchPathType{key.path, watchTypeData}]) > 0 ||
		len(c.watchers[watchPathType{key.path, watchTypeExist}]) > 0
}

func removeRequestOf(key watchPathType) *removeWatchesRequest {
	if key.wType == watchTypeChild {
		return &removeWatchesRequest{Path: key.path, Type: watcherTypeChildren}
	}
	return &removeWatchesRequest{Path: key.path, Type: watcherTypeData}
}

// RemoveWatch stops the watch that GetW, ExistsW or ChildrenW set on path
// and returned ch for: ch is closed without an event, and when no other
// watch of this client waits for the same kind of change of path, the
// server drops its watch too (removeWatches, ZooKeeper 3.5 and later), so
// that neither keeps a watch nobody waits for, nor sets it again after a
// reconnect. A watch that has fired already (or that a lost session ended)
// is gone: RemoveWatch then does nothing and returns nil.
//
// The server keeps one watch per path and table for a connection, however
// many of this client's channels wait on it, so it is removed only with the
// last of them, and not while a request that sets one there is unanswered:
// it waits for that answer, and is sent then if no channel is left. The
// error is that of the server's removal: ErrUnimplemented from a server
// older than 3.5; a connection lost meanwhile took the server's watch with
// it, and reports nil.
func (c *Conn) RemoveWatch(path string, ch <-chan Event) error {
	c.watchSetMu.Lock()
	c.watchersLock.Lock()
	var key watchPathType
	found := false
	for _, t := range []watchType{watchTypeData, watchTypeExist, watchTypeChild} {
		wpt := watchPathType{path, t}
		list := c.watchers[wpt]
		for i, w := range list {
			if w != ch {
				continue
			}
			found, key = true, watchPathType{path, tableOf(t)}
			close(w)
			list = append(list[:i], list[i+1:]...)
			if len(list) == 0 {
				delete(c.watchers, wpt)
			} else {
				c.watchers[wpt] = list
			}
			break
		}
		if found {
			break
		}
	}
	send := false
	if found && !c.watchedLocked(key) {
		if c.watchPending[key] > 0 {
			c.removeLater[key] = true
		} else {
			send = true
		}
	}
	c.watchersLock.Unlock()
	if !send {
		c.watchSetMu.Unlock()
		return nil
	}
	recv := c.queueRequest(opRemoveWatches, removeRequestOf(key), &removeWatchesResponse{}, nil)
	c.watchSetMu.Unlock()
	switch err := c.await(recv); err {
	case nil, ErrNoWatcher, ErrConnectionClosed, ErrClosing, ErrSessionExpired:
		// No watcher: it fired on the server as the removal went out.
		return nil
	default:
		return err
	}
}

// WatchCount is the number of watch channels the client keeps: those that
// GetW, ExistsW and ChildrenW returned and that have neither fired nor been
// removed. Each is set again on the server after a reconnect.
func (c *Conn) WatchCount() int {
	c.watchersLock.Lock()
	defer c.watchersLock.Unlock()
	n := 0
	for _, list := range c.watchers {
		n += len(list)
	}
	return n
}
