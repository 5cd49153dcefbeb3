package recipes

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
)

// A session given up with Detach is resumed by a Connect that presents it,
// with the nodes it holds; one that does not exist (or expired) is
// ErrSessionGone, never a new session in its place.
func TestResumeADetachedSession(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{timeout: 5 * time.Second})
	ctx := context.Background()
	lease, _ := svc.Leases.Create(ctx, time.Minute, "moving", "")
	g, err := svc.Locks.Acquire(ctx, lease, "moving", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	saved := svc.sess.Saved()
	if saved.ID == 0 || len(saved.Password) == 0 {
		t.Fatalf("saved %v without id or password", saved)
	}
	if s := saved.String(); s == "" || strings.Contains(s, string(saved.Password)) {
		t.Fatalf("a saved session's text %q shows its password", s)
	}
	svc.sess.Detach()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resumed, err := Connect(cctx, SessionConfig{Servers: []string{zktest.Shared(t).Addr()}, Timeout: 5 * time.Second,
		Root: svc.root, Logger: log, Resume: &saved})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	defer resumed.Close()
	if _, _, id := resumed.Status(); id != saved.ID {
		t.Fatalf("resumed session 0x%x, want 0x%x", id, saved.ID)
	}
	ok, st, err := resumed.Conn().Exists(g.Node)
	if err != nil || !ok || st.EphemeralOwner != saved.ID || st.Czxid != g.Token {
		t.Fatalf("the lock node after the resume: %v %v %+v", ok, err, st)
	}

	gone := SavedSession{ID: saved.ID ^ 0x5a5a5a, Password: saved.Password}
	_, err = Connect(cctx, SessionConfig{Servers: []string{zktest.Shared(t).Addr()}, Timeout: 5 * time.Second,
		Root: svc.root, Logger: log, Resume: &gone})
	if !errors.Is(err, ErrSessionGone) {
		t.Fatalf("resume a session that does not exist: %v, want ErrSessionGone", err)
	}
}
