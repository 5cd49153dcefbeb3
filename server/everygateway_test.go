package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestOneTruthAboutEveryLease: a lease that ended on its own gateway, for
// whatever reason, answers 410 lease_expired with that reason on every
// other gateway too (it answered 404 there), and one nobody made, 404.
func TestOneTruthAboutEveryLease(t *testing.T) {
	t.Parallel()
	opts := gwtest.GatewayOptions{Root: gwtest.UniqueRoot(t), SessionTimeout: 2 * time.Second}
	a := gwtest.StartGateway(t, opts)
	b := gwtest.StartGateway(t, opts)
	p := gwtest.StartProcess(t, opts)

	gone := func(id, reason string) {
		t.Helper()
		gwtest.Eventually(t, 20*time.Second, func() error {
			r := gwtest.Do(t, "GET", a.URL+"/v1/leases/"+id, nil)
			if r.Status != http.StatusGone {
				return fmt.Errorf("lease %s on another gateway: %d %s", id, r.Status, r.Body)
			}
			if got := r.JSON(t)["reason"]; got != reason {
				return fmt.Errorf("lease %s ended for %v, want %s", id, got, reason)
			}
			return nil
		})
		// Every operation with it says the same.
		mustStatus(t, gwtest.Do(t, "POST", a.URL+"/v1/leases/"+id+"/keepalive", nil), http.StatusGone, "keepalive of an ended lease")
		mustStatus(t, acquire(t, a.URL, "truth", id, "0s"), http.StatusGone, "acquire with an ended lease")
	}

	revoked := newLease(t, b.URL, "1m", "revoked")
	mustStatus(t, gwtest.Do(t, "DELETE", b.URL+"/v1/leases/"+revoked, nil), http.StatusNoContent, "revoke")
	gone(revoked, "revoked")

	expired := newLease(t, b.URL, "1s", "expired")
	gone(expired, "expired")

	lost := newLease(t, p.URL, "1m", "lost")
	mustStatus(t, acquire(t, p.URL, "truth", lost, "0s"), http.StatusOK, "acquire on the doomed gateway")
	p.Kill()
	gone(lost, "session_lost")

	shut := newLease(t, b.URL, "1m", "shut")
	b.Stop()
	gone(shut, "gateway_shutdown")

	mustStatus(t, gwtest.Do(t, "GET", a.URL+"/v1/leases/00000000-0000-4000-8000-000000000000", nil), http.StatusNotFound, "a lease nobody made")
}

// TestLeaseListOfEveryGateway: GET /v1/leases on any gateway lists the
// leases of every gateway, each labelled with the gateway that keeps it;
// scope=gateway lists one gateway's own; a gateway that does not answer is
// named as unreachable.
func TestLeaseListOfEveryGateway(t *testing.T) {
	t.Parallel()
	opts := gwtest.GatewayOptions{Root: gwtest.UniqueRoot(t), SessionTimeout: 10 * time.Second}
	a := gwtest.StartGateway(t, opts)
	p := gwtest.StartProcess(t, opts)
	la := newLease(t, a.URL, "1m", "on-a")
	lp := newLease(t, p.URL, "1m", "on-p")
	mustStatus(t, acquire(t, p.URL, "listed", lp, "0s"), http.StatusOK, "acquire on p")

	list := func(url, query string) (map[string]string, []any) {
		t.Helper()
		r := gwtest.Do(t, "GET", url+"/v1/leases"+query, nil)
		mustStatus(t, r, http.StatusOK, "list")
		doc := r.JSON(t)
		got := map[string]string{}
		for _, l := range doc["leases"].([]any) {
			m := l.(map[string]any)
			got[m["id"].(string)] = m["gateway"].(string)
			if m["id"] == lp && len(m["holds"].([]any)) != 1 {
				t.Errorf("p's lease is listed without its lock: %v", m)
			}
		}
		u, _ := doc["unreachable"].([]any)
		return got, u
	}
	all, _ := list(a.URL, "")
	if len(all) != 2 || all[la] == "" || all[lp] == "" || all[la] == all[lp] {
		t.Fatalf("a lists %v, want both leases with their two gateways", all)
	}
	fromP, _ := list(p.URL, "")
	if len(fromP) != 2 {
		t.Fatalf("p lists %v, want both leases", fromP)
	}
	own, _ := list(a.URL, "?scope=gateway")
	if len(own) != 1 || own[la] == "" {
		t.Fatalf("a's own leases: %v", own)
	}
	mustStatus(t, gwtest.Do(t, "GET", a.URL+"/v1/leases?scope=nearby", nil), http.StatusBadRequest, "a bad scope")

	p.Pause(t) // registered, but silent
	defer p.Resume()
	got, unreachable := list(a.URL, "")
	if len(got) != 1 || got[la] == "" || len(unreachable) != 1 ||
		unreachable[0].(map[string]any)["gateway"] != all[lp] {
		t.Fatalf("with p (%s) silent, a lists %v and unreachable %v", all[lp], got, unreachable)
	}
}

// TestDashboardShowsEveryGateway: a gateway's dashboard lists the other
// gateways with their address and state, and the queue claims that another
// gateway's leases hold, next to those leases.
func TestDashboardShowsEveryGateway(t *testing.T) {
	t.Parallel()
	opts := gwtest.GatewayOptions{Root: gwtest.UniqueRoot(t)}
	a := gwtest.StartGateway(t, opts)
	b := gwtest.StartGateway(t, opts)
	lease := newLease(t, b.URL, "1m", "consumer-on-b")
	mustStatus(t, gwtest.Do(t, "POST", b.URL+"/v1/queues/jobs/items", "work"), http.StatusCreated, "produce")
	claimed := gwtest.Do(t, "POST", b.URL+"/v1/queues/jobs/claim", map[string]any{"lease": lease})
	mustStatus(t, claimed, http.StatusOK, "claim on b")
	item := claimed.Header.Get("X-Zkgate-Item-Id")

	gwtest.Eventually(t, 10*time.Second, func() error {
		_, _, body := getPage(t, a.URL+"/ui/leases")
		if !strings.Contains(body, "consumer-on-b") || !strings.Contains(body, "claim jobs ("+item+")") {
			return fmt.Errorf("a's lease page does not show b's claim of %s", item)
		}
		_, _, body = getPage(t, a.URL+"/")
		for _, u := range []string{a.URL, b.URL} {
			if !strings.Contains(body, strings.TrimPrefix(u, "http://")) {
				return fmt.Errorf("a's overview does not show the gateway at %s", u)
			}
		}
		return nil
	})
}
