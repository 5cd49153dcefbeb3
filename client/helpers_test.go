package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

func TestMain(m *testing.M) { gwtest.Main(m) }

// gateway starts a real gateway (in-process, on the shared ZooKeeper) and
// returns it with a client of it. Goroutines are checked at the end of the
// test, after the gateway has stopped.
func gateway(t *testing.T, opts ...client.Option) (*gwtest.Gateway, *client.Client) {
	t.Helper()
	gwtest.NoGoroutinesLeft(t)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	c, err := client.New(g.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g, c
}

// ctxFor is a context that ends with the test, bounded.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitForWaiters polls until the lock name has n waiters.
func waitForWaiters(t *testing.T, ctx context.Context, c *client.Client, name string, n int) {
	t.Helper()
	gwtest.Eventually(t, 10*time.Second, func() error {
		st, err := c.LockState(ctx, name)
		if err != nil || len(st.Waiters) != n {
			return fmt.Errorf("lock %s: %+v %v, want %d waiters", name, st, err, n)
		}
		return nil
	})
}

// proxy is an HTTP proxy in front of a gateway whose behaviour a test
// changes as it goes: pass requests on, delay them, answer for the gateway,
// or cut connections.
type proxy struct {
	srv       *httptest.Server
	transport *http.Transport

	mu     sync.Mutex
	hook   func(w http.ResponseWriter, r *http.Request, next http.Handler)
	seen   []*http.Request
	closed bool
}

// proxiedClient starts a proxy to the gateway at target and a client of
// the gateway through it.
func proxiedClient(t *testing.T, target string) (*proxy, *client.Client) {
	t.Helper()
	p := newProxy(t, target)
	c, err := client.New(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{transport: &http.Transport{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = p.transport
	rp.ErrorLog = nil
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		hook := p.hook
		p.seen = append(p.seen, r.Clone(context.Background()))
		p.mu.Unlock()
		if hook != nil {
			hook(w, r, rp)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.close)
	return p
}

func (p *proxy) URL() string { return p.srv.URL }

func (p *proxy) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.srv.CloseClientConnections()
	p.srv.Close()
	p.transport.CloseIdleConnections()
}

// set replaces the hook; nil passes every request on.
func (p *proxy) set(hook func(w http.ResponseWriter, r *http.Request, next http.Handler)) {
	p.mu.Lock()
	p.hook = hook
	p.mu.Unlock()
}

// requests returns the requests seen so far.
func (p *proxy) requests() []*http.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*http.Request(nil), p.seen...)
}

// cut closes the client's connection without an answer.
func cut(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}
