package handlers

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/zkgate/zkgate/recipes"
)

// The fuzzers below run their seeds in every `go test`; to search further:
//
//	go test ./handlers -run='^$' -fuzz=FuzzDecodeBody -fuzztime=20s
//
// Crashers that the fuzzers find land in testdata/fuzz/<Fuzzer>/ and are
// kept there as seeds.

// specPattern returns the compiled pattern of a schema of openapi.yaml, so
// that the parsers are fuzzed against the contract as well as for panics.
func specPattern(tb testing.TB, schema string) *regexp.Regexp {
	tb.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../openapi.yaml")
	if err != nil {
		tb.Fatalf("load openapi.yaml: %v", err)
	}
	ref := doc.Components.Schemas[schema]
	if ref == nil || ref.Value == nil || ref.Value.Pattern == "" {
		tb.Fatalf("openapi.yaml has no pattern for schema %s", schema)
	}
	re, err := regexp.Compile(ref.Value.Pattern)
	if err != nil {
		tb.Fatalf("schema %s: %v", schema, err)
	}
	return re
}

// mustBeInvalid fails unless err is a *recipes.Error of code invalid_request
// whose detail names no Go type.
func mustBeInvalid(t *testing.T, what string, err error) {
	t.Helper()
	var e *recipes.Error
	if !errors.As(err, &e) || e.Code != recipes.CodeInvalid {
		t.Fatalf("%s: error %v (%T) is not an invalid_request *recipes.Error", what, err, err)
	}
	if strings.Contains(e.Detail, "handlers.") || strings.Contains(e.Detail, "leaseRef.") {
		t.Fatalf("%s: the detail %q names Go types", what, e.Detail)
	}
}

func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		``, ` `, `null`, `{}`, `[]`, `"x"`, `0`, `true`,
		`{"lease":"0b5c6f7e-1a2b-4c3d-8e9f-001122334455"}`,
		`{"lease":"0b5c6f7e-1a2b-4c3d-8e9f-001122334455","mode":"write"}`,
		`{"ttl":"30s","holder":"cron"}`,
		`{"ttl":"1h0m0s","holder":"caf\u00e9","mode":"read"}`,
		`{"limit":3,"lease":"x"}`,
		`{"ttl":15}`, `{"ttl":null}`, `{"ttl":"-1s"}`, `{"ttl":"9999999999h"}`,
		`{"lease":5}`, `{"mode":{}}`, `{"holder":[1,2]}`,
		`{"LEASE":"x"}`, `{"Lease":"x"}`, `{"lease":"a","lease":"b"}`, `{"leaseRef":{}}`,
		`{"color":"red"}`, `{"\u006cease":"x"}`, `{"le\u0000ase":"x"}`,
		`{} {}`, `{}]`, `{}x`, `{"lease":"x"`, `{"lease":"x",}`, `{"a":1e400}`,
		"\xff", "\xef\xbb\xbf{}", `lease=abc&mode=read`,
		strings.Repeat("[", 20000), strings.Repeat(`{"a":`, 100),
	} {
		f.Add([]byte(s))
	}
	acquireNames := map[string]bool{"lease": true, "ttl": true, "holder": true, "mode": true}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v acquireBody
		err := decodeBody(body, &v)
		if err != nil {
			mustBeInvalid(t, "acquireBody", err)
		} else {
			if v.TTL != nil && *v.TTL < 0 {
				t.Fatalf("accepted a negative ttl %v from %q", time.Duration(*v.TTL), body)
			}
			// What is accepted is empty, null, or one object of known keys.
			var keys map[string]json.RawMessage
			if trimmed := strings.TrimSpace(string(body)); trimmed != "" && trimmed != "null" {
				if err := json.Unmarshal(body, &keys); err != nil {
					t.Fatalf("accepted %q, which is not one JSON object: %v", body, err)
				}
			}
			for k := range keys {
				if !acquireNames[k] {
					t.Fatalf("accepted the key %q in %q", k, body)
				}
			}
		}
		// The other body types: never a panic, only invalid_request.
		for _, target := range []any{&semAcquireBody{}, &leaseBody{}, &releaseBody{}, &leaseRef{}} {
			if err := decodeBody(body, target); err != nil {
				mustBeInvalid(t, "decodeBody", err)
			}
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"0", "0s", "-0", "+0", "15s", "500ms", "1.5s", ".5s", "1.s", "1h0m0s", "2m30s", "10us", "10µs", "10μs", "3ns",
		"2562047h", "2562048h", "9223372036854775807ns", "9223372036854775808ns", "-1s", "", "5", "s", ".s", "1x",
		"1 s", "1e3s", "+5s", "1d", "00", "0.0", "1s2", "\x00", "\xff", "μ", "9999999999999999999999h",
	} {
		f.Add(s)
	}
	durationRE := specPattern(f, "Duration")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := recipes.ParseDuration(s)
		std, stdErr := time.ParseDuration(s)
		if err == nil {
			if stdErr != nil || std != d || d < 0 {
				t.Fatalf("ParseDuration(%q) = %v, but time.ParseDuration says %v, %v", s, d, std, stdErr)
			}
		} else if stdErr == nil && std >= 0 {
			t.Fatalf("ParseDuration(%q) refused a non-negative duration %v: %v", s, std, err)
		}
		// In JSON bodies, as strings.
		quoted, _ := json.Marshal(s)
		var jd recipes.Duration
		if jerr := jd.UnmarshalJSON(quoted); (jerr == nil) != (err == nil) || (jerr == nil && time.Duration(jd) != d) {
			t.Fatalf("Duration.UnmarshalJSON(%s) = %v, %v; ParseDuration = %v, %v", quoted, time.Duration(jd), jerr, d, err)
		}
		// The spec's pattern: what the server takes without a sign matches
		// it; what matches it is taken, unless it overflows (short strings
		// cannot).
		spec := durationRE.MatchString(s)
		if err == nil && !strings.HasPrefix(s, "+") && !strings.HasPrefix(s, "-") && !spec {
			t.Fatalf("the server takes duration %q, the spec's pattern does not", s)
		}
		if spec && err != nil && len(s) <= 6 {
			t.Fatalf("the spec's pattern takes duration %q, the server does not: %v", s, err)
		}
	})
}

