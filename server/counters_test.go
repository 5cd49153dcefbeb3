package server_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// counters drives /v1/counters for TestOpenAPIScenario: each operation,
// a blocking read, and each problem of the counters.
func (s *specChecker) counters(t *testing.T, conn *zk.Conn, root string) {
	t.Helper()
	absent := specJSON(t, s.do(t, 200, specReq("GET", "/v1/counters/hits", nil)))
	if absent["value"] != float64(0) || absent["version"] != float64(-1) {
		t.Errorf("an absent counter: %v", absent)
	}
	added := s.do(t, 200, specReq("POST", "/v1/counters/hits/add", map[string]any{"delta": 5}))
	if st := specJSON(t, added); st["value"] != float64(5) || st["version"] != float64(0) {
		t.Errorf("the first add: %v", st)
	}
	idx := specIndex(t, added)
	read := s.startRead(fmt.Sprintf("/v1/counters/hits?index=%d&wait=1m", idx))
	<-read.wrote
	s.do(t, 200, specReq("POST", "/v1/counters/hits/add", map[string]any{"delta": -2}))
	r := read.wait(t, 2*time.Minute)
	s.check(t, 200, read.call, r)
	if st := specJSON(t, r.resp); st["value"] != float64(3) && r.elapsed < time.Minute {
		t.Errorf("the blocking read answered %s", r.resp.Body)
	}
	p := specWantCode(t, s.do(t, 409, specReq("PUT", "/v1/counters/hits", map[string]any{"value": 9, "version": 0})), "version_mismatch")
	if p["value"] != float64(3) || p["version"] != float64(1) {
		t.Errorf("version_mismatch: %v", p)
	}
	s.do(t, 200, specReq("PUT", "/v1/counters/hits", map[string]any{"value": 9, "version": 1}))
	s.do(t, 200, specReq("PUT", "/v1/counters/hits", map[string]any{"value": 10}))
	s.do(t, 200, specReq("PUT", "/v1/counters/wide?format=int64", map[string]any{"value": int64(math.MaxInt64)}))
	list := specJSON(t, s.do(t, 200, specReq("GET", "/v1/counters?limit=1", nil)))
	if l := list["counters"].([]any); len(l) != 1 || list["next"] == nil {
		t.Errorf("GET /v1/counters?limit=1: %v", list)
	}
	specWantCode(t, s.do(t, 409, specReq("GET", "/v1/counters/wide", nil)), "format_mismatch")
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/counters/wide/add?format=int64", map[string]any{"delta": 1})), "out_of_range")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/counters/hits?format=hex", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/counters/hits/add", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("PUT", "/v1/counters/hits?format=int32", map[string]any{"value": int64(math.MaxInt32) + 1})), "invalid_request")

	// A node with children is no counter.
	odd := kinds.Counters.Path(root, "odd")
	if _, err := conn.Create(odd, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(odd+"/child", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	specWantCode(t, s.do(t, 400, specReq("DELETE", "/v1/counters/odd", nil)), "invalid_request")
	for _, p := range []string{odd + "/child", odd} {
		if err := conn.Delete(p, -1); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"hits", "wide", "never-made"} {
		s.do(t, 204, specReq("DELETE", "/v1/counters/"+n, nil))
	}
}

// counterProseCases are TestOpenAPIProblemProse's cases of the counters'
// problems.
func counterProseCases(t *testing.T, s *specChecker, name func() string) map[string]func() gwtest.Response {
	int32At := func(v int64) string {
		nm := name()
		s.do(t, 200, specReq("PUT", "/v1/counters/"+nm+"?format=int32", map[string]any{"value": v}))
		return nm
	}
	return map[string]func() gwtest.Response{
		"GET /v1/counters/{name} 409 format_mismatch": func() gwtest.Response {
			return s.do(t, 409, specReq("GET", "/v1/counters/"+int32At(7), nil))
		},
		"PUT /v1/counters/{name} 409 version_mismatch": func() gwtest.Response {
			return s.do(t, 409, specReq("PUT", "/v1/counters/"+int32At(7)+"?format=int32", map[string]any{"value": 1, "version": 5}))
		},
		"PUT /v1/counters/{name} 409 format_mismatch": func() gwtest.Response {
			return s.do(t, 409, specReq("PUT", "/v1/counters/"+int32At(7)+"?format=int64", map[string]any{"value": 1}))
		},
		"POST /v1/counters/{name}/add 409 out_of_range": func() gwtest.Response {
			return s.do(t, 409, specReq("POST", "/v1/counters/"+int32At(math.MaxInt32)+"/add?format=int32", map[string]any{"delta": 1}))
		},
		"POST /v1/counters/{name}/add 409 format_mismatch": func() gwtest.Response {
			return s.do(t, 409, specReq("POST", "/v1/counters/"+int32At(7)+"/add", map[string]any{"delta": 1}))
		},
	}
}

// TestCounterAddsThroughThreeGateways: 32 adders, spread over 3 gateways
// of one root, each add acknowledged 200, lose none and double none: the
// sum is the number of adds, and each answer's value is distinct.
func TestCounterAddsThroughThreeGateways(t *testing.T) {
	t.Parallel()
	first := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	gws := []*gwtest.Gateway{first,
		gwtest.StartGateway(t, gwtest.GatewayOptions{Root: first.Root}),
		gwtest.StartGateway(t, gwtest.GatewayOptions{Root: first.Root})}
	const adders, each = 32, 8
	var mu sync.Mutex
	seen := map[float64]bool{}
	var wg sync.WaitGroup
	for i := range adders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				r, err := gwtest.DoCtx(context.Background(), "POST", gws[i%3].URL+"/v1/counters/total/add?format=int64", map[string]any{"delta": 1})
				if err != nil || r.Status != 200 {
					t.Errorf("add through gateway %d: %v %d %s", i%3, err, r.Status, r.Body)
					return
				}
				v := specJSON(t, r)["value"].(float64)
				mu.Lock()
				if seen[v] {
					t.Errorf("two adds answered %v", v)
				}
				seen[v] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	conn := gwtest.Client(t, first.ZK, 10*time.Second)
	data, _, err := conn.Get(kinds.Counters.Path(first.Root, "total"))
	if err != nil || len(data) != 8 {
		t.Fatalf("the node: %x, %v", data, err)
	}
	if got := binary.BigEndian.Uint64(data); got != adders*each {
		t.Fatalf("after %d adds the counter is %d", adders*each, got)
	}
	for _, g := range gws {
		st := specJSON(t, gwtest.Do(t, "GET", g.URL+"/v1/counters/total?format=int64", nil))
		if st["value"] != float64(adders*each) {
			t.Errorf("gateway %s reads %v", g.URL, st)
		}
	}
}
