package planner

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// TestOwnFleetsMoveTheRateByHours: n interruptions over h hours of the
// user's own fleets move a pool's rate from the prior's toward n/h by
// h/(h+H0), H0 being the prior's hours (plus a fit's history): a few hours
// barely move it, many hours nearly reach n/h.
func TestOwnFleetsMoveTheRateByHours(t *testing.T) {
	prior := RiskOf(pool("H100", 8, "10-15%"), nil)
	l0, seen := prior.InterruptionsPerHour, 0.1
	prev := math.Inf(1)
	for _, h := range []float64{2, 24, 240, 2400} {
		r := prior.WithOwn(h, int(math.Round(seen*h)))
		n := math.Round(seen * h)
		want := l0 + (n/h-l0)*h/(h+priorHours)
		if math.Abs(r.InterruptionsPerHour-want) > 1e-12 {
			t.Errorf("%g h, %g interruptions: rate %.4f, want %.4f (%.2f toward %.2f)", h, n, r.InterruptionsPerHour, want, l0, n/h)
		}
		if dist := math.Abs(r.InterruptionsPerHour - n/h); dist >= prev {
			t.Errorf("%g h: rate %.4f no nearer %.2f than with fewer hours", h, r.InterruptionsPerHour, n/h)
		} else {
			prev = dist
		}
		// The mean wait for capacity is kept; a calmer pool is up more.
		if g := r.MeanGapHours(); math.Abs(g-prior.MeanGapHours()) > 1e-9 {
			t.Errorf("%g h: mean gap %.4f, want the prior's %.4f", h, g, prior.MeanGapHours())
		}
		if r.Availability <= prior.Availability {
			t.Errorf("%g h: availability %.3f not above the prior's %.3f at a lower rate", h, r.Availability, prior.Availability)
		}
	}
	if r := prior.WithOwn(0, 0); !reflect.DeepEqual(r, prior) {
		t.Errorf("no hours observed changed the risk: %+v", r)
	}
}

// TestOwnFleetsWeighAgainstAFit: a risk fitted on a week counts that week
// against what the user saw, and draws runs whose mean is the new rate.
func TestOwnFleetsWeighAgainstAFit(t *testing.T) {
	tr := Trace{Name: "w.json", GapSeconds: 300, Data: make([]int, 7*24*12)}
	for i := range tr.Data {
		tr.Data[i] = []int{2, 2, 2, 0}[i/36%4]
	}
	fit := FitRisk(tr.timeline(1), 0, tr.Hours(), RiskOf(pool("H100", 8, "10-15%"), nil), "w.json")
	r := fit.WithOwn(48, 12)
	h0 := priorHours + 168
	want := (fit.InterruptionsPerHour*h0 + 12) / (h0 + 48)
	if math.Abs(r.InterruptionsPerHour-want) > 1e-9 {
		t.Errorf("rate %.4f, want %.4f (fit %.4f over %g h, 12 in 48 h)", r.InterruptionsPerHour, want, fit.InterruptionsPerHour, h0)
	}
	if m := meanOf(r.Spells.Run); math.Abs(1/m-want) > 1e-9 {
		t.Errorf("drawn runs last %.3f h on average, want 1/%.4f", m, want)
	}
	if &r.Spells.Run[0] == &fit.Spells.Run[0] {
		t.Error("the fit's runs were changed in place")
	}
}

// TestPlanLearnsFromOwnFleets: after the user's fleets were interrupted
// often in the calm pool the planner favours, the next plan expects more
// interruptions and names the source; with nothing seen nothing changes.
func TestPlanLearnsFromOwnFleets(t *testing.T) {
	m := testMarket()
	job := Job{GPUs: 16, Models: []string{"H100"}, Hours: 24, Start: t0, Deadline: t0.Add(48 * time.Hour),
		Checkpointable: true, Checkpoint: 15 * time.Minute, Changeover: 12 * time.Minute}
	base, err := Plan(job, m, Options{Runs: 2000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	same := m
	same.Pools = WithOwn(m.Pools, Own{"sim/elsewhere/x/y": {Hours: 10, Interruptions: 3}})
	again, err := Plan(job, same, Options{Runs: 2000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(base, again) {
		t.Error("own data of no pool in the market changed the plan")
	}
	var key string
	for _, p := range m.Pools {
		if p.Zone == "us-west-2b" {
			key = p.Key
		}
	}
	// 37 instance-hours, 30 instances taken back.
	own := m
	own.Pools = WithOwn(m.Pools, Own{key: {Hours: 37, Interruptions: 30}})
	rs, err := Plan(job, own, Options{Runs: 2000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := byStrategy(base, StrategySpotOne)
	r, ok := byStrategy(rs, StrategySpotOne)
	if !ok {
		t.Fatal("no spot-one-pool row")
	}
	if !strings.Contains(r.Assumptions, "(37 h of your own fleets (30 interruptions) with H100 prior") {
		t.Errorf("assumptions %q do not name the own fleets", r.Assumptions)
	}
	if net, _ := byStrategy(rs, StrategySafetyNet); !strings.Contains(net.Assumptions, "risk of us-west-2b from 37 h of your own fleets") {
		t.Errorf("safety net's assumptions %q do not name the own fleets", net.Assumptions)
	}
	if strings.Contains(b.Assumptions, "your own fleets") {
		t.Errorf("a plan without own data says %q", b.Assumptions)
	}
	if !(r.ExpectedInterruptions > 2*b.ExpectedInterruptions) {
		t.Errorf("expected interruptions %.2f after 30 in 37 h, %.2f before: the plan did not learn", r.ExpectedInterruptions, b.ExpectedInterruptions)
	}
}

// TestOwnFromCountsSpotHoursInTheWindow: only spot hours within OwnWindow
// count (a run that began before it, from its start; one still running,
// to now); an interruption counts once it has happened; a report whose
// interruptions are unknown, or an instance of no known zone, teaches nothing.
func TestOwnFromCountsSpotHoursInTheWindow(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	since := now.Add(-OwnWindow)
	at := func(h float64) time.Time { return now.Add(time.Duration(h * float64(time.Hour))) }
	fleet := domain.FleetUsage{Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge",
		Report: domain.UsageReport{Instances: []domain.InstanceUsage{
			{Spot: true, Start: since.Add(-10 * time.Hour), End: since.Add(5 * time.Hour), Interrupted: true}, // 5 h in the window
			{Spot: true, Start: at(-3), Interrupted: true},                                                    // runs: 3 h, no interruption yet
			{Spot: true, Start: at(-30), End: at(-28), Zone: "us-east-1b"},                                    // another pool
			{Spot: false, Start: at(-50), End: at(-40)},                                                       // on-demand
			{Spot: true, Start: since.Add(-20 * time.Hour), End: since.Add(-10 * time.Hour)},                  // before the window
		}}}
	unknown := fleet
	unknown.Report = domain.UsageReport{InterruptionsUnknown: true, Instances: fleet.Report.Instances}
	got := OwnFrom([]domain.FleetUsage{fleet, unknown}, now)
	want := Own{"aws/us-east-1/us-east-1a/p5.48xlarge": {Hours: 8, Interruptions: 1},
		"aws/us-east-1/us-east-1b/p5.48xlarge": {Hours: 2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("OwnFrom = %+v, want %+v", got, want)
	}
}
