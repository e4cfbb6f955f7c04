package series

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
)

// refSeries is the step function as two plain slices with linear Stats, Downsample and
// PriceAt: Series must answer exactly as it does (Avg to rounding, prefix areas subtracted).
type refSeries struct {
	at  []int64
	usd []float64
}

func (s refSeries) priceAt(t int64) (float64, bool) {
	i := sort.Search(len(s.at), func(i int) bool { return s.at[i] > t }) - 1
	if i < 0 {
		return 0, false
	}
	return s.usd[i], true
}

func (s refSeries) stats(from, to int64) WindowStats {
	var w WindowStats
	if to <= from || len(s.at) == 0 {
		return w
	}
	i := sort.Search(len(s.at), func(i int) bool { return s.at[i] > from }) - 1
	start := from
	if i < 0 {
		i = 0
		start = s.at[0]
		if start > to {
			return w
		}
	}
	w.Min, w.Max = math.Inf(1), math.Inf(-1)
	w.First = s.usd[i]
	var area float64
	var span int64
	for ; i < len(s.at) && s.at[i] <= to; i++ {
		t0 := s.at[i]
		if t0 < start {
			t0 = start
		} else {
			w.Points++
		}
		t1 := to
		if i+1 < len(s.at) && s.at[i+1] < to {
			t1 = s.at[i+1]
		}
		p := s.usd[i]
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

func (s refSeries) downsample(from, to int64, cols int) (mins, maxs []float64) {
	if cols <= 0 || to <= from {
		return nil, nil
	}
	mins = make([]float64, cols)
	maxs = make([]float64, cols)
	span := float64(to - from)
	for c := range cols {
		c0 := from + int64(span*float64(c)/float64(cols))
		c1 := from + int64(span*float64(c+1)/float64(cols))
		lo, hi := math.NaN(), math.NaN()
		if p, ok := s.priceAt(c0); ok {
			lo, hi = p, p
		}
		for i, t := range s.at {
			if t > c0 && t < c1 {
				p := s.usd[i]
				if math.IsNaN(lo) || p < lo {
					lo = p
				}
				if math.IsNaN(hi) || p > hi {
					hi = p
				}
			}
		}
		mins[c], maxs[c] = lo, hi
	}
	return mins, maxs
}

// randomPoints makes n sorted points from t0 on, their prices drawn by
// kind: quoted to four decimals (the sim, AWS), to six, or with no short
// decimal form (raw bits), with now and then a jump.
func randomPoints(r *rand.Rand, n int, t0 int64, kind int) ([]int64, []float64) {
	at := make([]int64, n)
	usd := make([]float64, n)
	t, p := t0, 1+r.Float64()*50
	for i := range n {
		t += 1 + r.Int64N(3000)
		if r.IntN(50) == 0 {
			t += r.Int64N(1 << 22) // days without a change
		}
		p *= math.Exp(0.05 * r.NormFloat64())
		if r.IntN(100) == 0 {
			p *= 2 // a spike
		}
		at[i] = t
		switch kind {
		case 0:
			usd[i] = float64(int64(p*1e4+0.5)) / 1e4
		case 1:
			usd[i] = float64(int64(p*1e6+0.5)) / 1e6
		default:
			usd[i] = p / 3 // no short decimal form
		}
	}
	return at, usd
}

// checkAgainst compares every answer of s with the reference's, over
// windows and times around the series' points and block edges.
func checkAgainst(t *testing.T, r *rand.Rand, s Series, ref refSeries) {
	t.Helper()
	if s.Len() != len(ref.at) {
		t.Fatalf("Len = %d, want %d", s.Len(), len(ref.at))
	}
	at, usd := points(s)
	if !slices.Equal(at, ref.at) || !slices.Equal(usd, ref.usd) {
		t.Fatalf("points differ from the reference")
	}
	if len(ref.at) == 0 {
		if _, _, ok := s.Last(); ok {
			t.Fatal("empty series has a last point")
		}
		return
	}
	n := len(ref.at)
	if lt, lp, ok := s.Last(); !ok || lt != ref.at[n-1] || lp != ref.usd[n-1] {
		t.Fatalf("Last = %d %v %v", lt, lp, ok)
	}
	for _, i := range []int{0, n - 1, n / 2, r.IntN(n)} {
		if pt, pp := s.Point(i); pt != ref.at[i] || pp != ref.usd[i] {
			t.Fatalf("Point(%d) = %d %v, want %d %v", i, pt, pp, ref.at[i], ref.usd[i])
		}
	}
	// Times: on points, just around them, before and after the series.
	pick := func() int64 {
		i := r.IntN(n)
		switch r.IntN(6) {
		case 0:
			return ref.at[i]
		case 1:
			return ref.at[i] - 1
		case 2:
			return ref.at[i] + 1
		case 3:
			return ref.at[0] - 1 - r.Int64N(1000)
		case 4:
			return ref.at[n-1] + r.Int64N(1000)
		}
		return ref.at[0] + r.Int64N(ref.at[n-1]-ref.at[0]+1)
	}
	for range 200 {
		x := pick()
		got, ok := s.PriceAt(x)
		want, wok := ref.priceAt(x)
		if got != want || ok != wok {
			t.Fatalf("PriceAt(%d) = %v %v, want %v %v", x, got, ok, want, wok)
		}
		from, to := pick(), pick()
		if r.IntN(10) == 0 {
			from, to = ref.at[0]-10, ref.at[n-1]+10
		}
		gs, ws := s.Stats(from, to), ref.stats(from, to)
		avgOK := gs.Avg == ws.Avg || math.Abs(gs.Avg-ws.Avg) <= 1e-9*math.Abs(ws.Avg)
		if gs.OK != ws.OK || gs.Min != ws.Min || gs.Max != ws.Max || gs.First != ws.First || gs.Last != ws.Last || gs.Points != ws.Points || !avgOK {
			t.Fatalf("Stats(%d, %d) = %+v, want %+v", from, to, gs, ws)
		}
		if from < to {
			var wat []int64
			for wt := range s.Window(from, to) {
				wat = append(wat, wt)
			}
			var want []int64
			for i, rt := range ref.at {
				if rt <= to && (rt > from || i+1 == len(ref.at) || ref.at[i+1] > from) {
					want = append(want, rt)
				}
			}
			if !slices.Equal(wat, want) {
				t.Fatalf("Window(%d, %d) = %v, want %v", from, to, wat, want)
			}
		}
		cols := 1 + r.IntN(130)
		gmin, gmax := s.Downsample(from, to, cols)
		rmin, rmax := ref.downsample(from, to, cols)
		if !sameFloats(gmin, rmin) || !sameFloats(gmax, rmax) {
			t.Fatalf("Downsample(%d, %d, %d) = %v %v, want %v %v", from, to, cols, gmin, gmax, rmin, rmax)
		}
	}
}

func sameFloats(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return x == y || (math.IsNaN(x) && math.IsNaN(y)) })
}

