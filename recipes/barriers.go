package recipes

import (
	"context"
	"errors"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// Barriers follow Curator's DistributedBarrier (and kazoo's Barrier): the
// barrier is up while the node {root}/barriers/{name} exists.
type Barriers struct {
	sess  *Session
	cache *watchCache
}

// BarrierState says whether a barrier is up.
type BarrierState struct {
	Name   string     `json:"name"`
	Raised bool       `json:"raised"`
	Since  *time.Time `json:"since,omitempty"`
	Index  int64      `json:"-"`
}

func (b *Barriers) path(name string) string { return kinds.Barriers.Path(b.sess.Root(), name) }

// Raise puts the barrier up; created is false if it was up already.
func (b *Barriers) Raise(ctx context.Context, name string) (created bool, err error) {
	if err := ValidName(name); err != nil {
		return false, err
	}
	sess := b.sess
	for {
		if st, _, _ := sess.Status(); st != StateLive {
			return false, unavailable()
		}
		_, err := sess.Conn().Create(b.path(name), nil, zk.FlagPersistent, sess.acl())
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, zk.ErrNodeExists):
			return false, nil
		case ambiguous(err):
			// Whether our create happened or not, the barrier is up after a
			// retry that finds it: that is all the caller asked for.
			if werr := sess.WaitLive(ctx); werr != nil {
				return false, unavailable()
			}
		default:
			return false, internal(err, "raise barrier")
		}
	}
}

// Lower takes the barrier down, releasing every waiter. Lowering a barrier
// that is down is not an error.
func (b *Barriers) Lower(ctx context.Context, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	sess := b.sess
	for {
		if st, _, _ := sess.Status(); st != StateLive {
			return unavailable()
		}
		err := sess.Conn().Delete(b.path(name), -1)
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			return nil
		case errors.Is(err, zk.ErrNotEmpty):
			return Errorf(CodeInvalid, "barrier %q has children: it is not a zkgate barrier", name)
		case ambiguous(err):
			if werr := sess.WaitLive(ctx); werr != nil {
				return unavailable()
			}
		default:
			return internal(err, "lower barrier")
		}
	}
}

// Wait waits up to wait for the barrier to be down. Every waiter shares one
// ZooKeeper watch, so all are released together when it is lowered.
func (b *Barriers) Wait(ctx context.Context, name string, wait time.Duration) (BarrierState, error) {
	if err := ValidName(name); err != nil {
		return BarrierState{}, err
	}
	deadline := time.Now().Add(wait)
	var index int64
	for {
		left := time.Until(deadline)
		st, err := b.State(ctx, name, index, max(left, 0))
		if err != nil {
			return BarrierState{}, err
		}
		if !st.Raised {
			return st, nil
		}
		if left <= 0 {
			return st, &Error{Code: CodeTimeout, Detail: "barrier " + quote(name) + " is still up",
				Extra: map[string]any{"raised": true}}
		}
		index = st.Index
	}
}

// State says whether the barrier is up; with index > 0 it is a blocking read.
func (b *Barriers) State(ctx context.Context, name string, index int64, wait time.Duration) (BarrierState, error) {
	return readState(ctx, b.cache, name, b.path(name), entryOpts{}, index, wait, barrierStateOf)
}

func barrierStateOf(name string, snap *Snapshot) BarrierState {
	st := BarrierState{Name: name, Raised: snap.Exists, Index: snap.Index}
	if snap.Exists {
		since := time.UnixMilli(snap.Stat.Ctime).UTC()
		st.Since = &since
	}
	return st
}

// List returns one page of the barriers that are up, and the name the
// next page starts after ("" for the last page).
func (b *Barriers) List(ctx context.Context, p Page) ([]BarrierState, string, error) {
	// A barrier is up while its node exists: the name says it all.
	return listPage(ctx, b.sess, kinds.Barriers.Dir(b.sess.Root()), p, nil, func(_ context.Context, name string) (BarrierState, bool, error) {
		return BarrierState{Name: name, Raised: true}, true, nil
	})
}
