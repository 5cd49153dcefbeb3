package recipes

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// A journal is the write-ahead record of one session and its leases, in a
// file of the gateway's data dir, so that a gateway killed without warning
// (SIGKILL, the OOM killer) resumes them at its next start as it resumes a
// session it saved on SIGTERM (see Handover): the same lease ids, nodes
// and fencing tokens, for as long as ZooKeeper keeps the session.
//
// Its first line is what resumes the session (its id and password: the
// file is readable by its user alone), written before any lease is granted
// in it. Then one line per change, appended as it is made and before the
// client is told of it: a lease granted (its LeaseState), renewed (the end
// of its TTL), or ended; a hold as it is now (its HoldState: a node made,
// a grant, a client told) or gone. A node made in a line that is free goes
// in with its grant, one line for both; one that waits is recorded before
// its wait (see hold.ensureInLine). A line is one write(2), with no fsync:
// the page cache outlives the process, so a kill loses nothing written, but
// a crash of the machine may lose the latest lines (and the session's
// leases then end with their TTLs, as before).
//
// A node that ZooKeeper made but the journal had not recorded when the
// process died is known to no lease: the resumed session would keep it
// forever (a lock held for good). Adopt deletes every ephemeral node of the
// session that nothing resumed owns (see sweepOrphans).
//
// The journal keeps in memory what its file says (the leases as recorded),
// so that it can rewrite the file as one line per lease and hold once the
// appended lines outnumber them (compaction): a file's length stays within
// a few times its leases', whatever their keepalives.
type journal struct {
	dir string
	log *slog.Logger
	// compactAt is the fewest lines that a compaction follows (1024);
	// tests lower it.
	compactAt int

	mu     sync.Mutex
	f      *os.File // nil: nothing is recorded (no session begun, or removed)
	path   string
	epoch  uint64        // the epoch of the session the file records
	head   journalRecord // the file's first line: the session
	leases map[string]*LeaseState
	lines  int  // lines in the file
	holds  int  // holds in leases
	broken bool // a write failed (logged once): the file is left as it is
}

// journalSuffix ends the name of a journal's file (<session id>.wal).
const journalSuffix = ".wal"

// journalRecord is one line of a journal: one of its fields is set.
type journalRecord struct {
	Session *SavedSession `json:"session,omitempty"` // the first line
	From    string        `json:"from,omitempty"`    // with Session: the gateway that keeps it
	Boot    string        `json:"boot,omitempty"`    // with Session: the machine's boot (see bootID)

	Lease   *LeaseState `json:"lease,omitempty"`   // granted (or resumed, with its holds)
	Renewed string      `json:"renewed,omitempty"` // this lease's TTL now ends at Until
	Until   *time.Time  `json:"until,omitempty"`
	Ended   string      `json:"ended,omitempty"` // this lease ended, for Reason
	Reason  string      `json:"reason,omitempty"`

	Of      string     `json:"of,omitempty"`      // the lease of Hold or Dropped
	Hold    *HoldState `json:"hold,omitempty"`    // as it is now
	Dropped string     `json:"dropped,omitempty"` // the key of a hold that went
}

// newJournal is the journal of a session's leases in dir; nil (nothing is
// recorded) when dir is "".
func newJournal(dir string, log *slog.Logger) *journal {
	if dir == "" {
		return nil
	}
	return &journal{dir: dir, log: log.With("component", "journal"), compactAt: 1024}
}

// JournalPath is the file of the journal of session id in dir.
func JournalPath(dir string, id int64) string {
	return filepath.Join(dir, fmt.Sprintf("%x%s", uint64(id), journalSuffix))
}

// recording reports whether the journal records the session of epoch (or
// failed to: it is not tried again for that session).
func (j *journal) recording(epoch uint64) bool {
	if j == nil {
		return true // nothing to record
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.epoch == epoch && (j.f != nil || j.broken)
}

// begin starts the record of the session of epoch, which saved resumes,
// with leases (a resumed session's; nil for a new one): the file of the
// session recorded so far is removed (that session is over), unless it is
// this one's.
func (j *journal) begin(epoch uint64, saved SavedSession, from string, leases []LeaseState) error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil && j.epoch == epoch {
		return nil
	}
	path := JournalPath(j.dir, saved.ID)
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	if j.path != "" && j.path != path {
		_ = os.Remove(j.path)
	}
	j.path, j.epoch, j.broken = path, epoch, false
	j.head = journalRecord{Session: &saved, From: from, Boot: bootID()}
	j.leases, j.holds = map[string]*LeaseState{}, 0
	for i := range leases {
		st := leases[i]
		j.leases[st.ID] = &st
		j.holds += len(st.Holds)
	}
	if err := j.snapshotLocked(); err != nil {
		j.failLocked(err)
		return err
	}
	return nil
}

