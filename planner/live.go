package planner

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// A live job runs the priced policy and run arithmetic on the wall clock,
// fed what is known now instead of a drawn timeline.

// LiveLane is a spot pool of the plan's strategy, or its on-demand pool.
type LiveLane struct {
	Pool         string  `json:"pool"` // Pool.Key
	Provider     string  `json:"provider"`
	Region       string  `json:"region"`
	Zone         string  `json:"zone,omitempty"`
	InstanceType string  `json:"instance_type"`
	Instances    int     `json:"instances"`
	USDHour      float64 `json:"usd_hour"` // for all the instances
	Speed        float64 `json:"speed"`
	Score        float64 `json:"score"`
	// Risk is the pool's spot process the plan drew (zero on-demand).
	Risk Risk `json:"risk,omitzero"`
}

// LiveJob is a planned job's terms (hours from its start), policy and lanes.
type LiveJob struct {
	Policy   string    `json:"policy"`
	Start    time.Time `json:"start"`
	Deadline time.Time `json:"deadline"`
	Work     float64   `json:"work_hours"`
	D        float64   `json:"changeover_hours"`
	// Checkpoint is the interval in hours; 0 keeps all, -1 keeps none.
	Checkpoint float64    `json:"checkpoint_hours"`
	Lanes      []LiveLane `json:"lanes"`
	OnDemand   *LiveLane  `json:"on_demand,omitempty"`
	AnyAvail   float64    `json:"any_avail"`
	// Reaction is how late, in hours, the driver may act on a due move;
	// every safety-net sum keeps it, as the backtest keeps a trace's tick.
	Reaction float64 `json:"-"`
}

// Idle is the lane of a job that holds nothing.
const Idle = idle

// LiveState is a job's progress as the policy counts it.
type LiveState struct {
	At            time.Time `json:"at"`
	Cur           int       `json:"cur"` // Idle, a spot lane, or len(Lanes) for on-demand
	Over          float64   `json:"over"`
	Saved         float64   `json:"saved"`
	Pending       float64   `json:"pending"`
	Clock         float64   `json:"clock"`
	Cost          float64   `json:"cost"`
	Interruptions int       `json:"interruptions"`
	LastPreempt   int       `json:"last_preempt"`
	LastPreemptAt float64   `json:"last_preempt_at"`
	// What the policy was last asked with; Asked is reset by an interruption.
	Asked  bool      `json:"asked"`
	Up     []bool    `json:"up,omitempty"`
	Review time.Time `json:"review,omitzero"`
}

// neverPreempted stands for −Inf, which JSON cannot hold.
const neverPreempted = -1e10

// NewLiveState is a job not started at t.
func NewLiveState(t time.Time) LiveState {
	return LiveState{At: t, Cur: idle, LastPreempt: idle, LastPreemptAt: neverPreempted}
}

// Progress is the hours of work done (kept and not yet checkpointed).
func (s LiveState) Progress() float64 { return s.Saved + s.Pending }

// LiveMove is the lane to hold and when to ask again (zero: at an event).
type LiveMove struct {
	To     int
	Review time.Time
}

// OnDemandLane is the lane index of on-demand.
func (j *LiveJob) OnDemandLane() int { return len(j.Lanes) }

// Lane is lane i (spot or on-demand), nil for Idle.
func (j *LiveJob) Lane(i int) *LiveLane {
	switch {
	case i == j.OnDemandLane():
		return j.OnDemand
	case i >= 0 && i < len(j.Lanes):
		return &j.Lanes[i]
	}
	return nil
}

// Done reports whether the work is done.
func (j *LiveJob) Done(s LiveState) bool { return s.Progress() >= j.Work-1e-9 }

func (j *LiveJob) hours(t time.Time) float64 { return t.Sub(j.Start).Hours() }

// at is h hours after the start, rounded up so it has come when read back.
func (j *LiveJob) at(h float64) time.Time {
	return j.Start.Add(time.Duration(math.Ceil(h*float64(time.Hour))) + 1)
}

