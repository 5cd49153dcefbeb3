package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/zkgate/zkgate/kinds"
	"github.com/zkgate/zkgate/recipes"
)

// CounterService is what the handlers need of the counters.
type CounterService interface {
	State(ctx context.Context, name string, f recipes.CounterFormat, index int64, wait time.Duration) (recipes.CounterState, error)
	Set(ctx context.Context, name string, f recipes.CounterFormat, value int64, version *int32) (recipes.CounterState, error)
	Add(ctx context.Context, name string, f recipes.CounterFormat, delta int64) (recipes.CounterState, error)
	Delete(ctx context.Context, name string) error
	List(ctx context.Context, p recipes.Page) ([]recipes.CounterSummary, string, error)
}

// counterFormat is ?format= of a counter's route: decimal when absent.
func counterFormat(r *http.Request) (recipes.CounterFormat, error) {
	return recipes.ParseCounterFormat(r.URL.Query().Get("format"))
}

// CounterState is GET /v1/counters/{name}?format=, a blocking read.
func (a *API) CounterState() http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		f, err := counterFormat(r)
		if err != nil {
			return err
		}
		read := func(ctx context.Context, name string, index int64, wait time.Duration) (recipes.CounterState, error) {
			return a.Counters.State(ctx, name, f, index, wait)
		}
		blockingRead(a, read, func(st recipes.CounterState) int64 { return st.Index }).ServeHTTP(w, r)
		return nil
	})
}

type setCounterBody struct {
	Value   *int64 `json:"value"`
	Version *int32 `json:"version"`
}

// SetCounter is PUT /v1/counters/{name}?format=: {"value"} overwrites,
// {"value","version"} is a compare-and-set (409 version_mismatch).
func (a *API) SetCounter() http.Handler {
	return counterCall(a, func(ctx context.Context, name string, f recipes.CounterFormat, b *setCounterBody) (recipes.CounterState, error) {
		if b.Value == nil {
			return recipes.CounterState{}, invalid("value is required")
		}
		if b.Version != nil && *b.Version < -1 {
			return recipes.CounterState{}, invalid("version must be -1 (absent) or a node's version")
		}
		return a.Counters.Set(ctx, name, f, *b.Value, b.Version)
	})
}

type addCounterBody struct {
	Delta *int64 `json:"delta"`
}

// AddCounter is POST /v1/counters/{name}/add?format=: {"delta"}, answered
// with the value it made.
func (a *API) AddCounter() http.Handler {
	return counterCall(a, func(ctx context.Context, name string, f recipes.CounterFormat, b *addCounterBody) (recipes.CounterState, error) {
		if b.Delta == nil {
			return recipes.CounterState{}, invalid("delta is required")
		}
		return a.Counters.Add(ctx, name, f, *b.Delta)
	})
}

// counterCall serves a write of a counter: its name, ?format= and body B,
// answered with the state call made.
func counterCall[B any](a *API, call func(ctx context.Context, name string, f recipes.CounterFormat, b *B) (recipes.CounterState, error)) http.Handler {
	return handler(func(w http.ResponseWriter, r *http.Request) error {
		var body B
		name, err := a.parse(r, nil, &body)
		if err != nil {
			return err
		}
		f, err := counterFormat(r)
		if err != nil {
			return err
		}
		st, err := call(r.Context(), name, f, &body)
		if err != nil {
			return err
		}
		writeIndexed(w, st.Index, st)
		return nil
	})
}

// DeleteCounter is DELETE /v1/counters/{name}.
func (a *API) DeleteCounter() http.Handler { return a.nameAction(a.Counters.Delete) }

// ListCounters is GET /v1/counters: each counter with its value in every
// format its data fits.
func (a *API) ListCounters() http.Handler { return list(kinds.Counters.Name, a.Counters.List) }
