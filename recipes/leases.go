package recipes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkgate/zkgate/auth/nodeproof"
	"github.com/zkgate/zkgate/internal/peer"
)

// Why a lease ended, as told to clients in lease_expired problems.
const (
	EndExpired     = "expired"
	EndRevoked     = "revoked"
	EndSessionLost = "session_lost"
	EndShutdown    = "gateway_shutdown"
)

// LeaseConfig bounds leases.
type LeaseConfig struct {
	DefaultTTL time.Duration // when the client gives none (15s)
	MinTTL     time.Duration // 1s
	MaxTTL     time.Duration // --max-ttl (1h)
	GatewayID  string        // written into every node the gateway creates
	// Remember is how long ended ids keep answering lease_expired (1h), and
	// RememberMax how many of them at most (100,000), in this gateway's
	// memory and in the history in ZooKeeper (see sweepHistory).
	Remember    time.Duration
	RememberMax int
	// LockDelay is the lock-delay of a lease that asks for none, and
	// MaxLockDelay the most a lease may ask for (--lock-delay 0s and
	// --max-lock-delay 1m).
	LockDelay, MaxLockDelay time.Duration
	// PeerSecret, the gateways' shared secret (nil: none), signs every
	// lease record and checks the others' (see auth/nodeproof).
	PeerSecret *peer.Secret
	// OlderPeerProofs (--peer-proofs compat) takes the records and
	// registrations that carry only the proof of earlier versions.
	OlderPeerProofs bool
	// historyCheck is the longest time between two counts of the history
	// (defaultHistoryCheck); tests shorten it.
	historyCheck time.Duration
}

// LeaseSpec is what a client asks of a new lease.
type LeaseSpec struct {
	TTL    time.Duration // 0: the default
	Holder string
	Owner  string // the name of the token that makes it, "" when tokens are off
	// LockDelay, when set, is how long after the lease ends without
	// releasing what it holds no zkgate grant of it is made (see
	// lockdelay.go); nil: the gateway's default.
	LockDelay *time.Duration
}

// LeaseTerms is what a lease is: fixed when it is granted, the same at
// every gateway that keeps it. A lease's handover and its journal carry
// them whole (LeaseState), its record in ZooKeeper what the other gateways
// read of them (leaseRecord), and the API answers them (LeaseInfo, made
// into JSON by handlers): a field added here reaches all of them.
type LeaseTerms struct {
	ID     string `json:"id"`
	Holder string `json:"holder"`
	// Owner is the name of the client token that made the lease ("" when
	// tokens are off). It is written into the lease record, so that the
	// gateway a request is forwarded to knows it too.
	Owner string   `json:"owner,omitempty"`
	TTL   Duration `json:"ttl"`
	// LockDelay is how long after the lease ends without releasing what it
	// holds no zkgate grant of it is made.
	LockDelay Duration  `json:"lock_delay"`
	CreatedAt time.Time `json:"created_at"`
}

// LeaseInfo is a lease as it is at one moment: its terms, the gateway
// that keeps it and, when that is this gateway, its expiry and what it
// holds (Lease.Info). A lease read from its record (LeaseRecords) has its
// terms and gateway alone.
type LeaseInfo struct {
	LeaseTerms
	Gateway   string    // the id of the gateway that keeps it
	ExpiresAt time.Time // what the gateway promises (see Lease.Info)
	// RenewedAt is when the lease was last kept alive, or made: its TTL
	// runs from then, on the clock of its gateway.
	RenewedAt time.Time
	Holds     []HoldInfo
}

// Duration is a Go duration string in JSON ("500ms", "15s", "2m"): in
// what clients send and are answered, and in what the gateways hand each
// other and journal. It is the one duration type of zkgate's JSON.
type Duration time.Duration

// String is the Go duration string ("15s").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes "15s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts only a string holding a non-negative Go duration.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`a duration must be a string such as "15s"`)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ParseDuration parses a non-negative Go duration.
func ParseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as \"500ms\", \"15s\" or \"2m\"", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return v, nil
}

