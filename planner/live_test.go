package planner

import (
	"math"
	"testing"
	"time"
)

// liveCarry drives a LiveJob over known timelines as a driver would,
// waking when exec would (the policy's review, the held lane's change,
// the work's end), and returns its finish (hours) and modelled cost. It
// carries out the policy's reviews lag hours late.
func liveCarry(t *testing.T, j *LiveJob, tls []*timeline, horizon, lag float64) (finish, cost float64, s LiveState) {
	t.Helper()
	s = NewLiveState(j.Start)
	for _, tl := range tls {
		tl.rewindTo(0)
	}
	h := func(at time.Time) float64 { return j.hours(at) }
	for step := 0; step < 100000; step++ {
		if j.Done(s) {
			return h(s.At), s.Cost, s
		}
		if h(s.At) >= horizon {
			return math.Inf(1), s.Cost, s
		}
		up := make([]bool, len(tls))
		for i, tl := range tls {
			up[i], _ = tl.at(h(s.At))
		}
		if j.Due(s, up) {
			mv, err := j.Decide(s, up)
			if err != nil {
				t.Fatal(err)
			}
			s = j.Apply(s, mv, up)
		}
		// The driver sees every change of capacity (the events it
		// reads) and wakes at the review the policy named.
		next := math.Inf(1)
		if !s.Review.IsZero() {
			next = h(s.Review) + lag
		}
		for _, tl := range tls {
			_, c := tl.at(h(s.At))
			next = math.Min(next, c)
		}
		change := math.Inf(1)
		if s.Cur >= 0 && s.Cur < len(tls) {
			if !up[s.Cur] {
				s = j.Interrupted(s)
				continue
			}
			_, change = tls[s.Cur].at(h(s.At))
			next = math.Min(next, change)
		}
		if l := j.Lane(s.Cur); l != nil {
			next = math.Min(next, h(s.At)+s.Over+(j.Work-s.Progress())/l.Speed)
		}
		next = math.Min(next, horizon)
		s = j.Advance(s, j.at(next))
		if h(s.At) >= change && !j.Done(s) {
			s = j.Interrupted(s)
		}
	}
	t.Fatalf("no end: %+v", s)
	return
}

func TestLiveCarryFollowsTheModel(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	g := newRenewal()
	g.setup(0.6, 0.7, 0.5)
	for _, pol := range []string{StrategySafetyNet, StrategyUniformProgress, StrategySpotMulti} {
		for _, ckpt := range []float64{0, 0.5, math.Inf(1)} {
			for seed := uint64(1); seed <= 20; seed++ {
				const W, D, d = 24.0, 36.0, 0.2
				var tls, tls2 []*timeline
				lanes := []LiveLane{{USDHour: 10, Speed: 1, Score: 12}, {USDHour: 11, Speed: 1, Score: 13}, {USDHour: 9, Speed: 0.8, Score: 14}}
				if pol == StrategyUniformProgress {
					lanes = lanes[:1]
				}
				var runLanes []lane
				for i, l := range lanes {
					tl := &timeline{}
					g.fill(tl, seed, uint64(i), D)
					tl.closeAt(D)
					c := &timeline{bounds: append([]float64(nil), tl.bounds...), up0: tl.up0}
					tls, tls2 = append(tls, tl), append(tls2, c)
					runLanes = append(runLanes, lane{usdHour: l.USDHour, speed: l.Speed, score: l.Score, tl: c})
				}
				lj := LiveJob{Policy: pol, Start: start, Deadline: start.Add(D * time.Hour), Work: W, D: d, Checkpoint: ckpt,
					Lanes: lanes, OnDemand: &LiveLane{USDHour: 30, Speed: 1, Score: 30}, AnyAvail: 0.9}
				if math.IsInf(ckpt, 1) {
					lj.Checkpoint = -1
				}
				horizon := D + W + 24
				if pol == StrategySpotMulti {
					horizon = D
				}
				sp := spec{work: W, deadline: D, d: d, ckpt: ckpt, horizon: horizon}
				r := &run{sp: &sp, lanes: runLanes, od: &lane{usdHour: 30, speed: 1}}
				o := r.exec(policyFor(pol, 0.9))
				fin, cost, s := liveCarry(t, &lj, tls, horizon, 0)
				if !o.done {
					if !math.IsInf(fin, 1) {
						t.Errorf("%s ckpt %v seed %d: live finished at %v, the model did not", pol, ckpt, seed, fin)
					}
					continue
				}
				if math.Abs(fin-o.finish) > 1e-5 || math.Abs(cost-o.cost) > 1e-4 || s.Interruptions != o.interruptions {
					t.Errorf("%s ckpt %v seed %d: live finish %.6f cost %.4f interruptions %d; model %.6f %.4f %d",
						pol, ckpt, seed, fin, cost, s.Interruptions, o.finish, o.cost, o.interruptions)
				}
			}
		}
	}
}