// TestSeriesMatchesReference builds series of every size around the block
// length, of each kind of price, in one go, a point at a time, in
// batches and out of order, and holds each against the reference.
func TestSeriesMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	sizes := []int{0, 1, 2, blockLen - 1, blockLen, blockLen + 1, 2*blockLen - 1, 2 * blockLen, 3*blockLen + 7, 20*blockLen + 5, 1000}
	for _, n := range sizes {
		for kind := range 3 {
			at, usd := randomPoints(r, n, 1_700_000_000, kind)
			ref := refSeries{at, usd}
			checkAgainst(t, r, NewSeries(at, usd), ref)

			// a point at a time, as live ticks come
			var s Series
			for i := range at {
				s = s.Merge(at[i:i+1], usd[i:i+1])
			}
			checkAgainst(t, r, s, ref)

			// in batches of random sizes
			s = Series{}
			for i := 0; i < n; {
				j := min(n, i+1+r.IntN(3*blockLen))
				s = s.Merge(at[i:j], usd[i:j])
				i = j
			}
			checkAgainst(t, r, s, ref)

			// newest first, in pages, as a back-fill into the past goes
			s = Series{}
			for j := n; j > 0; {
				i := max(0, j-1-r.IntN(2*blockLen))
				s = s.Merge(at[i:j], usd[i:j])
				j = i
			}
			checkAgainst(t, r, s, ref)

			// shuffled, with duplicates whose later value wins
			if n > 0 {
				perm := r.Perm(n)
				sa := make([]int64, 0, n+3)
				su := make([]float64, 0, n+3)
				for _, i := range perm {
					sa, su = append(sa, at[i]), append(su, usd[i]+1)
				}
				for i := range perm {
					sa, su = append(sa, at[perm[i]]), append(su, usd[perm[i]])
				}
				checkAgainst(t, r, NewSeries(sa, su), ref)
			}
		}
	}
}

// TestDropBefore keeps the point in force at the cut and everything after.
func TestDropBefore(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	at, usd := randomPoints(r, 5*blockLen+17, 1000, 0)
	s := NewSeries(at, usd)
	for _, i := range []int{0, 1, blockLen - 1, blockLen, 3*blockLen + 2, len(at) - 1} {
		for _, cut := range []int64{at[i], at[i] + 1} {
			if i+1 < len(at) && cut >= at[i+1] {
				continue
			}
			d := s.DropBefore(cut)
			checkAgainst(t, r, d, refSeries{at[i:], usd[i:]})
		}
	}
	if d := s.DropBefore(at[0] - 1); d.Len() != s.Len() {
		t.Fatalf("a cut before the series dropped %d points", s.Len()-d.Len())
	}
	checkAgainst(t, r, s, refSeries{at, usd}) // s itself unchanged
}

