package planner

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// fixed is a complete timeline from its flip times (up first unless
// down0), for hand-worked runs.
func fixed(down0 bool, flips ...float64) *timeline {
	return &timeline{up0: !down0, bounds: append(append([]float64(nil), flips...), math.Inf(1))}
}

func TestRunAccounting(t *testing.T) {
	// Spot is up on [0, 5), down on [5, 6), up from 6; $2/h. The job is
	// 8 h of work with a 0.5 h changeover at each start.
	cases := []struct {
		name          string
		ckpt          float64
		finish, cost  float64
		interruptions int
	}{
		// Checkpoints each hour: at 5 h it has run 4.5 h and saved 4 h;
		// restarts at 6, changeover to 6.5, 4 h more: done at 10.5,
		// paid 5 + 4.5 h.
		{"checkpoint every hour", 1, 10.5, 2 * 9.5, 1},
		// Progress never lost: 4.5 h kept, 3.5 h more from 6.5.
		{"progress kept", 0, 10, 2 * 9, 1},
		// Not checkpointable: starts over at 6: 0.5 + 8 h.
		{"starts over", math.Inf(1), 14.5, 2 * 13.5, 1},
	}
	for _, tc := range cases {
		sp := spec{work: 8, deadline: 100, d: 0.5, ckpt: tc.ckpt, horizon: 100}
		r := &run{sp: &sp, lanes: []lane{{usdHour: 2, speed: 1, tl: fixed(false, 5, 6)}}}
		o := r.exec(spotOnly{})
		if !o.done || math.Abs(o.finish-tc.finish) > 1e-9 || math.Abs(o.cost-tc.cost) > 1e-9 || o.interruptions != tc.interruptions {
			t.Errorf("%s: %+v, want finish %v cost %v interruptions %d", tc.name, o, tc.finish, tc.cost, tc.interruptions)
		}
	}
	// A slower GPU takes longer for the same work.
	sp := spec{work: 9, deadline: 100, d: 0, ckpt: 0, horizon: 100}
	r := &run{sp: &sp, lanes: []lane{{usdHour: 1, speed: 0.45, tl: fixed(false)}}}
	if o := r.exec(spotOnly{}); math.Abs(o.finish-20) > 1e-9 || math.Abs(o.cost-20) > 1e-9 {
		t.Errorf("speed 0.45: %+v, want 20 h", o)
	}
	// On-demand alone: the work and one changeover, nothing lost.
	sp = spec{work: 8, deadline: 100, d: 0.5, ckpt: 1, horizon: 100}
	r = &run{sp: &sp, od: &lane{usdHour: 3, speed: 1}}
	if o := r.exec(onDemandOnly{}); o.finish != 8.5 || o.cost != 3*8.5 || o.odHours != 8.5 {
		t.Errorf("on-demand: %+v", o)
	}
	// Spot that never comes: spot alone stops at the horizon with the
	// work left.
	sp = spec{work: 8, deadline: 10, d: 0.5, horizon: 10}
	r = &run{sp: &sp, lanes: []lane{{usdHour: 1, speed: 1, tl: fixed(true)}}}
	if o := r.exec(spotOnly{}); o.done || o.left != 8 || o.cost != 0 {
		t.Errorf("no spot: %+v", o)
	}
}

func TestGreedyAsPublished(t *testing.T) {
	// No spot at all: Greedy waits until the work left plus 2d no longer
	// fits (10 + 1 h before 20 h: at 9 h), then on-demand to the end.
	sp := spec{work: 10, deadline: 20, d: 0.5, horizon: 40}
	r := &run{sp: &sp, lanes: []lane{{usdHour: 1, speed: 1, tl: fixed(true)}}, od: &lane{usdHour: 3, speed: 1}}
	o := r.exec(greedy{})
	if !o.done || math.Abs(o.finish-19.5) > 1e-9 || math.Abs(o.cost-3*10.5) > 1e-9 {
		t.Errorf("greedy without spot: %+v, want on-demand from 9 h, done at 19.5", o)
	}
	// Spot from 12 h: too late, Greedy stays on on-demand (it never comes
	// back).
	r = &run{sp: &sp, lanes: []lane{{usdHour: 1, speed: 1, tl: fixed(true, 12)}}, od: &lane{usdHour: 3, speed: 1}}
	if o := r.exec(greedy{}); math.Abs(o.cost-3*10.5) > 1e-9 {
		t.Errorf("greedy went back to spot: %+v", o)
	}
}

