package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
)

// TestNewReadsTheEnvironment: an empty URL means $ZKGATE_URL, then
// DefaultURL; host:port means http://host:port; without WithToken the token
// is $ZKGATE_TOKEN; what the caller gives wins over the environment. The
// Python and Node clients' tests check the same rules.
func TestNewReadsTheEnvironment(t *testing.T) {
	// Serial: sets the environment (t.Setenv).
	g, _ := gateway(t)
	p := newProxy(t, g.URL)
	hostPort := p.srv.Listener.Addr().String()
	ctx := ctxFor(t, time.Minute)

	t.Setenv("ZKGATE_URL", "")
	t.Setenv("ZKGATE_TOKEN", "")
	c, err := client.New("")
	if err != nil || c.URL() != client.DefaultURL || client.DefaultURL != "http://127.0.0.1:8080" {
		t.Fatalf("New(\"\") without ZKGATE_URL: %v %v", c, err)
	}

	t.Setenv("ZKGATE_URL", " "+hostPort+" ")
	t.Setenv("ZKGATE_TOKEN", "from-env")
	c, err = client.New("")
	if err != nil || c.URL() != "http://"+hostPort {
		t.Fatalf("New(\"\") with ZKGATE_URL=%s: %v %v", hostPort, c, err)
	}
	if got := authSent(t, ctx, c, p); got != "Bearer from-env" {
		t.Fatalf("Authorization %q, want the one of ZKGATE_TOKEN", got)
	}

	// What the caller gives wins: a URL (host:port too), a token, no token.
	c, err = client.New(hostPort, client.WithToken("given"))
	if err != nil || c.URL() != "http://"+hostPort {
		t.Fatalf("New(%q): %v %v", hostPort, c, err)
	}
	if got := authSent(t, ctx, c, p); got != "Bearer given" {
		t.Fatalf("Authorization %q, want the one given", got)
	}
	c, err = client.New(p.URL(), client.WithToken(""))
	if err != nil {
		t.Fatal(err)
	}
	if got := authSent(t, ctx, c, p); got != "" {
		t.Fatalf("Authorization %q after WithToken(\"\")", got)
	}
	t.Setenv("ZKGATE_URL", "http://127.0.0.1:9")
	if c, err := client.New(p.URL()); err != nil || c.URL() != p.URL() {
		t.Fatalf("New(%q) with another ZKGATE_URL: %v %v", p.URL(), c, err)
	}
}

// TestNewRefusesBadURLs: a URL that is not http(s)://host is refused
// before any request, from the argument or the environment.
func TestNewRefusesBadURLs(t *testing.T) {
	// Serial: sets the environment (t.Setenv).
	for _, bad := range []string{"ftp://h:1", "http://", "http://h:1/?q=1", "http://u@h:1", "http://h:1/#f", "h:1/%zz"} {
		t.Setenv("ZKGATE_URL", "")
		if c, err := client.New(bad); err == nil {
			t.Errorf("New(%q) = %v, want an error", bad, c.URL())
		}
		t.Setenv("ZKGATE_URL", bad)
		if c, err := client.New(""); err == nil {
			t.Errorf("New(\"\") with ZKGATE_URL=%q = %v, want an error", bad, c.URL())
		}
	}
	for in, want := range map[string]string{"localhost:8080": "http://localhost:8080", "[::1]:80": "http://[::1]:80",
		"https://h:1/base/": "https://h:1/base", "h:1/base": "http://h:1/base"} {
		c, err := client.New(in)
		if err != nil || c.URL() != want {
			t.Errorf("New(%q): %v %v, want %s", in, c, err, want)
		}
	}
}

// authSent is the Authorization header that a call through c (a list of
// the locks) brings to the gateway behind p.
func authSent(t *testing.T, ctx context.Context, c *client.Client, p *proxy) string {
	t.Helper()
	if _, err := c.Locks(ctx, ""); err != nil {
		t.Fatal(err)
	}
	seen := p.requests()
	if len(seen) == 0 {
		t.Fatal("no request reached the gateway")
	}
	return seen[len(seen)-1].Header.Get("Authorization")
}
