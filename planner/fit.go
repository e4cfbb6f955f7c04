package planner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Spells are fitted quantile tables of run and gap lengths (not memoryless).
type Spells struct {
	Run, Gap []float64
	// Hours is the history they were fitted on.
	Hours float64
}

// priorHours is the history a prior counts for: a day.
const priorHours = 24.0

// spell is one stretch of a timeline in one state.
type spell struct {
	hours    float64
	censored bool // cut by the window's edge: its length is a lower bound
}

// spellsOf cuts the timeline's window [from, to) into runs and gaps.
func spellsOf(tl *timeline, from, to float64) (runs, gaps []spell) {
	tl.rewindTo(from)
	t := from
	first := true
	for t < to {
		up, next := tl.at(t)
		end := math.Min(next, to)
		s := spell{hours: end - t, censored: first || next >= to}
		if up {
			runs = append(runs, s)
		} else {
			gaps = append(gaps, s)
		}
		t, first = end, false
	}
	return runs, gaps
}

// kaplanMeier is the quantile table of right-censored lengths, with an
// exponential tail past the last ending (DESIGN.md); false for none.
func kaplanMeier(ss []spell) ([]float64, bool) {
	s := slices.Clone(ss)
	sort.Slice(s, func(i, j int) bool { return s[i].hours < s[j].hours })
	var ts, fs []float64 // the CDF's steps
	surv, total, ended, longest := 1.0, 0.0, 0, 0.0
	atRisk := len(s)
	for i := 0; i < len(s); {
		j, d := i, 0
		for j < len(s) && s[j].hours == s[i].hours {
			if !s[j].censored {
				d++
			}
			j++
		}
		if d > 0 {
			surv *= 1 - float64(d)/float64(atRisk)
			ts, fs = append(ts, s[i].hours), append(fs, 1-surv)
		}
		for k := i; k < j; k++ {
			total += s[k].hours
		}
		ended += d
		longest = s[j-1].hours
		atRisk -= j - i
		i = j
	}
	if len(s) == 0 {
		return nil, false
	}
	if ended == 0 {
		q := make([]float64, gapSteps)
		for i := range q {
			q[i] = -total * math.Log1p(-(float64(i)+0.5)/gapSteps)
		}
		return q, true
	}
	mean := total / float64(ended)
	top := fs[len(fs)-1]
	q := make([]float64, gapSteps)
	k := 0
	for i := range q {
		u := (float64(i) + 0.5) / gapSteps
		if u <= top {
			for fs[k] < u {
				k++
			}
			q[i] = ts[k]
			continue
		}
		q[i] = longest + mean*math.Log((1-top)/(1-u))
	}
	return q, true
}

// priorSpells are the parametric model's tables.
func priorSpells(r Risk) (run, gap []float64) {
	g := newRenewal()
	g.setup(math.Max(r.InterruptionsPerHour, 1e-6), r.Availability, r.GapMedianHours)
	run = make([]float64, gapSteps)
	for i := range run {
		u := (float64(i) + 0.5) / gapSteps
		run[i] = -math.Log1p(-u) / g.rate
	}
	return run, g.gapQ
}

// blend is the quantile table of a (weight w) mixed with b.
func blend(a, b []float64, w float64) []float64 {
	if w >= 1 {
		return slices.Clone(a)
	}
	if w <= 0 {
		return slices.Clone(b)
	}
	out := make([]float64, gapSteps)
	pa, pb := w/gapSteps, (1-w)/gapSteps
	cum, i, j := 0.0, 0, 0
	for k := range out {
		u := (float64(k) + 0.5) / gapSteps
		for {
			useA := j >= len(b) || (i < len(a) && a[i] <= b[j])
			v, p := 0.0, 0.0
			if useA {
				v, p = a[i], pa
			} else {
				v, p = b[j], pb
			}
			if cum+p >= u || (i+j >= len(a)+len(b)-1) {
				out[k] = v
				break
			}
			cum += p
			if useA {
				i++
			} else {
				j++
			}
		}
	}
	return out
}

