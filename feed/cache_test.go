package feed

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/series"
)

// memCache is a Cache in memory, keeping what the history package keeps
// by the same rules (spans join when they touch; a later one apart
// replaces), so the hub's side can be tested alone.
type memCache struct {
	mu      sync.Mutex
	pools   map[domain.PoolKey]domain.Pool
	series  map[domain.PoolKey]series.Series
	spans   map[string]Span // by provider/region
	saved   []Batch
	loads   []time.Time // the from of each Load
	trims   int
	loadErr error
}

func newMemCache() *memCache {
	return &memCache{pools: map[domain.PoolKey]domain.Pool{}, series: map[domain.PoolKey]series.Series{}, spans: map[string]Span{}}
}

func (m *memCache) Load(_ context.Context, provider string, q domain.Query, from, until time.Time) (*Cached, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loads = append(m.loads, from)
	if m.loadErr != nil {
		return nil, m.loadErr
	}
	c := &Cached{}
	covered := map[string]bool{}
	for k, s := range m.spans {
		if k[:len(provider)+1] == provider+"/" && q.WantsRegion(s.Region) && s.CoversGPUs(q.GPUs) {
			c.Spans = append(c.Spans, s)
			covered[s.Region] = true
		}
	}
	sort.Slice(c.Spans, func(i, j int) bool { return c.Spans[i].Region < c.Spans[j].Region })
	for k, p := range m.pools {
		if k.Provider != provider || !covered[k.Region] || !q.WantsGPU(p.GPU.Model) {
			continue
		}
		s := m.series[k]
		var at []int64
		var usd []float64
		for i := range s.Len() {
			t, v := s.Point(i)
			if t > until.Unix() {
				break
			}
			if i+1 < s.Len() {
				if next, _ := s.Point(i + 1); t <= from.Unix() && next <= from.Unix() {
					continue
				}
			}
			at, usd = append(at, t), append(usd, v)
		}
		c.Pools = append(c.Pools, p)
		c.History = append(c.History, series.NewSeries(at, usd))
	}
	return c, nil
}

func (m *memCache) Save(b Batch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.saved = append(m.saved, b)
	for _, p := range b.Pools {
		m.pools[p.Key()] = p
	}
	for _, r := range b.Runs {
		m.series[r.Pool] = m.series[r.Pool].Merge(r.At, r.USD)
		if _, ok := m.pools[r.Pool]; !ok {
			m.pools[r.Pool] = poolFromKey(r.Pool)
		}
	}
	for _, s := range b.Spans {
		k := b.Provider + "/" + s.Region
		if o, ok := m.spans[k]; ok && !s.From.After(o.Until) && !s.Until.Before(o.From) {
			if o.From.Before(s.From) {
				s.From = o.From
			}
			if o.Until.After(s.Until) {
				s.Until = o.Until
			}
		}
		m.spans[k] = s
	}
}

func (m *memCache) Trim(time.Time) {
	m.mu.Lock()
	m.trims++
	m.mu.Unlock()
}

func (m *memCache) span(provider, region string) (Span, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.spans[provider+"/"+region]
	return s, ok
}

func (m *memCache) batches() []Batch {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Batch(nil), m.saved...)
}

// warm puts 6 hours of hourly history of the test pool in the cache, up
// to end, covering region r1.
func (m *memCache) warm(end time.Time) {
	var at []int64
	var usd []float64
	for h := 6; h >= 1; h-- {
		at = append(at, end.Add(-time.Duration(h)*time.Hour).Unix())
		usd = append(usd, float64(h))
	}
	at = append(at, end.Unix())
	usd = append(usd, 0.5)
	m.Save(Batch{Provider: "fake", Pools: []domain.Pool{pool()}, Runs: []Run{{Pool: key, At: at, USD: usd}},
		Spans: []Span{{Region: "r1", From: end.Add(-6 * time.Hour), Until: end}}})
	m.saved = nil
}

type clock struct{ unix atomic.Int64 }

func (c *clock) now() time.Time      { return time.Unix(c.unix.Load(), 0).UTC() }
func (c *clock) set(t time.Time)     { c.unix.Store(t.Unix()) }
func newClock(t time.Time) *clock    { c := &clock{}; c.set(t); return c }
func onlyWoken(string) time.Duration { return 24 * time.Hour }

