//go:build linux

package faults

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// History is everything the clients saw, with the harness's times (one
// process, one clock: Sent is taken before a request goes out, Recv after its
// answer is read). The checker reads nothing else.
type History struct {
	mu sync.Mutex

	Leases   map[string]*LeaseRecord
	Grants   []Grant
	Writes   []Write
	Vouches  []Vouch      // answers that said a lease still held a lock
	Alive    []LeaseAlive // 200 answers that said a lease was alive
	Ends     []LeaseEnd   // 410 (or 404 for a lease that existed) answers
	Zombies  []ZombieCheck
	Vanished []VanishCheck
	// SessionLost is when the observer saw each gateway session end (the
	// gateway's registration node of that session went); later than the
	// true end, never earlier.
	SessionLost map[int64]time.Time
	// ObserverOut are the spans in which the observer had no live session
	// (To is zero while it still had none): what it saw just after one may
	// have happened during it.
	ObserverOut []Span
	// Replaced is when each gateway process that was killed and started
	// again at once on its own address was killed (before the signal: its
	// end is no earlier).
	Replaced map[GatewayLife]time.Time
	// SessionTimeout and TickTime are the run's, for the allowances of the
	// checks.
	SessionTimeout, TickTime time.Duration

	WallHolds []WallHold
	// WallLate counts grants that came when their lease's deadline left no
	// time for a unit of work: no work was done under them.
	WallLate int

	Produced map[string]*Produced // by the item's body id
	Claims   []Claim
	Acks     []Ack
	Drained  bool // the queue was seen empty with no claims at the end

	// Members are the group memberships (see groups.go).
	Members []*GroupMember
	// Adds are the counter's adds (see counter.go).
	Adds         []CounterAdd
	CounterFinal int64 // the counter read once everything had healed
	CounterRead  bool

	Answers    map[string]int // "acquire 409 timeout" -> count
	Unexpected []string       // answers outside what the endpoint may give
	Deadlocks  []string       // waits ended 409 deadlock
}

// LeaseRecord is one lease as its client knows it.
type LeaseRecord struct {
	ID      string
	Client  string
	TTL     time.Duration
	Gateway int   // the gateway it was created on
	Life    int   // that gateway's process (see gateway.life; -1: unknown)
	Session int64 // the ZooKeeper session holding its record (0: unknown)
	// RecordUntil is how long the observer saw the lease's record
	// ({root}/leases/{id}, deleted when the lease ends or its session
	// does): when it saw it deleted, or when it stopped watching with the
	// record still there; zero when it never saw the record.
	RecordUntil time.Time
	// Moved: the record's data changed while the observer watched it, as
	// when another gateway adopts the lease in a handover and names itself.
	Moved   bool
	Created time.Time
	// Deadline is the client's own bound on the lease: the latest send
	// time of a request that extended it (create, keepalive 200) plus the
	// TTL. The gateway's expiry is never earlier.
	Deadline time.Time
	// ExpiresAt is the latest expires_at a gateway answered (its clock).
	ExpiresAt time.Time
	Zombie    bool // its client stopped keepalives mid-hold on purpose
}

// Grant is a 200 answer to an acquire.
type Grant struct {
	Lock, Lease string
	Token       int64
	Node        string
	AcquiredAt  time.Time // the gateway's time of the grant
	Sent, Recv  time.Time
	Gateway     int
}

// Write is one write to the fenced register.
type Write struct {
	Lock, Lease string
	Token       int64
	At          time.Time
	Accepted    bool
}

// Vouch is an answer by which a gateway asserted that lease held lock
// (token) when it answered: a release answered 204, a fence check 200.
type Vouch struct {
	Kind        string // release | fence
	Lock, Lease string
	Token       int64
	Sent, Recv  time.Time
}

// LeaseAlive is a 200 answer about a lease (keepalive, lease read).
type LeaseAlive struct {
	Kind       string
	Lease      string
	Sent, Recv time.Time
}

// LeaseEnd is an answer that said a lease had ended.
type LeaseEnd struct {
	Lease      string
	Kind       string // the request
	Status     int
	Reason     string // the problem's reason (expired, revoked, session_lost...)
	Sent, Recv time.Time
	Gateway    int    // the gateway the request went to
	Life       int    // its process (-1: restarted meanwhile)
	ServedBy   string // X-Zkgate-Served-By: passed on to the lease's gateway
}