// HoldInfo is one thing a lease holds or waits for.
type HoldInfo struct {
	Kind   string    `json:"kind"` // lock, semaphore, election, double-barrier, claim
	Name   string    `json:"name"`
	Mode   string    `json:"mode,omitempty"`   // a lock's mode
	Member string    `json:"member,omitempty"` // a double barrier's member
	Item   string    `json:"item,omitempty"`   // a claimed queue item's id
	Token  int64     `json:"token,omitempty"`
	State  string    `json:"state"` // held | waiting
	Node   string    `json:"node,omitempty"`
	Since  time.Time `json:"since"`
}

// Leases is the gateway's table of leases. TTLs are enforced here, in
// memory; ZooKeeper only learns of a lease's birth and death.
type Leases struct {
	sess *Session
	svc  *Service // the service whose session keeps the table's leases (see Lease.service)
	// all, when set, is this table, first, and those of the sessions the
	// gateway adopted (see handover.go): a lease of this gateway is in one
	// of them.
	all func() []*Leases
	cfg LeaseConfig
	log *slog.Logger

	mu    sync.Mutex
	live  map[string]*Lease
	ended map[string]endedLease
	order []string // ended ids, oldest first, to bound the memory of them
	wg    sync.WaitGroup

	created, expired, revoked, lost atomic.Int64
	stopListen                      func()
	stopSweep                       context.CancelFunc

	drainEnd    atomic.Pointer[time.Time] // set while the gateway drains: every lease ends then
	latest      atomic.Int64              // the latest expires_at answered, in Unix nanoseconds (see LatestPromise)
	handingOver bool                      // guarded by mu: the session is being handed over (no new lease)
	creating    sync.WaitGroup            // creates under way, added to under mu while not handingOver
	moved       map[string]Keeper         // guarded by mu: leases handed over from here, and to whom
	advertise   atomic.Pointer[string]    // the address this gateway serves (see Locate)
	proofs      *nodeproof.Proofs         // of the records and registrations
	journal     *journal                  // the write-ahead record of the leases (nil: none)
	// afterRecord, when set (by tests), runs once a lease's record is made
	// and before the lease is live; afterCreate once a hold's node is made
	// and before it is recorded in the journal (a kill there leaves an
	// orphan, see sweepOrphans).
	afterRecord func()
	afterCreate func(node string)
}

type endedLease struct {
	reason string
	at     time.Time
}

// Lease is one client's liveness. Its context is cancelled when it ends, so
// every wait made on its behalf stops at once.
type Lease struct {
	LeaseTerms
	epoch uint64
	table *Leases

	ctx    context.Context
	cancel context.CancelCauseFunc // errLeaseEnding, or ErrMoved
	done   chan struct{}           // closed when all it held is released

	mu        sync.Mutex
	expiresAt time.Time
	timer     *time.Timer
	moving    atomic.Bool // being handed over (see handover.go): nothing starts, nothing ends here
	holds     map[string]holding
	ending    bool
	reason    string
	byAdmin   bool // revoked by another token's admin: its lock-delay applies
}

// errLeaseEnding is the cause of a lease's context when it ends.
var errLeaseEnding = errors.New("lease ending")

