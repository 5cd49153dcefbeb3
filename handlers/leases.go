package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/zkgate/zkgate/auth/peers"
	"github.com/zkgate/zkgate/recipes"
)

// LeaseStore is what the handlers need of the lease table.
type LeaseStore interface {
	// Grant makes the lease spec asks for (its Owner is the name of the
	// caller's token, "" when tokens are off).
	Grant(ctx context.Context, spec recipes.LeaseSpec) (*recipes.Lease, error)
	Get(id string) (*recipes.Lease, error)
	// Lookup returns a live lease as it is, to learn its owner.
	Lookup(id string) (*recipes.Lease, bool)
	KeepAlive(id string) (*recipes.Lease, error)
	Revoke(id string) error
	// Terminate is a revoke by an admin, not by the lease's own client: the
	// lease's lock-delay applies to what it held.
	Terminate(id string) error
	List() []*recipes.Lease
	// Locate says what the other gateways know of a lease this one does
	// not: the gateway that keeps it, or the lease_expired error of one
	// that has ended; no keeper and nil when nobody knows it.
	Locate(id string) (recipes.Keeper, error)
}

// GatewayDirectory lists the gateways that serve the same ZooKeeper root.
type GatewayDirectory interface {
	Gateways(ctx context.Context) ([]recipes.GatewayInfo, error)
	GatewayID() string
}

// API holds what every handler needs.
type API struct {
	Leases         LeaseStore
	Gateways       GatewayDirectory
	Locks          LockService
	Semaphores     SemaphoreService
	Elections      ElectionService
	Barriers       BarrierService
	DoubleBarriers DoubleBarrierService
	Queues         QueueService
	Groups         GroupService
	Counters       CounterService
	Limits         Limits
	// Audit receives the records of admin actions on other tokens' leases.
	Audit *slog.Logger
	// Peers is how requests for leases of other gateways, and the list of
	// every gateway's leases, reach them (nil: they do not).
	Peers *peers.Credential
	// Draining says that the gateway is on its way out (nil: never): nothing
	// new starts here, neither a lease nor a hold of one of its leases,
	// while a hold of another gateway's lease is passed on to it.
	Draining func() bool
	// Adopt keeps the leases of a session another gateway hands over (see
	// recipes.Handover); nil: this gateway takes none.
	Adopt func(ctx context.Context, h *recipes.Handover) error
	// ContentionFigures are this gateway's figures of waits and holds, and
	// Holds what its leases hold and wait for, as deadlock checks see it.
	ContentionFigures ContentionSource
	Holds             HoldsSource

	// fanouts share the other gateways' answers among identical reads (see
	// askPeers).
	fanouts fanouts
}

// New is the API of the recipes of svc: each kind's field is its recipe.
// The caller sets the rest (limits, the audit trail, the peers), and may
// wrap what it wants to meter (as the server does the lease store).
func New(svc *recipes.Service) *API {
	return &API{Leases: svc.Leases, Gateways: svc, Locks: svc.Locks, Semaphores: svc.Semaphores, Elections: svc.Elections,
		Barriers: svc.Barriers, DoubleBarriers: svc.DoubleBarriers, Queues: svc.Queues, Groups: svc.Groups,
		Counters: svc.Counters, ContentionFigures: svc.Contention(), Holds: svc}
}

// ErrDraining answers whatever would start something new on a draining
// gateway: 503, with Retry-After.
var ErrDraining = &recipes.Error{Code: recipes.CodeUnavailable,
	Detail: "this gateway is shutting down: take a new lease through another gateway"}

func (a *API) draining() bool { return a.Draining != nil && a.Draining() }

type leaseBody struct {
	TTL       *recipes.Duration `json:"ttl"`
	Holder    string            `json:"holder"`
	LockDelay *recipes.Duration `json:"lock_delay"`
}

// spec is the lease the body asks for, for owner.
func (b leaseBody) spec(owner string) recipes.LeaseSpec {
	s := recipes.LeaseSpec{Holder: b.Holder, Owner: owner}
	if b.TTL != nil {
		s.TTL = time.Duration(*b.TTL)
	}
	if b.LockDelay != nil {
		d := time.Duration(*b.LockDelay)
		s.LockDelay = &d
	}
	return s
}

