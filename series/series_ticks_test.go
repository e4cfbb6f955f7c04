package series

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomTicks makes n sorted points from t0 on with prices in ticks of
// 10^-digits, drawn by kind: small moves (every block wide), now and
// then a jump too big for 16 bits or a gap too long (some blocks
// varints), or prices with trailing zeros (varint blocks take fewer
// decimals).
func randomTicks(r *rand.Rand, n int, t0 int64, kind int) (at, q []int64) {
	at, q = make([]int64, n), make([]int64, n)
	t, p := t0, 1e4+r.Int64N(5e5)
	for i := range n {
		t += 1 + r.Int64N(3000)
		p += r.Int64N(2001) - 1000
		switch {
		case kind == 1 && r.IntN(100) == 0:
			p += 40000 // a jump of more than 1<<15
		case kind == 1 && r.IntN(100) == 0:
			t += 1<<16 + r.Int64N(3) - 1 // a gap around the 16 bits' limit
		case kind == 2:
			p -= p % 100
		}
		at[i], q[i] = t, max(p, 1)
	}
	return at, q
}

func prices(q []int64, digits int) []float64 {
	usd := make([]float64, len(q))
	for i, x := range q {
		usd[i] = float64(x) / tickScale(digits)
	}
	return usd
}

// TestSeriesOfTicksIsNewSeries: a series built from ticks answers exactly
// as the reference and as NewSeries of the same prices do, Stats' Avg
// bit for bit (its areas are summed in the same order), whatever mix of
// wide and varint blocks it holds, and live points merged onto it after.
func TestSeriesOfTicksIsNewSeries(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	sizes := []int{0, 1, blockLen - 1, blockLen, blockLen + 1, 3*blockLen + 7, 40*blockLen + 5}
	for _, n := range sizes {
		for kind := range 3 {
			for _, digits := range []int{0, 4, 6, 9} {
				at, q := randomTicks(r, n+10, 1_700_000_000, kind)
				usd := prices(q, digits)
				s := NewSeriesOfTicks(at[:n], q[:n], digits)
				checkAgainst(t, r, s, refSeries{at[:n], usd[:n]})
				wide := 0
				for _, b := range s.blocks() {
					if b.wide {
						wide++
					}
				}
				if nb := len(s.blocks()); kind == 0 && wide != nb || kind == 1 && nb > 20 && wide == nb {
					t.Fatalf("n %d kind %d: %d of %d blocks wide", n, kind, wide, nb)
				}
				f := NewSeries(at[:n], usd[:n])
				for range 100 {
					from := at[0] - 100 + r.Int64N(at[len(at)-1]-at[0]+200)
					to := from + r.Int64N(at[len(at)-1]-from+100)
					if gs, ws := s.Stats(from, to), f.Stats(from, to); gs != ws {
						t.Fatalf("n %d kind %d digits %d: Stats(%d, %d) = %+v, NewSeries' %+v", n, kind, digits, from, to, gs, ws)
					}
				}
				// live points after
				for i := n; i < len(at); i++ {
					s = s.Merge(at[i:i+1], usd[i:i+1])
				}
				checkAgainst(t, r, s, refSeries{at, usd})
			}
		}
	}
}

// TestWideBlocks: deltas at the limits of 16 bits go wide, one past them
// sends the block to varints; either way every point comes back.
func TestWideBlocks(t *testing.T) {
	cases := []struct {
		name string
		dt   int64 // a time delta in the block
		dq   int64 // a price delta in the block
		wide bool
	}{
		{"smallest", 1, 0, true},
		{"longest gap", 1 << 16, 1, true},
		{"gap too long", 1<<16 + 1, 1, false},
		{"biggest rise", 900, 1<<15 - 1, true},
		{"rise too big", 900, 1 << 15, false},
		{"biggest fall", 900, -1 << 15, true},
		{"fall too big", 900, -1<<15 - 1, false},
	}
	for _, c := range cases {
		at, q := make([]int64, 2*blockLen), make([]int64, 2*blockLen)
		tm, p := int64(1_700_000_000), int64(1_000_000)
		for i := range at {
			if i == 50 {
				tm, p = tm+c.dt, p+c.dq
			} else {
				tm, p = tm+900, p+int64(i%3)-1
			}
			at[i], q[i] = tm, p
		}
		s := NewSeriesOfTicks(at, q, 4)
		if got := s.blocks()[0].wide; got != c.wide {
			t.Errorf("%s: first block wide %v, want %v", c.name, got, c.wide)
		}
		if !s.blocks()[1].wide {
			t.Errorf("%s: second block not wide", c.name)
		}
		checkAgainst(t, rand.New(rand.NewPCG(1, 2)), s, refSeries{at, prices(q, 4)})
	}
}

// TestSeriesOfTicksOtherInput: points out of order or repeated, ticks too
// big for the short way, and decimals beyond nine are handed to NewSeries,
// which sorts them (the later value of a repeated time wins) and keeps
// them as they are.
func TestSeriesOfTicksOtherInput(t *testing.T) {
	at := []int64{50, 10, 30, 30, 20}
	q := []int64{5, 1, 3, 4, 2}
	s := NewSeriesOfTicks(at, q, 2)
	gat, gusd := points(s)
	if !slices.Equal(gat, []int64{10, 20, 30, 50}) || !slices.Equal(gusd, []float64{0.01, 0.02, 0.04, 0.05}) {
		t.Fatalf("out of order: %v %v", gat, gusd)
	}
	r := rand.New(rand.NewPCG(13, 14))
	same := func(name string, at, q []int64, digits int) {
		t.Helper()
		s, f := NewSeriesOfTicks(at, q, digits), NewSeries(at, prices(q, digits))
		sat, susd := points(s)
		fat, fusd := points(f)
		if !slices.Equal(sat, fat) || !slices.Equal(susd, fusd) {
			t.Fatalf("%s: points differ from NewSeries'", name)
		}
		for range 100 {
			from := at[0] + r.Int64N(at[len(at)-1]-at[0])
			to := from + r.Int64N(at[len(at)-1]-from+100)
			if gs, ws := s.Stats(from, to), f.Stats(from, to); gs != ws {
				t.Fatalf("%s: Stats(%d, %d) = %+v, NewSeries' %+v", name, from, to, gs, ws)
			}
		}
	}
	at, q = randomTicks(r, 3*blockLen, 1000, 0)
	q[blockLen+3] = 1 << 52
	same("a tick of 2^52", at, q, 4)
	for _, digits := range []int{-2, 12} {
		at, q = randomTicks(r, 2*blockLen, 1000, 0)
		same("unusual decimals", at, q, digits)
	}
	if s := NewSeriesOfTicks(nil, nil, 4); s.Len() != 0 {
		t.Fatalf("no points: Len %d", s.Len())
	}
}

// TestSeriesOfTicksIsCompact: the sim-like history of TestSeriesIsCompact
// built from ticks, in wide blocks, stays under 6 bytes a point.
func TestSeriesOfTicksIsCompact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	at, q := make([]int64, 5000), make([]int64, 5000)
	tm, p := int64(1_700_000_000), 20.0
	for i := range at {
		tm += 900 + r.Int64N(900)
		p *= math.Exp(0.02 * r.NormFloat64())
		at[i], q[i] = tm, int64(p*1e4+0.5)
	}
	s := NewSeriesOfTicks(at, q, 4)
	if b := float64(s.Size()) / float64(s.Len()); b > 6 {
		t.Fatalf("%.2f bytes a point, want at most 6", b)
	}
	t.Logf("%.2f bytes a point", float64(s.Size())/float64(s.Len()))
}
