//go:build linux

package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestPercentiles(t *testing.T) {
	var d dist
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	s := summarize(d)
	if s.n != 100 || s.p50 != 50*time.Millisecond || s.p90 != 90*time.Millisecond ||
		s.p99 != 99*time.Millisecond || s.worst != 100*time.Millisecond {
		t.Fatalf("summary %+v", s)
	}
	if s.mean != 50500*time.Microsecond {
		t.Fatalf("mean %v", s.mean)
	}
	if got := summarize(nil); got.p50 != 0 || got.mean != 0 {
		t.Fatalf("empty summary %+v", got)
	}
}

func TestParseMetrics(t *testing.T) {
	m := parseMetrics([]byte(`# HELP zkgate_waiters Requests waiting.
# TYPE zkgate_waiters gauge
zkgate_waiters{kind="lock"} 10000
go_memstats_heap_inuse_bytes 4.677632e+06
zkgate_http_request_duration_seconds_sum{method="POST",route="/v1/locks/{name}/acquire"} 2.5
zkgate_http_request_duration_seconds_count{method="POST",route="/v1/locks/{name}/acquire"} 1000
`))
	if m[`zkgate_waiters{kind="lock"}`] != 10000 || m["go_memstats_heap_inuse_bytes"] != 4677632 {
		t.Fatalf("parsed %v", m)
	}
	before := map[string]float64{}
	if got := serverMean(before, m, "/v1/locks/{name}/acquire"); got != 2500*time.Microsecond {
		t.Fatalf("serverMean %v", got)
	}
	if got := serverMean(before, m, "/v1/locks/{name}/release"); got != 0 {
		t.Fatalf("serverMean of an absent route %v", got)
	}
}

func TestExclusion(t *testing.T) {
	var x exclusion
	x.enter(5)
	x.leave()
	x.enter(7)
	x.enter(0) // a second holder at once
	x.leave()
	x.leave()
	x.enter(6) // a token going back
	x.leave()
	if x.violations.Load() != 1 || x.tokenViolations.Load() != 1 || x.maxHolders.Load() != 2 || x.entered.Load() != 4 {
		t.Fatalf("violations %d, token violations %d, max holders %d, entered %d",
			x.violations.Load(), x.tokenViolations.Load(), x.maxHolders.Load(), x.entered.Load())
	}
}

func TestParseSrvrAndFlags(t *testing.T) {
	v, mode := parseSrvr("Zookeeper version: 3.8.0-abc, built on 2024-12-29\nLatency min/avg/max: 0/0.1/3\nMode: standalone\n")
	if v != "3.8.0-abc, built on 2024-12-29" || mode != "standalone" {
		t.Fatalf("srvr: %q %q", v, mode)
	}
	c, err := parseFlags([]string{"-quick", "-waiters", "50"})
	if err != nil {
		t.Fatal(err)
	}
	if c.iterations != 300 || c.waiters != 50 || len(c.phases) != len(allPhases) {
		t.Fatalf("quick flags: %+v", c)
	}
	if _, err := parseFlags([]string{"-phases", "latency,nope"}); err == nil {
		t.Fatal("an unknown phase was accepted")
	}
	if thousands(10000) != "10,000" || thousands(999) != "999" || thousands(1234567) != "1,234,567" {
		t.Fatal("thousands")
	}
}

func TestLedger(t *testing.T) {
	l := newLedger()
	a, b, c := payload("gc", 1, 100), payload("gc", 2, 100), payload("gc", 3, 100)
	l.addProduced(a)
	l.addProduced(b)
	l.addProduced(c)
	l.addTaken(a)
	l.addTaken(b)
	if d := l.check(); d.exactlyOnce() || d.lost != 1 || d.duplicates != 0 || d.taken != 2 || d.produced != 3 {
		t.Fatalf("one lost: %+v", d)
	}
	l.addTaken(c)
	if d := l.check(); !d.exactlyOnce() {
		t.Fatalf("all taken once: %+v", d)
	}
	l.addTaken(b)
	l.addTaken(payload("gc", 9, 100))
	d := l.check()
	if d.exactlyOnce() || d.duplicates != 1 || d.unknown != 1 || d.taken != 5 {
		t.Fatalf("a duplicate and an unknown: %+v", d)
	}
	if s := d.add(d); s.duplicates != 2 || s.produced != 6 {
		t.Fatalf("add: %+v", s)
	}
}

