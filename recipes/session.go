package recipes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
	"go.opentelemetry.io/otel/trace"
)

// State is what the gateway may assume about its ZooKeeper session.
type State int

const (
	// StateConnecting: no session yet (start-up, or a new one after a loss).
	StateConnecting State = iota
	// StateLive: connected with a session; grants can be made and asserted.
	StateLive
	// StateSuspended: disconnected; the session may still be alive on the
	// servers, so every grant is uncertain until it reconnects or is lost.
	StateSuspended
	// StateLost: the session expired (or was given up after being suspended
	// for a whole session timeout); every ephemeral node of it is gone.
	StateLost
	// StateClosed: Close was called.
	StateClosed
)

func (s State) String() string {
	switch s {
	case StateConnecting:
		return "connecting"
	case StateLive:
		return "live"
	case StateSuspended:
		return "suspended"
	case StateLost:
		return "lost"
	case StateClosed:
		return "closed"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// StateChange is delivered to session listeners.
type StateChange struct {
	State     State
	Epoch     uint64 // grows with every new ZooKeeper session id
	SessionID int64
}

// SessionConfig says how to reach ZooKeeper.
type SessionConfig struct {
	Servers []string      // host:port of each ensemble member
	Timeout time.Duration // requested session timeout
	Root    string        // the gateway's root znode, created on start
	Logger  *slog.Logger
	// Security is the gateway's identity, its nodes' ACL and the transport.
	Security ZKSecurity
	// Tracer makes the spans of traced requests (see tracing.go); nil:
	// none, at no cost.
	Tracer trace.Tracer

	// Resume, when set, is a session to take over (one another gateway, or
	// this gateway's previous run, gave up with Session.Detach) instead of
	// starting a new one: Connect fails with ErrSessionGone if the ensemble
	// has expired it.
	Resume *SavedSession

	// hosts, when set, replaces go-zookeeper's DNS host provider (tests use
	// it to make the ensemble's names fail to resolve for a while).
	hosts func() zk.HostProvider
}

// SavedSession is what resumes a ZooKeeper session: its id and password.
// Whoever has both owns the session: it is never logged or shown.
type SavedSession struct {
	ID       int64  `json:"id"`
	Password []byte `json:"password"`
}

// String keeps the password out of any log or format.
func (s SavedSession) String() string { return fmt.Sprintf("session 0x%x", uint64(s.ID)) }

// ErrSessionGone: the session to resume has expired.
var ErrSessionGone = errors.New("the ZooKeeper session to resume has expired")

// Bounds of the back-off between failed dials (a name that does not
// resolve, for instance).
const (
	dialBackoffMin = 50 * time.Millisecond
	dialBackoffMax = 5 * time.Second
)

// Session owns the gateway's one ZooKeeper session. Leases are bound to the
// epoch of the session they were made in: when that session ends, they end.
type Session struct {
	cfg SessionConfig
	log *slog.Logger

	mu          sync.Mutex
	conn        *zk.Conn
	gen         uint64     // which *zk.Conn the callbacks come from; older ones are ignored
	connGen     uint64     // the gen of conn
	authGen     uint64     // the generation whose credentials are in (see authenticate)
	early       []zk.Event // events of gen that came before its conn was installed
	state       State
	id          int64
	epoch       uint64
	lossTimer   *time.Timer
	dialing     bool          // a redial is under way (see redial)
	dialErr     error         // why the last dial failed, until one succeeds
	done        chan struct{} // closed by Close: stops a redial
	changed     chan struct{} // closed and replaced at every state change
	listeners   map[int]func(StateChange)
	nextListen  int
	reconnects  atomic.Int64
	sessionsNew atomic.Int64
	roundTrip   atomic.Int64 // the latest heartbeat's round trip, in ns
	losses      atomic.Int64

	// current is conn, for the readers that must not take mu: the time
	// ZooKeeper last answered (see silence) and the granted session timeout.
	// A session is vouched for only while its last answer is recent.
	current atomic.Pointer[zk.Conn]
	born    time.Time
	probeMu sync.Mutex
	probing chan struct{} // closed when the probe in flight ends
}

// Connect opens the session and waits, bounded by ctx, until it is live, then
// makes sure the root and the per-primitive parents exist. A dial that
// fails (a name that does not resolve yet) is retried with back-off until
// ctx ends.
func Connect(ctx context.Context, cfg SessionConfig) (*Session, error) {
	if len(cfg.Servers) == 0 {
		return nil, errors.New("no ZooKeeper servers given")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Session{
		cfg:       cfg,
		log:       cfg.Logger.With("component", "zk-session"),
		changed:   make(chan struct{}),
		done:      make(chan struct{}),
		listeners: map[int]func(StateChange){},
		born:      time.Now(),
	}
	s.mu.Lock()
	s.startRedialLocked()
	s.mu.Unlock()
	go s.heartbeat()
	if err := s.WaitLive(ctx); err != nil {
		s.mu.Lock()
		if s.dialErr != nil {
			err = s.dialErr
		}
		s.mu.Unlock()
		s.Close()
		return nil, fmt.Errorf("no ZooKeeper session with %s: %w", strings.Join(cfg.Servers, ","), err)
	}
	if cfg.Resume != nil {
		if _, _, id := s.Status(); id != cfg.Resume.ID {
			s.Close() // a new session, made after the old one was found expired
			return nil, ErrSessionGone
		}
	}
	if err := s.ensureRoot(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.requireWatchRemoval(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// MinZooKeeper is the oldest ZooKeeper the gateway works with: 3.5 brought
// the containers, create2 and removeWatches its recipes rest on.
const MinZooKeeper = "3.5"

// requireWatchRemoval checks that ZooKeeper removes a watch on request
// (removeWatches, since 3.5): without it a gateway would keep a watch of
// every name it ever served. An older server answers that it does not know
// the request.
func (s *Session) requireWatchRemoval(ctx context.Context) error {
	for {
		conn := s.Conn()
		_, _, ch, err := conn.ExistsW(s.cfg.Root)
		if err == nil {
			err = conn.RemoveWatch(s.cfg.Root, ch)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrUnimplemented):
			return fmt.Errorf("ZooKeeper at %s does not remove watches (removeWatches): zkgate needs ZooKeeper %s or later",
				strings.Join(s.cfg.Servers, ","), MinZooKeeper)
		case !ambiguous(err):
			return fmt.Errorf("remove a watch of %s: %w", s.cfg.Root, err)
		}
		if werr := s.WaitLive(ctx); werr != nil {
			return fmt.Errorf("remove a watch of %s: %w", s.cfg.Root, err)
		}
	}
}

// startRedialLocked makes a new *zk.Conn on a goroutine of its own, retrying
// with back-off until one is made or the session is closed. It never dials
// under s.mu: go-zookeeper resolves the servers' names synchronously, and
// every request and keepalive reads the session's state.
func (s *Session) startRedialLocked() {
	if s.dialing || s.state == StateClosed {
		return
	}
	s.dialing = true
	s.gen++ // events of the connection being replaced no longer count
	s.early = nil
	gen := s.gen
	go s.redial(gen)
}

func (s *Session) redial(gen uint64) {
	backoff := dialBackoffMin
	for attempt := 1; ; attempt++ {
		conn, err := s.dial(gen)
		s.mu.Lock()
		if s.state == StateClosed {
			s.dialing = false
			s.mu.Unlock()
			if conn != nil {
				conn.Close()
			}
			return
		}
		if err == nil {
			s.conn, s.connGen, s.dialing, s.dialErr = conn, gen, false, nil
			s.current.Store(conn)
			if s.cfg.Security.Digest != "" {
				go s.authenticate(gen, conn)
			}
			early := s.early
			s.early = nil
			for _, ev := range early {
				s.applyLocked(ev)
			}
			s.mu.Unlock()
			return
		}
		s.dialErr = err
		s.mu.Unlock()
		s.log.Error("connect to ZooKeeper; retrying", "attempt", attempt, "in", backoff, "err", err)
		select {
		case <-time.After(backoff):
		case <-s.done:
		}
		backoff = min(2*backoff, dialBackoffMax)
	}
}

// dial starts a *zk.Conn whose events are tagged with gen, so that a
// replaced connection can no longer move the state.
func (s *Session) dial(gen uint64) (*zk.Conn, error) {
	var hosts zk.HostProvider = &zk.DNSHostProvider{}
	if s.cfg.hosts != nil {
		hosts = s.cfg.hosts()
	}
	resume := zk.WithLogInfo(false)
	if r := s.cfg.Resume; r != nil && gen == 1 {
		resume = zk.WithSession(r.ID, r.Password) // only the first connection: a redial starts anew
	}
	conn, _, err := zk.Connect(s.cfg.Servers, s.cfg.Timeout,
		zk.WithLogger(zkLogger{s.log}),
		zk.WithLogInfo(false),
		zk.WithHostProvider(hosts),
		zk.WithEventCallback(func(ev zk.Event) { s.onEvent(gen, ev) }),
		s.cfg.Security.dialOption(),
		resume,
	)
	if err != nil {
		return nil, fmt.Errorf("connect to ZooKeeper: %w", err)
	}
	return conn, nil
}

// onEvent runs on go-zookeeper's goroutine: it must not block.
func (s *Session) onEvent(gen uint64, ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.gen || s.state == StateClosed {
		return
	}
	if s.connGen != gen {
		// The connection is not installed yet (the event beat the end of
		// dial): it is applied once it is, with the connection's id.
		s.early = append(s.early, ev)
		return
	}
	s.applyLocked(ev)
}

// applyLocked moves the state on a session event of the current connection.
func (s *Session) applyLocked(ev zk.Event) {
	switch ev.State {
	case zk.StateHasSession:
		if !s.authedLocked(s.connGen) {
			return // authenticate replays this once the credentials are in
		}
		id := s.conn.SessionID()
		if id != s.id {
			if s.id != 0 && s.state != StateLost {
				// A new id without an expiry event: the old session is gone all the same.
				s.losses.Add(1)
			}
			s.id = id
			s.epoch++
			s.sessionsNew.Add(1)
		} else if s.state == StateSuspended {
			s.reconnects.Add(1)
		}
		s.stopLossTimerLocked()
		s.setStateLocked(StateLive)
	case zk.StateDisconnected, zk.StateConnecting:
		if s.state == StateLive {
			s.setStateLocked(StateSuspended)
			s.startLossTimerLocked()
		}
	case zk.StateExpired:
		s.stopLossTimerLocked()
		if s.state != StateLost {
			s.losses.Add(1)
			s.setStateLocked(StateLost)
		}
	case zk.StateAuthFailed:
		s.log.Error("ZooKeeper authentication failed")
	}
}

// startLossTimerLocked gives up a session that stayed suspended for a whole
// session timeout: by then the ensemble has expired it (or will as soon as it
// hears of it), so its grants may already be someone else's. The connection is
// replaced, so that the old session is never resumed behind the leases' back.
func (s *Session) startLossTimerLocked() {
	s.stopLossTimerLocked()
	id := s.id
	s.lossTimer = time.AfterFunc(max(s.timeout()-s.silence(), 0), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.state != StateSuspended || s.id != id {
			return
		}
		s.giveUpLocked("suspended")
	})
}

// giveUpLocked treats the session as lost: ZooKeeper has not answered for a
// whole session timeout, so the ensemble has expired it (or will as soon as
// it hears of it), and its grants may already be someone else's. The
// connection is replaced, so that the old session is never resumed behind
// the leases' back.
func (s *Session) giveUpLocked(why string) {
	s.log.Warn("no answer from ZooKeeper for a whole session timeout: giving the session up", "why", why,
		"session", fmt.Sprintf("0x%x", uint64(s.id)), "silence", s.silence().Round(time.Millisecond))
	s.stopLossTimerLocked()
	s.losses.Add(1)
	s.setStateLocked(StateLost)
	old := s.conn
	go old.Close() // may wait for a dead server; never under our lock
	s.startRedialLocked()
}

func (s *Session) stopLossTimerLocked() {
	if s.lossTimer != nil {
		s.lossTimer.Stop()
		s.lossTimer = nil
	}
}

func (s *Session) setStateLocked(st State) {
	if st == s.state {
		return
	}
	s.log.Info("ZooKeeper session state", "from", s.state.String(), "to", st.String(), "session", fmt.Sprintf("0x%x", uint64(s.id)))
	s.state = st
	close(s.changed)
	s.changed = make(chan struct{})
	change := StateChange{State: st, Epoch: s.epoch, SessionID: s.id}
	for _, fn := range s.listeners {
		fn(change)
	}
}

// OnChange registers fn to be called, without blocking, at every state
// change. It returns a function that removes it.
func (s *Session) OnChange(fn func(StateChange)) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.nextListen
	s.nextListen++
	s.listeners[k] = fn
	return func() {
		s.mu.Lock()
		delete(s.listeners, k)
		s.mu.Unlock()
	}
}

// Status returns the state, the epoch and the ZooKeeper session id.
func (s *Session) Status() (State, uint64, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state, s.epoch, s.id
}

// Stats are counters for metrics.
type Stats struct {
	Reconnects  int64 // suspended sessions that came back
	NewSessions int64
	Losses      int64 // sessions expired or given up
	// RoundTrip is how long ZooKeeper took to answer the latest heartbeat
	// (a third of a session timeout apart): zero before the first.
	RoundTrip time.Duration
}

// Stats returns the session counters.
func (s *Session) Stats() Stats {
	return Stats{Reconnects: s.reconnects.Load(), NewSessions: s.sessionsNew.Load(), Losses: s.losses.Load(),
		RoundTrip: time.Duration(s.roundTrip.Load())}
}

// Conn is the current connection.
func (s *Session) Conn() *zk.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn
}

// Root is the gateway's root znode.
func (s *Session) Root() string { return s.cfg.Root }

// WaitLive waits until the session is live, ctx ends or the session is closed.
func (s *Session) WaitLive(ctx context.Context) error {
	for {
		s.mu.Lock()
		st, ch := s.state, s.changed
		s.mu.Unlock()
		switch st {
		case StateLive:
			return nil
		case StateClosed:
			return errClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// syncedKey marks a request's context once fresh has synced for it.
type syncedKey struct{}

// fresh brings the server this gateway reads from up to date with the
// ensemble's leader, once per request, before its plain reads: a client
// then reads its own writes even when it wrote through another gateway
// (whose server may be ahead of ours). The returned context says it is
// done, so that the request's further reads do not sync again.
func (s *Session) fresh(ctx context.Context) (context.Context, error) {
	if ctx.Value(syncedKey{}) != nil {
		return ctx, nil
	}
	if _, err := s.Conn().Sync(s.cfg.Root); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return ctx, err
	}
	return context.WithValue(ctx, syncedKey{}, true), nil
}

// waitEpoch waits until the session is live in epoch. It answers
// errSessionLost as soon as that epoch is over (a lost session, a new one),
// and errClosed once the session is closed.
func (s *Session) waitEpoch(ctx context.Context, epoch uint64) error {
	for {
		s.mu.Lock()
		st, cur, ch := s.state, s.epoch, s.changed
		s.mu.Unlock()
		// A closed session (closed, or handed over) never comes back:
		// errClosed is final, though its code is unavailable's.
		if err := epochVerdict(st, cur, epoch); st == StateClosed || !errors.Is(err, errUnavailable) {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// check says whether grants of epoch may be made or asserted now. A live
// session that ZooKeeper has not answered for a while (the gateway was
// frozen, or its answers stopped coming) is asked first: after a pause
// longer than the session timeout, ZooKeeper has expired it and may have
// handed its locks to others, and nothing may vouch for them before the
// gateway knows.
func (s *Session) check(epoch uint64) error {
	s.mu.Lock()
	timeout := s.timeout()
	if (s.state == StateLive || s.state == StateSuspended) && s.epoch == epoch && s.silence() > timeout {
		s.giveUpLocked("silent") // the loss timer's rule, though its timer has not run yet
	}
	st, cur := s.state, s.epoch
	s.mu.Unlock()
	if st == StateLive && cur == epoch && s.silence() > timeout*2/3 {
		s.probe()
		st, cur, _ = s.Status()
		if st == StateLive && cur == epoch && s.silence() > timeout*2/3 {
			st = StateSuspended // still no answer: nothing can be vouched for
		}
	}
	return epochVerdict(st, cur, epoch)
}

// epochVerdict says what a session in state st and epoch cur means for a
// grant of epoch: nil (live), errSessionLost, errClosed, or unavailable
// (connecting or suspended: it may come back).
func epochVerdict(st State, cur, epoch uint64) error {
	switch {
	case cur != epoch || st == StateLost:
		return errSessionLost
	case st == StateLive:
		return nil
	case st == StateClosed:
		return errClosed
	default:
		return unavailable()
	}
}

// Saved is what resumes the current session (see SessionConfig.Resume).
// Keep it secret.
func (s *Session) Saved() SavedSession {
	c := s.Conn()
	return SavedSession{ID: c.SessionID(), Password: c.Password()}
}

// Detach gives the session up without ending it: the connection stops and
// never connects again, and the session lives on in the ensemble, with its
// ephemeral nodes, for a session timeout, for whoever resumes it with what
// Saved returned before. It returns once nothing of this gateway can reach
// ZooKeeper through the session any more.
func (s *Session) Detach() {
	if conn := s.shut(); conn != nil {
		conn.Detach()
	}
}

// Close ends the session; its ephemeral nodes go at once.
func (s *Session) Close() {
	if conn := s.shut(); conn != nil {
		conn.Close()
	}
}

// shut marks the session closed and returns its connection for the caller
// to end or detach; nil if it was closed already.
func (s *Session) shut() *zk.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateClosed {
		return nil
	}
	s.stopLossTimerLocked()
	s.setStateLocked(StateClosed)
	close(s.done)
	return s.conn
}

// timeout is the session timeout ZooKeeper granted (it clamps the one asked
// for to its own bounds): how long it keeps the session of a silent gateway.
func (s *Session) timeout() time.Duration {
	if c := s.current.Load(); c != nil {
		if t := c.SessionTimeout(); t > 0 {
			return t
		}
	}
	return s.cfg.Timeout
}

// lastHeard is when the latest request that ZooKeeper answered in the
// session was sent (see zk.Conn.LastHeard); zero before any.
func (s *Session) lastHeard() time.Time {
	if c := s.current.Load(); c != nil {
		return c.LastHeard()
	}
	return time.Time{}
}

// silence is how long ago the latest request that ZooKeeper answered was
// sent.
func (s *Session) silence() time.Duration {
	h := s.lastHeard()
	if h.IsZero() {
		return time.Since(s.born)
	}
	return time.Since(h)
}

// PromiseMargin is what a promise about the session keeps back from the
// bound ZooKeeper sets (see Promise): a twentieth of the session timeout,
// and at least 200 ms. It covers clocks that run at slightly different
// rates (the gateway's, ZooKeeper's, the client's) and the time a holder
// takes to stop once its deadline comes.
func PromiseMargin(timeout time.Duration) time.Duration {
	return max(timeout/20, 200*time.Millisecond)
}

// Promise is the latest time, on this gateway's clock, until which the
// session of epoch is known to keep its ephemeral nodes (and so every grant
// made in it): ZooKeeper expires a session only after a whole session
// timeout without a request from it, so the session lives at least until
// the send time of the latest request ZooKeeper answered plus the timeout it
// granted; the promise keeps PromiseMargin back. It is the zero Time when
// epoch is not the session's current one, or the session is lost or closed:
// nothing is promised then.
func (s *Session) Promise(epoch uint64) time.Time {
	s.mu.Lock()
	st, cur, id, conn := s.state, s.epoch, s.id, s.conn
	s.mu.Unlock()
	if cur != epoch || st != StateLive && st != StateSuspended || conn == nil || conn.SessionID() != id {
		return time.Time{}
	}
	heard := conn.LastHeard()
	if heard.IsZero() {
		return time.Time{}
	}
	t := conn.SessionTimeout()
	return heard.Add(t - PromiseMargin(t))
}

// heartbeat asks ZooKeeper a third of a session timeout after it last
// answered, so that a healthy session is always known to be recent.
func (s *Session) heartbeat() {
	t := time.NewTimer(s.timeout() / 3)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if st, _, _ := s.Status(); st == StateLive {
				s.probe()
			}
			timeout := s.timeout()
			t.Reset(max(timeout/3-s.silence(), timeout/10))
		case <-s.done:
			return
		}
	}
}

// probe asks ZooKeeper for the root's stat, once for all the callers that
// ask at the same time, and waits for the answer: a lost connection is
// given up to a session timeout to come back (a frozen gateway's
// connection is found dead, replaced, and the session found expired).
func (s *Session) probe() {
	s.probeMu.Lock()
	if ch := s.probing; ch != nil {
		s.probeMu.Unlock()
		<-ch
		return
	}
	ch := make(chan struct{})
	s.probing = ch
	s.probeMu.Unlock()
	defer func() {
		s.probeMu.Lock()
		s.probing = nil
		s.probeMu.Unlock()
		close(ch)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout())
	defer cancel()
	for ctx.Err() == nil {
		sent := time.Now()
		_, _, err := s.Conn().Exists(s.cfg.Root)
		if err == nil {
			s.roundTrip.Store(int64(time.Since(sent)))
			return // the answer moved the connection's LastHeard
		}
		if !ambiguous(err) {
			return
		}
		if s.WaitLive(ctx) != nil {
			return
		}
	}
}

// ErrShuttingDown is the cause with which a shutting-down gateway cancels
// the requests still waiting.
var ErrShuttingDown = &Error{Code: CodeUnavailable, Detail: "the gateway is shutting down; retry on another"}

var (
	errClosed      = &Error{Code: CodeUnavailable, Detail: "the gateway is shutting down"}
	errSessionLost = &Error{Code: CodeLeaseExpired, Detail: "the gateway's ZooKeeper session was lost"}
)

// withoutLease is what a call that holds no lease (a produce, a take, a
// lease being made) answers for the end of the session it started in: that
// is no lease's end for its client, who may retry on the next session.
func withoutLease(err error) error {
	if errors.Is(err, errSessionLost) {
		return &Error{Code: CodeUnavailable, Detail: "the gateway's ZooKeeper session was lost during the call; retry", Err: err}
	}
	return err
}

// errUnavailable is the error of unavailable: errors.Is matches it by code.
var errUnavailable = &Error{Code: CodeUnavailable}

func unavailable() *Error {
	return &Error{Code: CodeUnavailable, Detail: "the ZooKeeper session is suspended; retry shortly"}
}

// ambiguous reports errors after which a write may or may not have happened.
func ambiguous(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrClosing) ||
		errors.Is(err, zk.ErrSessionExpired)
}

// ensureRoot creates the root and the parents of every primitive as
// persistent nodes: they are never removed, so an absent lock can still be
// given an index from its parent's pzxid.
func (s *Session) ensureRoot(ctx context.Context) error {
	paths := []string{s.cfg.Root}
	for _, p := range topLevel {
		paths = append(paths, s.cfg.Root+"/"+p)
	}
	for _, p := range paths {
		if err := s.createPersistent(ctx, p); err != nil {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	s.warnOpenParents(paths)
	return nil
}

// topLevel are the parents under --root: the leases' own, and one per kind
// of primitive.
var topLevel = slices.Concat([]string{"leases", "history", "gateways"}, kinds.Names(), []string{"delays"})

// createPersistent makes path and any missing ancestor.
func (s *Session) createPersistent(ctx context.Context, path string) error {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	cur := ""
	for _, part := range parts {
		cur += "/" + part
		for {
			_, err := s.Conn().Create(cur, nil, 0, s.acl())
			if err == nil || errors.Is(err, zk.ErrNodeExists) {
				break
			}
			if !ambiguous(err) {
				return err
			}
			if werr := s.WaitLive(ctx); werr != nil {
				return err
			}
		}
	}
	return nil
}

// zkLogger sends go-zookeeper's log lines to slog.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...))
}
