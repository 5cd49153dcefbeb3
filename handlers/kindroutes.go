package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/recipes"
)

// The routes every kind of primitive has alike, built from the call of the
// kind's service that differs: the state of one by a blocking read, an
// action of a lease on one by name, and a page of them.

// blockingRead serves GET .../{name}?index=&wait=: read's state of the
// name, with its index (see writeIndexed) as indexOf tells it.
func blockingRead[S any](a *API, read func(ctx context.Context, name string, index int64, wait time.Duration) (S, error),
	indexOf func(S) int64) http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		name, err := nameParam(r)
		if err != nil {
			return err
		}
		index, wait, err := blockingParams(r, a.Limits.MaxWait)
		if err != nil {
			return err
		}
		st, err := read(r.Context(), name, index, wait)
		if err != nil {
			return err
		}
		sessionsFor(r.Context(), name, &st)
		writeIndexed(w, indexOf(st), st)
		return nil
	})
}

// sessionsFor leaves the ZooKeeper session ids out of v, an answer about
// name of the route's kind, unless the caller may act as an admin on it
// (tokens off: no caller, all shown). A session id is all that a client
// that may connect to ZooKeeper needs to take the session over.
func sessionsFor(ctx context.Context, name string, v any) {
	c := CallerOf(ctx)
	if c == nil || c.May(c.Kind, name, auth.LevelAdmin) {
		return
	}
	if h, ok := v.(interface{ WithoutSessions() }); ok {
		h.WithoutSessions()
	}
}

// sessionsOutOf is err, the error of a call about name of the route's
// kind, with no ZooKeeper session ids in the holders and waiters it names
// (a 409 timeout's), unless the caller may act as an admin on name, as
// sessionsFor.
func sessionsOutOf(ctx context.Context, name string, err error) error {
	c := CallerOf(ctx)
	if err == nil || c == nil || c.May(c.Kind, name, auth.LevelAdmin) {
		return err
	}
	return recipes.WithoutSessions(err)
}

// waitCall serves POST .../{name}/verb?wait= with no body: reply answers
// with what call gave, or its error.
func waitCall[T any](a *API, call func(ctx context.Context, name string, wait time.Duration) (T, error),
	reply func(w http.ResponseWriter, got T, err error) error) http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		var wait time.Duration
		name, err := a.parse(r, &wait, nil)
		if err != nil {
			return err
		}
		got, err := call(r.Context(), name, wait)
		return reply(w, got, err)
	})
}

// leaseAction serves POST .../{name}/verb with a body of {"lease"}: 204
// once act has done it.
func (a *API) leaseAction(act func(ctx context.Context, lease *recipes.Lease, name string) error) http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		var body heldRef
		name, lease, away, err := a.parseHeld(r, nil, &body)
		if err != nil {
			return err
		}
		if away != nil {
			return a.forward(w, r, away)
		}
		if err := act(r.Context(), lease, name); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

// list serves GET /v1/<kind> a page at a time: {"<key>":[...],"next":cursor}
// (see pageOf).
func list[T any](key string, page func(ctx context.Context, p recipes.Page) ([]T, string, error)) http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		p, err := pageOf(r, key)
		if err != nil {
			return err
		}
		out, next, err := page(r.Context(), p)
		if err != nil {
			return err
		}
		for i := range out {
			if n, ok := any(out[i]).(interface{ ItemName() string }); ok {
				sessionsFor(r.Context(), n.ItemName(), &out[i])
			}
		}
		writeJSON(w, http.StatusOK, pageDoc(key, out, next))
		return nil
	})
}

// nameAction serves a request of a name alone (no body): 204 once act has
// done it.
func (a *API) nameAction(act func(ctx context.Context, name string) error) http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		name, err := nameParam(r)
		if err != nil {
			return err
		}
		if err := act(r.Context(), name); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}
