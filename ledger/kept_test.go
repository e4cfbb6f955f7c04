package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// memKept is a Kept in memory, as the ledger's store keeps it (a newer
// read is never saved over by an older one).
type memKept struct {
	mu       sync.Mutex
	reps     map[string]domain.UsageReport
	ats      map[string]time.Time
	saves    int
	saveErr  error
	loadErr  error
	readOnly bool
}

func newMemKept() *memKept {
	return &memKept{reps: map[string]domain.UsageReport{}, ats: map[string]time.Time{}}
}

func (k *memKept) LoadUsage(_ context.Context, id string) (domain.UsageReport, time.Time, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.loadErr != nil {
		return domain.UsageReport{}, time.Time{}, false, k.loadErr
	}
	r, ok := k.reps[id]
	return r, k.ats[id], ok, nil
}

func (k *memKept) SaveUsage(_ context.Context, id string, rep domain.UsageReport, at time.Time) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.saves++
	if k.readOnly {
		return errors.New("read-only")
	}
	if k.saveErr != nil {
		return k.saveErr
	}
	if old, ok := k.ats[id]; !ok || !at.Before(old) {
		k.reps[id], k.ats[id] = rep, at
	}
	return nil
}

func (k *memKept) ReadOnly() bool { return k.readOnly }

// computeKept is compute with a Kept and a report of save failures.
func computeKept(t testing.TB, rows []Entry, rep *fakeReporter, kept Kept, now float64, saveFailed func(error)) UsageReport {
	t.Helper()
	return Compute(context.Background(), rows, UsageOptions{Since: at(-48), Now: at(now), Kept: kept, SaveFailed: saveFailed,
		Reporter: func(name string) (domain.UsageReporter, bool) {
			if name == "fake" {
				return rep, true
			}
			return nil, false
		}})
}

// running is an instance still running at read time now: hourly samples
// of share from start to now, the last one the part of its hour so far
// (as the simulated market and CloudWatch's latest period show it).
func running(id string, start, now, share float64) domain.InstanceUsage {
	in := domain.InstanceUsage{ID: id, Zone: "us-east-1a", Start: at(start), Spot: true}
	for h := start; h < now; h++ {
		p := math.Min(1, now-h)
		in.Busy = append(in.Busy, domain.BusySample{At: at(h), Period: time.Duration(p * float64(time.Hour)), Share: share})
	}
	return in
}

func oneRow(t *testing.T, rep UsageReport) UsageRow {
	t.Helper()
	if len(rep.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rep.Rows))
	}
	return rep.Rows[0]
}

// TestKeptCountsInstancesTheCloudForgot: EC2 lists a terminated instance
// for about an hour. A fleet's i-1 ran at the first read (5:00) and is
// no longer listed at the second (8:00): without what was kept, its five
// hours were gone from the report; with it they count, until it was last
// seen, and the note says so — at every read after, too.
func TestKeptCountsInstancesTheCloudForgot(t *testing.T) {
	row := fleet("f", 2, 0, 0, 0.5, StateActive)
	fr := &fakeReporter{reports: map[string]domain.UsageReport{"f": {Source: "gpu", Instances: []domain.InstanceUsage{
		running("i-1", 0, 5, 0.5), running("i-2", 0, 5, 1)}}}}
	kept := newMemKept()
	first := oneRow(t, computeKept(t, []Entry{row}, fr, kept, 5, nil))
	if !near(first.RunningGPUHours, 10) || !near(first.BusyGPUHours, 7.5) {
		t.Fatalf("first read: running %v busy %v, want 10 and 7.5", first.RunningGPUHours, first.BusyGPUHours)
	}
	// 8:00: i-1 was terminated (at about 6:00) and is no longer listed.
	fr.reports["f"] = domain.UsageReport{Source: "gpu", Instances: []domain.InstanceUsage{running("i-2", 0, 8, 1)}}
	forgot := oneRow(t, compute(t, []Entry{row}, fr, -48, 8, 0))
	if !near(forgot.RunningGPUHours, 8) {
		t.Fatalf("without keeping: running %v, want 8 (the cloud's view)", forgot.RunningGPUHours)
	}
	second := oneRow(t, computeKept(t, []Entry{row}, fr, kept, 8, nil))
	if !near(second.RunningGPUHours, 5+8) || !near(second.BusyGPUHours, 2.5+8) {
		t.Errorf("kept: running %v busy %v, want 13 and 10.5 (i-1 until last seen at 5:00)", second.RunningGPUHours, second.BusyGPUHours)
	}
	want := "1 instance no longer listed by the cloud: counted until last seen at 2026-03-02 05:00 UTC (it may have run a little longer)"
	if !strings.Contains(second.Note, want) {
		t.Errorf("note %q, want it to say %q", second.Note, want)
	}
	if second.MetricsSource != "gpu" {
		t.Errorf("metrics source %q", second.MetricsSource)
	}
	checkConsistent(t, second)
	// What is kept now says so itself: a third read still counts it.
	k := kept.reps["f"]
	var i1 *domain.InstanceUsage
	for i := range k.Instances {
		if k.Instances[i].ID == "i-1" {
			i1 = &k.Instances[i]
		}
	}
	if i1 == nil || !i1.End.Equal(at(5)) || !i1.EndLastSeen || len(i1.Busy) != 5 {
		t.Fatalf("kept i-1: %+v", i1)
	}
	fr.reports["f"] = domain.UsageReport{Source: "gpu", Instances: []domain.InstanceUsage{running("i-2", 0, 9, 1)}}
	third := oneRow(t, computeKept(t, []Entry{row}, fr, kept, 9, nil))
	if !near(third.RunningGPUHours, 5+9) || !strings.Contains(third.Note, "last seen at 2026-03-02 05:00 UTC") {
		t.Errorf("third read: running %v note %q", third.RunningGPUHours, third.Note)
	}
}

