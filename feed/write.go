package feed

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/sqlitedb"
	"github.com/gpumarket/gpumarket/series"
)

// pending waits for the writer: points kept as the runs they came in, sorted at the commit.
type pending struct {
	pools  map[domain.PoolKey]*pendingPool
	order  []domain.PoolKey
	spans  []providerSpan
	trim   time.Time
	points int
}

type pendingPool struct {
	desc *domain.Pool
	runs []Run
}

type providerSpan struct {
	provider string
	Span
}

func newPending() *pending { return &pending{pools: map[domain.PoolKey]*pendingPool{}} }

func (p *pending) empty() bool {
	return len(p.pools) == 0 && len(p.spans) == 0 && p.trim.IsZero()
}

func (p *pending) pool(k domain.PoolKey) *pendingPool {
	pp := p.pools[k]
	if pp == nil {
		pp = &pendingPool{}
		p.pools[k] = pp
		p.order = append(p.order, k)
	}
	return pp
}

// Save queues a batch and returns at once: the hub calls it under its lock.
func (c *History) Save(b Batch) {
	c.queue(func(p *pending) {
		for i := range b.Pools {
			d := b.Pools[i]
			p.pool(d.Key()).desc = &d
		}
		for _, r := range b.Runs {
			if len(r.At) == 0 || len(r.At) != len(r.USD) {
				continue
			}
			pp := p.pool(r.Pool)
			pp.runs = append(pp.runs, r)
			p.points += len(r.At)
		}
		for _, s := range b.Spans {
			p.spans = append(p.spans, providerSpan{provider: b.Provider, Span: s})
		}
	})
}

// Trim queues a trim to the retention before now.
func (c *History) Trim(now time.Time) { c.queue(func(p *pending) { p.trim = now }) }

// queue changes what is pending and wakes the writer, unless closed or failed.
func (c *History) queue(change func(*pending)) {
	c.mu.Lock()
	if c.closed || c.failed != nil {
		c.mu.Unlock()
		return
	}
	change(c.pend)
	c.mu.Unlock()
	poke(c.kick)
}

