package feed

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/series"
)

// Cache keeps what the hub fetched from the clouds across restarts: pool
// descriptions, price points and, per provider and region, the span of
// time the fetches covered. The hub seeds its pools from it at start and
// asks the clouds only for what the cache does not cover.
//
// A simulated source is never cached: it regenerates its history from its
// seed faster than it could be read back, and a history generated under
// one seed must never be shown under another (nor be mistaken for a
// cloud's).
type Cache interface {
	// Load returns what the cache holds of the provider's pools that q
	// matches (GPU and region filters): their descriptions, their price
	// points in [from, until] plus the one in force at from, and the span
	// each region covers for q's GPUs. It reads the disk; the hub calls
	// it without holding its lock.
	Load(ctx context.Context, provider string, q domain.Query, from, until time.Time) (*Cached, error)
	// Save hands the cache what a fetch brought, in the order it came.
	// The hub calls it with its lock held, for every event: it must not
	// wait for the disk. The cache owns the batch's slices.
	Save(Batch)
	// Trim drops what is older than the cache's retention, keeping each
	// pool's price in force at the cut. The hub calls it from its hourly
	// trim; like Save, it must not wait for the disk.
	Trim(now time.Time)
}

// Cached is what a cache holds of one provider.
type Cached struct {
	// Pools and History are parallel: History[i] is Pools[i]'s series,
	// owned by the caller.
	Pools   []domain.Pool
	History []series.Series
	// Spans are the regions whose history the cache covers for the
	// query's GPUs, one per region.
	Spans []Span
}

// Span is a stretch of time over which every price change of a region's
// pools (those of GPUs the span's filter selects) is known.
type Span struct {
	Region string
	// GPUs is the GPU filter of the fetches that covered the span; empty
	// for every GPU.
	GPUs        []string
	From, Until time.Time
}

// CoversGPUs reports whether the span, fetched under its GPU filter, holds
// every pool that a query for gpus (empty: every GPU) wants.
func (s Span) CoversGPUs(gpus []string) bool {
	if len(s.GPUs) == 0 {
		return true
	}
	if len(gpus) == 0 {
		return false
	}
	for _, g := range gpus {
		found := false
		for _, h := range s.GPUs {
			if strings.EqualFold(g, h) {
				found = true
				break
			}
		}
		if !found {
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

// Batch is what the hub hands a cache: new pool descriptions and price
// points of one event, or the spans one fetch covered.
type Batch struct {
	Provider string
	Pools    []domain.Pool
	Runs     []Run
	Spans    []Span
}

// regionCache is what the hub knows of one region of a cached source.
type regionCache struct {
	// from is the oldest time since which the hub holds the region's
	// history without a hole (zero: none yet).
	from time.Time
	// gap is what the region's failed fetches missed. Providers ask for
	// it again with the region's next fetch (domain.Gap); the hub
	// follows the same rule to know what that fetch covered.
	gap domain.Gap
	// cachedAt is where the cache's history of the region ended when the
	// hub started; zero once the region has answered since: until then
	// its prices are the cache's, as old as this.
	cachedAt time.Time
}

// sourceCache is a cached source's bookkeeping, under the hub's lock.
type sourceCache struct {
	regions map[string]*regionCache
	// reported and failed are the regions that sent an event, and an
	// error, during the fetch in flight.
	reported, failed map[string]bool
	// catchUp, when set, is where the cache's history ends: the next
	// fetch back-fills from there instead of the whole window.
	catchUp time.Time
	// tried is how far back the cache was last asked for history, so
	// that it is asked once per extension of the window.
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

// seedFromCache fills the hub with what the cache holds of each cloud
// source over the window, before the first snapshot: a restart shows the
// history it had at once, and the first fetch of the source back-fills
// only from where the cache's history ends.
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
		if until.After(now) {
			until = now
		}
		h.mergeCachedLocked(c, false)
		for _, s := range c.Spans {
			rc := st.cache.region(s.Region)
			rc.from = s.From
			rc.cachedAt = s.Until
			if rc.cachedAt.After(now) {
				rc.cachedAt = now
			}
		}
		if from.Before(want) {
			from = want
		}
		st.haveFrom = from
		st.cache.catchUp = until
		st.cache.tried = want
	}
}

// commonSpan is from the latest start to the earliest end of the spans:
// the hub claims history from the one and back-fills from the other. (The
// spans need not overlap: each region's history is whole over its own.)
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

// mergeCachedLocked folds cached pools and points into the hub. With
// keepDescriptions, pools the hub already describes keep their (newer)
// descriptions.
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
			// Join takes the cache's series whole when the pool has none
			// (a Series never changes once made).
			ps.series = ps.series.Join(c.History[i])
		}
		ps.changed = next
	}
	h.dirty = true
}

// extendFromCache reads from the cache the history of a grown window
// (Extend) that the hub does not hold yet, before the source is asked for
// it: the source back-fills only what the cache does not cover either.
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
	// Every region the hub holds must be covered from some time before
	// haveFrom up to it, without a hole.
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
		if s.From.After(from) {
			from = s.From
		}
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

// cacheEventLocked hands an event's descriptions and points to the cache
// and notes which regions reported and failed during the fetch.
func (h *Hub) cacheEventLocked(st *sourceState, ev domain.Event, runs []Run) {
	sc := st.cache
	if sc == nil {
		return
	}
	if ev.Region != "" {
		sc.reported[ev.Region] = true
		if ev.Err != nil {
			sc.failed[ev.Region] = true
		}
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

// beginFetchLocked starts the bookkeeping of a cached source's fetch.
func (st *sourceState) beginFetchLocked() {
	if sc := st.cache; sc != nil {
		sc.reported, sc.failed = map[string]bool{}, map[string]bool{}
	}
}

// settleCacheLocked records what a fetch of req covered, region by
// region: a region that did not fail covered req widened over its gap.
// A region whose history starts later than the source claims (one the
// cache did not hold, answering for the first time) makes the hub claim
// only from there, so that the window before it is back-filled: the hub
// never claims history that was not fetched.
func (h *Hub) settleCacheLocked(st *sourceState, req domain.FetchRequest, err error) {
	sc := st.cache
	if sc == nil {
		return
	}
	if err != nil {
		for r := range sc.failed {
			rc := sc.region(r)
			rc.gap = rc.gap.After(rc.gap.Widen(req), true)
		}
		return
	}
	for r := range sc.reported {
		sc.region(r)
	}
	var spans []Span
	gpus := sortedGPUs(h.opt.Query.GPUs)
	for r, rc := range sc.regions {
		w := rc.gap.Widen(req)
		failed := sc.failed[r]
		rc.gap = rc.gap.After(w, failed)
		if failed {
			continue
		}
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

func sortedGPUs(gpus []string) []string {
	if len(gpus) == 0 {
		return nil
	}
	out := append([]string(nil), gpus...)
	sort.Strings(out)
	return out
}
