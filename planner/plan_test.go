package planner

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// testMarket: 16 H100 for 48 h from Wed 09:00 UTC, due Sat 09:00 (72 h).
// Four p5 pools in three regions (one calm), A100 pools, a 72 h block that
// holds the job, a 48 h block that does not, a 24 h block for block+spot,
// and an Azure reservation.
func testMarket() Market {
	var m Market
	add := func(region, zone, typ, model string, gpus, spot, od float64, bucket string) {
		p := domain.Pool{Provider: "sim", Cloud: domain.CloudAWS, Region: region, Zone: zone, InstanceType: typ,
			GPU: domain.GPUSpec{Model: model, Count: gpus}, OnDemandUSDHour: domain.Float(od)}
		p.Interruption, _ = domain.NewInterruption(bucket, "test", time.Time{})
		m.Pools = append(m.Pools, PoolOf(p, spot, nil))
	}
	add("us-east-1", "us-east-1a", "p5.48xlarge", "H100", 8, 12, 55.04, ">20%")
	add("us-east-1", "us-east-1b", "p5.48xlarge", "H100", 8, 13, 55.04, ">20%")
	add("us-east-2", "us-east-2a", "p5.48xlarge", "H100", 8, 14, 55.04, "10-15%")
	add("us-west-2", "us-west-2b", "p5.48xlarge", "H100", 8, 15, 55.04, "<5%")
	add("us-west-2", "us-west-2a", "p4d.24xlarge", "A100", 8, 4, 21.96, "5-10%")
	block := func(id string, start time.Time, hours float64, rate float64) domain.Offering {
		return domain.Offering{ID: id, Provider: "sim", Cloud: domain.CloudAWS, Region: "us-east-2", Zone: "us-east-2a",
			InstanceType: "p5.48xlarge", GPU: domain.GPUSpec{Model: "H100", Count: 8}, InstanceCount: 2,
			Start: start, End: start.Add(time.Duration(hours) * time.Hour), UpfrontUSD: rate * 16 * hours, Currency: "USD"}
	}
	day := time.Date(2026, 12, 2, 11, 30, 0, 0, time.UTC)
	m.Offerings = append(m.Offerings, block("cb-72", day, 72, 4.9), block("cb-48", day, 48, 4.8), block("cb-24", day.Add(24*time.Hour), 24, 4.9))
	az := domain.Offering{ID: "azcr-1", Provider: "sim", Cloud: domain.CloudAzure, Region: "eastus", Zone: "1",
		InstanceType: "Standard_ND96isr_H100_v5", GPU: domain.GPUSpec{Model: "H100", Count: 8}, InstanceCount: 2,
		Start: t0.Add(-15 * time.Hour), End: t0.Add(49 * time.Hour), UpfrontUSD: 98.32 * 2 * 64, StartsOnPurchase: true}
	m.Offerings = append(m.Offerings, az)
	return m
}

func byStrategy(rs []Result, name string) (Result, bool) {
	for _, r := range rs {
		if r.Strategy == name {
			return r, true
		}
	}
	return Result{}, false
}

