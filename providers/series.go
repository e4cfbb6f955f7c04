package providers

import (
	"math"
	"sort"
)

// Series is a pool's spot price history: a step function, each price holding
// from its time until the next point. At holds Unix seconds, ascending and
// unique; USD holds the instance-hour price at the same index. 16 bytes a
// point.
//
// A Series handed out in a snapshot is read-only and may share its backing
// arrays with later, longer versions of itself: its owner only appends
// beyond the length a reader holds, or builds new arrays.
type Series struct {
	At  []int64
	USD []float64
}

// Len is the number of points.
func (s Series) Len() int { return len(s.At) }

// Last returns the newest point.
func (s Series) Last() (at int64, usd float64, ok bool) {
	n := len(s.At)
	if n == 0 {
		return 0, 0, false
	}
	return s.At[n-1], s.USD[n-1], true
}

// PriceAt returns the price in force at t: the last point at or before t.
func (s Series) PriceAt(t int64) (float64, bool) {
	i := sort.Search(len(s.At), func(i int) bool { return s.At[i] > t }) - 1
	if i < 0 {
		return 0, false
	}
	return s.USD[i], true
}

// WindowStats are a series' figures over [From, To].
type WindowStats struct {
	Min, Max float64
	// Avg is time-weighted: each price counts for as long as it held.
	Avg float64
	// First is the price in force at From (the point before the window
	// counts as the price at its start), Last the price at To.
	First, Last float64
	// Points is how many observations fall inside the window.
	Points int
	OK     bool
}

// Stats computes min, max and the time-weighted average over [from, to].
// The price in force at from counts from the window's start; when the
// series starts inside the window, the time before its first point is left
// out.
func (s Series) Stats(from, to int64) WindowStats {
	var w WindowStats
	if to <= from || len(s.At) == 0 {
		return w
	}
	i := sort.Search(len(s.At), func(i int) bool { return s.At[i] > from }) - 1
	start := from
	if i < 0 {
		i = 0
		start = s.At[0]
		if start > to {
			return w
		}
	}
	w.Min, w.Max = math.Inf(1), math.Inf(-1)
	w.First = s.USD[i]
	var area float64
	var span int64
	for ; i < len(s.At) && s.At[i] <= to; i++ {
		t0 := s.At[i]
		if t0 < start {
			t0 = start
		} else {
			w.Points++
		}
		t1 := to
		if i+1 < len(s.At) && s.At[i+1] < to {
			t1 = s.At[i+1]
		}
		p := s.USD[i]
		w.Min = math.Min(w.Min, p)
		w.Max = math.Max(w.Max, p)
		w.Last = p
		if t1 > t0 {
			area += p * float64(t1-t0)
			span += t1 - t0
		}
	}
	if span > 0 {
		w.Avg = area / float64(span)
	} else {
		w.Avg = w.Last
	}
	w.OK = true
	return w
}

// Downsample reduces the step function over [from, to] to cols columns,
// keeping each column's minimum and maximum so that a spike shorter than a
// column still shows. A column with no price (before the first point) is
// NaN in both.
func (s Series) Downsample(from, to int64, cols int) (mins, maxs []float64) {
	if cols <= 0 || to <= from {
		return nil, nil
	}
	mins = make([]float64, cols)
	maxs = make([]float64, cols)
	span := float64(to - from)
	i := sort.Search(len(s.At), func(i int) bool { return s.At[i] > from }) - 1
	for c := 0; c < cols; c++ {
		c0 := from + int64(span*float64(c)/float64(cols))
		c1 := from + int64(span*float64(c+1)/float64(cols))
		lo, hi := math.NaN(), math.NaN()
		// the price in force at the column's start
		for i+1 < len(s.At) && s.At[i+1] <= c0 {
			i++
		}
		if i >= 0 {
			lo, hi = s.USD[i], s.USD[i]
		}
		j := i + 1
		for ; j < len(s.At) && s.At[j] < c1; j++ {
			p := s.USD[j]
			if math.IsNaN(lo) || p < lo {
				lo = p
			}
			if math.IsNaN(hi) || p > hi {
				hi = p
			}
		}
		if j-1 > i {
			i = j - 1
		}
		mins[c], maxs[c] = lo, hi
	}
	return mins, maxs
}

// Merge returns s with the given points added: sorted, a later value for
// the same second replacing an earlier one. When every new point is newer
// than s's last, the result appends to s's arrays (readers of s are not
// disturbed: they never look past their own length); otherwise it is built
// in new arrays. at and usd are not kept.
func (s Series) Merge(at []int64, usd []float64) Series {
	if len(at) == 0 {
		return s
	}
	n := len(s.At)
	if len(at) == 1 && (n == 0 || at[0] > s.At[n-1]) && cap(s.At) > n && cap(s.USD) > n {
		// The live tick's common case: one newer point, room to append.
		return Series{At: append(s.At, at[0]), USD: append(s.USD, usd[0])}
	}
	pts := make([]int, len(at))
	for i := range pts {
		pts[i] = i
	}
	sort.SliceStable(pts, func(a, b int) bool { return at[pts[a]] < at[pts[b]] })
	if n == 0 || at[pts[0]] > s.At[n-1] {
		out := s
		if cap(out.At)-len(out.At) < len(at) {
			// Grow into new arrays so appends never race with a reader
			// that holds s: copying happens here, not in place.
			out = Series{At: make([]int64, n, grow(n, len(at))), USD: make([]float64, n, grow(n, len(at)))}
			copy(out.At, s.At)
			copy(out.USD, s.USD)
		}
		for _, k := range pts {
			if m := len(out.At); m > n && out.At[m-1] == at[k] {
				out.USD[m-1] = usd[k]
				continue
			}
			out.At = append(out.At, at[k])
			out.USD = append(out.USD, usd[k])
		}
		return out
	}
	out := Series{At: make([]int64, 0, n+len(at)), USD: make([]float64, 0, n+len(at))}
	i, j := 0, 0
	for i < n || j < len(pts) {
		var t int64
		var p float64
		if j >= len(pts) || (i < n && s.At[i] <= at[pts[j]]) {
			t, p = s.At[i], s.USD[i]
			i++
		} else {
			t, p = at[pts[j]], usd[pts[j]]
			j++
		}
		if m := len(out.At); m > 0 && out.At[m-1] == t {
			out.USD[m-1] = p
			continue
		}
		out.At = append(out.At, t)
		out.USD = append(out.USD, p)
	}
	return out
}

// grow picks the capacity for appending extra points to n: an eighth more
// for long series (live ticks add a point at a time; doubling would leave a
// back-filled history at 32 bytes a point), at least 16.
func grow(n, extra int) int {
	c := n + extra
	if c < n+n/8 {
		c = n + n/8
	}
	if c < 16 {
		c = 16
	}
	return c
}
