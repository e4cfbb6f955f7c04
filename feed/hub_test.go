package feed

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/series"
)

// fakeSource is a provider whose answers the test scripts. It records every
// request.
type fakeSource struct {
	name string
	mu   sync.Mutex
	reqs []domain.FetchRequest
	// answer is called for each fetch.
	answer func(n int, req domain.FetchRequest, sink domain.Sink) error
	calls  atomic.Int32
}

func (f *fakeSource) Name() string { return f.name }
func (f *fakeSource) Describe() domain.Descriptor {
	return domain.Descriptor{Name: f.name}
}

func (f *fakeSource) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	n := int(f.calls.Add(1))
	if f.answer == nil {
		return nil
	}
	return f.answer(n, req, sink)
}

func (f *fakeSource) requests() []domain.FetchRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]domain.FetchRequest(nil), f.reqs...)
}

var key = domain.PoolKey{Provider: "fake", Region: "r1", Zone: "r1a", InstanceType: "p5.48xlarge"}

func pool() domain.Pool {
	return domain.Pool{Provider: "fake", Cloud: domain.CloudAWS, Region: "r1", Zone: "r1a", InstanceType: "p5.48xlarge",
		GPU: domain.GPUSpec{Model: "H100", Count: 8, MemoryGiB: 80}}
}

// waitFor reads snapshots until ok says yes; the test's deadline bounds it.
func waitFor(t *testing.T, ch <-chan *Snapshot, ok func(*Snapshot) bool) *Snapshot {
	t.Helper()
	for s := range ch {
		if ok(s) {
			return s
		}
	}
	t.Fatal("subscription closed before the condition held")
	return nil
}

