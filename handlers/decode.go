package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/zkgate/zkgate/recipes"
)

func invalid(format string, args ...any) error {
	return recipes.Errorf(recipes.CodeInvalid, format, args...)
}

// decodeJSON reads a JSON object into v. An empty body leaves v as it is
// (every field of zkgate's bodies is optional or checked by the caller);
// unknown fields, trailing data and wrong types are invalid_request.
func decodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		// curl -d sends application/x-www-form-urlencoded unless told
		// otherwise; curl is a first-class client, so its default is JSON too.
		jsonish := mt == "application/json" || strings.HasSuffix(mt, "+json") ||
			mt == "application/x-www-form-urlencoded" || mt == "text/plain"
		if err != nil || !jsonish {
			return &recipes.Error{Code: CodeMediaType, Detail: "the body must be application/json"}
		}
	}
	body, err := readBody(r)
	if err != nil {
		return bodyError(err, "the body is larger than %d bytes", "could not read the body")
	}
	// Keep the body: a request for a lease of another gateway is forwarded
	// to it whole.
	r.Body = io.NopCloser(bytes.NewReader(body))
	return decodeBody(body, v)
}

// bodyError is the problem of a body that could not be read whole: larger
// than its cap (413, tooLarge given the cap), not sent within the
// gateway's --body-timeout (408), or cut (400).
func bodyError(err error, tooLarge, broken string) error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return recipes.Errorf(recipes.CodeTooLarge, tooLarge, tooBig.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &recipes.Error{Code: codeBodyTimeout, Detail: "the body did not arrive in time (the gateway's --body-timeout); send it whole, at once"}
	}
	return invalid("%s: %v", broken, err)
}

// readBody reads r's body into a buffer of its announced length when it has
// one (net/http holds the body to that length); io.ReadAll starts at 512
// bytes, and the body is kept while the request lasts, a wait included.
func readBody(r *http.Request) ([]byte, error) {
	n := r.ContentLength
	if n < 0 || n > 64<<10 {
		return io.ReadAll(r.Body)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		return nil, err
	}
	return body, nil
}

// decodeBody is the parser behind decodeJSON (fuzzed).
func decodeBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	// A flat body that is one valid JSON value is read by Unmarshal,
	// without a Decoder's copy of the body (a third of the bytes
	// allocated); exactKeys refuses the unknown keys Unmarshal lets
	// through, which only a flat body has all at its top. Anything else is
	// read by a Decoder, whose errors say what is wrong with it.
	if flatBody(v) {
		var syntaxErr *json.SyntaxError
		if err := json.Unmarshal(body, v); !errors.As(err, &syntaxErr) {
			if err != nil {
				return decodeError(err)
			}
			return exactKeys(body, v)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return invalid("the body must hold one JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("the body must hold one JSON object")
	}
	return exactKeys(body, v)
}

// decodeError is the problem of a body encoding/json could not decode.
func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field == "":
		return invalid("the body must be a JSON object")
	case errors.As(err, &typeErr):
		// Field is a Go path ("leaseRef.lease" through an embedded
		// struct): name the JSON field, never a Go type.
		field := typeErr.Field[strings.LastIndexByte(typeErr.Field, '.')+1:]
		return invalid("field %q must be %s", field, jsonKind(typeErr.Type))
	case errors.As(err, &syntaxErr):
		return invalid("the body is not valid JSON: %v", err)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return invalid("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return invalid("bad body: %v", err)
	}
}

// exactKeys rejects what encoding/json lets through: a key that matches a
// field only case-insensitively ({"LEASE":...}) and a repeated key (the
// last would win), on which other JSON parsers, and the spec, disagree.
// body is one JSON value that encoding/json has read already.
func exactKeys(body []byte, v any) error {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	names := fieldNamesOf(t)
	if names == nil {
		return nil // decoded by its own UnmarshalJSON
	}
	var seen []string // a body has a handful of keys
	return topLevelKeys(body, func(key string) error {
		if !names[key] {
			return invalid("unknown field %q", key)
		}
		if slices.Contains(seen, key) {
			return invalid("field %q is given twice", key)
		}
		seen = append(seen, key)
		return nil
	})
}

// fieldNames caches, per struct type, the JSON names of its fields (nil for
// a type with its own UnmarshalJSON): computed once, read on every request.
var fieldNames sync.Map // reflect.Type -> map[string]bool

func fieldNamesOf(t reflect.Type) map[string]bool {
	if names, ok := fieldNames.Load(t); ok {
		return names.(map[string]bool)
	}
	var names map[string]bool
	if !reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		names = map[string]bool{}
		jsonNames(t, names)
	}
	fieldNames.Store(t, names)
	return names
}

// flatBodies caches, per type, whether flatBody holds for it.
var flatBodies sync.Map // reflect.Type -> bool

// flatBody says whether v points to a struct whose fields, through
// embedded structs, hold no object of their own (strings, numbers,
// booleans, lists of them, types that decode themselves): every key of
// such a body is at its top, where exactKeys checks it.
func flatBody(v any) bool {
	t := reflect.TypeOf(v)
	if flat, ok := flatBodies.Load(t); ok {
		return flat.(bool)
	}
	flat := t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && flatFields(t.Elem())
	flatBodies.Store(t, flat)
	return flat
}

