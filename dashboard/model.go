package dashboard

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zkgate/zkgate/kinds"
	"github.com/zkgate/zkgate/recipes"
	"github.com/zkgate/zkgate/views"
)

// The readers the dashboard consumes, each the State of one recipe, all
// served from the shared watch cache.
type (
	lockReader interface {
		State(ctx context.Context, name string, index int64, wait time.Duration) (recipes.LockState, error)
	}
	semaphoreReader interface {
		State(ctx context.Context, name string, index int64, wait time.Duration) (recipes.SemaphoreState, error)
	}
	electionReader interface {
		State(ctx context.Context, name string, index int64, wait time.Duration) (recipes.ElectionState, error)
	}
	doubleBarrierReader interface {
		State(ctx context.Context, name string, index int64, wait time.Duration) (recipes.DoubleBarrierState, error)
	}
	queueReader interface {
		State(ctx context.Context, name string, head int, index int64, wait time.Duration) (recipes.QueueState, error)
		Claims(ctx context.Context, name string) ([]recipes.ClaimInfo, error)
	}
	leaseLister interface{ List() []*recipes.Lease }
	groupReader interface {
		State(ctx context.Context, name string, index int64, wait time.Duration) (recipes.GroupState, error)
	}
)

// queueHead is how many items of each queue the dashboard shows.
const queueHead = 8

// dashSource reads what the dashboard shows.
type dashSource struct {
	dash      recipes.Dashboard
	locks     lockReader
	sems      semaphoreReader
	elections electionReader
	dbarriers doubleBarrierReader
	queues    queueReader
	groups    groupReader
	leases    leaseLister
	// hideSessions leaves the contenders' session ids out (tokens on).
	hideSessions bool
}

func newDashSource(svc *recipes.Service, hideSessions bool) *dashSource {
	return &dashSource{dash: svc.Dashboard(), locks: svc.Locks, sems: svc.Semaphores, elections: svc.Elections,
		dbarriers: svc.DoubleBarriers, queues: svc.Queues, groups: svc.Groups, leases: svc.Leases, hideSessions: hideSessions}
}

// The kinds the dashboard reads, each the name of a child of the root:
// the kinds of primitive, and the leases' and the gateways' records.
var (
	kindLocks     = kinds.Locks.Name
	kindSems      = kinds.Semaphores.Name
	kindElections = kinds.Elections.Name
	kindBarriers  = kinds.Barriers.Name
	kindDBarriers = kinds.DoubleBarriers.Name
	kindQueues    = kinds.Queues.Name
	kindGroups    = kinds.Groups.Name
	kindCounters  = kinds.Counters.Name
	kindLeases    = "leases"
	kindGateways  = "gateways"
)

var allKinds = append(kinds.Names(), kindLeases, kindGateways)

// dashKind is how the dashboard reads one kind: the table dashKinds holds
// one for each of allKinds, so that adding a kind to the registry (package
// kinds) is adding it here, and nothing switches on a kind.
type dashKind struct {
	// paths are the znodes behind the primitive whose node is base: the
	// paths the hub keeps watched while it shows it. Kinds whose top-level
	// node says all (barriers, leases, gateways) have none (paths nil).
	paths func(base string) []string
	// whole reads such a kind from the snapshot of its node.
	whole func(s *dashSource, st *dashState, snap *recipes.Snapshot)
	// load reads one named item; ok is false when it has nobody in it (a
	// container about to be removed) or cannot be read (a name zkgate does
	// not accept, made by another client).
	load func(ctx context.Context, s *dashSource, name string) (item any, ok bool)
	// items are where the named items read are kept.
	items func(st *dashState) itemStore
	// merge takes the kind's part of other, loaded on its own.
	merge func(st, other *dashState)
	// page is the page that lists the kind, if not the one of its name.
	page string
}

// itemStore keeps the named items of one kind that are read.
type itemStore interface {
	set(name string, item any)
	has(name string) bool
	loaded() []string // sorted
	drop(name string)
}

