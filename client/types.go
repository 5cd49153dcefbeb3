package client

import (
	"encoding/json"
	"fmt"
	"time"
)

// LockMode is the mode of a lock: Exclusive, or Read and Write of a
// read/write lock (readers share it, a writer excludes everyone).
type LockMode string

// The lock modes.
const (
	Exclusive LockMode = "exclusive"
	Read      LockMode = "read"
	Write     LockMode = "write"
)

// DefaultPriority is the priority of a queue item produced without one;
// priorities go from 0 (served first) to 999.
const DefaultPriority = 100

// LeaseInfo is a lease as the gateway reports it. ExpiresAt is on the
// gateway's clock: until then what the lease holds is certainly its own
// (a Lease counts it on this process's clock, see Lease.Deadline).
type LeaseInfo struct {
	ID        string        `json:"id"`
	Gateway   string        `json:"gateway"` // the id of the gateway that keeps it
	TTL       time.Duration `json:"-"`
	Holder    string        `json:"holder"`
	LockDelay time.Duration `json:"-"` // see LockDelay
	ExpiresAt time.Time     `json:"expires_at"`
	// RenewedAt is when the lease was last kept alive (or made), on the
	// gateway's clock: without a keepalive it ends TTL after that.
	RenewedAt time.Time `json:"renewed_at"`
	CreatedAt time.Time `json:"created_at"`
	Holds     []Hold    `json:"holds"`
}

