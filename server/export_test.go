package server

// AccessRule describes routeAccess[route] for the external tests: whether
// the route has a rule, and what it asks.
func AccessRule(route string) (ok, open, page bool, kind, level string, lease bool) {
	r, ok := routeAccess[route]
	return ok, r.open, r.page, r.kind, r.level.String(), r.lease
}

// PeerRoute says whether route is for the gateways of the root only.
func PeerRoute(route string) bool { return routeAccess[route].peer }

// AccessRoutes lists the routes of routeAccess.
func AccessRoutes() []string {
	out := make([]string, 0, len(routeAccess))
	for r := range routeAccess {
		out = append(out, r)
	}
	return out
}

// EmbeddedHeap is embeddedHeap, the -Xmx of the embedded ZooKeeper.
func EmbeddedHeap(cfg Config) int64 { return embeddedHeap(cfg) }
