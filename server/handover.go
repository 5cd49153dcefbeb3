package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zkgate/zkgate/auth/peers"
	"github.com/zkgate/zkgate/recipes"
)

// A gateway told to stop (SIGTERM) with --handover on hands each of its
// ZooKeeper sessions, with every lease made in it and all they hold, to a
// live peer (see recipes.Handover and handlers.TakeHandover), which keeps
// serving them: the same lease ids, nodes and fencing tokens. Without a
// peer that takes it, it saves the session to the data dir for its next
// start, which resumes it if that start comes within the session timeout
// (as `systemctl restart` does). Nothing ends: no X-Zkgate-Lease-Ends.

// handoverTimeout bounds the handover of one session to one peer.
const handoverTimeout = 20 * time.Second

// handOver hands every session of svc over, and then serves the drain (so
// that clients that send their requests to this gateway's address are
// passed on to the leases' new keepers, with X-Zkgate-Lease-Moved-To) until
// no such request came for movedQuiet, or the drain ends, unless every
// session went to the data dir: then a quick exit lets the next start
// resume them sooner. A session that could not be
// handed over (its ZooKeeper connection was down the whole drain) keeps its
// leases here, and they end as in a drain without handover: no earlier
// than the latest expires_at they were given.
func handOver(log *slog.Logger, dr *drain, svc *recipes.Service, cred *peers.Credential, savedTo string, drainTimeout time.Duration) {
	ends := time.Now().Add(drainTimeout)
	dr.start(ends, false)
	svc.MarkDraining(ends, true)
	targets := handoverTargets(svc, cred, log)
	toPeers, kept := 0, false
	for _, s := range svc.Services() {
		h, err := handOverSession(s, ends)
		if err != nil {
			log.Warn("a session could not be handed over: its leases end with the drain, no earlier than the latest expires_at they were given", "err", err)
			kept = true
			continue
		}
		if len(h.Leases) == 0 {
			continue // nothing to keep: the session goes with its timeout
		}
		if k, ok := sendHandover(log, cred, targets, h); ok {
			if k.Gateway != "" {
				svc.Moved(h, k)
				toPeers++
				log.Info("handed a session over", "session", h.Session, "leases", len(h.Leases), "to", k.Gateway, "at", k.Advertise)
			}
			continue
		}
		if err := saveHandover(savedTo, h); err != nil {
			log.Error("a session could be handed over to no peer, nor saved for the next start: its leases end with its timeout",
				"session", h.Session, "leases", len(h.Leases), "err", err)
			continue
		}
		log.Info("saved a session for the next start, which resumes it within its timeout", "session", h.Session,
			"leases", len(h.Leases), "dir", savedTo)
	}
	switch {
	case kept:
		drainLeases(log, dr, svc, time.Until(ends))
	case toPeers > 0:
		log.Info("draining: requests for the leases handed over are passed on", "until", ends.UTC(), "or quiet for", movedQuiet)
		lingerForMoves(cred, ends)
	}
}

// movedQuiet is how long a gateway whose leases went to its peers serves
// on once no client asked it about one: the clients that send their
// leases' requests here have been told where each went by then, and any
// other finds its lease through any gateway (the records name its keeper).
// Holders are not waited for: their leases go on at their keepers.
const movedQuiet = time.Second

// lingerForMoves returns once no client was told where a lease went (see
// peers.Credential.LastMoved) for movedQuiet, from now on, or at ends.
func lingerForMoves(cred *peers.Credential, ends time.Time) {
	since := time.Now()
	for {
		last := cred.LastMoved()
		if last.Before(since) {
			last = since
		}
		next := last.Add(movedQuiet)
		if !next.Before(ends) {
			time.Sleep(time.Until(ends))
			return
		}
		if !time.Now().Before(next) {
			return
		}
		time.Sleep(time.Until(next))
	}
}

