package sim

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/series"
)

// BenchmarkHistory90d generates 90 days of history for every pool, as the
// first back-fill of a 90-day window does (each pool's compact Series
// built in the worker), into a sink that only counts.
func BenchmarkHistory90d(b *testing.B) {
	m := newAt(1, wed)
	req := domain.FetchRequest{Since: wed.Add(-domain.MaxWindow), Until: wed, Backfill: true}
	var points atomic.Int64
	b.ReportAllocs()
	for b.Loop() {
		points.Store(0)
		err := m.Fetch(context.Background(), req, func(ev domain.Event) {
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

// BenchmarkHistory90dSeries does the same into one series.Series per
// pool, the way the hub keeps history, and reports what the series hold:
// bytes of backing arrays per point.
func BenchmarkHistory90dSeries(b *testing.B) {
	m := newAt(1, wed)
	req := domain.FetchRequest{Since: wed.Add(-domain.MaxWindow), Until: wed, Backfill: true}
	var bytes, points int
	for b.Loop() {
		series := map[domain.PoolKey]series.Series{}
		var mu sync.Mutex // the hub, too, applies events under its lock
		err := m.Fetch(context.Background(), req, func(ev domain.Event) {
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
		if err := m.Fetch(context.Background(), domain.FetchRequest{Since: since, Until: until}, func(ev domain.Event) { points += len(ev.Points) }); err != nil {
			b.Fatal(err)
		}
		since = until
		ticks++
	}
	b.ReportMetric(float64(points)/float64(ticks), "points/tick")
}

// BenchmarkUsageFleetWeek is the Usage view's question of a 64-instance
// fleet that has run a week: where its instances went, which were
// interrupted and when, and their hourly busy samples. "spot" is launched
// at the first moment of the week its 60 spot instances (4 on-demand) all
// find capacity, spread over four types; "on-demand" runs all week, a
// busy sample every hour of every instance.
func BenchmarkUsageFleetWeek(b *testing.B) {
	types := []string{"g4dn.xlarge", "g5.xlarge", "g6.xlarge", "g6e.xlarge"}
	for _, onDemand := range []int{4, 64} {
		name := "spot"
		if onDemand == 64 {
			name = "on-demand"
		}
		b.Run(name, func(b *testing.B) {
			m := newAt(1, wed)
			q := domain.UsageQuery{Ref: "01BENCH", Kind: domain.KindFleet, Region: "us-east-1",
				InstanceType: types[0], InstanceTypes: types, InstanceCount: 64, OnDemand: onDemand, Strategy: domain.StrategyDiversified}
			for start := wed.Add(-7 * 24 * time.Hour); ; start = start.Add(10 * time.Minute) {
				if start.After(wed) {
					b.Fatal("no moment in the week when every instance finds capacity")
				}
				q.Start, q.From, q.To = start, start, start.Add(7*24*time.Hour)
				if rep, err := m.Usage(context.Background(), q); err == nil && len(rep.Instances) == 64 {
					break
				}
			}
			var instances, interrupted, samples int
			b.ReportAllocs()
			for b.Loop() {
				rep, err := m.Usage(context.Background(), q)
				if err != nil {
					b.Fatal(err)
				}
				instances, interrupted, samples = len(rep.Instances), 0, 0
				for _, in := range rep.Instances {
					samples += len(in.Busy)
					if in.Interrupted {
						interrupted++
					}
				}
			}
			b.ReportMetric(float64(instances), "instances")
			b.ReportMetric(float64(interrupted), "interrupted")
			b.ReportMetric(float64(samples), "samples")
		})
	}
}
