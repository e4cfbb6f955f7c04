package planner

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// mixSet is a backtest's partial gangs, per level c and trace.
type mixSet struct {
	od     float64 // on-demand for the whole gang
	tls    []*timeline
	usd    []float64
	levels []int
}

func mixLanes(traces []Trace, cfg BacktestConfig) mixSet {
	n := cfg.Instances
	m := mixSet{levels: mixLevels(n), od: float64(n) * cfg.OnDemandUSDHour}
	for _, c := range m.levels {
		for _, t := range traces {
			m.tls = append(m.tls, t.timeline(c))
			m.usd = append(m.usd, float64(c)*cfg.SpotUSDHour+float64(n-c)*cfg.OnDemandUSDHour)
		}
	}
	return m
}

// clone gives a worker its own read cursors.
func (m mixSet) clone() mixSet {
	out := m
	out.tls = cloneTimelines(m.tls)
	return out
}

func cloneTimelines(tls []*timeline) []*timeline {
	out := make([]*timeline, len(tls))
	for i, tl := range tls {
		c := *tl
		out[i] = &c
	}
	return out
}

// learned scores the partial gangs at start, leaving out those that do not hedge.
func (m mixSet) learned(start, hist, d, ckpt float64) []lane {
	out := make([]lane, len(m.tls))
	for i, tl := range m.tls {
		l, _ := learned([]*timeline{tl}, start, hist, m.usd[i], d, ckpt)
		out[i] = l[0]
		out[i].mix = true
		if !hedges(m.usd[i], m.od, out[i].rate, d) {
			out[i].score = inf
		}
	}
	return out
}

// gapCover is what a zone held of c instances in a gap of the whole gang:
// c or more for tail hours after it began and head hours before it ended,
// or all through (bridged); counts fall and climb in steps.
type gapCover struct {
	hours      float64 // the gap's length
	tail, head float64
	bridged    bool
}

// coversOf are the whole gang's gaps in [from, to) as part covered them.
func coversOf(whole, part *timeline, from, to float64) []gapCover {
	var out []gapCover
	whole.rewindTo(from)
	t := from
	for t < to {
		up, next := whole.at(t)
		if !up { // a gap cut by the window's edge counts as seen
			out = append(out, coverIn(part, t, math.Min(next, to)))
		}
		t = math.Min(next, to)
	}
	slices.SortFunc(out, func(a, b gapCover) int { return cmp.Compare(a.hours, b.hours) })
	return out
}

// near draws a cover of a gap near h in length: long gaps seldom bridge.
func near(cs []gapCover, h float64, rng *rand.Rand) gapCover {
	i, _ := slices.BinarySearchFunc(cs, h, func(c gapCover, h float64) int { return cmp.Compare(c.hours, h) })
	lo, hi := max(0, i-nearCovers), min(len(cs), i+nearCovers)
	return cs[lo+rng.IntN(hi-lo)]
}

const nearCovers = 3

func coverIn(part *timeline, a, b float64) gapCover {
	part.rewindTo(a)
	up, next := part.at(a)
	c := gapCover{hours: b - a}
	if up && next >= b {
		c.bridged = true
		return c
	}
	if up {
		c.tail = next - a
	}
	for t := next; t < b; {
		up, n := part.at(t)
		if up && n >= b {
			c.head = b - t
		}
		t = n
	}
	return c
}

// widen sets tl to whole with each gap covered as a drawn cover says,
// stretched by phi (the draw's regime).
func (tl *timeline) widen(whole *timeline, cs []gapCover, rng *rand.Rand, phi float64) {
	out := tl.bounds[:0]
	tl.up0 = false
	add := func(a, b float64) { // an up interval, in order
		if b <= a {
			return
		}
		if n := len(out); n > 0 && out[n-1] >= a {
			out[n-1] = math.Max(out[n-1], b)
			return
		}
		if len(out) == 0 && a <= 0 {
			tl.up0 = true
			out = append(out, b)
			return
		}
		out = append(out, a, b)
	}
	gap := func(a, b float64, front bool) {
		if len(cs) == 0 {
			return
		}
		c := near(cs, b-a, rng)
		tail, head := c.tail*phi, c.head*phi
		if c.bridged {
			tail = (b - a) * phi
		}
		if front && !c.bridged { // under way at the start: its tail is past
			tail = 0
		}
		if tail+head >= b-a {
			add(a, b)
			return
		}
		add(a, a+tail)
		add(b-head, b)
	}
	last, up := 0.0, whole.up0
	for i, b := range whole.bounds {
		if math.IsInf(b, 1) {
			if !up {
				gap(last, b, i == 0)
			}
			break
		}
		if up {
			add(last, b)
		} else {
			gap(last, b, i == 0)
		}
		last, up = b, !up
	}
	tl.bounds = append(out, math.Inf(1))
	tl.cur = 0
}

// mixLane is a partial gang in a plan, drawn widened by its covers.
type mixLane struct {
	lane           int // index into the drawn lanes
	c              int
	usdHour, score float64
	covers         []gapCover
}

// mixesOf are the partial gangs of drawn pools with on-demand and history.
func (p *planning) mixesOf(lanes []*candidate) []mixLane {
	var out []mixLane
	for i, cd := range lanes {
		if cd.n < 2 || math.IsNaN(cd.odUSD) || cd.risk.covers == nil {
			continue // no history of part of a gang: all or none
		}
		for k, c := range mixLevels(cd.n) {
			usd := (float64(c)*cd.spotUSD + float64(cd.n-c)*cd.odUSD) / float64(cd.n)
			var cs []gapCover
			if k < len(cd.risk.covers.levels) {
				cs = cd.risk.covers.levels[k]
			}
			if !hedges(usd, cd.odUSD, cd.risk.InterruptionsPerHour, p.d) {
				continue
			}
			out = append(out, mixLane{lane: i, c: c, usdHour: usd, covers: cs,
				score: usd * paidHours(cd.risk.InterruptionsPerHour, p.work/cd.speed, p.d, p.ckpt) / p.work})
		}
	}
	return out
}

// mixWords says what partial gangs a strategy over cs may hold.
func (p *planning) mixWords(cs []*candidate) string {
	var cs0 []string
	n := 0
	for _, m := range p.mixesOf(cs) {
		cs0, n = appendNew(cs0, strconv.Itoa(m.c)), cs[m.lane].n
	}
	if len(cs0) == 0 {
		return ""
	}
	return fmt.Sprintf("; where it would pay on-demand for all %d instances, it holds %s of them on spot in a pool that has them, the rest on on-demand",
		n, strings.Join(cs0, ", "))
}

// hedges reports whether a partial gang at usd an hour is worth taking in
// place of on-demand: what it saves over a run (1/rate hours) must beat
// the two changeovers, in and back out, at on-demand's rate.
func hedges(usd, od, rate, d float64) bool {
	return rate <= 0 || (od-usd)/rate >= 2*d*od
}
