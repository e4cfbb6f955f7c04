package planner

import "math"

// policyFor is the policy a strategy carries out, nil for none: the
// Monte Carlo, the backtest and a live driver all run the same code.
func policyFor(name string, anyAvail float64) policy {
	switch name {
	case StrategyOnDemand: // PolicyOnDemand is the same name
		return onDemandOnly{}
	case StrategySpotOne, StrategySpotMulti:
		return spotOnly{cooldown: cooldown}
	case PolicyGreedy:
		return greedy{}
	case StrategyUniformProgress, PolicyUniformProgress:
		return uniformProgress{}
	case StrategySafetyNet, StrategyBlockSpot, PolicyPlanner:
		return planner{anyAvail: anyAvail, cooldown: cooldown}
	}
	return nil
}

// onDemandOnly holds on-demand from the start to the end.
type onDemandOnly struct{}

func (onDemandOnly) decide(r *run) move { return move{to: r.odIdx(), review: math.Inf(1)} }

// spotOnly holds spot only, moving on after an interruption (SkyPilot).
type spotOnly struct{ cooldown float64 }

func (p spotOnly) decide(r *run) move {
	if r.cur != idle && r.cur != r.odIdx() {
		return move{to: r.cur, review: math.Inf(1)}
	}
	l, next := r.scan(p.cooldown, inf, false)
	if l >= 0 {
		return move{to: l, review: math.Inf(1)}
	}
	return move{to: idle, review: next}
}

// remOD is the on-demand time to finish from progress p.
func (r *run) remOD(p float64) float64 { return (r.sp.work - p) / r.od.speed }

// greedy is Can't Be Late's Greedy baseline on lane 0 (DESIGN.md).
type greedy struct{}

func (greedy) decide(r *run) move {
	sp := r.sp
	switch r.cur {
	case r.odIdx():
		return move{to: r.cur, review: math.Inf(1)}
	case 0:
		return move{to: 0, review: math.Inf(1)}
	}
	late := sp.deadline - r.remOD(r.kept()) - 2*sp.d - sp.quantum
	if r.t >= late-tolerance {
		return move{to: r.odIdx(), review: math.Inf(1)}
	}
	if up, _ := r.lanes[0].at(r.t); up {
		return move{to: 0, review: math.Inf(1)}
	}
	return move{to: idle, review: minf(r.nextChange(), late)}
}

// uniformProgress is Can't Be Late's Uniform Progress on lane 0, as
// published (DESIGN.md); its safety net is checked in every state.
type uniformProgress struct{}

func (uniformProgress) decide(r *run) move {
	sp := r.sp
	d, od := sp.d, r.odIdx()
	cp := r.kept()
	k := sp.work / (sp.deadline - sp.start) // slope of the line
	ep := func(t float64) float64 { return (t - sp.start) * k }
	net := sp.deadline - r.remOD(cp) - 2*d - sp.quantum // when the safety net fires
	if r.t >= net-tolerance {
		return move{to: od, review: math.Inf(1)}
	}
	if r.cur == od && ep(r.t+2*d) > cp {
		// Hysteresis: on on-demand until progress reaches the line 2d ahead.
		s := r.od.speed
		tau := r.t + r.over
		at := math.Inf(1)
		if s > k {
			at = maxf(tau, ((2*d-sp.start)*k-cp+tau*s)/(s-k))
		}
		return move{to: od, review: at}
	}
	if up, _ := r.lanes[0].at(r.t); up {
		return move{to: 0, review: net}
	}
	if cp < ep(r.t) {
		return move{to: od, review: net}
	}
	behind := sp.start + cp/k // when the line passes the progress
	return move{to: idle, review: minf(r.nextChange(), minf(behind, net))}
}

// planner is gpumarket's own policy, spot over every pool with an
// on-demand safety net; DESIGN.md's Planner section gives its rules.
type planner struct {
	// anyAvail is the expected share of time some pool has capacity.
	anyAvail float64
	cooldown float64
}

// tolerance absorbs rounding in the safety nets' sums.
const tolerance = 1e-9

// reviewStep is how often on-demand looks again at a pool that is up.
const reviewStep = 0.25

