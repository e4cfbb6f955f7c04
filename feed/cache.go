package feed

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/series"
)

// Cache keeps the clouds' pools, prices and covered spans across restarts, so
// the hub asks only for what it lacks. A simulated source is never cached: it
// regenerates faster than a read, and one seed's history must not show under another.
type Cache interface {
	// Load returns the provider's cached pools that q matches, their points in
	// [from, until] plus the one in force at from, and each region's span. It reads the disk.
	Load(ctx context.Context, provider string, q domain.Query, from, until time.Time) (*Cached, error)
	// Save takes a fetch's batch; called under the hub's lock, it must not wait for the disk.
	Save(Batch)
	// Trim drops what is older than retention, keeping each pool's price at the cut; it must not wait either.
	Trim(now time.Time)
}

// Cached is what a cache holds of one provider.
type Cached struct {
	// Pools and History are parallel; the caller owns History.
	Pools   []domain.Pool
	History []series.Series
	Spans   []Span
}

// Span is a stretch over which every price change of a region's pools (of its GPU filter) is known.
type Span struct {
	Region string
	// GPUs is the fetches' GPU filter; empty for every GPU.
	GPUs        []string
	From, Until time.Time
}

// CoversGPUs reports whether the span holds every pool a query for gpus wants.
func (s Span) CoversGPUs(gpus []string) bool {
	if len(s.GPUs) == 0 {
		return true
	}
	if len(gpus) == 0 {
		return false
	}
	for _, g := range gpus {
		if !slices.ContainsFunc(s.GPUs, func(h string) bool { return strings.EqualFold(g, h) }) {
			return false
		}
	}
	return true
}

// Run is a pool's price points from one event, sorted or not.
type Run struct {
	Pool domain.PoolKey
	At   []int64 // Unix seconds
	USD  []float64
}

// Batch is an event's new descriptions and points, or the spans one fetch covered.
type Batch struct {
	Provider string
	Pools    []domain.Pool
	Runs     []Run
	Spans    []Span
}

type regionCache struct {
	// from: since when the region's history is held without a hole (zero: none).
	from time.Time
	// cachedAt: where the cache's history ended at start, until the region answers (then zero).
	cachedAt time.Time
}

type sourceCache struct {
	regions  map[string]*regionCache
	reported map[string]bool
	// catchUp: where the cache's history ends; the next fetch back-fills from there.
	catchUp time.Time
	// tried: how far back the cache was last asked, once per extension.
	tried time.Time
}

func (sc *sourceCache) region(r string) *regionCache {
	rc := sc.regions[r]
	if rc == nil {
		rc = &regionCache{}
		sc.regions[r] = rc
	}
	return rc
}

// seedFromCache fills the hub from the cache before the first snapshot, so a
// restart shows its history at once and back-fills only the rest.
func (h *Hub) seedFromCache() {
	if h.opt.Cache == nil {
		return
	}
	now := h.opt.Now()
	want := now.Add(-h.window)
	for _, p := range h.sources {
		st := h.status[p.Name()]
		if st.cache == nil {
			continue
		}
		c, err := h.opt.Cache.Load(context.Background(), p.Name(), h.opt.Query, want, now)
		if err != nil {
			h.opt.Logger.Warn("history cache not read: fetching the whole window", "provider", p.Name(), "err", err)
			continue
		}
		from, until, ok := commonSpan(c.Spans)
		if !ok || !until.After(want) {
			continue // the cache's history ends before the window starts
		}
		until = domain.Earlier(now, until)
		h.mergeCachedLocked(c, false)
		for _, s := range c.Spans {
			rc := st.cache.region(s.Region)
			rc.from = s.From
			rc.cachedAt = domain.Earlier(now, s.Until)
		}
		st.haveFrom = domain.Later(want, from)
		st.cache.catchUp = until
		st.cache.tried = want
	}
}

// commonSpan is the latest start to the earliest end: claimed from one, back-filled from the other.
func commonSpan(spans []Span) (from, until time.Time, ok bool) {
	for i, s := range spans {
		if i == 0 || s.From.After(from) {
			from = s.From
		}
		if i == 0 || s.Until.Before(until) {
			until = s.Until
		}
	}
	return from, until, len(spans) > 0
}