func TestUniformProgressAsPublished(t *testing.T) {
	// No spot: behind the line W·t/D at once, so on-demand from the start;
	// with hysteresis it leaves on-demand once ahead of the line 2d later
	// and comes back when behind: the job is on time and pays only
	// on-demand, with a changeover at each start.
	sp := spec{work: 10, deadline: 20, d: 0.5, horizon: 40}
	r := &run{sp: &sp, lanes: []lane{{usdHour: 1, speed: 1, tl: fixed(true)}}, od: &lane{usdHour: 3, speed: 1}}
	o := r.exec(uniformProgress{})
	if !o.done || o.finish > 20 || o.interruptions != 0 || math.Abs(o.cost-3*o.odHours) > 1e-9 || o.odHours < 10.5 {
		t.Errorf("uniform progress without spot: %+v", o)
	}
	// Spot always there: spot from the start, never on-demand.
	r = &run{sp: &sp, lanes: []lane{{usdHour: 1, speed: 1, tl: fixed(false)}}, od: &lane{usdHour: 3, speed: 1}}
	if o := r.exec(uniformProgress{}); o.odHours != 0 || o.finish != 10.5 || o.cost != 10.5 {
		t.Errorf("uniform progress with spot: %+v", o)
	}
}

func TestPlannerPolicy(t *testing.T) {
	sp := spec{work: 10, deadline: 20, d: 0.5, ckpt: 0.25, horizon: 40}
	// Three pools; the cheapest (by score) is down, the second up: it
	// takes the second and never needs on-demand.
	lanes := []lane{
		{usdHour: 1, speed: 1, score: 1, tl: fixed(true)},
		{usdHour: 1.2, speed: 1, score: 1.2, tl: fixed(false)},
		{usdHour: 1.1, speed: 1, score: 1.1, tl: fixed(true, 30)},
	}
	r := &run{sp: &sp, lanes: lanes, od: &lane{usdHour: 3, speed: 1}}
	o := r.exec(planner{anyAvail: 0.9, cooldown: cooldown})
	if o.finish != 10.5 || math.Abs(o.cost-1.2*10.5) > 1e-9 || o.odHours != 0 {
		t.Errorf("planner on an available pool: %+v", o)
	}
	// It moves on after an interruption: pool 0 is up to 3 h, then back
	// at 3.1 h; pool 1 is up from 3.05 h. Within the cooldown it takes
	// pool 1 rather than the pool that just dropped it.
	lanes = []lane{
		{usdHour: 1, speed: 1, score: 1, tl: fixed(false, 3, 3.1)},
		{usdHour: 1.2, speed: 1, score: 1.2, tl: fixed(true, 3.05)},
	}
	r = &run{sp: &sp, lanes: lanes, od: &lane{usdHour: 3, speed: 1}}
	o = r.exec(planner{anyAvail: 0.9, cooldown: cooldown})
	// 2.5 h of work by 3 h (saved 2.5), 3.05 → 3.55 changeover, 7.5 h more.
	if math.Abs(o.finish-11.05) > 1e-9 || o.interruptions != 1 {
		t.Errorf("planner after an interruption: %+v, want done at 11.05 on pool 1", o)
	}
	// Pools expected to cost more per hour of work than on-demand (scores
	// 4 and 5 against $3/h) are left alone even when up.
	lanes = []lane{{usdHour: 1, speed: 1, score: 4, tl: fixed(false)}, {usdHour: 1, speed: 1, score: 5, tl: fixed(false)}}
	r = &run{sp: &sp, lanes: lanes, od: &lane{usdHour: 3, speed: 1}}
	if o := r.exec(planner{anyAvail: 0.9, cooldown: cooldown}); o.odHours != 10.5 || o.cost != 3*10.5 || o.interruptions != 0 {
		t.Errorf("planner with pools worse than on-demand: %+v", o)
	}
	// No spot at all: on-demand, on time.
	lanes = []lane{{usdHour: 1, speed: 1, score: 1, tl: fixed(true)}}
	r = &run{sp: &sp, lanes: lanes, od: &lane{usdHour: 3, speed: 1}}
	if o := r.exec(planner{anyAvail: 0.5, cooldown: cooldown}); !o.done || o.finish > 20 || o.odHours < 10.5 {
		t.Errorf("planner without spot: %+v", o)
	}
}

