package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/kinds"
	"github.com/zkgate/zkgate/recipes"
)

// Contention: each gateway keeps the figures of its own leases' waits and
// holds (recipes.Contention); an answer merges those of every gateway,
// each asked for its own (GET /peer/v1/contention...), as the lease list
// does. Deadlock checks ask every gateway for the holds of the leases they
// meet (POST /peer/v1/waits, see recipes.WaitPeers).

// ContentionSource is what the handlers need of this gateway's contention
// figures (recipes.Contention).
type ContentionSource interface {
	Figures(window time.Duration, keep func(kind, name string) bool) []recipes.NameFigures
	Name(kind, name string, window time.Duration) recipes.NameLog
	Deadlocks(window time.Duration) []recipes.DeadlockRecord
}

// HoldsSource tells a deadlock check what this gateway's leases hold and
// wait for (recipes.Service).
type HoldsSource interface {
	PartyHolds(leases []string) []recipes.PartyHolds
}

// The routes between gateways of the contention figures and the deadlock
// checks.
const (
	PeerContentionPath = "/peer/v1/contention"
	PeerWaitsPath      = "/peer/v1/waits"
)

// maxContentionLimit bounds ?limit= of the contention list.
const maxContentionLimit = 1000

// maxWaitsAsked bounds the leases one deadlock check asks a gateway about.
const maxWaitsAsked = 1000

func parseWindow(r *http.Request) (string, time.Duration, error) {
	w := cmp.Or(r.URL.Query().Get("window"), recipes.DefaultContentionWindow)
	d, ok := recipes.ContentionWindows[w]
	if !ok {
		return "", 0, invalid("window must be 1m, 15m or 1h")
	}
	return w, d, nil
}

// permKind is the kind of permission that covers a kind of figures.
func permKind(kind string) string {
	if kind == recipes.KindSemaphore {
		return kinds.Semaphores.Permission()
	}
	return kinds.Locks.Permission()
}

// mayRead says whether the caller (nil: tokens are off) may read the
// figures of kind and name.
func mayRead(c *Caller, kind, name string) bool {
	return c == nil || c.May(permKind(kind), name, LevelRead)
}

// peerContention is a gateway's answer to GET PeerContentionPath.
type peerContention struct {
	Names     []recipes.NameFigures    `json:"names"`
	Deadlocks []recipes.DeadlockRecord `json:"deadlocks"`
}

