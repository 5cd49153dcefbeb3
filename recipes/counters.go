package recipes

// Counters are shared integers, each the data of one znode:
//
//	{root}/counters/{name}   persistent; its data is the value, in one of
//	                         the formats below; its data version is the
//	                         counter's version (compare-and-set asks for it)
//
// The node is the whole counter, with no children and no marker, so that
// kazoo's Counter and Curator's SharedCount and DistributedAtomicLong,
// pointed at the same path, share it: every write of theirs and ours is a
// setData with the version just read (or a create when the node is
// absent), retried on BadVersion, so no writer loses another's update.
// A DistributedAtomicLong promoted to a lock takes its InterProcessMutex
// (at a path of its own) only among Curator clients: its writes under the
// lock are versioned setData too, so zkgate needs no part in that lock.
//
// The bytes do not say their format (the ASCII "1234" is 4 bytes, as is an
// int32), so the caller names it (FormatDecimal unless it says otherwise),
// and data that does not read as that format is refused (format_mismatch),
// never read as a wrong number. An empty node is 0 in every format, as
// kazoo (whose ensure_path makes it empty) and DistributedAtomicLong read it.

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// CounterFormat is how a counter's value is written in its znode.
type CounterFormat string

// The formats of a counter's data.
const (
	// FormatDecimal is the value in ASCII decimal ("42", "-7"): kazoo's
	// Counter (repr of an int), and zkgate's default.
	FormatDecimal CounterFormat = "decimal"
	// FormatInt32 is 4 bytes, big-endian two's complement: Curator's
	// SharedCount, and kazoo's Counter with support_curator=True.
	FormatInt32 CounterFormat = "int32"
	// FormatInt64 is 8 bytes, big-endian two's complement: Curator's
	// DistributedAtomicLong.
	FormatInt64 CounterFormat = "int64"
)

// CounterFormats are the formats, in the order the list and the
// dashboard show a counter's readings in.
var CounterFormats = []CounterFormat{FormatDecimal, FormatInt32, FormatInt64}

// ParseCounterFormat is the format called s, FormatDecimal for "".
func ParseCounterFormat(s string) (CounterFormat, error) {
	if s == "" {
		return FormatDecimal, nil
	}
	for _, f := range CounterFormats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", Errorf(CodeInvalid, "format must be decimal, int32 or int64, not %s", quote(s))
}

