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
	r.Get("/healthz", health())
	r.Get("/readyz", ready(d.Service.Session()))
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(d.Metrics.Registry, promhttp.HandlerOpts{}))
	r.Get("/openapi.yaml", openAPI(d.OpenAPI))

	r.Route("/v1", func(r chi.Router) {
		r.Use(limitBody(jsonBodyLimit))

		r.Method(http.MethodPost, "/leases", api.CreateLease())
		r.Method(http.MethodGet, "/leases", api.ListLeases())
		r.Method(http.MethodGet, "/leases/{id}", api.GetLease())
		r.Method(http.MethodDelete, "/leases/{id}", api.RevokeLease())
		r.Method(http.MethodPost, "/leases/{id}/keepalive", api.KeepAlive())

		r.Method(http.MethodGet, "/locks", api.ListLocks())
		r.Method(http.MethodGet, "/locks/{name}", api.LockState())
		r.Method(http.MethodPost, "/locks/{name}/acquire", api.AcquireLock())
		r.Method(http.MethodPost, "/locks/{name}/release", api.ReleaseLock())
		r.Method(http.MethodGet, "/locks/{name}/fence", api.Fence())

		r.Method(http.MethodGet, "/semaphores/{name}", api.SemaphoreState())
		r.Method(http.MethodPost, "/semaphores/{name}/acquire", api.AcquireSemaphore())
		r.Method(http.MethodPost, "/semaphores/{name}/release", api.ReleaseSemaphore())
	})

	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		handlers.Problem(w, r, recipes.CodeNotFound, "no route for "+r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		handlers.Problem(w, r, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path)
	})
}
