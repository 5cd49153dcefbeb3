package gwtest

import (
	"context"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/restartload"
)

// CheckRestarts runs the load of restartload (cfg's Register, Binary, Dir
// and Log are the test's) through cfg's restarts, and fails t unless they
// cost nothing: every job exited 0, no lease ended, no two holders
// overlapped, every hold kept its token, every restart was made.
func CheckRestarts(t testing.TB, cfg restartload.Config) *restartload.Report {
	t.Helper()
	reg := NewFencedRegister()
	cfg.Register, cfg.Binary, cfg.Dir, cfg.Log = reg, Binary(t), t.TempDir(), t.Output()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := restartload.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.Summary())
	for _, list := range [][]string{rep.JobFailures, rep.LeasesEnded, rep.Overlaps, rep.TokensChanged} {
		for _, s := range list {
			t.Error(s)
		}
	}
	gateways := cfg.Gateways
	if gateways == 0 {
		gateways = len(cfg.URLs)
	}
	if rep.JobsOK != cfg.Jobs || rep.Restarts != cfg.Rounds*gateways || rep.TokenChecks == 0 || rep.Items == 0 {
		t.Errorf("jobs ok %d of %d, %d restarts, %d tokens checked, %d items", rep.JobsOK, cfg.Jobs, rep.Restarts, rep.TokenChecks, rep.Items)
	}
	if n := reg.Check(t); n == 0 {
		t.Error("no exclusive hold was recorded")
	}
	return rep
}
