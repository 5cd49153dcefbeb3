package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
)

// kill stops s as a SIGKILL would: its journal records nothing more (its
// file stays as the kill found it) and its session is left to ZooKeeper
// without a word (Detach), as a dead process's is. It returns the journal's
// file.
func kill(t *testing.T, s *testService) string {
	t.Helper()
	j := s.Leases.journal
	j.mu.Lock()
	path := j.path
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	j.path = ""
	j.mu.Unlock()
	s.sess.Detach()
	if path == "" {
		t.Fatal("the killed service recorded no session")
	}
	return path
}

// restartOf is the next start of a gateway whose journal is in dir: a
// service of its own on s's root, with the same journal dir.
func restartOf(t *testing.T, s *testService, dir string) *testService {
	t.Helper()
	return newService(t, serviceOptions{timeout: 5 * time.Second, root: s.root, gateway: "gw-restarted", journal: dir})
}

// A gateway killed without warning is resumed from its journal by its next
// start: every lease with its lock, slot, leadership and claim, the same
// nodes and tokens; the wait that the kill cut rejoins its place in line;
// keepalives go on; a lease's TTL counts on from its last keepalive, not
// from the restart; the lock stays exclusive. Before the journal, the
// session lived on in ZooKeeper but nothing knew how to resume it.
func TestAKilledGatewayIsResumedFromItsJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	giver := newService(t, serviceOptions{timeout: 5 * time.Second, gateway: "gw-killed", journal: dir})
	ctx := context.Background()
	holder := newLease(t, giver, "holder")
	waiter := newLease(t, giver, "waiter")
	held, _ := holdOneOfEach(t, giver, holder, waiter)
	kept, err := giver.Leases.KeepAlive(holder.ID)
	if err != nil {
		t.Fatal(err)
	}
	kept.mu.Lock()
	renewedUntil := kept.expiresAt
	kept.mu.Unlock()
	path := kill(t, giver)
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the journal's file: %v %v, want mode 0600", info, err)
	}

	h, err := ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Leases) != 2 || strings.Contains(h.String(), string(h.Session.Password)) {
		t.Fatalf("the journal read back: %v", h)
	}
	next := restartOf(t, giver, dir)
	if err := adopt(t, next, h, 5*time.Second); err != nil {
		t.Fatalf("resume from the journal: %v", err)
	}
	l, err := next.Leases.Get(holder.ID)
	if err != nil {
		t.Fatalf("the lease after the restart: %v", err)
	}
	l.mu.Lock()
	resumedUntil := l.expiresAt
	l.mu.Unlock()
	if d := resumedUntil.Sub(renewedUntil); d > time.Millisecond || d < -time.Millisecond {
		t.Fatalf("the resumed lease ends at %v, want the end of its last keepalive's TTL, %v", resumedUntil, renewedUntil)
	}
	held.sameOn(t, next, l)
	other := newLease(t, next, "other")
	if _, err := next.Locks.Acquire(ctx, other, "x", "", 0); ErrorCode(err) != CodeTimeout {
		t.Fatalf("another lease takes the resumed lock: %v, want a timeout", err)
	}
	w := held.waitResumes(t, next, l, waiter.ID)
	if _, err := next.Leases.KeepAlive(w.ID); err != nil {
		t.Fatalf("keepalive of the resumed waiter: %v", err)
	}
	// The restarted gateway records the session on: killed again, its
	// journal resumes the same leases.
	again, err := ReadJournal(path)
	if err != nil || len(again.Leases) != 2 {
		t.Fatalf("the journal of the resumed session: %v %v", again, err)
	}
	found := false
	for _, st := range again.Leases {
		found = found || st.ID == w.ID && len(st.Holds) == 1 && st.Holds[0].Granted
	}
	if !found {
		t.Fatalf("the resumed session's journal does not have the waiter's grant: %+v", again.Leases)
	}
}

