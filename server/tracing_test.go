package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is a small OTLP/HTTP receiver on loopback: it decodes each
// ExportTraceServiceRequest posted to /v1/traces and keeps its spans.
type otlpReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	posts    int
	spans    []*tracepb.Span
	services []string // service.name of each resource
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP receiver: %s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			http.Error(w, "not OTLP/HTTP traces", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		data, err := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(data, &req)
		}
		if err != nil {
			t.Errorf("OTLP receiver: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.posts++
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					rc.services = append(rc.services, a.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// trace returns the spans received of the trace id.
func (rc *otlpReceiver) trace(id []byte) []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range rc.spans {
		if bytes.Equal(s.TraceId, id) {
			out = append(out, s)
		}
	}
	return out
}

func attrOf(attrs []*commonpb.KeyValue, key string) (*commonpb.AnyValue, bool) {
	for _, a := range attrs {
		if a.Key == key {
			return a.Value, true
		}
	}
	return nil, false
}

func stringAttr(attrs []*commonpb.KeyValue, key string) string {
	v, _ := attrOf(attrs, key)
	return v.GetStringValue()
}

// callerTrace is a caller's span context, as its traceparent sends it.
type callerTrace struct{ traceID, spanID []byte }

func newCallerTrace(t *testing.T, seed byte) callerTrace {
	c := callerTrace{traceID: make([]byte, 16), spanID: make([]byte, 8)}
	for i := range c.traceID {
		c.traceID[i] = seed + byte(i)
	}
	for i := range c.spanID {
		c.spanID[i] = seed ^ byte(0x80+i)
	}
	return c
}

func (c callerTrace) traceparent() string {
	return "00-" + hex.EncodeToString(c.traceID) + "-" + hex.EncodeToString(c.spanID) + "-01"
}

// acquireTraced sends an acquire of lock for a new lease, as secret, with
// the caller's traceparent.
func acquireTraced(ctx context.Context, url, secret, lock, holder, wait string, c callerTrace) (gwtest.Response, error) {
	body, _ := json.Marshal(map[string]any{"ttl": "1m", "holder": holder})
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/locks/"+lock+"/acquire?wait="+wait, bytes.NewReader(body))
	if err != nil {
		return gwtest.Response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Traceparent", c.traceparent())
	req.Header.Set("Tracestate", "zkgatetest=1")
	return gwtest.Send(http.DefaultClient, req)
}

// contendedAcquire is a wait of waiter for lock, held by holderLease of
// alice, that alice's release ends: it returns the waiter's lease, and the
// times just after the wait was seen in line and just before the release.
func contendedAcquire(t *testing.T, url string, secrets map[string]string, holderLease, waiter, lock string, c callerTrace) (lease string, inLine, released time.Time) {
	t.Helper()
	mustStatus(t, gwtest.DoAs(t, url, secrets["alice"], "POST", "/v1/locks/"+lock+"/acquire", map[string]any{"lease": holderLease}), 200, "alice holds "+lock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan gwtest.Response, 1)
	go func() {
		r, err := acquireTraced(ctx, url, secrets[waiter], lock, waiter+"'s job", "20s", c)
		if err != nil {
			t.Errorf("%s's acquire: %v", waiter, err)
		}
		got <- r
	}()
	waitFor(t, url, secrets["alice"], lock, 1)
	inLine = time.Now()
	released = time.Now()
	mustStatus(t, gwtest.DoAs(t, url, secrets["alice"], "POST", "/v1/locks/"+lock+"/release", map[string]any{"lease": holderLease}), 204, "alice releases "+lock)
	r := <-got
	mustStatus(t, r, 200, waiter+"'s acquire")
	return r.JSON(t)["lease"].(string), inLine, released
}

// TestTracesOfAContendedAcquire: with OTEL_EXPORTER_OTLP_ENDPOINT set, a
// contended acquire is a server span named by its route whose parent is
// the caller's traceparent, with a child for the wait in line that covers
// the wait, with the lease, name, kind and outcome, and children for the
// ZooKeeper round trips; the wait names the lease it waited behind and its
// holder label only to a caller that may read that lease. bob (no lease
// permission) sees no trace of alice's lease in his spans; carol (leases
// read) sees its id and label.
//
//zkgate:race
func TestTracesOfAContendedAcquire(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	file := filepath.Join(t.TempDir(), "tokens")
	secrets := map[string]string{}
	for name, perms := range map[string][]string{
		"alice": {"locks:tr-:write", "leases:*:write"},
		"bob":   {"locks:tr-:write"},
		"carol": {"locks:tr-:write", "leases:*:read"},
	} {
		s, err := auth.AddToken(file, name, perms)
		if err != nil {
			t.Fatal(err)
		}
		secrets[name] = s
	}
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: []string{"--auth-file", file},
		Env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rc.srv.URL, "OTEL_SERVICE_NAME": "zkgate-test"}})

	r := gwtest.DoAs(t, g.URL, secrets["alice"], "POST", "/v1/leases", map[string]any{"ttl": "1m", "holder": "alice's job"})
	mustStatus(t, r, 201, "alice's lease")
	alice := r.JSON(t)["id"].(string)
	bobTrace, carolTrace := newCallerTrace(t, 0x10), newCallerTrace(t, 0x40)
	bob, bobInLine, bobReleased := contendedAcquire(t, g.URL, secrets, alice, "bob", "tr-a", bobTrace)
	carol, _, _ := contendedAcquire(t, g.URL, secrets, alice, "carol", "tr-b", carolTrace)
	// bob holds tr-a: carol's try is a wait that times out.
	timeoutTrace := newCallerTrace(t, 0x60)
	r, err := acquireTraced(context.Background(), g.URL, secrets["carol"], "tr-a", "carol's try", "0s", timeoutTrace)
	if err != nil {
		t.Fatal(err)
	}
	wantProblem(t, r, http.StatusConflict, "timeout", "carol's try of the lock bob holds")
	g.Stop() // the spans left are sent on the way out

	rc.mu.Lock()
	services := rc.services
	rc.mu.Unlock()
	if len(services) == 0 || services[0] != "zkgate-test" {
		t.Errorf("service.name of the spans: %v, want zkgate-test (OTEL_SERVICE_NAME)", services)
	}

	// bob's trace.
	spans := rc.trace(bobTrace.traceID)
	server, wait := checkAcquireTrace(t, spans, bobTrace, "tr-a", bob)
	if server == nil || wait == nil {
		t.FailNow()
	}
	start, end := time.Unix(0, int64(wait.StartTimeUnixNano)), time.Unix(0, int64(wait.EndTimeUnixNano))
	if start.After(bobInLine) || end.Before(bobReleased) {
		t.Errorf("the wait's span, %s to %s, does not cover the wait: in line by %s, released at %s",
			start.Format(time.StampMicro), end.Format(time.StampMicro), bobInLine.Format(time.StampMicro), bobReleased.Format(time.StampMicro))
	}
	behind := 0
	for _, ev := range wait.Events {
		if ev.Name != "behind" {
			continue
		}
		behind++
		if v, ok := attrOf(ev.Attributes, "zkgate.hidden"); !ok || !v.GetBoolValue() {
			t.Errorf("bob, who may not read alice's lease, sees whom he waited behind: %v", ev.Attributes)
		}
	}
	if behind == 0 {
		t.Errorf("bob's wait has no behind event: %v", wait.Events)
	}
	// Nothing of alice's lease anywhere in bob's trace.
	for _, s := range spans {
		text := fmt.Sprint(s.Attributes, s.Events)
		if strings.Contains(text, alice) || strings.Contains(text, "alice's job") {
			t.Errorf("bob's span %q shows alice's lease: %s", s.Name, text)
		}
	}

	// carol's try: a wait that timed out, its status on the request's span.
	var timedOut, tryServer *tracepb.Span
	for _, s := range rc.trace(timeoutTrace.traceID) {
		switch s.Name {
		case "lock wait":
			timedOut = s
		case "POST /v1/locks/{name}/acquire":
			tryServer = s
		}
	}
	if timedOut == nil || tryServer == nil || stringAttr(timedOut.Attributes, "zkgate.outcome") != "timeout" {
		t.Errorf("carol's try: wait span %v, server span %v; want outcome timeout", timedOut, tryServer)
	} else if v, _ := attrOf(tryServer.Attributes, "http.response.status_code"); v.GetIntValue() != http.StatusConflict {
		t.Errorf("carol's try: the server span's status: %v", tryServer.Attributes)
	}

	// carol's trace: she may read alice's lease.
	_, cwait := checkAcquireTrace(t, rc.trace(carolTrace.traceID), carolTrace, "tr-b", carol)
	if cwait != nil {
		seen := false
		for _, ev := range cwait.Events {
			if ev.Name == "behind" && stringAttr(ev.Attributes, "zkgate.lease") == alice && stringAttr(ev.Attributes, "zkgate.holder") == "alice's job" {
				seen = true
			}
		}
		if !seen {
			t.Errorf("carol, who may read alice's lease, does not see it behind her wait: %v", cwait.Events)
		}
	}
}