func TestPayloadAndEntries(t *testing.T) {
	p := payload("gs", 42, 100)
	if len(p) != 100 || string(p[:17]) != "gs-000000000042-." {
		t.Fatalf("payload %q", p)
	}
	if n, ok := payloadSeq(p); !ok || n != 42 {
		t.Fatalf("payloadSeq %d %v", n, ok)
	}
	if _, ok := payloadSeq([]byte("stop-1")); ok {
		t.Fatal("payloadSeq of a short item")
	}
	got := sortEntries([]string{"entry-100-0000000010", "entry-005-0000000011", "lock-1", "entry-100-0000000002", "entry-x-1"})
	want := []string{"entry-005-0000000011", "entry-100-0000000002", "entry-100-0000000010"}
	if len(got) != len(want) {
		t.Fatalf("sortEntries %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sortEntries %v", got)
		}
	}
}

func TestQueueFlags(t *testing.T) {
	c, err := parseFlags([]string{"-quick", "-phases", "queue-throughput,queue-wakeup", "-queue-wakeups", "7"})
	if err != nil {
		t.Fatal(err)
	}
	if c.qItems != 300 || c.qDur != 2*time.Second || c.qWakeups != 7 || !c.phases["queue-wakeup"] || c.phases["waiters"] {
		t.Fatalf("quick queue flags: %+v", c)
	}
	if _, err := parseFlags([]string{"-queue-bytes", "8"}); err == nil {
		t.Fatal("8-byte items were accepted")
	}
	if _, err := parseFlags([]string{"-queue-items", "1"}); err == nil {
		t.Fatal("one item was accepted")
	}
}

func TestStatCPU(t *testing.T) {
	// A command with spaces and a ')' of its own: utime 250 and stime 37
	// ticks are fields 14 and 15.
	line := "4242 (zk gate) (x)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 37 0 0 20 0 12 0 100 0 0"
	d, err := statCPU(line)
	if err != nil || d != 2870*time.Millisecond {
		t.Fatalf("statCPU = %v, %v; want 2.87s", d, err)
	}
	if _, err := statCPU("4242 (zkgate) S 1 2"); err == nil {
		t.Fatal("a short line: no error")
	}
}

// TestABBA pins the order of the A/B runner: blocks alternate gateway-first
// and other-first, the last one short; halves are G D D G after a warm-up
// of each; rounds are B T T B, and B T F F T B for three sides.
func TestABBA(t *testing.T) {
	var got []string
	record := func(s abRun[int]) error {
		w := ""
		if s.warm {
			w = "w"
		}
		got = append(got, fmt.Sprintf("%s%d%s", s.name[:1], s.n, w))
		return nil
	}
	r := ab[int]{sides: []string{"G", "D"}, run: record, between: func(n int) error { got = append(got, fmt.Sprintf("|%d", n)); return nil }}
	pairs, err := r.blocks(5, 2)
	if want := "G2 D2 |2 D2 G2 |2 G1 D1 |1"; err != nil || pairs != 3 || strings.Join(got, " ") != want {
		t.Fatalf("blocks: %d pairs, %v, %q; want 3 pairs, %q", pairs, err, strings.Join(got, " "), want)
	}
	got, r.between = nil, nil
	if err, want := r.warmHalves(1, 5), "G1w D1w G2 D2 D3 G3"; err != nil || strings.Join(got, " ") != want {
		t.Fatalf("warmHalves: %v, %q; want %q", err, strings.Join(got, " "), want)
	}
	for _, c := range []struct {
		sides      []string
		rounds     int
		want, what string
	}{{[]string{"B", "T"}, 2, "B1 T1 T1 B1 B1 T1 T1 B1", "rounds"}, {[]string{"B", "T", "F"}, 1, "B1 T1 F1 F1 T1 B1", "rounds of three"}} {
		got, r.sides = nil, c.sides
		if err := r.rounds(c.rounds, 1); err != nil || strings.Join(got, " ") != c.want {
			t.Fatalf("%s: %v, %q; want %q", c.what, err, strings.Join(got, " "), c.want)
		}
	}
}

// TestIDIn: the id of the gateway's answer ("id") and of etcd's ("ID");
// an answer without one is an error.
func TestIDIn(t *testing.T) {
	for _, c := range []struct{ body, want string }{{`{"id":"a1","ttl":"1m"}`, "a1"}, {`{"ID":"7587","TTL":600}`, "7587"}, {`{}`, ""}, {`nope`, ""}} {
		got, err := idIn("grant", []byte(c.body))
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("idIn(%s) = %q, %v; want %q", c.body, got, err, c.want)
		}
	}
}
