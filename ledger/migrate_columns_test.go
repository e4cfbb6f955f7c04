package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ledgerAtSchema writes a ledger of schema k (migrations 1..k) holding
// rows as the code of that time wrote them: fleets with their hourly
// estimate in cost_usd and "estimate: first hour at …" in cost_note (at
// unknown prices: 0 and "… unknown prices"), a block re-created at an
// unknown cost (0, "cost unknown: …"), and fleets whose schedule only
// their request held (one from before the keeper was recorded).
func ledgerAtSchema(t *testing.T, dir string, k int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName)+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ddl := `CREATE TABLE migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);`
	for v := 1; v <= k; v++ {
		ddl += migrations[v-1] + fmt.Sprintf(";\nINSERT INTO migrations VALUES (%d, '2026-11-0%dT00:00:00.000000000Z');\n", v, v)
	}
	if _, err := db.Exec(ddl); err != nil {
		t.Fatal(err)
	}
	const ts = "'2026-12-01T09:00:00.000000000Z'"
	rows := []string{
		`'F1', 'fleet', 'aws', 12.5, 'estimate: first hour at current prices in us-east-1 ($0.4167/h spot, g6.xlarge us-east-1a); a fleet bills until deleted', 'active', 'fleet-1', '{"Provider":"aws","Region":"us-east-1","TargetCapacity":30}'`,
		`'F2', 'fleet', 'aws', 0, 'estimate: first hour at unknown prices; a fleet bills until deleted', 'deleted', 'fleet-2', '{"Provider":"aws","TargetCapacity":2}'`,
		`'F3', 'fleet', 'azure', 3, 'estimate: first hour at current prices in eastus; a fleet bills until deleted', 'scheduled', '', '{"Provider":"azure","Start":"2026-12-03T14:00:00Z","End":"2026-12-03T17:00:00+01:00","Keeper":"gpumarket"}'`,
		`'F4', 'fleet', 'aws', 4, 'estimate: first hour at current prices; a fleet bills until deleted', 'active', 'fleet-4', '{"Provider":"aws","Start":"2026-12-02T14:00:00Z","End":"2026-12-02T17:00:00Z"}'`,
		`'F5', 'fleet', 'aws', 0, 'estimate: first hour at unknown prices: cost unknown: re-created from the cloud''s record', 'active', 'fleet-5', '{"Provider":"aws"}'`,
		`'B1', 'block', 'aws', 0, 'cost unknown: re-created from the cloud''s record', 'scheduled', 'cr-1', '{"id":"cb-1"}'`,
		`'B2', 'block', 'aws', 4000.5, '', 'ended', 'cr-2', '{"id":"cb-2"}'`,
	}
	for i, r := range rows {
		cols, vals := `id, kind, provider, cost_usd, cost_note, state, provider_ref, request, idem_key, created_at, updated_at, region, instance_type, instance_count`,
			r+fmt.Sprintf(", 'key-%d', %s, %s, 'us-east-1', 'g6.xlarge', 2", i, ts, ts)
		if k >= 2 {
			cols, vals = cols+", note, owner", vals+", 'schedule: gpumarket starts and deletes it', 'host/1/a'"
		}
		if _, err := db.Exec(`INSERT INTO ledger (` + cols + `) VALUES (` + vals + `)`); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMigrationToColumnsLosesNothing: on a ledger of every earlier schema,
// migration 5 moves what notes and requests held into columns — a fleet's
// hourly estimate, an unknown cost, a schedule and its keeper — and every
// other column reads as before. A read-only store reads the old file as
// the migration would copy it.
func TestMigrationToColumnsLosesNothing(t *testing.T) {
	ctx := context.Background()
	for k := 1; k < len(migrations); k++ {
		t.Run(fmt.Sprintf("schema %d", k), func(t *testing.T) {
			dir := t.TempDir()
			ledgerAtSchema(t, dir, k)
			raw := func(db *sql.DB) string {
				var b strings.Builder
				rows, err := db.Query(`SELECT id, kind, provider, cloud, region, zone, instance_type, instance_count, gpu_count, start_at, end_at,
					cost_note, state, provider_ref, actor, created_at, updated_at, error, request, idem_key FROM ledger ORDER BY id`)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				for rows.Next() {
					v := make([]any, 20)
					for i := range v {
						v[i] = new(any)
					}
					if err := rows.Scan(v...); err != nil {
						t.Fatal(err)
					}
					for _, x := range v {
						fmt.Fprintf(&b, "%v|", *(x.(*any)))
					}
					b.WriteString("\n")
				}
				return b.String()
			}
			ro, err := OpenReadOnly(filepath.Join(dir, FileName))
			if err != nil {
				t.Fatal(err)
			}
			before := raw(ro.db)
			old, err := ro.List(ctx)
			ro.Close()
			if err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if after := raw(s.db); after != before {
				t.Errorf("columns changed by the migration:\nbefore %s\nafter  %s", before, after)
			}
			rows, err := s.List(ctx)
			if err != nil || len(rows) != 7 {
				t.Fatalf("%d rows, %v", len(rows), err)
			}
			if fmt.Sprintf("%+v", old) != fmt.Sprintf("%+v", rows) {
				t.Errorf("read-only read of the old file and the migrated one differ:\n%+v\n%+v", old, rows)
			}
			by := map[string]Entry{}
			for _, r := range rows {
				by[r.ID] = r
			}
			nan := math.NaN()
			for _, c := range []struct {
				id         string
				cost, hour float64
				keeper     Keeper
				start, end time.Time
			}{
				{"F1", nan, 12.5, "", time.Time{}, time.Time{}},
				{"F2", nan, nan, "", time.Time{}, time.Time{}},
				{"F3", nan, 3, KeptByGpumarket, time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC), time.Date(2026, 12, 3, 16, 0, 0, 0, time.UTC)},
				{"F4", nan, 4, KeptByCloud, time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC), time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)},
				{"F5", nan, nan, "", time.Time{}, time.Time{}},
				{"B1", nan, nan, "", time.Time{}, time.Time{}},
				{"B2", 4000.5, nan, "", time.Time{}, time.Time{}},
			} {
				r := by[c.id]
				same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
				if !same(r.CostUSD, c.cost) || !same(r.USDHour, c.hour) || r.Schedule.Keeper != c.keeper ||
					!r.Schedule.Start.Equal(c.start) || !r.Schedule.End.Equal(c.end) {
					t.Errorf("%s: cost %v, $%v/h, schedule %+v; want %v, $%v/h, %s %v–%v", c.id, r.CostUSD, r.USDHour, r.Schedule,
						c.cost, c.hour, c.keeper, c.start, c.end)
				}
			}
			if !CostUnknown(by["F2"]) || !CostUnknown(by["B1"]) || CostUnknown(by["F1"]) || CostUnknown(by["B2"]) {
				t.Error("CostUnknown does not read the migrated columns")
			}
			// The block of unknown cost leaves its day unknown, as before.
			if spent, err := s.DaySpent(ctx, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)); err != nil || !math.IsNaN(spent) {
				t.Errorf("day spent %v, %v; want unknown", spent, err)
			}
			var v int
			if err := s.db.QueryRow(`SELECT MAX(version) FROM migrations`).Scan(&v); err != nil || v != len(migrations) {
				t.Errorf("schema version %d (%v), want %d", v, err, len(migrations))
			}
		})
	}
}
