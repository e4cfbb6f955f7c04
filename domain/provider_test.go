package domain

import (
	"slices"
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
