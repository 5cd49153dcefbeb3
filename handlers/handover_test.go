package handlers

import (
	"bytes"
	"context"
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

// takingGateway serves TakeHandover as gateway id does behind its front
// door (the proof checked first), and records what it adopts.
func takingGateway(t *testing.T, id string, secret *peer.Secret) (*httptest.Server, *[]*recipes.Handover) {
	t.Helper()
	var adopted []*recipes.Handover
	cred := peers.New(id, secret, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	api := &API{Peers: cred, Adopt: func(_ context.Context, h *recipes.Handover) error {
		adopted = append(adopted, h)
		return nil
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, forwarded := r.Header[peers.ForwardedHeader]; forwarded {
			pr, err := cred.Admit(r)
			if err != nil {
				WriteError(w, r, err)
				return
			}
			held := peers.Hold(w)
			api.TakeHandover().ServeHTTP(held, pr)
			cred.Release(held, pr)
			return
		}
		api.TakeHandover().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &adopted
}

// A handover is taken from a gateway that proves it holds the secret, for
// its own session only; the password travels sealed for the taker; a
// forged one (no proof, another secret, another gateway's session, a
// sealed password meant for another gateway) is refused and adopts
// nothing.
func TestHandoverIsTakenFromProvenPeersOnly(t *testing.T) {
	secret, _ := peer.ParseSecret("s", []byte("zkp_"+strings.Repeat("s", 40)))
	wrong, _ := peer.ParseSecret("w", []byte("zkp_"+strings.Repeat("w", 40)))
	srv, adopted := takingGateway(t, "gw-b", secret)
	keeper := recipes.Keeper{Gateway: "gw-b", Advertise: strings.TrimPrefix(srv.URL, "http://")}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := &recipes.Handover{From: "gw-a", Session: recipes.SavedSession{ID: 0x1234, Password: []byte("the session's password")},
		Leases: []recipes.LeaseState{{LeaseTerms: recipes.LeaseTerms{ID: "0b5c6f7e-1a2b-4c3d-8e9f-001122334455"}}}}
	ctx := context.Background()

	if err := peers.New("gw-a", secret, nil, quiet).SendHandover(ctx, keeper, h); err != nil {
		t.Fatalf("a handover from a proven peer: %v", err)
	}
	if len(*adopted) != 1 || !bytes.Equal((*adopted)[0].Session.Password, h.Session.Password) || (*adopted)[0].Session.ID != 0x1234 {
		t.Fatalf("adopted %+v", *adopted)
	}

	// Refused: each adopts nothing.
	if err := peers.New("gw-a", wrong, nil, quiet).SendHandover(ctx, keeper, h); err == nil {
		t.Error("a handover from a gateway with another secret was taken")
	}
	other := *h
	other.From = "gw-c"
	if err := peers.New("gw-a", secret, nil, quiet).SendHandover(ctx, keeper, &other); err == nil {
		t.Error("a handover of another gateway's session was taken")
	}
	resp, err := http.Post(srv.URL+peers.HandoverPath, "application/json", strings.NewReader(`{"session":{"id":4660,"password":"dGhlIHNlc3Npb24ncyBwYXNzd29yZA"},"from":"gw-a","leases":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a handover without a gateway's proof: %d, want 403", resp.StatusCode)
	}
	// A password sealed for gateway gw-c (as gw-a sends it there), replayed
	// to gw-b.
	body := sentTo(t, "gw-c", func(k recipes.Keeper) { _ = peers.New("gw-a", secret, nil, quiet).SendHandover(ctx, k, h) })
	sender := peers.New("gw-a", secret, nil, quiet)
	answer, err := sender.Ask(ctx, keeper, http.MethodPost, peers.HandoverPath, "application/json", "", "", body)
	if err != nil || answer.Status != http.StatusForbidden {
		t.Errorf("a password sealed for another gateway: %v %+v, want 403", err, answer)
	}
	if len(*adopted) != 1 {
		t.Fatalf("a refused handover was adopted: %d adopted", len(*adopted))
	}
}

// sentTo is the body of the request that send sends to gateway id (k),
// which does not answer it.
func sentTo(t *testing.T, id string, send func(k recipes.Keeper)) []byte {
	t.Helper()
	bodies := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- b
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()
	send(recipes.Keeper{Gateway: id, Advertise: strings.TrimPrefix(srv.URL, "http://")})
	select {
	case b := <-bodies:
		return b
	default:
		t.Fatal("nothing was sent")
		return nil
	}
}
