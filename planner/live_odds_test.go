package planner

import (
	"math"
	"testing"
	"time"
)

// oddsJob is a job on three independent pools whose deadline leaves
// spot alone a fair chance of missing it.
func oddsJob(t *testing.T, strategy string) (Result, LiveJob) {
	t.Helper()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	job := Job{GPUs: 8, Models: []string{"H100"}, Hours: 24, Start: start, Deadline: start.Add(40 * time.Hour),
		Checkpointable: true, Checkpoint: 30 * time.Minute, Changeover: 12 * time.Minute}
	m := Market{}
	for i, z := range []string{"a", "b", "c"} {
		m.Pools = append(m.Pools, Pool{Key: "sim/us-east-1/us-east-1" + z + "/p5.48xlarge", Provider: "sim", Cloud: "aws", Region: "us-east-1",
			Zone: "us-east-1" + z, InstanceType: "p5.48xlarge", GPUModel: "H100", GPUsPerInstance: 8,
			SpotUSDHour: 30 + float64(i), OnDemandUSDHour: 98, Risk: Risk{InterruptionsPerHour: 0.3, Availability: 0.7, GapMedianHours: 1}})
	}
	res, lj, err := CarryOut(job, m, Options{Runs: 4000}, strategy)
	if err != nil {
		t.Fatal(err)
	}
	return res, lj
}

// At the start, Odds weighted by the chance each lane is up is the
// plan's own on-time share: the same draws, policy and run arithmetic.
func TestOddsAtTheStartAreThePlans(t *testing.T) {
	res, lj := oddsJob(t, StrategySpotOne)
	if len(lj.Lanes) != 1 || lj.Lanes[0].Risk.InterruptionsPerHour <= 0 {
		t.Fatalf("lanes %+v: want one spot lane with the pool's risk", lj.Lanes)
	}
	if res.OnTimePct < 20 || res.OnTimePct > 95 {
		t.Fatalf("plan on time %.1f %%: the case should leave spot a fair chance to be late", res.OnTimePct)
	}
	s := NewLiveState(lj.Start)
	a := lj.Lanes[0].Risk.Availability
	got := 100 * (a*lj.Odds(s, []bool{true}, 3, runs(4000)) + (1-a)*lj.Odds(s, []bool{false}, 3, runs(4000)))
	t.Logf("odds at the start %.1f %%, plan %.1f %%", got, res.OnTimePct)
	if math.Abs(got-res.OnTimePct) > 3 {
		t.Errorf("odds at the start %.1f %%, plan %.1f %%", got, res.OnTimePct)
	}
}

// The odds follow the job's state: less time, less progress or no
// capacity now lower them; a safety net keeps them whole; done is sure.
func TestOddsFollowTheState(t *testing.T) {
	_, lj := oddsJob(t, StrategySpotMulti)
	up := []bool{true, true, true}
	s := NewLiveState(lj.Start)
	base := lj.Odds(s, up, 1, runs(2000))
	late := NewLiveState(lj.Start.Add(4 * time.Hour))
	if o := lj.Odds(late, up, 1, runs(2000)); !(o < base-0.02) {
		t.Errorf("4 h later with nothing done: odds %.3f, at the start %.3f", o, base)
	}
	down := []bool{false, false, false}
	if o := lj.Odds(s, down, 1, runs(2000)); !(o < base) {
		t.Errorf("no pool up: odds %.3f, all up %.3f", o, base)
	}
	if d, u := lj.Odds(late, down, 1, runs(2000)), lj.Odds(late, up, 1, runs(2000)); !(d < u-0.02) {
		t.Errorf("4 h in, no pool up: odds %.3f, all up %.3f", d, u)
	}
	ahead := s
	ahead.At, ahead.Saved = lj.Start.Add(4*time.Hour), 6
	if o := lj.Odds(ahead, up, 1, runs(2000)); !(o > lj.Odds(late, up, 1, runs(2000))) {
		t.Errorf("6 h done by 4 h: odds %.3f not above none done", o)
	}
	if o := lj.Odds(s, up, 1, runs(2000)); o != base {
		t.Errorf("the same state twice: %.3f then %.3f", base, o)
	}
	done := s
	done.Saved = lj.Work
	if o := lj.Odds(done, up, 1, runs(10)); o != 1 {
		t.Errorf("done: odds %v", o)
	}
	past := NewLiveState(lj.Deadline)
	if o := lj.Odds(past, up, 1, runs(10)); o != 0 {
		t.Errorf("at the deadline with work left: odds %v", o)
	}
	res, net := oddsJob(t, StrategySafetyNet)
	if o := net.Odds(late, down, 1, runs(500)); o != 1 || res.OnTimePct != 100 {
		t.Errorf("safety net 4 h in, no pool up: odds %.3f (plan %.1f %%), want 1", o, res.OnTimePct)
	}
}

// runs is a fixed count of runs.
func runs(n int) func(on, k int) bool { return func(_, k int) bool { return k >= n } }

// BenchmarkOdds is one review's odds of a job 5 h into 20 h of work due
// in 30 h, on three pools and a safety net, at 64 runs.
func BenchmarkOdds(b *testing.B) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	lj := LiveJob{Policy: StrategySafetyNet, Start: start, Deadline: start.Add(30 * time.Hour), Work: 20, D: 0.2, Checkpoint: 0.5, AnyAvail: 0.9,
		OnDemand: &LiveLane{USDHour: 196, Speed: 1, Score: 196}}
	for i := range 3 {
		lj.Lanes = append(lj.Lanes, LiveLane{USDHour: 60, Speed: 1, Score: 62 + float64(i),
			Risk: Risk{InterruptionsPerHour: 0.5, Availability: 0.8, GapMedianHours: 0.5}})
	}
	s := NewLiveState(start.Add(5 * time.Hour))
	s.Cur, s.Saved, s.Asked = 0, 4.5, true
	up := []bool{true, true, false}
	for b.Loop() {
		lj.Odds(s, up, 1, runs(64))
	}
}