func TestPlanStrategies(t *testing.T) {
	m := testMarket()
	rs, err := Plan(goodJob(), m, Options{Runs: 4000, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) Result {
		r, ok := byStrategy(rs, name)
		if !ok {
			t.Fatalf("no %s among %d results", name, len(rs))
		}
		return r
	}
	// The 72 h block holds the job; its cost per useful GPU-hour is its
	// price × 72 / 48. The 48 h block cannot hold 48 h + a changeover.
	b := get(StrategyBlock)
	if b.OfferingID != "cb-72" || b.OnTimePct != 100 || math.Abs(b.USDPerUsefulGPUHour-4.9*72/48) > 1e-9 || b.ExpectedInterruptions != 0 ||
		!strings.Contains(b.Assumptions, "72 h block") {
		t.Errorf("block: %+v", b)
	}
	for _, r := range rs {
		if r.OfferingID == "cb-48" && r.Strategy != StrategyBlockSpot {
			t.Errorf("the 48 h block cannot hold 48 h of work and a changeover alone: %+v", r)
		}
	}
	res := get(StrategyReservation)
	if res.OfferingID != "azcr-1" || res.Cloud != "azure" || res.OnTimePct != 100 || res.ExpectedCostUSD != 98.32*2*64 {
		t.Errorf("reservation: %+v", res)
	}
	od := get(StrategyOnDemand)
	if od.OnTimePct != 100 || math.Abs(od.ExpectedCostUSD-2*55.04*48.2) > 1e-9 || od.Instances != 2 || od.GPUs != 16 {
		t.Errorf("on-demand: %+v", od)
	}
	one, multi, up, net := get(StrategySpotOne), get(StrategySpotMulti), get(StrategyUniformProgress), get(StrategySafetyNet)
	if net.OnTimePct < 99 {
		t.Errorf("the safety net is on time %.1f%% of the runs, want ≥ 99", net.OnTimePct)
	}
	if one.OnTimePct > 95 || one.OnTimePct >= net.OnTimePct {
		t.Errorf("one pool (the calm us-west-2b) on time %.1f%%, the safety net %.1f%%: want one pool below", one.OnTimePct, net.OnTimePct)
	}
	if !(net.ExpectedCostUSD < od.ExpectedCostUSD && net.ExpectedCostUSD < up.ExpectedCostUSD) {
		t.Errorf("safety net $%.0f not below on-demand $%.0f and Uniform Progress $%.0f", net.ExpectedCostUSD, od.ExpectedCostUSD, up.ExpectedCostUSD)
	}
	if len(multi.Regions) < 2 || multi.OnTimePct <= one.OnTimePct {
		t.Errorf("multi-pool %+v vs one pool on time %.1f%%", multi, one.OnTimePct)
	}
	// Block + spot: a block that holds most of the job, spot for the rest
	// before it starts (the 48 h block from 11:30 leaves 0.7 h of work to
	// the 2.5 h before it); the capacity runs to the block's end.
	var bs []Result
	for _, r := range rs {
		if r.Strategy == StrategyBlockSpot {
			bs = append(bs, r)
		}
	}
	if len(bs) == 0 {
		t.Fatal("no block+spot")
	}
	for _, r := range bs {
		o := m.Offerings[slices.IndexFunc(m.Offerings, func(o domain.Offering) bool { return o.ID == r.OfferingID })]
		if r.OnTimePct < 99 || r.ExpectedCostUSD < o.UpfrontUSD || !r.End.Equal(o.End) || !strings.Contains(r.Assumptions, "block") {
			t.Errorf("block+spot: %+v", r)
		}
	}
	for _, r := range append([]Result{one, multi, up, net}, bs...) {
		if r.P95CostUSD < r.ExpectedCostUSD*0.999 || r.ExpectedInterruptions <= 0 || r.Assumptions == "" || r.End.Before(r.Start) {
			t.Errorf("%s: %+v", r.Strategy, r)
		}
		if math.Abs(r.USDPerUsefulGPUHour-r.ExpectedCostUSD/(16*48)) > 1e-9 {
			t.Errorf("%s: $/useful GPU-h %v", r.Strategy, r.USDPerUsefulGPUHour)
		}
	}

	// Ranked: on time ≥ 95 % cheapest first, the rest after.
	Rank(rs, 95)
	seenLate := false
	for i, r := range rs {
		if r.OnTimePct < 95 {
			seenLate = true
		} else if seenLate {
			t.Errorf("row %d (%s, %.1f%%) after a late one", i, r.Strategy, r.OnTimePct)
		}
		if i > 0 && r.OnTimePct >= 95 && rs[i-1].OnTimePct >= 95 && r.ExpectedCostUSD < rs[i-1].ExpectedCostUSD {
			t.Errorf("row %d cheaper than row %d", i, i-1)
		}
	}
}

func TestPlanIsReproducible(t *testing.T) {
	m := testMarket()
	a, _ := Plan(goodJob(), m, Options{Runs: 1000, Seed: 3, Workers: 1})
	b, _ := Plan(goodJob(), m, Options{Runs: 1000, Seed: 3, Workers: 3})
	c, _ := Plan(goodJob(), m, Options{Runs: 1000, Seed: 4, Workers: 1})
	if len(a) != len(b) {
		t.Fatalf("%d vs %d results", len(a), len(b))
	}
	differ := false
	for i := range a {
		if a[i].ExpectedCostUSD != b[i].ExpectedCostUSD || a[i].OnTimePct != b[i].OnTimePct || a[i].P95CostUSD != b[i].P95CostUSD {
			t.Errorf("%s: seed 3 gives %v with 1 worker, %v with 3", a[i].Strategy, a[i].ExpectedCostUSD, b[i].ExpectedCostUSD)
		}
		if a[i].ExpectedCostUSD != c[i].ExpectedCostUSD {
			differ = true
		}
	}
	if !differ {
		t.Error("seeds 3 and 4 give the same draws")
	}
}

func TestPlanSlowerModel(t *testing.T) {
	// H100 or A100: the A100 is cheaper per hour but does 0.45 of the
	// work, so its on-demand run takes 106.7 h and is late; priced per
	// hour of work it still wins on-demand in AWS here.
	j := goodJob()
	j.Models = []string{"H100", "A100"}
	rs, err := Plan(j, testMarket(), Options{Runs: 500})
	if err != nil {
		t.Fatal(err)
	}
	od, _ := byStrategy(rs, StrategyOnDemand)
	if od.InstanceType != "p4d.24xlarge" || od.OnTimePct != 0 || math.Abs(od.ExpectedCostUSD-2*21.96*(0.2+48/0.45)) > 1e-6 {
		t.Errorf("on-demand over H100 and A100: %+v", od)
	}
}

// TestPlanNotCheckpointable: a 24 h job that starts over at each
// interruption cannot use these pools (λ ≥ 0.16/h: a run lasts 24.2 h 2 %
// of the time, so an hour of work costs more than on-demand's): the
// safety-net strategy is on-demand, and spot alone, which gets a few
// tries before the deadline, is seldom on time.
func TestPlanNotCheckpointable(t *testing.T) {
	j := goodJob()
	j.Hours, j.Checkpointable, j.Checkpoint = 24, false, 0
	rs, err := Plan(j, testMarket(), Options{Runs: 2000})
	if err != nil {
		t.Fatal(err)
	}
	od, _ := byStrategy(rs, StrategyOnDemand)
	net, _ := byStrategy(rs, StrategySafetyNet)
	one, _ := byStrategy(rs, StrategySpotOne)
	if math.Abs(net.ExpectedCostUSD-od.ExpectedCostUSD) > 1e-6 || net.ExpectedInterruptions != 0 || !strings.Contains(net.Assumptions, "runs on on-demand") ||
		!strings.Contains(net.Assumptions, "not checkpointable") {
		t.Errorf("safety net %+v, on-demand $%v", net, od.ExpectedCostUSD)
	}
	if one.OnTimePct > 30 {
		t.Errorf("spot alone on time %.1f%% for a 24 h job that cannot checkpoint", one.OnTimePct)
	}
}

// TestAssumptionsSayShortIntervals: a checkpoint of 90s and a changeover
// of 30s read as such in the assumptions (they once read "1m3" and "3").
func TestAssumptionsSayShortIntervals(t *testing.T) {
	j := goodJob()
	j.Checkpoint, j.Changeover = 90*time.Second, 30*time.Second
	rs, err := Plan(j, testMarket(), Options{Runs: 200})
	if err != nil {
		t.Fatal(err)
	}
	net, _ := byStrategy(rs, StrategySafetyNet)
	od, _ := byStrategy(rs, StrategyOnDemand)
	if !strings.Contains(net.Assumptions, "checkpoint every 1m30s") || !strings.Contains(od.Assumptions, "30s changeover") {
		t.Errorf("assumptions:\n%s\n%s", net.Assumptions, od.Assumptions)
	}
}

func TestPlanRefusals(t *testing.T) {
	j := goodJob()
	j.Models = []string{"H200"}
	_, err := Plan(j, testMarket(), Options{Runs: 10})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "gpu" || !strings.Contains(fe.Msg, "sells H200") || !strings.Contains(fe.Msg, "H100, A100") {
		t.Errorf("a model not sold: %v", err)
	}
	j = goodJob()
	j.GPUs = 0
	if _, err := Plan(j, testMarket(), Options{}); !errors.As(err, &fe) || fe.Field != "gpus" {
		t.Errorf("zero GPUs: %v", err)
	}
	// A market with no spot price: the deterministic strategies only.
	m := testMarket()
	for i := range m.Pools {
		m.Pools[i].SpotUSDHour = math.NaN()
	}
	rs, err := Plan(goodJob(), m, Options{Runs: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if !slices.Contains([]string{StrategyBlock, StrategyReservation, StrategyOnDemand}, r.Strategy) {
			t.Errorf("%s without a spot price", r.Strategy)
		}
	}
}

// TestMonteCarloMatchesPaidHours checks the simulation against the closed
// form EFF uses: spot alone on one pool with all the time in the world
// pays paidHours(λ, W, d, c) per job, within sampling error and the
// approximation of the last run (a few percent).
func TestMonteCarloMatchesPaidHours(t *testing.T) {
	for _, tc := range []struct {
		lambda float64
		c      time.Duration
	}{{0.3, 15 * time.Minute}, {1.2, 15 * time.Minute}, {0.8, time.Hour}} {
		p := Pool{Key: "k", Provider: "sim", Cloud: domain.CloudAWS, Region: "r", Zone: "z", InstanceType: "t", GPUModel: "H100",
			GPUsPerInstance: 8, SpotUSDHour: 1, OnDemandUSDHour: math.NaN(),
			Risk: Risk{InterruptionsPerHour: tc.lambda, GapMedianHours: 0.5, Availability: 0.7}}
		j := Job{GPUs: 8, Models: []string{"H100"}, Hours: 24, Start: t0, Deadline: t0.Add(2000 * time.Hour),
			Checkpointable: true, Checkpoint: tc.c, Changeover: 12 * time.Minute}
		rs, err := Plan(j, Market{Pools: []Pool{p}}, Options{Runs: 4000})
		if err != nil {
			t.Fatal(err)
		}
		one, _ := byStrategy(rs, StrategySpotOne)
		want := paidHours(tc.lambda, 24, 0.2, tc.c.Hours())
		if one.OnTimePct < 99.9 || math.Abs(one.ExpectedCostUSD-want)/want > 0.03 {
			t.Errorf("λ %v c %s: simulated $%.3f (on time %.1f%%), closed form $%.3f", tc.lambda, tc.c, one.ExpectedCostUSD, one.OnTimePct, want)
		}
	}
}

func TestBlockQueries(t *testing.T) {
	now := t0.Add(-12 * time.Hour)
	qs := BlockQueries(goodJob(), now, nil)
	// 48 h + 12m + 30m → 3 days, and 4; a day for block+spot; and a
	// reservation, which starts when made: from now, over the 12 h wait
	// and the 48 h 12 m of work, 61 hours.
	want := []time.Duration{72 * time.Hour, 96 * time.Hour, 24 * time.Hour, 61 * time.Hour}
	if len(qs) != len(want) {
		t.Fatalf("%d queries: %+v", len(qs), qs)
	}
	for i, q := range qs {
		if q.Duration != want[i] || q.GPU != "H100" || q.GPUs != 16 || !q.StartBefore.Equal(goodJob().Deadline) {
			t.Errorf("query %d: %+v, want %s", i, q, want[i])
		}
	}
	if !qs[0].StartAfter.Equal(now) || !qs[3].StartAfter.Equal(now) {
		t.Errorf("start after: %v (want now, not a day before the start) and %v (a reservation: now)", qs[0].StartAfter, qs[3].StartAfter)
	}
	// An A100 does 0.45 of the work: 106.9 h → 5 and 6 days; its
	// reservation holds the 12 h wait too.
	j := goodJob()
	j.Models = []string{"H100", "A100"}
	j.Deadline = t0.Add(10 * 24 * time.Hour)
	var a100 []time.Duration
	for _, q := range BlockQueries(j, now, nil) {
		if q.GPU == "A100" {
			a100 = append(a100, q.Duration)
		}
	}
	if !slices.Equal(a100, []time.Duration{120 * time.Hour, 144 * time.Hour, 24 * time.Hour, 119 * time.Hour}) {
		t.Errorf("A100 queries %v", a100)
	}
	if awsDays(15) != 21 || awsDays(22) != 28 || awsDays(14) != 14 || awsDays(0) != 1 {
		t.Errorf("AWS steps: %d %d %d", awsDays(15), awsDays(22), awsDays(14))
	}
	if qs := BlockQueries(goodJob(), goodJob().Deadline.Add(time.Hour), nil); qs != nil {
		t.Errorf("queries after the deadline: %+v", qs)
	}
}

// TestResultsNameTheirPools: a result names the pools it runs on (what
// carrying it out launches) and a safety net its on-demand pool, each a
// pool of the market; a block alone names none.
func TestResultsNameTheirPools(t *testing.T) {
	m := testMarket()
	keys := map[string]Pool{}
	for _, p := range m.Pools {
		keys[p.Key] = p
	}
	rs, err := Plan(goodJob(), m, Options{Runs: 500, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		for _, k := range r.Pools {
			if _, ok := keys[k]; !ok {
				t.Errorf("%s names pool %q, not of the market", r.Strategy, k)
			}
		}
		switch r.Strategy {
		case StrategyBlock, StrategyCalendar, StrategyReservation:
			if len(r.Pools) != 0 || r.OnDemandPool != "" {
				t.Errorf("%s names pools %v / %q", r.Strategy, r.Pools, r.OnDemandPool)
			}
		case StrategyOnDemand:
			if len(r.Pools) != 1 || keys[r.Pools[0]].InstanceType != r.InstanceType || keys[r.Pools[0]].Region != r.Regions[0] {
				t.Errorf("on-demand names %v for %s in %v", r.Pools, r.InstanceType, r.Regions)
			}
		case StrategySpotOne:
			if len(r.Pools) != 1 || r.OnDemandPool != "" {
				t.Errorf("spot in one pool names %v / %q", r.Pools, r.OnDemandPool)
			}
		case StrategySpotMulti:
			if len(r.Pools) < 2 || r.OnDemandPool != "" {
				t.Errorf("multi-pool names %v / %q", r.Pools, r.OnDemandPool)
			}
		case StrategySafetyNet, StrategyUniformProgress, StrategyBlockSpot:
			if len(r.Pools) == 0 || keys[r.OnDemandPool].Key == "" || math.IsNaN(keys[r.OnDemandPool].OnDemandUSDHour) {
				t.Errorf("%s names %v, on-demand %q", r.Strategy, r.Pools, r.OnDemandPool)
			}
		}
	}
}

// parallel stops handing out runs once its context is done, and
// PlanContext and BacktestContext return the context's error.
func TestPlanStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var done atomic.Int64
	parallel(ctx, 1_000_000, 2, func() func(int) {
		return func(int) {
			if done.Add(1) == 10 {
				cancel()
			}
		}
	})
	if n := done.Load(); n >= 1_000_000 || n > 4*250 {
		t.Errorf("%d runs after cancelling at the 10th; want at most the chunks under way", n)
	}
	job := Job{GPUs: 8, Models: []string{"H100"}, Hours: 24, Start: t0, Deadline: t0.Add(72 * time.Hour), Changeover: 12 * time.Minute}
	m := Market{Pools: []Pool{{Key: "a", Cloud: "aws", Region: "r", Zone: "z", InstanceType: "p5", GPUModel: "H100", GPUsPerInstance: 8,
		SpotUSDHour: 30, OnDemandUSDHour: 98, Risk: Risk{InterruptionsPerHour: 0.5, GapMedianHours: 0.5, Availability: 0.6}}}}
	if _, err := PlanContext(ctx, job, m, Options{Runs: 1_000_000}); !errors.Is(err, context.Canceled) {
		t.Errorf("PlanContext: %v, want context.Canceled", err)
	}
	tr := Trace{Name: "a", GapSeconds: 300, Data: slices.Repeat([]int{1, 0}, 2000)}
	if _, err := BacktestContext(ctx, []Trace{tr}, BacktestConfig{JobHours: 24, DeadlineHours: 36, SpotUSDHour: 1, OnDemandUSDHour: 3, Starts: 10}); !errors.Is(err, context.Canceled) {
		t.Errorf("BacktestContext: %v, want context.Canceled", err)
	}
}

// TestPlanNamesRiskSources: the spot rows say where each pool's risk
// came from, pools of one source named together, a fitted pool by its
// history.
func TestPlanNamesRiskSources(t *testing.T) {
	m := testMarket()
	// us-west-2b's risk fitted on a week of a trace.
	ticks := 7 * 24 * 12
	tr := Trace{Name: "us-west-2b.json", GapSeconds: 300, Data: make([]int, ticks)}
	for i := range tr.Data {
		tr.Data[i] = []int{2, 2, 2, 0}[i/36%4]
	}
	for i := range m.Pools {
		if m.Pools[i].Zone == "us-west-2b" {
			m.Pools[i].Risk = FitRisk(tr.timeline(2), 0, tr.Hours(), m.Pools[i].Risk, "us-west-2b.json")
		}
	}
	job := Job{GPUs: 16, Models: []string{"H100"}, Hours: 24, Start: t0, Deadline: t0.Add(48 * time.Hour),
		Checkpointable: true, Checkpoint: 15 * time.Minute, Changeover: 12 * time.Minute}
	rs, err := Plan(job, m, Options{Runs: 500})
	if err != nil {
		t.Fatal(err)
	}
	net, ok := byStrategy(rs, StrategySafetyNet)
	if !ok {
		t.Fatal("no safety net row")
	}
	for _, want := range []string{"risk of us-east-1a, us-east-1b from H100 prior × test bucket >20%",
		"risk of us-east-2a from H100 prior × test bucket 10-15%", "risk of us-west-2b from fitted on 168 h of us-west-2b.json"} {
		if !strings.Contains(net.Assumptions, want) {
			t.Errorf("assumptions %q do not say %q", net.Assumptions, want)
		}
	}
}

// TestSpotOnePoolIsTheBestOfEachCloud: one spot-one-pool row per cloud,
// on that cloud's pool cheapest per hour of work.
func TestSpotOnePoolIsTheBestOfEachCloud(t *testing.T) {
	m := testMarket()
	p := domain.Pool{Provider: "sim", Cloud: domain.CloudAzure, Region: "eastus", Zone: "1", InstanceType: "Standard_ND96isr_H100_v5",
		GPU: domain.GPUSpec{Model: "H100", Count: 8}, OnDemandUSDHour: domain.Float(98.32)}
	p.Interruption, _ = domain.NewInterruption("10-15%", "test", time.Time{})
	m.Pools = append(m.Pools, PoolOf(p, 30, nil))
	rs, err := Plan(goodJob(), m, Options{Runs: 200})
	if err != nil {
		t.Fatal(err)
	}
	var clouds []string
	for _, r := range rs {
		if r.Strategy == StrategySpotOne {
			clouds = append(clouds, r.Cloud)
			if len(r.Pools) != 1 || r.Cloud == "aws" && r.Pools[0] != "sim/us-west-2/us-west-2b/p5.48xlarge" {
				t.Errorf("%s row on %v, want the calm us-west-2b pool", r.Cloud, r.Pools)
			}
		}
	}
	slices.Sort(clouds)
	if !slices.Equal(clouds, []string{"aws", "azure"}) {
		t.Errorf("spot-one-pool rows of %v, want one per cloud", clouds)
	}
}
