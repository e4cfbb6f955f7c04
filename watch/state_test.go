package watch

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/sqlitedb"
	"github.com/gpumarket/gpumarket/internal/testutil"
	"github.com/gpumarket/gpumarket/ledger"
)

// usedState makes a watch state that has told an alert and returns its
// bytes, checkpointed into the main file.
func usedState(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	st := openState(t, dir)
	e, err := New(Options{State: st, Now: newClock(now).Now, Rules: validRules(t, config.Notify{}, spotRule("cheap", "p5.48xlarge", "us-west-2", "", 20, 0))})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 { // a few pages of alerts
		p := 10.0
		if i%2 == 1 {
			p = 30
		}
		e.evalSnapshot(context.Background(), snapshotOf(now, map[domain.Pool]float64{p5("us-west-2a"): p}))
	}
	if _, err := st.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	st.Close()
	b, err := os.ReadFile(filepath.Join(dir, StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A damaged, emptied or foreign watch.db stopped the TUI, serve and
// watch ("file is not a database"). It is moved aside, as it was, and a
// new state made.
func TestUnusableStateMovedAsideAndRebuilt(t *testing.T) {
	whole := usedState(t)
	random := make([]byte, 20000)
	for i := range random {
		random[i] = byte(i*167 + i/11)
	}
	for _, tc := range []struct {
		name string
		make func(path string) error
		why  string
	}{
		{"random bytes", func(p string) error { return os.WriteFile(p, random, 0o600) }, "is not a SQLite database"},
		{"a directory", func(p string) error { return os.Mkdir(p, 0o700) }, "is a directory"},
		{"half of it", func(p string) error { return os.WriteFile(p, whole[:len(whole)/2], 0o600) }, "is damaged"},
		{"empty", func(p string) error { return os.WriteFile(p, nil, 0o600) }, "is empty (0 bytes)"},
		{"another program's", func(p string) error {
			db, err := sql.Open("sqlite", "file:"+p)
			if err != nil {
				return err
			}
			defer db.Close()
			_, err = db.Exec(`CREATE TABLE rules (name TEXT)`)
			return err
		}, "holds other tables (rules)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, StateFileName)
			if err := tc.make(path); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)
			st, err := OpenState(dir)
			if err != nil {
				t.Fatalf("OpenState: %v", err)
			}
			defer st.Close()
			r := st.Rebuilt()
			if r == nil || !strings.HasPrefix(r.Path, path+".corrupt-") || !strings.Contains(r.Reason.Error(), tc.why) {
				t.Fatalf("rebuilt %+v; want moved to %s.corrupt-… saying %q", r, path, tc.why)
			}
			if after, _ := os.ReadFile(r.Path); !bytes.Equal(before, after) {
				t.Error("what was moved aside is not the file found")
			}
			if _, _, err := st.decide(context.Background(), "r", "fp", time.Now(), nil, func(*ruleState) *Alert { return &Alert{} }); err != nil {
				t.Fatalf("the new state does not take a decision: %v", err)
			}
			st.Close()
			again := openState(t, dir)
			if again.Rebuilt() != nil {
				t.Fatalf("the rebuilt state is not used at the next open: %v", again.Rebuilt().Reason)
			}
		})
	}
}

// A state of a newer gpumarket is refused, not moved aside (it is not
// damaged); one of this version opens.
func TestNewerStateRefused(t *testing.T) {
	dir := t.TempDir()
	openState(t, dir).Close()
	path := filepath.Join(dir, StateFileName)
	db, _ := sql.Open("sqlite", "file:"+path)
	if _, err := db.Exec(`INSERT INTO migrations VALUES (?, 'later')`, len(stateMigrations)+1); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err := OpenState(dir)
	if sqlitedb.ProblemOf(err) != sqlitedb.Newer || !strings.Contains(err.Error(), "upgrade gpumarket") {
		t.Fatalf("OpenState of a newer state: %v", err)
	}
	if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 0 {
		t.Fatalf("a newer state was moved aside: %v", aside)
	}
}

// After a rebuild, a rule whose condition still holds is not told again
// (it may have been before the state was lost); a crossing after that,
// or a rule made since, is.
func TestRebuiltStateTellsNothingAgain(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clk := newClock(now)
	// An hour's cooldown: what was held back starts none.
	rules := validRules(t, config.Notify{}, spotRule("cheap", "p5.48xlarge", "us-west-2", "", 20, time.Hour),
		Spec{Name: "soon", Cond: &StartsInRule{Within: config.Duration(2 * time.Hour)}})
	booked := &fakeLedger{rows: []ledger.Entry{{ID: "01B", Kind: ledger.KindBlock, Provider: "sim", State: ledger.StateScheduled, Start: now.Add(time.Hour)}}}
	below := snapshotOf(now, map[domain.Pool]float64{p5("us-west-2a"): 10})
	var log testutil.Buffer
	run := func() (*Evaluator, *State) {
		st := openState(t, dir)
		e, err := New(Options{State: st, Now: clk.Now, Rules: rules, Ledger: booked, Logger: logger(&log)})
		if err != nil {
			t.Fatal(err)
		}
		e.evalSnapshot(context.Background(), below)
		e.tick(context.Background(), true)
		return e, st
	}
	e, st := run()
	if e.fired.Load() != 2 {
		t.Fatalf("first run fired %d, want the spot and the starts_in alert", e.fired.Load())
	}
	st.Close()
	// The state is lost (emptied); the next start rebuilds it.
	path := filepath.Join(dir, StateFileName)
	for _, ext := range []string{"-wal", "-shm"} {
		os.Remove(path + ext)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e, _ = run()
	if n := e.fired.Load(); n != 0 {
		t.Fatalf("after the rebuild %d alerts were told again", n)
	}
	if c := strings.Count(log.String(), "not told: the watch state was rebuilt"); c != 2 {
		t.Errorf("%d log lines say what was held back, want 2:\n%s", c, log.String())
	}
	// A new crossing is told.
	e.evalSnapshot(context.Background(), snapshotOf(now, map[domain.Pool]float64{p5("us-west-2a"): 30}))
	e.evalSnapshot(context.Background(), below)
	if n := e.fired.Load(); n != 1 {
		t.Fatalf("a crossing after the rebuild: fired %d, want 1", n)
	}
	// So is a row that comes within the window later.
	booked.rows = append(booked.rows, ledger.Entry{ID: "01C", Kind: ledger.KindBlock, Provider: "sim", State: ledger.StateScheduled, Start: now.Add(90 * time.Minute)})
	e.tick(context.Background(), true)
	if n := e.fired.Load(); n != 2 {
		t.Fatalf("a new booked row after the rebuild: fired %d, want 2", n)
	}
	if as := e.Alerts(0); len(as) != 2 || !strings.Contains(as[1].Text, "01C") {
		t.Fatalf("alerts %+v", as)
	}
}

// A rule made after the rebuild is new: its condition is told at once.
func TestRuleMadeAfterRebuildTells(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StateFileName)
	if err := os.WriteFile(path, []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	st := openState(t, dir)
	if st.Rebuilt() == nil {
		t.Fatal("not rebuilt")
	}
	e, err := New(Options{State: st, Now: newClock(now).Now, RulesFile: filepath.Join(dir, RulesFileName)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddRule(context.Background(), spotRule("cheap", "p5.48xlarge", "us-west-2", "", 20, 0)); err != nil {
		t.Fatal(err)
	}
	e.evalSnapshot(context.Background(), snapshotOf(now, map[domain.Pool]float64{p5("us-west-2a"): 10}))
	if n := e.fired.Load(); n != 1 {
		t.Fatalf("a rule made after the rebuild fired %d, want 1", n)
	}
}

// A delivery claimed but not started (shutdown came first) goes back
// pending, its attempt not counted: a notifier allowed no retry still
// gets its one attempt.
func TestReleaseDoesNotCountTheAttempt(t *testing.T) {
	st := openState(t, t.TempDir())
	ctx := context.Background()
	now := time.Now() // deliveries are due in real time
	if _, _, err := st.decide(ctx, "r", "f", now, []string{TellWebhook}, func(*ruleState) *Alert {
		return &Alert{Rule: "r", Tell: []string{TellWebhook}}
	}); err != nil {
		t.Fatal(err)
	}
	ds, err := st.claim(ctx, []string{TellWebhook}, "me", time.Now(), time.Minute, 10)
	if err != nil || len(ds) != 1 || ds[0].attempts != 1 {
		t.Fatalf("claimed %+v, %v", ds, err)
	}
	if err := st.release(ctx, ds[0], "me"); err != nil {
		t.Fatal(err)
	}
	recs, _ := st.Recent(ctx, 1)
	if d := recs[0].Deliveries; len(d) != 1 || d[0].State != DeliveryPending || d[0].Attempts != 0 {
		t.Fatalf("released delivery %+v, want pending with no attempt counted", d)
	}
	if again, _ := st.claim(ctx, []string{TellWebhook}, "me", time.Now(), time.Minute, 10); len(again) != 1 || again[0].attempts != 1 {
		t.Fatalf("claimed again %+v: want its first attempt", again)
	}
}
