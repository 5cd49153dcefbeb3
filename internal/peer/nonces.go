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
// twice. A proof is taken only within Window of its time, so a nonce need
// be remembered only that long after the latest time it can be taken at:
// two generations of 2*Window each keep every nonce at least that long,
// and forgetting one is dropping a map. The memory is bounded by Max; past
// it, proofs are refused until a generation goes (only proofs that check
// out are remembered, so only holders of the secret can fill it).
type Nonces struct {
	Window time.Duration
	Max    int

	mu        sync.Mutex
	cur, prev map[string]struct{}
	rotated   time.Time
}

// Take records nonce, or says why it may not: ErrReplayed when it was
// taken before, ErrFull when the memory is full.
func (n *Nonces) Take(nonce string, now time.Time) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cur == nil || now.Sub(n.rotated) >= 2*n.Window {
		n.prev, n.cur, n.rotated = n.cur, map[string]struct{}{}, now
	}
	if _, seen := n.cur[nonce]; seen {
		return ErrReplayed
	}
	if _, seen := n.prev[nonce]; seen {
		return ErrReplayed
	}
	if len(n.cur)+len(n.prev) >= n.Max {
		return ErrFull
	}
	n.cur[nonce] = struct{}{}
	return nil
}