// ZombieCheck: a client that stopped its keepalives asked for its lease
// once its TTL had run out since the last keepalive answer it received (no
// other request of the lease under way).
type ZombieCheck struct {
	Lease string
	// EndsBy is the receipt of the last answer that extended the lease
	// (create, keepalive 200) plus its TTL: the gateway extended it before
	// it answered, and ends a silent lease a TTL after its last extension.
	EndsBy  time.Time
	Sent    time.Time
	Status  int
	Holds   int  // holds listed by a 200 answer
	Skipped bool // a keepalive went unanswered or answered 503: the expiry is not known
}

// Span is a stretch of time.
type Span struct{ From, To time.Time }

// GatewayLife is one process of a gateway: its index and its start count.
type GatewayLife struct{ Gateway, Life int }

// VanishCheck: a client hung up on an acquire mid-wait, then read its lease
// until the hold was no longer waiting.
type VanishCheck struct {
	Lease, Lock string
	HungUp      time.Time
	Outcome     string // gone | granted | lease_ended | left_waiting | unknown
	Token       int64  // of a grant made as the client hung up
}

// Produced is one item a producer sent.
type Produced struct {
	BodyID    string
	ItemID    string // from a 201 answer
	Confirmed bool   // 201; otherwise the answer was lost (503, no answer)
	Sent      time.Time
}

// Claim is a 200 answer to a claim.
type Claim struct {
	BodyID, ItemID, Lease string
	Sent, Recv            time.Time
}

// Ack is an ack's final answer (after its retries).
type Ack struct {
	BodyID, ItemID, Lease string
	Status                int  // 204 confirmed; anything else not
	Ambiguous             bool // an attempt got no answer or 503: it may have been applied
	Sent, Recv            time.Time
}

func newHistory() *History {
	return &History{Leases: map[string]*LeaseRecord{}, SessionLost: map[int64]time.Time{},
		Replaced: map[GatewayLife]time.Time{}, Produced: map[string]*Produced{}, Answers: map[string]int{}}
}

func (h *History) record(fn func(h *History)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn(h)
}

func (h *History) answer(kind string, a answer) {
	key := fmt.Sprintf("%s %d", kind, a.Status)
	if a.Status == 0 {
		key = kind + " no answer"
	}
	if a.Code != "" {
		key += " " + a.Code
	}
	h.mu.Lock()
	h.Answers[key]++
	h.mu.Unlock()
}

func (h *History) unexpected(kind string, a answer) {
	h.mu.Lock()
	h.Unexpected = append(h.Unexpected, fmt.Sprintf("%s on gateway %d: %d %s", kind, a.Gateway, a.Status, truncate(string(a.Body), 300)))
	h.mu.Unlock()
}

// deadlock records a wait ended 409 deadlock.
func (h *History) deadlock(kind string, a answer) {
	h.mu.Lock()
	h.Deadlocks = append(h.Deadlocks, fmt.Sprintf("%s on gateway %d: %s", kind, a.Gateway, truncate(string(a.Body), 300)))
	h.mu.Unlock()
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Register is the storage lock holders write to: it refuses a write whose
// fencing token is older than the newest it has accepted for that lock
// (equal is the same holder writing again), and records every write.
type Register struct {
	mu     sync.Mutex
	newest map[string]int64
	hist   *History
}

func newRegister(h *History) *Register {
	return &Register{newest: map[string]int64{}, hist: h}
}

// Write writes as lease with token to lock, and reports whether it was
// accepted.
func (r *Register) Write(lock, lease string, token int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := token >= r.newest[lock]
	if ok {
		r.newest[lock] = token
	}
	w := Write{Lock: lock, Lease: lease, Token: token, At: time.Now(), Accepted: ok}
	r.hist.record(func(h *History) { h.Writes = append(h.Writes, w) })
	return ok
}

// sortedAnswers lists the answer tally, most frequent first.
func sortedAnswers(m map[string]int) []AnswerCount {
	out := make([]AnswerCount, 0, len(m))
	for k, v := range m {
		out = append(out, AnswerCount{Answer: k, Count: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Answer < out[j].Answer
	})
	return out
}

// AnswerCount is one line of the answer tally.
type AnswerCount struct {
	Answer string `json:"answer"`
	Count  int    `json:"count"`
}