func FuzzValidName(f *testing.F) {
	for _, s := range []string{
		"a", "orders", "orders-db.v2_primary", "...", ".a", "a.", "..a", "-", "_", ".", "..", "", "a b", "a/b",
		"../x", "a%2Fb", "caf\u00e9", "\u212a", "a\x00", "\xff", "zookeeper", strings.Repeat("n", 200), strings.Repeat("n", 201),
		strings.Repeat(".", 3), strings.Repeat(".", 200),
	} {
		f.Add(s)
	}
	nameRE := specPattern(f, "Name")
	f.Fuzz(func(t *testing.T, name string) {
		err := recipes.ValidName(name)
		if err != nil {
			mustBeInvalid(t, "ValidName", err)
		} else {
			if len(name) < 1 || len(name) > 200 || name == "." || name == ".." {
				t.Fatalf("accepted name %q", name)
			}
			for i := 0; i < len(name); i++ {
				if c := name[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
					t.Fatalf("accepted name %q with byte %q", name, c)
				}
			}
		}
		if spec := nameRE.MatchString(name); spec != (err == nil) {
			t.Fatalf("name %q: the spec's pattern says %v, ValidName says %v", name, spec, err)
		}
		got, perr := nameParam(withName(name))
		if (perr == nil) != (err == nil) || (perr == nil && got != name) {
			t.Fatalf("nameParam(%q) = %q, %v; ValidName = %v", name, got, perr, err)
		}
	})
}