// named are the items of one kind read, by name.
type named[T any] map[string]T

func (m named[T]) set(name string, item any) { m[name] = item.(T) }
func (m named[T]) has(name string) bool      { _, ok := m[name]; return ok }
func (m named[T]) loaded() []string          { return sortedKeys(m) }
func (m named[T]) drop(name string)          { delete(m, name) }

// dashKinds is the dashboard's table of kinds, by name.
var dashKinds = map[string]dashKind{
	kindLocks: {
		paths: func(base string) []string { return []string{base} },
		load: func(ctx context.Context, s *dashSource, name string) (any, bool) {
			l, err := s.locks.State(ctx, name, 0, 0)
			if s.hideSessions {
				l.WithoutSessions()
			}
			return l, err == nil && len(l.Holders)+len(l.Waiters) > 0
		},
		items: func(st *dashState) itemStore { return st.locks },
		merge: func(st, other *dashState) { st.locks = other.locks },
	},
	kindSems: {
		paths: func(base string) []string { return []string{base + "/leases", base + "/locks"} },
		load: func(ctx context.Context, s *dashSource, name string) (any, bool) {
			m, err := s.sems.State(ctx, name, 0, 0)
			if s.hideSessions {
				m.WithoutSessions()
			}
			return m, err == nil && len(m.Holders)+len(m.Waiters) > 0
		},
		items: func(st *dashState) itemStore { return st.sems },
		merge: func(st, other *dashState) { st.sems = other.sems },
	},
	kindElections: {
		paths: func(base string) []string { return []string{base} },
		load: func(ctx context.Context, s *dashSource, name string) (any, bool) {
			e, err := s.elections.State(ctx, name, 0, 0)
			if s.hideSessions {
				e.WithoutSessions()
			}
			return e, err == nil && len(e.Candidates) > 0
		},
		items: func(st *dashState) itemStore { return st.elections },
		merge: func(st, other *dashState) { st.elections = other.elections },
	},
	kindBarriers: {
		whole: func(_ *dashSource, st *dashState, snap *recipes.Snapshot) {
			st.barriers = make([]recipes.BarrierState, 0, len(snap.Children))
			for _, n := range snap.Children {
				since := time.UnixMilli(n.Stat.Ctime).UTC()
				st.barriers = append(st.barriers, recipes.BarrierState{Name: n.Name, Raised: true, Since: &since})
			}
		},
		merge: func(st, other *dashState) { st.barriers = other.barriers },
	},
	kindDBarriers: {
		paths: func(base string) []string { return []string{base} },
		load: func(ctx context.Context, s *dashSource, name string) (any, bool) {
			d, err := s.dbarriers.State(ctx, name, 0, 0)
			return d, err == nil && (len(d.Members) > 0 || d.Ready)
		},
		items: func(st *dashState) itemStore { return st.dbarriers },
		merge: func(st, other *dashState) { st.dbarriers = other.dbarriers },
		page:  kindBarriers, // with the barriers
	},
	kindQueues: {
		paths: func(base string) []string { return []string{base + "/entries", base + "/taken", base + "/delayed"} },
		load: func(ctx context.Context, s *dashSource, name string) (any, bool) {
			q, err := s.queues.State(ctx, name, queueHead, 0, 0)
			if err != nil || q.Length == 0 && q.Delayed == 0 {
				return nil, false
			}
			var claims []recipes.ClaimInfo
			if q.Claimed > 0 {
				claims, _ = s.queues.Claims(ctx, name) // what it cannot read, it does not show
			}
			return dashQueue{q, claims}, true
		},
		items: func(st *dashState) itemStore { return st.queues },
		merge: func(st, other *dashState) { st.queues = other.queues },
	},
	kindGroups: {
		paths: func(base string) []string { return []string{base} },
		load: func(ctx context.Context, s *dashSource, name string) (any, bool) {
			g, err := s.groups.State(ctx, name, 0, 0)
			return g, err == nil && len(g.Members) > 0
		},
		items: func(st *dashState) itemStore { return st.groups },
		merge: func(st, other *dashState) { st.groups = other.groups },
	},
	kindCounters: {
		// A counter is its node's data: the dashboard reads it from the
		// watch cache, in every format it fits (it knows none).
		paths: func(base string) []string { return []string{base} },
		load: func(ctx context.Context, s *dashSource, name string) (any, bool) {
			snap, err := s.dash.Read(ctx, kinds.Counters.Path(s.dash.Root(), name))
			if err != nil || !snap.Exists {
				return nil, false
			}
			return views.Counter{Name: name, Version: snap.Stat.Version, Values: recipes.CounterReadings(snap.Data),
				Bytes: len(snap.Data), Index: snap.Index}, true
		},
		items: func(st *dashState) itemStore { return st.counters },
		merge: func(st, other *dashState) { st.counters = other.counters },
	},
	kindLeases: {
		whole: func(_ *dashSource, st *dashState, snap *recipes.Snapshot) { st.leases = recipes.LeaseRecords(snap) },
		merge: func(st, other *dashState) { st.leases = other.leases },
	},
	kindGateways: {
		whole: func(s *dashSource, st *dashState, snap *recipes.Snapshot) { st.gateways = s.dash.GatewayRecords(snap) },
		merge: func(st, other *dashState) { st.gateways = other.gateways },
	},
}