// checkAcquireTrace checks the spans of one caller's contended acquire of
// lock for lease, and returns its server span and its wait's.
func checkAcquireTrace(t *testing.T, spans []*tracepb.Span, c callerTrace, lock, lease string) (server, wait *tracepb.Span) {
	t.Helper()
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[string(s.SpanId)] = s
		switch s.Name {
		case "POST /v1/locks/{name}/acquire":
			server = s
		case "lock wait":
			wait = s
		}
	}
	if server == nil || wait == nil {
		t.Errorf("the trace of %s's acquire has no server span or no wait span: %d spans", lock, len(spans))
		return nil, nil
	}
	if !bytes.Equal(server.ParentSpanId, c.spanID) || server.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("the server span's parent is %x (kind %v), want the caller's %x", server.ParentSpanId, server.Kind, c.spanID)
	}
	if server.TraceState != "zkgatetest=1" {
		t.Errorf("the server span's tracestate is %q, want the caller's", server.TraceState)
	}
	if v, _ := attrOf(server.Attributes, "http.response.status_code"); v.GetIntValue() != 200 {
		t.Errorf("the server span's status: %v", server.Attributes)
	}
	if got := stringAttr(server.Attributes, "http.route"); got != "/v1/locks/{name}/acquire" {
		t.Errorf("the server span's http.route is %q", got)
	}
	if !bytes.Equal(wait.ParentSpanId, server.SpanId) {
		t.Errorf("the wait's span is not a child of the request's")
	}
	for key, want := range map[string]string{"zkgate.kind": "lock", "zkgate.name": lock, "zkgate.lease": lease,
		"zkgate.mode": "exclusive", "zkgate.outcome": "granted"} {
		if got := stringAttr(wait.Attributes, key); got != want {
			t.Errorf("the wait's %s is %q, want %q", key, got, want)
		}
	}
	if v, _ := attrOf(wait.Attributes, "zkgate.token"); v.GetIntValue() <= 0 {
		t.Errorf("the wait's span has no token: %v", wait.Attributes)
	}
	if wait.StartTimeUnixNano < server.StartTimeUnixNano || wait.EndTimeUnixNano > server.EndTimeUnixNano {
		t.Errorf("the wait's span is not within the request's")
	}
	// Every ZooKeeper round trip is a child of the request, or of its wait.
	zkUnderWait, zkOps := 0, []string{}
	for _, s := range spans {
		if s != server && byID[string(s.ParentSpanId)] == nil {
			t.Errorf("span %q's parent is not in the trace", s.Name)
		}
		if !strings.HasPrefix(s.Name, "zk ") {
			continue
		}
		zkOps = append(zkOps, s.Name+" "+stringAttr(s.Attributes, "zkgate.zk.path"))
		if stringAttr(s.Attributes, "db.system.name") != "zookeeper" || !strings.Contains(stringAttr(s.Attributes, "zkgate.zk.path"), "/") {
			t.Errorf("ZooKeeper span %q: %v", s.Name, s.Attributes)
		}
		if bytes.Equal(s.ParentSpanId, wait.SpanId) {
			zkUnderWait++
		}
	}
	t.Logf("%s: %d spans; ZooKeeper round trips %v", lock, len(spans), zkOps)
	if zkUnderWait < 2 {
		t.Errorf("the wait has %d ZooKeeper round trips (%v), want its create and its watch at least", zkUnderWait, zkOps)
	}
	return server, wait
}

