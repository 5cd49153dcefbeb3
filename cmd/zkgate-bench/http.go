//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// newTransport is a keep-alive transport that keeps up to conns idle
// connections to the gateway, so every request reuses one instead of
// burning an ephemeral port.
func newTransport(conns int) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     0,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}

// client talks to the gateway's API.
type client struct {
	base string
	hc   *http.Client
}

func newClient(base string, conns int, timeout time.Duration) *client {
	return &client{base: base, hc: &http.Client{Transport: newTransport(conns), Timeout: timeout}}
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// do sends a request with a JSON body (nil: none) and reads the answer whole.
func (c *client) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	st, b, _, err := c.exchange(ctx, method, path, "application/json", body)
	return st, b, err
}

// exchange sends a request with a body of contentType (nil: none, and no
// Content-Type) and reads the answer whole.
func (c *client) exchange(ctx context.Context, method, path, contentType string, body []byte) (int, []byte, http.Header, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, b, resp.Header, err
}

// expect checks the status of an answer.
func expect(what string, status int, body []byte, err error, want int) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if status != want {
		return fmt.Errorf("%s: status %d, want %d: %s", what, status, want, truncate(body, 300))
	}
	return nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// createLease makes a lease and returns its id.
func (c *client) createLease(ctx context.Context, ttl time.Duration, holder string) (string, error) {
	body, _ := json.Marshal(map[string]string{"ttl": ttl.String(), "holder": holder})
	st, b, err := c.do(ctx, http.MethodPost, "/v1/leases", body)
	if err := expect("create lease", st, b, err, http.StatusCreated); err != nil {
		return "", err
	}
	return idIn("create lease", b)
}

// idIn is the id in the JSON answer b to the request what: its field "id"
// (or etcd's "ID": encoding/json matches names regardless of case).
func idIn(what string, b []byte) (string, error) {
	var v struct{ ID string }
	if err := json.Unmarshal(b, &v); err != nil || v.ID == "" {
		return "", fmt.Errorf("%s: bad answer %s", what, truncate(b, 300))
	}
	return v.ID, nil
}

// revokeLease deletes a lease (204), tolerating one already gone.
func (c *client) revokeLease(ctx context.Context, id string) error {
	st, b, err := c.do(ctx, http.MethodDelete, "/v1/leases/"+id, nil)
	if err == nil && (st == http.StatusNotFound || st == http.StatusGone) {
		return nil
	}
	return expect("revoke lease", st, b, err, http.StatusNoContent)
}

// createLeases makes n leases with `workers` requests in flight.
func (c *client) createLeases(ctx context.Context, n, workers int, ttl time.Duration, holder string) ([]string, error) {
	ids := make([]string, n)
	err := parallel(ctx, n, workers, func(i int) error {
		id, err := c.createLease(ctx, ttl, fmt.Sprintf("%s-%d", holder, i))
		ids[i] = id
		return err
	})
	return ids, err
}

// revokeLeases deletes leases with `workers` requests in flight.
func (c *client) revokeLeases(ctx context.Context, ids []string, workers int) error {
	return parallel(ctx, len(ids), workers, func(i int) error {
		if ids[i] == "" {
			return nil
		}
		return c.revokeLease(ctx, ids[i])
	})
}

// parallel runs fn(0..n-1) on `workers` goroutines and returns the first
// error; after one, the remaining indexes are skipped.
func parallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if first != nil || next >= n || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

func leaseBody(id string) []byte { return []byte(`{"lease":"` + id + `"}`) }

// grant is what an acquire answers.
type grant struct {
	Token int64  `json:"token"`
	Node  string `json:"node"`
}

func parseGrant(b []byte) (grant, error) {
	var g grant
	if err := json.Unmarshal(b, &g); err != nil {
		return g, fmt.Errorf("bad grant %s: %w", truncate(b, 200), err)
	}
	if g.Token <= 0 {
		return g, fmt.Errorf("grant without a token: %s", truncate(b, 200))
	}
	return g, nil
}
