package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/zkgate/zkgate/recipes"
)

func invalid(format string, args ...any) error {
	return recipes.Errorf(recipes.CodeInvalid, format, args...)
}

// Duration is a Go duration string in JSON ("500ms", "15s", "2m").
type Duration time.Duration

// UnmarshalJSON accepts only a string holding a Go duration.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`a duration must be a string such as "15s"`)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ParseDuration parses a non-negative Go duration.
func ParseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as \"500ms\", \"15s\" or \"2m\"", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return v, nil
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
			return &recipes.Error{Code: codeMediaType, Detail: "the body must be application/json"}
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return recipes.Errorf(recipes.CodeTooLarge, "the body is larger than %d bytes", tooBig.Limit)
		}
		return invalid("could not read the body: %v", err)
	}
	return decodeBody(body, v)
}

// decodeBody is the parser behind decodeJSON (fuzzed).
func decodeBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.As(err, &typeErr):
			return invalid("field %q must be a %s", typeErr.Field, typeErr.Type.String())
		case errors.As(err, &syntaxErr):
			return invalid("the body is not valid JSON: %v", err)
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			return invalid("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
		default:
			return invalid("bad body: %v", err)
		}
	}
	if dec.More() {
		return invalid("the body must hold one JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("the body must hold one JSON object")
	}
	return nil
}

// Limits are the caps the handlers enforce.
type Limits struct {
	MaxWait      time.Duration
	MaxItemBytes int64
}

// parseWait reads ?wait= (default 0s), capped at max.
func parseWait(r *http.Request, maxWait time.Duration) (time.Duration, error) {
	s := r.URL.Query().Get("wait")
	if s == "" {
		return 0, nil
	}
	d, err := ParseDuration(s)
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
