package server_test

import (
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// listPages walks every page of the list at path (a URL with its query, if
// any), limit items a page, and returns the names (keyed by field) of each
// page; between pages it calls between with the number of pages read.
func listPages(t *testing.T, path, key, field string, limit int, between func(pages int)) [][]string {
	t.Helper()
	var pages [][]string
	for after := ""; ; {
		u := fmt.Sprintf("%s&limit=%d", path, limit)
		if after != "" {
			u += "&after=" + url.QueryEscape(after)
		}
		r := gwtest.Do(t, "GET", u, nil)
		mustStatus(t, r, 200, "GET "+u)
		doc := r.JSON(t)
		var names []string
		for _, it := range doc[key].([]any) {
			names = append(names, it.(map[string]any)[field].(string))
		}
		if len(names) > limit {
			t.Fatalf("a page of %d asked for %d items", len(names), limit)
		}
		pages = append(pages, names)
		next, _ := doc["next"].(string)
		if next == "" {
			return pages
		}
		if len(pages) > 1000 {
			t.Fatal("the pages never end")
		}
		if between != nil {
			between(len(pages))
		}
		after = next
	}
}

// A list comes a page at a time, in name order, and stays in order while
// names come and go between pages: every lock held throughout is listed
// once, none twice, and a page never holds more than its limit.
func TestAListPagesInOrderWhileNamesComeAndGo(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	lease := newLease(t, g.URL, "1m", "pager")
	var kept []string
	for i := range 30 {
		name := fmt.Sprintf("page-%02d", i)
		mustStatus(t, acquire(t, g.URL, name, lease, "0s"), 200, "acquire "+name)
		if i%3 != 0 {
			kept = append(kept, name)
		}
	}
	other := newLease(t, g.URL, "1m", "churner")
	pages := listPages(t, g.URL+"/v1/locks?prefix=page-", "locks", "name", 4, func(n int) {
		// Between pages one of the names not kept goes, and new ones come,
		// before and after the cursor.
		if gone := 3 * (n - 1); gone < 30 {
			mustStatus(t, gwtest.Do(t, "POST", fmt.Sprintf("%s/v1/locks/page-%02d/release", g.URL, gone), map[string]any{"lease": lease}), 204, "release")
		}
		for _, name := range []string{fmt.Sprintf("page-%02d-new", n), fmt.Sprintf("page-00-new-%d", n)} {
			mustStatus(t, acquire(t, g.URL, name, other, "0s"), 200, "acquire "+name)
		}
	})
	var all []string
	for _, p := range pages {
		all = append(all, p...)
	}
	if !slices.IsSorted(all) || len(slices.Compact(slices.Clone(all))) != len(all) {
		t.Fatalf("the pages are not one sorted list without repeats: %v", pages)
	}
	for _, name := range kept {
		if !slices.Contains(all, name) {
			t.Errorf("%s, held throughout, is on no page: %v", name, pages)
		}
	}
	if len(pages) < 8 {
		t.Errorf("%d pages of 4 for more than 20 locks", len(pages))
	}
}

// The lease list of several gateways comes a page at a time too: each
// gateway is asked for the same page of its own, and the pages, put
// together, are every lease of every gateway once, oldest first.
func TestTheLeasesOfEveryGatewayComeAPageAtATime(t *testing.T) {
	t.Parallel()
	a := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	b := gwtest.StartGateway(t, gwtest.GatewayOptions{Root: a.Root})
	want := map[string]bool{}
	for i := range 7 {
		for _, g := range []*gwtest.Gateway{a, b} {
			want[newLease(t, g.URL, "1m", fmt.Sprintf("lease-%d", i))] = true
		}
	}
	whole := gwtest.Do(t, "GET", a.URL+"/v1/leases", nil).JSON(t)
	var order []string
	for _, l := range whole["leases"].([]any) {
		order = append(order, l.(map[string]any)["id"].(string))
	}
	if len(order) != len(want) {
		t.Fatalf("the whole list has %d leases, want %d: %v", len(order), len(want), whole)
	}
	pages := listPages(t, a.URL+"/v1/leases?scope=all", "leases", "id", 3, nil)
	var paged []string
	for _, p := range pages {
		paged = append(paged, p...)
	}
	if !slices.Equal(paged, order) {
		t.Fatalf("the leases in pages of 3: %v; want them in the order of the whole list: %v", pages, order)
	}
}