// handOverSession hands the session of s over, retrying while it is not
// live (a ZooKeeper blip), until the drain ends.
func handOverSession(s *recipes.Service, ends time.Time) (*recipes.Handover, error) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), handoverTimeout)
		h, err := s.HandOver(ctx)
		cancel()
		if err == nil || recipes.ErrorCode(err) != recipes.CodeUnavailable || !time.Now().Before(ends) {
			return h, err
		}
		ctx, cancel = context.WithDeadline(context.Background(), ends)
		werr := s.Session().WaitLive(ctx)
		cancel()
		if werr != nil {
			return nil, err
		}
	}
}

// sendHandover hands h to one of targets, in random order; ok with the
// peer that took it (or with none when the session had expired already:
// nothing left to keep).
func sendHandover(log *slog.Logger, cred *peers.Credential, targets []recipes.Keeper, h *recipes.Handover) (recipes.Keeper, bool) {
	for _, i := range rand.Perm(len(targets)) {
		k := targets[i]
		ctx, cancel := context.WithTimeout(context.Background(), handoverTimeout)
		err := cred.SendHandover(ctx, k, h)
		cancel()
		switch {
		case err == nil:
			return k, true
		case errors.Is(err, recipes.ErrSessionGone):
			log.Warn("the session expired before a peer could take it: its leases are gone", "session", h.Session)
			return recipes.Keeper{}, true
		}
		log.Warn("a peer did not take a handover", "gateway", k.Gateway, "advertise", k.Advertise, "err", err)
	}
	return recipes.Keeper{}, false
}

// handoverTargets are the live gateways of the root that proved
// themselves and do not drain.
func handoverTargets(svc *recipes.Service, cred *peers.Credential, log *slog.Logger) []recipes.Keeper {
	if !cred.Proven() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gws, err := svc.Gateways(ctx)
	if err != nil {
		log.Warn("the other gateways could not be listed for a handover", "err", err)
		return nil
	}
	var out []recipes.Keeper
	for _, g := range gws {
		if g.ID != svc.GatewayID() && !g.Unverified && g.DrainingUntil == nil && g.Advertise != "" {
			out = append(out, recipes.Keeper{Gateway: g.ID, Advertise: g.Advertise})
		}
	}
	return out
}

// handoverDir is where sessions are saved for the next start: a folder for
// each ensemble and root (see savedKey), so that a start on another root or
// another ensemble, sharing the data dir, never resumes them. Files right in
// handoverDir were saved by versions that did not key them (see adoptSaved).
func handoverDir(dataDir string) string { return filepath.Join(dataDir, "handover") }

// savedDir is the folder of the sessions saved by gateways of root on the
// ensemble zk (--zk; empty: the embedded ZooKeeper, whose port changes at
// every start, but whose data is the data dir's own).
func savedDir(dataDir string, zk []string, root string) string {
	ensemble := "embedded"
	if len(zk) > 0 {
		ensemble = strings.Join(slices.Sorted(slices.Values(zk)), ",")
	}
	sum := sha256.Sum256([]byte("zookeeper=" + ensemble + "\nroot=" + root))
	return filepath.Join(handoverDir(dataDir), hex.EncodeToString(sum[:8]))
}

// saveHandover writes h into dir (see savedDir) for the next start:
// readable by this user alone, since its session's password owns the
// session.
func saveHandover(dir string, h *recipes.Handover) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%x.json", uint64(h.Session.ID))
	tmp, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}

// adoptSaved resumes the sessions a previous run of the same ensemble and
// root saved into dir (see saveHandover, savedDir) or recorded there ahead
// (the journals of a run that was killed, see recipes.ReadJournal) and
// keeps their leases; a session that expired meanwhile is gone, with its
// leases (410 session_lost, as the lease history says). Each saved file is
// removed once settled, and a journal once its session is gone; a resumed
// session's journal goes on as this run's record of it. A file that could
// not be tried (ZooKeeper out of reach) stays for the next start. The
// sessions saved right in handoverDir, by a version that did not record
// their ensemble and root, are resumed too, once, with a warning: they were
// most likely this data dir's own gateway's.
func adoptSaved(ctx context.Context, log *slog.Logger, svc *recipes.Service, cfg recipes.SessionConfig, dataDir, dir string) {
	adoptSavedIn(ctx, log, svc, cfg, dir, false)
	adoptSavedIn(ctx, log, svc, cfg, handoverDir(dataDir), true)
}

