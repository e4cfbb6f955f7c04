package cmd

import (
	"context"
	"errors"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
)

// backtestRow is one policy of `gpumarket backtest`.
type backtestRow struct {
	Policy               string   `json:"policy"`
	Runs                 int      `json:"runs"`
	DeadlinesMetPct      *float64 `json:"deadlines_met_pct" table:"%.1f"`
	MeanCostUSD          *float64 `json:"mean_cost_usd" table:"%.2f"`
	SavingsVsOnDemandPct *float64 `json:"savings_vs_on_demand_pct" table:"%.1f"`
	P95CostUSD           *float64 `json:"p95_cost_usd" table:"%.2f"`
}

// backtestPredictRow is a policy of `backtest --predict`: what the Monte
// Carlo claimed at each start (means over the runs) beside what was
// realized, and the share of runs above their claimed p95.
type backtestPredictRow struct {
	backtestRow
	PredictedCostUSD    *float64 `json:"predicted_cost_usd" table:"%.2f"`
	PredictedP95CostUSD *float64 `json:"predicted_p95_cost_usd" table:"%.2f"`
	PredictedOnTimePct  *float64 `json:"predicted_on_time_pct" table:"%.1f"`
	OverP95Pct          *float64 `json:"over_p95_pct" table:"%.1f"`
}

// backtestFlags are backtest's own flags as typed.
type backtestFlags struct {
	traces                 []string
	jobHours, deadlineHrs  float64
	spotUSD, odUSD         float64
	changeover, checkpoint time.Duration
	starts                 string
	instances              int
	sim, predict           bool
	simType, simOut        string
	simDays                int
	output                 string
}

func (cl *cli) backtestCmd() *cobra.Command {
	var f backtestFlags
	c := &cobra.Command{
		Use:   "backtest [--trace FILE...] [FILE...]",
		Short: "Replay spot availability traces and compare policies: on-demand, greedy, uniform-progress and the planner's",
		Long: `backtest replays a job on recorded spot availability: each trace file is one pool
(an instance type in a zone) in the format of the public spot-traces dataset
(skypilot-org/spot-traces, used by Can't Be Late):

  {"metadata": {"gap_seconds": N}, "data": [n0, n1, ...]}

where data[i] is how many instances the pool had at tick i. Several files are
pools a policy may choose among; they are taken to start at the same time.

From --starts start times drawn with --seed over the traces, it runs the job
(--job-hours of work, done within --deadline-hours, a --changeover at each start
or switch; --instances at once, progressing only while it holds them all: the
planner may hold part of them on spot in a pool that has them and the rest on
on-demand) with each policy and prints one row per policy:

  on-demand         on-demand from the start
  greedy            Can't Be Late's Greedy: spot when there, on-demand to the end
                    once the deadline requires it (each pool on its own)
  uniform-progress  Uniform Progress (NSDI'24) as published (each pool on its own)
  planner           gpumarket's policy, free to use every pool

greedy and uniform-progress run on each pool alone and are averaged over the
pools, as published. savings_vs_on_demand_pct is against on-demand's cost; with
spot always there and no changeover it would reach 1 − spot/on-demand. The
prices default to the published comparison's p3.2xlarge ($0.918 spot, $3.06
on-demand per instance-hour). An interruption keeps the progress made, as in the
published simulator, unless --checkpoint sets an interval.

--sim writes traces of the simulated market (every pool of --instance-type in
the --region filter, --sim-days days at 5-minute ticks) to --out and replays
them; it says where it wrote them.`,
		Example: `  gpumarket backtest --trace traces/*.json --job-hours 48 --deadline-hours 60 -o json
  gpumarket backtest --trace us-west-2a_v100_1.json --instances 16 --starts 300 --seed 1
  gpumarket backtest --sim --instance-type p3.2xlarge --deadline-hours 80`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			files := append(append([]string(nil), f.traces...), args...)
			if err := f.check(cmd, files); err != nil {
				return err
			}
			return cl.withApp(cmd, func(a *runner) error { return a.runBacktest(cmd, files, f) })
		},
	}
	fl := c.Flags()
	fl.StringArrayVar(&f.traces, "trace", nil, "a trace file, one pool (repeat it, or list more files after it)")
	fl.Float64Var(&f.jobHours, "job-hours", 48, "hours of work")
	fl.Float64Var(&f.deadlineHrs, "deadline-hours", 60, "hours from the start to the deadline")
	fl.Float64Var(&f.spotUSD, "spot-usd-hour", 0.918, "spot price per instance-hour")
	fl.Float64Var(&f.odUSD, "on-demand-usd-hour", 3.06, "on-demand price per instance-hour")
	fl.DurationVar(&f.changeover, "changeover", 12*time.Minute, "wall time a start or switch costs")
	fl.DurationVar(&f.checkpoint, "checkpoint", 0, "time between checkpoints; 0 keeps all progress at an interruption (the published model)")
	fl.StringVar(&f.starts, "starts", "300", "start times drawn over the traces, or all (every start slot)")
	fl.IntVar(&f.instances, "instances", 1, "instances the job holds at once; it progresses only while it holds them all (a trace's data are counts)")
	fl.BoolVar(&f.predict, "predict", false, "beside each policy's realized cost, what the Monte Carlo predicted at each start from the traces before it")
	fl.BoolVar(&f.sim, "sim", false, "write traces of the simulated market and replay them")
	fl.StringVar(&f.simType, "instance-type", "p3.2xlarge", "with --sim: the instance type whose pools to record")
	fl.IntVar(&f.simDays, "sim-days", 45, "with --sim: days to record, ending now")
	fl.StringVar(&f.simOut, "out", "", "with --sim: the directory to write the traces to (default: a new one under the data dir)")
	addOutputFlag(c, &f.output)
	return c
}

