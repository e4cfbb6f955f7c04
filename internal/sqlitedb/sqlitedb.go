// Package sqlitedb opens every SQLite file of gpumarket one way and names
// what makes one unusable (docs/DESIGN.md, "The SQLite files").
package sqlitedb

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver; its errors carry SQLite's codes
)

// Problem is why a file at a database's path cannot be used as it is.
type Problem int

// A file is only linked into place finished: an empty one was emptied.
const (
	Damaged Problem = iota + 1
	Emptied
	NotAFile
	NotSQLite
	Foreign // SQLite, other tables
	Newer   // a schema newer than this build knows
)

var problemNames = map[Problem]string{Damaged: "damaged", Emptied: "emptied", NotAFile: "not a file",
	NotSQLite: "not SQLite", Foreign: "foreign", Newer: "newer schema"}

func (p Problem) String() string { return problemNames[p] }

// FileError is a file that cannot be used as it is, left unchanged.
type FileError struct {
	Path    string
	Problem Problem
	// Reason completes "<path> …".
	Reason string
}

func (e *FileError) Error() string { return e.Path + " " + e.Reason }

// ProblemOf returns the problem err reports, 0 when it is no *FileError.
func ProblemOf(err error) Problem {
	var fe *FileError
	if errors.As(err, &fe) {
		return fe.Problem
	}
	return 0
}

// Querier is a *sql.DB or a *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Versions reads and records how many migrations a file has had.
type Versions interface {
	Read(ctx context.Context, q Querier, tables map[string]bool) (int, error)
	Write(ctx context.Context, tx *sql.Tx, version int, now time.Time) error
}

// Schema describes one kind of database file.
type Schema struct {
	Name string // for messages: "ledger"
	// Durable: each commit is on disk when it returns (synchronous FULL).
	Durable bool
	// Setup runs on a new file before its first table (auto_vacuum).
	Setup []string
	// Migrations run once each, in order; never edit a shipped one.
	Migrations []string
	// Identify returns "" for this schema's tables, else what they are.
	Identify func(ctx context.Context, q Querier, tables map[string]bool) (string, error)
	Versions Versions // nil: a migrations table
	// QuickCheck reads every page before writing, which would damage a bad file further.
	QuickCheck bool
}

func (s Schema) versions() Versions {
	if s.Versions == nil {
		return MigrationsTable{}
	}
	return s.Versions
}

// Mode is how a connection opens the file.
type Mode int

// ReadWrite uses IMMEDIATE transactions so a check and its write cannot
// interleave with another process's; Snapshot reads a WAL file without -shm.
const (
	ReadWrite Mode = iota
	ReadOnly
	Snapshot
	fresh
)

func DSN(path string, m Mode, s Schema) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	switch m {
	case ReadOnly:
		q.Set("mode", "ro")
	case Snapshot:
		q.Set("mode", "ro")
		q.Set("immutable", "1")
	default:
		sync := "NORMAL"
		if s.Durable {
			sync = "FULL"
		}
		if m != fresh {
			q.Add("_pragma", "journal_mode(WAL)")
		}
		q.Add("_pragma", "synchronous("+sync+")")
		q.Add("_pragma", "foreign_keys(ON)")
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// DB is an open database file.
type DB struct {
	*sql.DB
	Path     string
	Version  int
	Snapshot bool // read as an immutable snapshot
}

// Newer is a *FileError when the file's schema is newer than s knows.
func (d *DB) Newer(s Schema) error {
	if d.Version > len(s.Migrations) {
		return newer(d.Path, s, d.Version)
	}
	return nil
}

// Open opens path for writing, making and migrating it; unusable is a *FileError.
func Open(ctx context.Context, path string, s Schema, now time.Time) (*DB, error) {
	if err := Inspect(ctx, path, s); err != nil {
		if ProblemOf(err) != 0 {
			return nil, err
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("open %s %s: %w", s.Name, path, err)
		}
		if err := create(ctx, path, s, now); err != nil {
			return nil, fmt.Errorf("create %s %s: %w", s.Name, path, err)
		}
	}
	db, err := sql.Open("sqlite", DSN(path, ReadWrite, s))
	if err != nil {
		return nil, fmt.Errorf("open %s %s: %w", s.Name, path, err)
	}
	v, err := migrate(ctx, db, path, s, false, now)
	if err != nil {
		db.Close()
		if IsCorrupt(err) {
			return nil, damaged(path, err)
		}
		if ProblemOf(err) != 0 {
			return nil, err
		}
		return nil, fmt.Errorf("open %s %s: %w", s.Name, path, err)
	}
	return &DB{DB: db, Path: path, Version: v}, nil
}

// OpenReadOnly opens path without changing it; an older schema is read as it is.
func OpenReadOnly(ctx context.Context, path string, s Schema) (*DB, error) {
	if err := CheckFile(path, s); err != nil {
		return nil, err
	}
	d, err := openRO(ctx, path, s, ReadOnly)
	if err == nil || ProblemOf(err) != 0 {
		return d, err
	}
	d, err2 := openRO(ctx, path, s, Snapshot)
	if err2 != nil {
		return nil, fmt.Errorf("open %s %s read-only: %w", s.Name, path, err)
	}
	d.Snapshot = true
	return d, nil
}

func openRO(ctx context.Context, path string, s Schema, m Mode) (*DB, error) {
	db, err := sql.Open("sqlite", DSN(path, m, s))
	if err != nil {
		return nil, err
	}
	v, err := identify(ctx, db, path, s)
	if err == nil && s.QuickCheck {
		err = QuickCheck(ctx, db)
	}
	if err != nil {
		db.Close()
		if IsCorrupt(err) {
			return nil, damaged(path, err)
		}
		return nil, err
	}
	return &DB{DB: db, Path: path, Version: v}, nil
}

// Inspect says without writing whether Open may use path.
func Inspect(ctx context.Context, path string, s Schema) error {
	if err := CheckFile(path, s); err != nil {
		return err
	}
	d, err := openRO(ctx, path, s, ReadOnly)
	if err == nil {
		d.Close()
	}
	if ProblemOf(err) != 0 {
		return err
	}
	return nil // any other trouble is met, and reported, by the real open
}

var sqliteHeader = []byte("SQLite format 3\x00")

// CheckFile tells by its first bytes whether path may be a database.
func CheckFile(path string, s Schema) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		what := "a directory"
		if !fi.IsDir() {
			what = "a " + fi.Mode().Type().String() + " file"
		}
		return &FileError{Path: path, Problem: NotAFile, Reason: "is " + what + ", not a " + s.Name + " file"}
	}
	if fi.Size() == 0 {
		return &FileError{Path: path, Problem: Emptied, Reason: "is empty (0 bytes): it is not a new " + s.Name + " — it was emptied"}
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, sqliteHeader) {
		return &FileError{Path: path, Problem: NotSQLite, Reason: "is not a SQLite database"}
	}
	return nil
}

