package client_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/client"
)

// concurrently runs n calls of fn at once and returns their errors.
func concurrently(n int, fn func() error) []error {
	errs := make([]error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			errs[i] = fn()
		}()
	}
	start.Done()
	done.Wait()
	return errs
}

// oneHolder checks that exactly one of errs is nil and every other one
// names the rule.
func oneHolder(t *testing.T, what string, errs []error) {
	t.Helper()
	granted := 0
	for _, err := range errs {
		switch {
		case err == nil:
			granted++
		case !errors.Is(err, client.ErrAlreadyHeld):
			t.Fatalf("%s: want ErrAlreadyHeld, got %v", what, err)
		case !strings.Contains(err.Error(), "already holds (or is acquiring) "+what) ||
			!strings.Contains(err.Error(), "one lease is one holder; take a lease per concurrent holder"):
			t.Fatalf("the error should name %s and the rule: %v", what, err)
		}
	}
	if granted != 1 {
		t.Fatalf("%s: %d of %d concurrent calls through one lease were granted, want 1", what, granted, len(errs))
	}
}

// TestOneLeaseOneHolder: the gateway answers a lease's repeated acquire
// with the same grant, so concurrent holders sharing a lease would share
// one token and overlap. Concurrent Lock, AcquireSemaphore and Campaign of
// one name through one lease: one succeeds, the others fail with the rule;
// after Release, a failed acquire or a lost election the name is free for
// the lease again.
func TestOneLeaseOneHolder(t *testing.T) {
	// Serial: counts the binary's goroutines (gateway checks NoGoroutinesLeft).
	c, ctx, a, b := twoHolders(t)
	checkOneLockHolder(t, ctx, c, a, b)
	checkOneSemaphoreHolder(t, ctx, a)
	checkOneCandidate(t, ctx, a, b)
}

// checkOneLockHolder: concurrent Locks of one name through a make one
// holder; the name is free again after Release or a failed acquire, and
// another mode of a read/write lock is another hold.
func checkOneLockHolder(t *testing.T, ctx context.Context, c *client.Client, a, b *client.Lease) {
	t.Helper()
	var mu sync.Mutex
	var grants []*client.LockGrant
	oneHolder(t, `lock "invoices"`, concurrently(8, func() error {
		g, err := a.Lock(ctx, "invoices", client.Exclusive, 5*time.Second)
		if err == nil {
			mu.Lock()
			grants = append(grants, g)
			mu.Unlock()
		}
		return err
	}))
	st, err := c.LockState(ctx, "invoices")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != grants[0].Token || len(st.Waiters) != 0 {
		t.Fatalf("the lock's state: %+v %v", st, err)
	}
	if err := grants[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	g, err := a.Lock(ctx, "invoices", client.Exclusive, 5*time.Second)
	if err != nil || g.Token <= grants[0].Token {
		t.Fatalf("Lock after Release: %+v %v", g, err)
	}
	// Another mode of a read/write lock is another hold (the gateway says
	// what it thinks of a write behind the lease's own read).
	if _, err := a.Lock(ctx, "catalog", client.Read, 0); err != nil {
		t.Fatal(err)
	}
	oneHolder(t, `lock "catalog" (read)`, []error{nil, errOf(a.Lock(ctx, "catalog", client.Read, 0))})
	if err := a.Unlock(ctx, "catalog", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Lock(ctx, "catalog", client.Read, 0); err != nil {
		t.Fatalf("Lock after Unlock of every mode: %v", err)
	}

	// A failed acquire leaves the name free.
	if _, err := b.Lock(ctx, "busy", client.Exclusive, 0); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := a.Lock(ctx, "busy", client.Exclusive, 0); !errors.Is(err, client.ErrTimeout) {
			t.Fatalf("a try-once of a held lock: %v", err)
		}
	}
}

// checkOneSemaphoreHolder: concurrent AcquireSemaphores through a make one
// holder; the name is free again after its release.
func checkOneSemaphoreHolder(t *testing.T, ctx context.Context, a *client.Lease) {
	t.Helper()
	oneHolder(t, `semaphore "gpu"`, concurrently(4, func() error {
		_, err := a.AcquireSemaphore(ctx, "gpu", 3, 5*time.Second)
		return err
	}))
	if err := a.ReleaseSemaphore(ctx, "gpu"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AcquireSemaphore(ctx, "gpu", 3, 0); err != nil {
		t.Fatalf("AcquireSemaphore after its release: %v", err)
	}
}

// checkOneCandidate: concurrent Campaigns through a make one candidate; a
// candidate in line may campaign again, as a after its Resign, and b leads
// once a is behind it.
func checkOneCandidate(t *testing.T, ctx context.Context, a, b *client.Lease) {
	t.Helper()
	oneHolder(t, `election "scheduler"`, concurrently(4, func() error {
		_, err := a.Campaign(ctx, "scheduler", "a", 5*time.Second)
		return err
	}))
	// A candidate in line holds nothing yet: campaigning again resumes.
	for range 2 {
		if camp, err := b.Campaign(ctx, "scheduler", "b", 0); err != nil || camp.Elected {
			t.Fatalf("b's campaign behind a: %+v %v", camp, err)
		}
	}
	if err := a.Resign(ctx, "scheduler"); err != nil {
		t.Fatal(err)
	}
	if camp, err := a.Campaign(ctx, "scheduler", "a", 0); err != nil || camp.Elected {
		t.Fatalf("a's campaign after its resign, behind b: %+v %v", camp, err)
	}
	lead, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if camp, err := b.Lead(lead, "scheduler", "b", time.Second); err != nil || !camp.Elected {
		t.Fatalf("b leads: %+v %v", camp, err)
	}
}
