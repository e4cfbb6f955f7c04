package sim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The price model as first written: one full hash and one threshold
// lookup per slot, the knots found by dividing the time, math.Exp for
// every point. It is kept here, slow and plain, as the reference the
// generator must match bit for bit (TestGeneratorMatchesReference): the
// generator may get faster, never different.

func (m *model) refSlotHash(s int64) uint64 { return mix(m.id ^ uint64(s)*0xd1b54a32d192ed03) }

func (m *model) refChangeAt(s int64, cal *calendar) (int64, bool) {
	h := m.refSlotHash(s)
	at := s*slotSec + int64((h>>16)%slotSec)
	if s&(forcedEvery-1) == 0 {
		return at, true
	}
	return at, float64(h&0xffff) < changeOdds[cal.w][uint64(cal.sec)/3600]
}

// noKnot is no knot's number, so loading knot k after it never takes it for k-1.
const noKnot = math.MinInt64

type refKnots struct {
	k    [nOctaves]int64
	a, b [nOctaves]float64
}

func newRefKnots() refKnots { return refKnots{k: [nOctaves]int64{noKnot, noKnot, noKnot}} }

func (c *refKnots) load(m *model, i int, k int64) {
	if c.k[i] != noKnot && c.k[i]+1 == k {
		c.a[i] = c.b[i]
	} else {
		c.a[i] = m.knot(i, k)
	}
	c.b[i] = m.knot(i, k+1)
	c.k[i] = k
}

func refKnotOf(t, period int64) int64 {
	if t >= 0 {
		return int64(uint64(t) / uint64(period))
	}
	return floorDiv(t, period)
}

func (m *model) refPriceAt(t int64, cal *calendar, spikeLift float64, c *refKnots) float64 {
	k0, k1, k2 := refKnotOf(t, period0), refKnotOf(t, period1), refKnotOf(t, period2)
	if c.k[0] != k0 {
		c.load(m, 0, k0)
	}
	if c.k[1] != k1 {
		c.load(m, 1, k1)
	}
	if c.k[2] != k2 {
		c.load(m, 2, k2)
	}
	f0 := float64(t-k0*period0) / period0
	f1 := float64(t-k1*period1) / period1
	f2 := float64(t-k2*period2) / period2
	f0 = f0 * f0 * (3 - 2*f0)
	f1 = f1 * f1 * (3 - 2*f1)
	f2 = f2 * f2 * (3 - 2*f2)
	var noise float64
	noise += amp0 * (c.a[0] + (c.b[0]-c.a[0])*f0)
	noise += amp1 * (c.a[1] + (c.b[1]-c.a[1])*f1)
	noise += amp2 * (c.a[2] + (c.b[2]-c.a[2])*f2)

	daily := dailyCycle[uint64(cal.sec)/60]
	jitter := jitterAmp * (2*unit(mix(m.id^uint64(t)*0x2545f4914f6cdd1d)) - 1)
	v := m.vol*noise + jitter + spikeLift
	if cal.w == 1 {
		v += 0.4*daily - weekendAmp
	} else {
		v += daily
	}
	r := m.base * math.Exp(v)
	if r > ratioHi-ratioKnee || r < ratioLo+ratioKnee {
		r = clip(r)
	}
	return float64(int64(m.od*r*1e4+0.5)) / 1e4
}

func (m *model) refHourTimes(hr *hour, h int64, cal calendar) {
	n := 0
	for s := h * slotsPerHour; s < (h+1)*slotsPerHour; s++ {
		if t, ok := m.refChangeAt(s, &cal); ok {
			hr.at[n] = t
			n++
		}
		cal.advance(slotSec)
	}
	hr.n, hr.from, hr.to, hr.lift = n, 0, 0, 0
	if from, to, lift, ok := m.spike(h); ok {
		hr.from, hr.to, hr.lift = from, to, lift
		hr.n = insertTime(&hr.at, hr.n, from)
		hr.n = insertTime(&hr.at, hr.n, to)
	}
}

func (m *model) refValue(hr *hour, i int, h int64, cal calendar, c *refKnots) float64 {
	t := hr.at[i]
	l := 0.0
	if t >= hr.from && t < hr.to {
		l = hr.lift
	}
	cal.advance(t - h*3600)
	return m.refPriceAt(t, &cal, l, c)
}

// advance moves the calendar d seconds on; d is less than a day.
// calendar is the region's local day and second of the day at some instant.
type calendar struct {
	day, sec int64
	w        int // 1 on the weekend, else 0: an index of changeOdds
}