// NewLeases makes the lease table of a session.
func NewLeases(sess *Session, cfg LeaseConfig, log *slog.Logger) *Leases {
	if cfg.DefaultTTL <= 0 {
		cfg.DefaultTTL = 15 * time.Second
	}
	if cfg.MinTTL <= 0 {
		cfg.MinTTL = time.Second
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = time.Hour
	}
	if cfg.Remember <= 0 {
		cfg.Remember = time.Hour
	}
	if cfg.RememberMax <= 0 {
		cfg.RememberMax = 100_000
	}
	if log == nil {
		log = slog.Default()
	}
	ls := &Leases{sess: sess, cfg: cfg, log: log.With("component", "leases"),
		live: map[string]*Lease{}, ended: map[string]endedLease{},
		proofs: nodeproof.New(cfg.PeerSecret, sess.Root(), cfg.OlderPeerProofs, log.With("component", "peers"))}
	// A lost session takes every lease of its epoch with it. The listener must
	// not block: the ending runs on its own goroutine, and every lookup checks
	// the epoch anyway, so no reply can claim a lost lease in between.
	sweep, stopSweep := context.WithCancel(context.Background())
	ls.stopSweep = stopSweep
	go ls.sweepHistory(sweep)
	ls.stopListen = sess.OnChange(func(c StateChange) {
		if c.State == StateLost {
			ls.endEpochBefore(c.Epoch + 1)
		} else if c.State == StateLive {
			ls.endEpochBefore(c.Epoch)
		}
	})
	return ls
}

// Create makes a lease for owner (a token's name, or ""), with the default
// lock-delay. ttl 0 means the default.
func (ls *Leases) Create(ctx context.Context, ttl time.Duration, holder, owner string) (*Lease, error) {
	return ls.Grant(ctx, LeaseSpec{TTL: ttl, Holder: holder, Owner: owner})
}

// Grant makes the lease spec asks for.
func (ls *Leases) Grant(ctx context.Context, spec LeaseSpec) (*Lease, error) {
	ttl, holder, owner := spec.TTL, spec.Holder, spec.Owner
	if ttl == 0 {
		ttl = ls.cfg.DefaultTTL
	}
	if ttl < ls.cfg.MinTTL || ttl > ls.cfg.MaxTTL {
		return nil, Errorf(CodeInvalid, "ttl must be between %s and %s", ls.cfg.MinTTL, ls.cfg.MaxTTL)
	}
	if len(holder) > 200 {
		return nil, Errorf(CodeInvalid, "holder must be at most 200 bytes")
	}
	lockDelay := ls.cfg.LockDelay
	if spec.LockDelay != nil {
		lockDelay = *spec.LockDelay
		if lockDelay < 0 || lockDelay > ls.cfg.MaxLockDelay {
			return nil, Errorf(CodeInvalid, "lock_delay must be between 0s and %s (--max-lock-delay)", ls.cfg.MaxLockDelay)
		}
	}
	// A create under way when a handover begins is waited for, and its
	// lease handed over with the others.
	ls.mu.Lock()
	moving := ls.handingOver
	if !moving {
		ls.creating.Add(1)
	}
	ls.mu.Unlock()
	if moving {
		return nil, ErrMoving
	}
	defer ls.creating.Done()
	st, epoch, sid := ls.sess.Status()
	if st != StateLive {
		return nil, unavailable()
	}
	if err := ls.beginJournal(epoch, sid); err != nil {
		return nil, err
	}
	id := newLeaseID()
	now := time.Now().UTC()
	lctx, cancel := context.WithCancelCause(context.Background())
	l := &Lease{LeaseTerms: LeaseTerms{ID: id, Holder: holder, Owner: owner, TTL: Duration(ttl), LockDelay: Duration(lockDelay), CreatedAt: now},
		epoch: epoch, table: ls, ctx: lctx, cancel: cancel, done: make(chan struct{}), expiresAt: now.Add(ttl), holds: map[string]holding{}}

	data := ls.recordOf(l, sid)
	if err := ls.createRecord(ctx, id, data, historyEntry{Gateway: ls.cfg.GatewayID, Holder: holder}, epoch); err != nil {
		cancel(errLeaseEnding)
		if ctx.Err() == nil {
			// No lease ever was if the session it was being made in is
			// gone (its record with it): a new session is on its way.
			return nil, withoutLease(err)
		}
		// The request ended (its client hung up) with the transaction
		// unanswered: the record may exist, known to no lease. It is ended
		// once the session is back (or goes with it if it is lost).
		ls.wg.Add(1)
		go func() {
			defer ls.wg.Done()
			if err := ls.endRecord(context.Background(), l, EndRevoked); err != nil {
				ls.log.Warn("end the record of a lease whose create went unanswered", "lease", id, "err", err)
			}
		}()
		var e *Error
		if errors.As(context.Cause(ctx), &e) {
			return nil, e // e.g. ErrShuttingDown
		}
		return nil, &Error{Code: CodeUnavailable, Detail: "the request ended before ZooKeeper answered; retry", Err: err}
	}
	if ls.afterRecord != nil {
		ls.afterRecord()
	}
	ls.journal.granted(epoch, LeaseState{LeaseTerms: l.LeaseTerms, ExpiresAt: l.expiresAt})
	// The timer is set before anyone can see the lease: a keepalive resets it.
	l.timer = time.AfterFunc(ttl, l.onTimer)
	ls.mu.Lock()
	ls.live[id] = l
	ls.mu.Unlock()
	ls.created.Add(1)
	return l, nil
}

