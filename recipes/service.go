package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkgate/zkgate/auth/nodeproof"
	"github.com/zkgate/zkgate/internal/peer"
	"github.com/zkgate/zkgate/internal/zk"
)

// Config configures the recipes.
type Config struct {
	GatewayID string
	Leases    LeaseConfig
	Queues    QueueConfig
	Metrics   Metrics
	Logger    *slog.Logger
	// PeerSecret is the gateways' shared secret (--peer-secret-file; nil:
	// none): it signs this gateway's registration and lease records, and
	// the others' that do not check out with it are ignored.
	PeerSecret *peer.Secret
	// JournalDir is where each session's leases are recorded ahead, for
	// the next start to resume them after a kill (see journal.go and
	// ReadJournal); "": they are not.
	JournalDir string
}

// Service bundles the recipes on one session.
type Service struct {
	*lines        // the session and what its recipes' waits share
	cfg    Config // as made: a session adopted later gets the same (see Adopt)
	cache  *watchCache
	owners nodeOwners // who owns the nodes deadlock checks met

	stopSweep context.CancelFunc

	// parent is the gateway's own service, for a service of a session it
	// adopted (see handover.go); adopted are those sessions' services.
	parent  *Service
	adoptMu sync.Mutex
	adopted []*Service

	registered atomic.Pointer[GatewayInfo] // what Register published

	Leases         *Leases
	Locks          *Locks
	Semaphores     *Semaphores
	Elections      *Elections
	Barriers       *Barriers
	DoubleBarriers *DoubleBarriers
	Queues         *Queues
	Groups         *Groups
	Counters       *Counters
}

// New makes the recipes of a session.
func New(sess *Session, cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	cfg.Leases.GatewayID = cfg.GatewayID
	cfg.Leases.PeerSecret = cfg.PeerSecret
	s := &Service{lines: newLines(sess, cfg.GatewayID, cfg.Logger, cfg.Metrics, NewContention(cfg.Metrics)), cfg: cfg,
		cache: newWatchCache(sess, cfg.Logger)}
	s.Leases = NewLeases(sess, cfg.Leases, cfg.Logger)
	s.lines.leases = s.Leases
	s.Leases.svc = s
	s.Leases.all = s.leaseTables
	s.Leases.journal = newJournal(cfg.JournalDir, cfg.Logger)
	// Each recipe gets what it uses of the session, and finds the recipe of
	// a lease of another session (one the gateway adopted) through of.
	ln, cache, keep := s.lines, s.cache, s.keepers()
	s.Locks = &Locks{lines: ln, cache: cache, keep: keep, of: func(l *Lease) *Locks { return l.service().Locks }}
	s.Semaphores = &Semaphores{lines: ln, cache: cache, keep: keep, of: func(l *Lease) *Semaphores { return l.service().Semaphores }}
	s.Elections = &Elections{lines: ln, cache: cache, keep: keep, of: func(l *Lease) *Elections { return l.service().Elections }}
	s.Barriers = &Barriers{sess: sess, cache: cache}
	s.DoubleBarriers = &DoubleBarriers{lines: ln, cache: cache, keep: keep,
		of: func(l *Lease) *DoubleBarriers { return l.service().DoubleBarriers }}
	s.Queues = &Queues{lines: ln, cache: cache, keep: keep, of: func(l *Lease) *Queues { return l.service().Queues },
		ledger: newQueueLedger(cfg.Queues)}
	s.Queues.mover = newDelayMover(s.Queues)
	s.Queues.mover.begin()
	s.Groups = &Groups{lines: ln, cache: cache, keep: keep, of: func(l *Lease) *Groups { return l.service().Groups }}
	s.Counters = &Counters{sess: sess, cache: cache}
	sweep, stop := context.WithCancel(context.Background())
	s.stopSweep = stop
	go s.sweepDelays(sweep)
	return s
}

// service is the service whose session keeps the lease: the gateway's own,
// or that of a session it adopted (see handover.go). Its recipes act for it.
func (l *Lease) service() *Service { return l.table.svc }

