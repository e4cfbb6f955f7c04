// Package store keeps gpumarket's local state in one SQLite file in the data
// dir: the booking ledger (every money-spending action, written before the
// call is made) and the cache of offerings found by searches, which `book`
// looks an offering id up in because the clouds cannot.
package ledger

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver; its errors carry SQLite's codes
)

// FileName is the database's name inside the data dir.
const FileName = "gpumarket.db"

// Store is an open database. It is safe for concurrent use, and several
// processes may open the same file: SQLite's locks (busy timeout 10 s)
// serialize their writes.
type Store struct {
	db       *sql.DB
	path     string
	now      func() time.Time
	readOnly bool
	// version is the schema version of the file (a read-only store reads
	// older files as they are).
	version int
	// snapshot is set when the read-only file could be read only as an
	// immutable snapshot (no -shm could be made next to it): what another
	// process writes meanwhile is not seen.
	snapshot bool

	// owner names this handle in the rows whose calls it makes; calls
	// holds the in-flight lock of each (see calls.go).
	owner Owner
	mu    sync.Mutex
	calls map[string]*os.File
	proc  *os.File
}

// ErrUnreadable is matched by the refusal to open a ledger file that
// exists but is empty or not a gpumarket ledger: it is never taken for a
// new one, since the rows it held (or should hold) would be lost from
// sight and the same capacity bought again.
var ErrUnreadable = errors.New("not a gpumarket ledger")

// UnreadableError names the file and what is wrong with it, and says how
// to rebuild.
type UnreadableError struct {
	Path   string
	Reason string
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("ledger %s %s; it is left as it is, and nothing was read or written. "+
		"To start a new ledger from what the clouds show, run `gpumarket ledger --rebuild --provider aws,azure` "+
		"(it keeps this file aside as %s.unreadable-<time> and re-creates the rows from the clouds' tags)", e.Path, e.Reason, filepath.Base(e.Path))
}

// Is lets errors.Is(err, ErrUnreadable) match.
func (e *UnreadableError) Is(target error) bool { return target == ErrUnreadable }

// ErrReadOnly is returned by every write to a store opened read-only.
var ErrReadOnly = errors.New("the ledger is open read-only (its data dir or file is not writable here)")

// Open opens (creating it and the dir if needed) the database in dataDir.
// A dir or file this process cannot write is opened read-only: the
// ledger can be listed, and every write fails with ErrReadOnly. A file
// that exists but is empty or foreign is refused (*UnreadableError).
func Open(dataDir string) (*Store, error) {
	if dataDir == "" {
		return nil, errors.New("open store: no data dir")
	}
	path := filepath.Join(dataDir, FileName)
	if _, err := os.Stat(dataDir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("open store: create data dir %s: %w", dataDir, err)
		}
	}
	if !writable(dataDir) || (exists(path) && !writable(path)) {
		if !exists(path) {
			return nil, fmt.Errorf("open store: the data dir %s is not writable and holds no ledger (%s)", dataDir, FileName)
		}
		return OpenReadOnly(path)
	}
	return OpenPath(path)
}

