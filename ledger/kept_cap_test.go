package ledger

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// hourly is an instance with n hourly samples from hour start, every
// stride hours (stride 1: each starts where the one before ended).
func hourly(id string, start float64, n, stride int, share func(i int) float64) domain.InstanceUsage {
	in := domain.InstanceUsage{ID: id, Start: at(start), End: at(start + float64(n*stride))}
	for i := range n {
		in.Busy = append(in.Busy, domain.BusySample{At: at(start + float64(i*stride)), Period: time.Hour, Share: share(i)})
	}
	return in
}

// busyHours is what the samples of rep say was busy, in GPU-hours of one
// GPU per instance.
func busyHours(rep domain.UsageReport) float64 {
	h := 0.0
	for _, in := range rep.Instances {
		for _, s := range in.Busy {
			h += s.Share * s.Period.Hours()
		}
	}
	return h
}

// Over the cap, neighbouring samples merge, oldest first: what they say
// is busy stays the same, the newest samples are untouched, and the note
// says from when they were merged.
func TestCapKeptMergesTheOldestFirst(t *testing.T) {
	share := func(i int) float64 { return float64(i%7) / 7 }
	rep := domain.UsageReport{Note: "from the fake", Instances: []domain.InstanceUsage{
		hourly("i-1", 0, 600, 1, share), hourly("i-2", 0, 600, 1, share)}}
	before := busyHours(rep)
	got, says := capKept(rep, 500)
	if n := countSamples(got); n > 500 || n < 250 {
		t.Errorf("%d samples after a cap of 500, want at most 500 (and not needlessly fewer)", n)
	}
	if math.Abs(busyHours(got)-before) > 1e-6 {
		t.Errorf("busy hours %v after merging, want %v as before", busyHours(got), before)
	}
	for i, in := range got.Instances {
		last := in.Busy[len(in.Busy)-100:]
		if !reflect.DeepEqual(last, rep.Instances[i].Busy[500:]) {
			t.Errorf("%s: the newest 100 samples changed", in.ID)
		}
		if in.Busy[0].Period <= time.Hour {
			t.Errorf("%s: the oldest sample lasts %v, want it merged into a longer one", in.ID, in.Busy[0].Period)
		}
	}
	if !strings.HasPrefix(says, "the usage kept in the ledger is capped at 500 samples: samples before ") ||
		!strings.Contains(says, "merged into longer ones") || strings.Contains(says, "dropped") {
		t.Errorf("note %q", says)
	}
	if countSamples(rep) != 1200 {
		t.Error("capKept changed the report it was given")
	}
	if same, says := capKept(rep, 1200); says != "" || !reflect.DeepEqual(same, rep) {
		t.Errorf("a report within its cap changed (%q)", says)
	}
}

// Samples that do not neighbour one another cannot merge: the oldest are
// dropped, and the note says before when.
func TestCapKeptDropsTheOldestWhenNothingMerges(t *testing.T) {
	one := func(int) float64 { return 1 }
	rep := domain.UsageReport{Instances: []domain.InstanceUsage{hourly("i-1", 0, 300, 2, one), hourly("i-2", 1, 300, 2, one)}}
	got, says := capKept(rep, 100)
	if n := countSamples(got); n != 100 {
		t.Fatalf("%d samples, want exactly the cap of 100", n)
	}
	// The 100 newest: hours 500 to 599 of the 600 sampled.
	for _, in := range got.Instances {
		for _, s := range in.Busy {
			if s.At.Before(at(500)) {
				t.Fatalf("%s kept a sample at %v, older than the 100 newest", in.ID, s.At)
			}
		}
	}
	want := "those before " + utcMinute(at(500)) + " dropped"
	if !strings.Contains(says, want) || strings.Contains(says, "merged") {
		t.Errorf("note %q, want it to say %q and nothing merged", says, want)
	}
	if got, _ := capKept(rep, 599); countSamples(got) != 599 {
		t.Errorf("one over the cap: %d samples kept, want 599", countSamples(got))
	}
}

