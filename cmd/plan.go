package cmd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
)

// planFlags are plan's own flags as typed.
type planFlags struct {
	gpus                   int
	hours, onTime          float64
	start, deadline        string
	checkpoint, changeover time.Duration
	noCheckpoint           bool
	runs                   int
	output                 string
	timeout                time.Duration
	// A market of traces instead of the sources (planMarket).
	traces         []string
	spotUSD, odUSD float64
}

func (cl *cli) planCmd() *cobra.Command {
	var f planFlags
	// Examples are dated from today: an example in the past is refused.
	now := time.Now()
	ex, exDay := domain.WhenExample(now), now.AddDate(0, 0, 2).Format("2006-01-02")
	exDeadline := now.AddDate(0, 0, 5).Format("2006-01-02") + " 09:00"
	c := &cobra.Command{
		Use:   "plan",
		Short: "Ways to get G GPUs for W hours done by a deadline, each with its expected and p95 cost and its chance of being on time",
		Long: `plan evaluates every way to carry out a job — --gpus GPUs of the --gpu models
(the first is what --hours is measured on; others run at their relative speed,
config plan.speed) for --hours hours of work, starting no earlier than --start
and done by --deadline — on the market the sources show:

  capacity-block            an AWS capacity block that holds the job (paid in full,
                            however long; starts 11:30 UTC)
  gcp-calendar              a Google calendar-mode reservation that holds the job
                            (whole days, paid for the window)
  training-plan             a SageMaker training plan whose segments, in order,
                            hold all the work (a changeover in each)
  reservation               an Azure capacity reservation (from purchase, billed
                            hourly until gpumarket releases it)
  on-demand                 the cheapest on-demand per hour of work, per cloud
  spot-one-pool             spot in the best pool of each cloud, nothing else
  spot-multi-pool           spot over several pools and regions, moving on after
                            an interruption
  spot+od-uniform-progress  Uniform Progress (NSDI'24) as published
  spot+od-planner           gpumarket's policy: spot over many pools with an
                            on-demand safety net that keeps the deadline
  block+spot                a block for part of the work, spot for the rest

Spot strategies are evaluated by Monte Carlo (--runs draws, a fixed seed) over
each pool's risk: interruptions per hour and hours to get capacity back (the
simulated market's own process; else the GPU class prior scaled by the AWS
interruption bucket or Azure eviction rate, config plan.priors). Work left at
the deadline by spot alone is finished on on-demand in its cost.

Rows on time at least --on-time percent of the runs come first, cheapest
expected first; the rest follow, most often on time first. offering_id is
bookable with ` + "`gpumarket book`" + ` (the search is kept for an hour). END is the
median finish of every run, late ones included (end_p95 in JSON: the finish
95 % of runs reach by); a row whose expected cost is over budget.max_booking_usd
or budget.max_daily_usd says so (CAP; over_cap in JSON). Times as the Blocks form
reads them: "` + ex + `" (local), tomorrow 09:00, Thu 14:00, ` + exDay + ` (UTC), +1d,
RFC 3339; a start or deadline already passed is refused, and so is a deadline the
changeover leaves too short for the work.`,
		Example: `  gpumarket plan --gpus 16 --gpu H100 --hours 48 --start "` + ex + `" --deadline "` + exDeadline + `"
  gpumarket plan --gpus 8 --gpu H100,H200 --hours 24 --start +1d --deadline +3d --checkpoint 30m -o json
  gpumarket plan --gpus 16 --gpu H100 --hours 8 --start +1d --deadline +2d --no-checkpoint   # a workshop`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.onTime < 0 || f.onTime > 100 || math.IsNaN(f.onTime) {
				return usagef("--on-time %v: want a percentage from 0 to 100", f.onTime)
			}
			if err := f.check(cmd); err != nil {
				return err
			}
			err := cl.withApp(cmd, func(a *runner) error { return a.runPlan(cmd, f) })
			if err != nil && errors.Is(cmd.Context().Err(), context.Canceled) {
				// SIGINT or SIGTERM: whatever stage it stopped at.
				return errors.New("plan: interrupted")
			}
			return err
		},
	}
	fl := c.Flags()
	fl.StringArrayVar(&f.traces, "trace", nil, "plan on a market of traces instead: each file one pool of one-GPU instances (the backtest's format)")
	fl.Float64Var(&f.spotUSD, "spot-usd-hour", 0.918, "with --trace: spot price per instance-hour")
	fl.Float64Var(&f.odUSD, "on-demand-usd-hour", 3.06, "with --trace: on-demand price per instance-hour")
	fl.Float64Var(&f.onTime, "on-time", 95, "rank first the strategies on time at least this percent of the runs")
	f.addFlags(c, "Monte Carlo runs per strategy", "how long to wait for the sources and the offering searches")
	return c
}