// A node made in ZooKeeper but not yet recorded when the gateway was
// killed is deleted when the session resumes: otherwise the live session
// would keep it for good, and the lock would never be free again.
func TestANodeTheJournalMissedIsSweptOnResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	giver := newService(t, serviceOptions{timeout: 5 * time.Second, gateway: "gw-killed", journal: dir})
	ctx := context.Background()
	lease := newLease(t, giver, "holder")
	if _, err := giver.Locks.Acquire(ctx, lease, "kept", "", 0); err != nil {
		t.Fatal(err)
	}
	var path string
	giver.Leases.afterCreate = func(node string) {
		if strings.Contains(node, "/locks/orphan/") && path == "" {
			path = kill(t, giver) // between the create and its record
		}
	}
	_, _ = giver.Locks.Acquire(ctx, lease, "orphan", "", 0)
	if path == "" {
		t.Fatal("the hook did not run")
	}
	h, err := ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	next := restartOf(t, giver, dir)
	if err := adopt(t, next, h, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	other := newLease(t, next, "other")
	if _, err := next.Locks.Acquire(ctx, other, "orphan", "", 0); err != nil {
		t.Fatalf("the lock whose node the journal missed: %v, want it free", err)
	}
	if _, err := next.Locks.Acquire(ctx, other, "kept", "", 0); ErrorCode(err) != CodeTimeout {
		t.Fatalf("the lock the journal recorded: %v, want it still held", err)
	}
}

// The journal's file stays short whatever the keepalives (it is rewritten
// as its leases once its lines outnumber them), and reads back as the
// leases are; a session handed over leaves no journal behind, so that it
// is never resumed twice.
func TestTheJournalCompactsAndGoesWithAHandover(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newService(t, serviceOptions{timeout: 5 * time.Second, journal: dir})
	s.Leases.journal.compactAt = 16
	l := newLease(t, s, "holder")
	if _, err := s.Locks.Acquire(context.Background(), l, "x", "", 0); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, err := s.Leases.KeepAlive(l.ID); err != nil {
			t.Fatal(err)
		}
	}
	path := JournalPath(dir, s.Leases.sessionID())
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); n > 16 {
		t.Fatalf("the journal has %d lines after 100 keepalives, want at most 16", n)
	}
	h, err := ReadJournal(path)
	if err != nil || len(h.Leases) != 1 || len(h.Leases[0].Holds) != 1 || !h.Leases[0].Holds[0].Granted {
		t.Fatalf("the compacted journal: %+v %v", h, err)
	}
	l.mu.Lock()
	until := l.expiresAt
	l.mu.Unlock()
	if !h.Leases[0].ExpiresAt.Equal(until.Round(0)) {
		t.Fatalf("the compacted journal's lease ends at %v, want %v", h.Leases[0].ExpiresAt, until)
	}
	if _, err := s.HandOver(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the journal of a session handed over: %v, want it gone", err)
	}
}

// BenchmarkJournalLockCycle is what the journal writes for one lock cycle
// of a lease (the node made, the grant, the release) and one keepalive:
// four lines appended to its file, with its compaction, without ZooKeeper.
func BenchmarkJournalLockCycle(b *testing.B) {
	j := newJournal(b.TempDir(), slog.New(slog.DiscardHandler))
	if err := j.begin(1, SavedSession{ID: 1, Password: make([]byte, 16)}, "gw-bench", nil); err != nil {
		b.Fatal(err)
	}
	const id = "6ba7b810-9dad-41d1-80b4-00c04fd430c8"
	j.granted(1, LeaseState{LeaseTerms: LeaseTerms{ID: id, Holder: "bench", TTL: Duration(time.Minute), CreatedAt: time.Now()}, ExpiresAt: time.Now().Add(time.Minute)})
	node := NodeState{Role: lockRole, Path: "/zkgate/locks/bench/_c_" + id + "-lock-0000000001", Czxid: 4294967301}
	waiting := HoldState{Kind: "lock", Key: lockKey("bench", ModeExclusive), Name: "bench", Since: time.Now(), Nodes: []NodeState{node},
		Mode: ModeExclusive}
	granted := waiting
	granted.Granted, granted.Token, granted.GrantedAt = true, node.Czxid, time.Now()
	b.ReportAllocs()
	for b.Loop() {
		j.held(1, id, waiting)
		j.held(1, id, granted)
		j.dropped(1, id, waiting.Key)
		j.renewed(1, id, time.Now().Add(time.Minute))
	}
}

