// Package store keeps gpumarket's local state in one SQLite file in the data
// dir: the booking ledger (every money-spending action, written before the
// call is made) and the cache of offerings found by searches, which `book`
// looks an offering id up in because the clouds cannot.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// FileName is the database's name inside the data dir.
const FileName = "gpumarket.db"

// Store is an open database. It is safe for concurrent use, and several
// processes may open the same file: SQLite's locks (busy timeout 10 s)
// serialize their writes.
type Store struct {
	db   *sql.DB
	path string
	now  func() time.Time
}

// Open opens (creating it and the dir if needed) the database in dataDir.
func Open(dataDir string) (*Store, error) {
	if dataDir == "" {
		return nil, errors.New("open store: no data dir")
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("open store: create data dir %s: %w", dataDir, err)
	}
	return OpenPath(filepath.Join(dataDir, FileName))
}

// OpenPath opens the database at path. Journal mode WAL with
// synchronous=FULL makes every commit durable when it returns: a ledger
// intent is on disk before the purchase it announces is sent. Write
// transactions begin IMMEDIATE so two processes checking a budget or an
// idempotency key cannot both pass the check.
func OpenPath(path string) (*Store, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{db: db, path: path, now: time.Now}
	if err := s.migrate(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// migrations are applied in order, each once; the migrations table
// remembers which ran. Never edit one that has shipped: add another.
var migrations = []string{
	// 1: the ledger and the offering cache.
	`CREATE TABLE ledger (
		id             TEXT PRIMARY KEY,
		kind           TEXT NOT NULL,
		provider       TEXT NOT NULL,
		cloud          TEXT NOT NULL DEFAULT '',
		region         TEXT NOT NULL DEFAULT '',
		zone           TEXT NOT NULL DEFAULT '',
		instance_type  TEXT NOT NULL DEFAULT '',
		instance_count INTEGER NOT NULL DEFAULT 0,
		gpu_count      REAL NOT NULL DEFAULT 0,
		start_at       TEXT NOT NULL DEFAULT '',
		end_at         TEXT NOT NULL DEFAULT '',
		cost_usd       REAL NOT NULL DEFAULT 0,
		cost_note      TEXT NOT NULL DEFAULT '',
		state          TEXT NOT NULL,
		provider_ref   TEXT NOT NULL DEFAULT '',
		actor          TEXT NOT NULL DEFAULT '',
		created_at     TEXT NOT NULL,
		updated_at     TEXT NOT NULL,
		error          TEXT NOT NULL DEFAULT '',
		request        TEXT NOT NULL DEFAULT '{}',
		idem_key       TEXT NOT NULL
	);
	CREATE UNIQUE INDEX ledger_idem ON ledger(kind, idem_key) WHERE state <> 'failed';
	CREATE INDEX ledger_created ON ledger(created_at);
	CREATE INDEX ledger_state ON ledger(state);
	CREATE TABLE offerings (
		id          TEXT PRIMARY KEY,
		provider    TEXT NOT NULL,
		offering    TEXT NOT NULL,
		query       TEXT NOT NULL,
		searched_at TEXT NOT NULL,
		start_at    TEXT NOT NULL
	);`,
}

func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM migrations`).Scan(&have); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if have > len(migrations) {
		return fmt.Errorf("database schema version %d is newer than this gpumarket knows (%d): upgrade gpumarket", have, len(migrations))
	}
	for v := have + 1; v <= len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v-1]); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO migrations (version, applied_at) VALUES (?, ?)`, v, fmtTime(s.now())); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
	}
	return tx.Commit()
}

// timeLayout is fixed-width so that text order is time order in SQL.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %q: %w", s, err)
	}
	return t, nil
}