// itemPaths are the znodes behind one named primitive of a kind: the paths
// the hub keeps watched while it shows it. Kinds whose top-level node says
// all (barriers, leases, gateways) have none.
func itemPaths(root, kind, name string) []string {
	if k := dashKinds[kind]; k.paths != nil {
		return k.paths(root + "/" + kind + "/" + name)
	}
	return nil
}

// splitPath tells which kind and which named primitive a watched path
// belongs to; name is "" for the kind's own node.
func splitPath(root, p string) (kind, name string, ok bool) {
	rest, ok := strings.CutPrefix(p, root+"/")
	if !ok {
		return "", "", false
	}
	kind, rest, _ = strings.Cut(rest, "/")
	name, _, _ = strings.Cut(rest, "/")
	return kind, name, slices.Contains(allKinds, kind)
}

// dashState is what the dashboard knows of ZooKeeper, by kind and name:
// every name, and the items of the names it shows.
type dashState struct {
	names     map[string][]string // kind -> names under it, sorted
	whole     map[string]bool     // kind -> every name's item is read
	locks     named[recipes.LockState]
	sems      named[recipes.SemaphoreState]
	elections named[recipes.ElectionState]
	dbarriers named[recipes.DoubleBarrierState]
	queues    named[dashQueue] // with their claims
	groups    named[recipes.GroupState]
	counters  named[views.Counter]
	barriers  []recipes.BarrierState
	leases    []recipes.LeaseInfo // the records: terms and gateway
	gateways  []recipes.GatewayInfo
}

func newDashState() *dashState {
	return &dashState{names: map[string][]string{}, whole: map[string]bool{}, locks: named[recipes.LockState]{},
		sems: named[recipes.SemaphoreState]{}, elections: named[recipes.ElectionState]{},
		dbarriers: named[recipes.DoubleBarrierState]{}, queues: named[dashQueue]{},
		groups:   named[recipes.GroupState]{},
		counters: named[views.Counter]{},
	}
}

// watcher keeps paths watched for the hub; nil for a one-off page load.
type watcher interface {
	keep(kind string, names []string)
}

// loadKind reads the names of a kind (the node of the kinds without items
// says all) and the items of those names that views show, the new ones
// (all of them when fresh); items no longer shown, or gone, are dropped.
func (s *dashSource) loadKind(ctx context.Context, st *dashState, kind string, w watcher, fresh bool, views []dashView) error {
	root := s.dash.Root()
	snap, err := s.dash.Read(ctx, root+"/"+kind)
	if err != nil {
		return err
	}
	if k := dashKinds[kind]; k.whole != nil {
		k.whole(s, st, snap)
		return nil
	}
	names := make([]string, 0, len(snap.Children))
	for _, n := range snap.Children {
		names = append(names, n.Name)
	}
	st.names[kind] = names
	return s.loadShown(ctx, st, kind, w, fresh, views)
}

