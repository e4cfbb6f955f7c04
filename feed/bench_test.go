package feed

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// benchPools is about what AWS and Azure list for every GPU over all
// their regions: 800 pools.
const benchPools = 800

func benchKeys() []domain.PoolKey {
	types := []string{"p5.48xlarge", "p4d.24xlarge", "p4de.24xlarge", "g6e.xlarge", "g6e.12xlarge", "g6.xlarge", "g6.12xlarge",
		"g5.xlarge", "g5.12xlarge", "g5.48xlarge", "g4dn.xlarge", "g4dn.12xlarge", "p3.2xlarge", "p3.16xlarge", "g6e.48xlarge", "g5.4xlarge"}
	var keys []domain.PoolKey
	for r := 0; len(keys) < benchPools; r++ {
		region := fmt.Sprintf("region-%02d", r)
		for z := 0; z < 3 && len(keys) < benchPools; z++ {
			for _, typ := range types {
				if len(keys) == benchPools {
					break
				}
				keys = append(keys, domain.PoolKey{Provider: "aws", Region: region, Zone: fmt.Sprintf("%s%c", region, 'a'+z), InstanceType: typ})
			}
		}
	}
	return keys
}

// fill saves hourly history of every pool over [end-span, end) with the
// spans, as a back-fill does (a page of a region at a time), and commits.
func fill(b *testing.B, c *History, keys []domain.PoolKey, end time.Time, span time.Duration) int {
	n := 0
	regions := map[string]bool{}
	for _, k := range keys {
		p := descOf(k)
		r := hourly(k, end.Add(-span), end, 2+float64(len(k.Zone)%7))
		c.Save(Batch{Provider: "aws", Pools: []domain.Pool{p}, Runs: []Run{r}})
		n += len(r.At)
		regions[k.Region] = true
	}
	var spans []Span
	for r := range regions {
		spans = append(spans, Span{Region: r, From: end.Add(-span), Until: end})
	}
	c.Save(Batch{Provider: "aws", Spans: spans})
	if err := c.Flush(); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkWriteBackfill commits a week's back-fill of 800 pools (hourly
// points) into a fresh cache: the writer's throughput.
func BenchmarkWriteBackfill(b *testing.B) {
	keys := benchKeys()
	end := t0.Add(30 * 24 * time.Hour)
	points := 0
	for b.Loop() {
		b.StopTimer()
		c, err := Open(b.TempDir(), HistoryOptions{FlushEvery: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		points += fill(b, c, keys, end, 7*24*time.Hour)
		b.StopTimer()
		c.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(points)/b.Elapsed().Seconds(), "points/s")
}

// BenchmarkWriteLivePoll commits one live poll: a new point for each of
// 800 pools and their spans, into a cache holding 90 days of them.
func BenchmarkWriteLivePoll(b *testing.B) {
	c, keys, end := cache90d(b)
	at := end
	for b.Loop() {
		at = at.Add(30 * time.Second)
		for _, k := range keys {
			c.Save(Batch{Provider: "aws", Runs: []Run{{Pool: k, At: []int64{at.Unix()}, USD: []float64{3.5}}}})
		}
		c.Save(Batch{Provider: "aws", Spans: []Span{{Region: "region-00", From: at.Add(-30 * time.Second), Until: at}}})
		if err := c.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(keys)*b.N)/b.Elapsed().Seconds(), "points/s")
}

// cache90d makes a cache of 90 days of hourly history of 800 pools
// (1.7 million points).
func cache90d(b *testing.B) (*History, []domain.PoolKey, time.Time) {
	b.Helper()
	c, err := Open(b.TempDir(), HistoryOptions{FlushEvery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	keys := benchKeys()
	end := t0.Add(100 * 24 * time.Hour)
	fill(b, c, keys, end, 90*24*time.Hour)
	return c, keys, end
}

// BenchmarkLoad90d800Pools reads 90 days of 800 pools back: what a
// restart with `--window 90d` reads before its first snapshot.
func BenchmarkLoad90d800Pools(b *testing.B) {
	c, keys, end := cache90d(b)
	points := 0
	for b.Loop() {
		got, err := c.Load(context.Background(), "aws", domain.Query{}, end.Add(-90*24*time.Hour), end)
		if err != nil {
			b.Fatal(err)
		}
		if len(got.Pools) != len(keys) {
			b.Fatalf("%d pools", len(got.Pools))
		}
		for _, s := range got.History {
			points += s.Len()
		}
	}
	b.ReportMetric(float64(points)/b.Elapsed().Seconds(), "points/s")
	b.ReportMetric(float64(points)/float64(b.N), "points/op")
}

// cloudSource stands for a cloud provider the hub would poll; the
// benchmark never runs the hub.
type cloudSource struct{}

func (cloudSource) Name() string                                                  { return "aws" }
func (cloudSource) Describe() domain.Descriptor                                   { return domain.Descriptor{Name: "aws"} }
func (cloudSource) Fetch(context.Context, domain.FetchRequest, domain.Sink) error { return nil }

// BenchmarkFirstSnapshot800Pools is the time from making the hub to its
// first snapshot holding the cached pools, from a cache of 90 days of 800
// pools, for a 24 h window (the default) and a 90-day one.
func BenchmarkFirstSnapshot800Pools(b *testing.B) {
	c, keys, end := cache90d(b)
	for _, w := range []time.Duration{24 * time.Hour, 90 * 24 * time.Hour} {
		b.Run(domain.FormatWindow(w), func(b *testing.B) {
			for b.Loop() {
				h := New([]domain.Provider{cloudSource{}}, Options{Query: domain.Query{Window: w},
					Cache: c, Now: func() time.Time { return end }})
				if s := h.Snapshot(); len(s.Pools) != len(keys) || s.Pools[0].History.Len() < int(w/time.Hour) {
					b.Fatalf("first snapshot: %d pools", len(s.Pools))
				}
			}
		})
	}
}

// BenchmarkSavePage is what the hub pays, under its lock, to hand the
// cache one page of a back-fill (1,000 points of 50 pools): a queue
// append, never the disk.
func BenchmarkSavePage(b *testing.B) {
	c, err := Open(b.TempDir(), HistoryOptions{FlushEvery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	keys := benchKeys()[:50]
	runs := make([]Run, len(keys))
	for i, k := range keys {
		runs[i] = hourly(k, t0, t0.Add(20*time.Hour), 1)
	}
	n := 0
	for b.Loop() {
		c.Save(Batch{Provider: "aws", Runs: runs})
		if n++; n%1000 == 0 {
			b.StopTimer()
			c.mu.Lock()
			c.pend = newPending() // keep the queue from growing without end
			c.mu.Unlock()
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/point")
}