// poke wakes ch's reader unless a wake-up is pending already.
func poke(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Flush commits what is queued and reports the first write failure (after which nothing is written).
func (c *History) Flush() error {
	c.flush()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed
}

// writer commits FlushEvery after the first news, so a back-fill makes few transactions.
func (c *History) writer() {
	defer close(c.stopped)
	for {
		select {
		case <-c.stop:
			c.flush()
			return
		case <-c.kick:
		}
		select {
		case <-c.stop: // flushed and returned at the loop's top
		case <-time.After(c.opt.FlushEvery):
		}
		c.flush()
	}
}

// flush commits what is queued; flushMu makes a Flush and the writer take turns.
func (c *History) flush() {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	p := c.pend
	c.pend = newPending()
	failed := c.failed
	c.mu.Unlock()
	if p.empty() || failed != nil {
		return
	}
	err := c.write(context.Background(), p)
	if err == nil && !p.trim.IsZero() {
		_, err = c.db.Exec(`PRAGMA incremental_vacuum`)
	}
	if err != nil {
		c.noteDamage(err)
		// Something queued is lost, and later spans could claim it: write nothing more.
		c.opt.Logger.Warn("history cache: write failed; nothing more is cached until restart", "file", c.path, "err", err)
		c.mu.Lock()
		c.failed = err
		c.pend = newPending()
		c.mu.Unlock()
		c.ids = map[domain.PoolKey]int64{}
	}
}

// write commits in one transaction: points first, then the spans that claim them, then the trim.
func (c *History) write(ctx context.Context, p *pending) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	ids := map[domain.PoolKey]int64{}
	for _, k := range p.order {
		pp := p.pools[k]
		id, err := c.poolID(ctx, tx, k, pp.desc)
		if err != nil {
			return err
		}
		ids[k] = id
		if len(pp.runs) > 0 {
			if err := writePoints(ctx, tx, id, pp.runs); err != nil {
				return fmt.Errorf("points of %s: %w", k, err)
			}
		}
	}
	for _, s := range p.spans {
		if err := writeSpan(ctx, tx, s); err != nil {
			return fmt.Errorf("span of %s %s: %w", s.provider, s.Region, err)
		}
	}
	if !p.trim.IsZero() {
		if err := trim(ctx, tx, p.trim.Add(-c.opt.Retention).Unix()); err != nil {
			return fmt.Errorf("trim: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	maps.Copy(c.ids, ids)
	if !p.trim.IsZero() {
		c.ids = map[domain.PoolKey]int64{} // the trim may have dropped pools
	}
	return nil
}

// poolID returns the pool's row id, making or updating the row as needed.
func (c *History) poolID(ctx context.Context, tx *sql.Tx, k domain.PoolKey, desc *domain.Pool) (int64, error) {
	if desc == nil {
		if id, ok := c.ids[k]; ok {
			return id, nil
		}
	}
	model, text := "", ""
	if desc != nil {
		b, err := json.Marshal(desc)
		if err != nil {
			return 0, fmt.Errorf("describe %s: %w", k, err)
		}
		model, text = desc.GPU.Model, string(b)
	} else if e, ok := domain.LookupGPU(k.InstanceType); ok {
		model = e.GPU.Model
	}
	var id int64
	err := tx.QueryRowContext(ctx, `SELECT id FROM pools WHERE provider = ? AND region = ? AND zone = ? AND instance_type = ?`,
		k.Provider, k.Region, k.Zone, k.InstanceType).Scan(&id)
	switch {
	case err == sql.ErrNoRows:
		res, err := tx.ExecContext(ctx, `INSERT INTO pools (provider, region, zone, instance_type, gpu_model, description) VALUES (?, ?, ?, ?, ?, ?)`,
			k.Provider, k.Region, k.Zone, k.InstanceType, model, text)
		if err != nil {
			return 0, fmt.Errorf("add pool %s: %w", k, err)
		}
		return res.LastInsertId()
	case err != nil:
		return 0, fmt.Errorf("pool %s: %w", k, err)
	}
	if desc != nil {
		if _, err := tx.ExecContext(ctx, `UPDATE pools SET gpu_model = ?, description = ? WHERE id = ?`, model, text, id); err != nil {
			return 0, fmt.Errorf("describe %s: %w", k, err)
		}
	}
	return id, nil
}

func writePoints(ctx context.Context, tx *sql.Tx, pool int64, runs []Run) error {
	var at []int64
	var usd []float64
	for _, r := range runs {
		at = append(at, r.At...)
		usd = append(usd, r.USD...)
	}
	at, usd = series.SortPoints(at, usd)
	first, last := dayOf(at[0]), dayOf(at[len(at)-1])
	old := map[int64][]byte{}
	rows, err := tx.QueryContext(ctx, `SELECT day, data FROM chunks WHERE pool = ? AND day BETWEEN ? AND ?`, pool, first, last)
	err = sqlitedb.EachRow(rows, err, func() error {
		var d int64
		var b []byte
		err := rows.Scan(&d, &b)
		old[d] = b
		return err
	})
	if err != nil {
		return err
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO chunks (pool, day, n, data) VALUES (?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for i := 0; i < len(at); {
		d := dayOf(at[i])
		j := i + 1
		for j < len(at) && dayOf(at[j]) == d {
			j++
		}
		nAt, nUSD := at[i:j], usd[i:j]
		if b, ok := old[d]; ok {
			oAt, oUSD, err := appendChunk(nil, nil, b)
			if err != nil {
				return fmt.Errorf("chunk of day %d: %w", d, err)
			}
			nAt, nUSD = mergePoints(oAt, oUSD, nAt, nUSD)
		}
		if _, err := stmt.ExecContext(ctx, pool, d, len(nAt), encodeChunk(nAt, nUSD)); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// gpuKey is a GPU filter as stored: sorted, comma-joined, "" for every GPU.
func gpuKey(gpus []string) string { return strings.Join(slices.Sorted(slices.Values(gpus)), ",") }

// writeSpan folds a span into its region's for the same filter: touching spans
// join; a later one replaces a non-touching old one (the gap was never fetched).
func writeSpan(ctx context.Context, tx *sql.Tx, s providerSpan) error {
	from, until := s.From.UnixNano(), s.Until.UnixNano()
	if until < from {
		return nil
	}
	g := gpuKey(s.GPUs)
	var oFrom, oUntil int64
	err := tx.QueryRowContext(ctx, `SELECT from_at, until_at FROM spans WHERE provider = ? AND region = ? AND gpus = ?`, s.provider, s.Region, g).Scan(&oFrom, &oUntil)
	switch {
	case err == sql.ErrNoRows:
	case err != nil:
		return err
	case from <= oUntil && until >= oFrom:
		from, until = min(from, oFrom), max(until, oUntil)
	case until < oFrom:
		return nil
	}
	_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO spans (provider, region, gpus, from_at, until_at) VALUES (?, ?, ?, ?, ?)`, s.provider, s.Region, g, from, until)
	return err
}

// trim drops history before cut, first carrying each pool's price at cut into
// the cut's day; spans start at cut at the earliest.
func trim(ctx context.Context, tx *sql.Tx, cut int64) error {
	cutDay := dayOf(cut)
	rows, err := tx.QueryContext(ctx, `SELECT pool, MAX(day) FROM chunks WHERE day < ? GROUP BY pool`, cutDay)
	type last struct{ pool, day int64 }
	var lasts []last
	err = sqlitedb.EachRow(rows, err, func() error {
		var l last
		err := rows.Scan(&l.pool, &l.day)
		lasts = append(lasts, l)
		return err
	})
	if err != nil {
		return err
	}
	for _, l := range lasts {
		cAt, cUSD, err := readChunk(ctx, tx, l.pool, cutDay)
		if err != nil {
			return err
		}
		if len(cAt) > 0 && cAt[0] <= cut {
			continue // the price in force at cut is in the cut's day
		}
		oAt, oUSD, err := readChunk(ctx, tx, l.pool, l.day)
		if err != nil {
			return err
		}
		if len(oAt) == 0 {
			continue
		}
		nAt, nUSD := mergePoints([]int64{oAt[len(oAt)-1]}, []float64{oUSD[len(oUSD)-1]}, cAt, cUSD)
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO chunks (pool, day, n, data) VALUES (?, ?, ?, ?)`, l.pool, cutDay, len(nAt), encodeChunk(nAt, nUSD)); err != nil {
			return err
		}
	}
	for _, st := range []struct {
		q    string
		args []any
	}{
		{`DELETE FROM chunks WHERE day < ?`, []any{cutDay}},
		{`DELETE FROM spans WHERE until_at <= ?`, []any{cut * 1e9}},
		{`UPDATE spans SET from_at = ? WHERE from_at < ?`, []any{cut * 1e9, cut * 1e9}},
		{`DELETE FROM pools WHERE NOT EXISTS (SELECT 1 FROM chunks WHERE chunks.pool = pools.id)`, nil},
	} {
		if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
			return err
		}
	}
	return nil
}

// readChunk decodes a pool's chunk of a day; no chunk is no points.
func readChunk(ctx context.Context, tx *sql.Tx, pool, day int64) ([]int64, []float64, error) {
	var b []byte
	err := tx.QueryRowContext(ctx, `SELECT data FROM chunks WHERE pool = ? AND day = ?`, pool, day).Scan(&b)
	if err == sql.ErrNoRows {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	at, usd, err := appendChunk(nil, nil, b)
	if err != nil {
		return nil, nil, fmt.Errorf("chunk of day %d: %w", day, err)
	}
	return at, usd, nil
}

// A chunk is one pool's points of one UTC day: a version byte, the count, then
// each point's time (a signed varint, then unsigned steps) and its float64
// price. About 10 bytes a point, decoded without allocation.
const chunkVersion = 1

const daySeconds = 24 * 60 * 60

func dayOf(at int64) int64 {
	d := at / daySeconds
	if at < 0 && at%daySeconds != 0 {
		d--
	}
	return d
}

var errChunk = errors.New("damaged price chunk")

// encodeChunk packs points, ascending and unique in at.
func encodeChunk(at []int64, usd []float64) []byte {
	buf := make([]byte, 0, 1+binary.MaxVarintLen64+len(at)*10)
	buf = append(buf, chunkVersion)
	buf = binary.AppendUvarint(buf, uint64(len(at)))
	for i := range at {
		if i == 0 {
			buf = binary.AppendVarint(buf, at[0])
		} else {
			buf = binary.AppendUvarint(buf, uint64(at[i]-at[i-1]))
		}
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(usd[i]))
	}
	return buf
}

func chunkLen(b []byte) (int, error) {
	if len(b) < 2 || b[0] != chunkVersion {
		return 0, errChunk
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b))/9 {
		return 0, errChunk
	}
	return int(n), nil
}

// appendChunk decodes a chunk onto at and usd, refusing anything encodeChunk
// would not write.
func appendChunk(at []int64, usd []float64, b []byte) ([]int64, []float64, error) {
	n, err := chunkLen(b)
	if err != nil {
		return at, usd, err
	}
	_, k := binary.Uvarint(b[1:])
	p := 1 + k
	var t int64
	for i := 0; i < n; i++ {
		if i == 0 {
			v, k := binary.Varint(b[p:])
			if k <= 0 {
				return at, usd, errChunk
			}
			t, p = v, p+k
		} else {
			d, k := binary.Uvarint(b[p:])
			if k <= 0 || d == 0 || d > math.MaxInt64/2 || t > math.MaxInt64-int64(d) {
				return at, usd, errChunk
			}
			t, p = t+int64(d), p+k
		}
		if len(b)-p < 8 {
			return at, usd, errChunk
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64(b[p:]))
		p += 8
		if !(v >= 0) || math.IsInf(v, 0) {
			return at, usd, fmt.Errorf("%w: price %v", errChunk, v)
		}
		at, usd = append(at, t), append(usd, v)
	}
	if p != len(b) {
		return at, usd, errChunk
	}
	return at, usd, nil
}

// mergePoints merges b's points into a's, b's winning for the same second.
func mergePoints(aAt []int64, aUSD []float64, bAt []int64, bUSD []float64) ([]int64, []float64) {
	return series.SortPoints(slices.Concat(aAt, bAt), slices.Concat(aUSD, bUSD))
}
