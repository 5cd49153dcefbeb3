//go:build linux

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
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
	FZKFollowerPause = "zookeeper_follower_paused"
	FGatewayPause    = "gateway_paused_past_session_timeout"
	FGatewayKill     = "gateway_killed_and_restarted"
	FGatewayKillHere = "gateway_killed_and_restarted_at_once_on_its_address"
	FGatewayDrain    = "gateway_drained_and_restarted"
	FGatewayCut      = "gateway_cut_from_zookeeper_and_healed"
	FClientVanished  = "client_hung_up_mid_wait"
	FLeaseMidHold    = "lease_expired_mid_hold"
	FConsumerDied    = "consumer_lease_killed_mid_claim"
	restartWithin    = 90 * time.Second
	minFaultDowntime = 300 * time.Millisecond
)

// zooKeeperFaults kills the ensemble's leader or a follower, one at a time,
// and restarts it after a while, or pauses a follower. Quorum is kept: one
// member down at most.
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
		switch rng.IntN(3) {
		case 0:
			kind = FZKFollowerKill
			victim = (leader + 1 + rng.IntN(len(r.cl.ens.Servers)-1)) % len(r.cl.ens.Servers)
		case 1:
			r.pauseFollower(ctx, rng, (leader+1+rng.IntN(len(r.cl.ens.Servers)-1))%len(r.cl.ens.Servers))
			continue
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

// pauseFollower stops ZooKeeper member victim (SIGSTOP) for 100 to 800
// ms, as a long garbage collection would, and lets it go on: less than
// its syncLimit (10 ticks), so that it stays a follower, and wakes to
// clients waiting for reads and to the leader's commits at once.
func (r *runner) pauseFollower(ctx context.Context, rng *rand.Rand, victim int) {
	pid := r.cl.ens.Servers[victim].PID()
	if pid == 0 {
		return
	}
	d := between(rng, 100*time.Millisecond, 800*time.Millisecond)
	r.logf("fault: pause ZooKeeper member %d (follower, SIGSTOP) for %s", victim+1, d.Round(time.Millisecond))
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return
	}
	r.fault(FZKFollowerPause)
	sleepCtx(ctx, d)
	_ = syscall.Kill(pid, syscall.SIGCONT)
	r.logf("heal: ZooKeeper member %d resumed", victim+1)
}

// The gateway faults, dealt from a shuffled deck so that each comes once
// in every four.
const (
	gwPause = iota
	gwKill
	gwCut
	gwDrain
	gwFaultKinds
)

// gatewayFaults pauses, kills, cuts off or drains one gateway at a time,
// and heals it after a while (at once when the time is up).
func (r *runner) gatewayFaults(ctx context.Context, rng *rand.Rand) error {
	var deck []int
	for sleepCtx(ctx, jitter(rng, r.cfg.FaultGap)) {
		g := r.cl.gateways[rng.IntN(len(r.cl.gateways))]
		if len(deck) == 0 {
			deck = rng.Perm(gwFaultKinds)
		}
		kind := deck[0]
		deck = deck[1:]
		switch kind {
		case gwPause:
			d := r.cfg.SessionTimeout + between(rng, 500*time.Millisecond, 1500*time.Millisecond)
			r.logf("fault: pause gateway %d (SIGSTOP) for %s", g.index, d.Round(time.Millisecond))
			g.pause()
			r.fault(FGatewayPause)
			sleepCtx(ctx, d)
			g.resume()
			r.logf("heal: gateway %d resumed (SIGCONT)", g.index)
		case gwKill:
			// Half the time started again at once on its own address. On
			// its data dir, within the session timeout, it resumes its
			// predecessor's session and leases from their record (or
			// answers session_lost for those the record did not keep).
			here := rng.IntN(2) == 0
			d := between(rng, minFaultDowntime, 1500*time.Millisecond)
			if here {
				r.logf("fault: kill gateway %d (SIGKILL), restart it at once at %s", g.index, g.URL())
			} else {
				r.logf("fault: kill gateway %d (SIGKILL), restart in %s", g.index, d.Round(time.Millisecond))
			}
			addr := strings.TrimPrefix(g.URL(), "http://")
			if here {
				r.replaced(g)
			}
			g.kill()
			if here {
				r.fault(FGatewayKillHere)
			} else {
				r.fault(FGatewayKill)
				sleepCtx(ctx, d)
			}
			if err := r.restart(g, addr, here); err != nil {
				return err
			}
		case gwCut:
			// From well within the session timeout (the same session comes
			// back) to well past it (the session is lost).
			d := time.Duration(float64(r.cfg.SessionTimeout) * (0.3 + 1.5*rng.Float64()))
			r.logf("fault: cut gateway %d from ZooKeeper for %s", g.index, d.Round(time.Millisecond))
			g.link.cut()
			r.fault(FGatewayCut)
			sleepCtx(ctx, d)
			g.link.heal()
			r.logf("heal: gateway %d reaches ZooKeeper again", g.index)
		case gwDrain:
			r.logf("fault: drain gateway %d (SIGTERM, --drain-timeout %s), then restart it", g.index, r.cfg.GatewayDrain)
			g.terminate()
			r.fault(FGatewayDrain)
			if err := r.restart(g, "", false); err != nil {
				return err
			}
		}
	}
	return nil
}

// replaced records that g's process is about to be killed, to be
// replaced at once at its address.
func (r *runner) replaced(g *gateway) {
	at, gl := time.Now(), GatewayLife{g.index, g.life()}
	r.hist.record(func(h *History) { h.Replaced[gl] = at })
}

// restart starts g again: on addr when here (falling back to a free port if
// the address cannot be had), else on a free port.
func (r *runner) restart(g *gateway, addr string, here bool) error {
	sctx, cancel := context.WithTimeout(context.Background(), restartWithin)
	defer cancel()
	if here {
		err := g.startOn(sctx, addr)
		if err == nil {
			r.logf("heal: gateway %d serves again at %s", g.index, g.URL())
			return nil
		}
		r.logf("gateway %d could not start again at %s (%v): on a free port", g.index, addr, err)
	}
	if err := g.start(sctx); err != nil {
		return fmt.Errorf("restart gateway %d: %w", g.index, err)
	}
	r.logf("heal: gateway %d serves again at %s", g.index, g.URL())
	return nil
}
