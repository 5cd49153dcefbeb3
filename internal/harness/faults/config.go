//go:build linux

package faults

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Config is one run of the suite. Zero values get the defaults below.
type Config struct {
	// Binary is the zkgate binary the gateways run (required).
	Binary string
	// Duration is how long clients run and faults are injected (default 60s).
	Duration time.Duration
	// MaxDuration, when above Duration, lets the clients and faults go on
	// past Duration until every kind of wall-clock primitive has been held
	// at least once, and no longer than MaxDuration: on a loaded machine a
	// short run may see no grant of one in Duration, and then checks
	// nothing of it. Zero: Duration alone.
	MaxDuration time.Duration
	// Seed seeds every random choice: the faults, their targets and
	// lengths, and each client's choices. Timing still varies between runs.
	Seed int64
	// MaxRequests stops the clients once they have sent this many requests
	// (default 1,000,000), whichever comes first with Duration.
	MaxRequests int64

	LockClients int // clients taking locks and writing under them (default 24)
	Locks       int // lock names they share (default 4)
	Producers   int // queue producers (default 3)
	Consumers   int // queue consumers claiming and acking (default 6)
	Vanishers   int // clients that hang up mid-wait (default 3)
	Adders      int // clients adding to one counter (default 4)
	// WallClockWorkers is how many holders without fencing work on each
	// kind of primitive (an exclusive lock, a read/write lock, a semaphore,
	// an election), stopping by their lease's deadline (default 4 each).
	WallClockWorkers int
	Gateways         int // gateway processes (default 3)
	// GroupMembers is how many clients join a group and leave it, or go
	// silent with their lease (chance DeathChance), in turn (default 4).
	GroupMembers int

	// ZombieChance is the chance that a lock holder stops its keepalives
	// mid-hold, and DeathChance that a consumer's lease dies (revoked or
	// left to expire) mid-claim (defaults 0.05 and 0.15).
	ZombieChance, DeathChance float64

	TickTime       time.Duration // ZooKeeper's tickTime (default 100ms)
	SessionTimeout time.Duration // the gateways' --session-timeout (default 2s)
	GatewayDrain   time.Duration // the gateways' --drain-timeout (default 2s)
	LeaseTTL       time.Duration // the clients' lease TTL (default 2s)
	// FaultGap is the mean pause between two faults of one kind of target
	// (ZooKeeper members; gateways), default 1s.
	FaultGap time.Duration
	// RequestMargin is how long past its wait a client waits for an answer
	// before it hangs up (default 2s): a paused gateway never answers.
	RequestMargin time.Duration
	// DrainTimeout bounds the drain of the queue at the end (default 60s).
	DrainTimeout time.Duration

	Root string // the gateways' --root (default /zkgate-faults)
	// WorkDir holds the ensemble's data and the gateways' logs; empty is a
	// temp dir, removed at the end unless Keep (or a violation) says not.
	WorkDir string
	Keep    bool
	// Log receives progress lines (faults as they happen); nil is silent.
	Log io.Writer
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defDur(&c.Duration, 60*time.Second)
	if c.MaxRequests == 0 {
		c.MaxRequests = 1_000_000
	}
	def(&c.LockClients, 24)
	def(&c.Locks, 4)
	def(&c.Producers, 3)
	def(&c.Consumers, 6)
	def(&c.Vanishers, 3)
	def(&c.Adders, 4)
	def(&c.WallClockWorkers, 4)
	def(&c.Gateways, 3)
	def(&c.GroupMembers, 4)
	if c.ZombieChance == 0 {
		c.ZombieChance = 0.05
	}
	if c.DeathChance == 0 {
		c.DeathChance = 0.15
	}
	defDur(&c.TickTime, 100*time.Millisecond)
	defDur(&c.SessionTimeout, 2*time.Second)
	defDur(&c.GatewayDrain, 2*time.Second)
	defDur(&c.LeaseTTL, 2*time.Second)
	defDur(&c.FaultGap, time.Second)
	defDur(&c.RequestMargin, 2*time.Second)
	defDur(&c.DrainTimeout, 60*time.Second)
	if c.Root == "" {
		c.Root = "/zkgate-faults"
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

func (c Config) validate() error {
	if c.Binary == "" {
		return errors.New("faults: no zkgate binary given")
	}
	switch {
	case c.Duration < time.Second || c.Duration > 24*time.Hour:
		return fmt.Errorf("faults: duration %s must be from 1s to 24h", c.Duration)
	case c.MaxDuration != 0 && (c.MaxDuration < c.Duration || c.MaxDuration > 24*time.Hour):
		return fmt.Errorf("faults: max duration %s must be from the duration (%s) to 24h", c.MaxDuration, c.Duration)
	case c.MaxRequests < 1:
		return fmt.Errorf("faults: max requests %d must be positive", c.MaxRequests)
	case c.LockClients < 0 || c.Producers < 0 || c.Consumers < 0 || c.Vanishers < 0 || c.WallClockWorkers < 0 || c.GroupMembers < 0 || c.Adders < 0:
		return errors.New("faults: client counts may not be negative")
	case c.LockClients+c.Consumers+c.Vanishers+c.WallClockWorkers == 0:
		return errors.New("faults: no clients")
	case c.Producers > 0 && c.Consumers == 0:
		return errors.New("faults: producers need consumers")
	case c.Locks < 1:
		return fmt.Errorf("faults: %d locks", c.Locks)
	case c.Gateways < 1 || c.Gateways > 9:
		return fmt.Errorf("faults: %d gateways (1 to 9)", c.Gateways)
	case c.ZombieChance < 0 || c.ZombieChance > 1 || c.DeathChance < 0 || c.DeathChance > 1:
		return errors.New("faults: chances are from 0 to 1")
	case c.SessionTimeout < time.Second:
		return fmt.Errorf("faults: session timeout %s is below the gateway's minimum of 1s", c.SessionTimeout)
	case c.SessionTimeout < 4*c.TickTime:
		return fmt.Errorf("faults: session timeout %s is below 4 ticks of %s", c.SessionTimeout, c.TickTime)
	case c.GatewayDrain < 0 || c.GatewayDrain > time.Hour:
		return fmt.Errorf("faults: gateway drain timeout %s must be from 0s to 1h", c.GatewayDrain)
	case c.LeaseTTL < time.Second:
		return fmt.Errorf("faults: lease TTL %s is below the gateway's minimum of 1s", c.LeaseTTL)
	}
	return nil
}