func FuzzValidLeaseID(f *testing.F) {
	for _, s := range []string{
		"0b5c6f7e-1a2b-4c3d-8e9f-001122334455", "00000000-0000-4000-8000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
		"0B5C6F7E-1A2B-4C3D-8E9F-001122334455", "0b5c6f7e1a2b4c3d8e9f001122334455", "0b5c6f7e-1a2b-4c3d-8e9f-00112233445",
		"0b5c6f7e_1a2b-4c3d-8e9f-001122334455", "0b5c6f7e-1a2b-4c3d-8e9f-00112233445\u00e9", "", "nope",
		"------------------------------------",
	} {
		f.Add(s)
	}
	leaseRE := specPattern(f, "LeaseId")
	f.Fuzz(func(t *testing.T, id string) {
		err := validLeaseID(id)
		if err != nil {
			mustBeInvalid(t, "validLeaseID", err)
		}
		if spec := leaseRE.MatchString(id); spec != (err == nil) {
			t.Fatalf("lease id %q: the spec's pattern says %v, validLeaseID says %v", id, spec, err)
		}
	})
}

func FuzzQueryParams(f *testing.F) {
	for _, s := range []string{
		"", "wait=", "wait=0", "wait=5s", "wait=1m", "wait=61s", "wait=-1s", "wait=10", "wait=soon", "wait=1%6D",
		"wait=1m&wait=2m", "index=0", "index=42", "index=-1", "index=%2B7", "index=+7", "index=9223372036854775807",
		"index=9223372036854775808", "index=1.5", "index=7&wait=30s", "index=x&wait=x", "%zz", "wait=%", ";", "&&&=",
		"wait=1m0.000000001s", "wait=\x00",
	} {
		f.Add(s)
	}
	const maxWait = time.Minute
	f.Fuzz(func(t *testing.T, rawQuery string) {
		r := requestWithQuery(rawQuery)
		q := r.URL.Query()

		wait, err := parseWait(r, maxWait)
		if err != nil {
			mustBeInvalid(t, "parseWait", err)
		} else if raw := q.Get("wait"); raw == "" {
			if wait != 0 {
				t.Fatalf("no wait in %q gave %v", rawQuery, wait)
			}
		} else if d, perr := recipes.ParseDuration(raw); perr != nil || d != wait || wait < 0 || wait > maxWait {
			t.Fatalf("wait %q in %q gave %v (ParseDuration: %v, %v)", raw, rawQuery, wait, d, perr)
		}
		if err != nil && q.Get("wait") != "" {
			if d, perr := recipes.ParseDuration(q.Get("wait")); perr == nil && d <= maxWait {
				t.Fatalf("wait %q refused: %v", q.Get("wait"), err)
			}
		}

		index, ierr := parseIndex(r)
		if ierr != nil {
			mustBeInvalid(t, "parseIndex", ierr)
		} else if raw := q.Get("index"); raw == "" {
			if index != 0 {
				t.Fatalf("no index in %q gave %d", rawQuery, index)
			}
		} else if n, perr := strconv.ParseInt(raw, 10, 64); perr != nil || n != index || index < 0 {
			t.Fatalf("index %q in %q gave %d", raw, rawQuery, index)
		}

		bi, bw, berr := blockingParams(r, maxWait)
		if (berr == nil) != (err == nil && ierr == nil) || (berr == nil && (bi != index || bw != wait)) {
			t.Fatalf("blockingParams(%q) = %d, %v, %v; parseIndex %d, %v; parseWait %v, %v", rawQuery, bi, bw, berr, index, ierr, wait, err)
		}
	})
}