// TestKeptFiguresWhenTheProviderFails: a reservation read while it ran,
// then deleted at its end (Azure then answers an error: it keeps nothing
// of a deleted reservation). Its figures are those last read, counted
// until then, and the note says when and why.
func TestKeptFiguresWhenTheProviderFails(t *testing.T) {
	res := block("r", 1, 0, 24, 240, StateActive)
	res.Kind = KindReservation
	fr := &fakeReporter{reports: map[string]domain.UsageReport{"r": {Source: "cpu", Instances: []domain.InstanceUsage{
		running("vm-1", 1, 20, 0.25)}}}, errs: map[string]error{}}
	kept := newMemKept()
	live := oneRow(t, computeKept(t, []Entry{res}, fr, kept, 20, nil))
	res.State = StateEnded
	fr.errs["r"] = errors.New("azure: usage of r: capacity reservation r is not in Azure (404)")
	got := oneRow(t, computeKept(t, []Entry{res}, fr, kept, 30, nil))
	// vm-1 (p5.48xlarge's 8 GPUs per instance: the row's) ran 1:00–20:00
	// as last read.
	if !near(got.RunningGPUHours, live.RunningGPUHours) || !near(got.RunningGPUHours, 8*19) || !near(got.BusyGPUHours, 8*19*0.25) {
		t.Errorf("running %v busy %v, want those last read: %v and %v", got.RunningGPUHours, got.BusyGPUHours, live.RunningGPUHours, 8*19*0.25)
	}
	if got.MetricsSource != "cpu" || got.Interruptions != 0 {
		t.Errorf("source %q interruptions %d", got.MetricsSource, got.Interruptions)
	}
	for _, want := range []string{"figures as last read at 2026-03-02 20:00 UTC", "the live read failed", "not in Azure (404)"} {
		if !strings.Contains(got.Note, want) {
			t.Errorf("note %q, want it to say %q", got.Note, want)
		}
	}
	// $240 over 8 × 24 GPU-hours: $1.25 a GPU-hour.
	if !near(got.BookedGPUHours, 8*24) || !near(got.IdleUSD, 1.25*(8*24-8*19*0.25)) {
		t.Errorf("booked %v idle %v", got.BookedGPUHours, got.IdleUSD)
	}
	checkConsistent(t, got)
	if kept.saves != 1 {
		t.Errorf("%d saves, want 1: a failed read keeps nothing new", kept.saves)
	}
	// A provider not in use in this run is a failed read too.
	got = oneRow(t, Compute(context.Background(), []Entry{res}, UsageOptions{Since: at(-48), Now: at(30), Kept: kept,
		Reporter: func(string) (domain.UsageReporter, bool) { return nil, false }}))
	if !near(got.RunningGPUHours, 8*19) || !strings.Contains(got.Note, "fake is not in use in this run") || !strings.Contains(got.Note, "as last read") {
		t.Errorf("provider not in use: running %v note %q", got.RunningGPUHours, got.Note)
	}
}

