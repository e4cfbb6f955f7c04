package cmd

import (
	"context"
	"math"

	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/watch"
)

// watchPlanner prices a plan rule's job as `gpumarket plan` does: the
// market of the hub's snapshot, the offerings the job could book (through
// the booking service, so the alert's offering is bookable by id), the
// planner's Monte Carlo, and the cheapest strategy on time often enough.
type watchPlanner struct {
	a   *runner
	svc *ledger.Service
}

// watchPlanRuns is the Monte Carlo runs of a plan rule's evaluation: a
// rule asks again every few minutes, so a coarser answer than `plan`'s
// 10,000 runs is enough to tell a crossing (and costs a tenth of the CPU).
const watchPlanRuns = 2000

// BestPlan implements watch.Planner.
func (p watchPlanner) BestPlan(ctx context.Context, job watch.PlanJob, snap *feed.Snapshot) (watch.PlanQuote, error) {
	a := p.a
	pj := planner.Job{GPUs: job.GPUs, Models: job.Models, Hours: job.Hours, Start: job.Start, Deadline: job.Deadline,
		Checkpoint: job.Checkpoint, Checkpointable: job.Checkpoint > 0, Changeover: a.Config.Plan.Changeover.D()}
	m := planner.Market{Pools: planner.WithOwn(a.planPools(snap, pj), a.ownFleets(ctx))}
	offs, err := a.offeringsFor(ctx, p.svc, pj, func(msg string) { a.Log.Warn("watch: plan rule: " + msg) })
	if err != nil {
		return watch.PlanQuote{}, err
	}
	m.Offerings = offs
	results, err := planner.Plan(pj, m, planner.Options{Runs: watchPlanRuns, Seed: 1, Speeds: a.planSpeeds()})
	if err != nil {
		return watch.PlanQuote{}, err
	}
	planner.Rank(results, job.OnTimePct)
	for _, r := range results {
		if r.OnTimePct < job.OnTimePct || math.IsNaN(r.ExpectedCostUSD) {
			continue
		}
		return watch.PlanQuote{Found: true, Strategy: r.Strategy, Provider: r.Provider, InstanceType: r.InstanceType,
			Regions: r.Regions, ExpectedUSD: r.ExpectedCostUSD, USDPerUsefulGPUHour: r.USDPerUsefulGPUHour,
			OnTimePct: r.OnTimePct, OfferingID: r.OfferingID, Simulated: a.table.Describe(r.Provider).Simulated}, nil
	}
	return watch.PlanQuote{}, nil
}
