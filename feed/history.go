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

const FileName = "history.db"

// DefaultRetention is what the clouds keep.
const DefaultRetention = domain.MaxWindow

// HistoryOptions tune a cache: writes are gathered FlushEvery (1 s) off the hub's hot path.
type HistoryOptions struct {
	Retention  time.Duration // default 90 d
	FlushEvery time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
}

// History is an open history cache (docs/DESIGN.md), safe for several processes.
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

	ids map[domain.PoolKey]int64
}

var _ Cache = (*History)(nil)

// Aside is a file found unusable (Reason) and where it was moved.
type Aside struct {
	Path   string
	Reason error
}

func Path(dataDir string) string { return filepath.Join(dataDir, FileName) }

// Open opens or makes the cache in dataDir; an unusable file is moved aside
// and a fresh one made, since all of it can be fetched again.
func Open(dataDir string, opt HistoryOptions) (*History, error) {
	if dataDir == "" {
		return nil, errors.New("open history cache: no data dir")
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("open history cache: create data dir %s: %w", dataDir, err)
	}
	return OpenPath(Path(dataDir), opt)
}

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

// Aside says where an unusable file found by Open went; nil if none.
func (c *History) Aside() *Aside { return c.aside }

func (c *History) Path() string { return c.path }

// Close commits what is queued and closes; a file found damaged meanwhile is moved aside.
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
			c.opt.Logger.Info("history cache damaged: moved aside, the next start makes a fresh one", "file", c.path, "moved", moved, "err", damaged)
		}
	})
	return err
}

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

// historySchema: a power cut may lose the last commits and their spans (so
// nothing lost is claimed), never the file; auto_vacuum lets trims give space back.
var historySchema = sqlitedb.Schema{
	Name:  "gpumarket history cache",
	Setup: []string{`PRAGMA auto_vacuum = INCREMENTAL`},
	Migrations: []string{schema + `
INSERT INTO meta (key, value) VALUES ('format', '` + format + `')`},
	Versions: sqlitedb.MetaVersion{},
	Identify: identifyCache,
}

const format = "gpumarket-history"

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

// Remove deletes the cache in dataDir with its WAL and moved-aside copies, returning what it removed.
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