// run is the job's state as a run on lanes known only now (up[i]).
func (j *LiveJob) run(s *LiveState, up []bool) (*run, *spec) {
	ckpt := j.Checkpoint
	if ckpt < 0 {
		ckpt = math.Inf(1)
	}
	sp := &spec{work: j.Work, start: 0, deadline: j.hours(j.Deadline), d: j.D, ckpt: ckpt, quantum: j.Reaction, horizon: math.Inf(1)}
	lanes := make([]lane, len(j.Lanes))
	for i, l := range j.Lanes {
		u := i < len(up) && up[i]
		lanes[i] = lane{usdHour: l.USDHour, speed: l.Speed, score: l.Score, tl: steady(u), until: math.Inf(-1)}
	}
	r := &run{sp: sp, lanes: lanes, t: j.hours(s.At), saved: s.Saved, pending: s.Pending, clock: s.Clock,
		cur: s.Cur, over: s.Over, cost: s.Cost, interruptions: s.Interruptions,
		lastPreempt: s.LastPreempt, lastPreemptAt: s.LastPreemptAt}
	if j.OnDemand != nil {
		r.od = &lane{usdHour: j.OnDemand.USDHour, speed: j.OnDemand.Speed, until: math.Inf(-1)}
	} else {
		r.od = &lane{usdHour: math.Inf(1), speed: 1, until: math.Inf(-1)}
	}
	return r, sp
}

func (r *run) liveState(s LiveState, at time.Time) LiveState {
	return LiveState{Asked: s.Asked, Up: s.Up, Review: s.Review, At: at, Cur: r.cur, Over: r.over, Saved: r.saved, Pending: r.pending, Clock: r.clock, Cost: r.cost,
		Interruptions: r.interruptions, LastPreempt: r.lastPreempt, LastPreemptAt: r.lastPreemptAt}
}

// Advance counts the time from s.At to t on the lane held, as the plan does.
func (j *LiveJob) Advance(s LiveState, t time.Time) LiveState {
	if !t.After(s.At) {
		return s
	}
	r, _ := j.run(&s, nil)
	r.advance(math.Min(j.hours(t), j.finish(s)))
	return r.liveState(s, t)
}

// finish is the hour the work is done on the lane held (+Inf idle); read
// at every review, so without building a run.
func (j *LiveJob) finish(s LiveState) float64 {
	if l := j.Lane(s.Cur); l != nil && l.Speed > 0 {
		return j.hours(s.At) + s.Over + (j.Work-s.Progress())/l.Speed
	}
	return math.Inf(1)
}

// Finish is when the work will be done if the lane held runs on (zero
// when idle): the driver wakes then to end what it pays for.
func (j *LiveJob) Finish(s LiveState) time.Time {
	if fin := j.finish(s); !math.IsInf(fin, 1) {
		return j.at(fin)
	}
	return time.Time{}
}

// Interrupted is the state after the lane held was lost at s.At.
func (j *LiveJob) Interrupted(s LiveState) LiveState {
	r, _ := j.run(&s, nil)
	if r.cur == idle {
		return s
	}
	r.preempt()
	s.Asked = false
	return r.liveState(s, s.At)
}

// Apply is the state after the move was carried out at s.At.
func (j *LiveJob) Apply(s LiveState, mv LiveMove, up []bool) LiveState {
	s.Asked, s.Up, s.Review = true, slices.Clone(up), mv.Review
	if mv.To == s.Cur {
		return s
	}
	r, _ := j.run(&s, nil)
	r.switchTo(mv.To)
	return r.liveState(s, s.At)
}

// Due reports whether to ask the policy at s.At exactly as the model asks
// it: asked more often, it may decide otherwise than priced.
func (j *LiveJob) Due(s LiveState, up []bool) bool {
	switch {
	case !s.Asked:
		return true
	case !s.Review.IsZero() && !s.At.Before(s.Review):
		return true
	case s.Cur == idle || s.Review.IsZero():
		return !slices.Equal(up, s.Up)
	}
	return false
}