func (m *model) calendarAt(t int64) calendar {
	day, sec := m.local(t)
	return calendar{day: day, sec: sec, w: weekendIndex(day)}
}

func weekendIndex(day int64) int {
	if weekend(day) {
		return 1
	}
	return 0
}

func (c *calendar) advance(d int64) {
	c.sec += d
	if c.sec >= 86400 {
		c.sec -= 86400
		c.day++
		c.w = weekendIndex(c.day)
	}
}

// refInForce is the point in force at t.
func (m *model) refInForce(t int64) (int64, float64) {
	c := newRefKnots()
	for h := floorDiv(t, 3600); ; h-- {
		cal := m.calendarAt(h * 3600)
		var hr hour
		m.refHourTimes(&hr, h, cal)
		for i := hr.n - 1; i >= 0; i-- {
			if hr.at[i] <= t {
				return hr.at[i], m.refValue(&hr, i, h, cal, &c)
			}
		}
	}
}

// refAppendPoints appends every point in (from, to].
func (m *model) refAppendPoints(at []int64, usd []float64, from, to int64) ([]int64, []float64) {
	c := newRefKnots()
	h := floorDiv(from+1, 3600)
	cal := m.calendarAt(h * 3600)
	var hr hour
	for ; h*3600 <= to; h++ {
		m.refHourTimes(&hr, h, cal)
		for _, t := range hr.at[:hr.n] {
			if t <= from {
				continue
			}
			if t > to {
				break
			}
			lift := 0.0
			if t >= hr.from && t < hr.to {
				lift = hr.lift
			}
			pc := cal
			pc.advance(t - h*3600)
			at = append(at, t)
			usd = append(usd, m.refPriceAt(t, &pc, lift, &c))
		}
		cal.advance(3600)
	}
	return at, usd
}

// hour is the change times of one hour of a pool, ascending and unique,
// and its spike if it has one.
type hour struct {
	at       [slotsPerHour + 2]int64
	n        int
	from, to int64 // the spike, [from, to)
	lift     float64
}

// TestGeneratorMatchesReference holds the generator to the reference
// above: every pool's every point of 90 days, for a few seeds, the same
// times and the same prices bit for bit, and the point in force too. The
// fast path's shortcuts (the exponential from a table, the noise as one
// cubic, a guard band around each rounding edge) would show here as
// prices a tick apart.
func TestGeneratorMatchesReference(t *testing.T) {
	to := wed.Unix()
	from := to - 90*86400
	seeds := []int64{1, 2, 42}
	if testing.Short() || raceEnabled {
		seeds = seeds[:1]
	}
	var at, q []int64
	for _, seed := range seeds {
		m := newAt(seed, wed)
		for _, p := range m.pools {
			if p.model.monthly {
				continue // Google's pools step monthly (TestGooglePricesStepMonthly)
			}
			key := p.spec.Desc.Key()
			at, q = p.model.appendTicks(at[:0], q[:0], from, to, nil)
			ra, ru := p.model.refAppendPoints(nil, nil, from, to)
			if len(at) != len(ra) {
				t.Fatalf("seed %d %s: %d points, the reference %d", seed, key, len(at), len(ra))
			}
			for i := range at {
				if at[i] != ra[i] || float64(q[i])/priceScale != ru[i] {
					t.Fatalf("seed %d %s: point %d is %d %v, the reference's %d %v", seed, key, i, at[i], float64(q[i])/priceScale, ra[i], ru[i])
				}
			}
			for _, x := range []int64{from, from + 1, to - 7*3600 - 1, to} {
				gotAt, gotUSD := p.model.inForce(x)
				wantAt, wantUSD := p.model.refInForce(x)
				if gotAt != wantAt || gotUSD != wantUSD {
					t.Fatalf("seed %d %s: in force at %d: %d %v, the reference's %d %v", seed, key, x, gotAt, gotUSD, wantAt, wantUSD)
				}
			}
		}
	}
}