// The journal of a live service is its own: a start beside it on the same
// data dir cannot take it (ErrJournalLive), whatever its compactions; once
// its process is gone (killed), it can.
func TestALiveJournalIsNotTaken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newService(t, serviceOptions{timeout: 5 * time.Second, journal: dir})
	s.Leases.journal.compactAt = 4
	l := newLease(t, s, "holder")
	path := JournalPath(dir, s.Leases.sessionID())
	for i := range 10 {
		if _, _, err := OpenJournal(path); !errors.Is(err, ErrJournalLive) {
			t.Fatalf("a live service's journal opened (after %d keepalives): %v, want ErrJournalLive", i, err)
		}
		if _, err := s.Leases.KeepAlive(l.ID); err != nil {
			t.Fatal(err)
		}
	}
	kill(t, s)
	h, release, err := OpenJournal(path)
	if err != nil || len(h.Leases) != 1 {
		t.Fatalf("the killed service's journal: %v %v", h, err)
	}
	release()
}

// A journal whose write fails (a full disk) is given up and its file
// removed: a record that missed a change must never be resumed. The
// service serves on.
func TestAFailedJournalIsRemoved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newService(t, serviceOptions{timeout: 5 * time.Second, journal: dir})
	l := newLease(t, s, "holder")
	path := JournalPath(dir, s.Leases.sessionID())
	j := s.Leases.journal
	j.mu.Lock()
	j.f.Close() // the next write fails
	j.mu.Unlock()
	if _, err := s.Leases.KeepAlive(l.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the journal after a failed write: %v, want it removed", err)
	}
	if _, err := s.Locks.Acquire(context.Background(), l, "x", "", 0); err != nil {
		t.Fatalf("an acquire after the journal failed: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the journal came back: %v", err)
	}
}