// A new cap's sentence replaces the old one, but what was dropped stays
// said; the rest of the note is kept.
func TestCapNoteKeepsWhatWasDropped(t *testing.T) {
	old := "from the cloud; " + keptCapSays + "100 samples: samples before A merged into longer ones; those before B dropped (that time is unmeasured)"
	got := withCapNote(old, keptCapSays+"100 samples: samples before C merged into longer ones")
	if !strings.HasPrefix(got, "from the cloud; ") || !strings.Contains(got, "samples before C merged") ||
		strings.Contains(got, "before A") || strings.Count(got, "those before B dropped") != 1 || strings.Count(got, keptCapSays) != 1 {
		t.Errorf("note %q", got)
	}
	if got := withCapNote(old, ""); got != old {
		t.Errorf("no new cap: note %q, want it as it was", got)
	}
}

// A fleet whose samples pass the cap is kept capped, the row's note says
// so, and later reads say so still: when the live read fails, and when it
// adds only a few samples.
func TestKeptUsageCappedWhenSaved(t *testing.T) {
	// 64 instances sampled hourly for 67 days: past the cap.
	const instances, n = 64, 1600
	row := fleet("f", instances, 0, 0, 0.5, StateActive)
	now := float64(n)
	share := func(i int) float64 { return float64(i%5) / 5 }
	live := domain.UsageReport{Source: "gpu"}
	for i := range instances {
		in := hourly(fmt.Sprintf("i-%d", i), 0, n, 1, share)
		in.End = time.Time{}
		live.Instances = append(live.Instances, in)
	}
	fr := &fakeReporter{reports: map[string]domain.UsageReport{"f": live}}
	kept := newMemKept()
	first := oneRow(t, computeKeptSince(t, []Entry{row}, fr, kept, 0, now))
	k := kept.reps["f"]
	if c := countSamples(k); c > maxKeptSamples {
		t.Fatalf("kept %d samples, over the cap of %d", c, maxKeptSamples)
	}
	const says = "the usage kept in the ledger is capped at 100000 samples"
	if !strings.Contains(first.Note, says) {
		t.Errorf("the row's note %q does not say the kept usage was capped", first.Note)
	}
	if !near(first.BusyGPUHours, busyHours(live)) {
		t.Errorf("busy %v GPU-hours, want %v: merging keeps them", first.BusyGPUHours, busyHours(live))
	}
	fr.errs = map[string]error{"f": fmt.Errorf("the cloud is down")}
	failed := oneRow(t, computeKeptSince(t, []Entry{row}, fr, kept, 0, now+1))
	if !strings.Contains(failed.Note, says) {
		t.Errorf("figures as kept, note %q: want it to say they were capped", failed.Note)
	}
	fr.errs = nil
	fr.reports["f"] = domain.UsageReport{Source: "gpu", Instances: []domain.InstanceUsage{hourly("i-new", now, 2, 1, share)}}
	later := oneRow(t, computeKeptSince(t, []Entry{row}, fr, kept, 0, now+2))
	if !strings.Contains(later.Note, says) || strings.Count(later.Note, says) != 1 {
		t.Errorf("a later read, note %q: want it to say once that what is kept was capped", later.Note)
	}
}

// computeKeptSince is computeKept over the span since hour since.
func computeKeptSince(t testing.TB, rows []Entry, rep *fakeReporter, kept Kept, since, now float64) UsageReport {
	t.Helper()
	return Compute(context.Background(), rows, UsageOptions{Since: at(since), Now: at(now), Kept: kept,
		Reporter: func(name string) (domain.UsageReporter, bool) { return rep, name == "fake" }})
}