// validLeaseID checks the form of a lease id (a UUID) before any lookup.
func validLeaseID(id string) error {
	if len(id) != 36 {
		return invalid("a lease id is a UUID such as 0b5c6f7e-1a2b-4c3d-8e9f-001122334455")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return invalid("a lease id is a UUID such as 0b5c6f7e-1a2b-4c3d-8e9f-001122334455")
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return invalid("a lease id is a lower-case UUID such as 0b5c6f7e-1a2b-4c3d-8e9f-001122334455")
			}
		}
	}
	return nil
}

// leaseParam is the lease of the route's {id}, or the gateway that keeps it
// (see lookup).
func (a *API) leaseParam(r *http.Request) (*recipes.Lease, *elsewhere, error) {
	id := chi.URLParam(r, "id")
	if err := validLeaseID(id); err != nil {
		return nil, nil, err
	}
	return a.lookup(id)
}

// lookup finds a lease, or, when another gateway keeps it, that gateway
// (away, with a nil error): the route's handler then passes the request on
// to it (see forward) rather than serve it here.
func (a *API) lookup(id string) (l *recipes.Lease, away *elsewhere, err error) {
	l, err = a.Leases.Get(id)
	if recipes.ErrorCode(err) == recipes.CodeLeaseNotFound {
		keeper, ended := a.Leases.Locate(id)
		switch {
		case ended != nil:
			return nil, nil, ended
		case keeper.Advertise != "":
			return nil, &elsewhere{lease: id, keeper: keeper, via: a.Peers, moved: a.draining()}, nil
		}
	}
	return l, nil, err
}

// leaseByID reads the {id} of a route that acts on a lease by its id (a
// keepalive, a revoke), and returns the lease when this gateway keeps it
// (nil when it does not), once the caller may use it.
func (a *API) leaseByID(r *http.Request) (string, *recipes.Lease, error) {
	id := chi.URLParam(r, "id")
	if err := validLeaseID(id); err != nil {
		return "", nil, err
	}
	l, ok := a.Leases.Lookup(id)
	if !ok {
		return id, nil, nil
	}
	return id, l, a.mayUse(r.Context(), l)
}

// keptElsewhere is err, an action's on lease id, or when this gateway
// does not know the lease, what the other gateways know of it: the
// gateway that keeps it, or why it is gone (see lookup).
func (a *API) keptElsewhere(id string, err error) (*elsewhere, error) {
	if recipes.ErrorCode(err) == recipes.CodeLeaseNotFound {
		_, away, err := a.lookup(id)
		return away, err
	}
	return nil, err
}

// CreateLease is POST /v1/leases.
func (a *API) CreateLease() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		var body leaseBody
		if err := decodeJSON(r, &body); err != nil {
			return err
		}
		l, err := a.Leases.Grant(r.Context(), body.spec(ownerOf(r.Context())))
		if err != nil {
			return err
		}
		w.Header().Set("Location", "/v1/leases/"+l.ID)
		writeLease(w, http.StatusCreated, l)
		return nil
	})
}

// leaseDoc is a lease as the API answers it (openapi.yaml's Lease), in a
// lease's answers and in the lease list, which a gateway also reads from
// the others (see peerLeases).
type leaseDoc struct {
	ID        string             `json:"id"`
	Gateway   string             `json:"gateway"` // the id of the gateway that keeps it
	TTL       recipes.Duration   `json:"ttl"`
	Holder    string             `json:"holder"`
	Owner     string             `json:"owner,omitempty"` // the name of the token that made it, when tokens are on
	LockDelay recipes.Duration   `json:"lock_delay"`
	ExpiresAt time.Time          `json:"expires_at"`
	RenewedAt time.Time          `json:"renewed_at"`
	CreatedAt time.Time          `json:"created_at"`
	Holds     []recipes.HoldInfo `json:"holds"`
}