// beginJournal starts the journal of the session of epoch (whose id is
// sid), before its first lease: what resumes the session is on disk before
// any client holds anything in it. A session that changed meanwhile
// answers unavailable (the lease would be of the new one, not yet begun).
func (ls *Leases) beginJournal(epoch uint64, sid int64) error {
	if ls.journal.recording(epoch) {
		return nil
	}
	saved := ls.sess.Saved()
	if saved.ID != sid {
		return unavailable()
	}
	_ = ls.journal.begin(epoch, saved, ls.cfg.GatewayID, nil) // a failure is logged: the gateway serves on, without it
	return nil
}

func (ls *Leases) sessionID() int64 {
	_, _, id := ls.sess.Status()
	return id
}

// Get returns the live lease with id, or the error a client should see:
// lease_expired for a recently ended one, lease_not_found otherwise.
// A lease found past its expiry, or of a lost session, is ended first, so
// the answer never says it still holds anything.
func (ls *Leases) Get(id string) (*Lease, error) {
	l, ok := ls.find(id)
	if !ok {
		for _, t := range ls.tables() {
			t.mu.Lock()
			e, ok := t.ended[id]
			t.mu.Unlock()
			if ok {
				return nil, leaseEnded(id, e.reason)
			}
		}
		return nil, &Error{Code: CodeLeaseNotFound, Detail: "no lease " + quote(id)}
	}
	if err := l.alive(); err != nil {
		return nil, err
	}
	return l, nil
}

func leaseEnded(id, reason string) *Error {
	return &Error{Code: CodeLeaseExpired, Detail: "lease " + quote(id) + " has ended: " + reason,
		Extra: map[string]any{"reason": reason}}
}

// alive ends the lease if its time or session has run out, and reports
// whether it may still be used.
func (l *Lease) alive() error {
	l.mu.Lock()
	ending, reason := l.ending, l.reason
	expired := !ending && time.Now().After(l.expiresAt)
	l.mu.Unlock()
	if l.moving.Load() {
		return ErrMoving
	}
	if ending {
		<-l.done
		return leaseEnded(l.ID, reason)
	}
	if expired {
		l.end(EndExpired)
		return leaseEnded(l.ID, EndExpired)
	}
	if err := l.table.sess.check(l.epoch); err != nil {
		if errors.Is(err, errSessionLost) {
			l.end(EndSessionLost)
			return leaseEnded(l.ID, EndSessionLost)
		}
		return err
	}
	return nil
}

// Lookup returns the live lease with id as it is, without ending it if its
// time has run out: for reading who owns it before acting on it.
func (ls *Leases) Lookup(id string) (*Lease, bool) { return ls.find(id) }

// find returns the live lease id of this table or of a session the gateway
// adopted (see handover.go).
//
// Its own table is read first, alone: nearly every request looks up a lease
// of the gateway's own session, and listing the adopted tables costs an
// allocation and a lock shared by every request.
func (ls *Leases) find(id string) (*Lease, bool) {
	ls.mu.Lock()
	l, ok := ls.live[id]
	ls.mu.Unlock()
	if ok {
		return l, true
	}
	for _, t := range ls.tables()[1:] {
		t.mu.Lock()
		l, ok := t.live[id]
		t.mu.Unlock()
		if ok {
			return l, true
		}
	}
	return nil, false
}

