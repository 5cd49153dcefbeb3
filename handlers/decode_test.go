package handlers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/zkgate/zkgate/auth/peers"
	"github.com/zkgate/zkgate/recipes"
)

// wantCode fails unless err is a *recipes.Error of code.
func wantCode(t *testing.T, err error, code recipes.Code) {
	t.Helper()
	var e *recipes.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *recipes.Error", err, err)
	}
	if e.Code != code {
		t.Fatalf("error code %s, want %s: %v", e.Code, code, err)
	}
}

func durationPtr(d time.Duration) *recipes.Duration {
	v := recipes.Duration(d)
	return &v
}

func TestDecodeBodyAcquire(t *testing.T) {
	const lease = "0b5c6f7e-1a2b-4c3d-8e9f-001122334455"
	tests := []struct {
		body    string
		want    acquireBody
		wantErr string // a part of the detail; "" means no error
	}{
		{body: ``},
		{body: "  \n\t "},
		{body: `null`},
		{body: `{}`},
		{body: ` {"lease":"` + lease + `"} `, want: acquireBody{leaseRef: leaseRef{Lease: lease}}},
		{body: `{"lease":"` + lease + `","mode":"read"}`, want: acquireBody{leaseRef: leaseRef{Lease: lease}, Mode: "read"}},
		{body: `{"ttl":"30s","holder":"cron"}`, want: acquireBody{leaseRef: leaseRef{TTL: durationPtr(30 * time.Second), Holder: "cron"}}},
		{body: `{"ttl":"1h0m0s"}`, want: acquireBody{leaseRef: leaseRef{TTL: durationPtr(time.Hour)}}},
		{body: `{"lease":null}`},
		{body: `{"holder":"caf\u00e9"}`, want: acquireBody{leaseRef: leaseRef{Holder: "café"}}},

		{body: `{"lease":5}`, wantErr: `field "lease" must be a string`},
		{body: `{"mode":true}`, wantErr: `field "mode" must be a string`},
		{body: `{"holder":["a"]}`, wantErr: `field "holder" must be a string`},
		{body: `{"ttl":15}`, wantErr: `a duration must be a string`},
		{body: `{"ttl":"soon"}`, wantErr: `"soon" is not a duration`},
		{body: `{"ttl":"-5s"}`, wantErr: `"-5s" is negative`},
		{body: `{"color":"red"}`, wantErr: `unknown field "color"`},
		{body: `{"LEASE":"` + lease + `"}`, wantErr: `unknown field "LEASE"`},
		{body: `{"Mode":"read"}`, wantErr: `unknown field "Mode"`},
		{body: `{"mode":"read","mode":"write"}`, wantErr: `field "mode" is given twice`},
		{body: `{"leaseRef":{}}`, wantErr: `unknown field "leaseRef"`},
		{body: `[]`, wantErr: `the body must be a JSON object`},
		{body: `"lease"`, wantErr: `the body must be a JSON object`},
		{body: `42`, wantErr: `the body must be a JSON object`},
		{body: `{"lease":"x"`, wantErr: `bad body`},
		{body: `{"lease":"x",}`, wantErr: `not valid JSON`},
		{body: `{} {}`, wantErr: `one JSON object`},
		{body: `{}]`, wantErr: `one JSON object`},
		{body: `{}x`, wantErr: `one JSON object`},
		{body: "\xff", wantErr: `not valid JSON`},
		{body: `lease=abc`, wantErr: `not valid JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			var got acquireBody
			err := decodeBody([]byte(tt.body), &got)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("decodeBody: %v", err)
				}
				if got.Lease != tt.want.Lease || got.Holder != tt.want.Holder || got.Mode != tt.want.Mode ||
					(got.TTL == nil) != (tt.want.TTL == nil) || (got.TTL != nil && *got.TTL != *tt.want.TTL) {
					t.Fatalf("decoded %+v, want %+v", got, tt.want)
				}
				return
			}
			wantCode(t, err, recipes.CodeInvalid)
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not say %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "handlers.") || strings.Contains(err.Error(), "leaseRef.") {
				t.Fatalf("error %q names Go types", err)
			}
		})
	}
}

// A body is decoded without a copy of it in a json.Decoder's buffer (the
// Decoder reads only bodies Unmarshal finds broken, for its errors): an
// acquire's body, decoded on every request, takes 15 allocations and
// under 600 bytes (with a Decoder: 17 and 1,200).
func TestDecodeBodyAllocations(t *testing.T) {
	// Serial: it reads the whole binary's allocations.
	body := []byte(`{"lease":"0b5c6f7e-1a2b-4c3d-8e9f-001122334455","mode":"read"}`)
	decode := func() {
		var v acquireBody
		if err := decodeBody(body, &v); err != nil || v.Mode != "read" {
			t.Fatalf("decodeBody: %v (%+v)", err, v)
		}
	}
	if n := testing.AllocsPerRun(200, decode); n > 15 {
		t.Errorf("%.0f allocations per body, want at most 15", n)
	}
	const runs = 1000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		decode()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per >= 600 {
		t.Errorf("%d bytes allocated per body, want under 600", per)
	}
}

// A key unknown to a nested object is refused as one at the top is: the
// handover's session is an object of its own.
func TestDecodeBodyNestedUnknownField(t *testing.T) {
	t.Parallel()
	var wire peers.HandoverWire
	err := decodeBody([]byte(`{"session":{"id":7,"color":"red"},"from":"gw-1","leases":[]}`), &wire)
	wantCode(t, err, recipes.CodeInvalid)
	if !strings.Contains(err.Error(), `unknown field "color"`) {
		t.Fatalf("error %q does not name the unknown field", err)
	}
	err = decodeBody([]byte(`{"session":{"id":7},"from":"gw-1","leases":[{"id":"x","color":"red"}]}`), &wire)
	wantCode(t, err, recipes.CodeInvalid)
	if err := decodeBody([]byte(`{"session":{"id":7},"from":"gw-1","leases":[]}`), &wire); err != nil || wire.Session.ID != 7 {
		t.Fatalf("decodeBody: %v (%+v)", err, wire)
	}
	for _, c := range []struct {
		v    any
		flat bool
	}{{&acquireBody{}, true}, {&releaseBody{}, true}, {&semAcquireBody{}, true}, {&leaseBody{}, true}, {&peers.HandoverWire{}, false}, {&map[string]any{}, false}} {
		if got := flatBody(c.v); got != c.flat {
			t.Errorf("flatBody(%T) = %v, want %v", c.v, got, c.flat)
		}
	}
}

func TestDecodeBodySemaphore(t *testing.T) {
	tests := []struct {
		body      string
		wantLimit int // 0: absent
		wantErr   string
	}{
		{body: `{"limit":3}`, wantLimit: 3},
		{body: `{"limit":0}`}, // decoded; the handler checks the bounds
		{body: `{}`},
		{body: `{"limit":"3"}`, wantErr: `field "limit" must be an integer`},
		{body: `{"limit":1.5}`, wantErr: `field "limit" must be an integer`},
		{body: `{"limit":1e400}`, wantErr: `field "limit" must be an integer`},
		{body: `{"limit":99999999999999999999}`, wantErr: `field "limit" must be an integer`},
		{body: `{"limit":3,"Limit":4}`, wantErr: `unknown field "Limit"`},
		{body: `{"limit":3,"mode":"read"}`, wantErr: `unknown field "mode"`},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			var got semAcquireBody
			err := decodeBody([]byte(tt.body), &got)
			if tt.wantErr != "" {
				wantCode(t, err, recipes.CodeInvalid)
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %q does not say %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("decodeBody: %v", err)
			}
			if tt.wantLimit != 0 && (got.Limit == nil || *got.Limit != tt.wantLimit) {
				t.Fatalf("limit %v, want %d", got.Limit, tt.wantLimit)
			}
		})
	}
}

// TestDecodeBodyFieldNames checks that every body type accepts exactly its
// JSON field names, embedded ones included.
func TestDecodeBodyFieldNames(t *testing.T) {
	tests := []struct {
		v     any
		names []string
	}{
		{&leaseBody{}, []string{"ttl", "holder", "lock_delay"}},
		{&acquireBody{}, []string{"lease", "ttl", "holder", "lock_delay", "mode"}},
		{&semAcquireBody{}, []string{"lease", "ttl", "holder", "lock_delay", "limit"}},
		{&releaseBody{}, []string{"lease", "mode"}},
		{&leaveBody{}, []string{"lease", "member"}},
		{&proclaimBody{}, []string{"lease", "value"}},
		{&heldRef{}, []string{"lease"}},
		{&leaseRef{}, []string{"lease", "ttl", "holder", "lock_delay"}},
	}
	for _, tt := range tests {
		names := map[string]bool{}
		jsonNames(reflect.TypeOf(tt.v).Elem(), names)
		if len(names) != len(tt.names) {
			t.Errorf("%T has JSON fields %v, want %v", tt.v, names, tt.names)
		}
		for _, n := range tt.names {
			if !names[n] {
				t.Errorf("%T lacks JSON field %q (has %v)", tt.v, n, names)
			}
		}
	}
}

func TestDecodeJSONContentType(t *testing.T) {
	tests := []struct {
		contentType string
		wantCode    recipes.Code // "" means accepted
	}{
		{"", ""},
		{"application/json", ""},
		{"application/json; charset=utf-8", ""},
		{"APPLICATION/JSON", ""},
		{"application/merge-patch+json", ""},
		{"application/problem+json", ""},
		{"application/x-www-form-urlencoded", ""}, // curl -d
		{"text/plain", ""},
		{"text/plain; charset=utf-8", ""},
		{"application/xml", CodeMediaType},
		{"text/html", CodeMediaType},
		{"multipart/form-data; boundary=x", CodeMediaType},
		{"application/octet-stream", CodeMediaType},
		{"image/png", CodeMediaType},
		{"json", CodeMediaType},
		{"application/json; charset", CodeMediaType}, // not a media type
		{";;;", CodeMediaType},
	}
	for _, tt := range tests {
		t.Run(tt.contentType, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/locks/x/acquire", strings.NewReader(`{"mode":"read"}`))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			var body acquireBody
			err := decodeJSON(r, &body)
			if tt.wantCode == "" {
				if err != nil || body.Mode != "read" {
					t.Fatalf("decodeJSON: %v, mode %q", err, body.Mode)
				}
				return
			}
			wantCode(t, err, tt.wantCode)
			if statusOf[tt.wantCode] != http.StatusUnsupportedMediaType {
				t.Fatalf("%s maps to %d", tt.wantCode, statusOf[tt.wantCode])
			}
		})
	}
}

func TestDecodeJSONTooLarge(t *testing.T) {
	body := `{"holder":"` + strings.Repeat("x", 100) + `"}`
	r := httptest.NewRequest("POST", "/v1/leases", strings.NewReader(body))
	w := httptest.NewRecorder()
	r.Body = http.MaxBytesReader(w, r.Body, 64)
	var v leaseBody
	err := decodeJSON(r, &v)
	wantCode(t, err, recipes.CodeTooLarge)
	if !strings.Contains(err.Error(), "64 bytes") {
		t.Fatalf("error %q does not give the limit", err)
	}
}

// parseCase is a case of a parser's table: the input, what it gives, and
// whether it is accepted.
type parseCase[T comparable] struct {
	in   string
	want T
	ok   bool
}

// check runs parse, named name, on the case's input and reports what it
// gives when that is not the case's; it returns parse's error, for the
// caller's checks of it.
func (c parseCase[T]) check(t *testing.T, name string, parse func(string) (T, error)) error {
	t.Helper()
	got, err := parse(c.in)
	if (err == nil) != c.ok || got != c.want {
		t.Errorf("%s(%q) = %v, %v; want %v, ok %v", name, c.in, got, err, c.want, c.ok)
	}
	return err
}

func TestDurationUnmarshalJSON(t *testing.T) {
	tests := []parseCase[time.Duration]{
		{`"15s"`, 15 * time.Second, true},
		{`"500ms"`, 500 * time.Millisecond, true},
		{`"1h0m0s"`, time.Hour, true},
		{`"0"`, 0, true},
		{`"0s"`, 0, true},
		{`15`, 0, false},
		{`null`, 0, false},
		{`"15"`, 0, false},
		{`"-1s"`, 0, false},
		{`{"s":1}`, 0, false},
		{`"1y"`, 0, false},
	}
	for _, tt := range tests {
		tt.check(t, "UnmarshalJSON", func(in string) (time.Duration, error) {
			var d recipes.Duration
			err := d.UnmarshalJSON([]byte(in))
			return time.Duration(d), err
		})
	}
}

func TestParseDuration(t *testing.T) {
	tests := []parseCase[time.Duration]{
		{"0", 0, true},
		{"0s", 0, true},
		{"-0s", 0, true},
		{"+5s", 5 * time.Second, true},
		{"15s", 15 * time.Second, true},
		{"1.5s", 1500 * time.Millisecond, true},
		{".5s", 500 * time.Millisecond, true},
		{"1.s", time.Second, true},
		{"2m30s", 150 * time.Second, true},
		{"1h0m0s", time.Hour, true},
		{"10us", 10 * time.Microsecond, true},
		{"10µs", 10 * time.Microsecond, true},
		{"10μs", 10 * time.Microsecond, true},
		{"3ns", 3, true},
		{"2562047h", 2562047 * time.Hour, true},

		{"", 0, false},
		{"5", 0, false},
		{"s", 0, false},
		{".s", 0, false},
		{"-1s", 0, false},
		{"-1ns", 0, false},
		{"1x", 0, false},
		{"1 s", 0, false},
		{" 1s", 0, false},
		{"1e3s", 0, false},
		{"1d", 0, false},
		{"9999999999h", 0, false}, // overflows
		{"forever", 0, false},
	}
	for _, tt := range tests {
		if err := tt.check(t, "ParseDuration", recipes.ParseDuration); err != nil && !strings.Contains(err.Error(), tt.in) {
			t.Errorf("ParseDuration(%q): the error %q does not quote the input", tt.in, err)
		}
	}
}

func requestWithQuery(rawQuery string) *http.Request {
	r := httptest.NewRequest("GET", "/v1/locks/x", nil)
	r.URL.RawQuery = rawQuery
	return r
}

// checkQueries checks a query parser, named name, against its table: each
// case's query is a request's, and a query refused is invalid_request.
func checkQueries[T comparable](t *testing.T, name string, tests []parseCase[T], parse func(*http.Request) (T, error)) {
	t.Helper()
	for _, tt := range tests {
		err := tt.check(t, name, func(query string) (T, error) { return parse(requestWithQuery(query)) })
		if err != nil {
			wantCode(t, err, recipes.CodeInvalid)
		}
	}
}

func TestParseWait(t *testing.T) {
	const maxWait = time.Minute
	tests := []parseCase[time.Duration]{
		{"", 0, true},
		{"wait=", 0, true},
		{"index=5", 0, true},
		{"wait=0", 0, true},
		{"wait=0s", 0, true},
		{"wait=250ms", 250 * time.Millisecond, true},
		{"wait=1m", time.Minute, true},
		{"wait=60s", time.Minute, true},
		{"wait=1m&wait=2m", time.Minute, true}, // the first one counts
		{"wait=1%6D", time.Minute, true},       // percent-encoded "m"

		{"wait=1m0.000000001s", 0, false}, // above the cap by 1ns
		{"wait=2m", 0, false},
		{"wait=-1s", 0, false},
		{"wait=10", 0, false},
		{"wait=soon", 0, false},
		{"wait=1%20s", 0, false},
		{"wait=9999999999h", 0, false},
	}
	checkQueries(t, "parseWait", tests, func(r *http.Request) (time.Duration, error) { return parseWait(r, maxWait) })
	if _, err := parseWait(requestWithQuery("wait=2m"), maxWait); err == nil || !strings.Contains(err.Error(), "cap of 1m0s") {
		t.Errorf("a wait above the cap must say the cap: %v", err)
	}
}

func TestParseIndex(t *testing.T) {
	tests := []parseCase[int64]{
		{"", 0, true},
		{"index=", 0, true},
		{"index=0", 0, true},
		{"index=42", 42, true},
		{"index=%2B42", 42, true}, // a raw "+" in a query is a space
		{"index=+42", 0, false},
		{"index=007", 7, true},
		{"index=9223372036854775807", 9223372036854775807, true},

		{"index=-1", 0, false},
		{"index=9223372036854775808", 0, false},
		{"index=1.5", 0, false},
		{"index=0x10", 0, false},
		{"index=abc", 0, false},
		{"index=%20", 0, false},
	}
	checkQueries(t, "parseIndex", tests, parseIndex)
	// blockingParams reads both, the index first.
	if _, _, err := blockingParams(requestWithQuery("index=x&wait=2m"), time.Minute); err == nil || !strings.Contains(err.Error(), "index") {
		t.Errorf("blockingParams: %v, want the index error", err)
	}
	if i, w, err := blockingParams(requestWithQuery("index=7&wait=3s"), time.Minute); err != nil || i != 7 || w != 3*time.Second {
		t.Errorf("blockingParams = %d, %v, %v", i, w, err)
	}
}

func TestValidLeaseID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"0b5c6f7e-1a2b-4c3d-8e9f-001122334455", true},
		{"00000000-0000-4000-8000-000000000000", true},
		{"ffffffff-ffff-ffff-ffff-ffffffffffff", true},
		{"3f2a9c1e-7b4d-4e8f-a1b2-c3d4e5f60718", true},

		{"", false},
		{"nope", false},
		{"0B5C6F7E-1A2B-4C3D-8E9F-001122334455", false},      // upper case
		{"0b5c6f7e1a2b4c3d8e9f001122334455", false},          // no dashes
		{"0b5c6f7e-1a2b-4c3d-8e9f-00112233445", false},       // 35
		{"0b5c6f7e-1a2b-4c3d-8e9f-0011223344556", false},     // 37
		{"0b5c6f7e_1a2b-4c3d-8e9f-001122334455", false},      // _ for -
		{"0b5c6f7e-1a2b-4c3d-8e9f-00112233445g", false},      // g
		{"0b5c6f7e-1a2b-4c3d-8e9f-0011223344-5", false},      // a dash out of place
		{"{b5c6f7e-1a2b-4c3d-8e9f-001122334455}", false},     // braces
		{"0b5c6f7e-1a2b-4c3d-8e9f-00112233445\u00e9", false}, // 36 bytes, not ASCII
	}
	for _, tt := range tests {
		err := validLeaseID(tt.id)
		if (err == nil) != tt.ok {
			t.Errorf("validLeaseID(%q) = %v, want ok %v", tt.id, err, tt.ok)
		}
		if err != nil {
			wantCode(t, err, recipes.CodeInvalid)
		}
	}
}

// withName returns a request whose chi route has {name} = name.
func withName(name string) *http.Request {
	r := httptest.NewRequest("GET", "/v1/locks/x", nil)
	rctx := chi.NewRouteContext()
	rctx.URLParams.Add("name", name)
	return r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx))
}

func TestNameParam(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"orders", true},
		{"orders-db.v2_primary", true},
		{"A-Z.a-z_0-9", true},
		{"...", true},
		{".a", true},
		{"a.", true},
		{"-", true},
		{"_", true},
		{"..a", true},
		{strings.Repeat("n", 200), true},

		{"", false},
		{".", false},
		{"..", false},
		{strings.Repeat("n", 201), false},
		{"a b", false},
		{"a/b", false},
		{"../etc", false},
		{"a%2Fb", false},
		{"caf\u00e9", false},
		{"\u212a", false}, // Kelvin sign, folds to K
		{"a\x00", false},
		{"a\n", false},
		{"a:b", false},
		{"a*", false},
		{"zookeeper/quota", false},
	}
	for _, tt := range tests {
		got, err := nameParam(withName(tt.name))
		if (err == nil) != tt.ok {
			t.Errorf("nameParam(%q) = %v, want ok %v", tt.name, err, tt.ok)
			continue
		}
		if err != nil {
			wantCode(t, err, recipes.CodeInvalid)
		} else if got != tt.name {
			t.Errorf("nameParam(%q) returned %q", tt.name, got)
		}
	}
	// With no route context at all there is no name.
	if _, err := nameParam(httptest.NewRequest("GET", "/", nil)); err == nil {
		t.Errorf("nameParam without a route: no error")
	}
}

// TestEveryCodeHasStatusAndTitle keeps the one code -> status table whole.
func TestEveryCodeHasStatusAndTitle(t *testing.T) {
	for code, status := range statusOf {
		if titles[code] == "" {
			t.Errorf("code %s has no title", code)
		}
		if status < 400 || status > 599 {
			t.Errorf("code %s maps to %d", code, status)
		}
	}
	for code := range titles {
		if _, ok := statusOf[code]; !ok {
			t.Errorf("code %s has a title but no status", code)
		}
	}
}
