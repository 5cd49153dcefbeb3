package server

import (
	"encoding/json"
	"net/http"

	"github.com/zkgate/zkgate/recipes"
)

func health() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	}
}

// ready answers 200 only while the ZooKeeper session is live and the
// gateway is not draining.
func ready(sess *recipes.Session, dr *drain) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st, _, id := sess.Status()
		status := http.StatusOK
		doc := map[string]any{"zookeeper": st.String(), "session": sessionHex(id)}
		ends, draining := dr.until()
		if draining {
			doc["draining_until"] = ends.UTC()
		}
		if !isReady(st, draining) {
			status = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", "1")
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(doc)
	}
}

// isReady is what /readyz answers: the session is live and the gateway is
// not draining.
func isReady(st recipes.State, draining bool) bool {
	return st == recipes.StateLive && !draining
}

func openAPI(spec []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(spec)
	}
}
