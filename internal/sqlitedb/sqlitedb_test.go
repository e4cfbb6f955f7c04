package sqlitedb

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	ctx = context.Background()
	t0  = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
)

// notes is a small schema of two migrations.
func notes(durable bool) Schema {
	return Schema{
		Name: "notebook", Durable: durable, QuickCheck: true,
		Migrations: []string{
			`CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`,
			`ALTER TABLE notes ADD COLUMN at TEXT NOT NULL DEFAULT ''`,
		},
		Identify: func(_ context.Context, _ Querier, t map[string]bool) (string, error) {
			if t["notes"] && t["migrations"] {
				return "", nil
			}
			return "holds other tables (" + TableList(t) + ")", nil
		},
	}
}

func mustOpen(t *testing.T, path string, s Schema) *DB {
	t.Helper()
	d, err := Open(ctx, path, s, t0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// rawExec writes to a file with no checks, as another program would.
func rawExec(t *testing.T, path, stmt string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmt); err != nil {
		t.Fatal(err)
	}
}

func TestOpenCreatesThenMigratesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.db")
	s := notes(true)
	s.Migrations = s.Migrations[:1]
	d := mustOpen(t, path, s)
	if d.Version != 1 {
		t.Fatalf("version %d, want 1", d.Version)
	}
	if _, err := d.Exec(`INSERT INTO notes (body) VALUES ('kept')`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d = mustOpen(t, path, notes(true)) // a newer build adds migration 2
	var body, at string
	if err := d.QueryRow(`SELECT body, at FROM notes`).Scan(&body, &at); err != nil || body != "kept" {
		t.Fatalf("row after migration 2: %q %q %v", body, at, err)
	}
	d.Close()
	d = mustOpen(t, path, notes(true))
	var n, max int
	d.QueryRow(`SELECT COUNT(*), MAX(version) FROM migrations`).Scan(&n, &max)
	if n != 2 || max != 2 || d.Version != 2 {
		t.Fatalf("migrations table: %d rows up to %d (version %d); want each of 2 once", n, max, d.Version)
	}
}

func TestPragmas(t *testing.T) {
	for _, durable := range []bool{true, false} {
		d := mustOpen(t, filepath.Join(t.TempDir(), "n.db"), notes(durable))
		d.SetMaxOpenConns(1)
		var mode string
		var sync, fk int
		d.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
		d.QueryRow(`PRAGMA synchronous`).Scan(&sync)
		d.QueryRow(`PRAGMA foreign_keys`).Scan(&fk)
		want := 1 // NORMAL
		if durable {
			want = 2 // FULL
		}
		if mode != "wal" || sync != want || fk != 1 {
			t.Errorf("durable %v: journal %s, synchronous %d, foreign keys %d; want wal, %d, 1", durable, mode, sync, fk, want)
		}
	}
}

// wholeFile makes a notebook of a few pages and returns its bytes.
func wholeFile(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "n.db")
	d := mustOpen(t, path, notes(true))
	for i := 0; i < 300; i++ {
		if _, err := d.Exec(`INSERT INTO notes (body) VALUES (?)`, strings.Repeat("x", 200)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Each way a file can be unusable is told apart, and the file is left as
// it was found.
func TestProblemsToldApart(t *testing.T) {
	whole := wholeFile(t)
	write := func(b []byte) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	random := make([]byte, 20000)
	for i := range random {
		random[i] = byte(i*131 + i/7)
	}
	zeroed := append([]byte(nil), whole...)
	clear(zeroed[4096:8192])
	for _, tc := range []struct {
		name   string
		make   func(*testing.T, string)
		want   Problem
		reason string
	}{
		{"empty", write(nil), Emptied, "is empty (0 bytes): it is not a new notebook"},
		{"a directory", func(t *testing.T, p string) { os.Mkdir(p, 0o700) }, NotAFile, "is a directory"},
		{"random bytes", write(random), NotSQLite, "is not a SQLite database"},
		{"text", write([]byte("id,body\n1,x\n")), NotSQLite, "is not a SQLite database"},
		{"cut in half", write(whole[:len(whole)/2]), Damaged, "is damaged: SQLite cannot read it whole"},
		{"a page zeroed", write(zeroed), Damaged, "is damaged"},
		{"header only", write(whole[:100]), Damaged, "is damaged"},
		{"another program's", func(t *testing.T, p string) { rawExec(t, p, `CREATE TABLE photos (name TEXT)`) }, Foreign, "holds other tables (photos)"},
		{"no tables", func(t *testing.T, p string) { rawExec(t, p, `PRAGMA user_version = 7`) }, Foreign, "with no tables"},
		{"newer", func(t *testing.T, p string) {
			write(whole)(t, p)
			rawExec(t, p, `INSERT INTO migrations VALUES (3, 'x')`)
		}, Newer, "newer gpumarket (schema version 3; this one knows 2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "n.db")
			tc.make(t, path)
			before, _ := os.ReadFile(path)
			for how, open := range map[string]func() (*DB, error){
				"open":      func() (*DB, error) { return Open(ctx, path, notes(true), t0) },
				"read-only": func() (*DB, error) { return OpenReadOnly(ctx, path, notes(true)) },
			} {
				if how == "read-only" && tc.want == Newer {
					continue // a reader decides itself what it can read (DB.Newer)
				}
				d, err := open()
				if err == nil {
					d.Close()
					t.Fatalf("%s: opened", how)
				}
				var fe *FileError
				if !errors.As(err, &fe) || fe.Problem != tc.want || fe.Path != path || !strings.Contains(err.Error(), tc.reason) {
					t.Fatalf("%s: %v; want %s saying %q", how, err, tc.want, tc.reason)
				}
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatal("the file was changed")
			}
		})
	}
}

// A file one version ahead is refused; one at the version this build
// knows is not.
func TestNewerByOneRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.db")
	s := notes(true)
	mustOpen(t, path, s).Close()
	s.Migrations = s.Migrations[:1]
	if _, err := Open(ctx, path, s, t0); ProblemOf(err) != Newer {
		t.Fatalf("a file of version 2 opened by a build that knows 1: %v", err)
	}
	d, err := OpenReadOnly(ctx, path, s)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Version != 2 || ProblemOf(d.Newer(s)) != Newer || d.Newer(notes(true)) != nil {
		t.Fatalf("read-only: version %d, Newer %v", d.Version, d.Newer(s))
	}
}

func TestReadOnlyNeverWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.db")
	if _, err := OpenReadOnly(ctx, path, notes(true)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a read-only open made the file")
	}
	s := notes(true)
	s.Migrations = s.Migrations[:1]
	mustOpen(t, path, s).Close()
	d, err := OpenReadOnly(ctx, path, notes(true))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Version != 1 {
		t.Fatalf("version %d: a read-only open migrated", d.Version)
	}
	if _, err := d.Exec(`INSERT INTO notes (body) VALUES ('x')`); err == nil {
		t.Fatal("a read-only handle wrote")
	}
}

