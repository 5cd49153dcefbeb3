package handlers

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/zkgate/zkgate/recipes"
)

// QueueService is what the handlers need of the queues.
type QueueService interface {
	Produce(ctx context.Context, name string, data []byte, priority int) (recipes.Item, error)
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
func (a *API) DeleteQueue() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, err := nameParam(r)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		if err := a.Queues.Delete(r.Context(), name); err != nil {
			WriteError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// Produce is POST /v1/queues/{name}/items?priority=: the body is the item.
func (a *API) Produce() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, err := nameParam(r)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		priority, err := parsePriority(r.URL.Query().Get("priority"))
		if err != nil {
			WriteError(w, r, err)
			return
		}
		data, err := io.ReadAll(r.Body)
		if err != nil {
			WriteError(w, r, bodyError(err, "an item may hold at most %d bytes", "could not read the item"))
			return
		}
		item, err := a.Queues.Produce(r.Context(), name, data, priority)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		w.Header().Set("Location", "/v1/queues/"+name+"/items/"+item.ID)
		writeJSON(w, http.StatusCreated, item)
	})
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
func (a *API) Take() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var wait time.Duration
		name, err := a.parse(r, &wait, nil)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		t, err := a.Queues.Take(r.Context(), name, wait)
		if recipes.IsEmpty(err) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if err != nil {
			WriteError(w, r, err)
			return
		}
		writeItem(w, t)
	})
}

// Claim is POST /v1/queues/{name}/claim?wait=: at-least-once.
func (a *API) Claim() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var wait time.Duration
		var body leaseRef
		name, err := a.parse(r, &wait, &body)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		var t recipes.Taken
		lease, err := a.actFor(r.Context(), body, func(lease *recipes.Lease) (err error) {
			t, err = a.Queues.Claim(r.Context(), lease, name, wait)
			return err
		}, nil)
		if recipes.IsEmpty(err) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if err != nil {
			WriteError(w, r, err)
			return
		}
		w.Header().Set("X-Zkgate-Lease", lease.ID)
		writeItem(w, t)
	})
}

func (a *API) itemAction(fn func(ctx context.Context, lease *recipes.Lease, name, id string) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, err := nameParam(r)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		id := chi.URLParam(r, "id")
		if _, _, err := recipes.ParseItemID(id); err != nil {
			WriteError(w, r, err)
			return
		}
		var body struct {
			Lease string `json:"lease"`
		}
		if err := decodeJSON(r, &body); err != nil {
			WriteError(w, r, err)
			return
		}
		lease, _, err := a.resolve(r.Context(), leaseRef{Lease: body.Lease}, false)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		if err := fn(r.Context(), lease, name, id); err != nil {
			WriteError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// Ack is POST /v1/queues/{name}/items/{id}/ack.
func (a *API) Ack() http.Handler { return a.itemAction(a.Queues.Ack) }

// Nack is POST /v1/queues/{name}/items/{id}/nack.
func (a *API) Nack() http.Handler { return a.itemAction(a.Queues.Nack) }

// Peek is GET /v1/queues/{name}/items/{id}.
func (a *API) Peek() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, err := nameParam(r)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		t, err := a.Queues.Peek(r.Context(), name, chi.URLParam(r, "id"))
		if err != nil {
			WriteError(w, r, err)
			return
		}
		writeItem(w, t)
	})
}

// QueueState is GET /v1/queues/{name}?head=&index=&wait=, a blocking read.
func (a *API) QueueState() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		head := 10
		if s := r.URL.Query().Get("head"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || n > recipes.MaxQueueHead {
				WriteError(w, r, invalid("head must be a whole number from 0 to %d", recipes.MaxQueueHead))
				return
			}
			head = n
		}
		a.blockingRead(func(ctx context.Context, name string, index int64, wait time.Duration) (any, int64, error) {
			st, err := a.Queues.State(ctx, name, head, index, wait)
			return st, st.Index, err
		}).ServeHTTP(w, r)
	})
}

// ListQueues is GET /v1/queues.
func (a *API) ListQueues() http.Handler {
	return a.list("queues", func(ctx context.Context, p recipes.Page) (any, string, error) {
		return a.Queues.List(ctx, p)
	})
}
