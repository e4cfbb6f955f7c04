package sim

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/providers"
)

// BenchmarkHistory90d generates 90 days of history for every pool, as the
// first back-fill of a 90-day window does (each pool's compact Series
// built in the worker), into a sink that only counts.
func BenchmarkHistory90d(b *testing.B) {
	m := newAt(1, wed)
	req := providers.FetchRequest{Since: wed.Add(-providers.MaxWindow), Until: wed, Backfill: true}
	var points atomic.Int64
	b.ReportAllocs()
	for b.Loop() {
		points.Store(0)
		err := m.Fetch(context.Background(), req, func(ev providers.Event) {
			for _, h := range ev.Histories {
				points.Add(int64(h.History.Len()))
			}
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	n := float64(points.Load())
	b.ReportMetric(n, "points")
	b.ReportMetric(float64(len(m.pools)), "pools")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/point")
}

// BenchmarkHistory90dSeries does the same into one providers.Series per
// pool, the way the hub keeps history, and reports what the series hold:
// bytes of backing arrays per point.
func BenchmarkHistory90dSeries(b *testing.B) {
	m := newAt(1, wed)
	req := providers.FetchRequest{Since: wed.Add(-providers.MaxWindow), Until: wed, Backfill: true}
	var bytes, points int
	for b.Loop() {
		series := map[providers.PoolKey]providers.Series{}
		var mu sync.Mutex // the hub, too, applies events under its lock
		err := m.Fetch(context.Background(), req, func(ev providers.Event) {
			mu.Lock()
			defer mu.Unlock()
			for _, h := range ev.Histories {
				series[h.Pool] = series[h.Pool].Join(h.History)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		bytes, points = 0, 0
		for _, s := range series {
			bytes += s.Size()
			points += s.Len()
		}
	}
	b.ReportMetric(float64(points), "points")
	b.ReportMetric(float64(bytes)/float64(points), "B/point")
}

// BenchmarkLiveTick is one 2-second live poll of every pool.
func BenchmarkLiveTick(b *testing.B) {
	m := newAt(1, wed)
	var points, ticks int
	since := wed
	b.ReportAllocs()
	for b.Loop() {
		until := since.Add(2 * time.Second)
		if err := m.Fetch(context.Background(), providers.FetchRequest{Since: since, Until: until}, func(ev providers.Event) { points += len(ev.Points) }); err != nil {
			b.Fatal(err)
		}
		since = until
		ticks++
	}
	b.ReportMetric(float64(points)/float64(ticks), "points/tick")
}

// BenchmarkUsageFleetWeek is the Usage view's question of a 64-instance
// fleet that has run a week: which instances ran, which were interrupted
// and their hourly busy samples.
func BenchmarkUsageFleetWeek(b *testing.B) {
	m := newAt(1, wed)
	q := providers.UsageQuery{Ref: "01BENCH", Kind: providers.KindFleet, ProviderRef: "fleet-bench", Region: "us-east-1",
		InstanceType: "g6.xlarge", InstanceTypes: []string{"g6.xlarge", "g5.xlarge"}, InstanceCount: 64, OnDemand: 4,
		Start: wed.Add(-7 * 24 * time.Hour), From: wed.Add(-7 * 24 * time.Hour), To: wed}
	var instances int
	b.ReportAllocs()
	for b.Loop() {
		rep, err := m.Usage(context.Background(), q)
		if err != nil {
			b.Fatal(err)
		}
		instances = len(rep.Instances)
	}
	b.ReportMetric(float64(instances), "instances")
}