// hugeKeptBody is a kept report as an older gpumarket wrote it, with no
// cap: instances × samples hourly samples (0.75 and 0.25 by turns after
// the first).
func hugeKeptBody(instances, samples int) string {
	var b strings.Builder
	b.WriteString(`{"v":1,"source":"gpu","instances":[`)
	for i := range instances {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"i-%d","start":%q,"busy":[[%d,%d,0.5]`, i, at(0).Format(time.RFC3339Nano), at(0).UnixNano(), int64(time.Hour))
		for j := range samples - 1 {
			b.WriteString([]string{",[0.75]", ",[0.25]"}[j%2])
		}
		b.WriteString("]}")
	}
	b.WriteString("]}")
	return b.String()
}

// An oversized kept report (written before the cap) is read merged as it
// streams: within the cap, its busy hours as they were, the note saying
// so.
func TestHugeKeptReportReadMerged(t *testing.T) {
	defer func(old int) { maxKeptBytes = old }(maxKeptBytes)
	maxKeptBytes = 1 << 20
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := hugeKeptBody(4, 60_000) // 240,000 samples, 1.4 MB
	if _, err := s.db.Exec(`INSERT INTO usage_kept (row_id, read_at, report) VALUES ('r', ?, ?)`, fmtTime(at(1)), body); err != nil {
		t.Fatal(err)
	}
	rep, _, ok, err := s.LoadUsage(context.Background(), "r")
	if err != nil || !ok {
		t.Fatalf("load: %v %v", ok, err)
	}
	if n := countSamples(rep); n > maxKeptSamples || n == 0 {
		t.Errorf("%d samples read, want 1 to %d", n, maxKeptSamples)
	}
	if len(rep.Instances) != 4 || rep.Source != "gpu" {
		t.Errorf("instances %d source %q", len(rep.Instances), rep.Source)
	}
	// Per instance: 0.5, then 0.75 and 0.25 by turns.
	if got, want := busyHours(rep), 4*(0.5+0.75*30_000+0.25*29_999); !near(got, want) {
		t.Errorf("busy %v hours, want %v as written", got, want)
	}
	if !strings.Contains(rep.Note, "the usage kept in the ledger is capped at 100000 samples") ||
		!strings.Contains(rep.Note, "an oversized report read with up to") {
		t.Errorf("note %q", rep.Note)
	}
}

// The streaming reader reads back what encodeUsage writes (below the size
// that merges), and refuses what is not a kept report.
func TestStreamingKeptReaderReadsWhatWasWritten(t *testing.T) {
	rep := domain.UsageReport{Source: "gpu", Note: "n", InterruptionsUnknown: true, Instances: []domain.InstanceUsage{
		hourly("i-1", 0, 30, 1, func(i int) float64 { return float64(i) / 30 }),
		hourly("i-2", 3, 10, 3, func(int) float64 { return 0.25 }),
		{ID: "i-3", Start: at(2), Spot: true, Interrupted: true, EndLastSeen: true, End: at(4)},
	}}
	rep.Instances[1].Busy[4].Period = 90 * time.Minute
	b, err := encodeUsage(rep)
	if err != nil {
		t.Fatal(err)
	}
	streamed, err := decodeUsage(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep, streamed) {
		t.Errorf("streamed:\n%+v\nwritten:\n%+v", streamed, rep)
	}
	for _, bad := range []string{
		`{"v":2,"instances":[]}`,
		`{"v":1,"instances":[{"id":"a","start":"2026-03-02T00:00:00Z","busy":[[0.5]]}]}`,
		`{"v":1,"instances":[{"id":"a","start":"2026-03-02T00:00:00Z","busy":[[1,2]]}]}`,
		`{"v":1,"instances":[{"id":"a","start":"2026-03-02T00:00:00Z","busy":[[1,2,3,4]]}]}`,
		`{"v":1,"instances":[{"id":"a","start":"2026-03-02T00:00:00Z","busy":[[1.5,2,0.3]]}]}`,
		`{"v":1,"instances":[{"id":"a","start":"2026-03-02T00:00:00Z","busy":[[1,2,x]]}]}`,
		`{"v":1,"instances":[{"id":"a","start":"2026-03-02T00:00:00Z","busy":[[1,2,0.3]`,
	} {
		if _, err := decodeUsage(bad); err == nil {
			t.Errorf("%s: read; want it refused", bad)
		}
	}
}

// BenchmarkLoadHugeKeptUsage reads a kept report of 12.8 million samples
// (about 80 MB, as an uncapped gpumarket could write) from the ledger.
func BenchmarkLoadHugeKeptUsage(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := hugeKeptBody(64, 200_000)
	if _, err := s.db.Exec(`INSERT INTO usage_kept (row_id, read_at, report) VALUES ('r', ?, ?)`, fmtTime(at(1)), body); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(body))/1e6, "MB-kept")
	b.ResetTimer()
	for b.Loop() {
		rep, _, ok, err := s.LoadUsage(context.Background(), "r")
		if err != nil || !ok || countSamples(rep) > maxKeptSamples {
			b.Fatal(ok, err, countSamples(rep))
		}
	}
}