// loadShown reads the items of kind that views show (st.names[kind] must be
// current): those not read yet, or all when fresh; it drops the others.
func (s *dashSource) loadShown(ctx context.Context, st *dashState, kind string, w watcher, fresh bool, views []dashView) error {
	shown := shownNames(kind, st.names[kind], views)
	st.whole[kind] = len(shown) == len(st.names[kind])
	if w != nil {
		w.keep(kind, shown)
	}
	want := map[string]bool{}
	var load []string
	for _, n := range shown {
		want[n] = true
		if fresh || !st.has(kind, n) {
			load = append(load, n)
		}
	}
	for _, n := range st.loaded(kind) {
		if !want[n] {
			st.drop(kind, n)
		}
	}
	s.loadItems(ctx, st, kind, load)
	return nil
}

// loadItems reads named items of a kind, a few at a time: each read is a
// cache hit, or the first load of a new watch.
func (s *dashSource) loadItems(ctx context.Context, st *dashState, kind string, names []string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			item, ok := s.loadItem(ctx, kind, name)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				st.set(kind, name, item)
			} else {
				st.drop(kind, name)
			}
		}()
	}
	wg.Wait()
}

// loadItem reads one named item (see dashKind.load).
func (s *dashSource) loadItem(ctx context.Context, kind, name string) (any, bool) {
	if k := dashKinds[kind]; k.load != nil {
		return k.load(ctx, s, name)
	}
	return nil, false
}

// dashQueue is a queue as the dashboard keeps it: its state and its claims
// (those of every gateway, which the lease page shows with their leases).
type dashQueue struct {
	recipes.QueueState
	claims []recipes.ClaimInfo
}

// items are where the named items of kind read are kept (nil: a kind
// without items).
func (st *dashState) items(kind string) itemStore {
	if k := dashKinds[kind]; k.items != nil {
		return k.items(st)
	}
	return nil
}

func (st *dashState) set(kind, name string, item any) {
	if items := st.items(kind); items != nil {
		items.set(name, item)
	}
}

// has reports whether the item name of kind is read.
func (st *dashState) has(kind, name string) bool {
	items := st.items(kind)
	return items != nil && items.has(name)
}

// loaded lists the names of the items of kind that are read.
func (st *dashState) loaded(kind string) []string {
	if items := st.items(kind); items != nil {
		return items.loaded()
	}
	return nil
}

func (st *dashState) drop(kind, name string) {
	if items := st.items(kind); items != nil {
		items.drop(name)
	}
}

// loadAll reads every kind, each on its own, and the items views show.
func (s *dashSource) loadAll(ctx context.Context, st *dashState, w watcher, views []dashView) error {
	var wg sync.WaitGroup
	parts := make([]*dashState, len(allKinds))
	errs := make([]error, len(allKinds))
	for i, kind := range allKinds {
		parts[i] = newDashState()
		wg.Go(func() {
			errs[i] = s.loadKind(ctx, parts[i], kind, w, true, views)
		})
	}
	wg.Wait()
	var first error
	for i, kind := range allKinds {
		if errs[i] != nil {
			first = cmp.Or(first, errs[i])
			continue // keep what this kind showed before
		}
		st.merge(kind, parts[i])
	}
	return first
}

// merge takes kind's part of other, loaded on its own.
func (st *dashState) merge(kind string, other *dashState) {
	st.names[kind], st.whole[kind] = other.names[kind], other.whole[kind]
	if k := dashKinds[kind]; k.merge != nil {
		k.merge(st, other)
	}
}