func meanOf(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// FitRisk fits a pool's risk on [from, to) of its timeline, blended with
// the prior as priorHours of history; source names the history.
func FitRisk(tl *timeline, from, to float64, prior Risk, source string) Risk {
	pRun, pGap := priorSpells(prior)
	return fitRisk(tl, from, to, prior, pRun, pGap, source)
}

// fitRisk is FitRisk with the prior's tables made once.
func fitRisk(tl *timeline, from, to float64, prior Risk, pRun, pGap []float64, source string) Risk {
	hours := math.Max(0, to-from)
	runs, gaps := spellsOf(tl, from, to)
	w := hours / (hours + priorHours)
	run, gap := pRun, pGap
	if q, ok := kaplanMeier(runs); ok {
		run = blend(q, pRun, w)
	}
	if q, ok := kaplanMeier(gaps); ok {
		gap = blend(q, pGap, w)
	}
	mr, mg := meanOf(run), meanOf(gap)
	sorted := slices.Clone(gap)
	slices.Sort(sorted)
	return Risk{InterruptionsPerHour: 1 / mr, GapMedianHours: sorted[gapSteps/2], Availability: mr / (mr + mg),
		Source: fmt.Sprintf("fitted on %s h of %s", trimFloat(math.Round(hours)), source), Spells: &Spells{Run: run, Gap: gap, Hours: hours}}
}

// setupSpells makes the renewal draw the fitted lengths.
func (g *renewal) setupSpells(s *Spells) {
	g.runQ, g.gapQ = s.Run, s.Gap
	mr, mg := meanOf(s.Run), meanOf(s.Gap)
	g.avail = mr / (mr + mg)
	g.runCum, g.gapCum = cumulative(s.Run), cumulative(s.Gap)
	g.runScale, g.gapScale = 1, 1
}

func cumulative(xs []float64) []float64 {
	out := make([]float64, len(xs))
	s := 0.0
	for i, x := range xs {
		s += x
		out[i] = s
	}
	return out
}

// underWay is what is left of the spell under way at a random time.
func underWay(rng *rand.Rand, q, cum []float64) float64 {
	i := sort.SearchFloat64s(cum, rng.Float64()*cum[len(cum)-1])
	return rng.Float64() * q[min(i, len(q)-1)]
}

// fillSpells is fill for fitted lengths.
func (g *renewal) fillSpells(tl *timeline, seed1, seed2 uint64, until float64) {
	g.src.Seed(seed1, seed2)
	up := g.rng.Float64() < g.avail
	tl.up0 = up
	b := tl.bounds[:0]
	t := underWay(g.rng, g.gapQ, g.gapCum) * g.gapScale
	if up {
		t = underWay(g.rng, g.runQ, g.runCum) * g.runScale
	}
	b = append(b, t)
	up = !up
	for t < until {
		if up {
			t += g.runQ[g.src.Uint64()>>54] * g.runScale
		} else {
			t += g.gapQ[g.src.Uint64()>>54] * g.gapScale
		}
		b = append(b, t)
		up = !up
	}
	tl.bounds = append(b, math.Inf(1))
	tl.cur = 0
}

// uncertain stretches a draw's lengths by a log-normal of spread 1/√n,
// half of it common to the draw's pools (zRun, zGap).
func (g *renewal) uncertain(rng *rand.Rand, n, zRun, zGap float64) {
	s := 1 / math.Sqrt(math.Max(n, 1))
	scale := func(common float64) float64 {
		z := (common + rng.NormFloat64()) / math.Sqrt2
		return math.Exp(s*z - s*s/2)
	}
	g.runScale, g.gapScale = scale(zRun), scale(zGap)
}

// TracePool is a pool made of a trace, its risk for n fitted on all of it.
func TracePool(t Trace, model string, n int, spotUSD, odUSD float64, priors Priors) Pool {
	base, _ := priors.prior(model)
	prior := scalePrior(base, middleBucket).ForInstances(n)
	whole := t.timeline(max(n, 1))
	risk := FitRisk(whole, 0, t.Hours(), prior, t.Name)
	if lv := mixLevels(n); len(lv) > 0 {
		risk.covers = &gangCovers{}
		for _, c := range lv {
			risk.covers.levels = append(risk.covers.levels, coversOf(whole, t.timeline(c), 0, t.Hours()))
		}
	}
	return Pool{Key: "trace/" + t.Name, Provider: "trace", Cloud: "trace", Region: t.Name, InstanceType: "trace",
		GPUModel: model, GPUsPerInstance: 1, SpotUSDHour: spotUSD, OnDemandUSDHour: odUSD, Risk: risk}
}
