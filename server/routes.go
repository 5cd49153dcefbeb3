package server

import (
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/auth/peers"
	"github.com/zkgate/zkgate/dashboard"
	"github.com/zkgate/zkgate/handlers"
	"github.com/zkgate/zkgate/kinds"
	"github.com/zkgate/zkgate/recipes"
)

// jsonBodyLimit caps every JSON request body (JSON bodies are small; queue
// items have their own cap), and maxHandoverBody a handover's (see handlers.TakeHandover).
const (
	jsonBodyLimit   = 64 << 10
	maxHandoverBody = 256 << 20
)

// route is one route of the gateway and all of its policy: what answers
// it, what it needs of the caller (checked by the front door, which is
// handed the route the router matched), how large a body it takes and what
// a draining gateway refuses of it.
type route struct {
	method, pattern string
	handler         http.Handler
	access          rule
	// body caps the request's body, unless it is noBodyCap.
	body int64
	// drain is what a draining gateway refuses of the route.
	drain drainRefusal
}

// noBodyCap is the body of a route whose body is capped by nothing but
// the server (--body-timeout) or the handler itself.
const noBodyCap = -1

// drainRefusal is what a draining gateway refuses of a route: whatever
// starts something new (a lease, a wait). Releases, keepalives and plain
// reads are served. A new hold of a lease is refused by the handler, once
// it knows that the lease is this gateway's (another's is passed on to it).
type drainRefusal uint8

const (
	drainServes   drainRefusal = iota // served while draining
	drainStarts                       // starts something: refused
	drainBlocking                     // refused when a blocking read (?index=)
)

// routeTable is the one list of every route the gateway serves, in the
// groups that follow.
func routeTable(d Deps) []route {
	return slices.Concat(
		operatorRoutes(d),
		dashboardRoutes(d),
		leaseRoutes(d.API),
		lockRoutes(d.API),
		barrierRoutes(d.API),
		queueRoutes(d.API, d.MaxItemBytes),
		groupRoutes(d.API),
		counterRoutes(d.API),
		peerRoutes(d.API),
	)
}

// The methods of the routes.
const get, post, put, del = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete

// operatorRoutes are the probes, the metrics and the API's contract.
func operatorRoutes(d Deps) []route {
	return []route{
		{method: get, pattern: "/healthz", handler: health(), body: noBodyCap, access: probeRoute},
		{method: get, pattern: "/readyz", handler: ready(d.Service.Session(), d.Drain), body: noBodyCap, access: probeRoute},
		{method: get, pattern: "/metrics", handler: promhttp.HandlerFor(d.Metrics.Registry, promhttp.HandlerOpts{}), body: noBodyCap, access: dashRead},
		{method: get, pattern: "/openapi.yaml", handler: openAPI(d.OpenAPI), body: noBodyCap, access: openRoute},
	}
}

// dashboardRoutes are the dashboard: the overview, its other pages, their
// files and the WebSocket of their live updates; and the sign-in.
func dashboardRoutes(d Deps) []route {
	dash := newDashboard(d)
	page := rule{kind: "*", level: auth.LevelRead, page: true}
	signIn := auth.SignIn{Store: d.auth, WritePage: dashboard.WriteSignIn, WriteError: handlers.WriteError}
	// An admin's actions: a page that confirms, and its form. Both need
	// admin on the lease; a release needs it on the name too (the handler
	// checks that).
	confirm := rule{kind: "leases", level: auth.LevelAdmin, param: "id", page: true}
	form := rule{kind: "leases", level: auth.LevelAdmin, param: "id", form: true}
	return []route{
		{method: get, pattern: "/", handler: dash.Overview(), body: noBodyCap, access: page},
		{method: get, pattern: "/ui/{page}", handler: dash.Pages(), body: noBodyCap, access: page},
		{method: get, pattern: "/ui/static/{file}", handler: dash.Static(), body: noBodyCap, access: openRoute},
		{method: get, pattern: "/ws", handler: dash.WS(), body: noBodyCap, access: dashRead},
		{method: get, pattern: "/ui/leases/{id}/revoke", handler: dash.ConfirmRevoke(), body: noBodyCap, access: confirm},
		{method: post, pattern: "/ui/leases/{id}/revoke", handler: dash.Revoke(), body: jsonBodyLimit, access: form},
		{method: get, pattern: "/ui/leases/{id}/release", handler: dash.ConfirmRelease(), body: noBodyCap, access: confirm},
		{method: post, pattern: "/ui/leases/{id}/release", handler: dash.Release(), body: jsonBodyLimit, access: form},
		{method: get, pattern: "/signin", handler: signIn.Page(), body: noBodyCap, access: openRoute},
		{method: post, pattern: "/signin", handler: signIn.Post(), body: noBodyCap, access: openRoute},
		{method: post, pattern: "/signout", handler: signIn.Out(), body: noBodyCap, access: openRoute},
	}
}