// dashModel is what the views are rendered from: the state sorted and
// joined with what only this gateway knows (its leases' expiry and grant
// times), plus the header, the ensemble and the rates.
type dashModel struct {
	names     map[string][]string // every name of each kind with items
	whole     map[string]bool     // the kinds whose every item is read
	header    views.Header
	servers   []views.Server
	rates     views.Rates
	locks     []views.Lock
	sems      []views.Semaphore
	elections []views.Election
	barriers  []recipes.BarrierState
	dbarriers []recipes.DoubleBarrierState
	queues    []recipes.QueueState
	groups    []recipes.GroupState
	counters  []views.Counter
	leases    []views.Lease
	gateways  []views.Gateway
	// contention is what a view of the contention page showed last
	// (false: never read yet).
	contention func(contentionView) (views.Contention, bool)
}

// modelInputs are the parts of the model that do not come from the cache.
type modelInputs struct {
	zk       views.ZKStatus
	servers  []views.Server
	rates    views.Rates
	local    []*recipes.Lease
	watched  int64
	clients  int
	self     string
	rootPath string
}

func buildModel(st *dashState, in modelInputs) *dashModel {
	m := &dashModel{servers: in.servers, rates: in.rates, barriers: st.barriers, names: st.names, whole: st.whole}
	local, granted := localLeases(in.local)
	// Holds of every lease, as ZooKeeper shows them: for leases of other
	// gateways this is all there is.
	holds := map[string][]recipes.HoldInfo{}
	m.addContended(st, in.rootPath, granted, holds)
	m.addMembers(st, holds)
	m.addGroups(st, holds)
	m.addLeases(st, local, holds, in.self)
	for _, name := range sortedKeys(st.counters) {
		m.counters = append(m.counters, st.counters[name])
	}
	for _, g := range st.gateways {
		m.gateways = append(m.gateways, views.Gateway{GatewayInfo: g, Self: g.ID == in.self})
	}
	m.count(st, len(local), in)
	return m
}

// localLeases are this gateway's leases by id, and the grant times of
// what they hold by full node path.
func localLeases(leases []*recipes.Lease) (local map[string]recipes.LeaseInfo, granted map[string]time.Time) {
	local, granted = map[string]recipes.LeaseInfo{}, map[string]time.Time{}
	for _, l := range leases {
		info := l.Info()
		local[info.ID] = info
		for _, h := range info.Holds {
			if h.State == "held" && h.Node != "" {
				granted[h.Node] = h.Since
			}
		}
	}
	return local, granted
}

// grantsUnder are the grant times this gateway knows of the contenders
// hs under parent, by node name.
func grantsUnder(granted map[string]time.Time, parent string, hs []recipes.Contender) map[string]time.Time {
	out := map[string]time.Time{}
	for _, h := range hs {
		if t, ok := granted[parent+"/"+h.Node]; ok {
			out[h.Node] = t
		}
	}
	return out
}

// addContended adds the locks, semaphores and elections, with the grant
// times this gateway knows, and their holds and waits to holds.
func (m *dashModel) addContended(st *dashState, root string, granted map[string]time.Time, holds map[string][]recipes.HoldInfo) {
	c := &m.header.Counts
	for _, name := range sortedKeys(st.locks) {
		l := st.locks[name]
		m.locks = append(m.locks, views.Lock{LockState: l, GrantedAt: grantsUnder(granted, root+"/locks/"+name, l.Holders)})
		addQueue(holds, "lock", name, l.Holders, l.Waiters, &c.LockHolders, &c.LockWaiters)
	}
	for _, name := range sortedKeys(st.sems) {
		s := st.sems[name]
		m.sems = append(m.sems, views.Semaphore{SemaphoreState: s, GrantedAt: grantsUnder(granted, root+"/semaphores/"+name+"/leases", s.Holders)})
		addQueue(holds, "semaphore", name, s.Holders, s.Waiters, &c.SemHolders, &c.SemWaiters)
	}
	for _, name := range sortedKeys(st.elections) {
		e := st.elections[name]
		m.elections = append(m.elections, views.Election{ElectionState: e, GrantedAt: grantsUnder(granted, root+"/elections/"+name, e.Candidates)})
		if e.Leader == nil {
			c.Leaderless++
		}
		for i, h := range e.Candidates {
			state := "waiting"
			if i == 0 {
				state = "held"
			}
			addHolds(holds, "election", name, []recipes.Contender{h}, state)
		}
	}
}

