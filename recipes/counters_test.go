package recipes

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/kinds"
)

// TestCounterFormatsReadAndWrite pins each format's bytes, and which data
// each refuses rather than read as a wrong number.
func TestCounterFormatsReadAndWrite(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f    CounterFormat
		v    int64
		data []byte
	}{
		{FormatDecimal, 42, []byte("42")},
		{FormatDecimal, -7, []byte("-7")},
		{FormatDecimal, math.MaxInt64, []byte("9223372036854775807")},
		{FormatInt32, 42, []byte{0, 0, 0, 42}},
		{FormatInt32, -1, []byte{0xff, 0xff, 0xff, 0xff}},
		{FormatInt64, 42, []byte{0, 0, 0, 0, 0, 0, 0, 42}},
		{FormatInt64, math.MinInt64, []byte{0x80, 0, 0, 0, 0, 0, 0, 0}},
	} {
		if got := c.f.encode(c.v); !slices.Equal(got, c.data) {
			t.Errorf("%s encode(%d) = %x, want %x", c.f, c.v, got, c.data)
		}
		if got, ok := c.f.decode(c.data); !ok || got != c.v {
			t.Errorf("%s decode(%x) = %d, %v, want %d", c.f, c.data, got, ok, c.v)
		}
	}
	for _, c := range []struct {
		f    CounterFormat
		data []byte
	}{
		{FormatDecimal, []byte{0, 0, 0, 42}},
		{FormatDecimal, []byte("+5")},
		{FormatDecimal, []byte("1.5")}, // a kazoo Counter of floats
		{FormatDecimal, []byte("9223372036854775808")},
		{FormatInt32, []byte("42")},
		{FormatInt32, []byte{0, 0, 0, 0, 0, 0, 0, 42}},
		{FormatInt64, []byte{0, 0, 0, 42}},
	} {
		if got, ok := c.f.decode(c.data); ok {
			t.Errorf("%s decode(%q) = %d, want refused", c.f, c.data, got)
		}
	}
	for _, f := range CounterFormats {
		if got, ok := f.decode(nil); !ok || got != 0 {
			t.Errorf("%s decode(empty) = %d, %v, want 0 (kazoo's ensure_path makes the node empty)", f, got, ok)
		}
	}
	if _, err := ParseCounterFormat("hex"); ErrorCode(err) != CodeInvalid {
		t.Errorf("format hex: %v, want invalid_request", err)
	}
}

func wantCode(t *testing.T, err error, code Code) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
	return e
}

// TestCounterSetAddCompareAndSet: an add makes the node, a set overwrites,
// a compare-and-set applies at its version only and otherwise answers
// the value and version there are.
func TestCounterSetAddCompareAndSet(t *testing.T) {
	t.Parallel()
	s := newService(t, serviceOptions{})
	ctx := context.Background()
	st, err := s.Counters.State(ctx, "c", FormatDecimal, 0, 0)
	if err != nil || st.Value != 0 || st.Version != -1 {
		t.Fatalf("absent counter: %+v, %v; want 0 at version -1", st, err)
	}
	if st, err = s.Counters.Add(ctx, "c", FormatDecimal, 5); err != nil || st.Value != 5 || st.Version != 0 {
		t.Fatalf("first add: %+v, %v; want 5 at version 0", st, err)
	}
	if st, err = s.Counters.Add(ctx, "c", FormatDecimal, -7); err != nil || st.Value != -2 || st.Version != 1 {
		t.Fatalf("add -7: %+v, %v; want -2 at version 1", st, err)
	}
	data, _, err := rawClient(t).Get(kinds.Counters.Path(s.root, "c"))
	if err != nil || string(data) != "-2" {
		t.Fatalf("node data %q, %v; want \"-2\"", data, err)
	}
	stale := int32(0)
	e := wantCode(t, func() error { _, err := s.Counters.Set(ctx, "c", FormatDecimal, 10, &stale); return err }(), CodeVersionMismatch)
	if e.Extra["value"] != int64(-2) || e.Extra["version"] != int32(1) {
		t.Fatalf("version_mismatch extra %v, want value -2 version 1", e.Extra)
	}
	at := int32(1)
	if st, err = s.Counters.Set(ctx, "c", FormatDecimal, 10, &at); err != nil || st.Value != 10 || st.Version != 2 {
		t.Fatalf("compare-and-set at 1: %+v, %v", st, err)
	}
	absent := int32(-1)
	wantCode(t, func() error { _, err := s.Counters.Set(ctx, "c", FormatDecimal, 1, &absent); return err }(), CodeVersionMismatch)
	if st, err = s.Counters.Set(ctx, "new", FormatDecimal, 1, &absent); err != nil || st.Version != 0 {
		t.Fatalf("create-only set: %+v, %v", st, err)
	}
	if st, err = s.Counters.Set(ctx, "c", FormatDecimal, 3, nil); err != nil || st.Value != 3 {
		t.Fatalf("set: %+v, %v", st, err)
	}
	page, _, err := s.Counters.List(ctx, Page{})
	if err != nil || len(page) != 2 || page[0].Name != "c" || page[0].Values[FormatDecimal] != 3 {
		t.Fatalf("list: %+v, %v", page, err)
	}
	if err := s.Counters.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if st, err = s.Counters.State(ctx, "c", FormatDecimal, 0, 0); err != nil || st.Version != -1 {
		t.Fatalf("deleted counter: %+v, %v", st, err)
	}
}