// TestSafetyNetsMeetDeadlines draws thousands of random markets and jobs:
// whenever the job fits on on-demand with its margins, the planner
// finishes by the deadline whatever spot does, checkpoints or not.
// Uniform Progress does too in its own model, where an interruption loses
// no progress (the changeover stands for the loss); with checkpoints an
// hour apart its 2d margin is not enough, which the planner's safety net
// (it counts the progress an interruption would lose) fixes.
func TestSafetyNetsMeetDeadlines(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	g := newRenewal()
	fails := map[string]int{}
	upLateHourly := 0
	const cases = 3000
	for i := range cases {
		work := 2 + 40*rng.Float64()
		d := 0.5 * rng.Float64()
		quantum := []float64{0, 0.05, 1.0 / 12}[rng.IntN(3)]
		ckpt := []float64{0, 0.25, 1, math.Inf(1)}[rng.IntN(4)]
		deadline := work/(0.5+0.5*rng.Float64()) + 2*d + 2*quantum + 1e-6
		sp := spec{work: work, deadline: deadline, d: d, ckpt: ckpt, quantum: quantum, horizon: deadline + work + 10}
		n := 1 + rng.IntN(5)
		lanes := make([]lane, n)
		for j := range lanes {
			g.setup(0.05+2*rng.Float64(), 0.05+0.9*rng.Float64(), 0.1+rng.Float64())
			tl := &timeline{}
			g.fill(tl, uint64(i), uint64(j), sp.horizon)
			tl.closeAt(sp.horizon)
			lanes[j] = lane{usdHour: 1, speed: 1, score: rng.Float64(), tl: tl}
		}
		od := &lane{usdHour: 3, speed: 1}
		if o := (&run{sp: &sp, lanes: lanes, od: od}).exec(planner{anyAvail: rng.Float64(), cooldown: cooldown}); !o.done || o.finish > deadline+1e-9 {
			fails["planner"]++
		}
		o := (&run{sp: &sp, lanes: lanes[:1], od: od}).exec(uniformProgress{})
		late := !o.done || o.finish > deadline+1e-9
		switch {
		case late && ckpt == 0:
			fails["uniform-progress"]++
		case late && ckpt == 1:
			upLateHourly++
		}
	}
	for name, n := range fails {
		t.Errorf("%s missed %d of %d deadlines", name, n, cases)
	}
	if upLateHourly == 0 {
		t.Error("Uniform Progress never missed with hourly checkpoints: the case the planner's safety net is for is not exercised")
	}
}

func TestTimelineHelpers(t *testing.T) {
	a := fixed(false, 1, 3, 5, 8)    // up [0,1) [3,5) [8,∞)
	b := fixed(true, 2, 4, 7, 9, 10) // up [2,4) [7,9) [10,∞)
	var both timeline
	both.and(a, b)
	want := []float64{3, 4, 8, 9, 10, math.Inf(1)} // up [3,4) [8,9) [10,∞)
	if both.up0 || len(both.bounds) != len(want) {
		t.Fatalf("and: up0 %v bounds %v, want down then %v", both.up0, both.bounds, want)
	}
	for i := range want {
		if both.bounds[i] != want[i] {
			t.Fatalf("and: bounds %v, want %v", both.bounds, want)
		}
	}
	both.closeAt(8.5) // up [3,4) [8,8.5)
	if up, next := both.at(8.2); !up || next != 8.5 {
		t.Errorf("closed at 8.5: at(8.2) = %v %v", up, next)
	}
	if up, next := both.at(50); up || !math.IsInf(next, 1) {
		t.Errorf("after the close: %v %v", up, next)
	}
	both.rewindTo(3.5)
	if up, next := both.at(3.5); !up || next != 4 {
		t.Errorf("rewound to 3.5: %v %v", up, next)
	}
}

// TestRenewalMatchesItsRisk draws a long timeline and measures it: the
// availability, the interruptions per available hour and the median gap
// come out as set, within sampling error.
func TestRenewalMatchesItsRisk(t *testing.T) {
	for _, tc := range []struct{ lambda, a, median float64 }{{1.4, 0.17, 0.7}, {0.1, 0.9, 0.38}, {0.5, 0.5, 0.54}} {
		g := newRenewal()
		g.setup(tc.lambda, tc.a, tc.median)
		tl := &timeline{}
		const horizon = 200000.0
		g.fill(tl, 1, 2, horizon)
		tl.closeAt(horizon)
		var up, downs float64
		var gaps []float64
		state, last := tl.up0, 0.0
		for _, b := range tl.bounds[:len(tl.bounds)-1] {
			if state {
				up += b - last
				downs++
			} else if last > 0 {
				gaps = append(gaps, b-last)
			}
			state, last = !state, b
		}
		a, rate, med := up/horizon, downs/up, quantile(gaps, 0.5)
		if math.Abs(a-tc.a) > 0.03 || math.Abs(rate-tc.lambda)/tc.lambda > 0.05 || math.Abs(med-tc.median)/tc.median > 0.05 {
			t.Errorf("%+v: measured availability %.3f, rate %.3f/h, median gap %.3f h", tc, a, rate, med)
		}
	}
}

