// The history cache: the pools and spot price points the hub fetched
// from the clouds, kept in their own SQLite file in the data dir
// (history.db, never the ledger's file) with, per provider and region, the
// span of time the fetches covered. A restart seeds the hub from it and
// asks the clouds only for what is missing since.
//
// Writes are batched off the hub's hot path: Save and Trim queue their
// work, and one writer goroutine commits it about once a second. A file
// that is not a history cache this gpumarket can read is moved aside and
// a fresh cache made: everything in it can be fetched again.
package feed

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/sqlitedb"
)

// FileName is the cache's file inside the data dir.
const FileName = "history.db"

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
	// Reason is what was wrong with it (a *sqlitedb.FileError).
	Reason error
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
	ctx := context.Background()
	d, err := sqlitedb.Open(ctx, path, historySchema, opt.Now())
	var aside *Aside
	if sqlitedb.ProblemOf(err) != 0 {
		moved, merr := sqlitedb.MoveAside(path, "corrupt", opt.Now())
		if merr != nil {
			return nil, fmt.Errorf("open history cache: %w (and it could not be moved aside: %v)", err, merr)
		}
		aside = &Aside{Path: moved, Reason: err}
		d, err = sqlitedb.Open(ctx, path, historySchema, opt.Now())
	}
	if err != nil {
		return nil, fmt.Errorf("open history cache: %w", err)
	}
	c := &History{db: d.DB, path: path, opt: opt, aside: aside, pend: newPending(),
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
			moved, merr := sqlitedb.MoveAside(c.path, "corrupt", c.opt.Now())
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
	if !errors.Is(err, errChunk) && !sqlitedb.IsCorrupt(err) {
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

// historySchema is the cache's file. Synchronous NORMAL is enough for a
// cache in WAL mode: a power cut may lose the last commits (their spans
// with them, so nothing is claimed that was lost), never the file.
// auto_vacuum lets the trim give space back.
var historySchema = sqlitedb.Schema{
	Name:  "gpumarket history cache",
	Setup: []string{`PRAGMA auto_vacuum = INCREMENTAL`},
	Migrations: []string{schema + `
INSERT INTO meta (key, value) VALUES ('format', '` + format + `')`},
	Versions: sqlitedb.MetaVersion{},
	Identify: identifyCache,
}

// format names the file as a gpumarket history cache in its meta table.
const format = "gpumarket-history"

// identifyCache tells a cache's tables from others': a meta table that
// names the format, and the cache's tables.
func identifyCache(ctx context.Context, q sqlitedb.Querier, have map[string]bool) (string, error) {
	other := "holds other tables (" + sqlitedb.TableList(have) + ")"
	if !have["meta"] {
		return other, nil
	}
	var f string
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'format'`).Scan(&f)
	switch {
	case sqlitedb.IsCorrupt(err):
		return "", err
	case err != nil || f != format:
		return other, nil // no such row, or a meta table of other columns
	}
	for _, t := range []string{"pools", "chunks", "spans"} {
		if !have[t] {
			return "lacks the table " + t, nil
		}
	}
	return "", nil
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