// addMembers adds the double barriers and the queues, and what their
// members and claims hold to holds.
func (m *dashModel) addMembers(st *dashState, holds map[string][]recipes.HoldInfo) {
	c := &m.header.Counts
	for _, name := range sortedKeys(st.dbarriers) {
		d := st.dbarriers[name]
		m.dbarriers = append(m.dbarriers, d)
		for _, mem := range d.Members {
			if mem.Lease != "" {
				holds[mem.Lease] = append(holds[mem.Lease], recipes.HoldInfo{Kind: "double-barrier", Name: name, Member: mem.Member, State: "held", Since: mem.Since})
			}
		}
	}
	for _, name := range sortedKeys(st.queues) {
		q := st.queues[name]
		m.queues = append(m.queues, q.QueueState)
		c.QueueItems += q.Length
		c.QueueClaimed += q.Claimed
		for _, cl := range q.claims {
			if cl.Lease != "" {
				holds[cl.Lease] = append(holds[cl.Lease], recipes.HoldInfo{Kind: "claim", Name: name, Item: cl.Item, State: "held", Since: cl.Since})
			}
		}
	}
}

// addGroups adds the groups, and what their zkgate members hold to holds.
func (m *dashModel) addGroups(st *dashState, holds map[string][]recipes.HoldInfo) {
	for _, name := range sortedKeys(st.groups) {
		g := st.groups[name]
		m.groups = append(m.groups, g)
		m.header.Counts.GroupMembers += len(g.Members)
		for _, mem := range g.Members {
			if mem.Lease != "" {
				holds[mem.Lease] = append(holds[mem.Lease], recipes.HoldInfo{Kind: "group", Name: name, Member: mem.Member, State: "held", Since: mem.Since})
			}
		}
	}
}

// addLeases adds every lease record in ZooKeeper, and this gateway's own
// even if its record is not in the cache yet, sorted, with their holds.
func (m *dashModel) addLeases(st *dashState, local map[string]recipes.LeaseInfo, holds map[string][]recipes.HoldInfo, self string) {
	seen := map[string]bool{}
	for _, r := range st.leases {
		seen[r.ID] = true
		if info, ok := local[r.ID]; ok {
			info.Holder, info.Gateway, info.TTL = r.Holder, r.Gateway, r.TTL // as the record says
			m.leases = append(m.leases, leaseView(info, true))
			continue
		}
		r.Holds = holds[r.ID]
		m.leases = append(m.leases, leaseView(r, false))
	}
	for id, info := range local {
		if !seen[id] {
			info.Gateway = self
			m.leases = append(m.leases, leaseView(info, true))
		}
	}
	slices.SortFunc(m.leases, func(a, b views.Lease) int { return cmp.Compare(views.LeaseKey(a), views.LeaseKey(b)) })
	for i := range m.leases {
		slices.SortFunc(m.leases[i].Holds, func(a, b recipes.HoldInfo) int {
			return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Mode, b.Mode), cmp.Compare(a.Member, b.Member), cmp.Compare(a.Item, b.Item))
		})
	}
}

// leaseView is the dashboard's row of the lease info says; only a local
// lease (this gateway's) has its expiry, renewal and lock-delay: the
// others' are known to their gateway alone.
func leaseView(info recipes.LeaseInfo, local bool) views.Lease {
	l := views.Lease{ID: info.ID, Holder: info.Holder, Gateway: info.Gateway, TTL: info.TTL.String(), CreatedAt: info.CreatedAt, Holds: info.Holds}
	if local {
		l.Local, l.ExpiresAt, l.RenewedAt, l.LockDelay = true, info.ExpiresAt, info.RenewedAt, info.LockDelay.String()
	}
	return l
}

