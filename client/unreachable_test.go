package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
)

// countingDials is an HTTP client that counts its connection attempts.
func countingDials(n *atomic.Int32) *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return d.DialContext(ctx, network, addr)
	}}}
}

// TestUnreachableGateway: a call to a gateway nobody listens for fails with
// ErrUnreachable, naming the URL, after 1+DefaultConnectRetries connection
// attempts, whether the call is safe to repeat (Grant, Lock's state) or not
// (Produce): nothing was sent. WithConnectRetries changes the count, and
// the retry window still bounds it.
func TestUnreachableGateway(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	ctx := ctxFor(t, time.Minute)
	var dials atomic.Int32
	c, err := client.New(addr, client.WithHTTPClient(countingDials(&dials)))
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"Grant":     func() error { _, err := c.Grant(ctx, 10*time.Second, "x"); return err },
		"LockState": func() error { _, err := c.LockState(ctx, "x"); return err },
		"Produce":   func() error { _, err := c.Produce(ctx, "q", []byte("x"), 0); return err },
		"WaitBarrier": func() error {
			return c.WaitBarrier(ctx, "b", time.Minute) // a wait does not stretch the attempts
		},
	}
	for name, call := range calls {
		dials.Store(0)
		err := call()
		if !errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), "http://"+addr) {
			t.Fatalf("%s: %v, want ErrUnreachable naming http://%s", name, err, addr)
		}
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			t.Fatalf("%s: %v does not carry the dial's error", name, err)
		}
		if got := dials.Load(); got != 1+client.DefaultConnectRetries {
			t.Fatalf("%s: %d connection attempts, want %d", name, got, 1+client.DefaultConnectRetries)
		}
	}

	for _, one := range []struct {
		name string
		opt  client.Option
	}{{"WithConnectRetries(0)", client.WithConnectRetries(0)}, {"WithRetryWindow(0)", client.WithRetryWindow(0)}} {
		c, err = client.New(addr, client.WithHTTPClient(countingDials(&dials)), one.opt)
		if err != nil {
			t.Fatal(err)
		}
		dials.Store(0)
		if _, err := c.LockState(ctx, "x"); !errors.Is(err, client.ErrUnreachable) || dials.Load() != 1 {
			t.Fatalf("%s: %v after %d attempts", one.name, err, dials.Load())
		}
	}
	if err := c.Ready(ctx); !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("Ready: %v", err)
	}
}
