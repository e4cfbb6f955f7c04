package sim

import (
	"math"
)

// The price model. A pool's spot price is a step function of time that is a
// pure function of (seed, pool, t): whoever asks, in whatever chunks, gets
// the same points. Time is cut into slots; a hash of (pool, slot) decides
// whether the price changes in the slot and at which second, and rare
// spikes are decided per hour. The value at a change is the share
//
//	ratio(t) = clip(base · exp(vol·noise(t) + daily(t) + weekly(t) + jitter(t) + spike(t)))
//
// of the on-demand price: multiplicative moves of a few percent, and clip
// bends them smoothly into the band, so whatever the walk does, spot stays
// 60.5-90.5 % below on-demand.
const (
	slotSec      = 15 * 60 // a price changes at most once a slot…
	slotsPerHour = 3600 / slotSec
	forcedEvery  = 8 // …and surely once every 8 slots (2 h), so the price in force is never far back
	// spikeOdds is the chance that an hour holds a spike (about five per
	// pool in 90 days).
	spikeOdds = 1.0 / 400
	ratioLo   = 0.095 // spot / on-demand, the band's bottom: 90.5 % saving
	ratioHi   = 0.395 // the band's top: 60.5 % saving

	ratioKnee = 0.03 // clip bends the ratio this close to the band's edges

	// Log amplitudes: the daily cycle (±4 % on weekdays), the weekend's
	// drop (6 %), and each change's own jitter (±1.5 %).
	dailyAmp   = 0.04
	weekendAmp = 0.06
	jitterAmp  = 0.015
)

// noise octaves: knots every period seconds with values in [-amp, amp],
// smoothly interpolated; together a slow random walk with faster wiggles.
// They are constants so that noise divides by constants (a multiply),
// not by a variable (a division instruction, and the remainder again).
const (
	period0, amp0 = 36 * 3600, 0.10
	period1, amp1 = 8 * 3600, 0.06
	period2, amp2 = 2 * 3600, 0.03
	nOctaves      = 3
)

// mix is splitmix64's finaliser: a fast, well-spread 64-bit hash step.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// unit maps a hash onto [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// model is the price process of one pool.
type model struct {
	id     uint64 // hash of seed and pool key
	od     float64
	base   float64 // the typical spot / on-demand ratio
	vol    float64 // scales the noise: some pools are jumpier
	offset int64   // region's UTC offset in seconds
}

// hourBusy is the market's activity by local hour: 0 at night, 1 at 14:00.
var hourBusy = func() (b [24]float64) {
	for h := range b {
		b[h] = 0.5 + 0.5*math.Cos(2*math.Pi*(float64(h)-14)/24)
	}
	return b
}()

// changeOdds is, by weekend and local hour, the threshold under which a
// slot's 16-bit draw makes the price change. Busy hours move more: 35 %
// of slots at night, 75 % at 14:00, half as busy at the weekend. About
// 0.6 changes a slot keep 90 days of ~800 pools under 4 M points while a
// 2 s live poll still sees a change most of the time.
var changeOdds = func() (o [2][24]float64) {
	for w := range o {
		for h := range o[w] {
			busy := hourBusy[h]
			if w == 1 {
				busy *= 0.5
			}
			p := 0.35 + 0.4*busy
			o[w][h] = p * 65536
		}
	}
	return o
}()

func newModel(seed int64, s *poolSpec) model {
	id := mix(uint64(seed)*0x9e3779b97f4a7c15 ^ strHash(s.Desc.Key().String()))
	return model{
		id:     id,
		od:     *s.Desc.OnDemandUSDHour,
		base:   s.BaseRatio,
		vol:    0.7 + 0.6*unit(mix(id^0x5eed)),
		offset: int64(s.Region.UTCOffset * 3600),
	}
}

// local returns the region's local day number and second of day at t.
func (m *model) local(t int64) (day, sec int64) {
	lt := t + m.offset
	day = floorDiv(lt, 86400)
	return day, lt - day*86400
}

// weekend reports whether a local day number is a Saturday or Sunday.
func weekend(day int64) bool {
	dow := ((day+4)%7 + 7) % 7 // 1970-01-01 was a Thursday; 0 = Sunday
	return dow == 0 || dow == 6
}

// calendar is the region's local day and second of the day at some
// instant. A walk through time carries it forward (advance) instead of
// dividing the time again for every slot and point.
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

// advance moves the calendar d seconds on; d is less than a day.
func (c *calendar) advance(d int64) {
	c.sec += d
	if c.sec >= 86400 {
		c.sec -= 86400
		c.day++
		c.w = weekendIndex(c.day)
	}
}

// slotHash is the randomness of one slot of the pool.
func (m *model) slotHash(s int64) uint64 { return mix(m.id ^ uint64(s)*0xd1b54a32d192ed03) }

// changeAt reports whether the price changes in slot s, and when; cal is
// the local calendar at the slot's start.
func (m *model) changeAt(s int64, cal *calendar) (int64, bool) {
	h := m.slotHash(s)
	at := s*slotSec + int64((h>>16)%slotSec)
	// s%forcedEvery == 0, for a power of two and either sign of s
	if s&(forcedEvery-1) == 0 {
		return at, true
	}
	return at, float64(h&0xffff) < changeOdds[cal.w][uint64(cal.sec)/3600]
}

// spike returns the hour's spike, if it has one: [from, to) and its log
// lift. A spike starts and ends within its hour.
func (m *model) spike(hour int64) (from, to int64, lift float64, ok bool) {
	h := mix(m.id ^ uint64(hour)*0x8cb92ba72f3d8dd7 ^ 0xa5a5)
	if unit(h) >= spikeOdds {
		return 0, 0, 0, false
	}
	g := mix(h)
	dur := int64(300 + (g&0xffff)%2100) // 5 to 40 minutes
	from = hour*3600 + int64((g>>16)%uint64(3600-dur))
	lift = 0.25 + 0.45*unit(mix(g)) // +28 % to +100 %, before the clip
	return from, from + dur, lift, true
}

