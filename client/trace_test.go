package client_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
)

// TestTraceParentSent: a call whose ctx carries a traceparent
// (WithTraceParent) sends it, with its tracestate, on its requests, those
// made through a lease included; a call without sends none; WithTraceHeaders
// writes the headers of every call from the application's tracer; a
// malformed traceparent is not sent.
func TestTraceParentSent(t *testing.T) {
	g, _ := gateway(t)
	p := newProxy(t, g.URL)
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	c, err := client.New(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 30*time.Second)
	traced := client.WithTraceParent(ctx, tp, "vendor=1")
	l, err := c.Grant(traced, 30*time.Second, "traced")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Revoke(ctx)
	grant, err := l.Lock(traced, "traced", client.Exclusive, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := grant.Release(ctx); err != nil { // not traced
		t.Fatal(err)
	}
	if err := c.Fence(client.WithTraceParent(ctx, "00-not-a-traceparent", ""), "traced", 1); err == nil {
		t.Fatal("a released token is current")
	}
	sent := map[string]string{}
	for _, r := range p.requests() {
		if r.Header.Get("Traceparent") != "" || r.Header.Get("Tracestate") != "" {
			sent[r.Method+" "+r.URL.Path] = r.Header.Get("Traceparent") + " " + r.Header.Get("Tracestate")
		}
	}
	want := tp + " vendor=1"
	for _, call := range []string{"POST /v1/leases", "POST /v1/locks/traced/acquire"} {
		if sent[call] != want {
			t.Errorf("%s sent trace headers %q, want %q", call, sent[call], want)
		}
		delete(sent, call)
	}
	if len(sent) > 0 {
		t.Errorf("calls without a trace context sent trace headers: %v", sent)
	}

	// From the application's tracer, for every call.
	hooked, err := client.New(p.URL(), client.WithTraceHeaders(func(ctx context.Context, h http.Header) {
		if v, ok := ctx.Value(appSpanKey{}).(string); ok {
			h.Set("Traceparent", v)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	const appTP = "00-11111111111111111111111111111111-2222222222222222-01"
	before := len(p.requests())
	if _, err := hooked.LockState(context.WithValue(ctx, appSpanKey{}, appTP), "traced"); err != nil {
		t.Fatal(err)
	}
	rs := p.requests()[before:]
	if len(rs) != 1 {
		t.Fatalf("WithTraceHeaders: %d requests for one call", len(rs))
	}
	if got := rs[0].Header.Get("Traceparent"); got != appTP {
		t.Errorf("WithTraceHeaders: sent traceparent %q, want %q", got, appTP)
	}
}

type appSpanKey struct{}
