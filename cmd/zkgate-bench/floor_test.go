//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/benchfloor"
	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/zkserver"
)

func TestMain(m *testing.M) { os.Exit(zktest.Run(m)) }

// TestFloorServers: each floor server answers the bench's lock workload
// through the bench's own client code (createLeases, the cpu phase's
// lockOp, the distinct phase's grant, revokeLeases); a zk floor holds one
// ephemeral node under the lock's znode while the lock is held, its czxid
// the token, sends ZooKeeper three packets per cycle as the gateway does,
// and refuses a second holder; bad input is a 4xx problem.
func TestFloorServers(t *testing.T) {
	srv := zktest.Shared(t)
	for _, kind := range benchfloor.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			root := zktest.UniqueRoot(t)
			var conn *zk.Conn
			if benchfloor.UsesZooKeeper(kind) {
				conn = zktest.Connect(t, nil, 10*time.Second)
			}
			c := startFloor(t, kind, conn, root)
			leases, err := c.createLeases(ctx, 2, 2, 10*time.Minute, "floor-test")
			if err != nil {
				t.Fatal(err)
			}
			body, other := leaseBody(leases[0]), leaseBody(leases[1])

			// The first acquire makes the lock's znode and its parents. While
			// it holds the lock, a persistent child sorted after every lock
			// node is made, which keeps ZooKeeper from removing the znode
			// between cycles (which costs a remake). Made after the release,
			// it would race ZooKeeper's container reaper (every 100ms here),
			// which may remove the empty znode first.
			const first = "/v1/locks/bench-c-0/"
			st, b, err := c.do(ctx, http.MethodPost, first+"acquire", body)
			if err := expect("acquire", st, b, err, http.StatusOK); err != nil {
				t.Fatal(err)
			}
			if conn != nil {
				if _, err := conn.Create(root+"/locks/bench-c-0/zz-keep", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
					t.Fatal(err)
				}
			}
			st, b, err = c.do(ctx, http.MethodPost, first+"release", body)
			if err := expect("release", st, b, err, http.StatusNoContent); err != nil {
				t.Fatal(err)
			}
			op := lockOp(c, "bench-c-0", body)
			const cycles = 20
			before := packetsOrZero(t, ctx, srv.Addr(), conn)
			for range cycles {
				if err := op(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if conn != nil {
				// 3 a cycle: create2 with its listing behind it, then the delete;
				// a ping may come in between.
				if got := packetsOrZero(t, ctx, srv.Addr(), conn) - before; got < 3*cycles || got > 3*cycles+1 {
					t.Errorf("%d cycles sent ZooKeeper %d packets, want %d (+ a few pings)", cycles, got, 3*cycles)
				}
			}

			lock := "/v1/locks/bench-d-0/"
			var last int64
			for range 2 {
				st, b, err := c.do(ctx, http.MethodPost, lock+"acquire", body)
				if err := expect("acquire", st, b, err, http.StatusOK); err != nil {
					t.Fatal(err)
				}
				g, err := parseGrant(b)
				if err != nil || g.Token <= last {
					t.Fatalf("grant %+v (%v) after token %d: want a growing token", g, err, last)
				}
				last = g.Token
				checkNodes(t, conn, root+"/locks/bench-d-0", g)
				st, b, err = c.do(ctx, http.MethodPost, lock+"acquire", other)
				if err := expect("second holder's acquire", st, b, err, http.StatusConflict); err != nil {
					t.Error(err)
				}
				checkNodes(t, conn, root+"/locks/bench-d-0", g)
				st, b, err = c.do(ctx, http.MethodPost, lock+"release", body)
				if err := expect("release", st, b, err, http.StatusNoContent); err != nil {
					t.Fatal(err)
				}
				checkNodes(t, conn, root+"/locks/bench-d-0", grant{})
			}

			for _, bad := range []struct {
				method, path string
				body         []byte
				want         int
			}{
				{http.MethodPost, lock + "acquire", []byte(`{"lease":`), http.StatusBadRequest},
				{http.MethodPost, lock + "acquire", leaseBody("nope"), http.StatusNotFound},
				{http.MethodPost, lock + "release", body, http.StatusConflict},
				{http.MethodPost, "/v1/locks/bench-d-0/steal", body, http.StatusNotFound},
				{http.MethodDelete, "/v1/leases/nope", nil, http.StatusNotFound},
			} {
				st, b, h, err := c.exchange(ctx, bad.method, bad.path, "application/json", bad.body)
				if err := expect(bad.method+" "+bad.path, st, b, err, bad.want); err != nil {
					t.Error(err)
				} else if ct := h.Get("Content-Type"); ct != "application/problem+json" {
					t.Errorf("%s %s: Content-Type %q, want application/problem+json", bad.method, bad.path, ct)
				}
			}
			if err := c.revokeLeases(ctx, leases, 2); err != nil {
				t.Fatal(err)
			}
			st, b, err = c.do(ctx, http.MethodPost, lock+"acquire", body)
			if err := expect("acquire with a revoked lease", st, b, err, http.StatusNotFound); err != nil {
				t.Error(err)
			}
		})
	}
}

// startFloor serves the floor server kind on a free loopback port until the
// test ends, and returns the bench's client of it.
func startFloor(t *testing.T, kind string, conn *zk.Conn, root string) *client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- benchfloor.Serve(ctx, ln, kind, conn, root) }()
	c := newClient("http://"+ln.Addr().String(), 4, 10*time.Second)
	t.Cleanup(func() {
		c.close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return c
}

// checkNodes checks that parent holds g's node alone with g's token as its
// czxid, or nothing for a zero g (no ZooKeeper: nothing to check).
func checkNodes(t *testing.T, conn *zk.Conn, parent string, g grant) {
	t.Helper()
	if conn == nil {
		return
	}
	kids, _, err := conn.Children(parent)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	want := "[]"
	if g.Node != "" {
		want = fmt.Sprint([]string{g.Node})
	}
	if fmt.Sprint(kids) != want {
		t.Fatalf("%s holds %v, want %s", parent, kids, want)
	}
	if g.Node == "" {
		return
	}
	_, st, err := conn.Get(path.Join(parent, g.Node))
	if err != nil {
		t.Fatal(err)
	}
	if st.Czxid != g.Token || st.EphemeralOwner != conn.SessionID() {
		t.Fatalf("%s: czxid %d, owner %x; want the token %d, the floor's session %x", g.Node, st.Czxid, st.EphemeralOwner, g.Token, conn.SessionID())
	}
}

// packetsOrZero is the count of packets ZooKeeper has received on conn's
// session (its `cons` line's recved), or 0 without a conn: the floor's own,
// apart from any other session's.
func packetsOrZero(t *testing.T, ctx context.Context, addr string, conn *zk.Conn) int64 {
	t.Helper()
	if conn == nil {
		return 0
	}
	cons, err := zkserver.FourLetterWord(ctx, addr, "cons")
	if err != nil {
		t.Fatal(err)
	}
	sid := fmt.Sprintf("sid=0x%x", conn.SessionID())
	for _, line := range strings.Split(cons, "\n") {
		if !strings.Contains(line, sid+",") && !strings.Contains(line, sid+")") {
			continue
		}
		_, rest, _ := strings.Cut(line, "recved=")
		n, err := strconv.ParseInt(rest[:strings.IndexByte(rest+",", ',')], 10, 64)
		if err != nil {
			t.Fatalf("cons: %q: %v", line, err)
		}
		return n
	}
	t.Fatalf("cons has no %s:\n%s", sid, cons)
	return 0
}
