package providers

import (
	"slices"
	"testing"
	"time"
)

// TestEventPricePoints yields an event's Points, then its Histories'
// points with their pools, and stops when asked.
func TestEventPricePoints(t *testing.T) {
	a := PoolKey{Provider: "sim", Region: "r", Zone: "z", InstanceType: "a"}
	b := PoolKey{Provider: "sim", Region: "r", Zone: "z", InstanceType: "b"}
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ev := Event{
		Points:    []PricePoint{{Pool: a, At: t0, USDHour: 1}},
		Histories: []PoolHistory{{Pool: b, History: NewSeries([]int64{t0.Unix() + 60, t0.Unix() + 120}, []float64{2, 3})}},
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

// TestJoin adds a series' points as Merge does; an empty series takes
// the other as it is.
func TestJoin(t *testing.T) {
	s := series(10, 1, 20, 2)
	if j := (Series{}).Join(s); j.Len() != 2 || &j.tail[0] != &s.tail[0] {
		t.Fatal("joining into an empty series did not take it as it is")
	}
	if j := s.Join(Series{}); j.Len() != 2 {
		t.Fatal("joining an empty series changed s")
	}
	j := s.Join(series(5, 0.5, 20, 9, 30, 3))
	at, usd := points(j)
	if !slices.Equal(at, []int64{5, 10, 20, 30}) || !slices.Equal(usd, []float64{0.5, 1, 9, 3}) {
		t.Fatalf("join = %v %v", at, usd)
	}
}
