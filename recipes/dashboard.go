package recipes

import (
	"context"
	"errors"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// Dashboard is the read access the live dashboard has to the recipes: the
// shared watch cache (so that however many browsers look, each path has one
// ZooKeeper watch) and a plain read of any znode under the root.
type Dashboard struct{ svc *Service }

// Dashboard returns the dashboard's view of the service.
func (s *Service) Dashboard() Dashboard { return Dashboard{svc: s} }

// Root is the gateway's root znode.
func (d Dashboard) Root() string { return d.svc.sess.Root() }

// GatewayID is this gateway's id, as written into the nodes it creates.
func (d Dashboard) GatewayID() string { return d.svc.gatewayID }

// Subscribe has fn told, without blocking, of every change the watch cache
// sees, until stop is called. It may be called while the cache is in use.
func (d Dashboard) Subscribe(fn func(path string)) (stop func()) {
	var off atomic.Bool
	c := d.svc.cache
	c.mu.Lock()
	// publish copies the slice under c.mu before calling: appending here,
	// under the same lock, never races with it.
	c.subs = append(c.subs, func(p string) {
		if !off.Load() {
			fn(p)
		}
	})
	c.mu.Unlock()
	return func() { off.Store(true) }
}

// Hold keeps the cache entry of p, and so its ZooKeeper watch, alive until
// release is called. It does not wait for the first load.
func (d Dashboard) Hold(p string) (release func(), err error) {
	c := d.svc.cache
	e, err := c.acquire(p, d.optsFor(p))
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { c.releaseEntry(e) }) }, nil
}

// Read returns the cached snapshot of p, loading it first if the cache has
// none.
func (d Dashboard) Read(ctx context.Context, p string) (*Snapshot, error) {
	snap, _, release, err := d.svc.cache.view(ctx, p, d.optsFor(p))
	if err != nil {
		return nil, readErr(err)
	}
	release()
	return snap, nil
}

// optsFor reads a path the way the recipe that owns it does: the first
// reader of a path decides how its entry loads, so the dashboard must agree
// with the recipes (a queue's directories are read as names only; locks,
// elections and semaphores hold sequential nodes only).
func (d Dashboard) optsFor(p string) entryOpts {
	return optsFor(d.Root(), p)
}

// named reports whether dir is the directory of a kind whose node holds
// one child per name, read on its own.
func named(dir string) bool {
	k, ok := kinds.ByName(dir)
	return ok && k.Named
}

func optsFor(root, p string) entryOpts {
	rest, ok := strings.CutPrefix(p, root+"/")
	if !ok {
		return entryOpts{}
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 1 && named(parts[0]):
		// The names of a kind: what each is, its own entry says.
		return entryOpts{namesOnly: true}
	case len(parts) == 3 && parts[0] == kinds.Queues.Name && (parts[2] == "entries" || parts[2] == "taken"):
		return entryOpts{namesOnly: true}
	case len(parts) == 2 && (parts[0] == kinds.Locks.Name || parts[0] == kinds.Elections.Name):
		return seqOpts
	case len(parts) == 3 && parts[0] == kinds.Semaphores.Name && (parts[2] == semAdmissionDir || parts[2] == semSlotsDir):
		return seqOpts
	}
	return entryOpts{}
}

// DashboardZnode is one znode as the znode browser shows it.
type DashboardZnode struct {
	Path     string
	Data     []byte
	Stat     ZnodeStat
	Children []string // sorted
}

// ZnodeStat is what the znode browser shows of a znode's stat: ZooKeeper's
// own type stays in this package.
type ZnodeStat struct {
	Czxid, Mzxid, Pzxid     int64
	Ctime, Mtime            int64 // milliseconds since the epoch
	Version, Cversion       int32
	Aversion                int32
	EphemeralOwner          int64 // the owning session, 0 for a persistent node
	DataLength, NumChildren int32
}

func znodeStatOf(st *zk.Stat) ZnodeStat {
	return ZnodeStat{Czxid: st.Czxid, Mzxid: st.Mzxid, Pzxid: st.Pzxid, Ctime: st.Ctime, Mtime: st.Mtime,
		Version: st.Version, Cversion: st.Cversion, Aversion: st.Aversion, EphemeralOwner: st.EphemeralOwner,
		DataLength: st.DataLength, NumChildren: st.NumChildren}
}

// Znode reads p, which must be the root or under it, straight from
// ZooKeeper (no watch: the browser is read on demand). A missing node is
// not_found.
func (d Dashboard) Znode(ctx context.Context, p string) (DashboardZnode, error) {
	root := d.Root()
	if p != root && !strings.HasPrefix(p, root+"/") || path.Clean(p) != p {
		return DashboardZnode{}, Errorf(CodeInvalid, "only paths under %s can be browsed", root)
	}
	ctx, cancel := context.WithTimeout(ctx, tryOnceBound)
	defer cancel()
	for {
		conn := d.svc.sess.Conn()
		data, stat, err := conn.Get(p)
		var kids []string
		if err == nil {
			kids, _, err = conn.Children(p)
		}
		switch {
		case err == nil:
			sort.Strings(kids)
			return DashboardZnode{Path: p, Data: data, Stat: znodeStatOf(stat), Children: kids}, nil
		case errors.Is(err, zk.ErrNoNode):
			return DashboardZnode{}, Errorf(CodeNotFound, "no znode %s", p)
		case ambiguous(err):
			if werr := d.svc.sess.WaitLive(ctx); werr != nil {
				return DashboardZnode{}, unavailable()
			}
		default:
			return DashboardZnode{}, readErr(err)
		}
	}
}

// LeaseRecords reads the lease records, of every gateway, in a snapshot of
// {root}/leases: the terms and the gateway of each lease.
func LeaseRecords(snap *Snapshot) []LeaseInfo {
	out := make([]LeaseInfo, 0, len(snap.Children))
	for _, n := range snap.Children {
		rec, _ := decodeLeaseRecord(n.Data) // a record that is not JSON shows as its id alone
		info := rec.info(n.Name)
		if info.CreatedAt.IsZero() {
			info.CreatedAt = time.UnixMilli(n.Stat.Ctime).UTC() // a record of a gateway that did not write created_at
		}
		out = append(out, info)
	}
	return out
}

// GatewayRecords reads the gateways registered in a snapshot of
// {root}/gateways; those that do not check out with the gateways' shared
// secret are marked Unverified.
func (d Dashboard) GatewayRecords(snap *Snapshot) []GatewayInfo {
	out := make([]GatewayInfo, 0, len(snap.Children))
	for _, n := range snap.Children {
		out = append(out, d.svc.readRegistration(snap.Path+"/"+n.Name, n.Name, &n.Stat, n.Data))
	}
	return out
}