// leaseDocOf is the API's answer of the lease as info says it is now.
func leaseDocOf(info recipes.LeaseInfo) leaseDoc {
	return leaseDoc{ID: info.ID, Gateway: info.Gateway, TTL: info.TTL, Holder: info.Holder, Owner: info.Owner, LockDelay: info.LockDelay,
		ExpiresAt: info.ExpiresAt, RenewedAt: info.RenewedAt, CreatedAt: info.CreatedAt, Holds: info.Holds}
}

// writeLease answers with lease l as it is, stamped with this gateway's
// clock (see TimeHeader).
func writeLease(w http.ResponseWriter, status int, l *recipes.Lease) {
	doc := leaseDocOf(l.Info())
	stampTime(w.Header())
	writeJSON(w, status, doc)
}

// KeepAlive is POST /v1/leases/{id}/keepalive.
func (a *API) KeepAlive() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		id, _, err := a.leaseByID(r)
		if err != nil {
			return err
		}
		l, err := a.Leases.KeepAlive(id)
		away, err := a.keptElsewhere(id, err)
		if err != nil {
			return err
		}
		if away != nil {
			return a.forward(w, r, away)
		}
		writeLease(w, http.StatusOK, l)
		return nil
	})
}

// GetLease is GET /v1/leases/{id}: the lease and what it holds.
func (a *API) GetLease() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		l, away, err := a.leaseParam(r)
		if err != nil {
			return err
		}
		if away != nil {
			return a.forward(w, r, away)
		}
		if err := a.mayRead(r.Context(), l); err != nil {
			return err
		}
		writeLease(w, http.StatusOK, l)
		return nil
	})
}

// ListLeases is GET /v1/leases: the live leases of every gateway, each
// asked for its own (the lease table lives in each gateway's memory), a
// page at a time in the order they were made; ?scope=gateway lists this
// gateway's only. A gateway that does not answer in time is named under
// "unreachable".
func (a *API) ListLeases() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		scope := r.URL.Query().Get("scope")
		if scope != "" && scope != "gateway" && scope != "all" {
			return invalid("scope must be gateway or all")
		}
		p, err := pageOf(r, "leases")
		if err != nil {
			return err
		}
		out := []leaseDoc{}
		c := CallerOf(r.Context())
		for _, l := range a.Leases.List() {
			// A token sees its own leases, and the others' if it may read them.
			if c == nil || l.Owner == c.Name || c.May("leases", l.ID, LevelRead) {
				out = append(out, leaseDocOf(l.Info()))
			}
		}
		stampTime(w.Header())
		if scope == "gateway" || peers.CallOf(r.Context()) != nil || a.Gateways == nil {
			page, next := leasePage(out, p, false)
			writeJSON(w, http.StatusOK, pageDoc("leases", page, next))
			return nil
		}
		others, more, unreachable := a.peerLeases(r, w.Header().Get("X-Request-Id"))
		page, next := leasePage(append(out, others...), p, more)
		doc := pageDoc("leases", page, next)
		if len(unreachable) > 0 {
			doc["unreachable"] = unreachableFor(CallerOf(r.Context()), unreachable)
		}
		writeJSON(w, http.StatusOK, doc)
		return nil
	})
}

// leasePage is the page p of leases, in the order of leaseKey, and the key
// of its last lease when more follow: leases beyond it, or more that a
// gateway asked for its first p.Limit leases had (more).
func leasePage(leases []leaseDoc, p recipes.Page, more bool) ([]leaseDoc, string) {
	slices.SortFunc(leases, func(x, y leaseDoc) int { return cmp.Compare(leaseKey(x), leaseKey(y)) })
	i, _ := slices.BinarySearchFunc(leases, p.After, func(l leaseDoc, after string) int {
		if leaseKey(l) <= after {
			return -1
		}
		return 1
	})
	page := leases[i:]
	if len(page) > p.Limit || more && len(page) == p.Limit {
		page = page[:p.Limit]
		return page, leaseKey(page[len(page)-1])
	}
	return page, ""
}

