package planner

import (
	"math"
	"math/rand/v2"
	"sort"
)

// timeline is when a pool has capacity in a run: the state flips at each
// bound (ascending, +Inf last) from up0; a cursor serves monotone reads.
type timeline struct {
	bounds []float64
	up0    bool
	cur    int
}

// steady is a timeline known only now (a live pool between reviews).
func steady(up bool) *timeline {
	return &timeline{up0: up, bounds: []float64{math.Inf(1)}}
}

// at reports the state at t and when it may change; t must not go back.
func (tl *timeline) at(t float64) (bool, float64) {
	c := tl.cur
	for tl.bounds[c] <= t {
		c++
	}
	tl.cur = c
	return tl.up0 != (c&1 == 1), tl.bounds[c]
}

// rewindTo starts a policy's reads at t.
func (tl *timeline) rewindTo(t float64) {
	tl.cur = sort.Search(len(tl.bounds)-1, func(i int) bool { return tl.bounds[i] > t })
}

// closeAt ends the timeline at end: no capacity after it.
func (tl *timeline) closeAt(end float64) {
	b := tl.bounds
	for len(b) > 0 && b[len(b)-1] >= end {
		b = b[:len(b)-1]
	}
	if tl.up0 != (len(b)&1 == 1) { // up at the end: it goes down there
		b = append(b, end)
	}
	tl.bounds = append(b, math.Inf(1))
	tl.cur = 0
}

// and sets tl to the times both a and b are up (a pool and its region).
func (tl *timeline) and(a, b *timeline) {
	out := tl.bounds[:0]
	ua, ub := a.up0, b.up0
	up := ua && ub
	tl.up0 = up
	i, j := 0, 0
	for {
		ta, tb := a.bounds[i], b.bounds[j]
		t := ta
		if tb < t {
			t = tb
		}
		if math.IsInf(t, 1) {
			break
		}
		if ta == t {
			ua = !ua
			i++
		}
		if tb == t {
			ub = !ub
			j++
		}
		if now := ua && ub; now != up {
			out = append(out, t)
			up = now
		}
	}
	tl.bounds = append(out, math.Inf(1))
	tl.cur = 0
}

// renewal draws alternating runs (exponential) and gaps (log-normal,
// heavy-tailed as in the traces), or fitted tables of both.
type renewal struct {
	src    rand.PCG
	rng    *rand.Rand
	rate   float64
	median float64
	sigma  float64
	avail  float64
	// gapQ are the gap's quantiles: a draw is a table read.
	gapQ []float64
	// runQ, when set, are fitted run lengths; the sums draw a spell under way.
	runQ, runCum, gapCum []float64
	// runScale and gapScale stretch one draw's lengths (fit uncertainty).
	runScale, gapScale float64
}

func newRenewal() *renewal {
	g := &renewal{}
	g.rng = rand.New(&g.src)
	return g
}

// gapSteps is the resolution of the gap quantile table.
const gapSteps = 1024

// normalQ are standard normal quantiles at gapSteps mid-slices.
var normalQ = func() []float64 {
	q := make([]float64, gapSteps)
	for i := range q {
		q[i] = math.Sqrt2 * math.Erfinv(2*(float64(i)+0.5)/gapSteps-1)
	}
	return q
}()

// setup sets rate λ, availability a and median gap; the mean gap follows
// from a = run / (run + gap).
func (g *renewal) setup(lambda, a, median float64) {
	g.rate, g.avail, g.median = lambda, a, median
	mean := median
	if lambda > 0 && a < 1 {
		mean = (1 - a) / (a * lambda)
	}
	ratio := math.Max(mean/median, 1.0001)
	g.sigma = math.Sqrt(2 * math.Log(ratio))
	mu := math.Log(median)
	if mean < median {
		// Gaps shorter than the median says: keep the mean, narrow the spread.
		mu = math.Log(mean) - g.sigma*g.sigma/2
	}
	g.gapQ = make([]float64, gapSteps)
	// Scale the table back to the mean its cut tail lost.
	sum := 0.0
	for i, z := range normalQ {
		g.gapQ[i] = math.Exp(mu + g.sigma*z)
		sum += g.gapQ[i]
	}
	want := math.Exp(mu + g.sigma*g.sigma/2)
	for i := range g.gapQ {
		g.gapQ[i] *= want * gapSteps / sum
	}
}

// fill draws a timeline to until, from the long-run state.
func (g *renewal) fill(tl *timeline, seed1, seed2 uint64, until float64) {
	if g.runQ != nil {
		g.fillSpells(tl, seed1, seed2, until)
		return
	}
	g.src.Seed(seed1, seed2)
	up := g.rng.Float64() < g.avail
	tl.up0 = up
	b := tl.bounds[:0]
	t := 0.0
	if !up {
		// A gap under way is the rest of a length-biased gap.
		t = g.rng.Float64() * math.Exp(g.sigma*g.sigma) * g.gapQ[g.src.Uint64()>>54]
		b = append(b, t)
		up = true
	}
	for t < until {
		if up {
			t += g.rng.ExpFloat64() / g.rate
		} else {
			t += g.gapQ[g.src.Uint64()>>54]
		}
		b = append(b, t)
		up = !up
	}
	tl.bounds = append(b, math.Inf(1))
	tl.cur = 0
}

// lane is a spot pool (its timeline) or on-demand (always there).
type lane struct {
	usdHour float64 // for all the job's instances
	speed   float64 // hours of reference work per hour
	tl      *timeline
	// score is the expected cost of an hour of work, what lanes rank by.
	score float64
	// mix is a partial gang: part spot in the pool, the rest on-demand.
	mix  bool
	rate float64 // interruptions per hour, where known
	// The last answer, good until `until` (most lanes have not changed).
	up    bool
	until float64
}

func (l *lane) at(t float64) (bool, float64) {
	if t < l.until { // small enough to inline: the common case
		return l.up, l.until
	}
	return l.refresh(t)
}

func (l *lane) refresh(t float64) (bool, float64) {
	if l.tl == nil {
		l.up, l.until = true, math.Inf(1)
	} else {
		l.up, l.until = l.tl.at(t)
	}
	return l.up, l.until
}

func (l *lane) rewindTo(t float64) {
	l.until = math.Inf(-1)
	if l.tl != nil {
		l.tl.rewindTo(t)
	}
}