// UnmarshalJSON reads the ttl and the lock_delay, Go duration strings.
func (l *LeaseInfo) UnmarshalJSON(b []byte) error {
	type plain LeaseInfo
	var v struct {
		plain
		TTL       string `json:"ttl"`
		LockDelay string `json:"lock_delay"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = LeaseInfo(v.plain)
	for _, f := range []struct {
		name, text string
		to         *time.Duration
	}{{"ttl", v.TTL, &l.TTL}, {"lock_delay", v.LockDelay, &l.LockDelay}} {
		if f.text == "" {
			continue
		}
		d, err := time.ParseDuration(f.text)
		if err != nil {
			return fmt.Errorf("lease %s %q: %v", f.name, f.text, err)
		}
		*f.to = d
	}
	return nil
}

// MarshalJSON writes the ttl and the lock_delay as Go duration strings, as
// the gateway does.
func (l LeaseInfo) MarshalJSON() ([]byte, error) {
	type plain LeaseInfo
	return json.Marshal(struct {
		plain
		TTL       string `json:"ttl"`
		LockDelay string `json:"lock_delay"`
	}{plain(l), l.TTL.String(), l.LockDelay.String()})
}

// Hold is something a lease holds or waits for.
type Hold struct {
	Kind   string    `json:"kind"` // lock, semaphore, election, double-barrier, claim, group
	Name   string    `json:"name"`
	Mode   string    `json:"mode,omitempty"`   // a lock's mode
	Member string    `json:"member,omitempty"` // a double barrier's member
	Item   string    `json:"item,omitempty"`   // a claimed queue item's id
	Token  int64     `json:"token,omitempty"`
	State  string    `json:"state"` // held or waiting
	Node   string    `json:"node,omitempty"`
	Since  time.Time `json:"since"`
}

// Holder is one contender of a lock, semaphore or election as any client
// sees it. Foreign marks a node made by another client (Curator, kazoo),
// shown with its data as Holder.
type Holder struct {
	Node    string    `json:"node"`
	Seq     int64     `json:"seq"`
	Token   int64     `json:"token"`
	Mode    string    `json:"mode,omitempty"`
	Lease   string    `json:"lease,omitempty"`
	Holder  string    `json:"holder"`
	Session string    `json:"session,omitempty"` // with tokens, to admins of the name alone
	Since   time.Time `json:"since"`
	Foreign bool      `json:"foreign"`
	Gateway string    `json:"gateway,omitempty"`
	Value   string    `json:"value,omitempty"`
	Limit   int       `json:"limit,omitempty"`
}

// LockGrant is a held lock. Token is its fencing token: pass it to whatever
// the lock protects, which checks it (Client.Fence) or keeps the largest seen.
type LockGrant struct {
	Name       string    `json:"name"`
	Mode       LockMode  `json:"mode"`
	Lease      string    `json:"lease"`
	Token      int64     `json:"token"`
	Node       string    `json:"node"`
	AcquiredAt time.Time `json:"acquired_at"`

	lease *Lease
}

// LockState is who holds a lock and who waits for it, in queue order.
type LockState struct {
	Name    string   `json:"name"`
	Holders []Holder `json:"holders"`
	Waiters []Holder `json:"waiters"`
	Index   int64    `json:"-"` // X-Zkgate-Index
}

// LockSummary is one lock of a listing.
type LockSummary struct {
	Name    string `json:"name"`
	Holders int    `json:"holders"`
	Waiters int    `json:"waiters"`
}

// SemaphoreSummary is one line of the semaphore list.
type SemaphoreSummary struct {
	Name    string `json:"name"`
	Limit   int    `json:"limit,omitempty"` // 0 when only other clients hold it
	Holders int    `json:"holders"`
	Waiters int    `json:"waiters"`
}

// SemaphoreGrant is a held semaphore slot.
type SemaphoreGrant struct {
	Name       string    `json:"name"`
	Lease      string    `json:"lease"`
	Limit      int       `json:"limit"`
	Token      int64     `json:"token"`
	Node       string    `json:"node"`
	AcquiredAt time.Time `json:"acquired_at"`

	lease *Lease
}

// SemaphoreState is who holds a semaphore's slots and who waits for one.
type SemaphoreState struct {
	Name    string   `json:"name"`
	Limit   int      `json:"limit,omitempty"`
	Holders []Holder `json:"holders"`
	Waiters []Holder `json:"waiters"`
	Index   int64    `json:"-"`
}

// Campaign is a lease's standing in an election: elected with a fencing
// Token, or in line at Position behind Leader.
type Campaign struct {
	Name     string    `json:"name"`
	Elected  bool      `json:"elected"`
	Lease    string    `json:"lease"`
	Node     string    `json:"node"`
	Token    int64     `json:"token,omitempty"`
	Value    string    `json:"value"`
	Since    time.Time `json:"since"`
	Position int       `json:"position,omitempty"`
	Leader   *Holder   `json:"leader,omitempty"`

	lease *Lease
}

// ElectionState is an election's leader (nil when there is none) and its
// candidates, the leader first.
type ElectionState struct {
	Name       string   `json:"name"`
	Leader     *Holder  `json:"leader"`
	Candidates []Holder `json:"candidates"`
	Index      int64    `json:"-"`
}

// ElectionSummary is one election of a listing.
type ElectionSummary struct {
	Name       string  `json:"name"`
	Leader     *Holder `json:"leader"`
	Candidates int     `json:"candidates"`
}

// BarrierState says whether a barrier is up.
type BarrierState struct {
	Name   string     `json:"name"`
	Raised bool       `json:"raised"`
	Since  *time.Time `json:"since,omitempty"`
	Index  int64      `json:"-"`
}

// Member is one member of a double barrier.
type Member struct {
	Member  string    `json:"member"`
	Lease   string    `json:"lease,omitempty"`
	Holder  string    `json:"holder"`
	Gateway string    `json:"gateway,omitempty"`
	Count   int       `json:"count,omitempty"`
	Since   time.Time `json:"since"`
	Foreign bool      `json:"foreign"`
}

// DoubleBarrierState is a double barrier's members and whether Count of
// them have entered.
type DoubleBarrierState struct {
	Name    string   `json:"name"`
	Count   int      `json:"count,omitempty"`
	Ready   bool     `json:"ready"`
	Members []Member `json:"members"`
	Lease   string   `json:"lease,omitempty"` // enter only: the lease of the membership
	Index   int64    `json:"-"`
}

// ItemInfo describes a queue item without its bytes.
type ItemInfo struct {
	ID        string    `json:"id"`
	Priority  int       `json:"priority"`
	Size      int       `json:"size"`
	CreatedAt time.Time `json:"created_at"`
	ClaimedBy string    `json:"claimed_by,omitempty"`
	// NotBefore is a delayed item's due time (the answer of a delayed
	// produce).
	NotBefore *time.Time `json:"not_before,omitempty"`
}

// QueueState is a queue's length, its claims and the first items in
// serving order, and its delayed items (not in Length nor Head): how many,
// and the earliest due time among them.
type QueueState struct {
	Name    string     `json:"name"`
	Length  int        `json:"length"`
	Claimed int        `json:"claimed"`
	Delayed int        `json:"delayed"`
	NextDue *time.Time `json:"next_due,omitempty"`
	Head    []ItemInfo `json:"head"`
	Index   int64      `json:"-"`
}

func (s *LockState) setIndex(i int64)          { s.Index = i }
func (s *SemaphoreState) setIndex(i int64)     { s.Index = i }
func (s *ElectionState) setIndex(i int64)      { s.Index = i }
func (s *BarrierState) setIndex(i int64)       { s.Index = i }
func (s *DoubleBarrierState) setIndex(i int64) { s.Index = i }
func (s *QueueState) setIndex(i int64)         { s.Index = i }