// TestKeptNothingWhenTheProviderNeverAnswered: with nothing kept, a
// failing provider leaves the row's running and busy figures unknown, as
// before, and keeps nothing.
func TestKeptNothingWhenTheProviderNeverAnswered(t *testing.T) {
	row := block("b", 1, 0, 24, 1920, StateEnded)
	fr := &fakeReporter{errs: map[string]error{"b": errors.New("throttled")}}
	kept := newMemKept()
	got := oneRow(t, computeKept(t, []Entry{row}, fr, kept, 30, nil))
	if !math.IsNaN(got.RunningGPUHours) || !math.IsNaN(got.BusyGPUHours) || !math.IsNaN(got.IdleUSD) || got.Interruptions != -1 {
		t.Errorf("running %v busy %v idle %v interruptions %d, want unknown", got.RunningGPUHours, got.BusyGPUHours, got.IdleUSD, got.Interruptions)
	}
	if got.Note != "usage: throttled" || kept.saves != 0 {
		t.Errorf("note %q, %d saves", got.Note, kept.saves)
	}
}

// TestKeptWhenAnEndedRowsInstancesAreNoLongerListed: EC2 answers, but no
// longer lists the instances of a block that ended hours ago: the kept
// figures stand (not "nothing ran"), and are not saved again, so they
// still say when they were read.
func TestKeptWhenAnEndedRowsInstancesAreNoLongerListed(t *testing.T) {
	row := block("b", 2, 0, 24, 3840, StateActive)
	fr := &fakeReporter{reports: map[string]domain.UsageReport{"b": {Source: "gpu", Instances: []domain.InstanceUsage{
		running("i-1", 0, 23.5, 1), {ID: "i-2", Start: at(0), End: at(12), Busy: inst("x", 0, 12, 0.5, false).Busy}}}}}
	kept := newMemKept()
	oneRow(t, computeKept(t, []Entry{row}, fr, kept, 23.5, nil))
	row.State = StateEnded
	fr.reports["b"] = domain.UsageReport{}
	got := oneRow(t, computeKept(t, []Entry{row}, fr, kept, 30, nil))
	if !near(got.RunningGPUHours, 8*23.5+8*12) || !near(got.BusyGPUHours, 8*23.5+8*6) {
		t.Errorf("running %v busy %v, want %v and %v", got.RunningGPUHours, got.BusyGPUHours, 8*23.5+8*12, 8*23.5+8*6)
	}
	for _, want := range []string{"figures as last read at 2026-03-02 23:30 UTC", "the cloud no longer lists its instances",
		"1 instance no longer listed by the cloud: counted until last seen at 2026-03-02 23:30 UTC"} {
		if !strings.Contains(got.Note, want) {
			t.Errorf("note %q, want it to say %q", got.Note, want)
		}
	}
	if got.MetricsSource != "gpu" {
		t.Errorf("metrics source %q", got.MetricsSource)
	}
	if kept.saves != 1 || !kept.ats["b"].Equal(at(23.5)) {
		t.Errorf("%d saves, kept as read at %v: want the first read's only", kept.saves, kept.ats["b"])
	}
	checkConsistent(t, got)
}

