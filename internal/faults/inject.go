//go:build linux

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

func newRand(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }

// jitter is d scaled by a random factor from 0.5 to 1.5.
func jitter(rng *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.5 + rng.Float64()))
}

// between is a random duration from lo to hi.
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// sleepCtx sleeps for d or until ctx ends, and reports whether it slept
// the whole time.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Fault kinds, as counted in the report.
const (
	FZKLeaderKill    = "zookeeper_leader_killed_and_restarted"
	FZKFollowerKill  = "zookeeper_follower_killed_and_restarted"
	FGatewayPause    = "gateway_paused_past_session_timeout"
	FGatewayKill     = "gateway_killed_and_restarted"
	FGatewayCut      = "gateway_cut_from_zookeeper_and_healed"
	FClientVanished  = "client_hung_up_mid_wait"
	FLeaseMidHold    = "lease_expired_mid_hold"
	FConsumerDied    = "consumer_lease_killed_mid_claim"
	restartWithin    = 90 * time.Second
	minFaultDowntime = 300 * time.Millisecond
)

// zooKeeperFaults kills the ensemble's leader or a follower, one at a time,
// and restarts it after a while. Quorum is kept: one member down at most.
func (r *runner) zooKeeperFaults(ctx context.Context, rng *rand.Rand) error {
	for sleepCtx(ctx, jitter(rng, r.cfg.FaultGap)) {
		leaderCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		leader, err := r.cl.ens.Leader(leaderCtx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("no ZooKeeper leader: %w", err)
		}
		kind, victim := FZKLeaderKill, leader
		if rng.IntN(2) == 0 {
			kind = FZKFollowerKill
			victim = (leader + 1 + rng.IntN(len(r.cl.ens.Servers)-1)) % len(r.cl.ens.Servers)
		}
		down := between(rng, minFaultDowntime, 2*time.Second)
		r.logf("fault: kill ZooKeeper member %d (%s), down for %s", victim+1, map[bool]string{true: "leader", false: "follower"}[victim == leader], down.Round(time.Millisecond))
		if err := r.cl.ens.Kill(victim); err != nil {
			return fmt.Errorf("kill ZooKeeper member %d: %w", victim+1, err)
		}
		r.fault(kind)
		sleepCtx(ctx, down)
		rctx, cancel := context.WithTimeout(context.Background(), restartWithin)
		err = r.cl.ens.Restart(rctx, victim)
		cancel()
		if err != nil {
			return fmt.Errorf("restart ZooKeeper member %d: %w", victim+1, err)
		}
		r.logf("heal: ZooKeeper member %d serves again", victim+1)
	}
	return nil
}

// gatewayFaults pauses, kills or cuts off one gateway at a time, and heals
// it after a while (at once when the time is up).
func (r *runner) gatewayFaults(ctx context.Context, rng *rand.Rand) error {
	for sleepCtx(ctx, jitter(rng, r.cfg.FaultGap)) {
		g := r.cl.gateways[rng.IntN(len(r.cl.gateways))]
		switch rng.IntN(3) {
		case 0:
			d := r.cfg.SessionTimeout + between(rng, 500*time.Millisecond, 1500*time.Millisecond)
			r.logf("fault: pause gateway %d (SIGSTOP) for %s", g.index, d.Round(time.Millisecond))
			g.pause()
			r.fault(FGatewayPause)
			sleepCtx(ctx, d)
			g.resume()
			r.logf("heal: gateway %d resumed (SIGCONT)", g.index)
		case 1:
			d := between(rng, minFaultDowntime, 1500*time.Millisecond)
			r.logf("fault: kill gateway %d (SIGKILL), restart in %s", g.index, d.Round(time.Millisecond))
			g.kill()
			r.fault(FGatewayKill)
			sleepCtx(ctx, d)
			sctx, cancel := context.WithTimeout(context.Background(), restartWithin)
			err := g.start(sctx)
			cancel()
			if err != nil {
				return fmt.Errorf("restart gateway %d: %w", g.index, err)
			}
			r.logf("heal: gateway %d serves again at %s", g.index, g.URL())
		case 2:
			// From well within the session timeout (the same session comes
			// back) to well past it (the session is lost).
			d := time.Duration(float64(r.cfg.SessionTimeout) * (0.3 + 1.5*rng.Float64()))
			r.logf("fault: cut gateway %d from ZooKeeper for %s", g.index, d.Round(time.Millisecond))
			g.link.cut()
			r.fault(FGatewayCut)
			sleepCtx(ctx, d)
			g.link.heal()
			r.logf("heal: gateway %d reaches ZooKeeper again", g.index)
		}
	}
	return nil
}