// bounds are the least and the greatest value the format holds.
func (f CounterFormat) bounds() (lo, hi int64) {
	if f == FormatInt32 {
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

// decode reads data as f; ok is false when data is not of that format.
func (f CounterFormat) decode(data []byte) (v int64, ok bool) {
	if len(data) == 0 {
		return 0, true
	}
	switch f {
	case FormatInt32:
		if len(data) != 4 {
			return 0, false
		}
		return int64(int32(binary.BigEndian.Uint32(data))), true
	case FormatInt64:
		if len(data) != 8 {
			return 0, false
		}
		return int64(binary.BigEndian.Uint64(data)), true
	}
	if data[0] == '+' {
		return 0, false // strconv takes a sign that repr never writes
	}
	v, err := strconv.ParseInt(string(data), 10, 64)
	return v, err == nil
}

// encode writes v as f; v is within f's bounds.
func (f CounterFormat) encode(v int64) []byte {
	switch f {
	case FormatInt32:
		return binary.BigEndian.AppendUint32(nil, uint32(int32(v)))
	case FormatInt64:
		return binary.BigEndian.AppendUint64(nil, uint64(v))
	}
	return strconv.AppendInt(nil, v, 10)
}

// CounterReadings are the values data reads as in each format it fits:
// what the list and the dashboard show, as they know no format.
func CounterReadings(data []byte) map[CounterFormat]int64 {
	out := map[CounterFormat]int64{}
	for _, f := range CounterFormats {
		if v, ok := f.decode(data); ok {
			out[f] = v
		}
	}
	return out
}

// Counters serve the counters; see the layout above.
type Counters struct {
	sess  *Session
	cache *watchCache
}

// CounterState is a counter's value as read in Format. Version is its
// node's data version, -1 while the node does not exist (value 0).
type CounterState struct {
	Name    string        `json:"name"`
	Value   int64         `json:"value"`
	Version int32         `json:"version"`
	Format  CounterFormat `json:"format"`
	Index   int64         `json:"-"`
}

// CounterSummary is a counter in a list: its value in every format its
// data fits (see CounterReadings), none when it fits none.
type CounterSummary struct {
	Name    string                  `json:"name"`
	Version int32                   `json:"version"`
	Values  map[CounterFormat]int64 `json:"values"`
}

func (c *Counters) path(name string) string { return kinds.Counters.Path(c.sess.Root(), name) }

// State reads the counter; with index > 0 it is a blocking read, answered
// once the counter's index has moved past index or wait is over.
func (c *Counters) State(ctx context.Context, name string, f CounterFormat, index int64, wait time.Duration) (CounterState, error) {
	if index > 0 {
		var snap *Snapshot
		keep := func(_ string, s *Snapshot) bool { snap = s; return true }
		if _, err := readState(ctx, c.cache, name, c.path(name), entryOpts{}, index, wait, keep); err != nil {
			return CounterState{}, err
		}
		return counterStateOf(name, f, snap.Exists, snap.Data, snap.Stat, snap.Index)
	}
	if err := ValidName(name); err != nil {
		return CounterState{}, err
	}
	ctx, err := c.sess.fresh(ctx)
	if err != nil {
		return CounterState{}, readErr(err)
	}
	for {
		data, stat, err := c.get(ctx, name)
		if err != nil {
			return CounterState{}, err
		}
		if stat != nil {
			return counterStateOf(name, f, true, data, *stat, max(stat.Pzxid, stat.Mzxid))
		}
		// An absent counter's index is its directory's pzxid, as the watch
		// cache gives it; a counter made between the two reads moved it to
		// its own index, which a blocking read at it would wait past.
		_, pstat, err := c.sess.Conn().Exists(kinds.Counters.Dir(c.sess.Root()))
		if err != nil {
			return CounterState{}, readErr(err)
		}
		if ok, _, err := c.sess.Conn().Exists(c.path(name)); err != nil || !ok {
			return counterStateOf(name, f, false, nil, zk.Stat{}, pstat.Pzxid)
		}
	}
}

func statOr(s *zk.Stat) zk.Stat {
	if s == nil {
		return zk.Stat{}
	}
	return *s
}

// get reads the counter's node: stat nil when it does not exist.
func (c *Counters) get(_ context.Context, name string) ([]byte, *zk.Stat, error) {
	data, stat, err := c.sess.Conn().Get(c.path(name))
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, nil, nil
	case err != nil:
		return nil, nil, readErr(err)
	}
	return data, stat, nil
}

// counterStateOf reads data as f, or says why it cannot (format_mismatch).
func counterStateOf(name string, f CounterFormat, exists bool, data []byte, stat zk.Stat, index int64) (CounterState, error) {
	st := CounterState{Name: name, Version: -1, Format: f, Index: index}
	if !exists {
		return st, nil
	}
	st.Version = stat.Version
	v, ok := f.decode(data)
	if !ok {
		return CounterState{}, formatMismatch(name, f, data, stat.Version)
	}
	st.Value = v
	return st, nil
}

// formatMismatch is the problem of a counter whose data is not of format
// f: it says which formats the data does fit, for the caller to ask again.
func formatMismatch(name string, f CounterFormat, data []byte, version int32) *Error {
	fits := []CounterFormat{}
	for _, g := range CounterFormats {
		if _, ok := g.decode(data); ok {
			fits = append(fits, g)
		}
	}
	return &Error{Code: CodeFormatMismatch,
		Detail: "counter " + quote(name) + "'s " + strconv.Itoa(len(data)) + " bytes are not " + string(f) + "; name its format with ?format=",
		Extra:  map[string]any{"format": f, "bytes": len(data), "fits": fits, "version": version}}
}

// versionMismatch is the problem of a failed compare-and-set: the
// counter's value and version now, for the caller to try again with.
func versionMismatch(st CounterState, want int32) *Error {
	return &Error{Code: CodeVersionMismatch,
		Detail: "counter " + quote(st.Name) + " is at version " + strconv.Itoa(int(st.Version)) + ", not " + strconv.Itoa(int(want)),
		Extra:  map[string]any{"value": st.Value, "version": st.Version, "format": st.Format}}
}

// maybeApplied is the problem of a write whose answer from ZooKeeper was
// lost: it may or may not have been applied, and a retry could apply it
// twice (an add) or fail on its own success (a compare-and-set).
func maybeApplied(what string, err error) *Error {
	return &Error{Code: CodeUnavailable, Err: err,
		Detail: "the connection to ZooKeeper dropped during the " + what + ": it may or may not have been applied; read the counter before retrying"}
}

// Set writes value. With version nil it overwrites whatever value is
// there (still refusing data of another format); with a version it is a
// compare-and-set: applied only if the counter is at that version (-1:
// only if it does not exist), version_mismatch otherwise.
func (c *Counters) Set(ctx context.Context, name string, f CounterFormat, value int64, version *int32) (CounterState, error) {
	if err := ValidName(name); err != nil {
		return CounterState{}, err
	}
	if lo, hi := f.bounds(); value < lo || value > hi {
		return CounterState{}, Errorf(CodeInvalid, "%d is out of the range of %s", value, f)
	}
	return c.update(ctx, name, f, "set", func(cur CounterState) (int64, error) {
		if version != nil && *version != cur.Version {
			return 0, versionMismatch(cur, *version)
		}
		return value, nil
	}, version == nil)
}

// Add adds delta (negative: subtracts) and answers the value it made. It
// is atomic: under any number of adders through any gateways, and kazoo's
// and Curator's counters on the same node, no add is lost. An add
// answered 503 may or may not have been applied (see maybeApplied).
func (c *Counters) Add(ctx context.Context, name string, f CounterFormat, delta int64) (CounterState, error) {
	if err := ValidName(name); err != nil {
		return CounterState{}, err
	}
	return c.update(ctx, name, f, "add", func(cur CounterState) (int64, error) {
		lo, hi := f.bounds()
		if (delta > 0 && cur.Value > hi-delta) || (delta < 0 && cur.Value < lo-delta) {
			return 0, &Error{Code: CodeOutOfRange,
				Detail: "adding " + strconv.FormatInt(delta, 10) + " to counter " + quote(name) + " would overflow " + string(f),
				Extra:  map[string]any{"value": cur.Value, "version": cur.Version, "format": f}}
		}
		return cur.Value + delta, nil
	}, false)
}

// update reads the counter, makes its next value with next (which may
// refuse), and writes it with the version it read, or creates the node:
// again from the read when another writer came first. retry says whether
// a write whose answer was lost may be tried again (an overwrite: the
// same value twice is the value once) or must answer maybeApplied.
func (c *Counters) update(ctx context.Context, name string, f CounterFormat, what string,
	next func(CounterState) (int64, error), retry bool) (CounterState, error) {
	sess := c.sess
	p := c.path(name)
	for {
		if st, _, _ := sess.Status(); st != StateLive {
			return CounterState{}, unavailable()
		}
		if err := ctx.Err(); err != nil {
			return CounterState{}, readErr(err)
		}
		data, stat, err := c.get(ctx, name)
		if err != nil {
			return CounterState{}, err
		}
		cur, err := counterStateOf(name, f, stat != nil, data, statOr(stat), 0)
		if err != nil {
			return CounterState{}, err
		}
		v, err := next(cur)
		if err != nil {
			return CounterState{}, err
		}
		var nstat *zk.Stat
		if stat == nil {
			_, nstat, err = sess.Conn().CreateWithStat(p, f.encode(v), zk.FlagPersistent, sess.acl())
		} else {
			nstat, err = sess.Conn().Set(p, f.encode(v), stat.Version)
		}
		switch {
		case err == nil:
			return CounterState{Name: name, Value: v, Version: nstat.Version, Format: f, Index: max(nstat.Mzxid, nstat.Pzxid)}, nil
		case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
			continue // another writer came first: read again
		case ambiguous(err) && retry:
			if werr := sess.WaitLive(ctx); werr != nil {
				return CounterState{}, unavailable()
			}
		case ambiguous(err):
			return CounterState{}, maybeApplied(what, err)
		default:
			return CounterState{}, internal(err, what+" counter")
		}
	}
}

// Delete removes the counter; a counter that does not exist is no error.
func (c *Counters) Delete(ctx context.Context, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	sess := c.sess
	for {
		if st, _, _ := sess.Status(); st != StateLive {
			return unavailable()
		}
		err := sess.Conn().Delete(c.path(name), -1)
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			return nil
		case errors.Is(err, zk.ErrNotEmpty):
			return Errorf(CodeInvalid, "counter %q has children: it is not a counter", name)
		case ambiguous(err):
			if werr := sess.WaitLive(ctx); werr != nil {
				return unavailable()
			}
		default:
			return internal(err, "delete counter")
		}
	}
}

// List returns one page of the counters, each with its readings, and the
// name the next page starts after ("" for the last page).
func (c *Counters) List(ctx context.Context, p Page) ([]CounterSummary, string, error) {
	return listPage(ctx, c.sess, kinds.Counters.Dir(c.sess.Root()), p, nil, func(ctx context.Context, name string) (CounterSummary, bool, error) {
		data, stat, err := c.get(ctx, name)
		if err != nil || stat == nil {
			return CounterSummary{}, false, err
		}
		return CounterSummary{Name: name, Version: stat.Version, Values: CounterReadings(data)}, true, nil
	})
}