// TestMergeKeepsSplitRunsApart: cloud/azure splits a VM's runs where
// it was deallocated, under one id. Each run is its own (id, start); a
// run the newer read starts later (its first hours fell out of the span
// asked) is not counted twice.
func TestMergeKeepsSplitRunsApart(t *testing.T) {
	first := domain.UsageReport{Source: "cpu", Instances: []domain.InstanceUsage{
		{ID: "vm-1", Start: at(0), End: at(4), Busy: inst("x", 0, 4, 0.5, false).Busy},
		running("vm-1", 6, 8, 0.5)}}
	// 12:00: the first run is outside the span asked; the second runs on.
	second := domain.UsageReport{Source: "cpu", Instances: []domain.InstanceUsage{running("vm-1", 6, 12, 1)}}
	m := merge(first, at(8), second)
	if len(m.Instances) != 2 || !m.Instances[0].Start.Equal(at(0)) || !m.Instances[0].End.Equal(at(4)) ||
		!m.Instances[1].Start.Equal(at(6)) || !m.Instances[1].End.IsZero() {
		t.Fatalf("merged runs %+v, want [0,4) kept apart from [6, running)", m.Instances)
	}
	if m.Instances[0].EndLastSeen || m.Instances[1].EndLastSeen {
		t.Error("a run with the cloud's own end, or listed now, is not 'last seen'")
	}
	if n := len(m.Instances[1].Busy); n != 6 || m.Instances[1].Busy[0].Share != 1 {
		t.Errorf("second run's samples: %d (first share %v), want the newer read's 6", n, m.Instances[1].Busy[0].Share)
	}
	// 14:00: the cloud now starts the second run at 7:00 (its 6:00 hour
	// fell out of the span): [6,7) is kept, [7, running) is the newer's.
	third := domain.UsageReport{Source: "cpu", Instances: []domain.InstanceUsage{running("vm-1", 7, 14, 1)}}
	m = merge(m, at(12), third)
	if len(m.Instances) != 3 || !m.Instances[1].Start.Equal(at(6)) || !m.Instances[1].End.Equal(at(7)) || m.Instances[1].EndLastSeen ||
		!m.Instances[2].Start.Equal(at(7)) {
		t.Fatalf("runs %+v, want [0,4) [6,7) [7, running)", m.Instances)
	}
	row := block("r", 1, 0, 24, 240, StateActive)
	row.Kind, row.InstanceType, row.GPUCount = KindReservation, "g6.xlarge", 1
	fr := &fakeReporter{reports: map[string]domain.UsageReport{"r": third}}
	kept := newMemKept()
	kept.reps["r"], kept.ats["r"] = merge(first, at(8), second), at(12)
	got := oneRow(t, computeKept(t, []Entry{row}, fr, kept, 14, nil))
	if !near(got.RunningGPUHours, 4+1+7) {
		t.Errorf("running %v, want 12: 4 + 1 + 7 hours, none twice", got.RunningGPUHours)
	}
	checkConsistent(t, got)
}

// TestMergeNewerSampleWins: the sample of the hour in progress grows from
// read to read; the newer read's stands, and older hours are kept.
func TestMergeNewerSampleWins(t *testing.T) {
	old := domain.UsageReport{Instances: []domain.InstanceUsage{running("i-1", 0, 2.5, 0.2)}}
	newer := domain.UsageReport{Instances: []domain.InstanceUsage{{ID: "i-1", Start: at(0),
		Busy: []domain.BusySample{{At: at(2), Period: time.Hour, Share: 0.8}}}}}
	m := merge(old, at(2.5), newer)
	if len(m.Instances) != 1 {
		t.Fatalf("instances %+v", m.Instances)
	}
	b := m.Instances[0].Busy
	if len(b) != 3 || !b[2].At.Equal(at(2)) || b[2].Period != time.Hour || b[2].Share != 0.8 || b[0].Share != 0.2 {
		t.Errorf("samples %+v, want hours 0 and 1 kept and hour 2 the newer read's", b)
	}
	if m.Source != "" {
		t.Errorf("source %q: neither read named one", m.Source)
	}
}

// TestKeptIsBoundedToTheRowsSpan: what is kept of a row is what can
// count for it: samples and runs outside its span are not kept.
func TestKeptIsBoundedToTheRowsSpan(t *testing.T) {
	row := block("b", 1, 10, 20, 100, StateEnded)
	fr := &fakeReporter{reports: map[string]domain.UsageReport{"b": {Source: "gpu", Instances: []domain.InstanceUsage{
		inst("before", 0, 9, 1, false), inst("i-1", 5, 25, 1, false)}}}}
	kept := newMemKept()
	computeKept(t, []Entry{row}, fr, kept, 30, nil)
	k := kept.reps["b"]
	if len(k.Instances) != 1 || k.Instances[0].ID != "i-1" {
		t.Fatalf("kept %+v, want only i-1", k.Instances)
	}
	for _, s := range k.Instances[0].Busy {
		if !s.At.Add(s.Period).After(at(10)) || !s.At.Before(at(20)) {
			t.Errorf("sample at %v kept, outside the row's span", s.At)
		}
	}
	if n := len(k.Instances[0].Busy); n != 10 {
		t.Errorf("%d samples kept, want the 10 of the span", n)
	}
}

