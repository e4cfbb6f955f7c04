package planner

import "math"

// The policies. Each is a rule of a published tool or of the planner,
// written against the run: the job's progress, the lanes and the clock.
// Work left is counted in on-demand hours where a rule compares it with
// time, since on-demand is what a safety net falls back on.

// policyFor is the policy a strategy or backtest policy carries out, by
// name, nil for a name without one: the Monte Carlo, the backtest and a
// live driver all reach the same code through it. anyAvail is the
// expected share of time some spot pool of the run has capacity.
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

// spotOnly holds spot and nothing else: the lane it is on until it is
// interrupted, else the best lane that is up, else it waits. Over several
// lanes it moves on after an interruption (SkyPilot's rule).
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

// greedy is Can't Be Late's Greedy baseline on one pool (lane 0): spot
// whenever it is there, idle otherwise, and on-demand to the end once the
// work left plus two changeovers no longer fits before the deadline (on
// spot it keeps the instance until it is interrupted).
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

// uniformProgress is Can't Be Late's Uniform Progress on one pool (lane
// 0), as published (NSDI'24): aim for progress W·(t−S)/(D−S); take spot
// whenever it is there and keep it until it is interrupted; when idle and
// behind that line, run on-demand; once on on-demand stay until ahead of
// the line 2d later; the safety net — when the time left is less than the
// work left plus 2d — runs on-demand to the end. The safety net is
// checked in every state, as the authors' simulator does, so that
// deadlines are met.
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
		// Hysteresis: on on-demand until progress reaches the line 2d
		// ahead; progress grows at the lane's speed once the changeover
		// is over.
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

// planner is gpumarket's own policy: spot over every pool it is given
// with an on-demand safety net, built on the published rules and fixing
// what they leave on the table:
//   - Every pool counts as spot (SpotHedge spreads over regions): idle
//     time is the time no pool has capacity, not one pool.
//   - The available pool with the lowest expected cost per hour of work
//     (price over speed and efficiency) is taken, and one just
//     interrupted is avoided for a while if another is up (SkyPilot).
//   - The safety net counts what an interruption would lose: while on
//     spot it keeps D − t ≥ d + (work left since the last checkpoint) on
//     on-demand, and switches (checkpointing first) when that would fail.
//   - Like Uniform Progress it keeps a slack reserve and runs on-demand
//     through a gap when the slack is down to it; the reserve is the
//     smaller of Uniform Progress's line and the expected wait for the
//     work left given how often any pool has capacity (with many pools,
//     next to nothing: waiting is free, on-demand is not).
//   - On on-demand it goes back to spot as soon as a pool is up and the
//     slack after a changeover still covers the reserve, instead of
//     staying to the end.
//   - It leaves alone pools expected to cost more per hour of work than
//     on-demand (a job that cannot checkpoint, on pools whose runs rarely
//     last it).
type planner struct {
	// anyAvail is the expected share of time some pool has capacity.
	anyAvail float64
	cooldown float64
}

// tolerance absorbs rounding in the safety nets' sums: a spare of 1e-15 h
// is none.
const tolerance = 1e-9

// reviewStep is how often a planner on on-demand looks again whether it
// may go back to spot while a pool is up but the slack is short.
const reviewStep = 0.25

func (p planner) reserve(r *run, rem float64) float64 {
	sp := r.sp
	slack0 := sp.deadline - sp.start - sp.work/r.od.speed - sp.d - sp.quantum
	line := maxf(0, slack0) * (sp.deadline - r.t) / (sp.deadline - sp.start)
	a := minf(maxf(p.anyAvail, 0.01), 1)
	need := rem * (1 - a) / a
	return minf(line, need)
}

// worth is the score a spot pool must beat to be used at all: on-demand's
// cost per hour of work. A pool expected to cost more per hour of work
// (a job that cannot checkpoint on a pool that rarely lasts it) is left
// alone.
func (p planner) worth(r *run) float64 { return r.od.usdHour / r.od.speed }

// mustLeave is when a spot lane taken now must be left for on-demand if
// no checkpoint has been saved by then: the time an interruption would
// leave just enough to finish on on-demand.
func (p planner) mustLeave(r *run, rem float64) float64 {
	return r.sp.deadline - r.sp.d - rem - r.sp.quantum
}

func (p planner) decide(r *run) move {
	sp := r.sp
	d, od := sp.d, r.odIdx()
	onMix := r.cur != idle && r.cur != od && r.lanes[r.cur].mix
	if r.cur != idle && r.cur != od && !onMix {
		// On spot: keep it while an interruption now would still leave
		// time to finish on on-demand.
		spare := sp.deadline - r.t - d - r.remOD(r.safe()) - sp.quantum
		if spare <= tolerance {
			return move{to: od, review: math.Inf(1)}
		}
		return move{to: r.cur, review: r.t + spare}
	}
	rem := r.remOD(r.kept())
	if r.cur == od || onMix {
		spare := math.Inf(1)
		if onMix {
			spare = sp.deadline - r.t - d - r.remOD(r.safe()) - sp.quantum
			if spare <= tolerance {
				return move{to: od, review: math.Inf(1)}
			}
		}
		slack := sp.deadline - r.t - r.over - rem - sp.quantum
		l, next := r.scan(p.cooldown, p.worth(r), false)
		if l >= 0 && slack-2*d >= p.reserve(r, rem) {
			return move{to: l, review: p.mustLeave(r, rem)}
		}
		if l >= 0 {
			next = r.t + reviewStep
		}
		if onMix {
			return move{to: r.cur, review: minf(next, r.t+spare)}
		}
		m, mnext := p.mix(r)
		if m >= 0 && slack-2*d >= 0 {
			return move{to: m, review: p.mustLeave(r, rem)}
		}
		return move{to: od, review: minf(next, mnext)}
	}
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
		// Where the whole gang would go on on-demand, a pool holding
		// part of it takes that part on spot.
		m, mnext := p.mix(r)
		if m >= 0 && slack-d >= 0 {
			return move{to: m, review: p.mustLeave(r, rem)}
		}
		return move{to: od, review: minf(next, mnext)}
	}
	return move{to: idle, review: minf(next, r.t+slack-res)}
}

// mix is the best partial gang that is up and the next change of any.
func (p planner) mix(r *run) (int, float64) {
	if !r.hasMix {
		return -1, inf
	}
	return r.scan(p.cooldown, p.worth(r), true)
}

// minf and maxf are math.Min and math.Max for the policies' sums, which
// hold no NaN or signed zero (and are faster without them).
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

// netOnDemand is the on-demand pool a safety net falls back on: the
// cheapest per hour of work, unless it cannot finish the job by the
// deadline even from the start; then the fastest that can (a slow, cheap
// A100 net is 0 % on time where an H100 one keeps the deadline). With
// none that can, the cheapest.
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

// odFits reports whether on-demand in the pool finishes the work by the
// deadline from the start, one changeover included.
func (p *planning) odFits(c *candidate) bool { return p.d+p.work/c.speed <= p.span+tolerance }
