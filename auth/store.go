package auth

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
)

// Store holds the tokens in force; none while tokens are off. SIGHUP swaps
// in a new set without touching leases or waits; what lasts beyond one
// answer (a dashboard's WebSocket) hears of it through Revoked. The zero Store
// has tokens off.
type Store struct {
	tokens atomic.Pointer[Tokens]

	mu      sync.Mutex
	changed chan struct{} // closed when the tokens are swapped, then replaced
}

// NewStore returns a store with ts in force (nil: tokens off).
func NewStore(ts *Tokens) *Store {
	s := &Store{}
	if ts != nil {
		s.tokens.Store(ts)
	}
	return s
}

// Enabled reports whether tokens are on.
func (s *Store) Enabled() bool { return s != nil && s.tokens.Load() != nil }

// Tokens returns the tokens in force, nil while tokens are off.
func (s *Store) Tokens() *Tokens { return s.tokens.Load() }

// swap puts ts in force and tells those listening.
func (s *Store) swap(ts *Tokens) {
	s.tokens.Store(ts)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// changes returns a channel closed at the next swap.
func (s *Store) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// sameGrant reports whether two versions of a token grant the same: its
// name (the owner of its leases) and its permissions.
func sameGrant(a, b *Token) bool {
	return a != nil && b != nil && a.Name == b.Name && slices.Equal(a.Permissions, b.Permissions)
}

// Revoked watches the token r carries, until ctx ends: the channel is
// closed once a reload of the tokens file removes the token or changes
// what it grants; nil while tokens are off. A dashboard's stream is closed
// then: it would otherwise show everything to a token no longer allowed
// to see it for as long as it stays open.
func (s *Store) Revoked(ctx context.Context, r *http.Request) <-chan struct{} {
	if !s.Enabled() {
		return nil
	}
	reloaded := s.changes() // before the check: no reload is missed
	secret, _ := secretOf(r, false)
	granted := s.Tokens().Authenticate(secret)
	out := make(chan struct{})
	go func() {
		for granted != nil {
			select {
			case <-ctx.Done():
				return
			case <-reloaded:
				reloaded = s.changes()
				if now := s.Tokens().Authenticate(secret); !sameGrant(granted, now) {
					granted = nil
				}
			}
		}
		close(out)
	}()
	return out
}

// ReloadOnHangup reloads the tokens file at path into s on SIGHUP. A file
// that does not load is logged and the tokens in force stay; leases and
// waits are never touched either way, but a dashboard's WebSocket of a
// token removed or changed is closed (see Revoked). It returns a
// function that stops it.
func ReloadOnHangup(ctx context.Context, path string, s *Store, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				ts, err := LoadTokens(path)
				if err != nil {
					log.Error("tokens file not reloaded; the tokens in force stay", "err", err)
					continue
				}
				s.swap(ts)
				log.Info("tokens file reloaded", "file", path, "tokens", ts.Len())
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}
