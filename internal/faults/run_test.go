//go:build linux

package faults

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/gwtest"
)

func TestMain(m *testing.M) { gwtest.Main(m) }

// TestShortFaultRun is the suite's short version: a few seconds of random
// faults (fixed seed) against the real ensemble and gateway processes, then
// the checker over everything the clients saw. Seed 7 deals a gateway
// drain second.
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
	if rep.Grants == 0 || rep.Writes == 0 || rep.Acks == 0 {
		t.Fatalf("too little happened: %d grants, %d writes, %d acks", rep.Grants, rep.Writes, rep.Acks)
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
	if rep.Faults[FGatewayDrain] == 0 {
		t.Errorf("no gateway was drained: %v", rep.Faults)
	}
	faults := 0
	for k, n := range rep.Faults {
		if k != FClientVanished && k != FConsumerDied && k != FLeaseMidHold {
			faults += n
		}
	}
	if faults == 0 {
		t.Fatalf("no process or network fault was injected: %v", rep.Faults)
	}
}
