package feed

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"

	"github.com/gpumarket/gpumarket/series"
)

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
	if err != nil {
		return nil, fmt.Errorf("read history cache: %w", err)
	}
	index := map[int64]int{}
	for rows.Next() {
		var id int64
		var k domain.PoolKey
		var model, desc string
		if err := rows.Scan(&id, &k.Region, &k.Zone, &k.InstanceType, &model, &desc); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read history cache: %w", err)
		}
		k.Provider = provider
		if !covered[k.Region] || !q.WantsGPU(model) {
			continue
		}
		p, err := poolOf(k, desc)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("read history cache: pool %s: %w", k, err)
		}
		index[id] = len(out.Pools)
		out.Pools = append(out.Pools, p)
	}
	if err := rows.Close(); err != nil {
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
	if err != nil {
		return nil, fmt.Errorf("read history cache: %w", err)
	}
	var raw sql.RawBytes // the driver's copy, not another
	for chunks.Next() {
		var id int64
		if err := chunks.Scan(&id, &raw); err != nil {
			chunks.Close()
			return nil, fmt.Errorf("read history cache: %w", err)
		}
		i, ok := index[id]
		if !ok {
			continue
		}
		s := &hist[i]
		if s.at == nil {
			n, _ := chunkLen(raw)
			days := int(dayOf(u)-dayOf(f)) + 1
			s.at, s.usd = make([]int64, 0, n*days), make([]float64, 0, n*days)
		}
		if s.at, s.usd, err = appendChunk(s.at, s.usd, raw); err != nil {
			chunks.Close()
			return nil, fmt.Errorf("read history cache: pool %s: %w", out.Pools[i].Key(), err)
		}
	}
	if err := chunks.Close(); err != nil {
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
	if !ascending(at) {
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
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	best := map[string]Span{}
	for rows.Next() {
		var region, gpus string
		var from, until int64
		if err := rows.Scan(&region, &gpus, &from, &until); err != nil {
			return nil, err
		}
		s := Span{Region: region, From: time.Unix(0, from).UTC(), Until: time.Unix(0, until).UTC()}
		if gpus != "" {
			s.GPUs = strings.Split(gpus, ",")
		}
		if !q.WantsRegion(region) || !s.CoversGPUs(q.GPUs) {
			continue
		}
		if b, ok := best[region]; !ok || s.Until.After(b.Until) || (s.Until.Equal(b.Until) && s.From.Before(b.From)) {
			best[region] = s
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]Span, 0, len(best))
	for _, s := range best {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Region < out[j].Region })
	return out, nil
}

// poolOf reads a stored description; one stored undescribed is described from the catalog.
func poolOf(k domain.PoolKey, desc string) (domain.Pool, error) {
	if desc == "" {
		p := domain.Pool{Provider: k.Provider, Region: k.Region, Zone: k.Zone, InstanceType: k.InstanceType}
		if e, ok := domain.LookupGPU(k.InstanceType); ok {
			p.Cloud, p.GPU = e.Cloud, e.GPU
		}
		return p, nil
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