// A driver that acts on a due move up to its Reaction late still meets
// the deadline: the safety net keeps that time in its sums.
func TestLateDriverKeepsTheDeadlineWithinItsReaction(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	g := newRenewal()
	g.setup(0.6, 0.7, 0.5)
	const W, D, d, lag = 24.0, 30.0, 0.2, 0.1
	late := map[float64]int{}
	for _, reaction := range []float64{0, lag} {
		for seed := uint64(1); seed <= 40; seed++ {
			var tls []*timeline
			lanes := []LiveLane{{USDHour: 10, Speed: 1, Score: 12}, {USDHour: 11, Speed: 1, Score: 13}}
			for i := range lanes {
				tl := &timeline{}
				g.fill(tl, seed, uint64(i), D+W)
				tl.closeAt(D + W)
				tls = append(tls, tl)
			}
			lj := LiveJob{Policy: StrategySafetyNet, Start: start, Deadline: start.Add(D * time.Hour), Work: W, D: d, Checkpoint: 0,
				Lanes: lanes, OnDemand: &LiveLane{USDHour: 30, Speed: 1, Score: 30}, AnyAvail: 0.9, Reaction: reaction}
			fin, _, _ := liveCarry(t, &lj, tls, D+W, lag)
			if fin > D+1e-9 {
				late[reaction]++
			}
		}
	}
	if late[lag] != 0 {
		t.Errorf("reaction %.1f h, driver %.1f h late: %d of 40 jobs finished after the deadline", lag, lag, late[lag])
	}
	if late[0] == 0 {
		t.Errorf("with no reaction kept, no job was late: the case does not test the reaction")
	}
}

func TestCarryOutLanes(t *testing.T) {
	start := time.Now().Add(time.Hour).Truncate(time.Hour)
	job := Job{GPUs: 16, Models: []string{"H100"}, Hours: 24, Start: start, Deadline: start.Add(48 * time.Hour),
		Checkpointable: true, Checkpoint: 30 * time.Minute, Changeover: 12 * time.Minute}
	m := Market{}
	for i, z := range []string{"a", "b", "c"} {
		m.Pools = append(m.Pools, Pool{Key: "sim/us-east-1/us-east-1" + z + "/p5.48xlarge", Provider: "sim", Cloud: "aws", Region: "us-east-1",
			Zone: "us-east-1" + z, InstanceType: "p5.48xlarge", GPUModel: "H100", GPUsPerInstance: 8,
			SpotUSDHour: 30 + float64(i), OnDemandUSDHour: 98, Risk: Risk{InterruptionsPerHour: 0.5, Availability: 0.8, GapMedianHours: 0.5, RegionShare: 0.5}})
	}
	res, lj, err := CarryOut(job, m, Options{Runs: 300}, StrategySafetyNet)
	if err != nil {
		t.Fatal(err)
	}
	if res.Strategy != StrategySafetyNet || len(lj.Lanes) != len(res.Pools) || lj.OnDemand == nil || lj.OnDemand.Pool != res.OnDemandPool {
		t.Fatalf("result %+v lanes %+v", res, lj)
	}
	if lj.Lanes[0].Instances != 2 || lj.Lanes[0].USDHour != 60 || lj.OnDemand.USDHour != 196 {
		t.Errorf("lane sizes and prices: %+v, od %+v", lj.Lanes[0], lj.OnDemand)
	}
	if _, _, err := CarryOut(job, m, Options{Runs: 100}, StrategyBlock); err == nil {
		t.Error("a capacity-block strategy was accepted for carrying out")
	}
}

func TestCarryOutScoresLanesAsThePlanDoes(t *testing.T) {
	start := time.Now().Add(time.Hour).Truncate(time.Hour)
	m := Market{Pools: []Pool{{Key: "sim/us-east-1/us-east-1a/p5.48xlarge", Provider: "sim", Cloud: "aws", Region: "us-east-1",
		Zone: "us-east-1a", InstanceType: "p5.48xlarge", GPUModel: "H100", GPUsPerInstance: 8, SpotUSDHour: 30, OnDemandUSDHour: 98,
		Risk: Risk{InterruptionsPerHour: 0.2, Availability: 0.9, GapMedianHours: 0.5, RegionShare: 0.5}}}}
	score := func(checkpointable bool) float64 {
		job := Job{GPUs: 16, Models: []string{"H100"}, Hours: 24, Start: start, Deadline: start.Add(72 * time.Hour),
			Checkpointable: checkpointable, Checkpoint: 30 * time.Minute, Changeover: 12 * time.Minute}
		_, lj, err := CarryOut(job, m, Options{Runs: 100}, StrategySafetyNet)
		if err != nil {
			t.Fatal(err)
		}
		l := lj.Lanes[0]
		ckpt := math.Inf(1)
		if checkpointable {
			ckpt = 0.5
		}
		want := l.USDHour * paidHours(l.Risk.InterruptionsPerHour, job.Hours/l.Speed, 0.2, ckpt) / job.Hours
		if math.Abs(l.Score-want) > 1e-9 {
			t.Errorf("checkpointable %v: lane scored %.4f, the plan prices it %.4f", checkpointable, l.Score, want)
		}
		return l.Score
	}
	// A job that restarts from zero pays for more hours on a pool that
	// interrupts it than one that keeps its checkpoints.
	if none, kept := score(false), score(true); none <= kept {
		t.Errorf("restarting job's lane %.4f, checkpointing job's %.4f: the restarts were not priced", none, kept)
	}
}