func TestBackfillThenLivePolls(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.Unix())
	src := &fakeSource{name: "fake"}
	src.answer = func(n int, req domain.FetchRequest, sink domain.Sink) error {
		switch n {
		case 1:
			sink(domain.Event{Region: "r1", Pools: []domain.Pool{pool()}, Progress: &domain.Progress{Done: 1, Total: 2}})
			sink(domain.Event{Region: "r1", Points: []domain.PricePoint{
				{Pool: key, At: now.Add(-2 * time.Hour), USDHour: 20},
				{Pool: key, At: now.Add(-time.Hour), USDHour: 22},
			}, Progress: &domain.Progress{Done: 2, Total: 2}})
		case 2:
			sink(domain.Event{Region: "r1", Points: []domain.PricePoint{{Pool: key, At: now.Add(time.Minute), USDHour: 25}}})
		}
		return nil
	}
	h := New([]domain.Provider{src}, Options{
		Query:        domain.Query{Window: 6 * time.Hour},
		Interval:     func(string) time.Duration { return 10 * time.Millisecond },
		PublishEvery: time.Millisecond,
		Now:          func() time.Time { return time.Unix(clock.Load(), 0).UTC() },
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	sub := h.Subscribe(ctx)
	s := waitFor(t, sub, func(s *Snapshot) bool { return s.Ready })
	pv, ok := s.Pool(key.String())
	if !ok || pv.History.Len() != 2 || pv.GPU.Model != "H100" {
		t.Fatalf("after back-fill: %+v %v", pv, ok)
	}
	st, _ := s.Source("fake")
	if st.State != StateReady || len(st.Regions) != 1 || st.Regions[0].Done != 2 || st.Regions[0].Total != 2 {
		t.Fatalf("source status = %+v", st)
	}
	clock.Store(now.Add(2 * time.Minute).Unix())
	s = waitFor(t, sub, func(s *Snapshot) bool {
		pv, _ := s.Pool(key.String())
		return pv != nil && pv.History.Len() == 3
	})
	// Snapshots are immutable: the earlier one still has two points.
	reqs := src.requests()
	if !reqs[0].Backfill || !reqs[0].Since.Equal(now.Add(-6*time.Hour)) || !reqs[0].Until.Equal(now) {
		t.Fatalf("first request = %+v", reqs[0])
	}
	if reqs[1].Backfill || !reqs[1].Since.Equal(now) {
		t.Fatalf("live poll asked from %v (backfill %v), want from the previous until %v", reqs[1].Since, reqs[1].Backfill, now)
	}
	if pv, _ := s.Pool(key.String()); pv.Changed != s.Seq && pv.Changed == 0 {
		t.Fatalf("changed seq = %d", pv.Changed)
	}
}

func TestImmutableSnapshots(t *testing.T) {
	now := time.Now()
	src := &fakeSource{name: "fake"}
	src.answer = func(n int, req domain.FetchRequest, sink domain.Sink) error {
		sink(domain.Event{Pools: []domain.Pool{pool()}, Points: []domain.PricePoint{{Pool: key, At: now.Add(time.Duration(n) * time.Second), USDHour: float64(n)}}})
		return nil
	}
	h := New([]domain.Provider{src}, Options{Interval: func(string) time.Duration { return time.Millisecond }, PublishEvery: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	sub := h.Subscribe(ctx)
	first := waitFor(t, sub, func(s *Snapshot) bool { return len(s.Pools) == 1 })
	n := first.Pools[0].History.Len()
	var firstUSD []float64
	for _, usd := range first.Pools[0].History.All() {
		firstUSD = append(firstUSD, usd)
	}
	waitFor(t, sub, func(s *Snapshot) bool { return s.Pools[0].History.Len() > n+3 })
	if first.Pools[0].History.Len() != n {
		t.Fatal("an old snapshot's history grew")
	}
	for i, v := range firstUSD {
		if _, usd := first.Pools[0].History.Point(i); usd != v {
			t.Fatal("an old snapshot's history changed")
		}
	}
}

func TestRegionErrorKeepsOtherRegions(t *testing.T) {
	src := &fakeSource{name: "fake"}
	now := time.Now()
	src.answer = func(n int, req domain.FetchRequest, sink domain.Sink) error {
		sink(domain.Event{Region: "r1", Pools: []domain.Pool{pool()}, Points: []domain.PricePoint{{Pool: key, At: now, USDHour: 1}}})
		sink(domain.Event{Region: "r2", Err: errors.New("describe spot prices in r2: throttled")})
		return nil
	}
	h := New([]domain.Provider{src}, Options{PublishEvery: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	s, err := h.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.Source("fake")
	if len(st.Regions) != 2 || st.Regions[0].Err != "" || st.Regions[1].Err == "" || st.State != StateReady {
		t.Fatalf("status = %+v", st)
	}
	if len(s.Pools) != 1 {
		t.Fatalf("pools = %d", len(s.Pools))
	}
}

func TestWholeFailureBacksOffAndMarksError(t *testing.T) {
	src := &fakeSource{name: "fake", answer: func(int, domain.FetchRequest, domain.Sink) error {
		return errors.New("no credentials")
	}}
	h := New([]domain.Provider{src}, Options{
		Interval: func(string) time.Duration { return time.Millisecond }, MaxBackoff: 8 * time.Millisecond, PublishEvery: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	s, err := h.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.Source("fake")
	if st.State != StateError || st.Err != "no credentials" || !st.Stale {
		t.Fatalf("status = %+v", st)
	}
	// Every failed back-fill is retried as a back-fill.
	waitFor(t, h.Subscribe(ctx), func(*Snapshot) bool { return src.calls.Load() >= 3 })
	for _, r := range src.requests() {
		if !r.Backfill {
			t.Fatal("a failed back-fill was followed by a live poll")
		}
	}
	if got := backoff(time.Second, 4, time.Minute); got != 8*time.Second {
		t.Fatalf("backoff = %v", got)
	}
	if got := backoff(time.Second, 40, time.Minute); got != time.Minute {
		t.Fatalf("capped backoff = %v", got)
	}
}

func TestExtendBackfillsOnlyTheMissingPart(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	src := &fakeSource{name: "fake"}
	h := New([]domain.Provider{src}, Options{
		Query: domain.Query{Window: time.Hour}, Interval: func(string) time.Duration { return time.Hour },
		PublishEvery: time.Millisecond, Now: func() time.Time { return now }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	if _, err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	h.Extend(7 * 24 * time.Hour)
	waitFor(t, h.Subscribe(ctx), func(s *Snapshot) bool { return s.HistoryFrom.Equal(now.Add(-7 * 24 * time.Hour)) })
	reqs := src.requests()
	last := reqs[len(reqs)-1]
	if !last.Backfill || !last.Since.Equal(now.Add(-7*24*time.Hour)) || !last.Until.Equal(now.Add(-time.Hour)) {
		t.Fatalf("extension request = %+v", last)
	}
	if h.Window() != 7*24*time.Hour {
		t.Fatalf("window = %v", h.Window())
	}
	h.Extend(365 * 24 * time.Hour)
	if h.Window() != domain.MaxWindow {
		t.Fatalf("window beyond 90 days = %v", h.Window())
	}
}

func TestSubscribersShareOnePollAndLeave(t *testing.T) {
	src := &fakeSource{name: "fake"}
	h := New([]domain.Provider{src}, Options{Interval: func(string) time.Duration { return time.Hour }, PublishEvery: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	var subs []context.CancelFunc
	for range 30 {
		c, cl := context.WithCancel(ctx)
		subs = append(subs, cl)
		waitFor(t, h.Subscribe(c), func(s *Snapshot) bool { return s.Ready })
	}
	if got := src.calls.Load(); got != 1 {
		t.Fatalf("30 subscribers caused %d fetches, want 1", got)
	}
	if h.Subscribers() != 30 {
		t.Fatalf("subscribers = %d", h.Subscribers())
	}
	for _, cl := range subs {
		cl()
	}
	for h.Subscribers() != 0 {
		time.Sleep(time.Millisecond) // unsubscription runs on its own goroutine
	}
}

func TestRunEndClosesSubscriptions(t *testing.T) {
	h := New([]domain.Provider{&fakeSource{name: "fake"}}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	sub := h.Subscribe(context.Background())
	<-sub
	cancel()
	<-done
	for range sub {
	}
	if _, ok := <-h.Subscribe(context.Background()); ok {
		t.Fatal("subscription after stop delivered a snapshot")
	}
}

func BenchmarkApplyTick5000(b *testing.B) {
	h := New(nil, Options{})
	h.status["fake"] = &sourceState{regions: map[string]*RegionStatus{}}
	pools := make([]domain.Pool, 5000)
	for i := range pools {
		p := pool()
		p.InstanceType = "t" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		pools[i] = p
	}
	h.apply("fake", domain.Event{Pools: pools})
	pts := make([]domain.PricePoint, len(pools))
	at := time.Now()
	b.ResetTimer()
	for b.Loop() {
		at = at.Add(time.Second)
		for i, p := range pools {
			pts[i] = domain.PricePoint{Pool: p.Key(), At: at, USDHour: 1}
		}
		h.apply("fake", domain.Event{Points: pts})
		h.publish()
	}
}

func TestTrimKeepsWindowAndPriceInForce(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h := New([]domain.Provider{&fakeSource{name: "fake"}}, Options{Query: domain.Query{Window: time.Hour}, Now: func() time.Time { return now }})
	var pts []domain.PricePoint
	for d := 10; d >= 0; d-- {
		pts = append(pts, domain.PricePoint{Pool: key, At: now.Add(-time.Duration(d) * 24 * time.Hour), USDHour: float64(d)})
	}
	h.apply("fake", domain.Event{Points: pts})
	h.publish()
	pv, _ := h.Snapshot().Pool(key.String())
	// Window 1h + a day of margin: the points of the last day, plus the one
	// in force at the cut (two days ago).
	if _, usd := pv.History.Point(0); pv.History.Len() != 3 || usd != 2 {
		t.Fatalf("after trim: %+v", pv.History)
	}
}

func TestSubscriptionsOutlivingTheHubLeaveNoGoroutine(t *testing.T) {
	base := runtime.NumGoroutine()
	h := New([]domain.Provider{&fakeSource{name: "fake"}}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	for range 20 {
		<-h.Subscribe(context.Background()) // a context that never ends
	}
	cancel()
	<-done
	// Each subscription's watcher ends with the hub; wait for them to go.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Fatalf("%d goroutines left after the hub stopped, %d before", n, base)
	}
}

// TestExtendStopsAtMaxWindow: a hub that many sessions share holds at
// most its MaxWindow, however far one of them asks; it never fetches
// more than that.
func TestExtendStopsAtMaxWindow(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	src := &fakeSource{name: "fake"}
	h := New([]domain.Provider{src}, Options{
		Query: domain.Query{Window: 6 * time.Hour}, MaxWindow: 24 * time.Hour, Interval: func(string) time.Duration { return time.Hour },
		PublishEvery: time.Millisecond, Now: func() time.Time { return now }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	if _, err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	h.Extend(90 * 24 * time.Hour)
	if h.Window() != 24*time.Hour || h.MaxWindow() != 24*time.Hour {
		t.Fatalf("window %v, max %v after asking for 90 days; want 24h", h.Window(), h.MaxWindow())
	}
	waitFor(t, h.Subscribe(ctx), func(s *Snapshot) bool { return s.HistoryFrom.Equal(now.Add(-24 * time.Hour)) })
	for _, r := range src.requests() {
		if r.Since.Before(now.Add(-24 * time.Hour)) {
			t.Errorf("fetched from %v, before the 24h the hub may hold", r.Since)
		}
	}
	// Unset, or beyond 90 days, it is 90 days; never below the first window.
	if got := New(nil, Options{}).MaxWindow(); got != domain.MaxWindow {
		t.Errorf("default max %v", got)
	}
	if got := New(nil, Options{Query: domain.Query{Window: 7 * 24 * time.Hour}, MaxWindow: time.Hour}).MaxWindow(); got != 7*24*time.Hour {
		t.Errorf("max below the first window: %v", got)
	}
}

// TestApplyHistories: a pool's history sent as a Series (a long
// back-fill) is the pool's history, live points extend it, an older
// history merges in before it, and the region counts it as an answer.
func TestApplyHistories(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h := New(nil, Options{Now: func() time.Time { return now }})
	h.status["fake"] = &sourceState{regions: map[string]*RegionStatus{}}
	recent := series.NewSeries([]int64{now.Unix() - 7200, now.Unix() - 3600}, []float64{20, 22})
	h.apply("fake", domain.Event{Region: "r1", Histories: []domain.PoolHistory{{Pool: key, History: recent}},
		Progress: &domain.Progress{Done: 1, Total: 1}})
	h.apply("fake", domain.Event{Points: []domain.PricePoint{{Pool: key, At: now, USDHour: 23}}})
	older := series.NewSeries([]int64{now.Unix() - 9000, now.Unix() - 7200}, []float64{18, 21})
	h.apply("fake", domain.Event{Region: "r1", Histories: []domain.PoolHistory{{Pool: key, History: older}}})
	h.publish()
	s := h.Snapshot()
	pv, ok := s.Pool(key.String())
	if !ok {
		t.Fatal("the pool of a history is missing")
	}
	var got []float64
	for _, usd := range pv.History.All() {
		got = append(got, usd)
	}
	// The older history's value at now-2h replaces the recent one's.
	if want := []float64{18, 21, 22, 23}; len(got) != len(want) || got[0] != 18 || got[1] != 21 || got[2] != 22 || got[3] != 23 {
		t.Fatalf("history %v, want %v", got, want)
	}
	if pv.InstanceType != "p5.48xlarge" || pv.GPU.Model != "H100" {
		t.Fatalf("pool of a history not described from the catalog: %+v", pv.Pool)
	}
	if _, usd := recent.Point(1); recent.Len() != 2 || usd != 22 {
		t.Fatal("the sender's series changed")
	}
	if rs := h.status["fake"].regions["r1"]; rs == nil || rs.LastOK.IsZero() {
		t.Fatalf("region status after a history: %+v", rs)
	}
}