// knot is a noise knot value in [-1, 1].
func (m *model) knot(oct int, k int64) float64 {
	return 2*unit(mix(m.id^uint64(oct+1)*0x9e3779b97f4a7c15^uint64(k)*0xbf58476d1ce4e5b9)) - 1
}

// knots caches the two knots around the last time asked, per octave: a
// walk through time hashes each knot once instead of once per point.
type knots struct {
	k    [nOctaves]int64 // noKnot until loaded
	a, b [nOctaves]float64
}

// noKnot is no knot's number: loading knot k after it never takes it for
// k-1.
const noKnot = math.MinInt64

func newKnots() knots { return knots{k: [nOctaves]int64{noKnot, noKnot, noKnot}} }

// load makes knots k and k+1 octave i's pair.
func (c *knots) load(m *model, i int, k int64) {
	if c.k[i] != noKnot && c.k[i]+1 == k {
		c.a[i] = c.b[i]
	} else {
		c.a[i] = m.knot(i, k)
	}
	c.b[i] = m.knot(i, k+1)
	c.k[i] = k
}

// knotOf is the number of the knot at or before t of an octave of the
// period: t's floor division by it, by an unsigned division (a multiply
// where period is a constant) for the times that matter.
func knotOf(t, period int64) int64 {
	if t >= 0 {
		return int64(uint64(t) / uint64(period))
	}
	return floorDiv(t, period)
}

// dailyCycle is the daily z term by local minute: busiest at 14:00.
var dailyCycle = func() (d [24 * 60]float64) {
	for i := range d {
		d[i] = dailyAmp * math.Cos(2*math.Pi*(float64(i)/60-14)/24)
	}
	return d
}()

// priceAt is the value a change at t takes; cal is the local calendar at
// t, spikeLift the log lift of a spike in force at t (0 for none).
//
// The noise, the pool's smooth random walk, is written out here per
// octave (its two knots around t smoothly interpolated, summed in the
// octaves' order) so that each divides by a constant; this runs for every
// one of the millions of points of a long back-fill.
func (m *model) priceAt(t int64, cal *calendar, spikeLift float64, c *knots) float64 {
	k0, k1, k2 := knotOf(t, period0), knotOf(t, period1), knotOf(t, period2)
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
	// Four decimals, as the clouds quote spot prices; the price is
	// positive, so truncating x+0.5 rounds it (faster than math.Round).
	return float64(int64(m.od*r*1e4+0.5)) / 1e4
}

// clip bends a ratio smoothly into [ratioLo, ratioHi]: unchanged in the
// middle, approaching each edge asymptotically within ratioKnee of it.
func clip(r float64) float64 {
	if k := ratioHi - ratioKnee; r > k {
		return k + ratioKnee*(1-math.Exp(-(r-k)/ratioKnee))
	}
	if k := ratioLo + ratioKnee; r < k {
		return k - ratioKnee*(1-math.Exp(-(k-r)/ratioKnee))
	}
	return r
}

// hour is the change times of one hour of a pool, ascending and unique,
// and its spike if it has one.
type hour struct {
	at       [slotsPerHour + 2]int64
	n        int
	from, to int64 // the spike, [from, to)
	lift     float64
}

// hourTimes fills hr with when the price changes in hour h; cal is the
// local calendar at the hour's start.
func (m *model) hourTimes(hr *hour, h int64, cal calendar) {
	n := 0
	for s := h * slotsPerHour; s < (h+1)*slotsPerHour; s++ {
		if t, ok := m.changeAt(s, &cal); ok {
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

// value is the price the change at hr.at[i] sets; cal is the local
// calendar at the hour's start.
func (m *model) value(hr *hour, i int, h int64, cal calendar, c *knots) float64 {
	t := hr.at[i]
	l := 0.0
	if t >= hr.from && t < hr.to {
		l = hr.lift
	}
	cal.advance(t - h*3600)
	return m.priceAt(t, &cal, l, c)
}

// insertTime inserts t into the ascending at[:n], skipping duplicates.
func insertTime(at *[slotsPerHour + 2]int64, n int, t int64) int {
	i := n
	for i > 0 && at[i-1] > t {
		i--
	}
	if i > 0 && at[i-1] == t {
		return n
	}
	copy(at[i+1:n+1], at[i:n])
	at[i] = t
	return n + 1
}

// inForce returns the point in force at t: the last change at or before t.
func (m *model) inForce(t int64) (int64, float64) {
	c := newKnots()
	for h := floorDiv(t, 3600); ; h-- {
		cal := m.calendarAt(h * 3600)
		var hr hour
		m.hourTimes(&hr, h, cal)
		for i := hr.n - 1; i >= 0; i-- {
			if hr.at[i] <= t {
				return hr.at[i], m.value(&hr, i, h, cal, &c)
			}
		}
	}
}

// appendPoints appends every point in (from, to], ascending, to at and
// usd. It walks hour by hour, carrying the calendar and the noise knots.
func (m *model) appendPoints(at []int64, usd []float64, from, to int64) ([]int64, []float64) {
	c := newKnots()
	h := floorDiv(from+1, 3600)
	cal := m.calendarAt(h * 3600)
	var hr hour
	for ; h*3600 <= to; h++ {
		m.hourTimes(&hr, h, cal)
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
			usd = append(usd, m.priceAt(t, &pc, lift, &c))
		}
		cal.advance(3600)
	}
	return at, usd
}
