package feed

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/sqlitedb"
	"github.com/gpumarket/gpumarket/series"
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
	domain.OrDefault(&opt.Retention, DefaultRetention)
	domain.OrDefault(&opt.FlushEvery, time.Second)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	opt.Logger = cmp.Or(opt.Logger, slog.New(slog.DiscardHandler))
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

// Info describes a cache file, for `gpumarket cache info`.
type Info struct {
	Path string
	// Size is the file's bytes with its write-ahead log.
	Size    int64
	Version int
	Pools   int
	Points  int64
	Regions []RegionInfo
}

// RegionInfo is one region's pools, points and spans (one per GPU filter; none if not known whole).
type RegionInfo struct {
	Provider, Region string
	Pools            int
	Points           int64
	Spans            []Span
}

// ErrNoCache is returned by Stat when the data dir has no cache file.
var ErrNoCache = errors.New("no history cache")

// Stat reads the cache in dataDir without changing it; a file that is not one is reported, not moved.
func Stat(ctx context.Context, dataDir string) (Info, error) {
	path := Path(dataDir)
	info := Info{Path: path}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return info, fmt.Errorf("%w at %s", ErrNoCache, path)
	}
	if err != nil {
		return info, err
	}
	info.Size = fi.Size()
	if wal, err := os.Stat(path + "-wal"); err == nil {
		info.Size += wal.Size()
	}
	db, err := sqlitedb.OpenReadOnly(ctx, path, historySchema)
	if err != nil {
		return info, err
	}
	defer db.Close()
	if err := db.Newer(historySchema); err != nil {
		return info, err
	}
	info.Version = db.Version
	byRegion := map[[2]string]*RegionInfo{}
	region := func(p, r string) *RegionInfo {
		k := [2]string{p, r}
		ri := byRegion[k]
		if ri == nil {
			ri = &RegionInfo{Provider: p, Region: r}
			byRegion[k] = ri
		}
		return ri
	}
	rows, err := db.QueryContext(ctx, `SELECT p.provider, p.region, COUNT(DISTINCT p.id), COALESCE(SUM(c.n), 0)
		FROM pools p LEFT JOIN chunks c ON c.pool = p.id GROUP BY p.provider, p.region`)
	err = sqlitedb.EachRow(rows, err, func() error {
		var p, r string
		var pools int
		var points int64
		if err := rows.Scan(&p, &r, &pools, &points); err != nil {
			return err
		}
		ri := region(p, r)
		ri.Pools, ri.Points = pools, points
		info.Pools += pools
		info.Points += points
		return nil
	})
	if err != nil {
		return info, fmt.Errorf("read %s: %w", path, err)
	}
	srows, err := db.QueryContext(ctx, `SELECT provider, region, gpus, from_at, until_at FROM spans ORDER BY provider, region, gpus`)
	err = sqlitedb.EachRow(srows, err, func() error {
		var p string
		var s Span
		if err := scanSpan(srows, &s, &p); err != nil {
			return err
		}
		ri := region(p, s.Region)
		ri.Spans = append(ri.Spans, s)
		return nil
	})
	if err != nil {
		return info, fmt.Errorf("read %s: %w", path, err)
	}
	for _, ri := range byRegion {
		info.Regions = append(info.Regions, *ri)
	}
	slices.SortFunc(info.Regions, func(a, b RegionInfo) int {
		return cmp.Or(strings.Compare(a.Provider, b.Provider), strings.Compare(a.Region, b.Region))
	})
	return info, nil
}

// Load returns the provider's regions whose span covers q's GPUs (the latest
// each), their pools q matches, and points in [from, until] with the one at from.
func (c *History) Load(ctx context.Context, provider string, q domain.Query, from, until time.Time) (*Cached, error) {
	out, err := c.load(ctx, provider, q, from, until)
	if err != nil {
		c.noteDamage(err)
		return nil, err
	}
	return out, nil
}