// count sets the header's counts. A kind read whole counts the items with
// somebody in them; a longer one counts its names (some may be empty
// containers ZooKeeper has not removed yet), and its holders and waiters
// among the items read.
func (m *dashModel) count(st *dashState, localLeases int, in modelInputs) {
	c := &m.header.Counts
	count := func(kind string, read int) int {
		if st.whole[kind] {
			return read
		}
		c.Partial = append(c.Partial, kind)
		return len(st.names[kind])
	}
	c.Locks, c.Semaphores, c.Elections = count(kindLocks, len(m.locks)), count(kindSems, len(m.sems)), count(kindElections, len(m.elections))
	c.Barriers, c.DoubleBarriers, c.Queues = len(m.barriers), count(kindDBarriers, len(m.dbarriers)), count(kindQueues, len(m.queues))
	c.Groups = count(kindGroups, len(m.groups))
	c.Leases, c.LocalLeases, c.Gateways = len(m.leases), localLeases, len(m.gateways)
	c.Counters = count(kindCounters, len(m.counters))
	c.WatchedPaths, c.DashboardClients = in.watched, in.clients
	m.header.ZK = in.zk
}

// addQueue adds what the holders and the waiters of one lock or semaphore
// hold and wait for to holds, and their numbers to nHolders and nWaiters.
func addQueue(holds map[string][]recipes.HoldInfo, kind, name string, holders, waiters []recipes.Contender, nHolders, nWaiters *int) {
	*nHolders += len(holders)
	*nWaiters += len(waiters)
	addHolds(holds, kind, name, holders, "held")
	addHolds(holds, kind, name, waiters, "waiting")
}

func addHolds(holds map[string][]recipes.HoldInfo, kind, name string, hs []recipes.Contender, state string) {
	for _, h := range hs {
		if h.Lease == "" {
			continue
		}
		holds[h.Lease] = append(holds[h.Lease], recipes.HoldInfo{Kind: kind, Name: name, Mode: h.Mode, Token: h.Token,
			State: state, Node: h.Node, Since: h.Since})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// overview picks what the overview shows: the busiest locks and
// semaphores, and the leases that hold the most.
func (m *dashModel) overview() views.Overview {
	o := views.Overview{ZK: m.header.ZK, Servers: m.servers, Gateways: m.gateways, Counts: m.header.Counts, Rates: m.rates}
	o.BusyLocks = slices.Clone(m.locks)
	slices.SortStableFunc(o.BusyLocks, func(a, b views.Lock) int {
		return cmp.Or(-cmp.Compare(len(a.Waiters), len(b.Waiters)), -cmp.Compare(len(a.Holders), len(b.Holders)))
	})
	o.BusyLocks = o.BusyLocks[:min(len(o.BusyLocks), 6)]
	o.Semaphores = slices.Clone(m.sems)
	slices.SortStableFunc(o.Semaphores, func(a, b views.Semaphore) int {
		return -cmp.Compare(len(a.Holders)+len(a.Waiters), len(b.Holders)+len(b.Waiters))
	})
	o.Semaphores = o.Semaphores[:min(len(o.Semaphores), 4)]
	o.Leases = slices.Clone(m.leases)
	slices.SortStableFunc(o.Leases, func(a, b views.Lease) int { return -cmp.Compare(len(a.Holds), len(b.Holds)) })
	o.Leases = o.Leases[:min(len(o.Leases), 8)]
	return o
}

// grantsFP fingerprints the grant times this gateway knows: when they
// change, holders show another time.
func (m *dashModel) grantsFP() string {
	var b strings.Builder
	for _, l := range m.locks {
		b.WriteString(grantsFP(l.GrantedAt))
	}
	for _, s := range m.sems {
		b.WriteString(grantsFP(s.GrantedAt))
	}
	for _, e := range m.elections {
		b.WriteString(grantsFP(e.GrantedAt))
	}
	return b.String()
}