func (p planner) reserve(r *run, rem float64) float64 {
	sp := r.sp
	slack0 := sp.deadline - sp.start - sp.work/r.od.speed - sp.d - sp.quantum
	line := maxf(0, slack0) * (sp.deadline - r.t) / (sp.deadline - sp.start)
	a := minf(maxf(p.anyAvail, 0.01), 1)
	need := rem * (1 - a) / a
	return minf(line, need)
}

// worth is on-demand's cost per hour of work: a dearer pool is left alone.
func (p planner) worth(r *run) float64 { return r.od.usdHour / r.od.speed }

// mustLeave is when a lane taken now must be left if no checkpoint was
// saved: an interruption then leaves just enough time for on-demand.
func (p planner) mustLeave(r *run, rem float64) float64 {
	return r.sp.deadline - r.sp.d - rem - r.sp.quantum
}

func (p planner) decide(r *run) move {
	sp := r.sp
	d, od := sp.d, r.odIdx()
	if r.cur != idle && r.cur != od {
		// On spot while an interruption would leave time for on-demand.
		spare := sp.deadline - r.t - d - r.remOD(r.safe()) - sp.quantum
		if spare <= tolerance {
			return move{to: od, review: math.Inf(1)}
		}
		if !r.lanes[r.cur].mix {
			return move{to: r.cur, review: r.t + spare}
		}
		return p.paying(r, r.t+spare)
	}
	if r.cur == od {
		return p.paying(r, math.Inf(1))
	}
	rem := r.remOD(r.kept())
	slack := sp.deadline - r.t - d - rem - sp.quantum
	if slack <= tolerance {
		return move{to: od, review: math.Inf(1)}
	}
	l, next := r.scan(p.cooldown, p.worth(r), false)
	if l >= 0 {
		if slack-d >= 0 {
			return move{to: l, review: p.mustLeave(r, rem)}
		}
		return move{to: od, review: math.Inf(1)}
	}
	res := p.reserve(r, rem)
	if slack <= res {
		// Where all would go on on-demand, a pool's part of the gang goes on spot.
		m, mnext := p.mix(r)
		if m >= 0 && slack-d >= 0 {
			return move{to: m, review: p.mustLeave(r, rem)}
		}
		return move{to: od, review: minf(next, mnext)}
	}
	return move{to: idle, review: minf(next, r.t+slack-res)}
}

// paying decides on on-demand or a partial gang (safe until until).
func (p planner) paying(r *run, until float64) move {
	sp, od := r.sp, r.odIdx()
	rem := r.remOD(r.kept())
	slack := sp.deadline - r.t - r.over - rem - sp.quantum
	l, next := r.scan(p.cooldown, p.worth(r), false)
	if l >= 0 && slack-2*sp.d >= p.reserve(r, rem) {
		return move{to: l, review: p.mustLeave(r, rem)}
	}
	if l >= 0 {
		next = r.t + reviewStep
	}
	if r.cur != od {
		return move{to: r.cur, review: minf(next, until)}
	}
	m, mnext := p.mix(r)
	if m >= 0 && slack-2*sp.d >= 0 {
		return move{to: m, review: p.mustLeave(r, rem)}
	}
	return move{to: od, review: minf(next, mnext)}
}

// mix is the best partial gang that is up and the next change of any.
func (p planner) mix(r *run) (int, float64) {
	if !r.hasMix {
		return -1, inf
	}
	return r.scan(p.cooldown, p.worth(r), true)
}

// minf and maxf skip math.Min's NaN and signed-zero cases (hot path).
func minf(a, b float64) float64 {
	if a < b {
		return a
	}
	return b
}

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}

// netOnDemand is the cheapest on-demand pool per hour of work that
// finishes by the deadline (else the fastest that can, else the cheapest).
func (p *planning) netOnDemand() *candidate {
	best := p.bestOnDemand()
	if best == nil || p.odFits(best) {
		return best
	}
	var fast *candidate
	for i := range p.cands {
		c := &p.cands[i]
		if math.IsNaN(c.odUSD) || !p.odFits(c) {
			continue
		}
		if fast == nil || c.speed > fast.speed || c.speed == fast.speed && c.odScore < fast.odScore {
			fast = c
		}
	}
	if fast == nil {
		return best
	}
	return fast
}

// odFits: on-demand finishes by the deadline from the start.
func (p *planning) odFits(c *candidate) bool { return p.d+p.work/c.speed <= p.span+tolerance }
