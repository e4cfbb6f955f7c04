package sim

import (
	"math"
	"slices"
)

// The price model: a pool's spot price is a pure function of (seed, pool, t),
// so any chunking gives the same points. docs/DESIGN.md ("The simulated
// market") gives the formula and the fast path; price_ref_test.go keeps the
// plain formulation the generator is held to.
const (
	slotSec      = 15 * 60 // a price changes at most once a slot…
	slotsPerHour = 3600 / slotSec
	slotsPerWeek = 7 * 24 * slotsPerHour
	forcedEvery  = 8 // …and surely once every 8 slots (2 h), so the price in force is never far back
	// priceDigits are a price's decimals, as the clouds quote spot prices; the generator works in ticks of the last one.
	priceDigits = 4
	priceScale  = 1e4
	// spikeOdds is the chance an hour holds a spike (about five per pool in 90 days).
	spikeOdds = 1.0 / 400
	ratioLo   = 0.095 // spot / on-demand, the band's bottom: 90.5 % saving
	ratioHi   = 0.395 // the band's top: 60.5 % saving

	ratioKnee = 0.03 // clip bends the ratio this close to the band's edges

	// Log amplitudes: daily cycle ±4 % on weekdays, weekend drop 6 %, per-change jitter ±1.5 %.
	dailyAmp   = 0.04
	weekendAmp = 0.06
	jitterAmp  = 0.015
)

// Noise octaves: smoothed knots every period seconds in [-amp, amp]. Constants,
// so dividing by them is a multiply.
const (
	period0, amp0 = 36 * 3600, 0.10
	period1, amp1 = 8 * 3600, 0.06
	period2, amp2 = 2 * 3600, 0.03
	nOctaves      = 3
)

var octaves = [nOctaves]struct {
	period int64
	amp    float64
}{{period0, amp0}, {period1, amp1}, {period2, amp2}}

// mix is splitmix64's finaliser: a fast, well-spread 64-bit hash step.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// hot holds hot-loop constants as variables: Go reloads a constant into a
// register at each use, a tenth of these loops' cost.
var hot = struct {
	mix1, mix2, jitter             uint64
	jitterScale, sixtieth, perSlot float64
	one, half, e2, e3, e4          float64
	expY, expY0, expStep           float64
	kHi, kLo, knee, perKnee, guard float64
	spike                          uint64
}{
	mix1: 0xbf58476d1ce4e5b9, mix2: 0x94d049bb133111eb, jitter: 0x2545f4914f6cdd1d,
	jitterScale: 2 * jitterAmp / (1 << 53), sixtieth: 1.0 / 60, perSlot: 1.0 / slotSec,
	one: 1, half: 0.5, e2: 1.0 / 2, e3: 1.0 / 6, e4: 1.0 / 24,
	expY: expSteps, expY0: expMax * expSteps, expStep: 1.0 / expSteps,
	kHi: ratioHi - ratioKnee, kLo: ratioLo + ratioKnee, knee: ratioKnee, perKnee: 1 / ratioKnee, guard: roundGuard,
	// x>>11 < its ceiling exactly when unit(x) < spikeOdds.
	spike: uint64(math.Ceil(spikeOdds * (1 << 53))),
}

// mixHot is mix, for the hot loops.
func mixHot(x uint64) uint64 {
	x ^= x >> 30
	x *= hot.mix1
	x ^= x >> 27
	x *= hot.mix2
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
	odds   *weekOdds
	// monthly: a Google pool's price steps once a month, not with the slots.
	monthly bool
}

// changeOdds is, by weekend and local hour, the chance a slot's price changes:
// busy hours move more; ~0.6 changes a slot keep 90 days of ~800 pools under 4 M points.
var changeOdds = func() (o [2][24]float64) {
	for w := range o {
		for h := range o[w] {
			busy := 0.5 + 0.5*math.Cos(2*math.Pi*(float64(h)-14)/24) // 0 at night, 1 at 14:00
			if w == 1 {
				busy *= 0.5
			}
			p := 0.35 + 0.4*busy
			o[w][h] = p * 65536
		}
	}
	return o
}()

// weekOdds is changeOdds over the slots of a week for one UTC offset, as
// integer bounds for the slot's 16-bit draw; a forced slot's bound is 1<<16.
type weekOdds [slotsPerWeek]uint32

