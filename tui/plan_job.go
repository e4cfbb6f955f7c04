package tui

import (
	"context"
	"fmt"
	"sort"

	"github.com/gpumarket/gpumarket/job"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
)

// jobAction is b on a strategy a driver carries out (spot, or spot with
// the on-demand safety net): the plan becomes a job in the ledger, which
// this process (and any gpumarket that runs) drives. The confirmation
// holds the whole commitment against the caps and says what happens
// while no gpumarket runs.
func (v *planView) jobAction(r planner.Result) *moneyAction {
	pools := make([]planner.Pool, 0, len(v.res.pools))
	for _, p := range v.res.pools {
		pools = append(pools, p)
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].Key < pools[j].Key })
	req := job.Request{Job: v.res.terms.job, Market: planner.Market{Pools: pools}, Strategy: r.Strategy, Actor: v.c.actor,
		Options: planner.Options{Runs: v.runs, Seed: 1, Speeds: v.speeds}}
	svc := v.svc
	sim := ""
	if len(r.Provider) > 0 && svc.Describe(r.Provider).Simulated {
		sim = " (SIMULATED MARKET: nothing real is launched)"
	}
	return &moneyAction{
		title: fmt.Sprintf("Start a job carrying out %s?%s", r.Strategy, sim), verb: "start the job",
		checking: "planning the job again and checking its hold against the budget", sending: "recording the job",
		quote: func(ctx context.Context) quoteAnswer {
			p, err := job.Propose(req)
			if err != nil {
				return quoteAnswer{err: err}
			}
			ans := quoteAnswer{lines: jobLines(req, p, svc)}
			if b := svc.Budget(); b.MaxBookingUSD > 0 && p.HoldUSD > b.MaxBookingUSD {
				ans.err = &ledger.BudgetError{Cap: "max_booking_usd", CapUSD: b.MaxBookingUSD, CostUSD: p.HoldUSD}
				return ans
			}
			ans.send = func(ctx context.Context) outcome {
				j, err := job.Start(ctx, svc, req, p)
				if err != nil {
					return outcome{err: err}
				}
				return outcome{notice: fmt.Sprintf("job %s recorded: this gpumarket carries it out (Ledger view: Jobs)", short(j.ID))}
			}
			return ans
		},
	}
}

// jobLines are the job's terms, the hold first.
func jobLines(req job.Request, p job.Proposal, svc *ledger.Service) []string {
	out := []string{
		fmt.Sprintf("Hold: $%.2f against the budget caps (the plan's p95), counted with every other purchase of the day.", p.HoldUSD),
		fmt.Sprintf("Plan: expected $%.2f, p95 $%.2f, on time in %.0f %% of the runs.", p.Result.ExpectedCostUSD, p.Result.P95CostUSD, p.Result.OnTimePct),
		fmt.Sprintf("%s, moving after an interruption, on-demand in time for the deadline where the strategy has it; everything ends when the work is done.",
			plural(len(p.Live.Lanes), "spot pool")),
		job.Unattended(job.Every),
	}
	return out
}
