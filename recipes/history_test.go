package recipes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zkproxy"
	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
)

// historyIDs lists the lease ids in the history under root.
func historyIDs(t *testing.T, svc *testService) []string {
	t.Helper()
	var ids []string
	for _, p := range treeUnder(t, rawClient(t), svc.root+"/history") {
		if len(p) > len(svc.root)+len("/history/xx/") {
			ids = append(ids, p[len(svc.root)+len("/history/xx/"):])
		}
	}
	return ids
}

// The history in ZooKeeper keeps at most RememberMax leases: the sweeper
// counts it (more often as it fills) and drops the oldest ended leases
// first, long before their hour is up; live leases stay. Making a lease
// costs no request more for it: one transaction, as ever.
func TestLeaseHistoryIsCappedOldestFirst(t *testing.T) {
	t.Parallel()
	const capacity = 10
	px := zkproxy.New(t, zktest.Shared(t).Addr())
	svc := newService(t, serviceOptions{servers: []string{px.Addr()},
		leases: LeaseConfig{RememberMax: capacity, historyCheck: 50 * time.Millisecond}})
	ctx := context.Background()
	live := newLease(t, svc, "live")
	var ended []string // oldest end first
	for i := range 3 * capacity {
		mark := len(px.Requests(svc.root))
		l, err := svc.Leases.Create(ctx, time.Minute, fmt.Sprintf("lease-%d", i), "")
		if err != nil {
			t.Fatal(err)
		}
		// Its transaction (a first op on its record); a lease whose history
		// shard is new has it made (a create or two) and sends it again.
		// The sweeper's requests come in between.
		var multis, creates int
		for _, r := range px.Requests(svc.root)[mark:] {
			switch {
			case r.Op == opMulti && r.Path == svc.Leases.recordPath(l.ID):
				multis++
			case r.Op == opMulti:
				t.Fatalf("making lease %d sent a transaction on %s", i, r.Path)
			case r.Op == opCreate:
				creates++
			}
		}
		if !(multis == 1 && creates == 0 || multis == 2 && creates > 0) {
			t.Fatalf("making lease %d sent %d transactions and %d creates, want its one transaction", i, multis, creates)
		}
		if err := svc.Leases.Revoke(l.ID); err != nil {
			t.Fatal(err)
		}
		ended = append(ended, l.ID)
	}
	zktest.Eventually(t, 10*time.Second, func() error {
		if ids := historyIDs(t, svc); len(ids) > capacity {
			return fmt.Errorf("the history holds %d leases, more than its %d", len(ids), capacity)
		}
		return nil
	})
	ids := historyIDs(t, svc)
	if !slices.Contains(ids, live.ID) {
		t.Fatalf("the live lease's history went: %v", ids)
	}
	kept := 0
	for i, id := range ended {
		if !slices.Contains(ids, id) {
			continue
		}
		kept++
		if i < len(ended)-capacity {
			t.Errorf("the history kept lease %d of %d, one of the oldest", i, len(ended))
		}
	}
	if kept == 0 || !slices.Contains(ids, ended[len(ended)-1]) {
		t.Fatalf("the newest ended leases are not in the history: %v", ids)
	}
	if _, err := svc.Leases.Locate(ended[len(ended)-1]); ErrorCode(err) != CodeLeaseExpired {
		t.Fatalf("the newest ended lease: %v, want lease_expired", err)
	}
	if owner, err := svc.Leases.Locate(ended[0]); owner != (Keeper{}) || err != nil {
		t.Fatalf("the oldest ended lease: %+v %v, want nothing known", owner, err)
	}
}

// The sweeper counts the history more often as it fills: at its longest
// interval when empty, a thirty-second of it once full.
func TestNextHistoryCount(t *testing.T) {
	t.Parallel()
	const check = 32 * time.Second
	for _, tt := range []struct {
		n    int
		want time.Duration
	}{
		{0, check},
		{50_000, check / 2},
		{90_000, check / 10},
		{99_990, time.Second},
		{100_000, time.Second},
		{250_000, time.Second},
	} {
		if got := nextHistoryCount(tt.n, 100_000, check); got != tt.want {
			t.Errorf("with %d of 100,000: next count in %s, want %s", tt.n, got, tt.want)
		}
	}
}

// The lease history: a lease whose gateway died (its record went with the
// session, no reason written) is stamped session_lost by a sweep; an entry
// ended longer than Remember ago is removed.
func TestLeaseHistorySweep(t *testing.T) {
	t.Parallel()
	const remember = 300 * time.Millisecond
	svc := newService(t, serviceOptions{leases: LeaseConfig{Remember: remember}})
	raw := rawClient(t)
	ctx := context.Background()
	revoked, _ := svc.Leases.Create(ctx, time.Minute, "revoked", "")
	if err := svc.Leases.Revoke(revoked.ID); err != nil {
		t.Fatal(err)
	}
	// A lease of a gateway that died: its history, and no record.
	dead := "0123abcd-0000-4000-8000-000000000000"
	if _, err := raw.Create(svc.root+"/history/01", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	if _, err := raw.Create(svc.root+"/history/01/"+dead, historyEntry{Gateway: "gw-dead"}.bytes(), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Leases.Locate(dead); ErrorCode(err) != CodeLeaseExpired || !strings.Contains(err.Error(), EndSessionLost) {
		t.Fatalf("a dead gateway's lease: %v, want lease_expired session_lost", err)
	}
	if err := svc.Leases.SweepHistory(ctx); err != nil {
		t.Fatal(err)
	}
	raw1, _, err := raw.Get(svc.Leases.historyPath(dead))
	if err != nil || !strings.Contains(string(raw1), `"reason":"session_lost"`) {
		t.Fatalf("after a sweep the dead gateway's lease reads %s, %v", raw1, err)
	}
	if _, err := svc.Leases.Locate(revoked.ID); ErrorCode(err) != CodeLeaseExpired || !strings.Contains(err.Error(), EndRevoked) {
		t.Fatalf("a revoked lease: %v", err)
	}
	zktest.Eventually(t, 10*time.Second, func() error {
		if err := svc.Leases.SweepHistory(ctx); err != nil {
			return err
		}
		for _, id := range []string{revoked.ID, dead} {
			if ok, _, _ := raw.Exists(svc.Leases.historyPath(id)); ok {
				return fmt.Errorf("the history of %s is still there", id)
			}
		}
		return nil
	})
	if owner, err := svc.Leases.Locate(revoked.ID); owner != (Keeper{}) || err != nil {
		t.Fatalf("a swept lease: %+v %v, want nothing known", owner, err)
	}
}