func flatFields(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			if !flatFields(f.Type) {
				return false
			}
			continue
		}
		if !flatValue(f.Type) {
			return false
		}
	}
	return true
}

func flatValue(t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return true
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return flatValue(t.Elem())
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// topLevelKeys calls fn with each key of the JSON object in body, in order,
// unescaped as encoding/json does. body must be valid JSON (anything but an
// object has no keys). It scans the bytes once, where a json.Decoder's
// tokens cost an allocation each.
func topLevelKeys(body []byte, fn func(key string) error) error {
	i := 0
	for i < len(body) && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r') {
		i++
	}
	if i == len(body) || body[i] != '{' {
		return nil
	}
	depth, wantKey := 0, false
	for i < len(body) {
		switch body[i] {
		case '{', '[':
			depth++
			wantKey = depth == 1
		case '}', ']':
			depth--
			if depth == 0 {
				return nil
			}
		case ',':
			wantKey = depth == 1
		case '"':
			end := stringEnd(body, i)
			if end < 0 {
				return invalid("the body is not valid JSON")
			}
			if depth == 1 && wantKey {
				raw := body[i:end]
				key := string(raw[1 : len(raw)-1])
				if slices.ContainsFunc(raw, func(c byte) bool { return c == '\\' || c >= 0x80 }) {
					// Escapes or non-ASCII: as encoding/json reads them.
					if err := json.Unmarshal(raw, &key); err != nil {
						return invalid("the body is not valid JSON")
					}
				}
				if err := fn(key); err != nil {
					return err
				}
				wantKey = false
			}
			i = end
			continue
		}
		i++
	}
	return nil
}

// stringEnd returns the index just past the JSON string that starts with the
// quote at body[start], or -1 if it does not end.
func stringEnd(body []byte, start int) int {
	for i := start + 1; i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// jsonNames adds the JSON names of struct type t's fields to names,
// through embedded structs as encoding/json does.
func jsonNames(t reflect.Type, names map[string]bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case tag == "-":
		case f.Anonymous && tag == "" && ft.Kind() == reflect.Struct:
			jsonNames(ft, names)
		case !f.IsExported():
		case tag != "":
			names[tag] = true
		default:
			names[f.Name] = true
		}
	}
}

// jsonKind names the JSON type that a Go type reads.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "an object"
}

// Limits are the caps the handlers enforce.
type Limits struct {
	MaxWait time.Duration
}

// parseWait reads ?wait= (default 0s), capped at max.
func parseWait(r *http.Request, maxWait time.Duration) (time.Duration, error) {
	s := r.URL.Query().Get("wait")
	if s == "" {
		return 0, nil
	}
	d, err := recipes.ParseDuration(s)
	if err != nil {
		return 0, invalid("wait: %v", err)
	}
	if d > maxWait {
		return 0, invalid("wait %s is above the cap of %s", d, maxWait)
	}
	return d, nil
}

// parseIndex reads ?index= (default 0: no blocking).
func parseIndex(r *http.Request) (int64, error) {
	s := r.URL.Query().Get("index")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, invalid("index must be a non-negative integer")
	}
	return n, nil
}

// nameParam returns the {name} of the route, validated.
func nameParam(r *http.Request) (string, error) {
	name := chi.URLParam(r, "name")
	if err := recipes.ValidName(name); err != nil {
		return "", err
	}
	return name, nil
}

// blockingParams reads ?index= and ?wait= of a blocking read.
func blockingParams(r *http.Request, maxWait time.Duration) (int64, time.Duration, error) {
	index, err := parseIndex(r)
	if err != nil {
		return 0, 0, err
	}
	wait, err := parseWait(r, maxWait)
	return index, wait, err
}

// parse reads what most routes take: the {name}, then ?wait= when wait is
// not nil, then the JSON body when body is not nil.
func (a *API) parse(r *http.Request, wait *time.Duration, body any) (string, error) {
	return a.parseOf(r, nameParam, wait, body)
}

// noName is the name of a route that names none in its path (a set of
// locks names them in its body).
func noName(*http.Request) (string, error) { return "", nil }

// parseOf is parse with the name read by nameOf.
func (a *API) parseOf(r *http.Request, nameOf func(*http.Request) (string, error), wait *time.Duration, body any) (string, error) {
	name, err := nameOf(r)
	if err != nil {
		return "", err
	}
	if wait != nil {
		if *wait, err = parseWait(r, a.Limits.MaxWait); err != nil {
			return "", err
		}
	}
	if body != nil {
		if err := decodeJSON(r, body); err != nil {
			return "", err
		}
	}
	return name, nil
}

// between refuses a field that is missing or outside 1..most, naming it.
func between(field string, v *int, most int) error {
	if v == nil {
		return invalid("%s is required", field)
	}
	if *v < 1 || *v > most {
		return invalid("%s must be between 1 and %d", field, most)
	}
	return nil
}
