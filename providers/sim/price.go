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
var octaves = [...]struct {
	period int64
	amp    float64
}{{36 * 3600, 0.10}, {8 * 3600, 0.06}, {2 * 3600, 0.03}}

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

// slotHash is the randomness of one slot of the pool.
func (m *model) slotHash(s int64) uint64 { return mix(m.id ^ uint64(s)*0xd1b54a32d192ed03) }

// changeAt reports whether the price changes in slot s, and when.
func (m *model) changeAt(s int64) (int64, bool) {
	h := m.slotHash(s)
	start := s * slotSec
	at := start + int64((h>>16)%slotSec)
	if s%forcedEvery == 0 {
		return at, true
	}
	day, sec := m.local(start)
	busy := hourBusy[sec/3600]
	if weekend(day) {
		busy *= 0.5
	}
	// Busy hours move more: 35 % of slots at night, 75 % at 14:00. About
	// 0.6 changes a slot keep 90 days of ~800 pools under 4 M points while
	// a 2 s live poll still sees a change most of the time.
	p := 0.35 + 0.4*busy
	return at, float64(h&0xffff) < p*65536
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
	k    [len(octaves)]int64
	a, b [len(octaves)]float64
	ok   [len(octaves)]bool
}

// noise is the pool's smooth random walk at t.
func (m *model) noise(t int64, c *knots) float64 {
	var v float64
	for i, o := range octaves {
		k := floorDiv(t, o.period)
		if !c.ok[i] || c.k[i] != k {
			if c.ok[i] && c.k[i]+1 == k {
				c.a[i] = c.b[i]
			} else {
				c.a[i] = m.knot(i, k)
			}
			c.b[i] = m.knot(i, k+1)
			c.k[i], c.ok[i] = k, true
		}
		f := float64(t-k*o.period) / float64(o.period)
		f = f * f * (3 - 2*f)
		v += o.amp * (c.a[i] + (c.b[i]-c.a[i])*f)
	}
	return v
}

// dailyCycle is the daily z term by local minute: busiest at 14:00.
var dailyCycle = func() (d [24 * 60]float64) {
	for i := range d {
		d[i] = dailyAmp * math.Cos(2*math.Pi*(float64(i)/60-14)/24)
	}
	return d
}()

// priceAt is the value a change at t takes; spikeLift is the log lift of
// a spike in force at t (0 for none).
func (m *model) priceAt(t int64, spikeLift float64, c *knots) float64 {
	day, sec := m.local(t)
	daily := dailyCycle[sec/60]
	jitter := jitterAmp * (2*unit(mix(m.id^uint64(t)*0x2545f4914f6cdd1d)) - 1)
	v := m.vol*m.noise(t, c) + jitter + spikeLift
	if weekend(day) {
		v += 0.4*daily - weekendAmp
	} else {
		v += daily
	}
	// Four decimals, as the clouds quote spot prices; the price is
	// positive, so truncating x+0.5 rounds it (faster than math.Round).
	return float64(int64(m.od*clip(m.base*math.Exp(v))*1e4+0.5)) / 1e4
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

// hourTimes returns when the price changes in hour h.
func (m *model) hourTimes(h int64) hour {
	var hr hour
	for s := h * slotsPerHour; s < (h+1)*slotsPerHour; s++ {
		if t, ok := m.changeAt(s); ok {
			hr.at[hr.n] = t
			hr.n++
		}
	}
	if from, to, lift, ok := m.spike(h); ok {
		hr.from, hr.to, hr.lift = from, to, lift
		hr.n = insertTime(&hr.at, hr.n, from)
		hr.n = insertTime(&hr.at, hr.n, to)
	}
	return hr
}

// value is the price the change at hr.at[i] sets.
func (m *model) value(hr *hour, i int, c *knots) float64 {
	t := hr.at[i]
	l := 0.0
	if t >= hr.from && t < hr.to {
		l = hr.lift
	}
	return m.priceAt(t, l, c)
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
	var c knots
	for h := floorDiv(t, 3600); ; h-- {
		hr := m.hourTimes(h)
		for i := hr.n - 1; i >= 0; i-- {
			if hr.at[i] <= t {
				return hr.at[i], m.value(&hr, i, &c)
			}
		}
	}
}

// points calls emit for every point in (from, to], ascending.
func (m *model) points(from, to int64, emit func(at int64, usd float64)) {
	var c knots
	for h := floorDiv(from+1, 3600); h*3600 <= to; h++ {
		hr := m.hourTimes(h)
		for i := 0; i < hr.n; i++ {
			if at := hr.at[i]; at > from && at <= to {
				emit(at, m.value(&hr, i, &c))
			}
		}
	}
}