// A restart with a warm cache: the first snapshot, before any fetch,
// holds the cached pool and its history; the source is asked only from
// where the cache's history ends (a back-fill of the gap, with progress),
// then polled live; what it sent is saved with the span it covered.
func TestSeedFromCacheAndBackfillOnlyTheGap(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cachedEnd := now.Add(-40 * time.Minute)
	mc := newMemCache()
	mc.warm(cachedEnd)
	clk := newClock(now)
	src := &fakeSource{name: "fake"}
	src.answer = func(n int, req domain.FetchRequest, sink domain.Sink) error {
		if n == 1 {
			sink(domain.Event{Region: "r1", Points: []domain.PricePoint{{Pool: key, At: now.Add(-10 * time.Minute), USDHour: 42}},
				Progress: &domain.Progress{Done: 1, Total: 1}})
		}
		return nil
	}
	h := New([]domain.Provider{src}, Options{Query: domain.Query{Window: 4 * time.Hour}, Interval: onlyWoken,
		PublishEvery: time.Millisecond, Now: clk.now, Cache: mc})

	first := h.Snapshot()
	pv, ok := first.Pool(key.String())
	if !ok || pv.GPU.Model != "H100" || pv.History.Len() < 5 {
		t.Fatalf("first snapshot: %+v %v, want the cached pool with its history", pv, ok)
	}
	if at, usd, _ := pv.History.Last(); at != cachedEnd.Unix() || usd != 0.5 {
		t.Fatalf("cached history ends at %v with %v", time.Unix(at, 0).UTC(), usd)
	}
	if !first.HistoryFrom.Equal(now.Add(-4*time.Hour)) || first.Ready {
		t.Fatalf("first snapshot: HistoryFrom %s Ready %v, want the window's start, not ready", first.HistoryFrom, first.Ready)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	sub := h.Subscribe(ctx)
	waitFor(t, sub, func(s *Snapshot) bool { return s.Ready })
	clk.set(now.Add(time.Minute))
	h.Refresh()
	waitFor(t, sub, func(s *Snapshot) bool { st, _ := s.Source("fake"); return st.LastOK.Equal(now.Add(time.Minute)) })
	reqs := src.requests()
	if !reqs[0].Backfill || !reqs[0].Since.Equal(cachedEnd) || !reqs[0].Until.Equal(now) {
		t.Fatalf("first fetch = %+v, want a back-fill from the cache's end %s", reqs[0], cachedEnd)
	}
	if reqs[1].Backfill || !reqs[1].Since.Equal(now) {
		t.Fatalf("second fetch = %+v, want a live poll from %s", reqs[1], now)
	}
	// The gap's point and the span were handed to the cache.
	var runs, spans int
	for _, b := range mc.batches() {
		runs += len(b.Runs)
		spans += len(b.Spans)
	}
	if runs != 1 || spans < 1 {
		t.Fatalf("saved %d runs and %d spans, want the gap's run and its span", runs, spans)
	}
	if s, _ := mc.span("fake", "r1"); !s.From.Equal(cachedEnd.Add(-6*time.Hour)) || !s.Until.Equal(now.Add(time.Minute)) {
		t.Fatalf("span = %+v, want it joined to the cached one", s)
	}
}

// A region that answers but was not in the cache (the query now asks a
// region the earlier run did not) holds only the gap's history: the hub
// then claims history only from the cache's end, so the window before it
// is back-filled for every region.
func TestUncachedRegionBackfillsTheWindow(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cachedEnd := now.Add(-time.Hour)
	mc := newMemCache()
	mc.warm(cachedEnd)
	k2 := domain.PoolKey{Provider: "fake", Region: "r2", Zone: "r2a", InstanceType: "p5.48xlarge"}
	src := &fakeSource{name: "fake"}
	src.answer = func(n int, req domain.FetchRequest, sink domain.Sink) error {
		sink(domain.Event{Region: "r1", Progress: &domain.Progress{Done: 1, Total: 1}})
		sink(domain.Event{Region: "r2", Points: []domain.PricePoint{{Pool: k2, At: req.Since, USDHour: 7}}})
		return nil
	}
	h := New([]domain.Provider{src}, Options{Query: domain.Query{Window: 4 * time.Hour}, Interval: onlyWoken,
		PublishEvery: time.Millisecond, Now: newClock(now).now, Cache: mc})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	sub := h.Subscribe(ctx)
	waitFor(t, sub, func(s *Snapshot) bool {
		return src.calls.Load() >= 2 && s.Ready && s.HistoryFrom.Equal(now.Add(-4*time.Hour))
	})
	reqs := src.requests()
	if !reqs[0].Since.Equal(cachedEnd) {
		t.Fatalf("first fetch from %s, want the cache's end %s", reqs[0].Since, cachedEnd)
	}
	if !reqs[1].Backfill || !reqs[1].Since.Equal(now.Add(-4*time.Hour)) || !reqs[1].Until.Equal(cachedEnd) {
		t.Fatalf("second fetch = %+v, want a back-fill of [window start, %s]", reqs[1], cachedEnd)
	}
	if s, _ := mc.span("fake", "r2"); !s.From.Equal(now.Add(-4*time.Hour)) || !s.Until.Equal(now) {
		t.Fatalf("r2's span = %+v, want the whole window [%s, %s]", s, now.Add(-4*time.Hour), now)
	}
}

// The cache's spans follow each region's failures as the providers do
// (domain.Gap): a region that failed a poll is not covered by it, and
// its next good fetch covers the span it missed.
func TestFailedRegionIsNotCovered(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clk := newClock(now)
	mc := newMemCache()
	src := &fakeSource{name: "fake"}
	src.answer = func(n int, req domain.FetchRequest, sink domain.Sink) error {
		sink(domain.Event{Region: "r1", Progress: &domain.Progress{Done: 1, Total: 1}})
		if n == 2 {
			sink(domain.Event{Region: "r2", Err: errors.New("throttled")})
		} else {
			sink(domain.Event{Region: "r2", Progress: &domain.Progress{Done: 1, Total: 1}})
		}
		return nil
	}
	h := New([]domain.Provider{src}, Options{Query: domain.Query{Window: time.Hour}, Interval: onlyWoken,
		PublishEvery: time.Millisecond, Now: clk.now, Cache: mc})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	sub := h.Subscribe(ctx)
	waitFor(t, sub, func(s *Snapshot) bool { return s.Ready })
	poll := func(n int32, at time.Time) {
		clk.set(at)
		h.Refresh()
		waitFor(t, sub, func(*Snapshot) bool {
			var spans int
			for _, b := range mc.batches() {
				spans += len(b.Spans)
			}
			return src.calls.Load() >= n && spans >= int(n)
		})
	}
	poll(2, now.Add(time.Minute)) // r2 fails
	if s, _ := mc.span("fake", "r2"); !s.Until.Equal(now) {
		t.Fatalf("r2's span after its failed poll = %+v, want it to end at %s", s, now)
	}
	if s, _ := mc.span("fake", "r1"); !s.Until.Equal(now.Add(time.Minute)) {
		t.Fatalf("r1's span = %+v", s)
	}
	poll(3, now.Add(2*time.Minute)) // r2 answers: the missed minute is covered
	last := mc.batches()
	var r2 Span
	for _, b := range last {
		for _, s := range b.Spans {
			if s.Region == "r2" {
				r2 = s
			}
		}
	}
	if !r2.From.Equal(now) || !r2.Until.Equal(now.Add(2*time.Minute)) {
		t.Fatalf("r2's last span = %+v, want [%s, %s] (its gap and the poll)", r2, now, now.Add(2*time.Minute))
	}
}

// A cache whose history ends before the window starts is not used; nor
// is one that cannot be read; nor is one for a simulated source.
func TestCacheNotUsed(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		simulated bool
		end       time.Time
		loadErr   error
	}{
		{"older than the window", false, now.Add(-5 * time.Hour), nil},
		{"unreadable", false, now.Add(-time.Minute), errors.New("disk on fire")},
		{"simulated source", true, now.Add(-time.Minute), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := newMemCache()
			mc.warm(tc.end)
			mc.loadErr = tc.loadErr
			src := &descSource{fakeSource: fakeSource{name: "fake"}, simulated: tc.simulated}
			src.answer = func(n int, req domain.FetchRequest, sink domain.Sink) error {
				sink(domain.Event{Region: "r1", Points: []domain.PricePoint{{Pool: key, At: now, USDHour: 1}}})
				return nil
			}
			h := New([]domain.Provider{src}, Options{Query: domain.Query{Window: 4 * time.Hour}, Interval: onlyWoken,
				PublishEvery: time.Millisecond, Now: newClock(now).now, Cache: mc})
			if n := len(h.Snapshot().Pools); n != 0 {
				t.Fatalf("first snapshot has %d pools from the cache", n)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go h.Run(ctx)
			waitFor(t, h.Subscribe(ctx), func(s *Snapshot) bool { return s.Ready })
			if req := src.requests()[0]; !req.Backfill || !req.Since.Equal(now.Add(-4*time.Hour)) {
				t.Fatalf("first fetch = %+v, want the whole window", req)
			}
			if tc.simulated && (len(mc.loads) != 0 || len(mc.batches()) != 0) {
				t.Fatalf("a simulated source was cached: %d loads, %d saves", len(mc.loads), len(mc.batches()))
			}
		})
	}
}