func leaseRoutes(api *handlers.API) []route {
	return []route{
		{method: post, pattern: "/v1/leases", handler: api.CreateLease(), body: jsonBodyLimit, drain: drainStarts,
			access: rule{kind: "leases", level: auth.LevelWrite, makesLeases: true}},
		{method: get, pattern: "/v1/leases", handler: api.ListLeases(), body: jsonBodyLimit,
			access: fanningOut(rule{kind: "leases", level: auth.LevelRead, lease: true})},
		{method: get, pattern: "/v1/leases/{id}", handler: api.GetLease(), body: jsonBodyLimit, access: leaseRule(auth.LevelRead)},
		{method: del, pattern: "/v1/leases/{id}", handler: api.RevokeLease(), body: jsonBodyLimit, access: leaseRule(auth.LevelWrite)},
		{method: post, pattern: "/v1/leases/{id}/keepalive", handler: api.KeepAlive(), body: jsonBodyLimit, access: leaseRule(auth.LevelWrite)},
	}
}

// listRoute is the list of k, /v1/{kind}, of what the caller may read.
func listRoute(k kinds.Kind, h http.Handler) route {
	return route{method: get, pattern: k.Prefix(), handler: h, body: jsonBodyLimit, access: readAll(k)}
}

// stateRoute is the state of one of k, /v1/{kind}/{name}, a read that
// blocks with ?index= (so a draining gateway refuses it then).
func stateRoute(k kinds.Kind, h http.Handler) route {
	return route{method: get, pattern: k.Prefix() + "/{name}", handler: h, body: jsonBodyLimit, drain: drainBlocking,
		access: waiter(read(k))}
}

// lineRoute is a POST /v1/{kind}/{name}/verb that puts a lease in one's
// line: it may wait, and may make the lease it holds by.
func lineRoute(k kinds.Kind, verb string, h http.Handler) route {
	return route{method: post, pattern: k.Prefix() + "/{name}/" + verb, handler: h, body: jsonBodyLimit,
		access: makingLeases(waiter(write(k)))}
}

// nameRoute is any other route of one name of k, /v1/{kind}/{name}rest,
// which needs access (read or write) on the name.
func nameRoute(method string, k kinds.Kind, rest string, h http.Handler, access func(kinds.Kind) rule) route {
	return route{method: method, pattern: k.Prefix() + "/{name}" + rest, handler: h, body: jsonBodyLimit, access: access(k)}
}

// lockRoutes are the locks, the semaphores, their contention and the
// elections: the kinds that make a lease wait in a line.
func lockRoutes(api *handlers.API) []route {
	locks, sems, elections := kinds.Locks, kinds.Semaphores, kinds.Elections
	return []route{
		{method: get, pattern: locks.Prefix(), handler: api.ListLocks(), body: jsonBodyLimit,
			access: rule{kind: locks.Permission(), level: auth.LevelRead, query: "prefix"}},
		stateRoute(locks, api.LockState()),
		lineRoute(locks, "acquire", api.AcquireLock()),
		// A set of locks names them in its body (see rule.body).
		{method: post, pattern: locks.Prefix() + "/acquire", handler: api.AcquireLocks(), body: jsonBodyLimit,
			access: makingLeases(waiter(rule{kind: locks.Permission(), level: auth.LevelWrite, body: true}))},
		{method: post, pattern: locks.Prefix() + "/release", handler: api.ReleaseLocks(), body: jsonBodyLimit,
			access: rule{kind: locks.Permission(), level: auth.LevelWrite, body: true}},
		nameRoute(post, locks, "/release", api.ReleaseLock(), write),
		nameRoute(get, locks, "/fence", api.Fence(), read),
		nameRoute(get, locks, "/stats", api.LockStats(), readFanningOut),

		listRoute(sems, api.ListSemaphores()),
		stateRoute(sems, api.SemaphoreState()),
		lineRoute(sems, "acquire", api.AcquireSemaphore()),
		nameRoute(post, sems, "/release", api.ReleaseSemaphore(), write),
		nameRoute(get, sems, "/stats", api.SemaphoreStats(), readFanningOut),

		{method: get, pattern: "/v1/contention", handler: api.ListContention(), body: jsonBodyLimit,
			access: fanningOut(rule{kind: locks.Permission(), level: auth.LevelRead, filtered: true})},

		listRoute(elections, api.ListElections()),
		stateRoute(elections, api.ElectionState()),
		lineRoute(elections, "campaign", api.Campaign()),
		nameRoute(post, elections, "/resign", api.Resign(), write),
		nameRoute(put, elections, "/value", api.Proclaim(), write),
	}
}

