package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCallLivenessAcrossHandles: two handles on one file are two
// processes. The one that records a pending intent holds its call until
// EndCall; the other sees the call in flight however old the row is, and
// abandoned as soon as it is released — never by a timeout of its own.
func TestCallLivenessAcrossHandles(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	created := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	r, err := a.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "aws", IdemKey: "cb-1", State: StatePending, CreatedAt: created}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen, err := b.Get(ctx, r.ID)
	if err != nil || seen.Owner != a.Owner().String() || seen.Owner == b.Owner().String() {
		t.Fatalf("row owner %q (%v): want a's %q", seen.Owner, err, a.Owner())
	}
	// A day later by b's clock: still in flight, because a holds it.
	if l, why := b.CallLiveness(seen, created.Add(24*time.Hour)); l != OwnerAlive || why == "" {
		t.Fatalf("held call: %v %q, want alive", l, why)
	}
	a.EndCall(r.ID)
	if l, _ := b.CallLiveness(seen, created.Add(time.Second)); l != OwnerGone {
		t.Fatalf("released call: %v, want gone", l)
	}
	// The process lock outlives the call, until the handle closes.
	if l, _ := b.ProcessLiveness(seen.Owner); l != OwnerAlive {
		t.Fatalf("process of a live handle: %v", l)
	}
	a.Close()
	if l, _ := b.ProcessLiveness(seen.Owner); l != OwnerGone {
		t.Fatalf("process of a closed handle: %v", l)
	}
	if names, _ := filepath.Glob(filepath.Join(a.callDir(), "*")); len(names) != 0 {
		t.Fatalf("lock files left after close: %v", names)
	}
}

// TestCallLivenessOtherHost: a call owned on another host cannot be
// asked by lock; its heartbeat decides, and a row with neither owner nor
// heartbeat (an earlier gpumarket) is unknown.
func TestCallLivenessOtherHost(t *testing.T) {
	s := openTest(t)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	far := Owner{Host: "elsewhere", PID: 42, Token: "t0k"}.String()
	for _, c := range []struct {
		row  Entry
		want Liveness
	}{
		{Entry{ID: "a", Owner: far, Heartbeat: now.Add(-HeartbeatStale + time.Second)}, OwnerAlive},
		{Entry{ID: "b", Owner: far, Heartbeat: now.Add(-HeartbeatStale)}, OwnerGone},
		{Entry{ID: "c", Owner: far}, OwnerUnknown},
		{Entry{ID: "d"}, OwnerUnknown},
		{Entry{ID: "e", Owner: "garbage"}, OwnerUnknown},
	} {
		if got, _ := s.CallLiveness(c.row, now); got != c.want {
			t.Errorf("%+v: %v, want %v", c.row, got, c.want)
		}
	}
	if l, _ := s.ProcessLiveness(far); l != OwnerUnknown {
		t.Errorf("process on another host: %v, want unknown", l)
	}
}