func newWeekOdds(offset int64) *weekOdds {
	var o weekOdds
	m := model{offset: offset}
	for i := range o {
		if i%forcedEvery == 0 {
			o[i] = 1 << 16
			continue
		}
		day, sec := m.local(int64(i) * slotSec)
		w := 0
		if weekend(day) {
			w = 1
		}
		o[i] = uint32(math.Ceil(changeOdds[w][uint64(sec)/3600]))
	}
	return &o
}

// newModel returns a pool's price process; odds are shared by a market's pools.
func newModel(seed int64, s *poolSpec, odds map[int64]*weekOdds) model {
	id := mix(uint64(seed)*0x9e3779b97f4a7c15 ^ strHash(s.Desc.Key().String()))
	offset := int64(s.Region.UTCOffset * 3600)
	o, ok := odds[offset]
	if !ok {
		o = newWeekOdds(offset)
		odds[offset] = o
	}
	return model{
		id:     id,
		od:     *s.Desc.OnDemandUSDHour,
		base:   s.BaseRatio,
		vol:    0.7 + 0.6*unit(mix(id^0x5eed)),
		offset: offset,
		odds:   o,
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

// spike returns the hour's spike, if any: [from, to) within the hour and its log lift.
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

// dailyCycle is the daily z term by local minute: busiest at 14:00.
var dailyCycle = func() (d [24 * 60]float64) {
	for i := range d {
		d[i] = dailyAmp * math.Cos(2*math.Pi*(float64(i)/60-14)/24)
	}
	return d
}()

// exactX is the unrounded ticks of a change at t, the model as defined; lift
// is a spike's log lift in force at t (0 for none). It hashes its six knots
// afresh: only spikes and the rare points the fast path leaves come here.
func (m *model) exactX(t int64, lift float64) float64 {
	var noise float64
	for i, oc := range octaves {
		k := floorDiv(t, oc.period)
		a, b := m.knot(i, k), m.knot(i, k+1)
		f := float64(t-k*oc.period) / float64(oc.period)
		f = f * f * (3 - 2*f)
		noise += oc.amp * (a + (b-a)*f)
	}
	day, sec := m.local(t)
	daily := dailyCycle[uint64(sec)/60]
	jitter := jitterAmp * (2*unit(mix(m.id^uint64(t)*0x2545f4914f6cdd1d)) - 1)
	v := m.vol*noise + jitter + lift
	if weekend(day) {
		v += 0.4*daily - weekendAmp
	} else {
		v += daily
	}
	r := m.base * math.Exp(v)
	if r > ratioHi-ratioKnee || r < ratioLo+ratioKnee {
		r = clip(r)
	}
	// Positive, so truncating x+0.5 rounds it (faster than math.Round).
	return m.od*r*priceScale + 0.5
}

// clipNear is clip with expNear's exponential; ok is false beyond expNear's
// table. Not inlined: its values would crowd fastTicks's registers.
//
//go:noinline
func clipNear(r float64) (float64, bool) {
	// kHi + knee·(1-e^-z) above, kLo - knee·(1-e^-z) below
	z := (r - hot.kHi) * hot.perKnee
	if r < hot.kLo {
		z = (hot.kLo - r) * hot.perKnee
	}
	y := hot.expY0 - z*hot.expY
	j := int(y + hot.half)
	if uint(j) >= uint(len(expTable)) {
		return 0, false
	}
	bend := hot.knee * (hot.one - expNear(y, j))
	if r > hot.kHi {
		return hot.kHi + bend, true
	}
	return hot.kLo - bend, true
}

// clip bends a ratio smoothly into [ratioLo, ratioHi], asymptotically within ratioKnee of each edge.
func clip(r float64) float64 {
	if k := ratioHi - ratioKnee; r > k {
		return k + ratioKnee*(1-math.Exp(-(r-k)/ratioKnee))
	}
	if k := ratioLo + ratioKnee; r < k {
		return k - ratioKnee*(1-math.Exp(-(k-r)/ratioKnee))
	}
	return r
}

// The fast path (docs/DESIGN.md): the same x to within x·1e-13 at under half
// exactX's cost, trusted only where the two cannot round differently.

// roundGuard: how near a rounding edge the fast x may land and still round as
// exactX's; over a thousand times their difference (TestPricesNearARoundingEdge).
const roundGuard = 0x1p-32

// Each period divides the coarser one, so a span keeps every octave's two knots.
var _ [0]struct{} = [period0 % period2]struct{}{}
var _ [0]struct{} = [period1 % period2]struct{}{}

// span is a knot interval of the finest octave, [start, start+period2): the noise
// term as a cubic in u = t-start, and the calendar term from cycleByMinute.
type span struct {
	start int64
	c     [4]float64
	cyc   int
}

// shape holds, per span of a coarser octave's interval, its smoothstep
// 3f²-2f³ as a cubic in u = t - the span's start.
func shape(period int64) (s [period0 / period2][4]float64) {
	beta := 1 / float64(period)
	for m := range period / period2 {
		alpha := float64(m*period2) * beta
		s[m] = [4]float64{alpha * alpha * (3 - 2*alpha), 6 * alpha * (1 - alpha) * beta, (3 - 6*alpha) * beta * beta, -2 * beta * beta * beta}
	}
	return s
}

// shape0 and shape1 are octaves 0 and 1's shapes (octave 1 uses its first entries).
var shape0, shape1 = shape(period0), shape(period1)

var _ [0]struct{} = [period1 / period0]struct{}{} // period1 < period0: shape's array holds octave 1's too

// appendSpans appends the spans from the one holding first to the one holding last.
func (m *model) appendSpans(spans []span, first, last int64) []span {
	k, kLast := floorDiv(first, period2), floorDiv(last, period2)
	n := len(spans)
	spans = slices.Grow(spans, int(kLast-k+1))[:n+int(kLast-k+1)]
	const per0, per1 = period0 / period2, period1 / period2
	k0, k1 := floorDiv(k, per0), floorDiv(k, per1)
	m0, m1 := int(k-k0*per0), int(k-k1*per1)
	a0, b0 := m.knot(0, k0), m.knot(0, k0+1)
	a1, b1 := m.knot(1, k1), m.knot(1, k1+1)
	a2 := m.knot(2, k)
	lt := uint64(k*period2 + m.offset + weekShift)
	cyc := int(lt / 60 % weekMinutes)
	vol := m.vol
	const beta2 = 1.0 / period2
	for ; k <= kLast; k++ {
		b2 := m.knot(2, k+1)
		d0, d1, d2 := amp0*(b0-a0), amp1*(b1-a1), amp2*(b2-a2)
		s0, s1 := &shape0[m0], &shape1[m1]
		sp := &spans[n]
		sp.start, sp.cyc = k*period2, cyc
		sp.c[0] = vol*(amp0*a0+d0*s0[0]+amp1*a1+d1*s1[0]+amp2*a2) - jitterAmp
		sp.c[1] = vol * (d0*s0[1] + d1*s1[1])
		sp.c[2] = vol * (d0*s0[2] + d1*s1[2] + d2*(3*beta2*beta2))
		sp.c[3] = vol * (d0*s0[3] + d1*s1[3] + d2*(-2*beta2*beta2*beta2))
		n++
		a2 = b2
		if m0++; m0 == per0 {
			m0, k0, a0, b0 = 0, k0+1, b0, m.knot(0, k0+2)
		}
		if m1++; m1 == per1 {
			m1, k1, a1, b1 = 0, k1+1, b1, m.knot(1, k1+2)
		}
		if cyc += period2 / 60; cyc >= weekMinutes {
			cyc -= weekMinutes
		}
	}
	return spans
}

// weekMinutes are the minutes of a week.
const weekMinutes = 7 * 24 * 60

// cycleByMinute is the calendar term by local minute of the week from Thursday
// 00:00 (as 1970-01-01); a span's first minute repeats at the end.
var cycleByMinute = func() (c [weekMinutes + period2/60 + 1]float64) {
	for i := range c {
		j := i % weekMinutes
		day, minute := j/(24*60), j%(24*60)
		daily := dailyCycle[minute]
		if weekend(int64(day)) {
			c[i] = 0.4*daily - weekendAmp
		} else {
			c[i] = daily
		}
	}
	return c
}()

// weekShift keeps t + offset + weekShift positive without moving the minute of the week.
const weekShift = 1 << 20 * 7 * 86400

// The exponential's table: e^(i/expSteps - expMax) for i up to 2·expMax·expSteps.
const (
	expSteps = 64
	expMax   = 2
)

var expTable = func() (e [2*expMax*expSteps + 1]float64) {
	for i := range e {
		e[i] = math.Exp(float64(i)/expSteps - expMax)
	}
	return e
}()

// expNear is e^v to within 2.5e-13 for y = (v+expMax)·expSteps, i = y rounded:
// a table knot times a short Taylor polynomial (TestExpNearIsNearExp).
func expNear(y float64, i int) float64 {
	d := (y - float64(i)) * hot.expStep
	return expTable[i] * (hot.one + d*(hot.one+d*(hot.e2+d*(hot.e3+d*hot.e4))))
}

// spikeAt is a spike among a walk's points: [from, to), its lift, its hour's first point.
type spikeAt struct {
	from, to int64
	lift     float64
	i        int
}

// slow marks a point the fast path left to exactX.
const slow = -1

// appendTicks appends every point in (from, to], ascending, to at and q (in
// ticks); spans is working space a back-fill worker reuses, or nil. The loops
// make no call, to keep their values in registers.
func (m *model) appendTicks(at, q []int64, from, to int64, spans *[]span) ([]int64, []int64) {
	if to <= from {
		return at, q
	}
	if m.monthly {
		return m.monthlyTicks(at, q, from, to)
	}
	lo := len(at)
	var spikeBuf [8]spikeAt
	at, spikes := m.appendTimes(at, spikeBuf[:0], from, to)
	if len(at) == lo {
		return at, q
	}
	q = slices.Grow(q, len(at)-len(q))[:len(at)]
	if spans == nil {
		spans = new([]span)
	}
	*spans = m.appendSpans((*spans)[:0], at[lo], at[len(at)-1])
	if m.fastTicks(*spans, at[lo:], q[lo:]) {
		for i := lo; i < len(q); i++ {
			if q[i] == slow {
				q[i] = int64(m.exactX(at[i], 0))
			}
		}
	}
	for _, s := range spikes {
		for i := s.i; i < len(at) && at[i] < s.to; i++ {
			if at[i] >= s.from {
				q[i] = int64(m.exactX(at[i], s.lift))
			}
		}
	}
	return at, q
}

// fastTicks sets q[i] to the ticks at at[i] or to slow, and reports whether any is slow.
func (m *model) fastTicks(spans []span, at, q []int64) (slows bool) {
	id, odTicks, base := m.id, m.od*priceScale, m.base
	// The half keeps (u+half)/60 well away from the integers, so truncating gives ⌊(u+second)/60⌋.
	half := float64((m.offset%60+60)%60) + 0.5
	q = q[:len(at)]
	i := 0
	for k := range spans {
		sp := &spans[k]
		start, end := sp.start, sp.start+period2
		c0, c1, c2, c3 := sp.c[0], sp.c[1], sp.c[2], sp.c[3]
		cycle := (*[period2/60 + 1]float64)(cycleByMinute[sp.cyc:])
		for ; i < len(at); i++ {
			t := at[i]
			if t >= end {
				break
			}
			u := float64(t - start)
			v := c0 + u*(c1+u*(c2+u*c3))
			v += float64(mixHot(id^uint64(t)*hot.jitter)>>11) * hot.jitterScale
			v += cycle[int((u+half)*hot.sixtieth)]
			y := v*hot.expY + hot.expY0
			j := int(y + hot.half)
			if uint(j) >= uint(len(expTable)) {
				q[i], slows = slow, true
				continue
			}
			r := base * expNear(y, j)
			if r > hot.kHi || r < hot.kLo {
				var ok bool
				if r, ok = clipNear(r); !ok {
					q[i], slows = slow, true
					continue
				}
			}
			// x rounds as exactX's would when no integer lies between x±g.
			x := odTicks*r + hot.half
			g := x * hot.guard
			if p := int64(x + g); p == int64(x-g) {
				q[i] = p
			} else {
				q[i], slows = slow, true
			}
		}
	}
	return slows
}

// appendTimes appends the change times in (from, to] to at, and their spikes to spikes.
func (m *model) appendTimes(at []int64, spikes []spikeAt, from, to int64) ([]int64, []spikeAt) {
	hFirst, hLast := floorDiv(from+1, 3600), floorDiv(to, 3600)
	// An hour has at most four changes and a spike's two.
	at = slices.Grow(at, int(hLast-hFirst+1)*(slotsPerHour+2))
	n := len(at)
	buf := at[:cap(at)]
	var spikyBuf [16]int64
	spiky := m.spikyHours(spikyBuf[:0], hFirst, hLast)
	for h := hFirst; h <= hLast; {
		if h == hFirst || h == hLast || len(spiky) > 0 && spiky[0] == h {
			if len(spiky) > 0 && spiky[0] == h {
				spiky = spiky[1:]
			}
			n, spikes = m.hourTimes(buf, n, h, from, to, spikes)
			h++
			continue
		}
		end := hLast
		if len(spiky) > 0 && spiky[0] < end {
			end = spiky[0]
		}
		n = m.plainHours(buf, n, h, end)
		h = end
	}
	return buf[:n], spikes
}

// spikyHours appends the hours in [from, to] that have a spike to hours.
func (m *model) spikyHours(hours []int64, from, to int64) []int64 {
	id := m.id
	for h := from; h <= to; h++ {
		// unit(x) < spikeOdds, as integers
		if mix(id^uint64(h)*0x8cb92ba72f3d8dd7^0xa5a5)>>11 < hot.spike {
			hours = append(hours, h)
		}
	}
	return hours
}

// plainHours writes the change times of spike-free hours [from, to) to at
// from n and returns the end; n counts a slot by bit 31 of draw-bound, no branch.
func (m *model) plainHours(at []int64, n int, from, to int64) int {
	id, odds := m.id, m.odds
	s := from * slotsPerHour
	ws := s % slotsPerWeek
	if ws < 0 {
		ws += slotsPerWeek
	}
	for range to - from {
		o := (*[slotsPerHour]uint32)(odds[ws : ws+slotsPerHour])
		t0 := s * slotSec
		x := mix(id ^ uint64(s)*0xd1b54a32d192ed03)
		at[n] = t0 + secondOf(x)
		n += int((uint32(x)&0xffff - o[0]) >> 31)
		x = mix(id ^ uint64(s+1)*0xd1b54a32d192ed03)
		at[n] = t0 + slotSec + secondOf(x)
		n += int((uint32(x)&0xffff - o[1]) >> 31)
		x = mix(id ^ uint64(s+2)*0xd1b54a32d192ed03)
		at[n] = t0 + 2*slotSec + secondOf(x)
		n += int((uint32(x)&0xffff - o[2]) >> 31)
		x = mix(id ^ uint64(s+3)*0xd1b54a32d192ed03)
		at[n] = t0 + 3*slotSec + secondOf(x)
		n += int((uint32(x)&0xffff - o[3]) >> 31)
		s += slotsPerHour
		if ws += slotsPerHour; ws == slotsPerWeek {
			ws = 0
		}
	}
	return n
}

// secondOf is (x>>16) % slotSec by a float multiply, exact here, which spares
// the registers an integer division would take.
func secondOf(x uint64) int64 {
	a := int64(x >> 16)
	return a - int64((float64(a)+hot.half)*hot.perSlot)*slotSec
}

// hourTimes writes hour h's change times in (from, to], its spike's too, to at
// from n, and returns the end.
func (m *model) hourTimes(at []int64, n int, h, from, to int64, spikes []spikeAt) (int, []spikeAt) {
	var hr [slotsPerHour + 2]int64
	k := m.plainHours(hr[:], 0, h, h+1)
	if sfrom, sto, lift, ok := m.spike(h); ok {
		k = insertTime(&hr, k, sfrom)
		k = insertTime(&hr, k, sto)
		spikes = append(spikes, spikeAt{from: sfrom, to: sto, lift: lift, i: n})
	}
	for _, t := range hr[:k] {
		if t > from && t <= to {
			at[n] = t
			n++
		}
	}
	return n, spikes
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
	at, q := m.inForceTicks(t, nil)
	return at, float64(q) / priceScale
}

// inForceTicks is inForce in ticks; spans as appendTicks's.
func (m *model) inForceTicks(t int64, spans *[]span) (int64, int64) {
	if m.monthly {
		return m.monthAt(floorDiv(t-m.monthOffset(), monthSec))
	}
	var buf [slotsPerHour + 2]int64
	for h := floorDiv(t, 3600); ; h-- {
		at, _ := m.appendTimes(buf[:0], nil, h*3600-1, min(t, h*3600+3599))
		if n := len(at); n > 0 {
			var a, q [slotsPerHour + 2]int64
			_, p := m.appendTicks(a[:0], q[:0], at[n-1]-1, at[n-1], spans)
			return at[n-1], p[0]
		}
	}
}
