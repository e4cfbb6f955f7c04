// The store keeps gpumarket's local state in one SQLite file in the data
// dir: the booking ledger (every money-spending action, written before the
// call is made) and the cache of offerings found by searches, which `book`
// looks an offering id up in because the clouds cannot.

package ledger

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/internal/sqlitedb"
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

// schema is the ledger's file. Synchronous FULL makes every commit
// durable when it returns: a ledger intent is on disk before the purchase
// it announces is sent. A damaged, emptied or foreign file is refused,
// never taken for a new ledger: the same capacity would be bought again.
var schema = sqlitedb.Schema{
	Name: "ledger", Durable: true, QuickCheck: true, Migrations: migrations,
	Identify: func(_ context.Context, _ sqlitedb.Querier, t map[string]bool) (string, error) {
		if t["migrations"] && t["ledger"] {
			return "", nil
		}
		return "holds other tables than a ledger's", nil
	},
}

// OpenPath opens the database at path, creating it if it does not exist.
func OpenPath(path string) (*Store, error) {
	d, err := sqlitedb.Open(context.Background(), path, schema, time.Now())
	if err != nil {
		return nil, refusal(err)
	}
	return newStore(d, false), nil
}

// OpenReadOnly opens the database at path for reading only: `ledger` on
// a data dir this user may read but not write. It never creates, changes
// or migrates the file; a ledger of an older schema is read as it is.
func OpenReadOnly(path string) (*Store, error) {
	d, err := sqlitedb.OpenReadOnly(context.Background(), path, schema)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("open store %s read-only: %w", path, os.ErrNotExist)
		}
		return nil, refusal(err)
	}
	return newStore(d, true), nil
}

// refusal is an UnreadableError for a file that cannot be a ledger; a
// ledger of a newer schema is not one to rebuild.
func refusal(err error) error {
	var fe *sqlitedb.FileError
	if !errors.As(err, &fe) {
		return err
	}
	if fe.Problem == sqlitedb.Newer {
		return fmt.Errorf("ledger %w", fe)
	}
	return &UnreadableError{Path: fe.Path, Reason: fe.Reason}
}

func newStore(d *sqlitedb.DB, readOnly bool) *Store {
	return &Store{db: d.DB, path: d.Path, now: time.Now, readOnly: readOnly, version: d.Version, snapshot: d.Snapshot,
		owner: newOwner(), calls: map[string]*os.File{}}
}

// SetAside renames an unreadable ledger file (and its -wal and -shm) out
// of the way, so that a new ledger can be made, and returns its new name.
// Nothing is deleted: the file may still hold what someone needs.
func SetAside(path string, now time.Time) (string, error) {
	aside, err := sqlitedb.MoveAside(path, "unreadable", now)
	if err != nil {
		return aside, fmt.Errorf("set the unreadable ledger aside: %w", err)
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
	// 4: jobs, their moves and launches (job.go).
	jobsMigration,
	// 5: state that lived in free text gets columns: a cost may be
	// unknown (NULL), a fleet's hourly estimate is usd_hour (its cost_usd,
	// a first hour's estimate, goes), and a fleet's schedule is read from
	// its request once, here. SQLite cannot drop a NOT NULL: the table
	// is copied.
	`CREATE TABLE ledger_v5 (
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
		cost_usd       REAL,
		cost_note      TEXT NOT NULL DEFAULT '',
		state          TEXT NOT NULL,
		provider_ref   TEXT NOT NULL DEFAULT '',
		actor          TEXT NOT NULL DEFAULT '',
		created_at     TEXT NOT NULL,
		updated_at     TEXT NOT NULL,
		error          TEXT NOT NULL DEFAULT '',
		request        TEXT NOT NULL DEFAULT '{}',
		idem_key       TEXT NOT NULL,
		note           TEXT NOT NULL DEFAULT '',
		owner          TEXT NOT NULL DEFAULT '',
		heartbeat_at   TEXT NOT NULL DEFAULT '',
		usd_hour       REAL,
		sched_start    TEXT NOT NULL DEFAULT '',
		sched_end      TEXT NOT NULL DEFAULT '',
		sched_keeper   TEXT NOT NULL DEFAULT ''
	);
	INSERT INTO ledger_v5 SELECT ` + legacyColumns + ` FROM ledger;
	DROP TABLE ledger;
	ALTER TABLE ledger_v5 RENAME TO ledger;
	CREATE UNIQUE INDEX ledger_idem ON ledger(kind, idem_key) WHERE state <> 'failed';
	CREATE INDEX ledger_created ON ledger(created_at);
	CREATE INDEX ledger_state ON ledger(state);`,
}

// legacyColumns reads a row of schemas 2 to 4 as schema 5 has it: the
// copy of migration 5, and what a read-only store selects from an older
// file. Never edit it: migration 5 has shipped with it.
const legacyColumns = `id, kind, provider, cloud, region, zone, instance_type, instance_count, gpu_count, start_at, end_at,
	CASE WHEN kind = 'fleet' OR instr(cost_note, 'cost unknown') > 0 THEN NULL ELSE cost_usd END,
	cost_note, state, provider_ref, actor, created_at, updated_at, error, request, idem_key, note, owner, heartbeat_at,
	CASE WHEN kind <> 'fleet' OR cost_note LIKE 'estimate: first hour at unknown prices%' OR cost_note LIKE 'cost unknown%' THEN NULL
		ELSE cost_usd END,
	` + legacySchedule + `
	CASE WHEN kind = 'fleet' AND json_valid(request) AND
		(NULLIF(json_extract(request, '$.Start'), '0001-01-01T00:00:00Z') IS NOT NULL OR
		 NULLIF(json_extract(request, '$.End'), '0001-01-01T00:00:00Z') IS NOT NULL)
		THEN COALESCE(NULLIF(json_extract(request, '$.Keeper'), ''), 'cloud') ELSE '' END`

// legacySchedule is the start and end of a fleet's schedule as its
// request holds them (RFC 3339, read by parseAnyTime).
const legacySchedule = `CASE WHEN kind = 'fleet' AND json_valid(request) THEN
		COALESCE(NULLIF(json_extract(request, '$.Start'), '0001-01-01T00:00:00Z'), '') ELSE '' END,
	CASE WHEN kind = 'fleet' AND json_valid(request) THEN
		COALESCE(NULLIF(json_extract(request, '$.End'), '0001-01-01T00:00:00Z'), '') ELSE '' END,`

func fmtTime(t time.Time) string { return sqlitedb.FormatTime(t) }

func parseTime(s string) (time.Time, error) { return sqlitedb.ParseTime(s) }

// parseAnyTime reads a stored time, or the RFC 3339 of a fleet request's
// schedule that migration 4 copied.
func parseAnyTime(s string) (time.Time, error) {
	if t, err := parseTime(s); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}
