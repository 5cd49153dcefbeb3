package faults

import (
	"context"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
)

// A lease record made anew in one transaction (delete and create, as the
// gateway that adopts a lease in a handover rewrites it) is the lease
// moving, not its end: the observer took the deletion for the lease's end
// and never marked it moved, so the checker judged a handed-over lease
// without the handover's transit (lease_outlived_ttl, seed 1234, by 1.2 ms).
func TestObserverTakesARecordMadeAnewForAMove(t *testing.T) {
	srv := zktest.Shared(t)
	root := zktest.UniqueRoot(t)
	conn := zktest.Connect(t, []string{srv.Addr()}, 10*time.Second)
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{root, root + "/leases", root + "/gateways"} {
		if _, err := conn.Create(p, nil, 0, acl); err != nil {
			t.Fatal(err)
		}
	}
	p := root + "/leases/l1"
	if _, err := conn.Create(p, []byte(`{"gateway":"a"}`), 0, acl); err != nil {
		t.Fatal(err)
	}
	hist := newHistory()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o, err := startObserver(ctx, []string{srv.Addr()}, root, hist)
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	rec := &LeaseRecord{ID: "l1"}
	hist.record(func(h *History) { h.Leases["l1"] = rec })
	o.watchLease("l1", rec)
	seen := func(what string, ok func() bool) {
		t.Helper()
		zktest.Eventually(t, 10*time.Second, func() error {
			hist.mu.Lock()
			defer hist.mu.Unlock()
			if !ok() {
				return errString(what)
			}
			return nil
		})
	}
	// Armed: the registrations' watch and the record's (go-zookeeper adds a
	// watch to its table once ZooKeeper answered the request that set it).
	zktest.Eventually(t, 10*time.Second, func() error {
		if o.conn.WatchCount() < 2 {
			return errString("the observer's watches are not armed yet")
		}
		return nil
	})

	if _, err := conn.Multi(&zk.DeleteRequest{Path: p, Version: -1},
		&zk.CreateRequest{Path: p, Data: []byte(`{"gateway":"b"}`), Acl: acl}); err != nil {
		t.Fatal(err)
	}
	seen("the lease moved", func() bool { return rec.Moved })
	hist.mu.Lock()
	until := rec.RecordUntil
	hist.mu.Unlock()
	if !until.IsZero() {
		t.Fatalf("a record made anew was taken for its end at %s", until)
	}

	before := time.Now()
	if err := conn.Delete(p, -1); err != nil {
		t.Fatal(err)
	}
	seen("the record's end", func() bool { return !rec.RecordUntil.IsZero() && !rec.RecordUntil.Before(before) })
}

type errString string

func (e errString) Error() string { return string(e) }