func (c *History) load(ctx context.Context, provider string, q domain.Query, from, until time.Time) (*Cached, error) {
	out := &Cached{}
	spans, err := c.spans(ctx, provider, q)
	if err != nil {
		return nil, fmt.Errorf("read history cache: %w", err)
	}
	if len(spans) == 0 {
		return out, nil
	}
	out.Spans = spans
	covered := map[string]bool{}
	for _, s := range spans {
		covered[s.Region] = true
	}

	rows, err := c.db.QueryContext(ctx, `SELECT id, region, zone, instance_type, gpu_model, description FROM pools WHERE provider = ? ORDER BY id`, provider)
	index := map[int64]int{}
	err = sqlitedb.EachRow(rows, err, func() error {
		var id int64
		k := domain.PoolKey{Provider: provider}
		var model, desc string
		if err := rows.Scan(&id, &k.Region, &k.Zone, &k.InstanceType, &model, &desc); err != nil {
			return err
		}
		if !covered[k.Region] || !q.WantsGPU(model) {
			return nil
		}
		p, err := poolOf(k, desc)
		if err != nil {
			return fmt.Errorf("pool %s: %w", k, err)
		}
		index[id] = len(out.Pools)
		out.Pools = append(out.Pools, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read history cache: %w", err)
	}
	out.History = make([]series.Series, len(out.Pools))
	if len(out.Pools) == 0 {
		return out, nil
	}
	type points struct {
		at  []int64
		usd []float64
	}
	hist := make([]points, len(out.Pools))

	f, u := from.Unix(), until.Unix()
	chunks, err := c.db.QueryContext(ctx, `SELECT pool, data FROM chunks
		WHERE pool IN (SELECT id FROM pools WHERE provider = ?) AND day BETWEEN ? AND ? ORDER BY pool, day`, provider, dayOf(f), dayOf(u))
	var raw sql.RawBytes // the driver's copy, not another
	err = sqlitedb.EachRow(chunks, err, func() error {
		var id int64
		if err := chunks.Scan(&id, &raw); err != nil {
			return err
		}
		i, ok := index[id]
		if !ok {
			return nil
		}
		s := &hist[i]
		if s.at == nil {
			n, _ := chunkLen(raw)
			days := int(dayOf(u)-dayOf(f)) + 1
			s.at, s.usd = make([]int64, 0, n*days), make([]float64, 0, n*days)
		}
		if s.at, s.usd, err = appendChunk(s.at, s.usd, raw); err != nil {
			return fmt.Errorf("pool %s: %w", out.Pools[i].Key(), err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read history cache: %w", err)
	}

	// The price in force at from may be in an older chunk.
	before, err := c.db.PrepareContext(ctx, `SELECT data FROM chunks WHERE pool = ? AND day < ? ORDER BY day DESC LIMIT 1`)
	if err != nil {
		return nil, fmt.Errorf("read history cache: %w", err)
	}
	defer before.Close()
	for id, i := range index {
		s := &hist[i]
		if len(s.at) > 0 && s.at[0] <= f {
			continue
		}
		var b []byte
		switch err := before.QueryRowContext(ctx, id, dayOf(f)).Scan(&b); {
		case err == sql.ErrNoRows:
			continue
		case err != nil:
			return nil, fmt.Errorf("read history cache: %w", err)
		}
		at, usd, err := appendChunk(nil, nil, b)
		if err != nil {
			return nil, fmt.Errorf("read history cache: pool %s: %w", out.Pools[i].Key(), err)
		}
		if n := len(at); n > 0 {
			s.at = append([]int64{at[n-1]}, s.at...)
			s.usd = append([]float64{usd[n-1]}, s.usd...)
		}
	}
	for i, h := range hist {
		out.History[i] = clip(h.at, h.usd, f, u)
	}
	return out, nil
}

// clip keeps points in (from, until] and the one at from, sorting overlapping chunks' points.
func clip(at []int64, usd []float64, from, until int64) series.Series {
	if !series.Ascending(at) {
		at, usd = series.SortPoints(at, usd)
	}
	lo := sort.Search(len(at), func(i int) bool { return at[i] > from }) - 1
	if lo < 0 {
		lo = 0
	}
	hi := sort.Search(len(at), func(i int) bool { return at[i] > until })
	if lo >= hi {
		return series.Series{}
	}
	return series.NewSeries(at[lo:hi:hi], usd[lo:hi:hi])
}

// spans returns, per region q wants, the span covering q's GPUs that reaches latest.
func (c *History) spans(ctx context.Context, provider string, q domain.Query) ([]Span, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT region, gpus, from_at, until_at FROM spans WHERE provider = ?`, provider)
	best := map[string]Span{}
	err = sqlitedb.EachRow(rows, err, func() error {
		var s Span
		if err := scanSpan(rows, &s); err != nil {
			return err
		}
		if !q.WantsRegion(s.Region) || !s.CoversGPUs(q.GPUs) {
			return nil
		}
		if b, ok := best[s.Region]; !ok || s.Until.After(b.Until) || (s.Until.Equal(b.Until) && s.From.Before(b.From)) {
			best[s.Region] = s
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := slices.Collect(maps.Values(best))
	sort.Slice(out, func(i, j int) bool { return out[i].Region < out[j].Region })
	return out, nil
}

// poolOf reads a stored description; one stored undescribed is described from the catalog.
func poolOf(k domain.PoolKey, desc string) (domain.Pool, error) {
	if desc == "" {
		return poolFromKey(k), nil
	}
	var p domain.Pool
	if err := json.Unmarshal([]byte(desc), &p); err != nil {
		return domain.Pool{}, err
	}
	if p.Key() != k {
		return domain.Pool{}, fmt.Errorf("description names %s", p.Key())
	}
	return p, nil
}

// scanSpan reads a row's columns into also, then region, gpus, from_at, until_at into s.
func scanSpan(rows *sql.Rows, s *Span, also ...any) error {
	var gpus string
	var from, until int64
	if err := rows.Scan(append(also, &s.Region, &gpus, &from, &until)...); err != nil {
		return err
	}
	s.From, s.Until = time.Unix(0, from).UTC(), time.Unix(0, until).UTC()
	if gpus != "" {
		s.GPUs = strings.Split(gpus, ",")
	}
	return nil
}
