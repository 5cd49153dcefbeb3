package peer

import (
	"errors"
	"sync"
	"time"
)

// Errors of Nonces.Take.
var (
	ErrReplayed = errors.New("the proof was taken before (a replay)")
	ErrFull     = errors.New("too many proofs taken in the last minutes")
)

// Nonces remembers the nonces of the proofs taken, so that none is taken
// twice, apart for each sender (the gateway a proof says it is from, which
// the proof's check vouches for). A proof is taken only within Window of
// its time, so a nonce need be remembered only that long after the latest
// time it can be taken at: two generations of 2*Window each keep every
// nonce at least that long, and forgetting one is dropping a map. Each
// sender's memory is bounded by Max; past it, that sender's proofs are
// refused until a generation goes, and no other sender's: one gateway that
// sends a flood (its callers' fan-outs, say) fills its own memory, never the
// room of the others' forwarded requests and handovers. Only proofs that
// check out are remembered, so only holders of the secret can fill it.
type Nonces struct {
	Window time.Duration
	Max    int

	mu      sync.Mutex
	senders map[string]*nonceSet
}

// nonceSet is the nonces of one sender, in two generations.
type nonceSet struct {
	cur, prev map[string]struct{}
	rotated   time.Time
}

// Take records nonce of sender, or says why it may not: ErrReplayed when
// it was taken before, ErrFull when sender's memory is full.
func (n *Nonces) Take(sender, nonce string, now time.Time) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.senders == nil {
		n.senders = map[string]*nonceSet{}
	}
	s := n.senders[sender]
	if s == nil {
		s = &nonceSet{}
		n.senders[sender] = s
	}
	if s.cur == nil || now.Sub(s.rotated) >= 2*n.Window {
		s.prev, s.cur, s.rotated = s.cur, map[string]struct{}{}, now
		n.forgetIdle(now)
	}
	if _, seen := s.cur[nonce]; seen {
		return ErrReplayed
	}
	if _, seen := s.prev[nonce]; seen {
		return ErrReplayed
	}
	if len(s.cur)+len(s.prev) >= n.Max {
		return ErrFull
	}
	s.cur[nonce] = struct{}{}
	return nil
}

// forgetIdle drops the senders whose nonces are all older than two
// generations: a gateway long gone. n.mu is held.
func (n *Nonces) forgetIdle(now time.Time) {
	for k, s := range n.senders {
		if now.Sub(s.rotated) >= 4*n.Window {
			delete(n.senders, k)
		}
	}
}
