package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/recipes"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tracing is OpenTelemetry's, off unless the standard OTEL_* environment
// asks for it (see parseTracing): then every request is a server span that
// continues the caller's W3C traceparent, exported as OTLP over HTTP, and
// the recipes add their waits and ZooKeeper round trips (recipes/tracing.go).
// Off, there is no exporter, no SDK and no span: the front door's only cost
// is a nil check.

// tracingConfig is what the environment asks of tracing; nil: off.
type tracingConfig struct {
	endpoint   string // the URL spans are posted to
	sampler    sdktrace.Sampler
	samplerArg string // as given, for the log
	service    string
	// batchDelay is OTEL_BSP_SCHEDULE_DELAY (0: the SDK's 5s).
	batchDelay time.Duration
}

// defaultTracesEndpoint is OTLP/HTTP's default, for OTEL_TRACES_EXPORTER=otlp
// with no endpoint.
const defaultTracesEndpoint = "http://localhost:4318/v1/traces"

// parseTracing reads the OTEL_* variables zkgate follows: tracing is on
// with OTEL_TRACES_EXPORTER=otlp, or with it unset and an OTLP endpoint
// given (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, used as it is, or
// OTEL_EXPORTER_OTLP_ENDPOINT, to which /v1/traces is added); off with
// OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true. The exporter itself
// reads the rest (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _CERTIFICATE, ...).
// A value zkgate cannot follow is a usage error, never tracing silently off.
func parseTracing(getenv func(string) string) (*tracingConfig, error) {
	if b, err := strconv.ParseBool(strings.TrimSpace(getenv("OTEL_SDK_DISABLED"))); err == nil && b {
		return nil, nil
	}
	endpoint := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	if endpoint == "" {
		if base := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); base != "" {
			endpoint = strings.TrimSuffix(base, "/") + "/v1/traces"
		}
	}
	on := endpoint != ""
	if exporters := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exporters != "" {
		on = false
		for _, e := range strings.Split(exporters, ",") {
			switch strings.TrimSpace(e) {
			case "otlp":
				on = true
			case "none":
			default:
				return nil, usagef("OTEL_TRACES_EXPORTER=%s: zkgate exports otlp (over HTTP) or none", exporters)
			}
		}
	}
	if !on {
		return nil, nil
	}
	if endpoint == "" {
		endpoint = defaultTracesEndpoint
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("the OTLP traces endpoint %q is not an http:// or https:// URL", endpoint)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(v)); p != "" && p != "http/protobuf" {
			return nil, usagef("%s=%s: zkgate exports OTLP over HTTP (http/protobuf) only", v, p)
		}
	}
	c := &tracingConfig{endpoint: endpoint, service: "zkgate"}
	if s := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); s != "" {
		c.service = s
	}
	var err error
	if c.sampler, c.samplerArg, err = parseSampler(getenv("OTEL_TRACES_SAMPLER"), getenv("OTEL_TRACES_SAMPLER_ARG")); err != nil {
		return nil, err
	}
	if d := strings.TrimSpace(getenv("OTEL_BSP_SCHEDULE_DELAY")); d != "" {
		ms, err := strconv.Atoi(d)
		if err != nil || ms <= 0 {
			return nil, usagef("OTEL_BSP_SCHEDULE_DELAY=%s: a number of milliseconds above 0", d)
		}
		c.batchDelay = time.Duration(ms) * time.Millisecond
	}
	return c, nil
}

// parseSampler is OTEL_TRACES_SAMPLER and its _ARG: by default every trace
// its caller samples, and every trace begun here.
func parseSampler(name, arg string) (sdktrace.Sampler, string, error) {
	name, arg = strings.TrimSpace(name), strings.TrimSpace(arg)
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, usagef("OTEL_TRACES_SAMPLER_ARG=%s: a ratio from 0 to 1", arg)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), "parentbased_always_on", nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), name, nil
	case "always_on":
		return sdktrace.AlwaysSample(), name, nil
	case "always_off":
		return sdktrace.NeverSample(), name, nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, "", err
		}
		s := sdktrace.TraceIDRatioBased(r)
		if name == "parentbased_traceidratio" {
			s = sdktrace.ParentBased(s)
		}
		return s, name + ":" + strconv.FormatFloat(r, 'g', -1, 64), nil
	}
	return nil, "", usagef("OTEL_TRACES_SAMPLER=%s: one of always_on, always_off, traceidratio, parentbased_always_on, "+
		"parentbased_always_off, parentbased_traceidratio", name)
}

// startTracing makes the tracer of c (nil c: none) and the stop that
// flushes and ends it.
func startTracing(c *tracingConfig, gatewayID string, log *slog.Logger) (trace.Tracer, func(), error) {
	if c == nil {
		return nil, func() {}, nil
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(c.endpoint))
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	var batch []sdktrace.BatchSpanProcessorOption
	if c.batchDelay > 0 {
		batch = append(batch, sdktrace.WithBatchTimeout(c.batchDelay))
	}
	res := resource.NewSchemaless(attribute.String("service.name", c.service), attribute.String("service.version", Version),
		attribute.String("service.instance.id", gatewayID))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, batch...), sdktrace.WithSampler(c.sampler), sdktrace.WithResource(res))
	// The SDK reports a failed export to the process's one OpenTelemetry
	// error handler (by default a plain line on stderr): into the
	// gateway's log instead, as any other line. A process serves one
	// gateway (a test's several share one of their logs).
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing: spans not sent", "err", err) }))
	log.Info("tracing on", "endpoint", c.endpoint, "sampler", c.samplerArg, "service", c.service)
	stop := func() {
		// What is left is sent, for at most a few seconds.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing: the last spans were not all sent", "err", err)
		}
	}
	return tp.Tracer("github.com/zkgate/zkgate"), stop, nil
}

// traceContext reads and writes W3C traceparent and tracestate.
var traceContext propagation.TraceContext

// startSpan starts the server span of a request to rt (nil: no route),
// a child of the caller's traceparent if it sent one.
//
//go:noinline
func (fd *frontDoor) startSpan(r *http.Request, rt *route) *http.Request {
	if rt != nil && (rt.access.probe || rt.pattern == "/metrics") {
		return r // probes and scrapes, every few seconds, are no one's trace
	}
	ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	method := methodLabel(r.Method)
	name, pattern := method, ""
	if rt != nil {
		pattern = rt.pattern
		name = method + " " + pattern
	}
	ctx, span := fd.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		attrs := []attribute.KeyValue{attribute.String("http.request.method", method)}
		if pattern != "" {
			attrs = append(attrs, attribute.String("http.route", pattern))
		}
		span.SetAttributes(attrs...)
	}
	return r.WithContext(ctx)
}

// endSpan ends the server span of r, answered with status.
func endSpan(r *http.Request, status int, requestID string) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status), attribute.String("zkgate.request_id", requestID))
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// withSpanReader says, to the recipes, what of other leases the spans of
// r may show: with tokens on, a lease the caller may read, as GET
// /v1/leases/{id} says (its owner, or leases read on its id); with them off,
// all.
func withSpanReader(r *http.Request) *http.Request {
	ctx := r.Context()
	c := auth.CallerOf(ctx)
	if c == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return r
	}
	return r.WithContext(recipes.WithLeaseReader(ctx, func(id, owner string) bool {
		return (owner != "" && owner == c.Name) || c.May("leases", id, auth.LevelRead)
	}))
}