type descSource struct {
	fakeSource
	simulated bool
}

func (d *descSource) Describe() domain.Descriptor {
	return domain.Descriptor{Name: d.name, Simulated: d.simulated}
}

// A window grown by Extend is read from the cache where it covers it;
// the source is asked only for the rest.
func TestExtendReadsTheCacheFirst(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	mc := newMemCache()
	mc.warm(now) // 6 h, up to now
	src := &fakeSource{name: "fake"}
	h := New([]domain.Provider{src}, Options{Query: domain.Query{Window: time.Hour}, Interval: onlyWoken,
		PublishEvery: time.Millisecond, Now: newClock(now).now, Cache: mc})
	if pv, _ := h.Snapshot().Pool(key.String()); pv == nil || pv.History.Len() != 2 {
		t.Fatalf("seeded 1 h: %+v, want the point in force at its start and the last", pv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	sub := h.Subscribe(ctx)
	waitFor(t, sub, func(s *Snapshot) bool { return s.Ready })
	h.Extend(8 * time.Hour)
	s := waitFor(t, sub, func(s *Snapshot) bool { return s.HistoryFrom.Equal(now.Add(-8 * time.Hour)) })
	if pv, _ := s.Pool(key.String()); pv.History.Len() != 7 {
		t.Fatalf("after Extend: %d points, want the cache's 7", pv.History.Len())
	}
	reqs := src.requests()
	last := reqs[len(reqs)-1]
	if !last.Backfill || !last.Since.Equal(now.Add(-8*time.Hour)) || !last.Until.Equal(now.Add(-6*time.Hour)) {
		t.Fatalf("after Extend the source was asked %+v, want only [%s, %s], what the cache lacks", last, now.Add(-8*time.Hour), now.Add(-6*time.Hour))
	}
}

// The hourly trim trims the cache too.
func TestTrimTrimsTheCache(t *testing.T) {
	mc := newMemCache()
	h := New([]domain.Provider{&fakeSource{name: "fake"}}, Options{Cache: mc})
	h.mu.Lock()
	h.dirty = true
	h.mu.Unlock()
	h.publish()
	h.publish()
	if mc.trims != 1 {
		t.Fatalf("%d cache trims, want 1 (once an hour)", mc.trims)
	}
}

// Regions cached over different spans (one region not fetched for a
// while): the first fetch back-fills from the earliest end, and the hub
// claims history from the latest start, back-filling before it.
func TestRegionsCachedOverDifferentSpans(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	mc := newMemCache()
	mc.warm(now.Add(-3 * time.Hour)) // r1: [now-9h, now-3h]
	k2 := domain.PoolKey{Provider: "fake", Region: "r2", Zone: "r2a", InstanceType: "p5.48xlarge"}
	p2 := pool()
	p2.Region, p2.Zone = "r2", "r2a"
	mc.Save(Batch{Provider: "fake", Pools: []domain.Pool{p2}, Runs: []Run{{Pool: k2, At: []int64{now.Add(-time.Hour).Unix()}, USD: []float64{9}}},
		Spans: []Span{{Region: "r2", From: now.Add(-2 * time.Hour), Until: now.Add(-time.Minute)}}})
	src := &fakeSource{name: "fake"}
	h := New([]domain.Provider{src}, Options{Query: domain.Query{Window: 12 * time.Hour}, Interval: onlyWoken,
		PublishEvery: time.Millisecond, Now: newClock(now).now, Cache: mc})
	if s := h.Snapshot(); len(s.Pools) != 2 || !s.HistoryFrom.Equal(now.Add(-2*time.Hour)) {
		t.Fatalf("first snapshot: %d pools, history from %s; want both, from r2's start", len(s.Pools), s.HistoryFrom)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	waitFor(t, h.Subscribe(ctx), func(s *Snapshot) bool { return s.HistoryFrom.Equal(now.Add(-12 * time.Hour)) })
	reqs := src.requests()
	if !reqs[0].Since.Equal(now.Add(-3*time.Hour)) || !reqs[1].Backfill || !reqs[1].Since.Equal(now.Add(-12*time.Hour)) || !reqs[1].Until.Equal(now.Add(-2*time.Hour)) {
		t.Fatalf("fetches %+v, want from r1's end, then [window start, r2's start]", reqs[:2])
	}
}
