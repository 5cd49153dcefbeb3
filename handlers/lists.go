package handlers

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/zkgate/zkgate/recipes"
)

// Every list answers a page at a time: ?limit= items at most (DefaultLimit
// when not given, MaxLimit at most), after the opaque ?after= cursor, which
// the previous page gave as "next". A page without "next" is the last.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	// maxCursor bounds ?after=: a name is at most 200 bytes.
	maxCursor = 512
)

// pageOf reads the ?limit= and ?after= of list (the key its items come
// under, which a cursor names: a cursor of another list is refused).
func pageOf(r *http.Request, list string) (recipes.Page, error) {
	q := r.URL.Query()
	p := recipes.Page{Limit: DefaultLimit}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return p, invalid("limit must be a whole number from 1 to %d", MaxLimit)
		}
		p.Limit = n
	}
	if s := q.Get("after"); s != "" {
		after, err := decodeCursor(list, s)
		if err != nil {
			return p, err
		}
		p.After = after
	}
	return p, nil
}

// cursor is the opaque ?after= that continues list after key.
func cursor(list, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(list + "\x00" + key))
}

func decodeCursor(list, s string) (string, error) {
	bad := invalid("after must be the next cursor of a page of %s", list)
	if len(s) > maxCursor {
		return "", bad
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return "", bad
	}
	key, ok := strings.CutPrefix(string(b), list+"\x00")
	if !ok || key == "" {
		return "", bad
	}
	return key, nil
}

// pageDoc is the answer of one page: its items under key, and the cursor
// of the next page if one follows.
func pageDoc(key string, items any, next string) map[string]any {
	doc := map[string]any{key: items}
	if next != "" {
		doc["next"] = cursor(key, next)
	}
	return doc
}

// leaseKey orders the leases of a list: by creation, then id. It is what a
// cursor of the lease list holds.
func leaseKey(l leaseDoc) string {
	return fmt.Sprintf("%020d.%s", l.CreatedAt.UnixNano(), l.ID)
}
