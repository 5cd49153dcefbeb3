package server

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestParseTracing: tracing is off with nothing set (no exporter, no SDK:
// a nil config), on with an OTLP endpoint or OTEL_TRACES_EXPORTER=otlp,
// off again with none or OTEL_SDK_DISABLED; a value zkgate cannot follow is
// a usage error, never tracing silently off.
func TestParseTracing(t *testing.T) {
	for _, c := range []struct {
		name     string
		env      map[string]string
		endpoint string // "": off
		sampler  string
		service  string
		delay    time.Duration
		err      string // a usage error naming this
	}{
		{name: "nothing set", env: map[string]string{}},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/"},
			endpoint: "http://127.0.0.1:4318/v1/traces", sampler: "parentbased_always_on", service: "zkgate"},
		{name: "traces endpoint as it is", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b:2/custom"}, endpoint: "https://b:2/custom", sampler: "parentbased_always_on", service: "zkgate"},
		{name: "otlp, default endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SERVICE_NAME": "locks-eu",
			"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25", "OTEL_BSP_SCHEDULE_DELAY": "200"},
			endpoint: defaultTracesEndpoint, sampler: "parentbased_traceidratio:0.25", service: "locks-eu", delay: 200 * time.Millisecond},
		{name: "none wins over an endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1"}},
		{name: "sdk disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1"}},
		{name: "always_off", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_TRACES_SAMPLER": "always_off"},
			endpoint: "http://a:1/v1/traces", sampler: "always_off", service: "zkgate"},
		{name: "another exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{name: "grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "unknown sampler", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_TRACES_SAMPLER": "sometimes"}, err: "OTEL_TRACES_SAMPLER"},
		{name: "ratio out of range", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_TRACES_SAMPLER": "traceidratio",
			"OTEL_TRACES_SAMPLER_ARG": "2"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		{name: "not a URL", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4318"}, err: "collector:4318"},
		{name: "bad delay", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_BSP_SCHEDULE_DELAY": "5s"}, err: "OTEL_BSP_SCHEDULE_DELAY"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseTracing(func(k string) string { return c.env[k] })
			if c.err != "" {
				var ue *UsageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, %v; want a usage error naming %s", got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.endpoint == "" {
				if got != nil {
					t.Fatalf("tracing on: %+v", got)
				}
				tracer, stop, err := startTracing(got, "gw", nil)
				if tracer != nil || err != nil {
					t.Fatalf("startTracing of no config: %v, %v", tracer, err)
				}
				stop()
				return
			}
			if got == nil || got.endpoint != c.endpoint || got.samplerArg != c.sampler || got.service != c.service || got.batchDelay != c.delay {
				t.Fatalf("got %+v, want endpoint %s, sampler %s, service %s, delay %s", got, c.endpoint, c.sampler, c.service, c.delay)
			}
		})
	}
}