// identify checks the file's tables and returns its version.
func identify(ctx context.Context, q Querier, path string, s Schema) (int, error) {
	tables, err := Tables(ctx, q)
	if err != nil {
		return 0, err
	}
	if err := foreign(ctx, q, path, s, tables); err != nil {
		return 0, err
	}
	return readVersion(ctx, q, path, s, tables)
}

// BadVersion is a version record that does not read as one.
type BadVersion string

func (b BadVersion) Error() string {
	return fmt.Sprintf("schema version %q is not a version", string(b))
}

func readVersion(ctx context.Context, q Querier, path string, s Schema, tables map[string]bool) (int, error) {
	v, err := s.versions().Read(ctx, q, tables)
	var bad BadVersion
	if errors.As(err, &bad) {
		return 0, &FileError{Path: path, Problem: Foreign, Reason: "is a SQLite database whose " + bad.Error() + ", not a " + s.Name}
	}
	return v, err
}

func foreign(ctx context.Context, q Querier, path string, s Schema, tables map[string]bool) error {
	if len(tables) == 0 {
		return &FileError{Path: path, Problem: Foreign, Reason: "is a SQLite database with no tables, not a " + s.Name}
	}
	if s.Identify == nil {
		return nil
	}
	what, err := s.Identify(ctx, q, tables)
	if err != nil || what == "" {
		return err
	}
	return &FileError{Path: path, Problem: Foreign, Reason: "is a SQLite database that " + what + ", not a " + s.Name}
}

func newer(path string, s Schema, v int) error {
	return &FileError{Path: path, Problem: Newer, Reason: fmt.Sprintf(
		"was written by a newer gpumarket (schema version %d; this one knows %d): upgrade gpumarket", v, len(s.Migrations))}
}

func damaged(path string, err error) error {
	return &FileError{Path: path, Problem: Damaged, Reason: fmt.Sprintf("is damaged: SQLite cannot read it whole (%v)", err)}
}

