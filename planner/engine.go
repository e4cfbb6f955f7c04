package planner

import (
	"math"
	"slices"
)

// spec is one job as a run sees it, in hours on the run's clock.
type spec struct {
	work     float64 // W, in hours of reference work
	start    float64 // when the job may begin
	deadline float64 // D
	d        float64 // changeover per start or switch
	// ckpt is the checkpoint interval: 0 keeps all progress (as published),
	// +Inf keeps none.
	ckpt float64
	// quantum is the decision grid (a trace's tick), 0 for continuous time.
	quantum float64
	// horizon ends a run that is not done.
	horizon float64
}

// idle is the lane of a run that holds nothing.
const idle = -1

// run is one job carried out by one policy over one draw of the lanes.
type run struct {
	sp    *spec
	lanes []lane // spot lanes
	od    *lane  // on-demand, nil when there is none

	t              float64
	saved, pending float64 // progress kept / not yet checkpointed
	clock          float64 // running time since the last checkpoint
	cur            int     // idle, a spot lane's index, or odIdx()
	over           float64 // changeover left
	cost           float64
	interruptions  int
	odHours        float64
	lastPreempt    int
	lastPreemptAt  float64
	hasMix         bool // some lane is a partial gang
}

// outcome is what a run came to.
type outcome struct {
	done          bool
	finish        float64
	cost          float64
	interruptions int
	odHours       float64
	left          float64 // work left when not done
}

// onTime: done by the deadline (a run cut at its horizon is not).
func (o outcome) onTime(deadline float64) bool { return o.done && o.finish <= deadline+1e-9 }

func (r *run) odIdx() int { return len(r.lanes) }

func (r *run) lane(i int) *lane {
	if i == r.odIdx() {
		return r.od
	}
	return &r.lanes[i]
}

func (r *run) progress() float64 { return r.saved + r.pending }

// kept is what a voluntary switch keeps (it checkpoints first).
func (r *run) kept() float64 {
	if math.IsInf(r.sp.ckpt, 1) {
		return 0
	}
	return r.saved + r.pending
}

// safe is the progress an interruption keeps.
func (r *run) safe() float64 {
	if r.sp.ckpt == 0 {
		return r.saved + r.pending
	}
	return r.saved
}

// move is the lane to hold and the latest time to be asked again.
type move struct {
	to     int
	review float64
}

// policy decides what to hold, keeping no state between calls.
type policy interface {
	decide(r *run) move
}

const maxSteps = 1 << 20

// exec carries the job out with the policy from the spec's start.
func (r *run) exec(p policy) outcome {
	sp := r.sp
	r.t, r.saved, r.pending, r.clock = sp.start, 0, 0, 0
	r.cur, r.over, r.cost, r.interruptions, r.odHours = idle, 0, 0, 0, 0
	r.lastPreempt, r.lastPreemptAt = idle, math.Inf(-1)
	r.hasMix = false
	for i := range r.lanes {
		r.lanes[i].rewindTo(sp.start)
		r.hasMix = r.hasMix || r.lanes[i].mix
	}
	return r.resume(p)
}

// resume carries the job on with the policy from the run's state.
func (r *run) resume(p policy) outcome {
	sp := r.sp
	const eps = 1e-9
	for step := 0; ; step++ {
		if r.progress() >= sp.work-eps {
			return outcome{done: true, finish: r.t, cost: r.cost, interruptions: r.interruptions, odHours: r.odHours}
		}
		if r.t >= sp.horizon-eps || step > maxSteps {
			return outcome{finish: r.t, cost: r.cost, interruptions: r.interruptions, odHours: r.odHours, left: sp.work - r.progress()}
		}
		m := p.decide(r)
		if m.to != r.cur {
			r.switchTo(m.to)
		}
		next := m.review
		if sp.quantum > 0 && next < inf {
			next = sp.quantum * math.Ceil(next/sp.quantum-1e-9)
		}
		if next <= r.t+eps {
			next = r.t + 1e-6
			if sp.quantum > next-r.t {
				next = r.t + sp.quantum
			}
		}
		change := inf // when the spot lane held may go
		if r.cur != idle {
			l := r.lane(r.cur)
			if r.cur != r.odIdx() {
				up, chg := l.at(r.t)
				if !up { // the policy chose a lane that is not there
					r.preempt()
					continue
				}
				change = chg
				if chg < next {
					next = chg
				}
			}
			if fin := r.t + r.over + (sp.work-r.progress())/l.speed; fin < next {
				next = fin
			}
		}
		if sp.horizon < next {
			next = sp.horizon
		}
		r.advance(next)
		if next == change && r.progress() < sp.work-eps {
			// The lane held changed: it was up, so it is gone.
			r.preempt()
		}
	}
}