// OpenPath opens the database at path, creating it if it does not exist.
// Journal mode WAL with synchronous=FULL makes every commit durable when
// it returns: a ledger intent is on disk before the purchase it announces
// is sent. Write transactions begin IMMEDIATE so two processes checking a
// budget or an idempotency key cannot both pass the check.
//
// A new ledger is made aside and linked into place only once its schema
// is committed, so a file at path is always one gpumarket finished making:
// an empty one there was emptied (a truncation, a full disk, a bad
// restore) and is refused rather than taken for a new ledger.
func OpenPath(path string) (*Store, error) {
	if err := checkFile(path); err != nil {
		return nil, err
	}
	if !exists(path) {
		if err := create(path); err != nil {
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
	} else if err := peek(path); err != nil {
		return nil, err
	}
	s, err := openDSN(path, false)
	if err != nil {
		return nil, err
	}
	if err := s.migrate(context.Background(), false); err != nil {
		s.db.Close()
		if isCorrupt(err) {
			return nil, damaged(path, err)
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// OpenReadOnly opens the database at path for reading only: `ledger` on
// a data dir this user may read but not write. It never creates, changes
// or migrates the file; a ledger of an older schema is read as it is.
func OpenReadOnly(path string) (*Store, error) {
	if err := checkFile(path); err != nil {
		return nil, err
	}
	if !exists(path) {
		return nil, fmt.Errorf("open store %s read-only: %w", path, os.ErrNotExist)
	}
	s, err := openDSN(path, true)
	if err != nil {
		return nil, err
	}
	if err := s.checkSchema(context.Background()); err != nil {
		// A WAL database needs a -shm file beside it to be read
		// consistently; where none exists and none can be made (the dir
		// is read-only), SQLite can read the file only as an immutable
		// snapshot.
		s.db.Close()
		if errors.Is(err, ErrUnreadable) {
			return nil, err
		}
		if isCorrupt(err) {
			return nil, damaged(path, err)
		}
		if s, err = openDSN(path, true, "immutable=1"); err != nil {
			return nil, err
		}
		s.snapshot = true
		if err := s.checkSchema(context.Background()); err != nil {
			s.db.Close()
			return nil, fmt.Errorf("open store %s read-only: %w", path, err)
		}
	}
	return s, nil
}

// peek refuses a SQLite file that is not a ledger, or a ledger SQLite
// finds damaged (cut short, overwritten in part), before anything is
// written to it: opening it for writing would turn it to WAL, and
// writing into a damaged file could lose more of it. A ledger is small,
// so SQLite's quick_check of every page costs little.
func peek(path string) error {
	s, err := openDSN(path, true)
	if err != nil {
		return err
	}
	defer s.db.Close()
	ctx := context.Background()
	err = s.checkSchema(ctx)
	if err == nil {
		err = quickCheck(ctx, s.db)
	}
	switch {
	case errors.Is(err, ErrUnreadable):
		return err
	case isCorrupt(err):
		return damaged(path, err)
	}
	return nil // any other trouble is met, and reported, by the real open
}

// errDamaged is what quick_check says of a damaged file.
type errDamaged struct{ what string }

func (e errDamaged) Error() string { return e.what }

// quickCheck runs SQLite's quick_check: it reads every page of the file
// and answers "ok", or what is wrong.
func quickCheck(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `PRAGMA quick_check(3)`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			found = append(found, line)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(found) > 0 {
		return errDamaged{strings.Join(found, "; ")}
	}
	return nil
}

// isCorrupt reports whether err is SQLite saying the file is damaged or
// not a database at all (SQLITE_CORRUPT, SQLITE_NOTADB), or quick_check
// finding it damaged — as opposed to a busy or unwritable file, which is
// no reason to refuse the ledger.
func isCorrupt(err error) bool {
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

// damaged is the refusal of a ledger SQLite cannot read whole.
func damaged(path string, err error) error {
	return &UnreadableError{Path: path, Reason: fmt.Sprintf("is damaged: SQLite cannot read it whole (%v)", err)}
}

func openDSN(path string, readOnly bool, extra ...string) (*Store, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	if readOnly {
		q.Set("mode", "ro")
		for _, e := range extra {
			k, v, _ := bytesCut(e)
			q.Set(k, v)
		}
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Add("_pragma", "foreign_keys(ON)")
		q.Set("_txlock", "immediate")
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &Store{db: db, path: path, now: time.Now, readOnly: readOnly, owner: newOwner(), calls: map[string]*os.File{}}, nil
}

func bytesCut(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// sqliteHeader begins every SQLite database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// checkFile refuses a file at path that exists but is empty or is not a
// SQLite database. (One that is SQLite but not ours is refused by
// migrate.)
func checkFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	n, err := io.ReadFull(f, head)
	switch {
	case n == 0:
		return &UnreadableError{Path: path, Reason: "is empty (0 bytes): it is not a new ledger — it was emptied"}
	case err != nil || !bytes.Equal(head, sqliteHeader):
		return &UnreadableError{Path: path, Reason: "is not a SQLite database"}
	}
	return nil
}

// create makes a new ledger at path: built beside it, then linked into
// place, so that no half-made ledger is ever found at path. If another
// process made one meanwhile, theirs is kept.
func create(path string) error {
	tmp := fmt.Sprintf("%s.new-%s", path, randomHex(6))
	s, err := openDSN(tmp, false)
	if err != nil {
		return err
	}
	err = s.migrate(context.Background(), true)
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	defer func() {
		for _, ext := range []string{"", "-wal", "-shm"} {
			os.Remove(tmp + ext)
		}
	}()
	if err != nil {
		return fmt.Errorf("create ledger: %w", err)
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create ledger: %w", err)
	}
	return nil
}

// SetAside renames an unreadable ledger file (and its -wal and -shm) out
// of the way, so that a new ledger can be made, and returns its new name.
// Nothing is deleted: the file may still hold what someone needs.
func SetAside(path string, now time.Time) (string, error) {
	aside := fmt.Sprintf("%s.unreadable-%s", path, now.UTC().Format("20060102T150405Z"))
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("set the unreadable ledger aside: %w", err)
	}
	for _, ext := range []string{"-wal", "-shm"} {
		if exists(path + ext) {
			if err := os.Rename(path+ext, aside+ext); err != nil {
				return aside, fmt.Errorf("set the unreadable ledger's %s aside: %w", ext, err)
			}
		}
	}
	return aside, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on supported platforms
	}
	return hex.EncodeToString(b)
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// ReadOnly reports whether the store was opened read-only.
func (s *Store) ReadOnly() bool { return s.readOnly }

// Snapshot reports whether the read-only store reads a snapshot that does
// not follow another process's writes.
func (s *Store) Snapshot() bool { return s.snapshot }

// Close releases the in-flight locks this handle holds and closes the
// database.
func (s *Store) Close() error {
	s.releaseAll()
	return s.db.Close()
}

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
	// 2: what happened that is not an error (a delete, a re-created row)
	// gets its own column; a call in flight names its owner (process)
	// and its heartbeat. Notes the error column held move to note.
	`ALTER TABLE ledger ADD COLUMN note TEXT NOT NULL DEFAULT '';
	ALTER TABLE ledger ADD COLUMN owner TEXT NOT NULL DEFAULT '';
	ALTER TABLE ledger ADD COLUMN heartbeat_at TEXT NOT NULL DEFAULT '';
	UPDATE ledger SET note = error, error = ''
		WHERE state = 'deleted' AND (error LIKE 'deleted by %' OR error LIKE 'simulated fleet ended with the process%');`,
	// 3: what each row's provider last showed of its usage (usage.go),
	// kept because the clouds forget: EC2 lists a terminated instance
	// for about an hour, Azure nothing of a deleted reservation. A new
	// table only: no ledger row is touched.
	`CREATE TABLE usage_kept (
		row_id  TEXT PRIMARY KEY,
		read_at TEXT NOT NULL,
		report  TEXT NOT NULL
	);`,
}

// tables lists the database's tables.
func tables(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) (map[string]bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out[n] = true
	}
	return out, rows.Err()
}

// foreign refuses a database that is not a ledger: one whose tables are
// not ours. A new file made by create has no tables yet when it is first
// migrated; a file at the ledger's path always has them.
func (s *Store) foreign(have map[string]bool, allowEmpty bool) error {
	if len(have) == 0 && allowEmpty {
		return nil
	}
	if !have["migrations"] || !have["ledger"] {
		what := "has no tables"
		if len(have) > 0 {
			what = "holds other tables than a ledger's"
		}
		return &UnreadableError{Path: s.path, Reason: "is a SQLite database that " + what}
	}
	return nil
}

// migrate brings the schema up to date. fresh is set only for the file
// create is making; any other file must already be a ledger.
func (s *Store) migrate(ctx context.Context, fresh bool) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	have, err := tables(ctx, tx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := s.foreign(have, fresh); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var version int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM migrations`).Scan(&version); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("database schema version %d is newer than this gpumarket knows (%d): upgrade gpumarket", version, len(migrations))
	}
	for v := version + 1; v <= len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v-1]); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO migrations (version, applied_at) VALUES (?, ?)`, v, fmtTime(s.now())); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
	}
	s.version = len(migrations)
	return tx.Commit()
}

// checkSchema is migrate's check for a read-only store: the file must be
// a ledger; its version decides which columns are read.
func (s *Store) checkSchema(ctx context.Context) error {
	have, err := tables(ctx, s.db)
	if err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	if err := s.foreign(have, false); err != nil {
		return err
	}
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM migrations`).Scan(&s.version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	return nil
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
