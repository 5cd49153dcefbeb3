package server

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/zkgate/zkgate/handlers"
	"github.com/zkgate/zkgate/recipes"
)

// jsonBodyLimit caps every JSON request body.
const jsonBodyLimit = 64 << 10

// routes is the one list of every route the gateway serves.
func routes(r chi.Router, d Deps) {
	api := d.API
	// Whatever starts something new (a lease, a hold, a wait) is refused
	// while the gateway drains; releases, keepalives and reads are not.
	starts, waits := d.Drain.refuse, d.Drain.refuseBlocking
	r.Get("/healthz", health())
	r.Get("/readyz", ready(d.Service.Session(), d.Drain))
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(d.Metrics.Registry, promhttp.HandlerOpts{}))
	r.Get("/openapi.yaml", openAPI(d.OpenAPI))
	dashboardRoutes(r, d)
	signinRoutes(r, d.auth)

	r.Route("/v1", func(v chi.Router) {
		// JSON bodies are small; queue items have their own cap.
		r := v.With(limitBody(jsonBodyLimit))

		r.Method(http.MethodPost, "/leases", starts(api.CreateLease()))
		r.Method(http.MethodGet, "/leases", api.ListLeases())
		r.Method(http.MethodGet, "/leases/{id}", api.GetLease())
		r.Method(http.MethodDelete, "/leases/{id}", api.RevokeLease())
		r.Method(http.MethodPost, "/leases/{id}/keepalive", api.KeepAlive())

		r.Method(http.MethodGet, "/locks", api.ListLocks())
		r.Method(http.MethodGet, "/locks/{name}", waits(api.LockState()))
		r.Method(http.MethodPost, "/locks/{name}/acquire", starts(api.AcquireLock()))
		r.Method(http.MethodPost, "/locks/{name}/release", api.ReleaseLock())
		r.Method(http.MethodGet, "/locks/{name}/fence", api.Fence())

		r.Method(http.MethodGet, "/semaphores", api.ListSemaphores())
		r.Method(http.MethodGet, "/semaphores/{name}", waits(api.SemaphoreState()))
		r.Method(http.MethodPost, "/semaphores/{name}/acquire", starts(api.AcquireSemaphore()))
		r.Method(http.MethodPost, "/semaphores/{name}/release", api.ReleaseSemaphore())

		r.Method(http.MethodGet, "/elections", api.ListElections())
		r.Method(http.MethodGet, "/elections/{name}", waits(api.ElectionState()))
		r.Method(http.MethodPost, "/elections/{name}/campaign", starts(api.Campaign()))
		r.Method(http.MethodPost, "/elections/{name}/resign", api.Resign())
		r.Method(http.MethodPut, "/elections/{name}/value", api.Proclaim())

		r.Method(http.MethodGet, "/barriers", api.ListBarriers())
		r.Method(http.MethodGet, "/barriers/{name}", waits(api.BarrierState()))
		r.Method(http.MethodPut, "/barriers/{name}", api.RaiseBarrier())
		r.Method(http.MethodDelete, "/barriers/{name}", api.LowerBarrier())
		r.Method(http.MethodPost, "/barriers/{name}/wait", starts(api.WaitBarrier()))

		r.Method(http.MethodGet, "/double-barriers", api.ListDoubleBarriers())
		r.Method(http.MethodGet, "/double-barriers/{name}", waits(api.DoubleBarrierState()))
		r.Method(http.MethodPost, "/double-barriers/{name}/enter", starts(api.EnterDoubleBarrier()))
		r.Method(http.MethodPost, "/double-barriers/{name}/leave", starts(api.LeaveDoubleBarrier()))

		r.Method(http.MethodGet, "/queues", api.ListQueues())
		r.Method(http.MethodGet, "/queues/{name}", waits(api.QueueState()))
		r.Method(http.MethodDelete, "/queues/{name}", api.DeleteQueue())
		v.With(limitBody(d.MaxItemBytes)).Method(http.MethodPost, "/queues/{name}/items", api.Produce())
		r.Method(http.MethodGet, "/queues/{name}/items/{id}", api.Peek())
		r.Method(http.MethodPost, "/queues/{name}/items/{id}/ack", api.Ack())
		r.Method(http.MethodPost, "/queues/{name}/items/{id}/nack", api.Nack())
		r.Method(http.MethodPost, "/queues/{name}/take", starts(api.Take()))
		r.Method(http.MethodPost, "/queues/{name}/claim", starts(api.Claim()))
	})

	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		handlers.Problem(w, r, recipes.CodeNotFound, "no route for "+r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		handlers.Problem(w, r, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path)
	})
}
