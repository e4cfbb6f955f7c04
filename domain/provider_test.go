package domain

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/series"
)

// TestEventPricePoints yields an event's Points, then its Histories'
// points with their pools, and stops when asked.
func TestEventPricePoints(t *testing.T) {
	a := PoolKey{Provider: "sim", Region: "r", Zone: "z", InstanceType: "a"}
	b := PoolKey{Provider: "sim", Region: "r", Zone: "z", InstanceType: "b"}
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ev := Event{
		Points:    []PricePoint{{Pool: a, At: t0, USDHour: 1}},
		Histories: []PoolHistory{{Pool: b, History: series.NewSeries([]int64{t0.Unix() + 60, t0.Unix() + 120}, []float64{2, 3})}},
	}
	var got []PricePoint
	for pt := range ev.PricePoints() {
		got = append(got, pt)
	}
	want := []PricePoint{{a, t0, 1}, {b, t0.Add(time.Minute), 2}, {b, t0.Add(2 * time.Minute), 3}}
	if !slices.EqualFunc(got, want, func(x, y PricePoint) bool { return x.Pool == y.Pool && x.At.Equal(y.At) && x.USDHour == y.USDHour }) {
		t.Fatalf("points %v, want %v", got, want)
	}
	n := 0
	for range ev.PricePoints() {
		if n++; n == 2 {
			break
		}
	}
	if n != 2 {
		t.Fatalf("stopped after %d points", n)
	}
}

// eventsProvider sends its events from a goroutine each, as the clouds' fan-out does.
type eventsProvider struct {
	events []Event
	got    FetchRequest
}

func (p *eventsProvider) Name() string         { return "sim" }
func (p *eventsProvider) Describe() Descriptor { return Descriptor{} }
func (p *eventsProvider) Fetch(_ context.Context, req FetchRequest, sink Sink) error {
	p.got = req
	var wg sync.WaitGroup
	for _, ev := range p.events {
		wg.Go(func() { sink(ev) })
	}
	wg.Wait()
	return nil
}

// TestReadLatestKeepsEachPoolsPriceInForce: the latest point of each pool, the
// dearer of two at one time, every pool described, and which regions failed.
func TestReadLatestKeepsEachPoolsPriceInForce(t *testing.T) {
	a := PoolKey{Provider: "sim", Region: "r", Zone: "z", InstanceType: "a"}
	b := PoolKey{Provider: "sim", Region: "r", Zone: "z", InstanceType: "b"}
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p := &eventsProvider{events: []Event{
		{Pools: []Pool{{Region: "r", InstanceType: "a"}}, Points: []PricePoint{{a, t0, 5}, {a, t0.Add(time.Minute), 2}}},
		{Points: []PricePoint{{b, t0, 3}}},
		{Points: []PricePoint{{b, t0, 4}, {a, t0.Add(-time.Minute), 9}}},
		{Histories: []PoolHistory{{Pool: b, History: series.NewSeries([]int64{t0.Unix() - 60}, []float64{8})}}},
		{Region: "q", Err: errors.New("throttled")},
	}}
	l, err := ReadLatest(context.Background(), p, Query{Regions: []string{"r"}}, t0, 6*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !p.got.Backfill || !p.got.Aside || p.got.Missed != nil || !p.got.Since.Equal(t0.Add(-6*time.Hour)) || !p.got.Until.Equal(t0) {
		t.Fatalf("asked %+v, want an aside back-fill of the 6 h before now, with no gaps", p.got)
	}
	if got := l.Prices[a]; got.USDHour != 2 || !got.At.Equal(t0.Add(time.Minute)) {
		t.Errorf("a in force %+v, want its latest point ($2 at +1m)", got)
	}
	if got := l.Prices[b]; got.USDHour != 4 {
		t.Errorf("b in force %+v, want the dearer of the two at one time ($4)", got)
	}
	if len(l.Pools) != 1 || l.Pools[0].InstanceType != "a" {
		t.Errorf("pools %+v, want the one described", l.Pools)
	}
	if !l.Failed("q") || l.Failed("r") {
		t.Errorf("failed q=%v r=%v, want only q", l.Failed("q"), l.Failed("r"))
	}
	l.Errs = append(l.Errs, Event{Err: errors.New("denied")})
	if !l.Failed("r") {
		t.Error("a failure of the whole provider is every region's")
	}
}
