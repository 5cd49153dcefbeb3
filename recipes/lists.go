package recipes

import (
	"context"
	"slices"
	"strings"
)

// Page asks for one page of a list: the names after After, in byte order,
// at most Limit of them (0: every one). A list answers the name to give as
// After for the next page, "" when none follows: pages stay in order while
// names come and go (none is left out or repeated that lived throughout).
type Page struct {
	After string
	Limit int
}

// pageChunks bounds the names one page reads, in chunks of its limit: a
// list whose names are mostly empty (containers ZooKeeper has not removed
// yet) answers a short page, with a next name, rather than read them all.
const pageChunks = 4

// listPage reads one page of the list of the names under dir (after a
// sync, see listNames): those after p.After for which keep is true (nil:
// all), sorted, read by read a chunk of p.Limit at a time until the page
// holds p.Limit items. read answers ok false to leave a name out (nobody
// is in it any more). next is the name the page ends on when names follow
// it, "" otherwise.
func listPage[T any](ctx context.Context, s *Session, dir string, p Page, keep func(string) bool,
	read func(ctx context.Context, name string) (T, bool, error)) (items []T, next string, err error) {
	ctx, names, err := s.listNames(ctx, dir)
	if err != nil {
		return nil, "", err
	}
	slices.Sort(names)
	cands := names[:0]
	for _, n := range names {
		if n > p.After && (keep == nil || keep(n)) {
			cands = append(cands, n)
		}
	}
	chunk := p.Limit
	if chunk <= 0 {
		chunk = len(cands)
	}
	items = []T{}
	for chunks, done := 0, 0; done < len(cands); chunks++ {
		if p.Limit > 0 && (len(items) >= p.Limit || chunks == pageChunks) {
			return items, cands[done-1], nil
		}
		batch := cands[done:min(done+chunk, len(cands))]
		got := make([]T, len(batch))
		ok := make([]bool, len(batch))
		err := readEach(ctx, len(batch), func(i int) error {
			var err error
			got[i], ok[i], err = read(ctx, batch[i])
			return err
		})
		if err != nil {
			return nil, "", err
		}
		for i := range batch {
			if !ok[i] {
				continue
			}
			if p.Limit > 0 && len(items) == p.Limit {
				// Full: the page ends on the item before this one.
				return items, batch[i-1], nil
			}
			items = append(items, got[i])
		}
		done += len(batch)
	}
	return items, "", nil
}

// hasPrefix keeps the names that start with prefix ("": every name).
func hasPrefix(prefix string) func(string) bool {
	if prefix == "" {
		return nil
	}
	return func(n string) bool { return strings.HasPrefix(n, prefix) }
}