func FuzzItemID(f *testing.F) {
	for _, s := range []string{
		"entry-100-0000000042", "entry-000-0000000000", "entry-999-9223372036854775807", "entry-999-9223372036854775808",
		"entry-100-000000004", "entry-100-00000000420000000000", "entry-10-0000000042", "entry-1000-0000000042",
		"entry-+10-0000000042", "entry-100-+000000042", "entry-100--000000042", "entry-100-0000000042 ", "Entry-100-0000000042",
		"entry-١٠٠-0000000042", "lock-0000000042", "", "entry-", "entry--",
	} {
		f.Add(s)
	}
	itemRE := specPattern(f, "ItemId")
	f.Fuzz(func(t *testing.T, id string) {
		priority, seq, err := recipes.ParseItemID(id)
		spec := itemRE.MatchString(id)
		if err != nil {
			mustBeInvalid(t, "ParseItemID", err)
			// The pattern cannot say "at most 2^63-1": only such a
			// 19-digit sequence may match it and still be refused.
			if spec && len(id) != len("entry-100-")+19 {
				t.Fatalf("item id %q: the spec's pattern takes it, ParseItemID does not: %v", id, err)
			}
			return
		}
		if !spec {
			t.Fatalf("item id %q: ParseItemID takes it (%d, %d), the spec's pattern does not", id, priority, seq)
		}
		if priority < 0 || priority > 999 || seq < 0 {
			t.Fatalf("item id %q gave priority %d, sequence %d", id, priority, seq)
		}
	})
}

func FuzzPriority(f *testing.F) {
	for _, s := range []string{"", "0", "100", "999", "1000", "-1", "+5", "05", "1e2", "0x10", " 5", "5 ", "9223372036854775808", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePriority(s)
		if err != nil {
			mustBeInvalid(t, "parsePriority", err)
			return
		}
		if p < recipes.MinPriority || p > recipes.MaxPriority {
			t.Fatalf("%q gave priority %d", s, p)
		}
		if s != "" && strconv.Itoa(p) != strings.TrimLeft(s, "0") && !(p == 0 && strings.Trim(s, "0") == "") {
			t.Fatalf("%q gave priority %d", s, p)
		}
	})
}

// FuzzDue: a produce's ?delay= and ?not_before=. What is taken is at most
// recipes.MaxDelay ahead and never before now, is what time.ParseDuration or
// time.Parse (RFC 3339) reads, and the two together are refused.
func FuzzDue(f *testing.F) {
	for _, s := range [][2]string{
		{"", ""}, {"30s", ""}, {"0s", ""}, {"-1s", ""}, {"720h", ""}, {"720h0m0.001s", ""}, {"1y", ""}, {"soon", ""},
		{"", "2026-01-02T15:04:05Z"}, {"", "2026-01-02T15:04:05.123+02:00"}, {"", "1970-01-01T00:00:00Z"}, {"", "2099-01-01T00:00:00Z"},
		{"", "2026-01-02 15:04:05"}, {"", "tomorrow"}, {"", "2026-13-01T00:00:00Z"}, {"30s", "2026-01-02T15:04:05Z"}, {"\x00", "\xff"},
	} {
		f.Add(s[0], s[1])
	}
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, delay, notBefore string) {
		due, err := parseDue(delay, notBefore, now)
		if err != nil {
			mustBeInvalid(t, "parseDue", err)
			if delay == "" || notBefore == "" {
				if d, derr := time.ParseDuration(delay); delay != "" && derr == nil && d >= 0 && d <= recipes.MaxDelay {
					t.Fatalf("delay %q refused: %v", delay, err)
				}
				if nb, nerr := time.Parse(time.RFC3339, notBefore); notBefore != "" && nerr == nil && nb.Sub(now) <= recipes.MaxDelay {
					t.Fatalf("not_before %q refused: %v", notBefore, err)
				}
			}
			return
		}
		if delay != "" && notBefore != "" {
			t.Fatalf("delay %q and not_before %q taken together", delay, notBefore)
		}
		if due.IsZero() {
			return
		}
		if !due.After(now) || due.Sub(now) > recipes.MaxDelay {
			t.Fatalf("delay %q, not_before %q gave the due time %v, %v from now", delay, notBefore, due, due.Sub(now))
		}
		if d, derr := time.ParseDuration(delay); delay != "" && (derr != nil || !now.Add(d).Equal(due)) {
			t.Fatalf("delay %q gave %v", delay, due)
		}
		if nb, nerr := time.Parse(time.RFC3339, notBefore); notBefore != "" && (nerr != nil || !nb.Equal(due)) {
			t.Fatalf("not_before %q gave %v", notBefore, due)
		}
	})
}