// TestNoTracesWhenOff: with OTEL_TRACES_EXPORTER=none, an endpoint given or
// not, a gateway exports nothing, whatever traceparent its callers send.
func TestNoTracesWhenOff(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{
		Env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rc.srv.URL, "OTEL_TRACES_EXPORTER": "none"}})
	c := newCallerTrace(t, 0x70)
	r, err := acquireTraced(context.Background(), g.URL, "", "off", "nobody", "0s", c)
	if err != nil {
		t.Fatal(err)
	}
	mustStatus(t, r, 200, "acquire")
	g.Stop()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.posts != 0 || len(rc.spans) != 0 {
		t.Errorf("tracing off, the receiver got %d posts, %d spans", rc.posts, len(rc.spans))
	}
}

// TestTraceGoesOnAtTheKeeper: a request for a lease another gateway keeps
// is forwarded with its trace: the keeper's server span is a child of the
// first gateway's, itself a child of the caller's. A semaphore's wait is
// a span as a lock's is.
func TestTraceGoesOnAtTheKeeper(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rc.srv.URL}
	a := gwtest.StartGateway(t, gwtest.GatewayOptions{Env: env})
	b := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: a.Root, Env: env})
	lease := newLease(t, a.URL, "30s", "roaming")
	c := newCallerTrace(t, 0x20)
	body, _ := json.Marshal(map[string]any{"lease": lease})
	req, err := http.NewRequest("POST", b.URL+"/v1/locks/roaming/acquire", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", c.traceparent())
	mustStatus(t, gwtest.MustSend(t, http.DefaultClient, req), 200, "acquire through b")
	// A semaphore's wait is a span too.
	sem := newCallerTrace(t, 0x30)
	body, _ = json.Marshal(map[string]any{"lease": lease, "limit": 2})
	req, err = http.NewRequest("POST", a.URL+"/v1/semaphores/roaming/acquire", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", sem.traceparent())
	mustStatus(t, gwtest.MustSend(t, http.DefaultClient, req), 200, "a semaphore's slot")
	a.Stop()
	b.Stop()
	semWaits := 0
	for _, s := range rc.trace(sem.traceID) {
		if s.Name == "semaphore wait" {
			semWaits++
			if stringAttr(s.Attributes, "zkgate.kind") != "semaphore" || stringAttr(s.Attributes, "zkgate.name") != "roaming" ||
				stringAttr(s.Attributes, "zkgate.outcome") != "granted" || stringAttr(s.Attributes, "zkgate.lease") != lease {
				t.Errorf("the semaphore's wait: %v", s.Attributes)
			}
		}
	}
	if semWaits != 1 {
		t.Errorf("%d semaphore wait spans, want 1", semWaits)
	}
	var servers []*tracepb.Span
	var wait *tracepb.Span
	for _, s := range rc.trace(c.traceID) {
		switch s.Name {
		case "POST /v1/locks/{name}/acquire":
			servers = append(servers, s)
		case "lock wait":
			wait = s
		}
	}
	if len(servers) != 2 || wait == nil {
		t.Fatalf("%d server spans and wait span %v, want b's and a's, and a's wait", len(servers), wait)
	}
	first, keeper := servers[0], servers[1]
	if !bytes.Equal(first.ParentSpanId, c.spanID) {
		first, keeper = keeper, first
	}
	if !bytes.Equal(first.ParentSpanId, c.spanID) || !bytes.Equal(keeper.ParentSpanId, first.SpanId) {
		t.Errorf("parents: %x and %x, want the caller's %x, then the first gateway's span", first.ParentSpanId, keeper.ParentSpanId, c.spanID)
	}
	if !bytes.Equal(wait.ParentSpanId, keeper.SpanId) || stringAttr(wait.Attributes, "zkgate.lease") != lease {
		t.Errorf("the wait is not the keeper's, for the lease: %v", wait.Attributes)
	}
}
