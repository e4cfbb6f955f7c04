package feed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Prices seeded from the cache carry the cache's age until their region
// answers: the pool is Cached with AsOf the cache's end, and the region
// and source say when the cache last heard from them; once the region
// answers, the pool is live, as of that answer.
func TestCachedPricesCarryTheirAge(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cachedEnd := now.Add(-40 * time.Minute)
	mc := newMemCache()
	mc.warm(cachedEnd)
	clk := newClock(now)
	src := &fakeSource{name: "fake"}
	src.answer = func(n int, req domain.FetchRequest, sink domain.Sink) error {
		if n == 1 {
			sink(domain.Event{Region: "r1", Err: errors.New("dial tcp: connection refused")})
			return nil
		}
		sink(domain.Event{Region: "r1", Points: []domain.PricePoint{{Pool: key, At: clk.now(), USDHour: 42}},
			Progress: &domain.Progress{Done: 1, Total: 1}})
		return nil
	}
	h := New([]domain.Provider{src}, Options{Query: domain.Query{Window: 4 * time.Hour}, Interval: onlyWoken,
		PublishEvery: time.Millisecond, Now: clk.now, Cache: mc})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	sub := h.Subscribe(ctx)
	s := waitFor(t, sub, func(s *Snapshot) bool { return s.Ready })
	pv, ok := s.Pool(key.String())
	if !ok || !pv.Cached || !pv.AsOf.Equal(cachedEnd) {
		t.Fatalf("after a failed fetch: cached %v as of %s; want cached as of the cache's end %s", pv.Cached, pv.AsOf, cachedEnd)
	}
	st, _ := s.Source("fake")
	if !st.CachedAt.Equal(cachedEnd) || len(st.Regions) != 1 || !st.Regions[0].CachedAt.Equal(cachedEnd) || st.Regions[0].Err == "" {
		t.Fatalf("source status %+v; want r1 failed, cached as of %s", st, cachedEnd)
	}
	answered := now.Add(time.Minute)
	clk.set(answered)
	h.Refresh()
	s = waitFor(t, sub, func(s *Snapshot) bool { st, _ := s.Source("fake"); return st.LastOK.Equal(answered) })
	pv, _ = s.Pool(key.String())
	st, _ = s.Source("fake")
	if pv.Cached || !pv.AsOf.Equal(answered) || !st.CachedAt.IsZero() || !st.Regions[0].CachedAt.IsZero() {
		t.Fatalf("after r1 answered: cached %v as of %s, source cached at %s; want live as of %s", pv.Cached, pv.AsOf, st.CachedAt, answered)
	}
}