// keepers tells the recipes who keeps a lease: this gateway for the
// sessions of its own service and of those it adopted, else the lease's
// record (see keepers.set).
func (s *Service) keepers() *keepers {
	return &keepers{gatewayID: s.gatewayID,
		sessions: func() []int64 {
			var ids []int64
			for _, svc := range s.top().Services() {
				_, _, id := svc.sess.Status()
				ids = append(ids, id)
			}
			return ids
		},
		recorded: func(lease string) string { return s.top().Leases.recordedKeeper(lease) }}
}

// top is the gateway's own service: s, or the one that adopted s's session.
func (s *Service) top() *Service {
	if s.parent != nil {
		return s.parent
	}
	return s
}

// leaseTables is s's lease table, first, and, for the gateway's own
// service, those of the sessions it adopted (see Leases.tables).
func (s *Service) leaseTables() []*Leases {
	if s.parent != nil {
		return []*Leases{s.Leases}
	}
	s.adoptMu.Lock()
	defer s.adoptMu.Unlock()
	out := make([]*Leases, 0, 1+len(s.adopted))
	out = append(out, s.Leases)
	for _, a := range s.adopted {
		out = append(out, a.Leases)
	}
	return out
}

// Session is the service's ZooKeeper session.
func (s *Service) Session() *Session { return s.sess }

// Contention is what the gateway's leases waited for and held.
func (s *Service) Contention() *Contention { return s.contention }

// WatchedPaths is the number of paths the watch cache keeps a watch on.
func (s *Service) WatchedPaths() int64 { return s.cache.Watching() }

// ZKWatches is the number of ZooKeeper watches the session keeps (set again
// after every reconnect): those of the watch cache's paths, and of the nodes
// waits are waiting on, or waited on within the linger.
func (s *Service) ZKWatches() int { return s.sess.Conn().WatchCount() }

// Close ends every lease, releasing what it holds, and stops the watches.
func (s *Service) Close() {
	s.stopSweep()
	s.Queues.mover.close()
	s.Leases.Close()
	s.cache.Close()
	s.watches.close()
}

