package client

import (
	"context"
	"net/http"
)

// The gateway continues its caller's distributed trace (W3C Trace Context):
// a request that carries a traceparent header is served as a span of that
// trace, with its wait in line and its ZooKeeper round trips as children,
// when the gateway exports traces. The client carries no tracing library:
// the application gives its trace context as header values, per call
// (WithTraceParent) or for every call from its own tracer (WithTraceHeaders).

type traceKey struct{}

type traceHeaders struct{ parent, state string }

// WithTraceParent returns a copy of ctx whose calls send traceparent, and
// tracestate when it is not "", as the W3C headers of their requests: the
// gateway's spans of those calls join that trace. A traceparent that is
// not of the W3C form (version-traceid-parentid-flags, in lower-case hex)
// is not sent.
func WithTraceParent(ctx context.Context, traceparent, tracestate string) context.Context {
	return context.WithValue(ctx, traceKey{}, traceHeaders{traceparent, tracestate})
}

// WithTraceHeaders has inject write the trace context of each call's ctx
// into the headers of its requests: with OpenTelemetry,
//
//	client.WithTraceHeaders(func(ctx context.Context, h http.Header) {
//		otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
//	})
//
// A traceparent given to the call with WithTraceParent comes after, and
// wins.
func WithTraceHeaders(inject func(ctx context.Context, h http.Header)) Option {
	return func(c *Client) { c.injectTrace = inject }
}

// setTrace sets the trace headers of a request made for ctx.
func (c *Client) setTrace(ctx context.Context, h http.Header) {
	if c.injectTrace != nil {
		c.injectTrace(ctx, h)
	}
	th, ok := ctx.Value(traceKey{}).(traceHeaders)
	if !ok || !saneTraceParent(th.parent) {
		return
	}
	h.Set("Traceparent", th.parent)
	h.Del("Tracestate")
	if th.state != "" && saneHeaderValue(th.state) {
		h.Set("Tracestate", th.state)
	}
}

// saneTraceParent says whether s has the form of a W3C traceparent:
// 2 hex digits of version, 32 of trace id, 16 of parent id, 2 of flags, and
// (a later version) more after a dash.
func saneTraceParent(s string) bool {
	if len(s) < 55 || (len(s) > 55 && s[55] != '-') {
		return false
	}
	for i := 0; i < 55; i++ {
		switch {
		case i == 2 || i == 35 || i == 52:
			if s[i] != '-' {
				return false
			}
		case (s[i] < '0' || s[i] > '9') && (s[i] < 'a' || s[i] > 'f'):
			return false
		}
	}
	return s[:2] != "ff" && saneHeaderValue(s)
}

// saneHeaderValue says whether s may be sent as a header's value.
func saneHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return false
		}
	}
	return len(s) <= 512
}
