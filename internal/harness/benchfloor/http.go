package benchfloor

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
)

// serveNetHTTP answers f's routes with net/http: one ServeMux, one JSON
// decode and one JSON encode per request.
func serveNetHTTP(ctx context.Context, ln net.Listener, f *floor) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /v1/leases", func(w http.ResponseWriter, r *http.Request) {
		var req leaseRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, 0, nil, errBadBody)
			return
		}
		writeJSON(w, http.StatusCreated, f.createLease(), nil)
	})
	mux.HandleFunc("DELETE /v1/leases/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNoContent, nil, f.revokeLease(r.PathValue("id")))
	})
	mux.HandleFunc("POST /v1/locks/{name}/acquire", func(w http.ResponseWriter, r *http.Request) {
		var req lockRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, 0, nil, errBadBody)
			return
		}
		g, err := f.acquire(r.PathValue("name"), req.Lease)
		writeJSON(w, http.StatusOK, g, err)
	})
	mux.HandleFunc("POST /v1/locks/{name}/release", func(w http.ResponseWriter, r *http.Request) {
		var req lockRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, 0, nil, errBadBody)
			return
		}
		writeJSON(w, http.StatusNoContent, nil, f.release(r.PathValue("name"), req.Lease))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 0, nil, errNotFound) })
	srv := &http.Server{Handler: mux}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// writeJSON answers v with status, or err as a problem.
func writeJSON(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		st, title := statusOf(err)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(st)
		_ = json.NewEncoder(w).Encode(problem{Title: title, Status: st})
		return
	}
	if v == nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