// Tables lists the database's tables (not SQLite's own).
func Tables(ctx context.Context, q Querier) (map[string]bool, error) {
	names, err := All(ctx, q, String, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out, err
}

// Scanner is a *sql.Row or *sql.Rows.
type Scanner interface{ Scan(dest ...any) error }

// All reads every row query returns with read (EachRow, collecting).
func All[T any](ctx context.Context, q Querier, read func(Scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	var out []T
	err = EachRow(rows, err, func() error {
		v, err := read(rows)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// String reads a row of one text column.
func String(sc Scanner) (string, error) {
	var s string
	err := sc.Scan(&s)
	return s, err
}

// TableList writes tables for a message: "chunks, meta, photos".
func TableList(tables map[string]bool) string {
	out := slices.Sorted(maps.Keys(tables))
	if len(out) > 5 {
		out = append(out[:5], "…")
	}
	return strings.Join(out, ", ")
}

// migrate brings the schema up to date in one transaction.
func migrate(ctx context.Context, db *sql.DB, path string, s Schema, fresh bool, now time.Time) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	tables, err := Tables(ctx, tx)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	if !fresh {
		if err := foreign(ctx, tx, path, s, tables); err != nil {
			return 0, err
		}
	}
	version, err := readVersion(ctx, tx, path, s, tables)
	if err != nil {
		return 0, err
	}
	if version > len(s.Migrations) {
		return 0, newer(path, s, version)
	}
	if version == len(s.Migrations) {
		return version, nil
	}
	for v := version + 1; v <= len(s.Migrations); v++ {
		if _, err := tx.ExecContext(ctx, s.Migrations[v-1]); err != nil {
			return 0, fmt.Errorf("migration %d: %w", v, err)
		}
		if err := s.versions().Write(ctx, tx, v, now); err != nil {
			return 0, fmt.Errorf("migration %d: %w", v, err)
		}
	}
	return len(s.Migrations), tx.Commit()
}

// create links a finished new file into place; one made meanwhile is kept.
func create(ctx context.Context, path string, s Schema, now time.Time) error {
	tmp := fmt.Sprintf("%s.new-%s", path, RandomHex(6))
	defer func() {
		for _, ext := range []string{"", "-journal", "-wal", "-shm"} {
			os.Remove(tmp + ext)
		}
	}()
	db, err := sql.Open("sqlite", DSN(tmp, fresh, s))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1) // Setup's pragmas hold for the connection that makes the tables
	for _, p := range append(s.Setup, `PRAGMA journal_mode = WAL`) {
		if _, err = db.ExecContext(ctx, p); err != nil {
			break
		}
	}
	if err == nil {
		_, err = migrate(ctx, db, tmp, s, true, now)
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// MoveAside renames path with its -wal and -shm aside; nothing is deleted.
func MoveAside(path, label string, now time.Time) (string, error) {
	to := path + "." + label + "-" + now.UTC().Format("20060102T150405Z")
	if _, err := os.Lstat(to); err == nil {
		to += "-" + RandomHex(3)
	}
	if err := os.Rename(path, to); err != nil {
		return "", err
	}
	for _, ext := range []string{"-wal", "-shm"} {
		if err := os.Rename(path+ext, to+ext); err != nil && !errors.Is(err, os.ErrNotExist) {
			return to, err
		}
	}
	return to, nil
}

type errDamaged struct{ what string }

func (e errDamaged) Error() string { return e.what }

// QuickCheck reads every page: nil, or an error IsCorrupt recognises.
func QuickCheck(ctx context.Context, q Querier) error {
	lines, err := All(ctx, q, String, `PRAGMA quick_check(3)`)
	if err != nil {
		return err
	}
	if found := slices.DeleteFunc(lines, func(l string) bool { return l == "ok" }); len(found) > 0 {
		return errDamaged{strings.Join(found, "; ")}
	}
	return nil
}

// IsCorrupt reports whether err says the file is damaged, not merely busy.
func IsCorrupt(err error) bool {
	var d errDamaged
	if errors.As(err, &d) {
		return true
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case 11, 26: // SQLITE_CORRUPT, SQLITE_NOTADB
		return true
	}
	return false
}

// MigrationsTable records versions in a table of (version, applied_at).
type MigrationsTable struct{}

// Read implements Versions.
func (MigrationsTable) Read(ctx context.Context, q Querier, tables map[string]bool) (int, error) {
	if !tables["migrations"] {
		return 0, nil
	}
	var v int
	err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM migrations`).Scan(&v)
	return v, err
}

// Write implements Versions.
func (MigrationsTable) Write(ctx context.Context, tx *sql.Tx, v int, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO migrations (version, applied_at) VALUES (?, ?)`, v, FormatTime(now))
	return err
}

// MetaVersion records the version under "version" in a meta table.
type MetaVersion struct{}

// Read implements Versions.
func (MetaVersion) Read(ctx context.Context, q Querier, tables map[string]bool) (int, error) {
	if !tables["meta"] {
		return 0, nil
	}
	var s string
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'version'`).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, BadVersion("")
	}
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return 0, BadVersion(s)
	}
	return v, nil
}

// Write implements Versions.
func (MetaVersion) Write(ctx context.Context, tx *sql.Tx, v int, _ time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('version', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, strconv.Itoa(v))
	return err
}

// timeLayout is fixed-width: text order is time order in SQL.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// FormatTime writes t as the files store times; "" for the zero time.
func FormatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

// ParseTime reads a time FormatTime wrote; "" is the zero time.
func ParseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %q: %w", s, err)
	}
	return t, nil
}

// RandomHex is n random bytes written in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