// TestKeptReadOnlyAndFailingSaves: a read-only ledger reads what is kept
// and is never asked to save; a save that fails is told once per Compute
// and the report is whole.
func TestKeptReadOnlyAndFailingSaves(t *testing.T) {
	rows := []Entry{block("a", 1, 0, 24, 100, StateEnded), block("b", 1, 0, 24, 100, StateEnded)}
	fr := &fakeReporter{reports: map[string]domain.UsageReport{
		"a": {Source: "gpu", Instances: []domain.InstanceUsage{inst("i-a", 0, 24, 1, false)}},
		"b": {Source: "gpu", Instances: []domain.InstanceUsage{inst("i-b", 0, 24, 1, false)}}}, errs: map[string]error{}}

	failing := newMemKept()
	failing.saveErr = errors.New("disk full")
	var told []error
	rep := computeKept(t, rows, fr, failing, 30, func(err error) { told = append(told, err) })
	if len(told) != 1 || failing.saves != 2 {
		t.Errorf("told %v of %d failed saves, want once", told, failing.saves)
	}
	for _, r := range rep.Rows {
		if !near(r.RunningGPUHours, 8*24) || !near(r.BusyGPUHours, 8*24) {
			t.Errorf("row %s: running %v busy %v despite the failed save", r.ID, r.RunningGPUHours, r.BusyGPUHours)
		}
	}

	ro := newMemKept()
	ro.reps["a"], ro.ats["a"] = fr.reports["a"], at(25)
	ro.readOnly = true
	fr.errs["a"], fr.errs["b"] = errors.New("gone"), errors.New("gone")
	told = nil
	rep = computeKept(t, rows, fr, ro, 30, func(err error) { told = append(told, err) })
	if ro.saves != 0 || len(told) != 0 {
		t.Errorf("read-only: %d saves, told %v", ro.saves, told)
	}
	for _, r := range rep.Rows {
		switch r.ID {
		case "a":
			if !near(r.RunningGPUHours, 8*24) || !strings.Contains(r.Note, "as last read") {
				t.Errorf("read-only, kept: running %v note %q", r.RunningGPUHours, r.Note)
			}
		case "b":
			if !math.IsNaN(r.RunningGPUHours) {
				t.Errorf("read-only, nothing kept: running %v", r.RunningGPUHours)
			}
		}
	}
}

