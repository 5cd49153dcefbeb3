package server_test

import (
	"strings"
	"testing"

	"github.com/zkgate/zkgate"
	"github.com/zkgate/zkgate/kinds"
)

// TestKindRoutesInOpenAPI: every kind of the registry (package kinds) has
// its list and its state, GET /v1/{kind} and GET /v1/{kind}/{name}, in
// openapi.yaml and in the route table, and every route under its prefix
// asks for the kind's permission. A kind added to the registry without its
// routes and their spec fails here (TestOpenAPIMatchesRoutes then checks
// the rest of them both ways).
func TestKindRoutesInOpenAPI(t *testing.T) {
	t.Parallel()
	spec := specOperations(specLoad(t, zkgate.OpenAPI))
	rules := servedRules(t)
	for _, k := range kinds.All() {
		for _, op := range []string{"GET " + k.Prefix(), "GET " + k.Prefix() + "/{name}"} {
			if !spec[op] {
				t.Errorf("kind %q: openapi.yaml does not describe %s", k.Name, op)
			}
			if _, ok := rules[op]; !ok {
				t.Errorf("kind %q: the route table (server/routes.go) has no %s", k.Name, op)
			}
		}
		for r, ru := range rules {
			_, pattern, _ := strings.Cut(r, " ")
			if (pattern == k.Prefix() || strings.HasPrefix(pattern, k.Prefix()+"/")) && ru.Kind != k.Permission() {
				t.Errorf("route %s is under %s but asks for permission kind %q, want %q", r, k.Prefix(), ru.Kind, k.Permission())
			}
		}
	}
}
