package planner

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// plan is a training plan offering of n p5.48xlarge over the windows given
// as [start, end] hours from t0.
func trainingPlan(id string, n int, usd float64, windows ...[2]float64) domain.Offering {
	at := func(h float64) time.Time { return t0.Add(time.Duration(h * float64(time.Hour))) }
	o := domain.Offering{ID: id, Provider: "sim", Cloud: domain.CloudAWS, Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge",
		GPU: domain.GPUSpec{Model: "H100", Count: 8}, InstanceCount: n, UpfrontUSD: usd, Currency: "USD", Kind: domain.KindTrainingPlan,
		TargetResource: domain.TargetTrainingJob}
	for _, w := range windows {
		o.Segments = append(o.Segments, domain.Segment{InstanceType: o.InstanceType, InstanceCount: n, Zone: o.Zone, Start: at(w[0]), End: at(w[1])})
	}
	o.Start, o.End = o.Segments[0].Start, o.Segments[len(o.Segments)-1].End
	return o
}

// TestTrainingPlanStrategy: a plan's segments hold the work in order,
// each after a changeover and up to 30 minutes before its end; a plan
// whose segments cannot hold all the work, or one whose segment holds
// fewer GPUs than the job, is not offered; block+spot may use a
// one-segment plan for part of the work.
func TestTrainingPlanStrategy(t *testing.T) {
	job := goodJob() // 16 H100, 48 h of work, 12 min changeover
	job.Deadline = t0.Add(5 * 24 * time.Hour)
	holds := trainingPlan("tpo-holds", 2, 4000, [2]float64{0, 30}, [2]float64{40, 70})
	short := trainingPlan("tpo-short", 2, 3000, [2]float64{0, 24}, [2]float64{48, 72})
	small := trainingPlan("tpo-small", 2, 2000, [2]float64{0, 30}, [2]float64{40, 70})
	small.Segments[1].InstanceCount = 1 // 8 GPUs of the 16 the job needs
	m := testMarket()
	m.Offerings = []domain.Offering{holds, short, small}

	p := &planning{job: job, d: job.Changeover.Hours(), work: job.Hours, span: job.Deadline.Sub(job.Start).Hours()}
	run := p.runPlan(holds, 1)
	// 30 h less 0.5 h stop and 0.2 h changeover: 29.3 h; the other 18.7 h
	// from 40 h after a changeover: done at 58.9 h.
	if math.Abs(run.did[0]-29.3) > 1e-9 || math.Abs(run.did[1]-18.7) > 1e-9 || math.Abs(run.finish-58.9) > 1e-9 {
		t.Errorf("runPlan = %+v, want 29.3 h and 18.7 h of work, done at 58.9 h", run)
	}
	if r := p.runPlan(short, 1); !math.IsInf(r.finish, 1) {
		t.Errorf("two 24 h segments hold 46.6 h of work, not 48: finish %v, want +Inf", r.finish)
	}

	rs, err := Plan(job, m, Options{Runs: 200})
	if err != nil {
		t.Fatal(err)
	}
	var got []Result
	for _, r := range rs {
		if r.Strategy == StrategyTrainingPlan {
			got = append(got, r)
		}
		if r.Strategy == StrategyBlock && strings.HasPrefix(r.OfferingID, "tpo-") {
			t.Errorf("a training plan taken for a capacity block: %+v", r)
		}
	}
	if len(got) != 1 || got[0].OfferingID != "tpo-holds" {
		t.Fatalf("training-plan rows %+v, want only tpo-holds (tpo-short cannot hold the work, tpo-small holds 8 of 16 GPUs in a segment)", got)
	}
	r := got[0]
	if r.ExpectedCostUSD != 4000 || r.P95CostUSD != 4000 || r.OnTimePct != 100 || r.Instances != 2 ||
		!strings.Contains(r.Assumptions, "does 29.3 h") || !strings.Contains(r.Assumptions, "does 18.7 h") {
		t.Errorf("training-plan row %+v", r)
	}

	// Alone, the plans that cannot hold the job are not offered at all (a
	// plan listed late would still sell a job only part of its capacity).
	for _, o := range []domain.Offering{short, small} {
		m.Offerings = []domain.Offering{o}
		rs, _ = Plan(job, m, Options{Runs: 200})
		for _, r := range rs {
			if r.Strategy == StrategyTrainingPlan {
				t.Errorf("%s offered: %+v", o.ID, r)
			}
		}
	}
	m.Offerings = []domain.Offering{holds, short, small}

	// Due before the second segment ends: the same plan is late.
	late := job
	late.Deadline = t0.Add(50 * time.Hour)
	rs, _ = Plan(late, m, Options{Runs: 200})
	for _, r := range rs {
		if r.Strategy == StrategyTrainingPlan && r.OnTimePct != 0 {
			t.Errorf("a plan done at 58.9 h for a 50 h deadline: on time %v %%", r.OnTimePct)
		}
	}

	// A one-segment plan of 24 h does part of the work; block+spot uses it.
	m.Offerings = []domain.Offering{trainingPlan("tpo-one", 2, 1500, [2]float64{0, 24})}
	rs, _ = Plan(job, m, Options{Runs: 200})
	found := false
	for _, r := range rs {
		found = found || r.Strategy == StrategyBlockSpot && r.OfferingID == "tpo-one"
	}
	if !found {
		t.Error("block+spot did not use the one-segment plan")
	}
	m.Offerings = []domain.Offering{trainingPlan("tpo-two", 2, 1500, [2]float64{0, 12}, [2]float64{14, 24})}
	rs, _ = Plan(job, m, Options{Runs: 200})
	for _, r := range rs {
		if r.Strategy == StrategyBlockSpot && r.OfferingID == "tpo-two" {
			t.Error("block+spot used a two-segment plan as one window")
		}
	}
}

// TestOfferingRowsKeepTheBestOfEachKey: of offerings of one kind, cloud
// and length (of plans: of one cloud and segment count), only the
// cheapest that is on time is a row, whatever order they came in.
func TestOfferingRowsKeepTheBestOfEachKey(t *testing.T) {
	job := goodJob()
	job.Deadline = t0.Add(5 * 24 * time.Hour)
	m := testMarket()
	dear := m.Offerings[0] // cb-72
	dear.ID, dear.UpfrontUSD = "cb-72-dear", dear.UpfrontUSD*1.2
	m.Offerings = append([]domain.Offering{dear}, m.Offerings...)
	m.Offerings = append(m.Offerings, trainingPlan("tpo-dear", 2, 5000, [2]float64{0, 30}, [2]float64{40, 70}),
		trainingPlan("tpo-cheap", 2, 4000, [2]float64{0, 30}, [2]float64{40, 70}))
	rs, err := Plan(job, m, Options{Runs: 200})
	if err != nil {
		t.Fatal(err)
	}
	var blocks, plans []string
	for _, r := range rs {
		switch r.Strategy {
		case StrategyBlock:
			blocks = append(blocks, r.OfferingID)
		case StrategyTrainingPlan:
			plans = append(plans, r.OfferingID)
		}
	}
	if !slices.Contains(blocks, "cb-72") || slices.Contains(blocks, "cb-72-dear") || len(plans) != 1 || plans[0] != "tpo-cheap" {
		t.Errorf("block rows %v and plan rows %v: want cb-72 (not the dearer cb-72-dear of the same length) and only tpo-cheap", blocks, plans)
	}
}
