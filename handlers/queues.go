package handlers

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/zkgate/zkgate/kinds"
	"github.com/zkgate/zkgate/recipes"
)

// QueueService is what the handlers need of the queues.
type QueueService interface {
	ProduceWith(ctx context.Context, name string, data []byte, o recipes.ProduceOptions) (recipes.Item, error)
	Take(ctx context.Context, name string, wait time.Duration) (recipes.Taken, error)
	Claim(ctx context.Context, lease *recipes.Lease, name string, wait time.Duration) (recipes.Taken, error)
	Ack(ctx context.Context, lease *recipes.Lease, name, id string) error
	Nack(ctx context.Context, lease *recipes.Lease, name, id string) error
	Peek(ctx context.Context, name, id string) (recipes.Taken, error)
	State(ctx context.Context, name string, head int, index int64, wait time.Duration) (recipes.QueueState, error)
	List(ctx context.Context, p recipes.Page) ([]recipes.QueueState, string, error)
	Delete(ctx context.Context, name string) error
}

// DeleteQueue is DELETE /v1/queues/{name}: removes an empty queue.
func (a *API) DeleteQueue() http.Handler { return a.nameAction(a.Queues.Delete) }

// Produce is POST /v1/queues/{name}/items?priority=&delay=|not_before=:
// the body is the item.
func (a *API) Produce() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		name, err := nameParam(r)
		if err != nil {
			return err
		}
		q := r.URL.Query()
		priority, err := parsePriority(q.Get("priority"))
		if err != nil {
			return err
		}
		due, err := parseDue(q.Get("delay"), q.Get("not_before"), time.Now())
		if err != nil {
			return err
		}
		data, err := io.ReadAll(r.Body)
		if err != nil {
			return bodyError(err, "an item may hold at most %d bytes", "could not read the item")
		}
		item, err := a.Queues.ProduceWith(r.Context(), name, data, recipes.ProduceOptions{Priority: priority, NotBefore: due})
		if err != nil {
			return err
		}
		if item.NotBefore == nil {
			// A delayed item has no URL until it is due: it gets its id then.
			w.Header().Set("Location", "/v1/queues/"+name+"/items/"+item.ID)
		}
		writeJSON(w, http.StatusCreated, item)
		return nil
	})
}

// parseDue reads ?delay= (a duration) or ?not_before= (an RFC 3339 time),
// at most recipes.MaxDelay ahead of now: the time before which the item is
// not served. Zero for neither (or a due time not after now: no delay).
func parseDue(delay, notBefore string, now time.Time) (time.Time, error) {
	switch {
	case delay != "" && notBefore != "":
		return time.Time{}, invalid("give delay or not_before, not both")
	case delay != "":
		d, err := recipes.ParseDuration(delay)
		if err != nil {
			return time.Time{}, invalid("delay: %v", err)
		}
		if d > recipes.MaxDelay {
			return time.Time{}, invalid("delay %s is above the most an item may wait, %s (30 days)", d, recipes.MaxDelay)
		}
		if d == 0 {
			return time.Time{}, nil
		}
		return now.Add(d), nil
	case notBefore != "":
		t, err := time.Parse(time.RFC3339, notBefore)
		if err != nil {
			return time.Time{}, invalid("not_before must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
		}
		if t.Sub(now) > recipes.MaxDelay {
			return time.Time{}, invalid("not_before %s is more than %s (30 days) ahead", notBefore, recipes.MaxDelay)
		}
		if !t.After(now) {
			return time.Time{}, nil
		}
		return t, nil
	}
	return time.Time{}, nil
}

// parsePriority reads ?priority= (default 100): a whole number from 0 to 999.
func parsePriority(s string) (int, error) {
	if s == "" {
		return recipes.DefaultPriority, nil
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < recipes.MinPriority || p > recipes.MaxPriority || s[0] == '+' || s[0] == '-' {
		return 0, invalid("priority must be a whole number from %d to %d", recipes.MinPriority, recipes.MaxPriority)
	}
	return p, nil
}

// writeItem answers with the raw bytes of an item.
func writeItem(w http.ResponseWriter, t recipes.Taken) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Zkgate-Item-Id", t.ID)
	w.Header().Set("X-Zkgate-Item-Priority", strconv.Itoa(t.Priority))
	w.Header().Set("Content-Length", strconv.Itoa(len(t.Data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(t.Data)
}

// Take is POST /v1/queues/{name}/take?wait=: at-most-once.
func (a *API) Take() http.Handler { return waitCall(a, a.Queues.Take, writeTaken) }

// Claim is POST /v1/queues/{name}/claim?wait=: at-least-once.
func (a *API) Claim() http.Handler {
	return leaseCall(a, func(ctx context.Context, lease *recipes.Lease, name string, _ *leaseRef, wait time.Duration) (recipes.Taken, error) {
		return a.Queues.Claim(ctx, lease, name, wait)
	}, nil, func(w http.ResponseWriter, t recipes.Taken, lease *recipes.Lease, err error) error {
		if err == nil {
			w.Header().Set("X-Zkgate-Lease", lease.ID)
		}
		return writeTaken(w, t, err)
	})
}

// writeTaken answers what a take or a claim gave: the item, or 204 when
// the queue stayed empty, or the error.
func writeTaken(w http.ResponseWriter, t recipes.Taken, err error) error {
	if recipes.IsEmpty(err) {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	writeItem(w, t)
	return nil
}

func (a *API) itemAction(act func(ctx context.Context, lease *recipes.Lease, name, id string) error) http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		name, err := nameParam(r)
		if err != nil {
			return err
		}
		id := chi.URLParam(r, "id")
		if _, _, err := recipes.ParseItemID(id); err != nil {
			return err
		}
		var body struct {
			Lease string `json:"lease"`
		}
		if err := decodeJSON(r, &body); err != nil {
			return err
		}
		lease, away, err := a.existingLease(r.Context(), body.Lease)
		if err != nil {
			return err
		}
		if away != nil {
			return a.forward(w, r, away)
		}
		if err := act(r.Context(), lease, name, id); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

// Ack is POST /v1/queues/{name}/items/{id}/ack.
func (a *API) Ack() http.Handler { return a.itemAction(a.Queues.Ack) }

// Nack is POST /v1/queues/{name}/items/{id}/nack.
func (a *API) Nack() http.Handler { return a.itemAction(a.Queues.Nack) }

// Peek is GET /v1/queues/{name}/items/{id}.
func (a *API) Peek() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		name, err := nameParam(r)
		if err != nil {
			return err
		}
		t, err := a.Queues.Peek(r.Context(), name, chi.URLParam(r, "id"))
		if err != nil {
			return err
		}
		writeItem(w, t)
		return nil
	})
}

// QueueState is GET /v1/queues/{name}?head=&index=&wait=, a blocking read.
func (a *API) QueueState() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		head := 10
		if s := r.URL.Query().Get("head"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || n > recipes.MaxQueueHead {
				return invalid("head must be a whole number from 0 to %d", recipes.MaxQueueHead)
			}
			head = n
		}
		blockingRead(a, func(ctx context.Context, name string, index int64, wait time.Duration) (recipes.QueueState, error) {
			return a.Queues.State(ctx, name, head, index, wait)
		}, func(st recipes.QueueState) int64 { return st.Index }).ServeHTTP(w, r)
		return nil
	})
}

// ListQueues is GET /v1/queues.
func (a *API) ListQueues() http.Handler { return list(kinds.Queues.Name, a.Queues.List) }