// TestDecisionsNeedOnlyThePresent: a run rebuilt from what a live driver
// knows (the state, and which pools are up now) takes the move the
// replayed run takes at that moment, for every policy, so one
// implementation serves the backtest, the Monte Carlo and the job.
func TestDecisionsNeedOnlyThePresent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	g := newRenewal()
	names := []string{StrategySpotOne, PolicyGreedy, StrategyUniformProgress, StrategySafetyNet, StrategyOnDemand}
	checked := map[string]int{}
	for i := range 400 {
		work := 4 + 20*rng.Float64()
		sp := spec{work: work, deadline: work * (1.2 + rng.Float64()), d: 0.2, ckpt: []float64{0, 0.25, math.Inf(1)}[i%3], horizon: 3 * work}
		lanes := make([]lane, 1+rng.IntN(4))
		for j := range lanes {
			g.setup(0.2+rng.Float64(), 0.3+0.6*rng.Float64(), 0.5)
			tl := &timeline{}
			g.fill(tl, uint64(i), uint64(j), sp.horizon)
			tl.closeAt(sp.horizon)
			lanes[j] = lane{usdHour: 1, speed: 1, score: 1 + rng.Float64(), tl: tl}
		}
		name := names[i%len(names)]
		pol := policyFor(name, 0.8)
		// Replay to a random moment, then ask both runs there.
		r := &run{sp: &sp, lanes: lanes, od: &lane{usdHour: 3, speed: 1}}
		stop := sp.deadline * rng.Float64()
		r.exec(stopAt{pol, stop})
		if r.t < stop || r.progress() >= sp.work {
			continue
		}
		live := make([]lane, len(lanes))
		for j := range lanes {
			up, _ := lanes[j].tl.at(r.t)
			live[j] = lane{usdHour: 1, speed: 1, score: lanes[j].score, tl: steady(up)}
		}
		lr := &run{sp: &sp, lanes: live, od: r.od, t: r.t, saved: r.saved, pending: r.pending, clock: r.clock,
			cur: r.cur, over: r.over, lastPreempt: r.lastPreempt, lastPreemptAt: r.lastPreemptAt}
		for j := range lr.lanes {
			lr.lanes[j].rewindTo(r.t)
		}
		want, got := pol.decide(r), pol.decide(lr)
		if want.to != got.to {
			t.Fatalf("%s at %.2f h: replay moves to %d, live to %d", name, r.t, want.to, got.to)
		}
		checked[name]++
	}
	for _, n := range names {
		if checked[n] < 20 {
			t.Errorf("%s checked %d times", n, checked[n])
		}
	}
}

// stopAt runs a policy until a moment, then holds still so exec stops
// there (nothing is held after it).
type stopAt struct {
	p    policy
	stop float64
}

func (s stopAt) decide(r *run) move {
	if r.t >= s.stop {
		r.sp.horizon = r.t
		return move{to: r.cur, review: r.t}
	}
	m := s.p.decide(r)
	m.review = minf(m.review, s.stop)
	return m
}

// TestOnTime: only a finished job is on time, however early its run
// stopped; a finished one is on time up to the deadline itself.
func TestOnTime(t *testing.T) {
	for _, c := range []struct {
		o    outcome
		want bool
	}{
		{outcome{done: true, finish: 10}, true},
		{outcome{done: true, finish: 12}, true},
		{outcome{done: true, finish: 12.01}, false},
		{outcome{done: false, finish: 11, left: 3}, false},
		{outcome{done: false, finish: 12, left: 0.5}, false},
	} {
		if got := c.o.onTime(12); got != c.want {
			t.Errorf("%+v by 12: on time %v, want %v", c.o, got, c.want)
		}
	}
	// Spot alone stops at the deadline unfinished: the plan counts it late.
	m := Market{Pools: []Pool{{Key: "a", Cloud: "aws", Region: "r", Zone: "z", InstanceType: "p5", GPUModel: "H100", GPUsPerInstance: 8,
		SpotUSDHour: 30, OnDemandUSDHour: 98, Risk: Risk{InterruptionsPerHour: 2, GapMedianHours: 3, Availability: 0.2}}}}
	job := Job{GPUs: 8, Models: []string{"H100"}, Hours: 20, Start: t0, Deadline: t0.Add(24 * time.Hour), Checkpointable: true,
		Checkpoint: 15 * time.Minute, Changeover: 12 * time.Minute}
	rs, err := Plan(job, m, Options{Runs: 500})
	if err != nil {
		t.Fatal(err)
	}
	one, _ := byStrategy(rs, StrategySpotOne)
	if one.OnTimePct > 5 {
		t.Errorf("spot alone at 20 %% availability claims %.1f %% on time for 20 h of work in 24 h", one.OnTimePct)
	}
}