func (a *runner) runBacktest(cmd *cobra.Command, files []string, f backtestFlags) error {
	seed := uint64(1)
	if cmd.Flags().Changed(flagSeed) {
		s, _ := cmd.Flags().GetInt64(flagSeed)
		if s < 1 {
			return usagef("--seed %d: want a whole number ≥ 1", s)
		}
		seed = uint64(s)
	}
	var traces []planner.Trace
	var err error
	if f.sim {
		traces, err = a.SimTraces(f.simType, f.simDays, f.simOut)
	} else {
		traces, err = app.ReadTraces(files)
	}
	if err != nil {
		return err
	}
	starts, all := 0, f.starts == "all"
	if !all {
		n, err := strconv.Atoi(f.starts)
		if err != nil || n < 1 || n > 1_000_000 {
			return usagef("--starts %q: want a whole number of start times from 1 to 1000000, or all", f.starts)
		}
		starts = n
	}
	cfg := planner.BacktestConfig{AllStarts: all, JobHours: f.jobHours, DeadlineHours: f.deadlineHrs, SpotUSDHour: f.spotUSD,
		OnDemandUSDHour: f.odUSD, Changeover: f.changeover, Checkpoint: f.checkpoint, Starts: starts, Seed: seed, Predict: f.predict,
		Instances: f.instances}
	rows, err := planner.BacktestContext(cmd.Context(), traces, cfg)
	if errors.Is(err, context.Canceled) {
		return errors.New("backtest: interrupted")
	}
	if err != nil {
		return app.PlanUsage(err)
	}
	if f.sim && !f.predict {
		a.banner(f.output)
	}
	return writeBacktest(a.out, f.output, f.predict, rows)
}

// check refuses flags that cannot go together or values out of range.
func (f *backtestFlags) check(cmd *cobra.Command, files []string) error {
	if !f.sim {
		for _, name := range []string{"out", "instance-type", "sim-days"} {
			if cmd.Flags().Changed(name) {
				return usagef("--%s is for --sim (traces of the simulated market); with --trace files, leave it out", name)
			}
		}
	}
	switch {
	case len(files) == 0 && !f.sim:
		return usagef("backtest needs traces: --trace FILE... (each file one pool: %s), or --sim to write and replay traces of the simulated market", planner.TraceForm)
	case len(files) > 0 && f.sim:
		return usagef("--sim writes its own traces: give --trace files or --sim, not both")
	case f.simDays < 1 || f.simDays > 365:
		return usagef("--sim-days %d: want a whole number of days from 1 to 365", f.simDays)
	case f.instances < 1:
		return usagef("--instances %d: want a whole number of instances ≥ 1", f.instances)
	}
	for _, v := range []struct {
		name string
		val  float64
	}{{"job-hours", f.jobHours}, {"deadline-hours", f.deadlineHrs}, {"spot-usd-hour", f.spotUSD}, {"on-demand-usd-hour", f.odUSD}} {
		if math.IsNaN(v.val) || math.IsInf(v.val, 0) {
			return usagef("--%s %v: want a number", v.name, v.val)
		}
	}
	return nil
}

// writeBacktest writes one row per policy, with the prediction beside the
// realized figures when there is one.
func writeBacktest(w io.Writer, format string, predict bool, rows []planner.BacktestRow) error {
	out := make([]backtestRow, len(rows))
	for i, r := range rows {
		out[i] = backtestRow{Policy: r.Policy, Runs: r.Runs, DeadlinesMetPct: present.Round(r.DeadlinesMetPct, 2),
			MeanCostUSD: present.Round(r.MeanCostUSD, 2), SavingsVsOnDemandPct: present.Round(r.SavingsVsOnDemandPct, 2), P95CostUSD: present.Round(r.P95CostUSD, 2)}
	}
	if predict {
		pred := make([]backtestPredictRow, len(rows))
		for i, r := range rows {
			pred[i] = backtestPredictRow{backtestRow: out[i], PredictedCostUSD: present.Round(r.PredictedCostUSD, 2), PredictedP95CostUSD: present.Round(r.PredictedP95CostUSD, 2),
				PredictedOnTimePct: present.Round(r.PredictedOnTimePct, 2), OverP95Pct: present.Round(r.OverP95Pct, 2)}
		}
		return writeRows(w, format, pred)
	}
	return writeRows(w, format, out)
}