// tables is this table, first, and, for the gateway's own service, those
// of the sessions it adopted.
func (ls *Leases) tables() []*Leases {
	if ls.all == nil {
		return []*Leases{ls}
	}
	return ls.all()
}

// KeepAlive extends the lease by its TTL, in memory only. While the session
// is suspended the lease is extended all the same (a ZooKeeper blip must not
// cost clients their locks) but the call answers unavailable: its holds can
// not be vouched for until the session is back.
//
// A keepalive extends the lease only if it has not started ending: the
// check and the extension are one step under the lease's lock, since the
// lease may end between alive's look and the extension (its TTL running
// out that moment, a revoke, its session lost). A lease that ended on the
// way answers as ended, never 200 without an extension.
func (ls *Leases) KeepAlive(id string) (*Lease, error) {
	l, ok := ls.find(id)
	if !ok {
		_, err := ls.Get(id)
		return nil, err
	}
	err := l.alive()
	if err != nil && ErrorCode(err) != CodeUnavailable {
		return nil, err
	}
	if keepAliveChecked != nil {
		keepAliveChecked(l)
	}
	l.mu.Lock()
	if l.moving.Load() {
		l.mu.Unlock()
		return nil, ErrMoving
	}
	if l.ending {
		reason := l.reason
		l.mu.Unlock()
		<-l.done
		return nil, leaseEnded(l.ID, reason)
	}
	if time.Now().After(l.expiresAt) {
		l.mu.Unlock()
		l.end(EndExpired)
		return nil, leaseEnded(l.ID, EndExpired)
	}
	l.expiresAt = time.Now().Add(time.Duration(l.TTL))
	l.timer.Reset(time.Duration(l.TTL))
	l.table.journal.renewed(l.epoch, l.ID, l.expiresAt) // before the client is told
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return l, nil
}

// keepAliveChecked, when set (by tests only), runs in KeepAlive between
// alive's look at the lease and the extension.
var keepAliveChecked func(*Lease)

// Revoke ends a lease and releases all it held before it returns.
func (ls *Leases) Revoke(id string) error {
	l, err := ls.Get(id)
	if err != nil {
		return err
	}
	l.end(EndRevoked)
	return nil
}

// Terminate is a revoke by an admin, not by the lease's own client: the
// lease's lock-delay applies to what it held, as to any lease that ends
// without releasing.
func (ls *Leases) Terminate(id string) error {
	l, err := ls.Get(id)
	if err != nil {
		return err
	}
	l.mu.Lock()
	if !l.ending {
		l.byAdmin = true
	}
	l.mu.Unlock()
	l.end(EndRevoked)
	return nil
}

