package server

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/zkgate/zkgate/handlers"
	"github.com/zkgate/zkgate/recipes"
)

// jsonBodyLimit caps every JSON request body, and maxHandoverBody a
// handover's (see handlers.TakeHandover).
const (
	jsonBodyLimit   = 64 << 10
	maxHandoverBody = 256 << 20
)

// routes is the one list of every route the gateway serves.
func routes(r chi.Router, d Deps) {
	api := d.API
	// Whatever starts something new (a lease, a wait) is refused while the
	// gateway drains; releases, keepalives and reads are not. A new hold
	// of a lease is refused by the handler, once it knows that the lease
	// is this gateway's (another's is passed on to it).
	starts, waits := d.Drain.refuse, d.Drain.refuseBlocking
	r.Get("/healthz", health())
	r.Get("/readyz", ready(d.Service.Session(), d.Drain))
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(d.Metrics.Registry, promhttp.HandlerOpts{}))
	r.Get("/openapi.yaml", openAPI(d.OpenAPI))
	dashboardRoutes(r, d)
	signinRoutes(r, d.auth)

	// An inline group, not a mounted router: a waiting request parks under
	// every frame of its routing (see frontDoor).
	r.Group(func(v chi.Router) {
		// JSON bodies are small; queue items have their own cap.
		r := v.With(limitBody(jsonBodyLimit))

		r.Method(http.MethodPost, "/v1/leases", starts(api.CreateLease()))
		r.Method(http.MethodGet, "/v1/leases", api.ListLeases())
		r.Method(http.MethodGet, "/v1/leases/{id}", api.GetLease())
		r.Method(http.MethodDelete, "/v1/leases/{id}", api.RevokeLease())
		r.Method(http.MethodPost, "/v1/leases/{id}/keepalive", api.KeepAlive())

		r.Method(http.MethodGet, "/v1/locks", api.ListLocks())
		r.Method(http.MethodGet, "/v1/locks/{name}", waits(api.LockState()))
		r.Method(http.MethodPost, "/v1/locks/{name}/acquire", api.AcquireLock())
		r.Method(http.MethodPost, "/v1/locks/{name}/release", api.ReleaseLock())
		r.Method(http.MethodGet, "/v1/locks/{name}/fence", api.Fence())
		r.Method(http.MethodGet, "/v1/locks/{name}/stats", api.LockStats())

		r.Method(http.MethodGet, "/v1/semaphores", api.ListSemaphores())
		r.Method(http.MethodGet, "/v1/semaphores/{name}", waits(api.SemaphoreState()))
		r.Method(http.MethodPost, "/v1/semaphores/{name}/acquire", api.AcquireSemaphore())
		r.Method(http.MethodPost, "/v1/semaphores/{name}/release", api.ReleaseSemaphore())
		r.Method(http.MethodGet, "/v1/semaphores/{name}/stats", api.SemaphoreStats())

		r.Method(http.MethodGet, "/v1/contention", api.ListContention())

		r.Method(http.MethodGet, "/v1/elections", api.ListElections())
		r.Method(http.MethodGet, "/v1/elections/{name}", waits(api.ElectionState()))
		r.Method(http.MethodPost, "/v1/elections/{name}/campaign", api.Campaign())
		r.Method(http.MethodPost, "/v1/elections/{name}/resign", api.Resign())
		r.Method(http.MethodPut, "/v1/elections/{name}/value", api.Proclaim())

		r.Method(http.MethodGet, "/v1/barriers", api.ListBarriers())
		r.Method(http.MethodGet, "/v1/barriers/{name}", waits(api.BarrierState()))
		r.Method(http.MethodPut, "/v1/barriers/{name}", api.RaiseBarrier())
		r.Method(http.MethodDelete, "/v1/barriers/{name}", api.LowerBarrier())
		r.Method(http.MethodPost, "/v1/barriers/{name}/wait", starts(api.WaitBarrier()))

		r.Method(http.MethodGet, "/v1/double-barriers", api.ListDoubleBarriers())
		r.Method(http.MethodGet, "/v1/double-barriers/{name}", waits(api.DoubleBarrierState()))
		r.Method(http.MethodPost, "/v1/double-barriers/{name}/enter", api.EnterDoubleBarrier())
		r.Method(http.MethodPost, "/v1/double-barriers/{name}/leave", api.LeaveDoubleBarrier())

		r.Method(http.MethodGet, "/v1/queues", api.ListQueues())
		r.Method(http.MethodGet, "/v1/queues/{name}", waits(api.QueueState()))
		r.Method(http.MethodDelete, "/v1/queues/{name}", api.DeleteQueue())
		v.With(limitBody(d.MaxItemBytes)).Method(http.MethodPost, "/v1/queues/{name}/items", api.Produce())
		r.Method(http.MethodGet, "/v1/queues/{name}/items/{id}", api.Peek())
		r.Method(http.MethodPost, "/v1/queues/{name}/items/{id}/ack", api.Ack())
		r.Method(http.MethodPost, "/v1/queues/{name}/items/{id}/nack", api.Nack())
		r.Method(http.MethodPost, "/v1/queues/{name}/take", starts(api.Take()))
		r.Method(http.MethodPost, "/v1/queues/{name}/claim", api.Claim())
	})

	// A draining gateway hands its sessions to another: proven peers only
	// (see handlers.TakeHandover); a handover of many leases is large.
	r.With(limitBody(maxHandoverBody)).Method(http.MethodPost, handlers.HandoverPath, api.TakeHandover())
	// The gateways' own figures, and what their leases wait for (deadlock
	// checks): proven peers only too.
	r.Method(http.MethodGet, handlers.PeerContentionPath, api.PeerContention())
	r.Method(http.MethodGet, handlers.PeerContentionPath+"/{kind}/{name}", api.PeerNameContention())
	r.With(limitBody(jsonBodyLimit)).Method(http.MethodPost, handlers.PeerWaitsPath, api.PeerWaits())

	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		handlers.Problem(w, r, recipes.CodeNotFound, "no route for "+handlers.Clip(r.URL.Path, maxLoggedPath))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		handlers.Problem(w, r, "method_not_allowed",
			handlers.Clip(r.Method, maxLoggedMethod)+" is not allowed on "+handlers.Clip(r.URL.Path, maxLoggedPath))
	})
}