// addFlags adds the job's terms and the runs, -o and --timeout: the flags
// plan and job start share.
func (f *planFlags) addFlags(c *cobra.Command, runs, timeout string) {
	fl := c.Flags()
	fl.IntVar(&f.gpus, "gpus", 0, "GPUs the job needs at once (default: config plan.gpus, else 8)")
	fl.Float64Var(&f.hours, "hours", 0, "hours of work, on the first --gpu model (default: config plan.hours, else 24)")
	fl.StringVar(&f.start, "start", "", "earliest start: "+domain.WhenForm+" (default now)")
	fl.StringVar(&f.deadline, "deadline", "", "when the work must be done, same forms (required)")
	fl.DurationVar(&f.checkpoint, "checkpoint", 0, "time between checkpoints; 0 keeps progress at an interruption (default: config plan.checkpoint, else 15m)")
	fl.BoolVar(&f.noCheckpoint, "no-checkpoint", false, "the job cannot checkpoint: an interruption starts it over (a workshop, a load test)")
	fl.DurationVar(&f.changeover, "changeover", 0, "wall time a start or switch costs: provisioning, image, restore (default: config plan.changeover, else 12m)")
	fl.IntVar(&f.runs, "runs", 10000, runs)
	addOutputFlag(c, &f.output)
	fl.DurationVar(&f.timeout, "timeout", defaultTimeout, timeout)
}

// check refuses runs out of range and a checkpoint both set and refused.
func (f *planFlags) check(cmd *cobra.Command) error {
	if f.runs < 1 || f.runs > 1_000_000 {
		return usagef("--runs %d: want a whole number of Monte Carlo runs from 1 to 1000000", f.runs)
	}
	if cmd.Flags().Changed("checkpoint") && f.noCheckpoint {
		return usagef("--checkpoint and --no-checkpoint together: want one of them")
	}
	return nil
}

// planJob reads the job from the flags over config plan.*; a bad value is
// a usage error naming its flag.
func (e *env) planJob(cmd *cobra.Command, f planFlags, now time.Time) (planner.Job, error) {
	changed := cmd.Flags().Changed
	p := e.Config.Plan
	job := planner.Job{GPUs: p.GPUs, Hours: p.Hours, Models: e.Query.GPUs, Changeover: p.Changeover.D(),
		Checkpoint: p.Checkpoint.D(), Checkpointable: p.Checkpoint.D() > 0}
	if changed("gpus") {
		job.GPUs = f.gpus
	}
	if changed("hours") {
		job.Hours = f.hours
	}
	if changed("changeover") {
		job.Changeover = f.changeover
	}
	if changed("checkpoint") {
		job.Checkpoint, job.Checkpointable = f.checkpoint, true
	}
	if f.noCheckpoint {
		job.Checkpoint, job.Checkpointable = 0, false
	}
	if len(job.Models) == 0 {
		return job, usagef("--gpu is required: the GPU models the job can use, the first being what --hours is measured on (such as H100 or H100,H200; one of %s)",
			strings.Join(domain.GPUModels, ", "))
	}
	job.Start = now.Truncate(time.Minute).Add(time.Minute)
	if f.start != "" {
		t, err := domain.ParseWhen(strings.TrimSpace(f.start), now)
		if err != nil {
			return job, usagef("--start %v", err)
		}
		job.Start = t
	}
	if f.deadline == "" {
		return job, usagef("--deadline is required: when the work must be done (%s)", domain.WhenForm)
	}
	d, err := domain.ParseWhen(strings.TrimSpace(f.deadline), now)
	if err != nil {
		return job, usagef("--deadline %v", err)
	}
	job.Deadline = d
	if err := job.Check(now, e.PlanSpeeds()); err != nil {
		return job, app.PlanUsage(err)
	}
	return job, nil
}

