package planner

import (
	"math"
	"math/rand/v2"
	"sync"
)

// Odds is the share of runs in which the job's policy, carrying it on
// from s, finishes by the deadline: the plan's Monte Carlo for what is
// left. Each spot lane's capacity is drawn from its Risk from s.At on,
// starting as up says (the lane held is up); a lane without a risk keeps
// its state. Run k of a seed draws the same numbers at every call, so
// two reviews differ by the job's state, not by luck. enough, asked
// after each run with the runs on time and the runs so far, ends the
// count. NaN: the strategy has no policy.
func (j *LiveJob) Odds(s LiveState, up []bool, seed uint64, enough func(on, n int) bool) float64 {
	pol := policyFor(j.Policy, j.AnyAvail)
	switch {
	case j.Done(s):
		return 1
	case pol == nil:
		return math.NaN()
	case !s.At.Before(j.Deadline):
		return 0
	}
	t0, end := j.hours(s.At), j.hours(j.Deadline)
	r, sp := j.run(&s, up)
	sp.horizon = end
	if j.OnDemand == nil {
		r.od.speed = 0 // a net that is not there finishes nothing
	}
	gens := make([]*renewal, len(j.Lanes))
	tls := make([]timeline, len(j.Lanes))
	for i, l := range j.Lanes {
		if l.Risk.InterruptionsPerHour <= 0 {
			continue
		}
		g := renewalOf(l.Risk)
		// Drawn from the state seen now: a run under way (memoryless) or
		// the rest of a gap.
		g.avail = 0
		if i == s.Cur || i < len(up) && up[i] {
			g.avail = 1
		}
		gens[i], r.lanes[i].tl = g, &tls[i]
	}
	r0 := *r
	on, n := 0, 0
	for !enough(on, n) {
		for i, g := range gens {
			if g == nil {
				continue
			}
			g.fill(&tls[i], seed, uint64(n)<<12|uint64(i), end-t0)
			for b := range tls[i].bounds {
				tls[i].bounds[b] += t0
			}
		}
		*r = r0
		for i := range r.lanes {
			r.lanes[i].rewindTo(t0)
		}
		if o := r.resume(pol); o.onTime(sp.deadline) {
			on++
		}
		n++
	}
	if n == 0 {
		return math.NaN()
	}
	return float64(on) / float64(n)
}

// renewals keeps the drawn processes' tables by risk: a driver asks the
// odds of the same lanes at every review.
var renewals sync.Map

type riskKey struct{ lambda, avail, median float64 }

// renewalOf is a process drawing the risk's runs and gaps, its own
// random stream over tables shared with every other of that risk.
func renewalOf(rk Risk) *renewal {
	var g renewal
	if rk.Spells != nil {
		g.setupSpells(rk.Spells)
	} else {
		key := riskKey{rk.InterruptionsPerHour, rk.Availability, rk.GapMedianHours}
		t, ok := renewals.Load(key)
		if !ok {
			n := newRenewal()
			n.setup(key.lambda, key.avail, key.median)
			t, _ = renewals.LoadOrStore(key, n)
		}
		g = *t.(*renewal)
	}
	g.rng = rand.New(&g.src)
	return &g
}
