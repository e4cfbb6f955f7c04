package feed

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/sqlitedb"

	"github.com/gpumarket/gpumarket/series"
)

var t0 = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)

func keyOf(region, zone, typ string) domain.PoolKey {
	return domain.PoolKey{Provider: "aws", Region: region, Zone: zone, InstanceType: typ}
}

func descOf(k domain.PoolKey) domain.Pool {
	od := 98.32
	return domain.Pool{Provider: k.Provider, Cloud: domain.CloudAWS, Region: k.Region, Zone: k.Zone, InstanceType: k.InstanceType,
		GPU: domain.GPUSpec{Model: "H100", Count: 8, MemoryGiB: 80}, OnDemandUSDHour: &od}
}

// hourly returns a run of hourly points over [from, to).
func hourly(k domain.PoolKey, from, to time.Time, base float64) Run {
	r := Run{Pool: k}
	for t := from; t.Before(to); t = t.Add(time.Hour) {
		r.At = append(r.At, t.Unix())
		r.USD = append(r.USD, base+float64(t.Sub(from)/time.Hour)/100)
	}
	return r
}

func open(t testing.TB, dir string, opt HistoryOptions) *History {
	t.Helper()
	c, err := Open(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func mustFlush(t testing.TB, c *History) {
	t.Helper()
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
}

// What was saved comes back after a restart: descriptions, every point of
// the asked span with the one in force at its start, and the region's
// span; a later value for the same second wins, and points arrive in any
// order (AWS sends its pages newest first).
func TestSaveLoadAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, HistoryOptions{})
	k := keyOf("us-east-1", "us-east-1a", "p5.48xlarge")
	newer := hourly(k, t0.Add(48*time.Hour), t0.Add(72*time.Hour), 30)
	older := hourly(k, t0, t0.Add(48*time.Hour), 20)
	c.Save(Batch{Provider: "aws", Pools: []domain.Pool{descOf(k)}, Runs: []Run{newer}})
	c.Save(Batch{Provider: "aws", Runs: []Run{older}})
	c.Save(Batch{Provider: "aws", Runs: []Run{{Pool: k, At: []int64{t0.Add(50 * time.Hour).Unix()}, USD: []float64{99}}}})
	c.Save(Batch{Provider: "aws", Spans: []Span{{Region: "us-east-1", From: t0, Until: t0.Add(72 * time.Hour)}}})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c = open(t, dir, HistoryOptions{})
	from := t0.Add(30*time.Hour + 30*time.Minute)
	got, err := c.Load(context.Background(), "aws", domain.Query{}, from, t0.Add(60*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Pools) != 1 || got.Pools[0].Key() != k || got.Pools[0].OnDemandUSDHour == nil || *got.Pools[0].OnDemandUSDHour != 98.32 || got.Pools[0].GPU.Model != "H100" {
		t.Fatalf("pools = %+v", got.Pools)
	}
	s := got.History[0]
	// 30:00 (in force at 30:30) … 60:00: 31 points.
	if first, _ := s.Point(0); s.Len() != 31 || first != t0.Add(30*time.Hour).Unix() || pointAt(s, 30) != t0.Add(60*time.Hour).Unix() {
		t.Fatalf("series: %d points from %v to %v", s.Len(), time.Unix(first, 0).UTC(), time.Unix(pointAt(s, s.Len()-1), 0).UTC())
	}
	if p, _ := s.PriceAt(t0.Add(50 * time.Hour).Unix()); p != 99 {
		t.Errorf("the later value for 50:00 is 99, got %v", p)
	}
	if p, _ := s.PriceAt(t0.Add(30 * time.Hour).Unix()); p != 20.30 {
		t.Errorf("price at 30:00 = %v, want 20.30", p)
	}
	if len(got.Spans) != 1 || !got.Spans[0].From.Equal(t0) || !got.Spans[0].Until.Equal(t0.Add(72*time.Hour)) {
		t.Fatalf("spans = %+v", got.Spans)
	}
	// The in-force point at a from in a day with no point of its own
	// comes from an older chunk.
	got, err = c.Load(context.Background(), "aws", domain.Query{}, t0.Add(100*time.Hour), t0.Add(120*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if s := got.History[0]; s.Len() != 1 || pointAt(s, 0) != t0.Add(71*time.Hour).Unix() {
		t.Fatalf("after the last point: %+v, want the last point alone", s)
	}
}

// A span joins the region's span when they touch or overlap; a later one
// with a hole between replaces it (the hole was never fetched); spans are
// kept per GPU filter, and a query uses one whose filter holds every GPU
// it wants.
func TestSpans(t *testing.T) {
	c := open(t, t.TempDir(), HistoryOptions{})
	save := func(region string, gpus []string, from, until time.Duration) {
		c.Save(Batch{Provider: "aws", Spans: []Span{{Region: region, GPUs: gpus, From: t0.Add(from), Until: t0.Add(until)}}})
	}
	save("r1", nil, 0, 10*time.Hour)
	save("r1", nil, 10*time.Hour, 11*time.Hour)          // touches: joins
	save("r1", nil, -5*time.Hour, time.Hour)             // overlaps: joins
	save("r2", nil, 0, 10*time.Hour)                     //
	save("r2", nil, 12*time.Hour, 13*time.Hour)          // a hole: replaces
	save("r2", nil, -10*time.Hour, -9*time.Hour)         // older, apart: dropped
	save("r3", []string{"H100"}, 0, 10*time.Hour)        // only H100 pools
	save("r3", []string{"A100", "H100"}, 0, 5*time.Hour) // another filter
	// A hub's fetches end and start at the same instant, fractions of
	// a second and all: their spans join.
	frac := 700 * time.Millisecond
	save("r4", nil, 300*time.Millisecond, 10*time.Second+frac)
	save("r4", nil, 10*time.Second+frac, 40*time.Second+200*time.Millisecond)
	mustFlush(t, c)

	spans := func(q domain.Query) map[string][2]time.Duration {
		got, err := c.Load(context.Background(), "aws", q, t0, t0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][2]time.Duration{}
		for _, s := range got.Spans {
			out[s.Region] = [2]time.Duration{s.From.Sub(t0), s.Until.Sub(t0)}
		}
		return out
	}
	all := spans(domain.Query{})
	if all["r1"] != [2]time.Duration{-5 * time.Hour, 11 * time.Hour} {
		t.Errorf("r1 = %v, want [-5h, 11h]", all["r1"])
	}
	if all["r2"] != [2]time.Duration{12 * time.Hour, 13 * time.Hour} {
		t.Errorf("r2 = %v, want [12h, 13h]", all["r2"])
	}
	if all["r4"] != [2]time.Duration{300 * time.Millisecond, 40*time.Second + 200*time.Millisecond} {
		t.Errorf("r4 = %v, want the two spans joined at their common instant", all["r4"])
	}
	if _, ok := all["r3"]; ok {
		t.Errorf("r3 was fetched for some GPUs only, yet covers a query for every GPU: %v", all["r3"])
	}
	h100 := spans(domain.Query{GPUs: []string{"H100"}})
	if h100["r3"] != [2]time.Duration{0, 10 * time.Hour} {
		t.Errorf("r3 for H100 = %v, want the H100 span reaching latest [0, 10h]", h100["r3"])
	}
	a100 := spans(domain.Query{GPUs: []string{"A100"}})
	if a100["r3"] != [2]time.Duration{0, 5 * time.Hour} {
		t.Errorf("r3 for A100 = %v, want [0, 5h]", a100["r3"])
	}
	if _, ok := spans(domain.Query{GPUs: []string{"L4"}})["r3"]; ok {
		t.Error("r3 covers L4, which it was never fetched for")
	}
	if r := spans(domain.Query{Regions: []string{"r2"}}); len(r) != 1 {
		t.Errorf("a query for r2 got spans of %v", r)
	}
}

// Load returns only the pools of covered regions that the query's GPUs
// select.
func TestLoadFiltersPools(t *testing.T) {
	c := open(t, t.TempDir(), HistoryOptions{})
	h := keyOf("r1", "r1a", "p5.48xlarge")
	a := keyOf("r1", "r1a", "p4d.24xlarge")
	x := keyOf("r2", "r2a", "p5.48xlarge") // r2 has no span
	pa := descOf(a)
	pa.GPU.Model = "A100"
	c.Save(Batch{Provider: "aws", Pools: []domain.Pool{descOf(h), pa, descOf(x)},
		Runs: []Run{hourly(h, t0, t0.Add(3*time.Hour), 1), hourly(a, t0, t0.Add(3*time.Hour), 2), hourly(x, t0, t0.Add(3*time.Hour), 3)}})
	c.Save(Batch{Provider: "aws", Spans: []Span{{Region: "r1", From: t0, Until: t0.Add(3 * time.Hour)}}})
	mustFlush(t, c)
	got, err := c.Load(context.Background(), "aws", domain.Query{GPUs: []string{"H100"}}, t0, t0.Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Pools) != 1 || got.Pools[0].Key() != h || got.History[0].Len() != 3 {
		t.Fatalf("pools = %+v", got.Pools)
	}
	if got, _ := c.Load(context.Background(), "azure", domain.Query{}, t0, t0.Add(3*time.Hour)); len(got.Pools)+len(got.Spans) != 0 {
		t.Fatalf("another provider's cache: %+v", got)
	}
}

// The trim keeps the retention: older chunks go, each pool's price in
// force at the cut stays, spans start at the cut at the earliest.
func TestTrimKeepsRetention(t *testing.T) {
	now := t0.Add(30 * 24 * time.Hour)
	c := open(t, t.TempDir(), HistoryOptions{Retention: 7 * 24 * time.Hour, Now: func() time.Time { return now }})
	k := keyOf("r1", "r1a", "p5.48xlarge")
	calm := keyOf("r1", "r1b", "p5.48xlarge") // one price, 20 days old
	c.Save(Batch{Provider: "aws", Pools: []domain.Pool{descOf(k), descOf(calm)},
		Runs: []Run{hourly(k, t0, now, 10), {Pool: calm, At: []int64{t0.Add(10 * 24 * time.Hour).Unix()}, USD: []float64{7}}}})
	c.Save(Batch{Provider: "aws", Spans: []Span{
		{Region: "r1", From: t0, Until: now},
		{Region: "r9", From: t0, Until: t0.Add(24 * time.Hour)}, // ends before the cut
	}})
	mustFlush(t, c)
	before, _ := Stat(context.Background(), filepath.Dir(c.Path()))
	c.Trim(now)
	mustFlush(t, c)
	cut := now.Add(-7 * 24 * time.Hour)
	got, err := c.Load(context.Background(), "aws", domain.Query{}, t0, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spans) != 1 || got.Spans[0].Region != "r1" || !got.Spans[0].From.Equal(cut) {
		t.Fatalf("spans after the trim = %+v, want r1 from %s", got.Spans, cut)
	}
	if len(got.Pools) != 2 {
		t.Fatalf("after the trim %d pools are left, want both (the calm one by its price in force)", len(got.Pools))
	}
	for i, p := range got.Pools {
		s := got.History[i]
		if s.Len() == 0 || time.Unix(pointAt(s, 0), 0).After(cut) {
			t.Fatalf("%s lost its price in force at the cut: %d points", p.Key(), s.Len())
		}
		if time.Unix(pointAt(s, 0), 0).Before(cut.Add(-25*time.Hour)) && s.Len() > 1 {
			t.Errorf("%s keeps points from %s, before the cut's day", p.Key(), time.Unix(pointAt(s, 0), 0).UTC())
		}
		if p.Key() == calm {
			if v, _ := s.PriceAt(cut.Unix()); v != 7 {
				t.Errorf("calm pool's price at the cut = %v, want 7", v)
			}
		}
	}
	after, _ := Stat(context.Background(), filepath.Dir(c.Path()))
	if after.Points >= before.Points || after.Points > 8*24+2+24 {
		t.Errorf("points %d → %d after trimming to 7 days", before.Points, after.Points)
	}
}

// Save never waits for the disk: with the file locked by another writer,
// a thousand events are queued at once, and they are written when the
// lock goes.
func TestSaveDoesNotWaitForTheDisk(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, HistoryOptions{FlushEvery: time.Millisecond})
	other, err := sql.Open("sqlite", "file:"+Path(dir)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	k := keyOf("r1", "r1a", "p5.48xlarge")
	done := make(chan struct{})
	go func() {
		for i := 0; i < 1000; i++ {
			c.Save(Batch{Provider: "aws", Runs: []Run{{Pool: k, At: []int64{t0.Unix() + int64(i)}, USD: []float64{1}}}})
		}
		close(done)
	}()
	<-done // the test's deadline bounds this: Save must not block on the lock
	if _, err := conn.ExecContext(context.Background(), "COMMIT"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	mustFlush(t, c)
	info, err := Stat(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Points != 1000 {
		t.Fatalf("%d points written, want 1000", info.Points)
	}
}

// writeLedger makes a stand-in for the ledger (another SQLite file of
// the data dir) and returns its bytes.
func writeLedger(t *testing.T, dir string) []byte {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, ledgerFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE bookings (id TEXT PRIMARY KEY); INSERT INTO bookings VALUES ('b1')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	b, err := os.ReadFile(filepath.Join(dir, ledgerFile))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const ledgerFile = "gpumarket.db"

// A file that is not a readable history cache is renamed aside, with its
// WAL, and a fresh cache is made; the ledger beside it is not touched.
func TestUnreadableFileMovedAside(t *testing.T) {
	future := func(t *testing.T, path string) {
		c, err := OpenPath(path, HistoryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		db, _ := sql.Open("sqlite", "file:"+path)
		defer db.Close()
		if _, err := db.Exec(`UPDATE meta SET value = '99' WHERE key = 'version'`); err != nil {
			t.Fatal(err)
		}
	}
	foreign := func(t *testing.T, path string) {
		db, _ := sql.Open("sqlite", "file:"+path)
		defer db.Close()
		if _, err := db.Exec(`CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO photos (name) VALUES ('cat.jpg')`); err != nil {
			t.Fatal(err)
		}
	}
	foreignMeta := func(t *testing.T, path string) {
		db, _ := sql.Open("sqlite", "file:"+path)
		defer db.Close()
		if _, err := db.Exec(`CREATE TABLE meta (a INTEGER, b BLOB)`); err != nil {
			t.Fatal(err)
		}
	}
	garbage := func(t *testing.T, path string) {
		if err := os.WriteFile(path, bytes.Repeat([]byte("not a database at all "), 500), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	theLedger := func(t *testing.T, path string) {
		// Someone copied the ledger over the cache's name.
		b := writeLedger(t, t.TempDir())
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		make   func(*testing.T, string)
		reason string
	}{
		{"garbage bytes", garbage, "is not a SQLite database"},
		{"other tables", foreign, "other tables (photos)"},
		{"a meta table not ours", foreignMeta, "other tables (meta)"},
		{"the ledger", theLedger, "other tables"},
		{"a newer schema", future, "newer gpumarket (schema version 99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ledgerBytes := writeLedger(t, dir)
			path := Path(dir)
			tc.make(t, path)
			old, _ := os.ReadFile(path)
			now := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
			c, err := Open(dir, HistoryOptions{Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			a := c.Aside()
			if a == nil {
				t.Fatal("the file was not moved aside")
			}
			if a.Path != path+".corrupt-20261201T093000Z" || !strings.Contains(a.Reason.Error(), tc.reason) {
				t.Errorf("aside = %s: %v; want %s.corrupt-20261201T093000Z saying %q", a.Path, a.Reason, path, tc.reason)
			}
			if moved, _ := os.ReadFile(a.Path); !bytes.Equal(moved, old) {
				t.Error("the file moved aside is not the file found")
			}
			// The fresh cache works.
			k := keyOf("r1", "r1a", "p5.48xlarge")
			c.Save(Batch{Provider: "aws", Runs: []Run{hourly(k, t0, t0.Add(2*time.Hour), 1)},
				Spans: []Span{{Region: "r1", From: t0, Until: t0.Add(2 * time.Hour)}}})
			mustFlush(t, c)
			if got, err := c.Load(context.Background(), "aws", domain.Query{}, t0, t0.Add(2*time.Hour)); err != nil || len(got.Pools) != 1 {
				t.Fatalf("fresh cache: %+v, %v", got, err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, ledgerFile)); !bytes.Equal(b, ledgerBytes) {
				t.Error("the ledger changed")
			}
		})
	}
}

// Stat (cache info) reports a file that is not a cache and leaves it be.
func TestStatLeavesForeignFileBe(t *testing.T) {
	dir := t.TempDir()
	if _, err := Stat(context.Background(), dir); !errors.Is(err, ErrNoCache) {
		t.Fatalf("no file: %v", err)
	}
	path := Path(dir)
	os.WriteFile(path, []byte("garbage garbage garbage garbage garbage garbage garbage garbage garbage garbage garbage"), 0o600)
	_, err := Stat(context.Background(), dir)
	if sqlitedb.ProblemOf(err) != sqlitedb.NotSQLite {
		t.Fatalf("garbage: %v", err)
	}
	if b, _ := os.ReadFile(path); !bytes.HasPrefix(b, []byte("garbage")) {
		t.Fatal("Stat changed the file")
	}
	if m, _ := filepath.Glob(path + ".corrupt-*"); len(m) != 0 {
		t.Fatalf("Stat moved the file: %v", m)
	}
}

// A cache damaged inside (a chunk overwritten) is found out when it is
// read: Load fails rather than returning made-up prices.
func TestDamagedChunkIsAnError(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, HistoryOptions{})
	k := keyOf("r1", "r1a", "p5.48xlarge")
	c.Save(Batch{Provider: "aws", Runs: []Run{hourly(k, t0, t0.Add(48*time.Hour), 1)},
		Spans: []Span{{Region: "r1", From: t0, Until: t0.Add(48 * time.Hour)}}})
	mustFlush(t, c)
	if _, err := c.db.Exec(`UPDATE chunks SET data = x'01ff' WHERE day = ?`, dayOf(t0.Unix())); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(context.Background(), "aws", domain.Query{}, t0, t0.Add(48*time.Hour)); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Load of a damaged chunk: %v", err)
	}
	// Nothing more is written to it, and at Close it is moved aside: the
	// next start makes a fresh cache rather than trip over it again.
	c.Save(Batch{Provider: "aws", Spans: []Span{{Region: "r1", From: t0, Until: t0.Add(72 * time.Hour)}}})
	if err := c.Flush(); err == nil {
		t.Error("a damaged cache took more writes")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(Path(dir) + ".corrupt-*"); len(m) != 1 {
		t.Fatalf("moved aside: %v", m)
	}
	c = open(t, dir, HistoryOptions{})
	if got, err := c.Load(context.Background(), "aws", domain.Query{}, t0, t0.Add(48*time.Hour)); err != nil || len(got.Spans) != 0 {
		t.Fatalf("the next start: %+v, %v; want a fresh cache", got, err)
	}
}

// Remove deletes the cache, its WAL and the copies moved aside, and
// nothing else.
func TestRemove(t *testing.T) {
	dir := t.TempDir()
	ledgerBytes := writeLedger(t, dir)
	c := open(t, dir, HistoryOptions{})
	c.Save(Batch{Provider: "aws", Runs: []Run{hourly(keyOf("r1", "r1a", "p5.48xlarge"), t0, t0.Add(2*time.Hour), 1)}})
	mustFlush(t, c)
	c.Close()
	os.WriteFile(Path(dir)+".corrupt-20260101T000000Z", []byte("x"), 0o600)
	removed, err := Remove(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) < 2 {
		t.Fatalf("removed %v", removed)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 1 || filepath.Base(left[0]) != ledgerFile {
		t.Fatalf("left %v, want the ledger alone", left)
	}
	if b, _ := os.ReadFile(left[0]); !bytes.Equal(b, ledgerBytes) {
		t.Error("the ledger changed")
	}
	if removed, err := Remove(dir); err != nil || len(removed) != 0 {
		t.Fatalf("second Remove: %v, %v", removed, err)
	}
}

// pointAt is the time of a series' i-th point.
func pointAt(s series.Series, i int) int64 {
	t, _ := s.Point(i)
	return t
}