// inf is +Inf for the hot loop's comparisons.
var inf = math.Inf(1)

func (r *run) switchTo(to int) {
	if r.cur != idle {
		// A voluntary switch checkpoints first.
		if math.IsInf(r.sp.ckpt, 1) {
			r.saved = 0
		} else {
			r.saved += r.pending
		}
		r.pending, r.clock = 0, 0
	}
	r.cur, r.over = to, 0
	if to != idle {
		r.over = r.sp.d
	}
}

func (r *run) preempt() {
	r.interruptions++
	r.lastPreempt, r.lastPreemptAt = r.cur, r.t
	if math.IsInf(r.sp.ckpt, 1) {
		r.saved = 0
	}
	if r.sp.ckpt != 0 {
		r.pending = 0
	}
	r.clock = 0
	r.cur, r.over = idle, 0
}

// advance moves the clock to `to`, paying and progressing on the lane held.
func (r *run) advance(to float64) {
	dt := to - r.t
	r.t = to
	if r.cur == idle || dt <= 0 {
		return
	}
	l := r.lane(r.cur)
	r.cost += l.usdHour * dt
	if r.cur == r.odIdx() {
		r.odHours += dt
	}
	prod := dt - r.over
	if prod <= 0 {
		r.over -= dt
		return
	}
	r.over = 0
	c := r.sp.ckpt
	switch {
	case c == 0:
		r.saved += prod * l.speed
	case math.IsInf(c, 1):
		r.pending += prod * l.speed
	default:
		r.pending += prod * l.speed
		r.clock += prod
		if r.clock >= c {
			k := math.Floor(r.clock / c)
			r.saved += k * c * l.speed
			r.pending = math.Max(0, r.pending-k*c*l.speed)
			r.clock -= k * c
		}
	}
}

// nextChange is the earliest time any spot lane may change.
func (r *run) nextChange() float64 {
	_, next := r.scan(math.Inf(1), inf, false)
	return next
}

// scan finds the up lane of lowest score below maxScore among the partial
// (mix) or whole gangs, and the next change; a lane just interrupted is
// taken only if no other is up (interruptions repeat in a zone).
func (r *run) scan(cooldown, maxScore float64, mix bool) (best int, next float64) {
	best, fallback := -1, -1
	next = math.Inf(1)
	for i := range r.lanes {
		l := &r.lanes[i]
		if l.score >= maxScore || l.mix != mix {
			continue
		}
		up, n := l.at(r.t)
		if n < next {
			next = n
		}
		if !up {
			continue
		}
		if i == r.lastPreempt && r.t-r.lastPreemptAt < cooldown {
			fallback = i
			continue
		}
		if best < 0 || l.score < r.lanes[best].score {
			best = i
		}
	}
	if best < 0 {
		best = fallback
	}
	return best, next
}

// mixLevels are a partial gang's spot shares: n−1, 3n/4 and n/2 (less
// than half saves too little to pay its changeovers).
func mixLevels(n int) []int {
	var out []int
	for _, c := range []int{n - 1, (3*n + 3) / 4, (n + 1) / 2} {
		if c >= 1 && c < n && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}