// TestTrackerKeepsAndLogsAFailedSaveOnce: the tracker keeps through its
// Kept, and a ledger that cannot be written is logged once for its life,
// not at every computation.
func TestTrackerKeepsAndLogsAFailedSaveOnce(t *testing.T) {
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.RecordIntent(context.Background(), block("b", 1, 0, 24, 100, StateActive), nil); err != nil {
		t.Fatal(err)
	}
	fr := &fakeReporter{reports: map[string]domain.UsageReport{}}
	rows, _ := st.List(context.Background())
	fr.reports[rows[0].ID] = domain.UsageReport{Source: "gpu", Instances: []domain.InstanceUsage{running("i-1", 0, 10, 1)}}
	kept := newMemKept()
	kept.saveErr = errors.New("disk full")
	var logged strings.Builder
	now := at(10)
	tr := NewTracker(TrackerOptions{Ledger: st, Now: func() time.Time { return now }, TTL: time.Minute, Kept: kept,
		Log:      slog.New(slog.NewTextHandler(&logged, nil)),
		Reporter: func(string) (domain.UsageReporter, bool) { return fr, true }})
	for i := range 3 {
		now = at(10).Add(time.Duration(i) * 2 * time.Minute)
		if _, err := tr.Report(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if kept.saves != 3 || strings.Count(logged.String(), "disk full") != 1 {
		t.Errorf("%d saves, log %q: want three tries and one line", kept.saves, logged.String())
	}
}

// randomReport is a report of up to 6 instances (some running, some of
// one id run twice), samples anywhere, shares out of range.
func randomReport(rng *rand.Rand, ids []string) domain.UsageReport {
	var ins []domain.InstanceUsage
	for range rng.IntN(6) {
		s := rng.Float64() * 80
		in := domain.InstanceUsage{ID: ids[rng.IntN(len(ids))], Start: at(s - 10)}
		if rng.IntN(3) > 0 {
			in.End = at(s + rng.Float64()*40)
		}
		for j := range rng.IntN(30) {
			in.Busy = append(in.Busy, domain.BusySample{At: at(s + float64(j)*rng.Float64()), Period: time.Duration(rng.IntN(7200)) * time.Second, Share: rng.Float64()*1.6 - 0.3})
		}
		ins = append(ins, in)
	}
	return domain.UsageReport{Source: "x", Instances: ins}
}

// TestComputeConsistentOverMergedReports is TestComputeConsistentUnderAnyReport
// over what is kept: a random first read kept, a second read that is
// random, fails, or lists a random part of the first; busy ≤ running ≤
// booked every time, and the merged report counts no instance run twice.
func TestComputeConsistentOverMergedReports(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ids := []string{"a", "b", "c"}
	for trial := range 200 {
		id := fmt.Sprint("b", trial)
		r := block(id, 1+rng.IntN(3), 0, float64(24*(1+rng.IntN(3))), 1000, StateActive)
		kept := newMemKept()
		first := randomReport(rng, ids)
		fr := &fakeReporter{reports: map[string]domain.UsageReport{id: first}, errs: map[string]error{}}
		t1 := 20 + rng.Float64()*40
		for _, row := range computeKept(t, []Entry{r}, fr, kept, t1, nil).Rows {
			checkConsistent(t, row)
		}
		switch rng.IntN(3) {
		case 0:
			fr.reports[id] = randomReport(rng, ids)
		case 1:
			fr.errs[id] = errors.New("throttled")
		default:
			var part []domain.InstanceUsage
			for _, in := range first.Instances {
				if rng.IntN(2) == 0 {
					part = append(part, in)
				}
			}
			fr.reports[id] = domain.UsageReport{Source: "x", Instances: part}
		}
		if rng.IntN(2) == 0 {
			r.State = StateEnded
		}
		for _, row := range computeKept(t, []Entry{r}, fr, kept, t1+rng.Float64()*30, nil).Rows {
			checkConsistent(t, row)
			if !math.IsNaN(row.IdleUSD) && (row.IdleUSD < -1e-9 || row.IdleUSD > row.CostUSD+1e-9) {
				t.Errorf("trial %d: idle %v outside [0, cost %v]", trial, row.IdleUSD, row.CostUSD)
			}
		}
		// A run is kept once: no two kept runs of one id start together.
		seen := map[runKey]bool{}
		for _, in := range kept.reps[id].Instances {
			if seen[keyOf(in)] {
				t.Errorf("trial %d: run %s at %v kept twice", trial, in.ID, in.Start)
			}
			seen[keyOf(in)] = true
		}
	}
}

// TestKeptUnreadableIsSaid: a kept report the ledger cannot read (a
// truncated or hand-edited usage_kept row) breaks nothing: with the live
// read the figures are the cloud's and the note says what kept usage is
// missing from them (the cloud may have forgotten instances it held);
// without it the figures are unknown. It is never saved over.
func TestKeptUnreadableIsSaid(t *testing.T) {
	row := fleet("f", 2, 0, 0, 0.5, StateActive)
	fr := &fakeReporter{reports: map[string]domain.UsageReport{"f": {Source: "gpu", Instances: []domain.InstanceUsage{
		running("i-2", 0, 8, 1)}}}, errs: map[string]error{}}
	kept := newMemKept()
	kept.loadErr = errors.New("unexpected end of JSON input")
	got := oneRow(t, computeKept(t, []Entry{row}, fr, kept, 8, nil))
	if !near(got.RunningGPUHours, 8) {
		t.Errorf("running %v, want the live read's 8", got.RunningGPUHours)
	}
	if !strings.Contains(got.Note, "the usage kept in the ledger could not be read: unexpected end of JSON input") {
		t.Errorf("note %q, want it to say the kept usage could not be read", got.Note)
	}
	if kept.saves != 0 {
		t.Errorf("%d saves over an unreadable kept report", kept.saves)
	}
	fr.errs["f"] = errors.New("throttled")
	got = oneRow(t, computeKept(t, []Entry{row}, fr, kept, 8, nil))
	if !math.IsNaN(got.RunningGPUHours) || !math.IsNaN(got.BusyGPUHours) || !strings.Contains(got.Note, "could not be read") {
		t.Errorf("live read failed too: running %v busy %v note %q, want unknown and said", got.RunningGPUHours, got.BusyGPUHours, got.Note)
	}
	checkConsistent(t, got)
}