// List returns the live leases, oldest first.
func (ls *Leases) List() []*Lease {
	var out []*Lease
	for _, t := range ls.tables() {
		t.mu.Lock()
		for _, l := range t.live {
			out = append(out, l)
		}
		t.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Count is the number of live leases.
func (ls *Leases) Count() int {
	n := 0
	for _, t := range ls.tables() {
		t.mu.Lock()
		n += len(t.live)
		t.mu.Unlock()
	}
	return n
}

// LeaseStats are counters for metrics.
type LeaseStats struct{ Created, Expired, Revoked, Lost int64 }

// Stats returns the lease counters.
func (ls *Leases) Stats() LeaseStats {
	return LeaseStats{ls.created.Load(), ls.expired.Load(), ls.revoked.Load(), ls.lost.Load()}
}

// Info is the client's view of the lease, with what it holds. Its
// ExpiresAt is what the gateway promises (see promise), not merely the end
// of the TTL.
func (l *Lease) Info() LeaseInfo {
	bound := l.table.bound(l.epoch)
	l.mu.Lock()
	defer l.mu.Unlock()
	promised := earliest(l.expiresAt.Add(-l.table.margin()), bound)
	l.table.promised(promised)
	info := LeaseInfo{LeaseTerms: l.LeaseTerms, Gateway: l.table.cfg.GatewayID, ExpiresAt: promised.UTC(),
		RenewedAt: l.expiresAt.Add(-time.Duration(l.TTL)).UTC(), Holds: []HoldInfo{}}
	for _, h := range l.holds {
		info.Holds = append(info.Holds, h.info())
	}
	sort.Slice(info.Holds, func(i, j int) bool {
		a, b := info.Holds[i], info.Holds[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Mode < b.Mode
	})
	return info
}

// bound is the latest that the gateway may promise of a lease of epoch
// now: what the session is known to keep (Session.Promise; now, when it
// keeps nothing), and no later than the end of a drain under way, when
// every lease of the gateway ends.
func (ls *Leases) bound(epoch uint64) time.Time {
	b := ls.sess.Promise(epoch)
	if b.IsZero() {
		b = time.Now()
	}
	if d := ls.drainEnd.Load(); d != nil {
		b = earliest(b, d.Add(-ls.margin()))
	}
	return b
}

// margin is what a promise keeps back from the time at which the gateway
// itself ends a lease (its TTL's end, a drain's end), as Session.Promise
// does from the session's bound: the clocks of gateway and client may run
// at slightly different rates, and a holder takes a moment to stop.
func (ls *Leases) margin() time.Duration { return PromiseMargin(ls.sess.timeout()) }

// Draining records that the gateway drains until end: no lease is promised
// past it.
func (ls *Leases) Draining(end time.Time) { ls.drainEnd.Store(&end) }

// promised notes a lease's expires_at as answered (see LatestPromise).
func (ls *Leases) promised(at time.Time) {
	n := at.UnixNano()
	for {
		cur := ls.latest.Load()
		if n <= cur || ls.latest.CompareAndSwap(cur, n) {
			return
		}
	}
}

// LatestPromise is the latest expires_at this table answered: a gateway
// whose leases end with its drain keeps them until then at least, since
// their holders were told they hold until then.
func (ls *Leases) LatestPromise() time.Time {
	n := ls.latest.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Done is closed when the lease has ended and released all it held.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Context is cancelled when the lease starts ending.
func (l *Lease) Context() context.Context { return l.ctx }

func (l *Lease) onTimer() {
	l.mu.Lock()
	due := !l.ending && !time.Now().Before(l.expiresAt)
	if !due && !l.ending {
		l.timer.Reset(time.Until(l.expiresAt))
	}
	l.mu.Unlock()
	if due {
		l.end(EndExpired)
	}
}

// end releases everything the lease holds, deletes its record and moves it to
// the ended ids. Concurrent callers all return once that is done.
func (l *Lease) end(reason string) {
	l.mu.Lock()
	if l.ending {
		l.mu.Unlock()
		<-l.done
		return
	}
	l.ending = true
	l.reason = reason
	if l.timer != nil {
		l.timer.Stop()
	}
	holds := l.holdingsLocked()
	byAdmin := l.byAdmin
	l.mu.Unlock()

	ls := l.table
	// Recorded first: a crash from here on resumes no part of the lease
	// (its nodes left are swept as orphans, see sweepOrphans).
	ls.journal.ended(l.epoch, l.ID, reason)
	ls.wg.Add(1)
	defer ls.wg.Done()
	l.cancel(errLeaseEnding)
	// On a lost session, or at shutdown (the session is closed next), every
	// node goes with the session at once: deleting them one by one would only
	// slow that down. Otherwise each hold's nodes, then the record, are
	// deleted; that needs no deadline of its own: deleteNode gives up as soon
	// as the session is lost, and a suspended session is lost within one
	// session timeout.
	how := abandoned
	switch {
	case reason == EndSessionLost || reason == EndShutdown:
		how = lapsed
	case reason == EndRevoked && !byAdmin:
		how = released // its own client let go of what it held
	}
	for _, h := range holds {
		if err := h.core().end(how); err != nil {
			ls.log.Error("release on lease end", "lease", l.ID, "hold", h.core().name, "err", err)
		}
	}
	if how != lapsed {
		if err := ls.endRecord(context.Background(), l, reason); err != nil {
			ls.log.Error("end lease record", "lease", l.ID, "err", err)
		}
	}
	switch reason {
	case EndExpired:
		ls.expired.Add(1)
	case EndRevoked:
		ls.revoked.Add(1)
	case EndSessionLost:
		ls.lost.Add(1)
	}
	ls.mu.Lock()
	delete(ls.live, l.ID)
	ls.rememberLocked(l.ID, reason)
	ls.mu.Unlock()
	l.mu.Lock()
	l.holds = map[string]holding{}
	l.mu.Unlock()
	close(l.done)
}

func (ls *Leases) rememberLocked(id, reason string) {
	now := time.Now()
	ls.ended[id] = endedLease{reason: reason, at: now}
	ls.order = append(ls.order, id)
	for len(ls.order) > 0 {
		oldest := ls.order[0]
		if len(ls.order) <= ls.cfg.RememberMax && now.Sub(ls.ended[oldest].at) < ls.cfg.Remember {
			break
		}
		delete(ls.ended, oldest)
		ls.order = ls.order[1:]
	}
}

// endEpochBefore ends, in the background, every lease made in an epoch
// older than epoch.
func (ls *Leases) endEpochBefore(epoch uint64) {
	ls.mu.Lock()
	var stale []*Lease
	for _, l := range ls.live {
		if l.epoch < epoch {
			stale = append(stale, l)
		}
	}
	ls.mu.Unlock()
	if len(stale) == 0 {
		return
	}
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		for _, l := range stale {
			l.end(EndSessionLost)
		}
	}()
}

// Close ends every lease and waits for all endings under way. It deletes
// no hold's node (the session, closed next, takes every ephemeral node with
// it), but writes the leases' end into their history, so that every gateway
// answers gateway_shutdown for them.
func (ls *Leases) Close() {
	ls.stopListen()
	ls.stopSweep()
	leases := ls.List()
	for _, l := range leases {
		l.end(EndShutdown)
	}
	ls.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ls.endRecords(ctx, leases, EndShutdown)
	ls.journal.remove() // the session is closed next: nothing to resume
}

// holdingsLocked is a copy of what l holds, to go through without l.mu;
// l.mu is held.
func (l *Lease) holdingsLocked() []holding {
	holds := make([]holding, 0, len(l.holds))
	for _, h := range l.holds {
		holds = append(holds, h)
	}
	return holds
}

// attach records a hold under key, unless one is there already: then that
// one is returned. It fails once the lease is ending.
func (l *Lease) attach(key string, h holding) (holding, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ending {
		return nil, leaseEnded(l.ID, l.reason)
	}
	if l.moving.Load() {
		return nil, ErrMoving
	}
	if cur, ok := l.holds[key]; ok {
		return cur, nil
	}
	l.holds[key] = h
	return h, nil
}

// detach forgets the hold under key if it is still h.
func (l *Lease) detach(key string, h holding) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.holds[key]; ok && cur == h {
		delete(l.holds, key)
	}
}

// holdAt returns the hold under key, if any.
func (l *Lease) holdAt(key string) (holding, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.holds[key]
	return h, ok
}

// holdsWithPrefix returns the holds whose key starts with prefix.
func (l *Lease) holdsWithPrefix(prefix string) map[string]holding {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]holding{}
	for k, h := range l.holds {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			out[k] = h
		}
	}
	return out
}

// newLeaseID returns a random UUID (version 4). It also names the lease's
// znodes (`_c_<id>-lock-...`), which is what lets a retried create find them.
func newLeaseID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