// TestSeriesEncodings: prices that need more decimals than the block's
// first, prices with no decimal form, huge and tiny prices, and gaps of
// years all come back exactly.
func TestSeriesEncodings(t *testing.T) {
	cases := map[string][]float64{
		"finer later":  {1, 2, 3, 1.5, 1.25, 1.125, 0.0625, 98.32, 0.123456},
		"no decimals":  {1.0 / 3, 2.0 / 3, math.Pi, math.E, 1e-300, math.MaxFloat64, math.SmallestNonzeroFloat64},
		"mixed":        {0.1234, math.NaN(), 0.1235, math.Inf(1), 0.1236},
		"large quoted": {123456.7891, 999999.999999, 0.000001, 0},
		"negative":     {-1.5, 2.25, -0.0001, 3},
	}
	for name, prices := range cases {
		at := make([]int64, 0, 3*blockLen)
		usd := make([]float64, 0, 3*blockLen)
		for i := range 3 * blockLen {
			at = append(at, int64(i)*int64(i)*int64(i)*1000) // gaps up to ~ 60 years
			usd = append(usd, prices[i%len(prices)])
		}
		s := NewSeries(at, usd)
		gat, gusd := points(s)
		if !slices.Equal(gat, at) {
			t.Fatalf("%s: times changed", name)
		}
		for i := range usd {
			if math.Float64bits(gusd[i]) != math.Float64bits(usd[i]) && !(math.IsNaN(gusd[i]) && math.IsNaN(usd[i])) {
				t.Fatalf("%s: price %d = %v, want %v", name, i, gusd[i], usd[i])
			}
		}
	}
}

// TestSeriesIsCompact: a sim-like history (four decimals, a change every
// 15-30 minutes) takes at most 6 bytes a point, where two slices took 16.
func TestSeriesIsCompact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	at := make([]int64, 5000)
	usd := make([]float64, 5000)
	tm, p := int64(1_700_000_000), 20.0
	for i := range at {
		tm += 900 + r.Int64N(900)
		p *= math.Exp(0.02 * r.NormFloat64())
		at[i], usd[i] = tm, float64(int64(p*1e4+0.5))/1e4
	}
	s := NewSeries(at, usd)
	if b := float64(s.Size()) / float64(s.Len()); b > 6 {
		t.Fatalf("%.2f bytes a point, want at most 6", b)
	}
	t.Logf("%.2f bytes a point", float64(s.Size())/float64(s.Len()))
}

// TestSeriesSharing: a reader holding an old version while the owner
// appends (a point at a time and in batches, sealing blocks) sees exactly
// what it had. Run with -race: the owner writes only past the lengths a
// reader holds.
func TestSeriesSharing(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	at, usd := randomPoints(r, 12*blockLen, 1000, 0)
	s := NewSeries(at[:blockLen+5], usd[:blockLen+5])
	var wg sync.WaitGroup
	i := blockLen + 5
	for i < len(at) {
		held := s
		n := i
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				gat, gusd := points(held)
				if !slices.Equal(gat, at[:n]) || !slices.Equal(gusd, usd[:n]) {
					t.Errorf("a held version of %d points changed", n)
					return
				}
				held.Stats(at[0], at[n-1])
				held.Downsample(at[0], at[n-1], 12)
			}
		}()
		j := min(len(at), i+1+r.IntN(blockLen/2))
		if r.IntN(2) == 0 {
			j = i + 1
		}
		s = s.Merge(at[i:j], usd[i:j])
		i = j
	}
	wg.Wait()
	checkAgainst(t, r, s, refSeries{at, usd})
}

// TestTailSealsAtABlock: points appended one at a time are sealed into a
// block as soon as a block's worth has come, so at most a block's worth
// less one is ever kept raw (16 bytes a point against ~5 sealed).
func TestTailSealsAtABlock(t *testing.T) {
	var s Series
	for i := range 3*blockLen + 5 {
		s = s.Merge([]int64{int64(1_700_000_000 + 900*i)}, []float64{20 + float64(i%7)/100})
		if len(s.tail) >= blockLen || s.Len() != i+1 {
			t.Fatalf("after %d points: %d raw, %d in all", i+1, len(s.tail), s.Len())
		}
	}
	if len(s.blocks()) != 3 || len(s.tail) != 5 {
		t.Errorf("%d blocks and %d raw points; want 3 and 5", len(s.blocks()), len(s.tail))
	}
}
