package series

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func series(pts ...float64) Series {
	// pts are (at, usd) pairs
	var at []int64
	var usd []float64
	for i := 0; i+1 < len(pts); i += 2 {
		at = append(at, int64(pts[i]))
		usd = append(usd, pts[i+1])
	}
	return NewSeries(at, usd)
}

// points returns every point of s.
func points(s Series) (at []int64, usd []float64) {
	for t, p := range s.All() {
		at, usd = append(at, t), append(usd, p)
	}
	return at, usd
}

func TestStatsTimeWeighted(t *testing.T) {
	// 1.0 from t=0, 3.0 from t=90, 2.0 from t=100.
	s := series(0, 1, 90, 3, 100, 2)
	w := s.Stats(50, 150)
	// [50,90) at 1 → 40, [90,100) at 3 → 30, [100,150] at 2 → 100: 170/100.
	if !w.OK || w.Min != 1 || w.Max != 3 || !near(w.Avg, 1.7) || w.First != 1 || w.Last != 2 || w.Points != 2 {
		t.Fatalf("stats = %+v", w)
	}
	// The point before the window counts as the price at its start.
	w = s.Stats(95, 99)
	if !w.OK || w.Min != 3 || w.Max != 3 || w.Avg != 3 || w.Points != 0 {
		t.Fatalf("inner stats = %+v", w)
	}
	// A window that starts before the series leaves the unknown part out.
	w = series(100, 2, 200, 4).Stats(0, 300)
	if !w.OK || !near(w.Avg, 3) || w.First != 2 {
		t.Fatalf("early window = %+v", w)
	}
	if w := s.Stats(-100, -50); w.OK {
		t.Fatalf("window before the series = %+v", w)
	}
	if w := (Series{}).Stats(0, 10); w.OK {
		t.Fatal("empty series has stats")
	}
}

func TestPriceAt(t *testing.T) {
	s := series(10, 1, 20, 2)
	for at, want := range map[int64]float64{10: 1, 15: 1, 20: 2, 99: 2} {
		if got, ok := s.PriceAt(at); !ok || got != want {
			t.Errorf("PriceAt(%d) = %v %v", at, got, ok)
		}
	}
	if _, ok := s.PriceAt(9); ok {
		t.Error("price before the first point")
	}
}

func TestDownsampleKeepsSpikes(t *testing.T) {
	// A flat 1.0 with a 1-second spike to 9.0 in the middle of a long span.
	s := series(0, 1, 5000, 9, 5001, 1)
	mins, maxs := s.Downsample(0, 10000, 10)
	if len(mins) != 10 || len(maxs) != 10 {
		t.Fatalf("len = %d %d", len(mins), len(maxs))
	}
	if maxs[5] != 9 || mins[5] != 1 {
		t.Fatalf("spike column = [%v, %v], want [1, 9]", mins[5], maxs[5])
	}
	for c := range 10 {
		if c != 5 && (mins[c] != 1 || maxs[c] != 1) {
			t.Errorf("column %d = [%v, %v], want flat 1", c, mins[c], maxs[c])
		}
	}
	// Columns before the first point are NaN.
	mins, _ = series(500, 2).Downsample(0, 1000, 4)
	if !math.IsNaN(mins[0]) || !math.IsNaN(mins[1]) || mins[2] != 2 || mins[3] != 2 {
		t.Fatalf("leading columns = %v", mins)
	}
}

func TestDownsampleMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var ats []int64
	var usds []float64
	at := int64(0)
	for range 2000 {
		at += 1 + r.Int64N(100)
		ats = append(ats, at)
		usds = append(usds, r.Float64())
	}
	s := NewSeries(ats, usds)
	from, to, cols := int64(5000), at-3000, 37
	mins, maxs := s.Downsample(from, to, cols)
	span := float64(to - from)
	for c := range cols {
		c0 := from + int64(span*float64(c)/float64(cols))
		c1 := from + int64(span*float64(c+1)/float64(cols))
		lo, _ := s.PriceAt(c0)
		hi := lo
		for i, t := range ats {
			if t > c0 && t < c1 {
				lo, hi = math.Min(lo, usds[i]), math.Max(hi, usds[i])
			}
		}
		if mins[c] != lo || maxs[c] != hi {
			t.Fatalf("column %d = [%v, %v], brute force [%v, %v]", c, mins[c], maxs[c], lo, hi)
		}
	}
}