// Reported sets the progress to the hours the job reports saved.
func (j *LiveJob) Reported(s LiveState, hours float64) LiveState {
	s.Saved, s.Pending, s.Clock = math.Max(0, hours), 0, 0
	return s
}

// Decide asks the job's policy what to hold at s.At given up.
func (j *LiveJob) Decide(s LiveState, up []bool) (LiveMove, error) {
	pol := policyFor(j.Policy, j.AnyAvail)
	if pol == nil {
		return LiveMove{}, fmt.Errorf("strategy %s has no policy a driver can carry out", j.Policy)
	}
	r, _ := j.run(&s, up)
	m := pol.decide(r)
	if m.to == r.odIdx() && j.OnDemand == nil {
		m.to = idle
	}
	mv := LiveMove{To: m.to}
	if !math.IsInf(m.review, 1) && !math.IsNaN(m.review) {
		mv.Review = j.at(m.review)
	}
	return mv, nil
}

// CarriedOut names the strategies a driver can carry out.
var CarriedOut = []string{StrategySafetyNet, StrategyUniformProgress, StrategySpotMulti, StrategySpotOne, StrategyOnDemand}

// CarryOut plans the job and returns the best row of the strategy with
// the lanes it was priced on.
func CarryOut(job Job, m Market, opt Options, strategy string) (Result, LiveJob, error) {
	if !slices.Contains(CarriedOut, strategy) {
		return Result{}, LiveJob{}, fieldErr("strategy", "%q: a job carries out one of %v", strategy, CarriedOut)
	}
	res, err := Plan(job, m, opt)
	if err != nil {
		return Result{}, LiveJob{}, err
	}
	Rank(res, 0)
	i := slices.IndexFunc(res, func(r Result) bool { return r.Strategy == strategy })
	if i < 0 {
		return Result{}, LiveJob{}, fieldErr("strategy", "the plan has no %s row on this market (no pool it needs)", strategy)
	}
	best := &res[i]
	if opt.Speeds == nil {
		opt.Speeds = DefaultSpeeds
	}
	p := newPlanning(context.Background(), job, opt, m)
	byKey := map[string]*candidate{}
	for i := range p.cands {
		byKey[p.cands[i].p.Key] = &p.cands[i]
	}
	lj := LiveJob{Policy: strategy, Start: job.Start, Deadline: job.Deadline, Work: job.Hours, D: job.Changeover.Hours(), Checkpoint: -1}
	if job.Checkpointable {
		lj.Checkpoint = job.Checkpoint.Hours()
	}
	liveLane := func(c *candidate, usd float64) LiveLane {
		return LiveLane{Pool: c.p.Key, Provider: c.p.Provider, Region: c.p.Region, Zone: c.p.Zone, InstanceType: c.p.InstanceType,
			Instances: c.n, USDHour: usd, Speed: c.speed, Score: c.score, Risk: c.risk}
	}
	var spot []*candidate
	if strategy != StrategyOnDemand {
		for _, k := range best.Pools {
			if c := byKey[k]; c != nil {
				lj.Lanes = append(lj.Lanes, liveLane(c, c.spotUSD))
				spot = append(spot, c)
			}
		}
	}
	odKey := best.OnDemandPool
	if strategy == StrategyOnDemand && len(best.Pools) > 0 {
		odKey = best.Pools[0]
	}
	if c := byKey[odKey]; c != nil {
		l := liveLane(c, c.odUSD)
		l.Score, l.Risk = c.odScore, Risk{}
		lj.OnDemand = &l
	}
	if len(spot) > 0 {
		lj.AnyAvail = anyAvailability(spot)
	}
	if len(lj.Lanes) == 0 && lj.OnDemand == nil {
		return Result{}, LiveJob{}, fieldErr("strategy", "the %s row names no pool gpumarket can launch in", strategy)
	}
	return *best, lj, nil
}

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
