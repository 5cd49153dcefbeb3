package zkserver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Ensemble is a set of QuorumPeerMain members on loopback. Servers[i] has
// ZooKeeper id i+1.
type Ensemble struct {
	Servers []*Server
}

// StartEnsemble starts n ensemble members in parallel, each with its own data
// dir and free client, peer and election ports, and returns once every member
// reports leader or follower. On error nothing is left behind.
func StartEnsemble(ctx context.Context, n int, opts Options) (*Ensemble, error) {
	if n < 1 {
		return nil, fmt.Errorf("zkserver: ensemble of %d members", n)
	}
	if opts.ClientPort != 0 {
		return nil, errors.New("zkserver: Options.ClientPort must be 0 for an ensemble (each member picks its own)")
	}
	if opts.SecureClientPort {
		return nil, errors.New("zkserver: Options.SecureClientPort is for a standalone server (Start)")
	}
	opts = opts.withDefaults()
	inst, err := locate(opts)
	if err != nil {
		return nil, err
	}
	e := &Ensemble{Servers: make([]*Server, n)}
	for i := range e.Servers {
		s := &Server{opts: opts, inst: inst, myid: i + 1}
		dir := ""
		if opts.DataDir != "" {
			dir = filepath.Join(opts.DataDir, "zk"+strconv.Itoa(i+1))
		}
		if err := s.prepareDataDir(dir); err != nil {
			e.abandon()
			return nil, err
		}
		e.Servers[i] = s
	}
	for attempt := 1; ; attempt++ {
		err := e.launch(ctx)
		if err == nil {
			return e, nil
		}
		if errors.Is(err, errAddrInUse) && attempt < startAttempts && ctx.Err() == nil {
			continue // a picked port was taken: pick a fresh set
		}
		e.abandon()
		return nil, err
	}
}

// testHookEnsemblePorts lets tests steal picked ports (client, peer,
// election for each member in turn) to exercise the retry.
var testHookEnsemblePorts func(ports []int)

// launch picks ports, writes every member's config, starts all members and
// waits for all of them; on failure every member started is killed.
func (e *Ensemble) launch(ctx context.Context) error {
	n := len(e.Servers)
	host := e.Servers[0].opts.Host
	ports, err := freePorts(host, 3*n)
	if err != nil {
		return err
	}
	if testHookEnsemblePorts != nil {
		testHookEnsemblePorts(ports)
	}
	var lines strings.Builder
	for i, s := range e.Servers {
		s.clientPort = ports[3*i]
		fmt.Fprintf(&lines, "server.%d=%s:%d:%d\n", i+1, host, ports[3*i+1], ports[3*i+2])
	}
	procs := make([]*process, n)
	killAll := func() {
		for _, p := range procs {
			if p != nil {
				_ = p.kill(nil)
			}
		}
	}
	for i, s := range e.Servers {
		s.servers = lines.String()
		if err := s.writeConfig(); err != nil {
			killAll()
			return err
		}
		if procs[i], err = s.spawn(); err != nil {
			killAll()
			return err
		}
	}
	// One failure cancels the other waits: the ensemble is torn down anyway.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range e.Servers {
		wg.Go(func() {
			if errs[i] = s.waitReady(wctx, procs[i]); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	if err := firstCause(errs); err != nil {
		killAll()
		return err
	}
	return nil
}

// firstCause prefers a bind error (it makes the caller retry), then any error
// that is not merely the cancellation of the other waits.
func firstCause(errs []error) error {
	var canceled error
	for _, err := range errs {
		if errors.Is(err, errAddrInUse) {
			return err
		}
	}
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, context.Canceled):
			canceled = err
		default:
			return err
		}
	}
	return canceled
}

// abandon marks every member stopped and removes the temp dirs of a start
// that failed; no process runs at that point.
func (e *Ensemble) abandon() {
	for _, s := range e.Servers {
		if s != nil {
			s.markStopped()
			_ = s.removeTempDir()
		}
	}
}

// ConnectString lists every member's client address, comma-separated.
func (e *Ensemble) ConnectString() string { return strings.Join(e.Addrs(), ",") }

// Addrs lists every member's client address.
func (e *Ensemble) Addrs() []string {
	addrs := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

func (e *Ensemble) member(i int) (*Server, error) {
	if i < 0 || i >= len(e.Servers) {
		return nil, fmt.Errorf("zkserver: no ensemble member %d (have %d)", i, len(e.Servers))
	}
	return e.Servers[i], nil
}

// Kill SIGKILLs member i, keeping its data.
func (e *Ensemble) Kill(i int) error {
	s, err := e.member(i)
	if err != nil {
		return err
	}
	return s.Kill()
}

// Restart starts member i again and waits until it serves as leader or
// follower (which needs a quorum of members running).
func (e *Ensemble) Restart(ctx context.Context, i int) error {
	s, err := e.member(i)
	if err != nil {
		return err
	}
	return s.Restart(ctx)
}

// Leader returns the index of the member that reports "leader", polling
// until one does or ctx ends (bounded by StartTimeout when ctx has no
// deadline): right after a leader dies, an election takes a moment.
func (e *Ensemble) Leader(ctx context.Context) (int, error) {
	if _, ok := ctx.Deadline(); !ok && len(e.Servers) > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.Servers[0].opts.StartTimeout)
		defer cancel()
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("zkserver: no ensemble leader: %w", ctx.Err())
		case <-t.C:
		}
		for i, s := range e.Servers {
			if !s.Running() {
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			mode, err := s.Mode(pctx)
			cancel()
			if err == nil && mode == "leader" {
				return i, nil
			}
		}
		t.Reset(pollInterval)
	}
}

// Stop stops every member in parallel (see Server.Stop).
func (e *Ensemble) Stop() error {
	errs := make([]error, len(e.Servers))
	var wg sync.WaitGroup
	for i, s := range e.Servers {
		wg.Go(func() { errs[i] = s.Stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