func TestMerge(t *testing.T) {
	s := series(10, 1, 20, 2)
	// Appending newer points shares nothing a reader of s can see.
	a := s.Merge([]int64{40, 30}, []float64{4, 3})
	if at, usd := points(a); a.Len() != 4 || at[2] != 30 || usd[3] != 4 || s.Len() != 2 {
		t.Fatalf("append = %v %v (s %d points)", at, usd, s.Len())
	}
	// Older and interleaved points, and a duplicate second replaced.
	b := a.Merge([]int64{5, 20, 25}, []float64{0.5, 2.5, 2.7})
	want := series(5, 0.5, 10, 1, 20, 2.5, 25, 2.7, 30, 3, 40, 4)
	bat, busd := points(b)
	wat, wusd := points(want)
	if !slices.Equal(bat, wat) || !slices.Equal(busd, wusd) {
		t.Fatalf("merge = %v %v, want %v %v", bat, busd, wat, wusd)
	}
	// a is untouched by a merge that rebuilt.
	if at, usd := points(a); at[0] != 10 || usd[1] != 2 {
		t.Fatalf("a changed: %v %v", at, usd)
	}
	// Duplicates within one batch: the later one wins.
	c := Series{}.Merge([]int64{1, 1, 2}, []float64{1, 9, 2})
	if _, usd := points(c); c.Len() != 2 || usd[0] != 9 {
		t.Fatalf("dup batch = %v", usd)
	}
}

func BenchmarkDownsample100k(b *testing.B) {
	var at []int64
	var usd []float64
	for i := range 100_000 {
		at = append(at, int64(i*60))
		usd = append(usd, 1+math.Sin(float64(i)/100))
	}
	s := NewSeries(at, usd)
	b.ResetTimer()
	for b.Loop() {
		s.Downsample(0, 100_000*60, 120)
	}
}

func BenchmarkStats(b *testing.B) {
	var at []int64
	var usd []float64
	for i := range 2160 {
		at = append(at, int64(i*3600))
		usd = append(usd, 1+math.Sin(float64(i)/10))
	}
	s := NewSeries(at, usd)
	b.ResetTimer()
	for b.Loop() {
		s.Stats(1000*3600, 2160*3600)
	}
}

func FuzzMerge(f *testing.F) {
	f.Add([]byte{1, 5, 3, 9, 3, 2}, []byte{4, 4, 0, 7})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var s Series
		for _, x := range a {
			s = s.Merge([]int64{int64(x)}, []float64{float64(x)})
		}
		at := make([]int64, len(b))
		usd := make([]float64, len(b))
		for i, x := range b {
			at[i], usd[i] = int64(x), float64(x)+0.5
		}
		m := s.Merge(at, usd)
		seen := map[int64]bool{}
		for _, x := range a {
			seen[int64(x)] = true
		}
		for _, x := range at {
			seen[x] = true
		}
		if m.Len() != len(seen) {
			t.Fatalf("merged %d points, want %d distinct", m.Len(), len(seen))
		}
		mat, musd := points(m)
		for i := 1; i < len(mat); i++ {
			if mat[i] <= mat[i-1] {
				t.Fatalf("not strictly ascending at %d: %v", i, mat)
			}
		}
		// The values: b's replace a's, a later one in b an earlier one.
		want := map[int64]float64{}
		for _, x := range a {
			want[int64(x)] = float64(x)
		}
		for i := range at {
			want[at[i]] = usd[i]
		}
		for i, x := range mat {
			if musd[i] != want[x] {
				t.Fatalf("price at %d = %v, want %v", x, musd[i], want[x])
			}
		}
		ref := refSeries{mat, musd}
		for _, w := range [][2]int64{{0, 255}, {-5, 300}, {17, 18}, {100, 200}} {
			if got, exp := m.Stats(w[0], w[1]), ref.stats(w[0], w[1]); got.Min != exp.Min || got.Max != exp.Max || got.Points != exp.Points || math.Abs(got.Avg-exp.Avg) > 1e-9*math.Abs(exp.Avg) {
				t.Fatalf("Stats%v = %+v, want %+v", w, got, exp)
			}
		}
	})
}

// BenchmarkStatsByWindow is Stats over a day, a week and 90 days of a
// 90-day history like the sim's (a change every 15-35 minutes, 5,000
// points): the cost does not grow with the window.
func BenchmarkStatsByWindow(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	var at []int64
	var usd []float64
	t, p := int64(0), 20.0
	for t < 90*86400 {
		t += 900 + r.Int64N(1200)
		p *= math.Exp(0.02 * r.NormFloat64())
		at, usd = append(at, t), append(usd, float64(int64(p*1e4+0.5))/1e4)
	}
	s := NewSeries(at, usd)
	for _, days := range []int64{1, 7, 90} {
		b.Run(fmt.Sprintf("%dd", days), func(b *testing.B) {
			for b.Loop() {
				s.Stats(t-days*86400, t)
			}
		})
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

func TestSortPoints(t *testing.T) {
	at, usd := SortPoints([]int64{5, 1, 5, 3}, []float64{50, 10, 51, 30})
	if !slices.Equal(at, []int64{1, 3, 5}) || !slices.Equal(usd, []float64{10, 30, 51}) {
		t.Errorf("sort: %v %v", at, usd)
	}
}
