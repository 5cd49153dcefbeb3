package handlers

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/zkgate/zkgate/auth/peers"
	"github.com/zkgate/zkgate/internal/peer"
	"github.com/zkgate/zkgate/recipes"
)

// A request another gateway forwarded here, for a lease this gateway knows
// is kept by a third (handed over from here, or the forwarder's view of the
// records was behind), is never answered 404: the lease lives. It is a 503
// to retry, with where the lease went when it was handed over from here.
// (The fault suite saw "404 for a lease that was made" from a gateway that
// had just handed its leases over, asked by a peer whose ZooKeeper server
// had not yet seen the records rewritten.)
func TestAForwardedRequestForALeaseKeptElsewhereIsNot404(t *testing.T) {
	for _, moved := range []bool{true, false} {
		r := forwardedHere(t, "POST", "/v1/locks/x/release")
		w := httptest.NewRecorder()
		id := "0b5c6f7e-1a2b-4c3d-8e9f-001122334455"
		away := &elsewhere{lease: id, keeper: recipes.Keeper{Gateway: "gw-c", Advertise: "127.0.0.1:7001"}, via: &peers.Credential{}, moved: moved}
		if err := (&API{}).forward(w, r, away); err != nil {
			WriteError(w, r, err)
		} else {
			t.Fatalf("moved %v: a forwarded request was passed on again", moved)
		}
		var doc map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &doc)
		if w.Code != http.StatusServiceUnavailable || doc["code"] != "unavailable" || w.Header().Get("Retry-After") == "" {
			t.Errorf("moved %v: %d %s, want 503 unavailable with Retry-After", moved, w.Code, w.Body)
		}
		if got, want := w.Header().Get(MovedToHeader), map[bool]string{true: "http://127.0.0.1:7001"}[moved]; got != want {
			t.Errorf("moved %v: %s %q, want %q", moved, MovedToHeader, got, want)
		}
	}
}

// forwardedHere is a request that gateway gw-a forwarded to this gateway,
// gw-b, as gw-b admits it (its proof checked).
func forwardedHere(t *testing.T, method, uri string) *http.Request {
	t.Helper()
	secret, _ := peer.ParseSecret("s", []byte("zkp_"+strings.Repeat("s", 40)))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	admitted := make(chan *http.Request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pr, err := peers.New("gw-b", secret, nil, quiet).Admit(r)
		if err != nil {
			t.Errorf("the forwarded request was not admitted: %v", err)
		}
		admitted <- pr.WithContext(context.WithoutCancel(pr.Context()))
	}))
	defer srv.Close()
	k := recipes.Keeper{Gateway: "gw-b", Advertise: strings.TrimPrefix(srv.URL, "http://")}
	_, _ = peers.New("gw-a", secret, nil, quiet).Ask(t.Context(), k, method, uri, "", "", "", nil)
	select {
	case r := <-admitted:
		if peers.CallOf(r.Context()) == nil {
			t.Fatal("the request admitted is not a peer call")
		}
		return r
	default:
		t.Fatal("nothing was forwarded")
		return nil
	}
}