// TestGeneratorMatchesReferenceInPieces asks for short windows with
// random ends (a live poll's, a chunk's), including windows inside one
// hour and windows that end on a change.
func TestGeneratorMatchesReferenceInPieces(t *testing.T) {
	m := newAt(3, wed)
	rng := rand.New(rand.NewPCG(3, 4))
	points := 0
	for range 3000 {
		p := m.pools[rng.IntN(len(m.pools))]
		if p.model.monthly {
			continue
		}
		from := wed.Unix() - rng.Int64N(30*86400)
		to := from + rng.Int64N(4*3600)
		if rng.IntN(4) == 0 {
			// end on a change, or start on one
			ra, _ := p.model.refAppendPoints(nil, nil, from, from+3*3600)
			if len(ra) > 0 {
				if rng.IntN(2) == 0 {
					to = ra[0]
				} else {
					from = ra[0]
				}
			}
		}
		at, q := p.model.appendTicks(nil, nil, from, to, nil)
		ra, ru := p.model.refAppendPoints(nil, nil, from, to)
		if len(at) != len(ra) {
			t.Fatalf("%s (%d, %d]: %d points, the reference %d", p.spec.Desc.Key(), from, to, len(at), len(ra))
		}
		for i := range at {
			if at[i] != ra[i] || float64(q[i])/priceScale != ru[i] {
				t.Fatalf("%s (%d, %d]: point %d is %d %v, the reference's %d %v", p.spec.Desc.Key(), from, to, i, at[i], float64(q[i])/priceScale, ra[i], ru[i])
			}
		}
		points += len(at)
	}
	if points < 3000 {
		t.Fatalf("%d points in 3000 windows: the test compares too little", points)
	}
}

// TestExpNearIsNearExp: the table's exponential is within 3e-13 of
// math.Exp's over its whole range (the guard band around rounding edges
// assumes 2.5e-13 and a little rounding), on a fine grid and at random.
func TestExpNearIsNearExp(t *testing.T) {
	worst := 0.0
	check := func(v float64) {
		y := (v + expMax) * expSteps
		i := int(y + 0.5)
		if uint(i) >= uint(len(expTable)) {
			t.Fatalf("v %v: index %d out of the table", v, i)
		}
		e := expNear(y, i)
		worst = max(worst, math.Abs(e/math.Exp(v)-1))
	}
	for v := -float64(expMax) + 1e-9; v < expMax-1e-9; v += 1.0 / 4099 {
		check(v)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200_000 {
		check((2*rng.Float64() - 1) * (expMax - 1e-9))
	}
	if worst > 3e-13 {
		t.Fatalf("expNear is off by %g of e^v, want at most 3e-13", worst)
	}
	t.Logf("expNear within %.2g of math.Exp", worst)
}

// TestPricesNearARoundingEdge: pools whose on-demand price puts a point's
// price within a hair of a rounding edge (where the fast path's answer
// cannot be trusted and exactX decides), or exactly on it, get the
// reference's price, clipped or not.
func TestPricesNearARoundingEdge(t *testing.T) {
	m := newAt(1, wed)
	rng := rand.New(rand.NewPCG(7, 8))
	tried := 0
	for range 400 {
		p := m.pools[rng.IntN(len(m.pools))]
		if p.model.monthly {
			continue
		}
		from := wed.Unix() - rng.Int64N(30*86400)
		ra, ru := p.model.refAppendPoints(nil, nil, from, from+4*3600)
		if len(ra) == 0 {
			continue
		}
		i := rng.IntN(len(ra))
		// The exact x of point i, before rounding, is od·r·1e4 + 0.5;
		// move od so that it lands delta from an edge.
		x := p.model.exactX(ra[i], spikeLiftAt(&p.model, ra[i]))
		for _, delta := range []float64{0, 1e-12, -1e-12, 1e-9, -1e-9, 3e-7, -3e-7} {
			mod := p.model
			mod.od *= (math.Floor(x) + delta - 0.5) / (x - 0.5)
			at, q := mod.appendTicks(nil, nil, ra[i]-1, ra[i], nil)
			wa, wu := mod.refAppendPoints(nil, nil, ra[i]-1, ra[i])
			if len(at) != 1 || len(wa) != 1 || at[0] != wa[0] || float64(q[0])/priceScale != wu[0] {
				t.Fatalf("%s at %d, od %v (x %v from an edge by %g): %v %v, the reference's %v %v", p.spec.Desc.Key(), ra[i], mod.od, x, delta, at, q, wa, wu)
			}
			tried++
		}
		_ = ru
	}
	if tried < 1000 {
		t.Fatalf("only %d prices tried", tried)
	}
}

// spikeLiftAt is the log lift of the spike in force at t, if any.
func spikeLiftAt(m *model, t int64) float64 {
	if from, to, lift, ok := m.spike(floorDiv(t, 3600)); ok && t >= from && t < to {
		return lift
	}
	return 0
}