// remove ends the record and removes its file: the session was handed
// over (its next keeper records it), or closed (nothing to resume).
func (j *journal) remove() {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	if j.path == "" {
		return
	}
	path := j.path
	j.path = ""
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		j.log.Warn("remove the journal of a session that ended or moved", "file", path, "err", err)
	}
}

// granted records a new lease of epoch.
func (j *journal) granted(epoch uint64, st LeaseState) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil || j.epoch != epoch {
		return
	}
	j.leases[st.ID] = &st
	j.appendLocked(journalRecord{Lease: &st})
}

// renewed records that the TTL of lease id (of epoch) now ends at until.
func (j *journal) renewed(epoch uint64, id string, until time.Time) {
	j.change(epoch, id, func(l *LeaseState) (journalRecord, bool) {
		until = until.UTC().Round(0)
		if until.After(l.ExpiresAt) {
			l.ExpiresAt = until
		}
		return journalRecord{Renewed: id, Until: &until}, true
	})
}

// ended records the end of lease id (of epoch).
func (j *journal) ended(epoch uint64, id, reason string) {
	j.change(epoch, id, func(l *LeaseState) (journalRecord, bool) {
		j.holds -= len(l.Holds)
		delete(j.leases, id)
		return journalRecord{Ended: id, Reason: reason}, true
	})
}

// held records the hold st of lease id (of epoch) as it is now.
func (j *journal) held(epoch uint64, id string, st HoldState) {
	j.change(epoch, id, func(l *LeaseState) (journalRecord, bool) {
		if !setHold(l, st) {
			j.holds++
		}
		return journalRecord{Of: id, Hold: &st}, true
	})
}

// dropped records that the hold key of lease id (of epoch) went.
func (j *journal) dropped(epoch uint64, id, key string) {
	j.change(epoch, id, func(l *LeaseState) (journalRecord, bool) {
		if !dropHold(l, key) {
			return journalRecord{}, false
		}
		j.holds--
		return journalRecord{Of: id, Dropped: key}, true
	})
}

// change applies to lease id (of epoch), while the journal records it, the
// change that apply makes of its state (under j.mu), and appends the line
// that records it (none when apply says there is none).
func (j *journal) change(epoch uint64, id string, apply func(l *LeaseState) (journalRecord, bool)) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	l := j.leaseLocked(epoch, id)
	if l == nil {
		return
	}
	if rec, ok := apply(l); ok {
		j.appendLocked(rec)
	}
}

// leaseLocked is the recorded lease id of epoch, or nil.
func (j *journal) leaseLocked(epoch uint64, id string) *LeaseState {
	if j.f == nil || j.epoch != epoch {
		return nil
	}
	return j.leases[id]
}

// setHold sets st among l's holds; false if it is new there.
func setHold(l *LeaseState, st HoldState) bool {
	for i := range l.Holds {
		if l.Holds[i].Key == st.Key {
			l.Holds[i] = st
			return true
		}
	}
	l.Holds = append(l.Holds, st)
	return false
}

// dropHold removes the hold key from l's; false if it was not there.
func dropHold(l *LeaseState, key string) bool {
	for i := range l.Holds {
		if l.Holds[i].Key == key {
			l.Holds = append(l.Holds[:i], l.Holds[i+1:]...)
			return true
		}
	}
	return false
}

// appendLocked writes rec as the file's next line, and compacts the file
// once its lines outnumber what they record by far.
func (j *journal) appendLocked(rec journalRecord) {
	line, err := json.Marshal(rec)
	if err == nil {
		_, err = j.f.Write(append(line, '\n'))
	}
	if err != nil {
		j.failLocked(err)
		return
	}
	j.lines++
	if j.lines >= max(j.compactAt, 4*(1+len(j.leases)+j.holds)) {
		if err := j.snapshotLocked(); err != nil {
			j.failLocked(err)
		}
	}
}

// failLocked gives the record up after a failed write: the session is not
// resumed after a crash. Its file goes too: a record that missed a change
// (a release, a new node) must never be resumed, or a lease would claim a
// lock whose node is gone. The gateway goes on serving.
func (j *journal) failLocked(err error) {
	j.broken = true
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	if rerr := os.Remove(j.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		j.log.Error("remove the write-ahead record that missed a change: a start after a kill would resume it", "file", j.path, "err", rerr)
	}
	j.log.Error("the write-ahead record of the session's leases failed: a kill now ends them (a SIGTERM still hands them over)",
		"file", j.path, "err", err)
}

// snapshotLocked rewrites the file as what it records: the session, then
// each lease with its holds. The new file replaces the old at once
// (rename), so that a kill at any moment leaves one or the other whole.
func (j *journal) snapshotLocked() error {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(j.dir, filepath.Base(j.path)+".*") // mode 0600
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // once renamed, there is no such file
	// Locked as long as this process keeps it: a start beside this one,
	// on the same data dir, leaves it alone (see OpenJournal).
	if ok, err := lockFile(tmp); !ok {
		tmp.Close()
		return fmt.Errorf("lock %s: %v", tmp.Name(), err)
	}
	w := bufio.NewWriter(tmp)
	enc := json.NewEncoder(w) // one line per record
	lines := 1
	err = enc.Encode(j.head)
	for _, l := range j.sortedLocked() {
		if err == nil {
			err = enc.Encode(journalRecord{Lease: l})
			lines++
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), j.path)
	}
	if err != nil {
		tmp.Close()
		return err
	}
	j.f, j.lines = tmp, lines // appended to from its end, by this process alone
	return nil
}