// GatewayInfo is what a gateway publishes of itself under {root}/gateways.
type GatewayInfo struct {
	ID        string    `json:"id"`
	Advertise string    `json:"advertise"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	// DrainingUntil is set while the gateway drains before it stops;
	// Handover with it when it hands its leases over rather than ending
	// them.
	DrainingUntil *time.Time `json:"draining_until,omitempty"`
	Handover      bool       `json:"handover,omitempty"`
	// Unverified marks a registration that does not check out with the
	// gateways' shared secret: no gateway wrote it, or one with another
	// secret. Nothing is sent to its address.
	Unverified bool `json:"-"`
}

// registration is the data of a gateway's registration (the id is its
// name), with the proof of its id and address.
type registration struct {
	Advertise     string     `json:"advertise"`
	Version       string     `json:"version"`
	StartedAt     time.Time  `json:"started_at"`
	DrainingUntil *time.Time `json:"draining_until,omitempty"`
	Handover      bool       `json:"handover,omitempty"`
	Proof         string     `json:"proof,omitempty"`
}

// registration is what this gateway writes of g under {root}/gateways,
// as a node of session owner (signed for that node, see auth/nodeproof).
func (s *Service) registration(g GatewayInfo, owner int64) []byte {
	b, _ := json.Marshal(registration{Advertise: g.Advertise, Version: g.Version, StartedAt: g.StartedAt,
		DrainingUntil: g.DrainingUntil, Handover: g.Handover, Proof: s.Leases.proofs.Registration(g.ID, g.Advertise)})
	return s.Leases.proofs.Node(nodeproof.RegistrationProof, g.ID, owner, b)
}

// readRegistration reads the registration of gateway id from its node
// (stat and data), marked Unverified when it does not check out (and
// logged, see auth/nodeproof).
func (s *Service) readRegistration(path, id string, stat *zk.Stat, data []byte) GatewayInfo {
	var r registration
	_ = json.Unmarshal(data, &r) // a registration that is not JSON is an id alone, and does not check out
	g := GatewayInfo{ID: id, Advertise: r.Advertise, Version: r.Version, StartedAt: r.StartedAt, DrainingUntil: r.DrainingUntil,
		Handover: r.Handover}
	g.Unverified = !s.Leases.proofs.RegistrationOK(path, id, stat, data, r.Advertise, r.Proof)
	return g
}

// Gateways lists the gateways registered now, this one included. With the
// gateways' shared secret, a registration that does not check out is left
// out (and logged): no gateway made it.
func (s *Service) Gateways(ctx context.Context) ([]GatewayInfo, error) {
	dir := s.sess.Root() + "/gateways"
	names, err := s.sess.children(ctx, dir)
	if err != nil {
		return nil, err
	}
	out := make([]GatewayInfo, len(names))
	gone := make([]bool, len(names))
	err = readEach(ctx, len(names), func(i int) error {
		p := dir + "/" + names[i]
		raw, stat, err := s.sess.Conn().Get(p)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			gone[i] = true
		case err != nil:
			out[i].ID = names[i] // out of reach: an id alone, which does not answer
		default:
			out[i] = s.readRegistration(p, names[i], stat, raw)
			gone[i] = out[i].Unverified
		}
		return nil
	})
	kept := out[:0]
	for i, g := range out {
		if !gone[i] {
			kept = append(kept, g)
		}
	}
	out = kept
	slices.SortFunc(out, func(a, b GatewayInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, err
}

// Draining tells the other gateways (and their dashboards), through this
// gateway's registration, that it drains until until, and makes sure that
// no lease is promised past it: its leases end then.
func (s *Service) Draining(until time.Time) {
	s.Leases.Draining(until)
	s.MarkDraining(until, false)
}

// MarkDraining tells the other gateways (and their dashboards), through this
// gateway's registration, that it drains until until (handing its leases
// over, with handover): they hand nothing over to it.
func (s *Service) MarkDraining(until time.Time, handover bool) {
	info := s.registered.Load()
	if info == nil {
		return
	}
	draining := *info
	until = until.UTC()
	draining.DrainingUntil = &until
	draining.Handover = handover
	// Made anew in one transaction rather than set: the dashboards' cache
	// follows the list of registrations, not each one's data.
	p := s.sess.Root() + "/gateways/" + s.gatewayID
	_, _, owner := s.sess.Status()
	if _, err := s.sess.Conn().Multi(&zk.DeleteRequest{Path: p, Version: -1},
		&zk.CreateRequest{Path: p, Data: s.registration(draining, owner), Acl: s.sess.acl(), Flags: zk.FlagEphemeral}); err != nil {
		s.log.Warn("mark the registration draining", "err", err)
	}
}

// GatewayID is this gateway's id.
func (s *Service) GatewayID() string { return s.gatewayID }

// Register publishes the gateway as an EPHEMERAL node, again on every new
// session, so that other gateways and the dashboard know it.
func (s *Service) Register(info GatewayInfo) {
	info.ID = s.gatewayID
	s.Leases.Serving(info.Advertise)
	p := s.sess.Root() + "/gateways/" + s.gatewayID
	s.registered.Store(&info)
	publish := func(epoch uint64) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Signed for the session of epoch: if another one is there by now,
		// createOwned refuses it, and that session's own publish runs.
		_, _, owner := s.sess.Status()
		data := s.registration(info, owner)
		// A node of our previous session may linger until the ensemble
		// expires it: the id is ours, so take it over.
		if _, stat, err := s.sess.Conn().Exists(p); err == nil && stat != nil && stat.EphemeralOwner != 0 && stat.EphemeralOwner != s.Leases.sessionID() {
			_ = s.sess.Conn().Delete(p, -1)
		}
		if _, err := s.sess.createOwned(ctx, p, epoch, ownedNode{data: data, flags: zk.FlagEphemeral}); err != nil && ErrorCode(err) != CodeLeaseExpired {
			s.log.Error("register gateway", "path", p, "err", err)
		}
	}
	var mu sync.Mutex
	var done uint64
	s.sess.OnChange(func(c StateChange) {
		mu.Lock()
		defer mu.Unlock()
		if c.State == StateLive && c.Epoch != done {
			done = c.Epoch
			go publish(c.Epoch)
		}
	})
	_, epoch, _ := s.sess.Status()
	mu.Lock()
	if done != epoch {
		done = epoch
		mu.Unlock()
		publish(epoch)
		return
	}
	mu.Unlock()
}
