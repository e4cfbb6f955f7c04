package cmd

import (
	"context"
	"math"
	"path/filepath"
	"strings"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
)

// runPlanOnTraces plans the job on a market made of trace files, each a
// pool of one-GPU instances at the given prices, its risk fitted on the
// whole trace: a claim the backtest can check by hand.
func (a *runner) runPlanOnTraces(ctx context.Context, job planner.Job, f planFlags) error {
	e := a.env
	for _, v := range []struct {
		name string
		val  float64
	}{{"spot-usd-hour", f.spotUSD}, {"on-demand-usd-hour", f.odUSD}} {
		if math.IsNaN(v.val) || math.IsInf(v.val, 0) || v.val <= 0 {
			return usagef("--%s %v: want a price above 0 per instance-hour", v.name, v.val)
		}
	}
	traces, err := app.ReadTraces(f.traces)
	if err != nil {
		return err
	}
	var m planner.Market
	for _, t := range traces {
		t.Name = strings.TrimSuffix(filepath.Base(t.Name), ".json")
		m.Pools = append(m.Pools, planner.TracePool(t, job.Models[0], job.GPUs, f.spotUSD, f.odUSD, e.PlanPriors()))
	}
	results, err := planner.PlanContext(ctx, job, m, planner.Options{Runs: f.runs, Seed: 1, Speeds: e.PlanSpeeds()})
	if err != nil {
		return app.PlanUsage(err)
	}
	planner.Rank(results, f.onTime)
	rows := make([]present.PlanRow, len(results))
	for i, r := range results {
		rows[i] = present.NewPlanRow(r, e.Config.Budget.MaxBookingUSD, e.Config.Budget.MaxDailyUSD)
	}
	if f.output != formatTable {
		return writeRows(e.out, f.output, rows)
	}
	return e.planTable(rows, results, f.onTime)
}