// Contention is the contention report over window (one of recipes.ContentionWindows) of
// the limit names with the most time waited, of every gateway, as caller
// (nil: tokens are off) may read it.
func (a *API) Contention(ctx context.Context, window string, limit int, caller *Caller, requestID string) recipes.ContentionReport {
	d := recipes.ContentionWindows[window]
	keep := func(kind, name string) bool { return mayRead(caller, kind, name) }
	byName := map[[2]string]*recipes.NameFigures{}
	add := func(f recipes.NameFigures) {
		k := [2]string{f.Kind, f.Name}
		if cur, ok := byName[k]; ok {
			cur.Merge(f)
			return
		}
		byName[k] = &f
	}
	for _, f := range a.ContentionFigures.Figures(d, keep) {
		add(f)
	}
	deadlocks := a.ContentionFigures.Deadlocks(d)
	var mu sync.Mutex
	q := peerQuery{method: http.MethodGet, uri: PeerContentionPath + "?window=" + window, requestID: requestID, share: true}
	ask := a.askPeers
	if caller != nil && !caller.MaySome(permKind(recipes.KindLock), LevelRead) && !caller.MaySome(permKind(recipes.KindSemaphore), LevelRead) {
		// It may read none of the answer: the others are not asked.
		ask = func(context.Context, peerQuery, func([]byte) error) []recipes.UnreachableGateway { return nil }
	}
	unreachable := ask(ctx, q, func(body []byte) error {
		var doc peerContention
		if err := json.Unmarshal(body, &doc); err != nil {
			return fmt.Errorf("an answer that is not contention figures: %w", err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, f := range doc.Names {
			if f.Sane(recipes.WindowMinutes(d)) && keep(f.Kind, f.Name) {
				add(f)
			}
		}
		deadlocks = append(deadlocks, doc.Deadlocks...)
		return nil
	})
	rep := recipes.ContentionReport{Window: window, Since: recipes.WindowSince(time.Now(), d), Names: []recipes.NameStats{},
		Deadlocks: []recipes.DeadlockRecord{}, Unreachable: unreachableFor(caller, unreachable)}
	for _, f := range byName {
		rep.Names = append(rep.Names, f.Stats())
	}
	slices.SortFunc(rep.Names, func(x, y recipes.NameStats) int {
		return cmp.Or(-cmp.Compare(x.WaitSeconds.Total, y.WaitSeconds.Total), -cmp.Compare(x.Waits, y.Waits),
			cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Name, y.Name))
	})
	rep.Names = rep.Names[:min(len(rep.Names), limit)]
	for _, dl := range deadlocks {
		if !slices.ContainsFunc(dl.Cycle, func(s recipes.CycleStep) bool { return !mayRead(caller, s.Kind, s.Name) }) {
			rep.Deadlocks = append(rep.Deadlocks, dl.Shown(func(kind, name string) bool {
				return caller == nil || caller.May(permKind(kind), name, auth.LevelAdmin)
			}))
		}
	}
	slices.SortFunc(rep.Deadlocks, func(x, y recipes.DeadlockRecord) int {
		return cmp.Or(x.At.Compare(y.At), cmp.Compare(x.Gateway, y.Gateway))
	})
	return rep
}

// ListContention is GET /v1/contention?window=&limit=.
func (a *API) ListContention() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		window, _, err := parseWindow(r)
		if err != nil {
			return err
		}
		limit := 20
		if s := r.URL.Query().Get("limit"); s != "" {
			if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > maxContentionLimit {
				return invalid("limit must be a whole number from 1 to %d", maxContentionLimit)
			}
		}
		writeJSON(w, http.StatusOK, a.Contention(r.Context(), window, limit, CallerOf(r.Context()), w.Header().Get("X-Request-Id")))
		return nil
	})
}

// maxRecent bounds the recent holds and waits of a recipes.NameReport: the latest
// are kept.
const maxRecent = 200

// NameContention is the report of kind and name over window (one of
// recipes.ContentionWindows), of every gateway.
func (a *API) NameContention(ctx context.Context, kind, name, window, requestID string) recipes.NameReport {
	d := recipes.ContentionWindows[window]
	local := a.ContentionFigures.Name(kind, name, d)
	f, holds, waits := local.Figures, local.Holds, local.Waits
	var mu sync.Mutex
	uri := PeerContentionPath + "/" + kind + "/" + name + "?window=" + window
	unreachable := a.askPeers(ctx, peerQuery{method: http.MethodGet, uri: uri, requestID: requestID, share: true}, func(body []byte) error {
		var doc recipes.NameLog
		if err := json.Unmarshal(body, &doc); err != nil {
			return fmt.Errorf("an answer that is not a name's figures: %w", err)
		}
		if doc.Figures.Kind != kind || doc.Figures.Name != name || !doc.Figures.Sane(recipes.WindowMinutes(d)) {
			return errors.New("the figures of another name, or figures no gateway makes")
		}
		mu.Lock()
		defer mu.Unlock()
		f.Merge(doc.Figures)
		holds = append(holds, doc.Holds...)
		waits = append(waits, doc.Waits...)
		return nil
	})
	slices.SortFunc(holds, func(x, y recipes.HoldRecord) int {
		return cmp.Or(x.From.Compare(y.From), cmp.Compare(x.Lease, y.Lease))
	})
	slices.SortFunc(waits, func(x, y recipes.WaitRecord) int {
		return cmp.Or(x.From.Compare(y.From), cmp.Compare(x.Lease, y.Lease))
	})
	return recipes.NameReport{NameStats: f.Stats(), Window: window, Since: recipes.WindowSince(time.Now(), d),
		RecentHolds: holds[max(len(holds)-maxRecent, 0):], RecentWaits: waits[max(len(waits)-maxRecent, 0):],
		Unreachable: unreachableFor(CallerOf(ctx), unreachable)}
}

