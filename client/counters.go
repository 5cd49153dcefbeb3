package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// CounterFormat is how a counter's znode holds its value. The bytes do not
// say it (the ASCII "1234" is 4 bytes too), so every call names it; data
// of another format is ErrFormatMismatch, never a wrong number.
type CounterFormat string

// The formats of a counter.
const (
	// FormatDecimal is ASCII decimal: kazoo's Counter, and the default.
	FormatDecimal CounterFormat = "decimal"
	// FormatInt32 is 4 bytes big-endian: Curator's SharedCount, and
	// kazoo's Counter with support_curator=True.
	FormatInt32 CounterFormat = "int32"
	// FormatInt64 is 8 bytes big-endian: Curator's DistributedAtomicLong.
	FormatInt64 CounterFormat = "int64"
)

// CounterState is a counter's value, read in Format. Version is its
// node's data version, what CompareAndSetCounter names: -1 while the
// counter does not exist (Value 0).
type CounterState struct {
	Name    string        `json:"name"`
	Value   int64         `json:"value"`
	Version int32         `json:"version"`
	Format  CounterFormat `json:"format"`
	Index   int64         `json:"-"` // X-Zkgate-Index
}

func (s *CounterState) setIndex(i int64) { s.Index = i }

// CounterSummary is a counter in the list: its value in every format its
// bytes fit (the list knows no format).
type CounterSummary struct {
	Name    string                  `json:"name"`
	Version int32                   `json:"version"`
	Values  map[CounterFormat]int64 `json:"values"`
}

// formatQuery is ?format= for f ("": the gateway's default, decimal).
func formatQuery(f CounterFormat) url.Values {
	if f == "" {
		return nil
	}
	return url.Values{"format": {string(f)}}
}

// Counter reads the counter name as f ("": FormatDecimal).
func (c *Client) Counter(ctx context.Context, name string, f CounterFormat) (CounterState, error) {
	var st CounterState
	return st, c.state(ctx, "counters", name, formatQuery(f), &st)
}

// WatchCounter watches the counter name, read as f: its value now, then
// each new one.
func (c *Client) WatchCounter(ctx context.Context, name string, f CounterFormat) (*Watcher[CounterState], error) {
	return watch[CounterState](ctx, c, "counters", name, formatQuery(f), nil)
}

// SetCounter writes value to the counter name, as f, whatever value it
// had (but never over data of another format: ErrFormatMismatch).
func (c *Client) SetCounter(ctx context.Context, name string, f CounterFormat, value int64) (CounterState, error) {
	return c.counterWrite(ctx, name, "", f, map[string]any{"value": value}, true)
}

// CompareAndSetCounter writes value to the counter name only if it is at
// version (-1: only if it does not exist); otherwise the error is
// ErrVersionMismatch, whose "value" and "version" (Error.Decode) are the
// counter's now. A call retried after a lost answer may find its own write
// done: ErrVersionMismatch then shows the value it set.
func (c *Client) CompareAndSetCounter(ctx context.Context, name string, f CounterFormat, value int64, version int32) (CounterState, error) {
	return c.counterWrite(ctx, name, "", f, map[string]any{"value": value, "version": version}, true)
}

// AddCounter adds delta (negative: subtracts) to the counter name, as f,
// atomically, and answers the value it made; past the range of f it is
// ErrOutOfRange. An add is not retried once sent: one answered
// ErrUnavailable may or may not have been applied.
func (c *Client) AddCounter(ctx context.Context, name string, f CounterFormat, delta int64) (CounterState, error) {
	return c.counterWrite(ctx, name, "add", f, map[string]any{"delta": delta}, false)
}

func (c *Client) counterWrite(ctx context.Context, name, verb string, f CounterFormat, body map[string]any, retry bool) (CounterState, error) {
	rest := []string{}
	method := http.MethodPut
	if verb != "" {
		rest, method = []string{verb}, http.MethodPost
	}
	path, err := namePath("counters", name, rest...)
	if err != nil {
		return CounterState{}, err
	}
	resp, err := c.do(ctx, request{method: method, path: path, query: formatQuery(f), body: body, retry: retry})
	if err != nil {
		return CounterState{}, err
	}
	var st CounterState
	if err := resp.decode(&st); err != nil {
		return CounterState{}, err
	}
	st.Index, _ = strconv.ParseInt(resp.header.Get("X-Zkgate-Index"), 10, 64)
	return st, nil
}

// DeleteCounter removes the counter name; one that does not exist is no
// error.
func (c *Client) DeleteCounter(ctx context.Context, name string) error {
	return c.deleteNamed(ctx, "counters", name)
}

// Counters lists the counters, in name order, reading every page of the
// gateway's list (or as many as Limit allows).
func (c *Client) Counters(ctx context.Context, opts ...ListOption) ([]CounterSummary, error) {
	return listAll[CounterSummary](ctx, c, "counters", "counters", nil, opts)
}