// sortedLocked is the recorded leases, oldest first.
func (j *journal) sortedLocked() []*LeaseState {
	out := make([]*LeaseState, 0, len(j.leases))
	for _, l := range j.leases {
		out = append(out, l)
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].CreatedAt.Equal(out[b].CreatedAt) {
			return out[a].CreatedAt.Before(out[b].CreatedAt)
		}
		return out[a].ID < out[b].ID
	})
	return out
}

// bootID names this boot of the machine (Linux's boot_id); "" where it is
// not known.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// ErrJournalRebooted: the machine restarted since the journal was written.
// Its latest lines may have been lost with the page cache (no fsync): a
// keepalive missing would end a lease before the expires_at its client was
// told. It is not resumed; its leases end with their session.
var ErrJournalRebooted = errors.New("the machine restarted since the journal was written: its latest changes may be lost")

// ErrJournalLive: the journal is another live process's (a gateway that
// shares the data dir), whose session it must not take.
var ErrJournalLive = errors.New("the journal is a live gateway's")

// OpenJournal reads the journal file path (see journal) as the handover of
// its session to this machine's next gateway, for Adopt to resume; release
// must be called once Adopt has returned (until then no other process takes
// the journal). A journal that a live process keeps answers ErrJournalLive.
func OpenJournal(path string) (h *Handover, release func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	ok, err := lockFile(f)
	if ok {
		// The file the lock was taken on may have been replaced meanwhile
		// (its keeper's compaction, or a start beside this one that took it).
		var was, is os.FileInfo
		if was, err = f.Stat(); err == nil {
			if is, err = os.Stat(path); err == nil {
				ok = os.SameFile(was, is)
			}
		}
	}
	if err != nil || !ok {
		f.Close()
		if err == nil {
			err = ErrJournalLive
		}
		return nil, nil, err
	}
	h, err = readJournal(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return h, func() { f.Close() }, nil
}

// ReadJournal reads the journal file path without taking it (see
// OpenJournal). A last line cut short (the process died while writing it)
// is left out: its change was never told to a client. Any other line that
// does not read fails it: a damaged record is not resumed.
func ReadJournal(path string) (*Handover, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readJournal(f)
}

// readJournal is ReadJournal of the open file f.
func readJournal(f *os.File) (*Handover, error) {
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	var head journalRecord
	leases := map[string]*LeaseState{}
	ended := map[string]string{}
	lines := bytes.Split(bytes.TrimRight(raw, "\n"), []byte("\n"))
	for n, line := range lines {
		var rec journalRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			if n == 0 || n < len(lines)-1 {
				// Not the last line, cut short by a kill: the record is
				// damaged, and what it misses might be a release.
				return nil, fmt.Errorf("line %d of the journal: %w", n+1, err)
			}
			break
		}
		if n == 0 {
			if rec.Session == nil || rec.Session.ID == 0 {
				return nil, errors.New("the journal does not start with its session")
			}
			head = rec
			continue
		}
		applyRecord(leases, ended, rec)
	}
	if head.Session == nil {
		return nil, errors.New("an empty journal")
	}
	if boot := bootID(); head.Boot != "" && boot != "" && head.Boot != boot {
		return nil, ErrJournalRebooted
	}
	h := &Handover{Session: *head.Session, From: head.From, SameClock: true, ended: ended}
	j := journal{leases: leases}
	for _, l := range j.sortedLocked() {
		l.Left = Duration(max(time.Until(l.ExpiresAt), 0))
		h.Leases = append(h.Leases, *l)
	}
	return h, nil
}

// applyRecord applies one line of a journal to the leases it records (and
// the reasons of those that ended).
func applyRecord(leases map[string]*LeaseState, ended map[string]string, rec journalRecord) {
	switch {
	case rec.Lease != nil:
		st := *rec.Lease
		leases[st.ID] = &st
	case rec.Renewed != "" && rec.Until != nil:
		if l := leases[rec.Renewed]; l != nil && rec.Until.After(l.ExpiresAt) {
			l.ExpiresAt = *rec.Until
		}
	case rec.Ended != "":
		delete(leases, rec.Ended)
		ended[rec.Ended] = rec.Reason
	case rec.Hold != nil:
		if l := leases[rec.Of]; l != nil {
			setHold(l, *rec.Hold)
		}
	case rec.Dropped != "":
		if l := leases[rec.Of]; l != nil {
			dropHold(l, rec.Dropped)
		}
	}
}