// FuzzEnterBody: member names and counts of a double barrier's enter body.
func FuzzEnterBody(f *testing.F) {
	for _, s := range []string{
		`{"lease":"0b5c6f7e-1a2b-4c3d-8e9f-001122334455","member":"host-a","count":3}`,
		`{"ttl":"15s","member":"ready","count":1}`, `{"member":"a/b","count":2}`, `{"member":"","count":0}`,
		`{"member":"x","count":"3"}`, `{"member":1,"count":3}`, `{"member":"x","count":3.5}`, `{"member":"..","count":1e9}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var b enterBody
		if err := decodeBody(body, &b); err != nil {
			mustBeInvalid(t, "decodeBody", err)
			return
		}
		if b.Member != "" {
			if err := recipes.ValidName(b.Member); err == nil {
				for i := 0; i < len(b.Member); i++ {
					c := b.Member[i]
					if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
						t.Fatalf("member %q accepted", b.Member)
					}
				}
			} else {
				mustBeInvalid(t, "ValidName", err)
			}
		}
	})
}

// FuzzTopLevelKeys checks the byte scanner of exactKeys against
// encoding/json's own tokens: the same keys, in the same order, for every
// valid JSON object.
func FuzzTopLevelKeys(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"a":{"b":[1,{"c":2}]},"d":"}"}`, `{"\u006cease":"x","x\"y":[]}`,
		` {"a" : "\\", "b":null} `, `{"ä":1,"a\ud83d\ude00":2}`, `[{"a":1}]`, `"{\"a\":1}"`, `null`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if !json.Valid([]byte(body)) {
			return
		}
		var got []string
		if err := topLevelKeys([]byte(body), func(k string) error { got = append(got, k); return nil }); err != nil {
			t.Fatalf("valid JSON %q: %v", body, err)
		}
		var want []string
		dec := json.NewDecoder(strings.NewReader(body))
		if tok, _ := dec.Token(); tok == json.Delim('{') {
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, tok.(string))
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					t.Fatal(err)
				}
			}
		}
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
			t.Fatalf("%q: keys %q, encoding/json reads %q", body, got, want)
		}
	})
}

// FuzzListPage fuzzes a list's ?limit= and ?after=: whatever they are, the
// page is one of 1 to MaxLimit items after a key, or the error is an
// invalid_request; a cursor a page gave is taken back by its own list
// only, as the key it was made of.
func FuzzListPage(f *testing.F) {
	for _, s := range [][2]string{
		{"", ""}, {"1", ""}, {"100", ""}, {"1000", ""}, {"1001", ""}, {"0", ""}, {"-1", ""}, {"+5", ""}, {"1e3", ""},
		{"", cursor("locks", "orders")}, {"", cursor("leases", "00000000000000000001.x")}, {"", "bG9ja3MA"},
		{"", "bm90LWEtY3Vyc29y"}, {"", "!!"}, {"", strings.Repeat("A", 600)}, {"\x00", "\xff"},
	} {
		f.Add(s[0], s[1], "orders-7")
	}
	f.Fuzz(func(t *testing.T, limit, after, key string) {
		q := url.Values{}
		if limit != "" {
			q.Set("limit", limit)
		}
		if after != "" {
			q.Set("after", after)
		}
		r := httptest.NewRequest("GET", "/v1/locks?"+q.Encode(), nil)
		p, err := pageOf(r, "locks")
		if err != nil {
			mustBeInvalid(t, "pageOf", err)
		} else if p.Limit < 1 || p.Limit > MaxLimit || (after != "" && p.After == "") {
			t.Fatalf("limit %q after %q: page %+v", limit, after, p)
		}
		if key == "" || len(key) > 200 {
			return // a key is a name (at most 200 bytes) or a lease's, shorter
		}
		c := cursor("locks", key)
		if got, err := decodeCursor("locks", c); err != nil || got != key {
			t.Fatalf("the cursor of %q decodes to %q, %v", key, got, err)
		}
		if _, err := decodeCursor("leases", c); err == nil {
			t.Fatalf("a cursor of the locks is taken by the leases")
		}
	})
}
