package recipes

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// A set of locks taken at once, all or nothing (Curator's
// InterProcessMultiLock). Each lock of the set is an ordinary lock of
// {root}/locks/{name}: a node in its line, contended for by single-lock
// requests and by Curator's InterProcessMutex alike. What the set adds is
// the order: its locks are taken one after the other in one canonical
// order (by name), so that two sets never wait for each other in a
// cycle (each waits only for a lock above every lock it holds, and the
// lowest lock of a cycle would have to be waited for by a set that holds
// a higher one), and on any failure the locks the call took are let go
// before it answers.

// MaxLockSet is the most locks one set may name.
const MaxLockSet = 32

// LockRequest is one lock of a set: its name and mode ("" is exclusive).
type LockRequest struct {
	Name string `json:"name"`
	Mode string `json:"mode,omitempty"`
}

// ValidLockSet checks a set of locks and returns it in the order its locks
// are taken: by name, each mode made explicit. A name may appear once.
func ValidLockSet(set []LockRequest) ([]LockRequest, error) {
	if len(set) == 0 || len(set) > MaxLockSet {
		return nil, Errorf(CodeInvalid, "locks must name from 1 to %d locks", MaxLockSet)
	}
	out := make([]LockRequest, len(set))
	for i, r := range set {
		if err := ValidName(r.Name); err != nil {
			return nil, Errorf(CodeInvalid, "locks[%d].name: %s", i, err.(*Error).Detail)
		}
		mode, err := ValidMode(r.Mode)
		if err != nil {
			return nil, Errorf(CodeInvalid, "locks[%d].mode: %s", i, err.(*Error).Detail)
		}
		out[i] = LockRequest{Name: r.Name, Mode: mode}
	}
	slices.SortFunc(out, func(a, b LockRequest) int { return cmp.Compare(a.Name, b.Name) })
	for i := 1; i < len(out); i++ {
		if out[i].Name == out[i-1].Name {
			return nil, Errorf(CodeInvalid, "lock %q is named twice: a set names each lock once, in one mode", out[i].Name)
		}
	}
	return out, nil
}

// AcquireAll takes every lock of set for lease, in the canonical order of
// ValidLockSet, within wait for the whole set (0: each is tried once). It
// returns the grants in that order. When one cannot be had (the wait ended,
// ctx was cancelled, a deadlock was found, the lease ended), the locks this
// call took are released before it returns, and the error names the lock
// it failed on ("lock"); locks the lease held before the call stay held.
func (k *Locks) AcquireAll(ctx context.Context, lease *Lease, set []LockRequest, wait time.Duration) ([]LockGrant, error) {
	set, err := ValidLockSet(set)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	grants := make([]LockGrant, 0, len(set))
	var took []LockRequest
	for _, r := range set {
		held := lease.holdsLock(r.Name, r.Mode)
		left := time.Until(deadline)
		if wait <= 0 || left < 0 {
			left = 0 // the last lock tried once, as a try-once set tries each
		}
		g, err := k.Acquire(ctx, lease, r.Name, r.Mode, left)
		if err != nil {
			k.releaseTaken(ctx, lease, took)
			return nil, lockSetErr(err, r, len(set))
		}
		if !held {
			took = append(took, r)
		}
		grants = append(grants, g)
	}
	return grants, nil
}

// releaseTaken lets go of the locks a failed AcquireAll took, the last
// first, even when ctx was cancelled (the client went away: its locks must
// not outlive its call). A release that fails leaves the lock to its
// lease, which ends it in any case when it ends.
func (k *Locks) releaseTaken(ctx context.Context, lease *Lease, took []LockRequest) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.sess.timeout())
	defer cancel()
	for i := len(took) - 1; i >= 0; i-- {
		if err := k.Release(ctx, lease, took[i].Name, took[i].Mode); err != nil {
			k.log.Warn("a lock of a set that failed stays with its lease", "lease", lease.ID, "lock", took[i].Name, "err", err)
		}
	}
}

// lockSetErr is err, the failure of the set's lock r, saying which lock it
// was and that the set holds none of the locks the call took.
func lockSetErr(err error, r LockRequest, n int) error {
	e, ok := err.(*Error)
	if !ok {
		return err
	}
	out := *e
	out.Detail = fmt.Sprintf("%s (lock %q of a set of %d; the set's other locks were let go)", e.Detail, r.Name, n)
	out.Extra = withExtra(e, map[string]any{"lock": r.Name})
	return &out
}

// holdsLock says whether the lease holds lock name in mode now.
func (l *Lease) holdsLock(name, mode string) bool {
	for _, h := range l.holdsWithPrefix(lockKey(name, mode)) {
		c := h.core()
		c.mu.Lock()
		held := c.granted && !c.gone
		c.mu.Unlock()
		if held {
			return true
		}
	}
	return false
}

// ReleaseAll lets go of every lock of set that lease holds (or waits for),
// each in the mode the set names. The locks it does not hold are named in
// a not_held error ("locks"), once the others are released.
func (k *Locks) ReleaseAll(ctx context.Context, lease *Lease, set []LockRequest) error {
	set, err := ValidLockSet(set)
	if err != nil {
		return err
	}
	var notHeld []string
	for _, r := range set {
		err := k.Release(ctx, lease, r.Name, r.Mode)
		switch {
		case ErrorCode(err) == CodeNotHeld:
			notHeld = append(notHeld, r.Name)
		case err != nil:
			return err
		}
	}
	if len(notHeld) > 0 {
		return &Error{Code: CodeNotHeld, Detail: fmt.Sprintf("lease %s holds none of the locks %q; it let go of the set's others", lease.ID, notHeld),
			Extra: map[string]any{"locks": notHeld}}
	}
	return nil
}
