package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// v2Ledger writes a ledger of schema version 2, the schema before usage
// was kept, as that gpumarket made it (its two migrations), holding
// rows of every kind with every column set, and a cached offering.
func v2Ledger(t *testing.T, dir string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName)+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);` + migrations[0] + `;` + migrations[1] + `;
		INSERT INTO migrations VALUES (1, '2026-11-01T00:00:00.000000000Z'), (2, '2026-11-02T00:00:00.000000000Z');
		INSERT INTO ledger (id, kind, provider, cloud, region, zone, instance_type, instance_count, gpu_count, start_at, end_at,
			cost_usd, cost_note, state, provider_ref, actor, created_at, updated_at, error, request, idem_key, note, owner, heartbeat_at) VALUES
			('01A', 'block', 'aws', 'aws', 'us-east-1', 'us-east-1a', 'p5.48xlarge', 2, 16, '2026-11-03T11:30:00.000000000Z', '2026-11-05T11:30:00.000000000Z',
			 4000.5, '', 'ended', 'cr-0123456789abcdef0', 'alice@lab', '2026-11-01T09:00:00.000000000Z', '2026-11-05T11:31:00.000000000Z', '', '{"offering":"cb-1"}', 'cb-1', '', '', ''),
			('01B', 'fleet', 'aws', 'aws', 'us-east-1', '', 'g6.xlarge', 30, 30, '2026-11-04T14:00:00.000000000Z', '',
			 12.5, 'estimate: first hour at current prices', 'deleted', 'fleet-1', 'bob@lab', '2026-11-04T13:59:00.000000000Z', '2026-11-04T17:00:00.000000000Z', '', '{"target":30}', 'tok-1', 'deleted by bob@lab', 'host/12/abc', '2026-11-04T17:00:00.000000000Z'),
			('01C', 'reservation', 'azure', 'azure', 'eastus', '1', 'Standard_NC24ads_A100_v4', 1, 1, '2026-11-06T00:00:00.000000000Z', '2026-11-07T00:00:00.000000000Z',
			 88, '', 'failed', '', 'carol@lab', '2026-11-05T00:00:00.000000000Z', '2026-11-05T00:00:10.000000000Z', 'QuotaExceeded', '{}', 'res-1', '', '', '');
		INSERT INTO offerings VALUES ('cb-9', 'aws', '{"id":"cb-9"}', '{"gpu":"H100"}', '2026-11-01T08:00:00.000000000Z', '2026-11-03T11:30:00.000000000Z');`)
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrationToKeptUsageLosesNothing: a ledger of the previous schema
// opens, gains the usage_kept table, and every row reads as it did —
// every column of every row, and the offering cache — before and after.
// A ledger of schema 1 migrates through both steps.
func TestMigrationToKeptUsageLosesNothing(t *testing.T) {
	ctx := context.Background()
	for name, make := range map[string]func(*testing.T, string){"schema 2": v2Ledger, "schema 1": v1Ledger} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			make(t, dir)
			ro, err := OpenReadOnly(filepath.Join(dir, FileName))
			if err != nil {
				t.Fatal(err)
			}
			before, err := ro.List(ctx)
			ro.Close()
			if err != nil || len(before) < 2 {
				t.Fatalf("the old ledger: %d rows, %v", len(before), err)
			}
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			after, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if name == "schema 1" {
				// Migration 2 moves delete notes out of error (its own
				// test); compare what it leaves alone.
				for i := range before {
					before[i].Error, before[i].Note = after[i].Error, after[i].Note
				}
			}
			if fmt.Sprintf("%+v", before) != fmt.Sprintf("%+v", after) { // NaN, an unknown figure, is not DeepEqual to itself
				t.Errorf("rows changed by the migration:\nbefore %+v\nafter  %+v", before, after)
			}
			if name == "schema 2" {
				if _, err := s.Offering(ctx, "cb-9", time.Date(2026, 11, 1, 8, 30, 0, 0, time.UTC)); err != nil {
					t.Errorf("the cached offering: %v", err)
				}
			}
			var v int
			if err := s.db.QueryRow(`SELECT MAX(version) FROM migrations`).Scan(&v); err != nil || v != len(migrations) || v < 3 {
				t.Errorf("schema version %d (%v), want %d", v, err, len(migrations))
			}
			if _, _, ok, err := s.LoadUsage(ctx, "01A"); ok || err != nil {
				t.Errorf("usage kept after the migration: %v %v, want none", ok, err)
			}
			rep := sampleReport()
			if err := s.SaveUsage(ctx, "01A", rep, time.Date(2026, 11, 5, 11, 0, 0, 0, time.UTC)); err != nil {
				t.Fatal(err)
			}
			if got, _, ok, err := s.LoadUsage(ctx, "01A"); !ok || err != nil || !sameReport(got, rep) {
				t.Errorf("usage kept on the migrated ledger: %v %v", ok, err)
			}
		})
	}
}

// sampleReport has what a report can hold: runs of one id, a running
// instance, an interruption, a last-seen end, sub-second times, hourly
// samples in a row, a gap, a change of period, and a partial last hour.
func sampleReport() domain.UsageReport {
	t0 := time.Date(2026, 11, 4, 14, 0, 0, 123456789, time.UTC)
	var hourly []domain.BusySample
	for h := range 5 {
		hourly = append(hourly, domain.BusySample{At: t0.Add(time.Duration(h) * time.Hour), Period: time.Hour, Share: 0.1 * float64(h)})
	}
	hourly = append(hourly,
		domain.BusySample{At: t0.Add(7 * time.Hour), Period: time.Hour, Share: 0.37666666666666665},
		domain.BusySample{At: t0.Add(8 * time.Hour), Period: 5 * time.Minute, Share: 1},
		domain.BusySample{At: t0.Add(8*time.Hour + 5*time.Minute), Period: 17*time.Minute + 3*time.Nanosecond, Share: 0})
	return domain.UsageReport{Source: "CloudWatch CWAgent nvidia_smi_utilization_gpu", Note: "CloudWatch: 2 instances without datapoints",
		InterruptionsUnknown: true, Instances: []domain.InstanceUsage{
			{ID: "vm-1", InstanceType: "Standard_NC24ads_A100_v4", Zone: "1", Start: t0, End: t0.Add(4 * time.Hour), Busy: hourly[:4]},
			{ID: "vm-1", InstanceType: "Standard_NC24ads_A100_v4", Zone: "1", Start: t0.Add(6 * time.Hour), Busy: hourly[5:]},
			{ID: "i-2", InstanceType: "g6.xlarge", Zone: "us-east-1b", Spot: true, Start: t0, End: t0.Add(90 * time.Minute), Interrupted: true},
			{ID: "i-3", Start: t0, End: t0.Add(3 * time.Hour), EndLastSeen: true, Busy: hourly[:3]},
		}}
}

// sameReport compares reports by what they mean (times by instant).
func sameReport(a, b domain.UsageReport) bool {
	if a.Source != b.Source || a.Note != b.Note || a.InterruptionsUnknown != b.InterruptionsUnknown || len(a.Instances) != len(b.Instances) {
		return false
	}
	for i, x := range a.Instances {
		y := b.Instances[i]
		if x.ID != y.ID || x.InstanceType != y.InstanceType || x.Zone != y.Zone || x.Spot != y.Spot || !x.Start.Equal(y.Start) ||
			!x.End.Equal(y.End) || x.Interrupted != y.Interrupted || x.EndLastSeen != y.EndLastSeen || len(x.Busy) != len(y.Busy) {
			return false
		}
		for j, s := range x.Busy {
			if !s.At.Equal(y.Busy[j].At) || s.Period != y.Busy[j].Period || s.Share != y.Busy[j].Share {
				return false
			}
		}
	}
	return true
}

// TestUsageKeptRoundTrip: a report is kept exactly (times to the
// nanosecond: a sample is matched by its start), a later read replaces
// it, and an older one does not.
func TestUsageKeptRoundTrip(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, _, ok, err := s.LoadUsage(ctx, "01A"); ok || err != nil {
		t.Fatalf("nothing kept yet: %v %v", ok, err)
	}
	rep := sampleReport()
	readAt := time.Date(2026, 11, 5, 11, 0, 0, 5, time.UTC)
	if err := s.SaveUsage(ctx, "01A", rep, readAt); err != nil {
		t.Fatal(err)
	}
	got, at, ok, err := s.LoadUsage(ctx, "01A")
	if !ok || err != nil || !at.Equal(readAt) || !sameReport(got, rep) {
		t.Fatalf("round trip: ok %v err %v at %v\ngot  %+v\nwant %+v", ok, err, at, got, rep)
	}
	newer := domain.UsageReport{Source: "newer"}
	if err := s.SaveUsage(ctx, "01A", newer, readAt.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveUsage(ctx, "01A", rep, readAt.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, at, _, _ := s.LoadUsage(ctx, "01A"); got.Source != "newer" || !at.Equal(readAt.Add(time.Minute)) {
		t.Errorf("an older read was saved over a newer one: %q at %v", got.Source, at)
	}
	// A share that is no number is no measurement: it is left out, and
	// the samples after it keep their times.
	odd := domain.UsageReport{Instances: []domain.InstanceUsage{{ID: "i-1", Start: readAt, Busy: []domain.BusySample{
		{At: readAt, Period: time.Hour, Share: 0.5}, {At: readAt.Add(time.Hour), Period: time.Hour, Share: math.NaN()},
		{At: readAt.Add(2 * time.Hour), Period: time.Hour, Share: 0.25}}}}}
	if err := s.SaveUsage(ctx, "01B", odd, readAt); err != nil {
		t.Fatal(err)
	}
	got, _, _, err = s.LoadUsage(ctx, "01B")
	if err != nil || len(got.Instances) != 1 || len(got.Instances[0].Busy) != 2 || !got.Instances[0].Busy[1].At.Equal(readAt.Add(2*time.Hour)) {
		t.Errorf("NaN share: %+v %v", got, err)
	}
}

// TestUsageKeptReadOnly: a read-only ledger reads what is kept and saves
// nothing; one of the schema before usage was kept has none, and says so
// without an error.
func TestUsageKeptReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep := sampleReport()
	at := time.Date(2026, 11, 5, 11, 0, 0, 0, time.UTC)
	if err := w.SaveUsage(ctx, "01A", rep, at); err != nil {
		t.Fatal(err)
	}
	w.Close()
	s, err := OpenReadOnly(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, gotAt, ok, err := s.LoadUsage(ctx, "01A"); !ok || err != nil || !gotAt.Equal(at) || !sameReport(got, rep) {
		t.Errorf("read-only load: %v %v", ok, err)
	}
	if err := s.SaveUsage(ctx, "01A", domain.UsageReport{}, at.Add(time.Hour)); !errors.Is(err, ErrReadOnly) {
		t.Errorf("save on a read-only ledger: %v", err)
	}
	if got, _, _, _ := s.LoadUsage(ctx, "01A"); !sameReport(got, rep) {
		t.Error("the kept report changed under a read-only ledger")
	}

	old := t.TempDir()
	v2Ledger(t, old)
	s2, err := OpenReadOnly(filepath.Join(old, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, _, ok, err := s2.LoadUsage(ctx, "01A"); ok || err != nil {
		t.Errorf("read-only ledger of schema 2: kept %v, %v; want none and no error", ok, err)
	}
}

// fleetWeek is the report of a 64-instance fleet over a week with hourly
// samples: the size usage keeping is built for.
func fleetWeek() domain.UsageReport {
	t0 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	var rep domain.UsageReport
	rep.Source = "CloudWatch CWAgent nvidia_smi_utilization_gpu"
	for i := range 64 {
		in := domain.InstanceUsage{ID: fmt.Sprintf("i-%017x", i), InstanceType: "g6.xlarge", Zone: "us-east-1a", Spot: true,
			Start: t0.Add(time.Duration(i) * time.Second)}
		for h := range 7 * 24 {
			in.Busy = append(in.Busy, domain.BusySample{At: t0.Add(time.Duration(h) * time.Hour), Period: time.Hour,
				Share: math.Round(math.Abs(math.Sin(float64(i*h)))*1e4) / 1e4})
		}
		rep.Instances = append(rep.Instances, in)
	}
	return rep
}

// TestUsageKeptIsCompact: a week of a 64-instance fleet (10,752 hourly
// samples) is kept in under 150 kB, some 13 bytes a sample.
func TestUsageKeptIsCompact(t *testing.T) {
	b, err := encodeUsage(fleetWeek())
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 150_000 {
		t.Errorf("%d bytes for 10,752 samples, want under 150 kB", len(b))
	}
	got, err := decodeUsage(string(b))
	if err != nil || !sameReport(got, fleetWeek()) {
		t.Errorf("decode: %v", err)
	}
}

// BenchmarkKeepFleetWeek saves and loads the usage of a 64-instance fleet
// over a week with hourly samples.
func BenchmarkKeepFleetWeek(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	rep := fleetWeek()
	enc, _ := encodeUsage(rep)
	at := time.Date(2026, 11, 9, 0, 0, 0, 0, time.UTC)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.SaveUsage(ctx, "01A", rep, at.Add(time.Duration(i)*time.Second)); err != nil {
			b.Fatal(err)
		}
		if _, _, ok, err := s.LoadUsage(ctx, "01A"); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
	b.ReportMetric(float64(len(enc)), "bytes/report")
}

// A kept report of an encoding this build does not know is read as none
// (the live read stands), while a damaged one is an error that says so.
func TestKeptOfAnotherEncodingIsNone(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	for id, body := range map[string]string{"newer": `{"v":2,"instances":[]}`, "damaged": `{"v":1,"instances":[{`} {
		if _, err := s.db.Exec(`INSERT INTO usage_kept (row_id, read_at, report) VALUES (?, ?, ?)`, id, fmtTime(time.Now()), body); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, ok, err := s.LoadUsage(ctx, "newer"); ok || err != nil {
		t.Errorf("newer encoding: got ok %v, %v; want none and no error", ok, err)
	}
	if _, _, ok, err := s.LoadUsage(ctx, "damaged"); ok || err == nil {
		t.Errorf("damaged: got ok %v, %v; want an error", ok, err)
	}
}
