package recipes

import (
	"fmt"
	"time"
)

// What a session's leases are, written down: the state a handover gives
// the gateway that takes the session (handover.go), and the one the
// write-ahead record keeps for the next start (journal.go). A lease's state
// is its terms (LeaseTerms), its time left and its holds, each hold its
// common part and what its recipe keeps.

// Handover is one session handed over: what resumes it, and its leases.
// Session.Password is secret: a Handover is never logged or shown.
type Handover struct {
	Session SavedSession `json:"session"`
	From    string       `json:"from"` // the id of the gateway that gave it
	Leases  []LeaseState `json:"leases"`

	// Received is when the taker received it: the TTL left of each lease
	// is counted from then (the time until its adoption is taken off).
	// SameClock says that it comes from this machine (this gateway's
	// previous run): the leases' ExpiresAt is then on this clock.
	Received  time.Time `json:"-"`
	SameClock bool      `json:"-"`
	taken     time.Time // when HandOver froze the leases
	// ended are the reasons of the leases that a journal recorded as
	// ended (see ReadJournal): their nodes still there are swept with
	// them as reason.
	ended map[string]string
}

// Aged is h with the TTL left of each lease as it is now: less the time
// since the leases froze (see Received for the taker's side).
func (h *Handover) Aged() *Handover {
	out := *h
	out.Leases = append([]LeaseState(nil), h.Leases...)
	if h.taken.IsZero() {
		return &out
	}
	gone := time.Since(h.taken)
	for i := range out.Leases {
		out.Leases[i].Left = Duration(max(time.Duration(out.Leases[i].Left)-gone, 0))
	}
	return &out
}

// String keeps the session's password out of any log.
func (h *Handover) String() string {
	return fmt.Sprintf("handover of %v from %s (%d leases)", h.Session, h.From, len(h.Leases))
}

// LeaseState is a lease as it is handed over.
type LeaseState struct {
	LeaseTerms
	Left      Duration    `json:"left"`       // of its TTL when it was handed over (see Handover.Aged)
	ExpiresAt time.Time   `json:"expires_at"` // the end of its TTL, on the giver's clock (see Handover.SameClock)
	Holds     []HoldState `json:"holds"`
}

// HoldState is one hold as it is handed over: the common part, and what
// its recipe keeps.
type HoldState struct {
	Kind      string      `json:"kind"`
	Key       string      `json:"key"`
	Name      string      `json:"name"`
	Since     time.Time   `json:"since"`
	Nodes     []NodeState `json:"nodes"`
	Granted   bool        `json:"granted"`
	Token     int64       `json:"token,omitempty"`
	GrantedAt time.Time   `json:"granted_at"`
	Told      bool        `json:"told"`

	Mode   string `json:"mode,omitempty"`   // lock
	Limit  int    `json:"limit,omitempty"`  // semaphore
	Value  string `json:"value,omitempty"`  // election
	Member string `json:"member,omitempty"` // double barrier
	Count  int    `json:"count,omitempty"`  // double barrier
	Item   *Item  `json:"item,omitempty"`   // claim
}

// NodeState is one node of a hold.
type NodeState struct {
	Role  string `json:"role"`
	Path  string `json:"path"`
	Czxid int64  `json:"czxid,omitempty"`
}