// Several processes finding no file make one each aside; the first
// linked is kept, and nothing made aside is left behind.
func TestConcurrentOpensShareOneFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "n.db")
	dbs := make([]*DB, 6)
	errs := make([]error, 6)
	var wg sync.WaitGroup
	for i := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dbs[i], errs[i] = Open(ctx, path, notes(true), t0)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer dbs[i].Close()
	}
	if _, err := dbs[0].Exec(`INSERT INTO notes (body) VALUES ('one')`); err != nil {
		t.Fatal(err)
	}
	for i, d := range dbs {
		var n int
		if err := d.QueryRow(`SELECT COUNT(*) FROM notes`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("handle %d sees %d rows: %v", i, n, err)
		}
	}
	if left, _ := filepath.Glob(path + ".new-*"); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func TestCreateKeepsAFileMadeMeanwhile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.db")
	d := mustOpen(t, path, notes(true))
	if _, err := d.Exec(`INSERT INTO notes (body) VALUES ('first')`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := create(ctx, path, notes(true), t0); err != nil {
		t.Fatal(err)
	}
	d = mustOpen(t, path, notes(true))
	var body string
	if err := d.QueryRow(`SELECT body FROM notes`).Scan(&body); err != nil || body != "first" {
		t.Fatalf("the first file's row: %q, %v", body, err)
	}
}