// peerLeases asks every other registered gateway for the page of its own
// leases that r asks for, as the caller (see peers.Credential); more says that one of
// them has more after that page.
func (a *API) peerLeases(r *http.Request, requestID string) ([]leaseDoc, bool, []recipes.UnreachableGateway) {
	caller := ""
	if c := CallerOf(r.Context()); c != nil {
		caller = c.Name
	}
	query := url.Values{"scope": {"gateway"}}
	for _, k := range []string{"limit", "after"} {
		if v := r.URL.Query().Get(k); v != "" {
			query.Set(k, v)
		}
	}
	var (
		mu     sync.Mutex
		leases []leaseDoc
		more   bool
	)
	q := peerQuery{method: http.MethodGet, uri: "/v1/leases?" + query.Encode(), requestID: requestID, caller: caller}
	unreachable := a.askPeers(r.Context(), q, func(body []byte) error {
		var doc struct {
			Leases []leaseDoc `json:"leases"`
			Next   string     `json:"next"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return fmt.Errorf("an answer that is not a lease list: %w", err)
		}
		mu.Lock()
		defer mu.Unlock()
		leases = append(leases, doc.Leases...)
		more = more || doc.Next != ""
		return nil
	})
	return leases, more, unreachable
}

// RevokeLease is DELETE /v1/leases/{id}: all it held is released first.
func (a *API) RevokeLease() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		id, l, err := a.leaseByID(r)
		if err != nil {
			return err
		}
		revoke := a.Leases.Revoke
		if c := CallerOf(r.Context()); l != nil && c != nil && l.Owner != c.Name {
			revoke = a.Leases.Terminate // an admin's: not a release by its client
		}
		away, err := a.keptElsewhere(id, revoke(id))
		if err != nil {
			return err
		}
		if away != nil {
			return a.forward(w, r, away)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

// leaseRef is the lease part of a body that acts for a lease: either an
// existing lease, or the ttl, holder and lock-delay of one to create for
// the caller.
type leaseRef struct {
	Lease     string            `json:"lease"`
	TTL       *recipes.Duration `json:"ttl"`
	Holder    string            `json:"holder"`
	LockDelay *recipes.Duration `json:"lock_delay"`
}

// resolve returns the lease a request acts for, or the gateway that keeps
// the lease it names (away: see lookup). implicit is true when the lease
// was created for this request, in which case the caller revokes it if
// the request fails.
func (a *API) resolve(ctx context.Context, ref leaseRef, mayCreate bool) (l *recipes.Lease, away *elsewhere, implicit bool, err error) {
	if ref.Lease != "" {
		if ref.TTL != nil || ref.Holder != "" || ref.LockDelay != nil {
			return nil, nil, false, invalid("give either lease, or ttl, holder and lock_delay for a new lease, not both")
		}
		if err := validLeaseID(ref.Lease); err != nil {
			return nil, nil, false, err
		}
		l, away, err := a.lookup(ref.Lease)
		if err != nil || away != nil {
			return nil, away, false, err
		}
		if err := a.mayUse(ctx, l); err != nil {
			return l, nil, false, err
		}
		if mayCreate && a.draining() {
			return l, nil, false, ErrDraining // a new hold of a lease of this gateway
		}
		return l, nil, false, nil
	}
	if !mayCreate {
		return nil, nil, false, invalid("lease is required")
	}
	if a.draining() {
		return nil, nil, false, ErrDraining
	}
	l, err = a.Leases.Grant(ctx, leaseBody{TTL: ref.TTL, Holder: ref.Holder, LockDelay: ref.LockDelay}.spec(ownerOf(ctx)))
	return l, nil, err == nil, err
}

// heldRef is the lease part of a body that acts for what a lease holds
// already (a release, a leave, a proclaim): its id, never one to make.
type heldRef struct {
	Lease string `json:"lease"`
}

func (h *heldRef) leaseID() string { return h.Lease }

// check passes a body that is its lease alone; a body with more in it
// checks that with a check of its own.
func (*heldRef) check() error { return nil }

// heldBody is a body with a heldRef in it: check refuses a bad body before
// its lease is looked up.
type heldBody interface {
	leaseID() string
	check() error
}

// parseHeld parses a request that acts for what a lease holds already (see
// parse), checks its body and finds the lease the body names, or the
// gateway that keeps it (away: see lookup).
func (a *API) parseHeld(r *http.Request, wait *time.Duration, body heldBody) (string, *recipes.Lease, *elsewhere, error) {
	return a.parseHeldOf(r, nameParam, wait, body)
}

// parseHeldOf is parseHeld with the name read by nameOf.
func (a *API) parseHeldOf(r *http.Request, nameOf func(*http.Request) (string, error), wait *time.Duration,
	body heldBody) (string, *recipes.Lease, *elsewhere, error) {
	name, err := a.parseOf(r, nameOf, wait, body)
	if err != nil {
		return "", nil, nil, err
	}
	if err := body.check(); err != nil {
		return "", nil, nil, err
	}
	lease, away, err := a.existingLease(r.Context(), body.leaseID())
	return name, lease, away, err
}

// existingLease is the lease of id that a request acts for (a release, a
// leave, an ack), or the gateway that keeps it (away): never one made for
// it.
func (a *API) existingLease(ctx context.Context, id string) (*recipes.Lease, *elsewhere, error) {
	l, away, _, err := a.resolve(ctx, leaseRef{Lease: id}, false)
	return l, away, err
}

// actsForLease is the body of a request that acts for a lease, with its
// lease part (leaseRef) embedded: ref is that part, and check refuses a bad
// body before any lease is made for it.
type actsForLease[B any] interface {
	*B
	ref() leaseRef
	check() error
}

func (l leaseRef) ref() leaseRef { return l }

// check passes a body that is its lease part alone; a body with more in it
// checks that with a check of its own.
func (leaseRef) check() error { return nil }

// leaseCall serves POST .../{name}/verb?wait= with a body B that acts for
// a lease: the lease it names, or one made for the request when it names
// none (and gives ttl and holder instead). A lease that another gateway
// keeps is that gateway's to serve: the request is forwarded to it. act does the verb and reply
// answers with what it gave, the lease and act's error. A lease made for
// this request is revoked again when act fails, unless keep says the
// failure leaves it holding something the client will come back for; then
// the problem tells the client its id.
func leaseCall[B any, P actsForLease[B], T any](a *API,
	act func(ctx context.Context, lease *recipes.Lease, name string, body *B, wait time.Duration) (T, error),
	keep func(error) bool, reply func(w http.ResponseWriter, got T, lease *recipes.Lease, err error) error) http.Handler {
	return leaseCallOf[B, P](a, nameParam, act, keep, reply)
}

// leaseCallOf is leaseCall with the name read by nameOf (noName: a route
// whose body names what it acts on).
func leaseCallOf[B any, P actsForLease[B], T any](a *API, nameOf func(*http.Request) (string, error),
	act func(ctx context.Context, lease *recipes.Lease, name string, body *B, wait time.Duration) (T, error),
	keep func(error) bool, reply func(w http.ResponseWriter, got T, lease *recipes.Lease, err error) error) http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		var wait time.Duration
		var body B
		name, err := a.parseOf(r, nameOf, &wait, &body)
		if err != nil {
			return err
		}
		if err := P(&body).check(); err != nil {
			return err
		}
		ctx := r.Context()
		lease, away, implicit, err := a.resolve(ctx, P(&body).ref(), true)
		if err != nil {
			return err
		}
		if away != nil {
			return a.forward(w, r, away)
		}
		got, err := act(ctx, lease, name, &body, wait)
		err = sessionsOutOf(ctx, name, err)
		if err != nil && implicit {
			if keep != nil && keep(err) {
				err = withLease(err, lease)
			} else {
				_ = a.Leases.Revoke(lease.ID)
			}
		}
		return reply(w, got, lease, err)
	})
}

// replyJSON answers 200 with what a leaseCall's act gave.
func replyJSON[T any](w http.ResponseWriter, got T, _ *recipes.Lease, err error) error {
	return writeOK(w, got, err)
}
