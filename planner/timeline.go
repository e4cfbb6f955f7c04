package planner

import (
	"math"
	"math/rand/v2"
	"sort"
)

// timeline is when a pool's spot capacity is there during one run: the
// state flips at each time in bounds (ascending, ending with +Inf), from
// up0 at the start. A cursor makes the monotone reads of one policy
// cheap; rewind starts the next policy over the same timeline.
type timeline struct {
	bounds []float64
	up0    bool
	cur    int
}

// steady is a timeline known only at present: up or not, and no word of
// when that changes (a live pool between two reviews).
func steady(up bool) *timeline {
	return &timeline{up0: up, bounds: []float64{math.Inf(1)}}
}

// at reports whether capacity is there at t and a time before which the
// state does not change (+Inf: never). Reads between rewinds must not go
// back in time.
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

// closeAt ends the timeline at `end`: no capacity after it (a run's
// draws stop at its deadline), then the +Inf sentinel.
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
func (tl *timeline) and(a, b *timeline) { tl.merge(a, b, true) }

// or sets tl to the times a or b is up (a whole gang or a band of it).
func (tl *timeline) or(a, b *timeline) { tl.merge(a, b, false) }

func (tl *timeline) merge(a, b *timeline, both bool) {
	out := tl.bounds[:0]
	ua, ub := a.up0, b.up0
	up := ua && ub || !both && (ua || ub)
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
		if now := ua && ub || !both && (ua || ub); now != up {
			out = append(out, t)
			up = now
		}
	}
	tl.bounds = append(out, math.Inf(1))
	tl.cur = 0
}

// renewal draws an alternating renewal process: runs of capacity that end
// at rate rate (exponential: interruptions are memoryless at this scale),
// gaps log-normal with the given median and mean (the traces' gaps are
// heavy-tailed: a median of about half an hour, a mean of hours).
type renewal struct {
	src    rand.PCG
	rng    *rand.Rand
	rate   float64
	median float64
	sigma  float64
	avail  float64
	// gapQ are the gap's quantiles on a fine grid, so a draw is a table
	// read rather than an exponential.
	gapQ []float64
	// runQ, when set, are fitted run lengths drawn instead of the
	// exponential; the cumulative sums draw the spell under way at start.
	runQ, runCum, gapCum []float64
	// runScale and gapScale stretch the fitted lengths for one draw (the
	// fit's own uncertainty); 1 draws them as fitted.
	runScale, gapScale float64
}

func newRenewal() *renewal {
	g := &renewal{}
	g.rng = rand.New(&g.src)
	return g
}

// gapSteps is the resolution of the gap quantile table.
const gapSteps = 1024

// normalQ are standard normal quantiles at the middle of gapSteps equal
// slices of probability.
var normalQ = func() []float64 {
	q := make([]float64, gapSteps)
	for i := range q {
		q[i] = math.Sqrt2 * math.Erfinv(2*(float64(i)+0.5)/gapSteps-1)
	}
	return q
}()

// setup sets the process of a layer with interruption rate λ, availability
// a and median gap m. The mean gap follows from a = run / (run + gap);
// a log-normal's mean is its median times e^(σ²/2).
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
		// Gaps shorter than the median says: keep the mean (it sets the
		// availability) with a narrow spread.
		mu = math.Log(mean) - g.sigma*g.sigma/2
	}
	g.gapQ = make([]float64, gapSteps)
	// The table's mean falls short of the distribution's (its tail is
	// cut at the last slice); scale it back so availability holds.
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

// fill draws a run's timeline up to `until`: up at the start with
// probability a (the process in its long-run state), each period fresh
// but a gap under way at the start.
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
		// A gap under way at the start is what is left of a
		// length-biased gap: of a log-normal, U·e^(σ²)·(a gap).
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

// lane is one way to hold the job's capacity in a run: a spot pool (its
// timeline says when capacity is there) or on-demand (always there).
type lane struct {
	usdHour float64 // for all the job's instances
	speed   float64 // hours of reference work per hour
	tl      *timeline
	// score is the expected cost of an hour of work (lower is better),
	// what a policy ranks available lanes by.
	score float64
	// mix is a partial gang: some instances on spot in the pool, the rest
	// on on-demand; the timeline says when the pool has its spot share.
	mix bool
	// The last answer, good until `until`: a policy scans every lane at
	// each decision, and most have not changed.
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
