// Package history is gpumarket's history cache: the pools and spot price
// points the hub fetched from the clouds, kept in their own SQLite file in
// the data dir (history.db, never the ledger's file) with, per provider
// and region, the span of time the fetches covered. A restart seeds the
// hub from it and asks the clouds only for what is missing since.
//
// Writes are batched off the hub's hot path: Save and Trim queue their
// work, and one writer goroutine commits it about once a second. A file
// that is not a history cache this gpumarket can read (garbage, another
// program's database, a newer schema) is renamed aside and a fresh cache
// is made: it is a cache, everything in it can be fetched again.
package feed

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"modernc.org/sqlite"

	"github.com/gpumarket/gpumarket/domain"
)

// FileName is the cache's file inside the data dir.
const FileName = "history.db"

// SchemaVersion is the version of the cache's tables this gpumarket
// writes; a file of a newer version is moved aside, not read.
const SchemaVersion = 1

// format names the file as a gpumarket history cache in its meta table.
const format = "gpumarket-history"

// DefaultRetention is how much history the cache keeps: what the clouds
// keep.
const DefaultRetention = domain.MaxWindow

// HistoryOptions tune a cache.
type HistoryOptions struct {
	// Retention is how far back the cache keeps history (default 90 d).
	Retention time.Duration
	// FlushEvery is how long writes are gathered before they are
	// committed together (default 1 s).
	FlushEvery time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// History is an open history cache. It implements feed.History and is safe
// for concurrent use; several processes may share the file (SQLite's locks
// serialize their writes).
type History struct {
	db    *sql.DB
	path  string
	opt   HistoryOptions
	aside *Aside

	flushMu sync.Mutex // held while committing
	mu      sync.Mutex
	pend    *pending
	failed  error // a write failed: nothing more is written
	damaged error // what was read is damaged: moved aside at Close
	closed  bool
	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once

	// ids maps pools to their row ids; only the writer uses it.
	ids map[domain.PoolKey]int64
}

var _ Cache = (*History)(nil)

// Aside says that the file found was not a readable history cache and
// where it was moved.
type Aside struct {
	// Path is where the old file now is.
	Path string
	// Reason is what was wrong with it.
	Reason error
}

// NotCacheError is a file that is not a history cache this gpumarket can
// read.
type NotCacheError struct {
	Path   string
	Reason string
}

func (e *NotCacheError) Error() string {
	return fmt.Sprintf("%s is not a gpumarket history cache: %s", e.Path, e.Reason)
}

// Path returns the cache file in dataDir.
func Path(dataDir string) string { return filepath.Join(dataDir, FileName) }

// Open opens the cache in dataDir, creating it (and the dir) when it is
// missing. A file that is not a readable history cache is renamed aside
// (history.db.corrupt-<time>) and a fresh one made: Aside then says so,
// and the caller warns. Any other failure (permissions, a full disk) is
// returned and nothing is renamed.
func Open(dataDir string, opt HistoryOptions) (*History, error) {
	if dataDir == "" {
		return nil, errors.New("open history cache: no data dir")
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("open history cache: create data dir %s: %w", dataDir, err)
	}
	return OpenPath(Path(dataDir), opt)
}

// OpenPath opens the cache at path; see Open.
func OpenPath(path string, opt HistoryOptions) (*History, error) {
	if opt.Retention <= 0 {
		opt.Retention = DefaultRetention
	}
	if opt.FlushEvery <= 0 {
		opt.FlushEvery = time.Second
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	db, err := openDB(path, true)
	var aside *Aside
	var nc *NotCacheError
	if errors.As(err, &nc) {
		moved, merr := moveAside(path, opt.Now())
		if merr != nil {
			return nil, fmt.Errorf("open history cache: %w (and it could not be moved aside: %v)", err, merr)
		}
		aside = &Aside{Path: moved, Reason: err}
		db, err = openDB(path, true)
	}
	if err != nil {
		return nil, fmt.Errorf("open history cache: %w", err)
	}
	c := &History{db: db, path: path, opt: opt, aside: aside, pend: newPending(),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
		ids: map[domain.PoolKey]int64{}}
	go c.writer()
	return c, nil
}

// Aside reports whether Open found a file it could not read and moved it
// aside; nil when it did not.
func (c *History) Aside() *Aside { return c.aside }

// Path is the cache's file.
func (c *History) Path() string { return c.path }

// Close commits what is queued and closes the file. A file found damaged
// while it was read or written is moved aside, so that the next start
// makes a fresh one instead of tripping over it again. It is safe to call
// more than once.
func (c *History) Close() error {
	var err error
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.stop)
		<-c.stopped
		err = c.db.Close()
		c.mu.Lock()
		damaged := c.damaged
		c.mu.Unlock()
		if damaged != nil {
			moved, merr := moveAside(c.path, c.opt.Now())
			if merr != nil {
				err = errors.Join(err, fmt.Errorf("history cache %s is damaged (%v) and could not be moved aside: %w", c.path, damaged, merr))
				return
			}
			// The reader said it when it found the damage (the hub warns
			// that it fetches afresh); this is for the log.
			c.opt.Logger.Info("history cache damaged: moved aside, the next start makes a fresh one", "file", c.path, "moved", moved, "err", damaged)
		}
	})
	return err
}