// A journal's last line cut short (a kill while writing it) is left out;
// a damaged line before others fails the whole journal.
func TestAJournalCutShortOrDamaged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := newJournal(dir, slog.New(slog.DiscardHandler))
	if err := j.begin(1, SavedSession{ID: 7, Password: []byte("pw")}, "gw", nil); err != nil {
		t.Fatal(err)
	}
	j.granted(1, LeaseState{LeaseTerms: LeaseTerms{ID: "a", TTL: Duration(time.Minute)}, ExpiresAt: time.Now().Add(time.Minute)})
	j.granted(1, LeaseState{LeaseTerms: LeaseTerms{ID: "b", TTL: Duration(time.Minute)}, ExpiresAt: time.Now().Add(time.Minute)})
	raw, err := os.ReadFile(j.path)
	if err != nil {
		t.Fatal(err)
	}
	cut := raw[:len(raw)-10]
	if err := os.WriteFile(j.path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	if h, err := ReadJournal(j.path); err != nil || len(h.Leases) != 1 || h.Leases[0].ID != "a" {
		t.Fatalf("a journal whose last line is cut short: %+v %v, want lease a alone", h, err)
	}
	damaged := append(append([]byte{}, cut...), "\n{\"ended\":\"a\"}\n"...)
	if err := os.WriteFile(j.path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	if h, err := ReadJournal(j.path); err == nil {
		t.Fatalf("a damaged journal read as %+v, want an error", h)
	}
}

// A journal that missed changes (a crash of the machine may lose its
// latest lines) resumes only what ZooKeeper still keeps: a lock released
// and taken by another lease since is not claimed again by the resumed
// lease, and a lease that ended since is not resumed.
func TestAStaleJournalResumesOnlyWhatZooKeeperKeeps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	giver := newService(t, serviceOptions{timeout: 5 * time.Second, gateway: "gw-killed", journal: dir})
	ctx := context.Background()
	holder := newLease(t, giver, "holder")
	ended := newLease(t, giver, "ended")
	if _, err := giver.Locks.Acquire(ctx, holder, "x", "", 0); err != nil {
		t.Fatal(err)
	}
	path := JournalPath(dir, giver.Leases.sessionID())
	stale, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := giver.Locks.Release(ctx, holder, "x", ""); err != nil {
		t.Fatal(err)
	}
	if err := giver.Leases.Revoke(ended.ID); err != nil {
		t.Fatal(err)
	}
	other := newService(t, serviceOptions{timeout: 5 * time.Second, root: giver.root, gateway: "gw-other"})
	if _, err := other.Locks.Acquire(ctx, newLease(t, other, "other"), "x", "", 0); err != nil {
		t.Fatal(err)
	}
	kill(t, giver)
	if err := os.WriteFile(path, stale, 0o600); err != nil { // the lines since, lost
		t.Fatal(err)
	}
	h, err := ReadJournal(path)
	if err != nil || len(h.Leases) != 2 {
		t.Fatalf("the stale journal: %v %v", h, err)
	}
	next := restartOf(t, giver, dir)
	if err := adopt(t, next, h, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := next.Leases.Get(ended.ID); err == nil {
		t.Fatal("a lease that ended before the kill was resumed")
	}
	l, err := next.Leases.Get(holder.ID)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := next.Locks.Acquire(ctx, l, "x", "", 0); ErrorCode(err) != CodeTimeout {
		t.Fatalf("the resumed lease acquires the lock another lease holds: %+v %v, want a timeout", g, err)
	}
}

// A journal written before the machine restarted is not resumed: the page
// cache it relied on (no fsync) may have lost its latest lines.
func TestAJournalFromBeforeARebootIsNotResumed(t *testing.T) {
	t.Parallel()
	if bootID() == "" {
		t.Fatal("no boot id on this machine (/proc/sys/kernel/random/boot_id)")
	}
	j := newJournal(t.TempDir(), slog.New(slog.DiscardHandler))
	if err := j.begin(1, SavedSession{ID: 7, Password: []byte("pw")}, "gw", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadJournal(j.path); err != nil {
		t.Fatalf("a journal of this boot: %v", err)
	}
	raw, _ := os.ReadFile(j.path)
	rebooted := strings.Replace(string(raw), `"boot":"`+bootID()+`"`, `"boot":"an-earlier-boot"`, 1)
	if rebooted == string(raw) {
		t.Fatalf("the journal does not record the boot: %s", raw)
	}
	if err := os.WriteFile(j.path, []byte(rebooted), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadJournal(j.path); !errors.Is(err, ErrJournalRebooted) {
		t.Fatalf("a journal of an earlier boot: %v, want ErrJournalRebooted", err)
	}
}

// journalLines reads the lines of the journal of s's session.
func journalLines(t *testing.T, s *testService) []journalRecord {
	t.Helper()
	j := s.Leases.journal
	j.mu.Lock()
	path := j.path
	j.mu.Unlock()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []journalRecord
	for _, line := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
		var rec journalRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a journal line: %v: %s", err, line)
		}
		out = append(out, rec)
	}
	return out
}

// An uncontended acquire writes one journal line, its grant with its node
// (before, the node had a line of its own: three write(2) a lock cycle, two
// now), and a waiter's node is recorded before it waits, so that a start
// after a kill resumes it in its place (TestAKilledGatewayIsResumedFromItsJournal).
func TestALockCycleWritesALineForTheGrantAndOneForTheRelease(t *testing.T) {
	t.Parallel()
	svc := newService(t, serviceOptions{timeout: 5 * time.Second, journal: t.TempDir()})
	ctx := context.Background()
	holder, waiter := newLease(t, svc, "holder"), newLease(t, svc, "waiter")
	before := len(journalLines(t, svc))
	g, err := svc.Locks.Acquire(ctx, holder, "x", ModeExclusive, 0)
	if err != nil {
		t.Fatal(err)
	}
	lines := journalLines(t, svc)
	if len(lines) != before+1 {
		t.Fatalf("an uncontended acquire wrote %d journal lines, want 1: %+v", len(lines)-before, lines[before:])
	}
	if h := lines[len(lines)-1].Hold; h == nil || !h.Granted || h.Token != g.Token || len(h.Nodes) != 1 || h.Nodes[0].Path != g.Node {
		t.Fatalf("the acquire's line: %+v, want its grant with its node %s", lines[len(lines)-1], g.Node)
	}

	done := make(chan error, 1)
	go func() {
		_, err := svc.Locks.Acquire(ctx, waiter, "x", ModeExclusive, time.Minute)
		done <- err
	}()
	zktest.Eventually(t, 10*time.Second, func() error {
		for _, rec := range journalLines(t, svc) {
			if rec.Of == waiter.ID && rec.Hold != nil && !rec.Hold.Granted && len(rec.Hold.Nodes) == 1 {
				return nil
			}
		}
		return errors.New("the waiter's node is not in the journal")
	})
	n := len(journalLines(t, svc))
	if err := svc.Locks.Release(ctx, holder, "x", ModeExclusive); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the waiter after the release: %v", err)
	}
	// The release's line, then the waiter's grant.
	if lines := journalLines(t, svc); len(lines) != n+2 || lines[n].Dropped == "" || lines[n+1].Hold == nil || !lines[n+1].Hold.Granted {
		t.Fatalf("after the release: %+v, want the release and the waiter's grant", lines[n:])
	}
}