// TestHeartbeatOnlyWhilePending: Beat moves the heartbeat of the
// handle's own pending row, and of nothing else.
func TestHeartbeatOnlyWhilePending(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	r, err := s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "aws", IdemKey: "cb-1", State: StatePending, CreatedAt: t0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Beat(ctx, r.ID, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, r.ID)
	if !got.Heartbeat.Equal(t0.Add(time.Minute)) {
		t.Fatalf("heartbeat %v", got.Heartbeat)
	}
	got.State = StateScheduled
	if _, err := s.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := s.Beat(ctx, r.ID, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.Get(ctx, r.ID); !got.Heartbeat.Equal(t0.Add(time.Minute)) {
		t.Fatalf("a settled row's heartbeat moved: %v", got.Heartbeat)
	}
}

func TestParseOwner(t *testing.T) {
	o := Owner{Host: "gpu-box.example", PID: 1234, Token: "abcd"}
	got, ok := ParseOwner(o.String())
	if !ok || got != o {
		t.Fatalf("round trip %q → %+v %v", o.String(), got, ok)
	}
	for _, bad := range []string{"", "host", "host/12", "host/x/tok", "host/12/"} {
		if _, ok := ParseOwner(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestCallsLeaveNoOpenFiles: a handle that makes many calls (a server
// running for weeks) does not keep a file open per call.
func TestCallsLeaveNoOpenFiles(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("cannot count open files here: %v", err)
		}
		return len(ents)
	}
	s := openTest(t)
	ctx := context.Background()
	// One call first: the process lock and the database's files open.
	r, err := s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "aws", IdemKey: "cb-0", State: StatePending}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.EndCall(r.ID)
	before := fds()
	for i := 1; i <= 30; i++ {
		r, err := s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "aws", IdemKey: fmt.Sprintf("cb-%d", i), State: StatePending}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.EndCall(r.ID)
	}
	if after := fds(); after > before+3 {
		t.Fatalf("%d open files after 30 calls, %d before", after, before)
	}
}

// A pending intent or update that is refused (by its check, or by a
// conflict) releases the call lock it took: nothing is in flight.
func TestRefusedWriteReleasesItsCall(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	refuse := fmt.Errorf("over the cap")
	r := Entry{ID: NewID(time.Now()), Kind: KindFleet, Provider: "sim", IdemKey: "k", State: StatePending}
	if _, err := s.RecordIntent(ctx, r, func(Spending, *Entry, []Entry) error { return refuse }); err != refuse {
		t.Fatalf("got %v, want the check's refusal", err)
	}
	if _, err := os.Stat(s.rowLock(r.ID)); !os.IsNotExist(err) {
		t.Fatalf("the refused intent's call lock is still held: %v", err)
	}
	r.State = StateScheduled
	if _, err := s.RecordIntent(ctx, r, nil); err != nil {
		t.Fatal(err)
	}
	r.State = StatePending
	if _, err := s.UpdateFrom(ctx, r, StateActive); !errors.Is(err, ErrConflict) {
		t.Fatalf("got %v, want a conflict", err)
	}
	if _, err := os.Stat(s.rowLock(r.ID)); !os.IsNotExist(err) {
		t.Fatalf("the conflicting update's call lock is still held: %v", err)
	}
}

// A launch whose context ends before its call sends nothing, and its row
// says so by how it came: a new intent failed, a re-send of a lost answer
// unknown again, a scheduled launch scheduled again at the start asked.
func TestLaunchCancelledBeforeItsCallByKind(t *testing.T) {
	st := openTest(t)
	s := New(st, nil, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	asked := time.Date(2026, 3, 2, 5, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		kind  [2]string
		want  string
		start time.Time
	}{{sendFresh, StateFailed, asked.Add(time.Hour)}, {sendAgain, StateUnknown, asked.Add(time.Hour)}, {sendScheduled, StateScheduled, asked}} {
		row, err := st.RecordIntent(context.Background(), Entry{Kind: KindFleet, Provider: "sim", IdemKey: NewID(time.Now()), State: StatePending,
			Start: asked.Add(time.Hour), Schedule: FleetSchedule{Start: asked, Keeper: KeptByGpumarket}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.sendFleet(ctx, nil, row, FleetResult{}, c.kind) // no launcher: the call must not be made
		if err == nil || res.Row.State != c.want || res.Row.Error != c.kind[1] || !res.Row.Start.Equal(c.start) {
			t.Errorf("%v: got %s %q from %s (%v), want %s from %s", c.kind, res.Row.State, res.Row.Error, res.Row.Start, err, c.want, c.start)
		}
	}
}

// Every write the store makes moves Changes, and a refused one does not:
// the TUI rereads the ledger only when it moved.
func TestChangesCountsEveryWrite(t *testing.T) {
	st := openTest(t)
	s := New(st, nil, Options{})
	ctx := context.Background()
	moved := func(what string, write func() error) {
		t.Helper()
		before := s.Changes()
		if err := write(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if s.Changes() == before {
			t.Errorf("%s left Changes at %d", what, before)
		}
	}
	r := Entry{ID: NewID(time.Now()), Kind: KindFleet, Provider: "sim", IdemKey: "k", State: StatePending}
	moved("an intent", func() error { _, err := st.RecordIntent(ctx, r, nil); return err })
	r.State = StateActive
	moved("an update", func() error { _, err := st.Update(ctx, r); return err })
	before := s.Changes()
	if _, err := st.RecordIntent(ctx, Entry{ID: NewID(time.Now()), Kind: KindFleet, Provider: "sim", IdemKey: "k2", State: StatePending},
		func(Spending, *Entry, []Entry) error { return errors.New("over the cap") }); err == nil {
		t.Fatal("the refusal was not returned")
	}
	if s.Changes() != before {
		t.Errorf("a refused intent moved Changes")
	}
}