// TestCounterFormatMismatchAndOverflow: data of another format is a
// format_mismatch naming the formats it fits, never a number; an add past
// int32 is out_of_range and writes nothing.
func TestCounterFormatMismatchAndOverflow(t *testing.T) {
	t.Parallel()
	s := newService(t, serviceOptions{})
	ctx := context.Background()
	if _, err := s.Counters.Set(ctx, "shared", FormatInt32, math.MaxInt32-1, nil); err != nil {
		t.Fatal(err)
	}
	e := wantCode(t, func() error { _, err := s.Counters.State(ctx, "shared", FormatDecimal, 0, 0); return err }(), CodeFormatMismatch)
	if fits := e.Extra["fits"].([]CounterFormat); !slices.Equal(fits, []CounterFormat{FormatInt32}) {
		t.Fatalf("fits %v, want [int32]", fits)
	}
	wantCode(t, func() error { _, err := s.Counters.Add(ctx, "shared", FormatInt64, 1); return err }(), CodeFormatMismatch)
	wantCode(t, func() error { _, err := s.Counters.Set(ctx, "shared", FormatDecimal, 1, nil); return err }(), CodeFormatMismatch)
	if st, err := s.Counters.Add(ctx, "shared", FormatInt32, 1); err != nil || st.Value != math.MaxInt32 {
		t.Fatalf("add to max: %+v, %v", st, err)
	}
	e = wantCode(t, func() error { _, err := s.Counters.Add(ctx, "shared", FormatInt32, 1); return err }(), CodeOutOfRange)
	if e.Extra["value"] != int64(math.MaxInt32) {
		t.Fatalf("out_of_range extra %v", e.Extra)
	}
	wantCode(t, func() error { _, err := s.Counters.Set(ctx, "shared", FormatInt32, math.MaxInt32+1, nil); return err }(), CodeInvalid)
	if st, _ := s.Counters.State(ctx, "shared", FormatInt32, 0, 0); st.Value != math.MaxInt32 || st.Version != 1 {
		t.Fatalf("after the refused writes: %+v, want max at version 1", st)
	}
}

// TestCounterBlockingRead: a read at the counter's index waits for the
// next change, and answers it.
func TestCounterBlockingRead(t *testing.T) {
	t.Parallel()
	s := newService(t, serviceOptions{})
	ctx := context.Background()
	st, err := s.Counters.Add(ctx, "b", FormatDecimal, 1)
	if err != nil {
		t.Fatal(err)
	}
	now, err := s.Counters.State(ctx, "b", FormatDecimal, 0, 0)
	if err != nil || now.Index != st.Index || now.Index == 0 {
		t.Fatalf("read %+v, %v; want index %d", now, err, st.Index)
	}
	got := make(chan CounterState, 1)
	go func() {
		st, err := s.Counters.State(ctx, "b", FormatDecimal, now.Index, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- st
	}()
	if _, err := s.Counters.Add(ctx, "b", FormatDecimal, 2); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-got:
		if st.Value != 3 || st.Index <= now.Index {
			t.Fatalf("blocking read answered %+v", st)
		}
	case <-time.After(time.Minute):
		t.Fatal("the blocking read did not answer the add")
	}
}

// TestCounterConcurrentAddsLoseNone: 32 adders on 3 sessions, and a plain
// ZooKeeper writer doing kazoo's read-then-versioned-set, lose no add.
func TestCounterConcurrentAddsLoseNone(t *testing.T) {
	t.Parallel()
	first := newService(t, serviceOptions{})
	svcs := []*testService{first, newService(t, serviceOptions{root: first.root}), newService(t, serviceOptions{root: first.root})}
	const adders, each = 32, 10
	var wg sync.WaitGroup
	for i := range adders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := svcs[i%3].Counters.Add(context.Background(), "hits", FormatInt64, 1); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	conn := rawClient(t)
	p := kinds.Counters.Path(first.root, "hits")
	for done := 0; done < each; {
		data, stat, err := conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		v, _ := FormatInt64.decode(data)
		if _, err := conn.Set(p, FormatInt64.encode(v+1), stat.Version); err == nil {
			done++
		} else if !errors.Is(err, zk.ErrBadVersion) {
			t.Fatal(err)
		}
	}
	wg.Wait()
	st, err := first.Counters.State(context.Background(), "hits", FormatInt64, 0, 0)
	if err != nil || st.Value != adders*each+each {
		t.Fatalf("after %d adds: %+v, %v", adders*each+each, st, err)
	}
}

// TestCounterBlockingReadRacingItsCreation: a blocking read of an absent
// counter made while an add creates it answers the counter, never an
// absent state at the index of its creation (at which a next blocking read
// would wait past it). Before the watch cache re-checked an absent node
// after reading its parent's pzxid, this failed in most rounds.
func TestCounterBlockingReadRacingItsCreation(t *testing.T) {
	t.Parallel()
	s := newService(t, serviceOptions{})
	ctx := context.Background()
	for i := range 20 {
		name := "race-" + strconv.Itoa(i)
		before, err := s.Counters.State(ctx, name, FormatDecimal, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		read := make(chan CounterState, 1)
		go func() {
			st, err := s.Counters.State(ctx, name, FormatDecimal, before.Index, time.Minute)
			if err != nil {
				t.Error(err)
			}
			read <- st
		}()
		added, err := s.Counters.Add(ctx, name, FormatDecimal, 1)
		if err != nil {
			t.Fatal(err)
		}
		st := <-read
		if st.Version == -1 && st.Index >= added.Index {
			t.Fatalf("round %d: the blocking read answered absent at index %d, the add's is %d", i, st.Index, added.Index)
		}
		if st.Version == -1 {
			// Answered before the add: the next read at its index sees it.
			if st, err = s.Counters.State(ctx, name, FormatDecimal, st.Index, time.Minute); err != nil || st.Value != 1 {
				t.Fatalf("round %d: the next blocking read: %+v, %v", i, st, err)
			}
		}
	}
}