// A new file's Setup runs before its tables: auto_vacuum holds.
func TestSetupBeforeTables(t *testing.T) {
	s := notes(false)
	s.Setup = []string{`PRAGMA auto_vacuum = INCREMENTAL`}
	d := mustOpen(t, filepath.Join(t.TempDir(), "n.db"), s)
	var v int
	if err := d.QueryRow(`PRAGMA auto_vacuum`).Scan(&v); err != nil || v != 2 {
		t.Fatalf("auto_vacuum %d, %v; want 2 (incremental)", v, err)
	}
}

func TestMoveAsideTakesWALAlong(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "n.db")
	for _, ext := range []string{"", "-wal", "-shm"} {
		os.WriteFile(path+ext, []byte("x"+ext), 0o600)
	}
	to, err := MoveAside(path, "corrupt", t0)
	if err != nil || to != path+".corrupt-20261201T093000Z" {
		t.Fatalf("moved to %q, %v", to, err)
	}
	for _, ext := range []string{"", "-wal", "-shm"} {
		if b, _ := os.ReadFile(to + ext); string(b) != "x"+ext {
			t.Errorf("%s%s: %q", to, ext, b)
		}
		if _, err := os.Stat(path + ext); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s%s is still there", path, ext)
		}
	}
	os.WriteFile(path, []byte("again"), 0o600)
	to2, err := MoveAside(path, "corrupt", t0)
	if err != nil || to2 == to || !strings.HasPrefix(to2, to+"-") {
		t.Fatalf("second move in the same second: %q, %v", to2, err)
	}
}

// MetaVersion keeps the version in a meta table; one that does not
// read as a version is not this file's.
func TestMetaVersion(t *testing.T) {
	s := Schema{Name: "cache", Versions: MetaVersion{}, Migrations: []string{
		`CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); CREATE TABLE points (at INTEGER)`,
		`CREATE TABLE spans (at INTEGER)`,
	}}
	path := filepath.Join(t.TempDir(), "c.db")
	d := mustOpen(t, path, s)
	var v string
	if err := d.QueryRow(`SELECT value FROM meta WHERE key = 'version'`).Scan(&v); err != nil || v != "2" || d.Version != 2 {
		t.Fatalf("meta version %q (%d), %v", v, d.Version, err)
	}
	if _, err := d.Exec(`UPDATE meta SET value = 'two' WHERE key = 'version'`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := Open(ctx, path, s, t0); ProblemOf(err) != Foreign || !strings.Contains(err.Error(), `schema version "two" is not a version`) {
		t.Fatalf("a bad version: %v", err)
	}
}

func TestIsCorrupt(t *testing.T) {
	if IsCorrupt(nil) || IsCorrupt(errors.New("database is locked")) || IsCorrupt(os.ErrPermission) {
		t.Error("an error that is not damage counted as damage")
	}
	if !IsCorrupt(fmt.Errorf("read: %w", errDamaged{"row 3 missing from index"})) {
		t.Error("quick_check's finding not counted as damage")
	}
	path := filepath.Join(t.TempDir(), "n.db")
	os.WriteFile(path, bytes.Repeat([]byte("SQLite format 3\x00junk"), 400), 0o600)
	db, _ := sql.Open("sqlite", "file:"+path+"?mode=ro")
	defer db.Close()
	_, err := Tables(ctx, db)
	if !IsCorrupt(err) {
		t.Errorf("SQLite's own error on a broken file (%v) not counted as damage", err)
	}
}

func TestTimes(t *testing.T) {
	local := time.Date(2026, 12, 1, 10, 30, 0, 5, time.FixedZone("CET", 3600))
	s := FormatTime(local)
	if s != "2026-12-01T09:30:00.000000005Z" {
		t.Fatalf("FormatTime = %q", s)
	}
	if got, err := ParseTime(s); err != nil || !got.Equal(local) {
		t.Fatalf("ParseTime = %v, %v", got, err)
	}
	if FormatTime(time.Time{}) != "" {
		t.Error("the zero time is not stored as empty")
	}
	if got, err := ParseTime(""); err != nil || !got.IsZero() {
		t.Errorf("ParseTime(\"\") = %v, %v", got, err)
	}
	if _, err := ParseTime("yesterday"); err == nil {
		t.Error("a stored time that is not one was read")
	}
}