// adoptSavedIn is adoptSaved of the files in dir (unkeyed: saved by an
// older version, into handoverDir itself).
func adoptSavedIn(ctx context.Context, log *slog.Logger, svc *recipes.Service, cfg recipes.SessionConfig, dir string, unkeyed bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("read the saved sessions", "dir", dir, "err", err)
		}
		return
	}
	// Saved files first: a session saved on SIGTERM has no journal any
	// more, but one that is both (a kill between the two) is the saved one.
	slices.SortStableFunc(entries, func(a, b os.DirEntry) int {
		return strings.Compare(filepath.Ext(a.Name()), filepath.Ext(b.Name())) // .json before .wal
	})
	tried := map[string]bool{} // settled sessions, by the files' name: true if resumed, false if gone
	for _, e := range entries {
		journal := strings.HasSuffix(e.Name(), journalSuffix) && !unkeyed
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") && !journal {
			continue
		}
		p := filepath.Join(dir, e.Name())
		session := strings.TrimSuffix(e.Name(), filepath.Ext(e.Name()))
		if resumed, ok := tried[session]; ok {
			// The journal of a session saved on SIGTERM too (a kill between
			// the two): superseded, by the record the resumed session
			// writes there now, or gone with the session.
			if !resumed {
				_ = os.Remove(p)
			}
			continue
		}
		h, release, err := readSaved(p, journal)
		switch {
		case errors.Is(err, recipes.ErrJournalLive):
			log.Warn("the data dir holds the record of a live gateway's session (two gateways share it?): left to that gateway", "file", p)
			continue
		case errors.Is(err, recipes.ErrJournalRebooted):
			log.Warn("a session recorded before the machine restarted is not resumed (the record's latest lines may be lost): its leases end with it",
				"file", p)
			_ = os.Remove(p)
			continue
		}
		if err != nil || h.Session.ID == 0 {
			log.Error("a saved session that does not read: removed", "file", p, "err", err)
			_ = os.Remove(p)
			continue
		}
		if unkeyed {
			log.Warn("a session saved by an older version, which did not record its ZooKeeper ensemble and root: resumed as this gateway's",
				"file", p, "session", h.Session)
		}
		actx, cancel := context.WithTimeout(ctx, handoverTimeout)
		err = svc.Adopt(actx, cfg, h)
		cancel()
		if err != nil && !errors.Is(err, recipes.ErrSessionGone) {
			release()
			log.Error("resume a session saved by the previous run; kept for the next start", "session", h.Session, "err", err)
			continue
		}
		tried[session] = err == nil
		if !journal || err != nil {
			_ = os.Remove(p) // settled: resumed, or gone (a resumed journal is this run's record now)
		}
		release()
		switch {
		case err == nil && journal:
			log.Info("resumed a session that the previous run, killed, had recorded", "session", h.Session, "leases", len(h.Leases))
		case err == nil:
			log.Info("resumed a session saved by the previous run", "session", h.Session, "leases", len(h.Leases))
		default:
			log.Warn("a session saved by the previous run had expired: its leases are gone", "session", h.Session, "leases", len(h.Leases))
		}
	}
}

// journalSuffix ends the name of a session's journal (see
// recipes.JournalPath).
const journalSuffix = ".wal"

// readSaved reads the session saved (or, with journal, recorded ahead) in
// the file p, by this machine: its leases' ends are on this clock. release
// lets the file go once it is settled (see recipes.OpenJournal).
func readSaved(p string, journal bool) (h *recipes.Handover, release func(), err error) {
	if journal {
		return recipes.OpenJournal(p)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, nil, err
	}
	h = &recipes.Handover{}
	if err := json.Unmarshal(data, h); err != nil {
		return nil, nil, err
	}
	h.SameClock = true
	return h, func() {}, nil
}
