package server

import "net/http"

// RouteRule is what the rule of a route asks, for the external tests.
type RouteRule struct {
	Open, Page, Peer, Lease, Form bool
	Kind, Level                   string
}

// RuleOf returns the rule of the route h serves, h being a handler of the
// router New builds (as chi.Walk gives it): ok is false when h is not
// behind the front door or its route has no rule.
func RuleOf(h http.Handler) (_ RouteRule, ok bool) {
	d, ok := h.(*door)
	if !ok || d.rt == nil || !d.rt.access.known() {
		return RouteRule{}, false
	}
	ru := d.rt.access
	return RouteRule{Open: ru.open, Page: ru.page, Peer: ru.peer, Lease: ru.lease, Form: ru.form, Kind: ru.kind, Level: ru.level.String()}, true
}

// EmbeddedHeap is embeddedHeap, the -Xmx of the embedded ZooKeeper.
func EmbeddedHeap(cfg Config) int64 { return embeddedHeap(cfg) }