// mergeCachedLocked folds cached pools in; with keepDescriptions the hub's newer ones stay.
func (h *Hub) mergeCachedLocked(c *Cached, keepDescriptions bool) {
	next := h.seq + 1
	for i, pool := range c.Pools {
		k := pool.Key()
		_, known := h.pools[k]
		ps := h.poolLocked(k)
		if !known || !keepDescriptions {
			ps.pool = pool
		}
		if i < len(c.History) && c.History[i].Len() > 0 {
			ps.series = ps.series.Join(c.History[i])
		}
		ps.changed = next
	}
	h.dirty = true
}

// extendFromCache reads a grown window's missing history from the cache before asking the source.
func (h *Hub) extendFromCache(ctx context.Context, name string) {
	h.mu.Lock()
	st := h.status[name]
	sc := st.cache
	want := h.opt.Now().Add(-h.window)
	haveFrom := st.haveFrom
	if sc == nil || !sc.catchUp.IsZero() || haveFrom.IsZero() || !want.Before(haveFrom) || (!sc.tried.IsZero() && !want.Before(sc.tried)) {
		h.mu.Unlock()
		return
	}
	sc.tried = want
	var regions []string
	for r, rc := range sc.regions {
		if !rc.from.IsZero() {
			regions = append(regions, r)
		}
	}
	h.mu.Unlock()
	if len(regions) == 0 {
		return
	}
	c, err := h.opt.Cache.Load(ctx, name, h.opt.Query, want, haveFrom)
	if err != nil {
		h.opt.Logger.Warn("history cache not read", "provider", name, "err", err)
		return
	}
	// Every held region must be covered from before haveFrom, without a hole.
	by := map[string]Span{}
	for _, s := range c.Spans {
		by[s.Region] = s
	}
	from := want
	for _, r := range regions {
		s, ok := by[r]
		if !ok || s.Until.Before(haveFrom) || !s.From.Before(haveFrom) {
			return
		}
		from = domain.Later(s.From, from)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !st.haveFrom.Equal(haveFrom) {
		return // trimmed meanwhile: what was read no longer joins up
	}
	h.mergeCachedLocked(c, true)
	st.haveFrom = from
	for _, r := range regions {
		if rc := sc.regions[r]; rc.from.After(from) {
			rc.from = from
		}
	}
}

// cacheEventLocked hands an event to the cache and notes the regions that reported or failed.
func (h *Hub) cacheEventLocked(st *sourceState, ev domain.Event, runs []Run) {
	sc := st.cache
	if sc == nil {
		return
	}
	if ev.Region != "" {
		sc.reported[ev.Region] = true
	}
	for _, p := range ev.Pools {
		sc.reported[p.Region] = true
	}
	for _, r := range runs {
		sc.reported[r.Pool.Region] = true
	}
	if len(ev.Pools) == 0 && len(runs) == 0 {
		return
	}
	h.opt.Cache.Save(Batch{Provider: st.Provider, Pools: append([]domain.Pool(nil), ev.Pools...), Runs: runs})
}

func (st *sourceState) beginFetchLocked() {
	st.regionFailed = map[string]bool{}
	if sc := st.cache; sc != nil {
		sc.reported = map[string]bool{}
	}
}

// settleCacheLocked records what a fetch covered per region: req widened over
// its gap; call it before settleGapsLocked. A region first answering later than claimed lowers the claim, so the
// hub never claims history it did not fetch.
func (h *Hub) settleCacheLocked(st *sourceState, req domain.FetchRequest, err error) {
	sc := st.cache
	if sc == nil || err != nil {
		return
	}
	for r := range sc.reported {
		sc.region(r)
	}
	var spans []Span
	gpus := slices.Sorted(slices.Values(h.opt.Query.GPUs))
	for r, rc := range sc.regions {
		if st.regionFailed[r] {
			continue
		}
		w := st.missed[r].Widen(req)
		rc.cachedAt = time.Time{}
		if rc.from.IsZero() || w.Since.Before(rc.from) {
			rc.from = w.Since
		}
		spans = append(spans, Span{Region: r, GPUs: gpus, From: w.Since, Until: w.Until})
		if rc.from.After(st.haveFrom) {
			st.haveFrom = rc.from
		}
	}
	sc.catchUp = time.Time{}
	sort.Slice(spans, func(i, j int) bool { return spans[i].Region < spans[j].Region })
	if len(spans) > 0 {
		h.opt.Cache.Save(Batch{Provider: st.Provider, Spans: spans})
	}
}
