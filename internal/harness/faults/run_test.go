//go:build linux

package faults

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

func TestMain(m *testing.M) { gwtest.Main(m) }

// TestShortFaultRun is the suite's short version: a few seconds of random
// faults (fixed seed) against the real ensemble and gateway processes, then
// the checker over everything the clients saw. Seed 7 deals a gateway
// drain second. It goes on past its 10 s while a kind of wall-clock
// primitive was never held (a loaded machine's first grant of one may come
// late), for 2 minutes at most: a run that never sees one held fails below.
func TestShortFaultRun(t *testing.T) {
	gwtest.ZK(t) // a missing ZooKeeper fails loudly with the install command
	// The gateways keep their data where the run keeps its logs: a drain's
	// handover files were written where the suite ran (and committed once).
	_, statErr := os.Stat("zkgate-data")
	hadData := statErr == nil
	defer func() {
		if _, err := os.Stat("zkgate-data"); err == nil && !hadData {
			t.Errorf("the run's gateways wrote zkgate-data where the suite runs")
		}
	}()
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Binary:           gwtest.Binary(t),
		Duration:         10 * time.Second,
		MaxDuration:      2 * time.Minute,
		Seed:             7,
		LockClients:      12,
		Locks:            3,
		Producers:        2,
		Consumers:        4,
		Vanishers:        2,
		WallClockWorkers: 3,
		FaultGap:         700 * time.Millisecond,
		Log:              &progress,
	})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("\n%s\n%s", progress.String(), out.String())
	if rep.Violations != 0 {
		t.Fatalf("%d violations (logs in %s)", rep.Violations, rep.WorkDir)
	}
	// A run that did nothing would check nothing.
	if rep.Grants == 0 || rep.Writes == 0 || rep.Acks == 0 || rep.AddsAcked == 0 {
		t.Fatalf("too little happened: %d grants, %d writes, %d acks, %d adds", rep.Grants, rep.Writes, rep.Acks, rep.AddsAcked)
	}
	gaps := 0
	for _, kind := range wallKinds {
		if rep.WallHolds[kind] == 0 {
			t.Errorf("%d wall-clock holds of the %s", rep.WallHolds[kind], kind)
		}
		if g := rep.WallGaps[kind]; g != nil {
			gaps += g.Measured
		}
	}
	if gaps == 0 {
		t.Errorf("no gap between conflicting wall-clock holds was measured")
	}
	// Every 410 about a lease whose record the observer watched, judged or
	// not (a judgement needs a lead over the allowance to fail).
	if rep.GoneOwn+rep.GoneOther+rep.GoneReplaced+rep.GoneSessionEnded+rep.GoneObserverOut+rep.GoneTTLRunOut == 0 {
		t.Errorf("no 410 was set against its lease's record")
	}
	if rep.Members == 0 || rep.MembersSilent == 0 || rep.MembersJudged == 0 {
		t.Errorf("too little of the group: %d members, %d silent, %d judged", rep.Members, rep.MembersSilent, rep.MembersJudged)
	}
	if rep.Faults[FGatewayDrain] == 0 {
		t.Errorf("no gateway was drained: %v", rep.Faults)
	}
	faults := 0
	for k, n := range rep.Faults {
		if k != FClientVanished && k != FConsumerDied && k != FLeaseMidHold && k != FMemberSilent {
			faults += n
		}
	}
	if faults == 0 {
		t.Fatalf("no process or network fault was injected: %v", rep.Faults)
	}
}

func waitLogged(t *testing.T, log *gwtest.Buffer, line string, work context.Context, mustGoOn bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(log.String(), line); {
		if mustGoOn && work.Err() != nil {
			t.Fatalf("the work ended before %q was logged:\n%s", line, log.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q logged within a minute:\n%s", line, log.String())
		}
		time.Sleep(5 * time.Millisecond) // polling the log, bounded by the deadline
	}
}

// Past its duration, a run goes on while a kind of wall-clock primitive was
// never held (on a loaded machine a short run's first grant of one may come
// late), and ends once every kind was; by its max duration at the latest.
func TestWorkGoesOnUntilEveryPrimitiveWasHeld(t *testing.T) {
	t.Run("until held", func(t *testing.T) {
		var log gwtest.Buffer
		r := newRunner(Config{Duration: time.Millisecond, MaxDuration: time.Hour, WallClockWorkers: 1, Log: &log})
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go r.endWork(ctx, stop)
		for _, kind := range wallKinds {
			if kind != WallElection {
				r.wallHeld(kind)
			}
		}
		waitLogged(t, &log, "nothing was held yet of: election;", ctx, true)
		if ctx.Err() != nil {
			t.Fatalf("the work ended past its duration with the election never held:\n%s", log.String())
		}
		r.wallHeld(WallElection)
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
			t.Fatalf("the work went on a minute after every kind was held:\n%s", log.String())
		}
	})
	t.Run("by the max duration", func(t *testing.T) {
		var log gwtest.Buffer
		r := newRunner(Config{Duration: time.Millisecond, MaxDuration: 2 * time.Millisecond, WallClockWorkers: 1, Log: &log})
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go r.endWork(ctx, stop)
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
			t.Fatalf("the work went on a minute past its max duration:\n%s", log.String())
		}
		waitLogged(t, &log, "a kind of wall-clock primitive was never held", ctx, false)
	})
}

// A max duration is none (0) or from the duration to 24 h.
func TestConfigMaxDuration(t *testing.T) {
	for _, tc := range []struct {
		max time.Duration
		ok  bool
	}{
		{0, true}, {10 * time.Second, true}, {2 * time.Minute, true},
		{5 * time.Second, false}, {25 * time.Hour, false}, {-time.Second, false},
	} {
		err := Config{Binary: "zkgate", Duration: 10 * time.Second, MaxDuration: tc.max}.withDefaults().validate()
		if (err == nil) != tc.ok {
			t.Errorf("max duration %s with a duration of 10s: error %v, want ok %v", tc.max, err, tc.ok)
		}
	}
}