func barrierRoutes(api *handlers.API) []route {
	barriers, dbarriers := kinds.Barriers, kinds.DoubleBarriers
	return []route{
		listRoute(barriers, api.ListBarriers()),
		stateRoute(barriers, api.BarrierState()),
		nameRoute(put, barriers, "", api.RaiseBarrier(), write),
		nameRoute(del, barriers, "", api.LowerBarrier(), write),
		{method: post, pattern: barriers.Prefix() + "/{name}/wait", handler: api.WaitBarrier(), body: jsonBodyLimit, drain: drainStarts,
			access: waiter(read(barriers))},

		listRoute(dbarriers, api.ListDoubleBarriers()),
		stateRoute(dbarriers, api.DoubleBarrierState()),
		lineRoute(dbarriers, "enter", api.EnterDoubleBarrier()),
		{method: post, pattern: dbarriers.Prefix() + "/{name}/leave", handler: api.LeaveDoubleBarrier(), body: jsonBodyLimit,
			access: waiter(write(dbarriers))},
	}
}

func queueRoutes(api *handlers.API, maxItemBytes int64) []route {
	queues := kinds.Queues
	produce := nameRoute(post, queues, "/items", api.Produce(), write)
	produce.body = maxItemBytes
	return []route{
		listRoute(queues, api.ListQueues()),
		stateRoute(queues, api.QueueState()),
		nameRoute(del, queues, "", api.DeleteQueue(), write),
		produce,
		nameRoute(get, queues, "/items/{id}", api.Peek(), read),
		nameRoute(post, queues, "/items/{id}/ack", api.Ack(), write),
		nameRoute(post, queues, "/items/{id}/nack", api.Nack(), write),
		{method: post, pattern: queues.Prefix() + "/{name}/take", handler: api.Take(), body: jsonBodyLimit, drain: drainStarts,
			access: waiter(write(queues))},
		lineRoute(queues, "claim", api.Claim()),
	}
}

// groupRoutes are the group memberships: a join makes the lease it is
// bound to if the body names none, and waits for nothing but ZooKeeper (no
// ?wait=). As a line's, a draining gateway's handler refuses a join of its
// own lease and passes on another's.
func groupRoutes(api *handlers.API) []route {
	groups := kinds.Groups
	return []route{
		listRoute(groups, api.ListGroups()),
		stateRoute(groups, api.GroupState()),
		{method: post, pattern: groups.Prefix() + "/{name}/join", handler: api.JoinGroup(), body: jsonBodyLimit,
			access: makingLeases(write(groups))},
		nameRoute(post, groups, "/leave", api.LeaveGroup(), write),
	}
}

// counterRoutes are the counters: a plain read, or a blocking one, and
// writes that wait for nothing (no lease, no line).
func counterRoutes(api *handlers.API) []route {
	counters := kinds.Counters
	return []route{
		listRoute(counters, api.ListCounters()),
		stateRoute(counters, api.CounterState()),
		nameRoute(put, counters, "", api.SetCounter(), write),
		nameRoute(del, counters, "", api.DeleteCounter(), write),
		nameRoute(post, counters, "/add", api.AddCounter(), write),
	}
}

// peerRoutes are the gateways' own, for proven peers only.
func peerRoutes(api *handlers.API) []route {
	peer := rule{peer: true}
	return []route{
		// A draining gateway hands its sessions to another: proven peers
		// only (see handlers.TakeHandover); a handover of many leases is
		// large.
		{method: post, pattern: peers.HandoverPath, handler: api.TakeHandover(), body: maxHandoverBody, access: peer},
		// The gateways' own figures, and what their leases wait for
		// (deadlock checks): proven peers only too.
		{method: get, pattern: handlers.PeerContentionPath, handler: api.PeerContention(), body: noBodyCap, access: peer},
		{method: get, pattern: handlers.PeerContentionPath + "/{kind}/{name}", handler: api.PeerNameContention(), body: noBodyCap, access: peer},
		{method: post, pattern: handlers.PeerWaitsPath, handler: api.PeerWaits(), body: jsonBodyLimit, access: peer},
	}
}

// routes registers every route of table on r, each behind the front door,
// which checks a request by the rule of the route that serves it. Each
// route is registered on r itself, with no group or mounted router: a
// waiting request parks under every frame of its routing (see frontDoor).
func routes(r chi.Router, fd *frontDoor, table []route) {
	for i := range table {
		rt := &table[i]
		h := rt.handler
		switch rt.drain {
		case drainStarts:
			h = fd.drain.refuse(h)
		case drainBlocking:
			h = fd.drain.refuseBlocking(h)
		}
		if rt.body != noBodyCap {
			h = limitBody(rt.body)(h)
		}
		r.Method(rt.method, rt.pattern, fd.serve(rt, h))
	}
	r.NotFound(fd.serve(nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Problem(w, r, recipes.CodeNotFound, "no route for "+handlers.Clip(r.URL.Path, maxLoggedPath))
	})).ServeHTTP)
	r.MethodNotAllowed(fd.serve(nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Problem(w, r, "method_not_allowed",
			handlers.Clip(r.Method, maxLoggedMethod)+" is not allowed on "+handlers.Clip(r.URL.Path, maxLoggedPath))
	})).ServeHTTP)
}