// LockStats is GET /v1/locks/{name}/stats?window=.
func (a *API) LockStats() http.Handler { return a.nameStats(recipes.KindLock) }

// SemaphoreStats is GET /v1/semaphores/{name}/stats?window=.
func (a *API) SemaphoreStats() http.Handler { return a.nameStats(recipes.KindSemaphore) }

func (a *API) nameStats(kind string) http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		name, err := nameParam(r)
		if err != nil {
			return err
		}
		window, _, err := parseWindow(r)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, a.NameContention(r.Context(), kind, name, window, w.Header().Get("X-Request-Id")))
		return nil
	})
}

// PeerContention is GET PeerContentionPath?window=: this gateway's own
// figures, for another gateway to merge.
func (a *API) PeerContention() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		if err := peersOnly(r, "ask for this gateway's own figures"); err != nil {
			return err
		}
		_, d, err := parseWindow(r)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, peerContention{Names: a.ContentionFigures.Figures(d, nil), Deadlocks: a.ContentionFigures.Deadlocks(d)})
		return nil
	})
}

// PeerNameContention is GET PeerContentionPath/{kind}/{name}?window=: this
// gateway's own log of one name.
func (a *API) PeerNameContention() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		if err := peersOnly(r, "ask for this gateway's own figures"); err != nil {
			return err
		}
		kind := chi.URLParam(r, "kind")
		if kind != recipes.KindLock && kind != recipes.KindSemaphore {
			return invalid("kind must be lock or semaphore")
		}
		name, err := nameParam(r)
		if err != nil {
			return err
		}
		_, d, err := parseWindow(r)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, a.ContentionFigures.Name(kind, name, d))
		return nil
	})
}

// PeerWaits is POST PeerWaitsPath: what this gateway's leases among those
// asked about hold and wait for, for another gateway's deadlock check.
func (a *API) PeerWaits() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		if err := peersOnly(r, "ask what its leases wait for"); err != nil {
			return err
		}
		var body struct {
			Leases []string `json:"leases"`
		}
		if err := decodeJSON(r, &body); err != nil {
			return err
		}
		if len(body.Leases) > maxWaitsAsked {
			return invalid("at most %d leases at once", maxWaitsAsked)
		}
		for _, id := range body.Leases {
			if err := validLeaseID(id); err != nil {
				return err
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"leases": a.Holds.PartyHolds(body.Leases)})
		return nil
	})
}

// WaitPeers are the other gateways as this gateway's deadlock checks ask
// them (through PeerWaitsPath).
func (a *API) WaitPeers() recipes.WaitPeers { return waitPeers{a} }

type waitPeers struct{ a *API }

// Holds implements recipes.WaitPeers.
func (p waitPeers) Holds(ctx context.Context, leases []string) (map[string]recipes.PartyHolds, error) {
	out := map[string]recipes.PartyHolds{}
	if p.a.Peers == nil || p.a.Gateways == nil {
		return out, nil
	}
	body, err := json.Marshal(map[string]any{"leases": leases[:min(len(leases), maxWaitsAsked)]})
	if err != nil {
		return out, err
	}
	var mu sync.Mutex
	unreachable := p.a.askPeers(ctx, peerQuery{method: http.MethodPost, uri: PeerWaitsPath, body: body}, func(answer []byte) error {
		var doc struct {
			Leases []recipes.PartyHolds `json:"leases"`
		}
		if err := json.Unmarshal(answer, &doc); err != nil {
			return fmt.Errorf("an answer that is not a list of holds: %w", err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, l := range doc.Leases {
			out[l.Lease] = l
		}
		return nil
	})
	if len(unreachable) > 0 {
		err = fmt.Errorf("%d gateways did not tell their leases' holds (the first: %s: %s)", len(unreachable), unreachable[0].Gateway, unreachable[0].Error)
	}
	return out, err
}