// noteDamage remembers that err, met reading or writing the file, says it
// is damaged; it reports whether it did.
func (c *History) noteDamage(err error) bool {
	if !errors.Is(err, errChunk) && !isCorrupt(err) {
		return false
	}
	c.mu.Lock()
	if c.damaged == nil {
		c.damaged = err
	}
	if c.failed == nil {
		c.failed = err // nothing more is written to a damaged file
	}
	c.mu.Unlock()
	return true
}

// dsn is the cache's connection string: only settings of the connection,
// so that opening a file that is not ours changes nothing in it.
// synchronous NORMAL is enough for a cache in WAL mode: a power cut may
// lose the last commits (their spans with them, so nothing is claimed
// that was lost), never the file.
func dsn(path string) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// openDB opens the file and checks (with create, makes) its tables. A
// file SQLite cannot read, or whose tables are not a history cache of a
// version this gpumarket knows, is a *NotCacheError.
func openDB(path string, create bool) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, err
	}
	if err := checkSchema(context.Background(), db, path, create); err != nil {
		db.Close()
		if isCorrupt(err) {
			return nil, &NotCacheError{Path: path, Reason: "SQLite cannot read it (" + err.Error() + ")"}
		}
		return nil, err
	}
	return db, nil
}

// isCorrupt reports whether err is SQLite saying the file is damaged or
// not a database at all.
func isCorrupt(err error) bool {
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

// schema is version 1 of the cache's tables.
const schema = `
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE pools (
	id            INTEGER PRIMARY KEY,
	provider      TEXT NOT NULL,
	region        TEXT NOT NULL,
	zone          TEXT NOT NULL,
	instance_type TEXT NOT NULL,
	gpu_model     TEXT NOT NULL DEFAULT '',
	description   TEXT NOT NULL DEFAULT '',
	UNIQUE (provider, region, zone, instance_type)
);
CREATE TABLE chunks (
	pool INTEGER NOT NULL REFERENCES pools(id) ON DELETE CASCADE,
	day  INTEGER NOT NULL,
	n    INTEGER NOT NULL,
	data BLOB NOT NULL,
	PRIMARY KEY (pool, day)
) WITHOUT ROWID;
CREATE TABLE spans (
	provider TEXT NOT NULL,
	region   TEXT NOT NULL,
	gpus     TEXT NOT NULL,
	-- Unix nanoseconds: one fetch's span ends at the very instant the
	-- next one's starts, and so they join.
	from_at  INTEGER NOT NULL,
	until_at INTEGER NOT NULL,
	PRIMARY KEY (provider, region, gpus)
);`

var tables = []string{"meta", "pools", "chunks", "spans"}

func checkSchema(ctx context.Context, db *sql.DB, path string, create bool) error {
	have, meta, err := readSchema(ctx, db)
	if err != nil {
		return err
	}
	if len(have) == 0 {
		if !create {
			return &NotCacheError{Path: path, Reason: "it is empty"}
		}
		// auto_vacuum lets the trim give space back; it must be set
		// before the first table. WAL lets a second gpumarket (or
		// `cache info`) read while the writer commits.
		for _, p := range []string{`PRAGMA auto_vacuum = INCREMENTAL`, `PRAGMA journal_mode = WAL`} {
			if _, err := db.ExecContext(ctx, p); err != nil {
				return fmt.Errorf("create tables: %w", err)
			}
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		// Another process may have made them meanwhile.
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return checkSchema(ctx, db, path, create)
		}
		if _, err := tx.ExecContext(ctx, schema); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('format', ?), ('version', ?)`, format, strconv.Itoa(SchemaVersion)); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
		return tx.Commit()
	}
	if !have["meta"] || meta["format"] != format {
		return &NotCacheError{Path: path, Reason: "it holds other tables (" + tableList(have) + ")"}
	}
	v, err := strconv.Atoi(meta["version"])
	switch {
	case err != nil || v < 1:
		return &NotCacheError{Path: path, Reason: fmt.Sprintf("its schema version %q is not a version", meta["version"])}
	case v > SchemaVersion:
		return &NotCacheError{Path: path, Reason: fmt.Sprintf("it was written by a newer gpumarket (schema version %d; this one reads %d)", v, SchemaVersion)}
	}
	for _, t := range tables {
		if !have[t] {
			return &NotCacheError{Path: path, Reason: "its table " + t + " is missing"}
		}
	}
	if _, err := db.ExecContext(ctx, `PRAGMA journal_mode = WAL`); err != nil {
		return err
	}
	return nil
}

// readSchema returns the file's tables and, when it has a meta table of
// keys and values, what it says.
func readSchema(ctx context.Context, db *sql.DB) (map[string]bool, map[string]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		return nil, nil, err
	}
	have := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, nil, err
		}
		have[n] = true
	}
	if err := rows.Close(); err != nil {
		return nil, nil, err
	}
	meta := map[string]string{}
	if !have["meta"] {
		return have, meta, nil
	}
	// A meta table that is not ours (other columns, other types) is a
	// foreign file; one SQLite cannot read is a damaged one.
	mrows, err := db.QueryContext(ctx, `SELECT key, value FROM meta`)
	if err != nil {
		if isCorrupt(err) {
			return nil, nil, err
		}
		return have, map[string]string{}, nil
	}
	defer mrows.Close()
	for mrows.Next() {
		var k, v any
		if err := mrows.Scan(&k, &v); err != nil {
			return have, map[string]string{}, nil
		}
		meta[fmt.Sprint(k)] = fmt.Sprint(v)
	}
	if err := mrows.Err(); err != nil {
		if isCorrupt(err) {
			return nil, nil, err
		}
		return have, map[string]string{}, nil
	}
	return have, meta, nil
}

func tableList(have map[string]bool) string {
	var out []string
	for t := range have {
		out = append(out, t)
	}
	sort.Strings(out)
	if len(out) > 5 {
		out = append(out[:5], "…")
	}
	s := ""
	for i, t := range out {
		if i > 0 {
			s += ", "
		}
		s += t
	}
	return s
}

// moveAside renames the file (and its WAL and shared-memory files, which
// belong to it and must not be applied to a fresh file) to
// <path>.corrupt-<time>.
func moveAside(path string, now time.Time) (string, error) {
	to := path + ".corrupt-" + now.UTC().Format("20060102T150405Z")
	if _, err := os.Stat(to); err == nil {
		to += "-" + strconv.FormatInt(now.UnixNano()%1e9, 10)
	}
	if err := os.Rename(path, to); err != nil {
		return "", err
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Rename(path+suffix, to+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return to, nil
}

// Remove deletes the cache in dataDir (its WAL and shared-memory files
// too) and the copies earlier opens moved aside. It returns what it
// removed; nothing there is not an error.
func Remove(dataDir string) ([]string, error) {
	path := Path(dataDir)
	var removed []string
	names := []string{path, path + "-wal", path + "-shm"}
	aside, err := filepath.Glob(path + ".corrupt-*")
	if err != nil {
		return nil, err
	}
	names = append(names, aside...)
	for _, n := range names {
		err := os.Remove(n)
		switch {
		case err == nil:
			removed = append(removed, n)
		case errors.Is(err, os.ErrNotExist):
		default:
			return removed, fmt.Errorf("remove %s: %w", n, err)
		}
	}
	return removed, nil
}