func (a *runner) runPlan(cmd *cobra.Command, f planFlags) error {
	e, parent := a.env, cmd.Context()
	job, err := a.planJob(cmd, f, a.Now())
	if err != nil {
		return err
	}
	market, err := a.planMarket(parent, job, f)
	if err != nil {
		return err
	}
	results, err := planner.PlanContext(parent, job, market, planner.Options{Runs: f.runs, Seed: 1, Speeds: e.PlanSpeeds()})
	if err != nil {
		return app.PlanUsage(err)
	}
	planner.Rank(results, f.onTime)
	rows := make([]present.PlanRow, len(results))
	for i, r := range results {
		rows[i] = present.NewPlanRow(r, e.Config.Budget.MaxBookingUSD, e.Config.Budget.MaxDailyUSD)
	}
	if len(f.traces) == 0 {
		a.banner(f.output)
	}
	if f.output != formatTable {
		return writeRows(e.out, f.output, rows)
	}
	return e.planTable(rows, f.onTime)
}

// planMarket is the sources' market with the job's blocks (searched as
// `offerings` does, so a row is bookable by id); with --trace, one-GPU pools
// at the given prices, risk fitted on each trace: a claim a backtest checks.
func (a *runner) planMarket(parent context.Context, job planner.Job, f planFlags) (planner.Market, error) {
	var m planner.Market
	if len(f.traces) > 0 {
		for _, v := range []struct {
			name string
			val  float64
		}{{"spot-usd-hour", f.spotUSD}, {"on-demand-usd-hour", f.odUSD}} {
			if math.IsNaN(v.val) || math.IsInf(v.val, 0) || v.val <= 0 {
				return m, usagef("--%s %v: want a price above 0 per instance-hour", v.name, v.val)
			}
		}
		traces, err := app.ReadTraces(f.traces)
		for _, t := range traces {
			t.Name = strings.TrimSuffix(filepath.Base(t.Name), ".json")
			m.Pools = append(m.Pools, planner.TracePool(t, job.Models[0], job.GPUs, f.spotUSD, f.odUSD, a.PlanPriors()))
		}
		return m, err
	}
	ctx, cancel := context.WithTimeout(parent, f.timeout)
	defer cancel()
	m, svc, err := a.PlanMarket(ctx, job, f.timeout)
	if err != nil {
		return m, err
	}
	m.Offerings, err = a.OfferingsFor(ctx, svc, job, func(msg string) { fmt.Fprintf(a.errOut, "gpumarket: plan: %s\n", msg) })
	return m, err
}

// planTable writes the rows on time at least onTime percent, then the
// rest under a line saying so (as the Plan view does), then each row's
// assumptions, and where a row is over a cap, the key and the file.
func (e *env) planTable(rows []present.PlanRow, onTime float64) error {
	split := len(rows)
	for i, r := range rows {
		if r.OnTimePct < onTime {
			split = i
			break
		}
	}
	if split > 0 {
		if err := writeRows(e.out, formatTable, rows[:split]); err != nil {
			return err
		}
	}
	if split < len(rows) {
		if split > 0 {
			fmt.Fprintln(e.out)
		}
		fmt.Fprintf(e.out, "on time less than %s %% of the runs:\n", present.GPUCount(onTime))
		if err := writeRows(e.out, formatTable, rows[split:]); err != nil {
			return err
		}
	}
	// The assumptions are too long for a column: one line each.
	fmt.Fprintln(e.out, "\nassumptions:")
	over := false
	for i, r := range rows {
		fmt.Fprintf(e.out, "  %d. %s: %s\n", i+1, r.Strategy, r.Assumptions)
		over = over || r.OverCap != ""
	}
	if over {
		path := e.Config.Path
		if path == "" {
			path, _, _ = config.ConfigPath()
		}
		fmt.Fprintf(e.out, "\nA row over a cap is refused when carried out: budget.max_booking_usd $%.2f per purchase, budget.max_daily_usd $%.2f a day; raise them in %s.\n",
			e.Config.Budget.MaxBookingUSD, e.Config.Budget.MaxDailyUSD, path)
	}
	return nil
}
