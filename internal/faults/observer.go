//go:build linux

package faults

import (
	"context"
	"errors"
	"path"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// observer is a ZooKeeper client of the suite's own, straight to the
// ensemble (no proxy): it tells the session that holds each lease's record,
// and sees each gateway session end, from the registration node every
// gateway keeps under {root}/gateways (EPHEMERAL of its current session,
// made again on each new session).
type observer struct {
	conn *zk.Conn
	root string
	hist *History

	mu       sync.Mutex
	watching map[string]bool
	wg       sync.WaitGroup
	stop     chan struct{}
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

func startObserver(ctx context.Context, servers []string, root string, hist *History) (*observer, error) {
	live := make(chan struct{}, 1)
	conn, _, err := zk.Connect(servers, 20*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.State == zk.StateHasSession {
				select {
				case live <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		return nil, err
	}
	select {
	case <-live:
	case <-ctx.Done():
		conn.Close()
		return nil, ctx.Err()
	}
	o := &observer{conn: conn, root: root, hist: hist, watching: map[string]bool{}, stop: make(chan struct{})}
	o.wg.Add(1)
	go o.watchGateways()
	return o, nil
}

func (o *observer) close() {
	close(o.stop)
	o.conn.Close()
	o.wg.Wait()
}

// watchGateways watches the registrations' parent and starts a watch on
// every registration it has not watched yet.
func (o *observer) watchGateways() {
	defer o.wg.Done()
	parent := o.root + "/gateways"
	for {
		kids, _, ch, err := o.conn.ChildrenW(parent)
		if err != nil {
			select {
			case <-o.stop:
				return
			case <-time.After(50 * time.Millisecond):
				continue
			}
		}
		for _, k := range kids {
			o.watchRegistration(path.Join(parent, k))
		}
		select {
		case <-o.stop:
			return
		case <-ch:
		}
	}
}

// watchRegistration follows one registration path for the rest of the
// run (an exists watch also fires when the node is made again), and records
// each session whose node goes or is replaced.
func (o *observer) watchRegistration(p string) {
	o.mu.Lock()
	if o.watching[p] {
		o.mu.Unlock()
		return
	}
	o.watching[p] = true
	o.mu.Unlock()
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		var owner int64
		for {
			ok, st, ch, err := o.conn.ExistsW(p)
			if err != nil {
				select {
				case <-o.stop:
					return
				case <-time.After(50 * time.Millisecond):
					continue
				}
			}
			switch {
			case !ok && owner != 0:
				o.lost(owner)
				owner = 0
			case ok && st.EphemeralOwner != owner:
				if owner != 0 {
					o.lost(owner) // replaced by the node of a new session
				}
				owner = st.EphemeralOwner
			}
			select {
			case <-o.stop:
				return
			case <-ch:
			}
		}
	}()
}

func (o *observer) lost(session int64) {
	now := time.Now()
	o.hist.record(func(h *History) {
		if _, ok := h.SessionLost[session]; !ok {
			h.SessionLost[session] = now
		}
	})
}

// leaseSession returns the session that owns a lease's record, 0 if it
// cannot tell.
func (o *observer) leaseSession(id string) int64 {
	ok, st, err := o.conn.Exists(o.root + "/leases/" + id)
	if err != nil || !ok || errors.Is(err, zk.ErrNoNode) {
		return 0
	}
	return st.EphemeralOwner
}
