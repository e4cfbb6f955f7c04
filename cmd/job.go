package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/job"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
)

// jobRow is a job with DESIGN.md's fields. rows and moves are the job's
// ledger rows and the moves its driver made (JSON only).
type jobRow struct {
	ID              string                      `json:"id"`
	State           string                      `json:"state"`
	Strategy        string                      `json:"strategy"`
	GPUs            int                         `json:"gpus"`
	Hours           float64                     `json:"hours" table:"%g"`
	WorkDoneHours   float64                     `json:"work_done_hours" table:"%.1f"`
	Start           time.Time                   `json:"start" table:"local"`
	Deadline        time.Time                   `json:"deadline" table:"local"`
	FinishedAt      *time.Time                  `json:"finished_at" table:"-"`
	SpentUSD        float64                     `json:"spent_usd" table:"%.2f"`
	PlanExpectedUSD float64                     `json:"plan_expected_usd" table:"%.2f"`
	PlanP95USD      float64                     `json:"plan_p95_usd" table:"-"`
	PlanOnTimePct   float64                     `json:"plan_on_time_pct" table:"-"`
	OnTimePct       *float64                    `json:"on_time_pct" table:"-"`
	MaxUSD          *float64                    `json:"max_usd" table:"-"`
	HoldUSD         float64                     `json:"hold_usd" table:"-"`
	Reason          *string                     `json:"reason" table:"-"`
	Outlook         *string                     `json:"outlook" table:"-"`
	ProgressSource  string                      `json:"progress_source" table:"-"`
	Rows            jsonList[present.LedgerRow] `json:"rows" table:"-"`
	Moves           jsonList[ledger.JobMove]    `json:"moves" table:"-"`
}

// jsonList is a list in one cell: JSON in JSON, its JSON text in CSV.
// Rows are written as writeRows writes them (an unknown cost is null).
type jsonList[T any] []T

func (l jsonList[T]) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := writeRows(&b, formatJSON, []T(l)); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(b.Bytes()), nil
}

func (l jsonList[T]) String() string {
	b, err := l.MarshalJSON()
	if err != nil {
		return err.Error()
	}
	return string(bytes.Join(bytes.Fields(b), []byte(" ")))
}

// jobRowOf is a job with its rows (nil: not read) as of now.
func jobRowOf(j ledger.Job, rows []ledger.Entry, moves []ledger.JobMove, now time.Time) jobRow {
	out := jobRow{ID: j.ID, State: j.State, Strategy: j.Strategy, GPUs: j.Terms.GPUs, Hours: j.Terms.Hours, WorkDoneHours: j.WorkDone,
		Start: j.Terms.Start.UTC(), Deadline: j.Terms.Deadline.UTC(), SpentUSD: j.SpentUSD, PlanExpectedUSD: j.Plan.ExpectedUSD,
		PlanP95USD: j.Plan.P95USD, PlanOnTimePct: j.Plan.OnTimePct, HoldUSD: j.HoldUSD, Reason: present.OptString(j.Reason),
		Outlook: present.OptString(j.Outlook), ProgressSource: "model", Rows: present.LedgerRows(now, rows...), Moves: append(jsonList[ledger.JobMove]{}, moves...)}
	switch {
	case j.Terms.ProgressFile != "":
		out.ProgressSource = "file " + j.Terms.ProgressFile
	case j.Terms.ProgressCommand != "":
		out.ProgressSource = "command " + j.Terms.ProgressCommand
	}
	if j.MaxUSD > 0 {
		out.MaxUSD = domain.Float(j.MaxUSD)
	}
	if pct, ok := job.OnTimePct(j); ok && ledger.JobActive(j.State) {
		out.OnTimePct = &pct
	}
	if !j.FinishedAt.IsZero() {
		t := j.FinishedAt.UTC()
		out.FinishedAt = &t
	}
	if rows != nil {
		out.SpentUSD = ledger.JobSpent(rows, now)
	}
	return out
}

// jobStartFlags are `plan`'s flags and the job's own.
type jobStartFlags struct {
	plan                          planFlags
	strategy                      string
	maxUSD                        float64
	progressFile, progressCommand string
	yes, dryRun                   bool
}

func (cl *cli) jobCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "job",
		Short: "Let gpumarket carry a planned job out: start, list, show, cancel, run",
		Long: `A job is a plan carried out: gpumarket launches, moves and ends the job's
fleets as the strategy it was priced with decides (spot over the plan's pools,
another pool after an interruption, waiting while the slack allows, the
on-demand safety net in time for the deadline), and ends everything when the
work is done. Every launch is a ledger row linked to the job.

Any long-running gpumarket (the TUI, serve, watch, or ` + "`gpumarket job run`" + `)
drives the jobs of its data dir, one driver per job (a lease in the ledger,
taken over when its holder stops). While none runs, nothing is moved.`,
		Args: cobra.NoArgs,
	}
	c.AddCommand(cl.jobStartCmd(), cl.jobListCmd(), cl.jobShowCmd(), cl.jobCancelCmd(), cl.jobRunCmd())
	return c
}

func (cl *cli) jobStartCmd() *cobra.Command {
	var f jobStartFlags
	c := &cobra.Command{
		Use:   "start",
		Short: "Plan a job and start carrying it out with one strategy (asks for a yes first)",
		Long: `job start plans the job as ` + "`gpumarket plan`" + ` does (the same flags), takes the
row of --strategy, shows its expected and p95 cost and on-time share, and holds
the whole commitment — the p95 cost or --max-usd, whichever is larger; without
--max-usd, for a strategy with an on-demand safety net, the whole work on
on-demand alone (within budget.max_booking_usd) if that is more — against
budget.max_booking_usd and budget.max_daily_usd. Asked yes (or with
--yes) it records the job and prints it; a driver launches from its start.

The job fails, ending everything it runs, when what it spent would pass
--max-usd (or, without one, its hold), or when the safety net it is due to
launch would cost more than that to the end. --progress-file or --progress-command
names where the job reports its hours of work done (` + job.ProgressForm + `),
read at each review; without, progress is counted as the plan models it.`,
		Example: `  gpumarket job start --gpus 16 --gpu H100 --hours 48 --deadline +72h --strategy spot+od-planner --dry-run
  gpumarket job start --gpus 16 --gpu H100 --hours 48 --deadline +72h --strategy spot+od-planner --max-usd 4000 --yes
  gpumarket job run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.plan.check(cmd); err != nil {
				return err
			}
			if !slices.Contains(planner.CarriedOut, f.strategy) {
				return usagef("--strategy %q: want one of %s (the strategies `gpumarket plan` prints that a driver carries out)", f.strategy, strings.Join(planner.CarriedOut, ", "))
			}
			if math.IsNaN(f.maxUSD) || math.IsInf(f.maxUSD, 0) || f.maxUSD < 0 {
				return usagef("--max-usd %v: want %s", f.maxUSD, job.MaxUSDForm)
			}
			if f.progressFile != "" && f.progressCommand != "" {
				return usagef("--progress-file and --progress-command together: want one of them")
			}
			return cl.withApp(cmd, func(a *runner) error {
				if err := a.needsConfirmation("job start", f.dryRun, f.yes); err != nil {
					return err
				}
				pj, err := a.planJob(cmd, f.plan, a.Now())
				if err != nil {
					return err
				}
				return a.runJobStart(cmd.Context(), pj, f)
			})
		},
	}
	fl := c.Flags()
	f.plan.addFlags(c, "Monte Carlo runs of the plan", "how long to wait for the sources")
	fl.StringVar(&f.strategy, "strategy", planner.StrategySafetyNet, "the strategy to carry out: "+strings.Join(planner.CarriedOut, ", "))
	fl.Float64Var(&f.maxUSD, "max-usd", 0, "the most the job may spend (0: its work on on-demand alone, or its p95 cost if larger); it is held against the budget caps")
	fl.StringVar(&f.progressFile, "progress-file", "", "a file where the job writes its hours of work done")
	fl.StringVar(&f.progressCommand, "progress-command", "", "a shell command that prints the job's hours of work done")
	fl.BoolVar(&f.yes, "yes", false, "start without asking (required when stdin is not a terminal)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "plan and show what the job would hold; nothing is recorded or launched")
	return c
}

func (a *runner) runJobStart(parent context.Context, pj planner.Job, f jobStartFlags) error {
	e := a.env
	ctx, cancel := context.WithTimeout(parent, f.plan.timeout)
	defer cancel()
	req := job.Request{Job: pj, Strategy: f.strategy, MaxUSD: f.maxUSD, Options: planner.Options{Runs: f.plan.runs, Seed: 1, Speeds: e.PlanSpeeds()},
		ProgressFile: f.progressFile, ProgressCommand: f.progressCommand, Actor: app.LocalActor()}
	p, svc, err := a.ProposeJob(ctx, &req, f.plan.timeout)
	if err != nil {
		return err
	}
	fmt.Fprint(e.errOut, present.JobSummary(req, p, svc.Budget(), a.Simulated()))
	if err := app.HoldWithinCap(svc.Budget(), p.HoldUSD); err != nil {
		return err
	}
	if f.dryRun {
		fmt.Fprintln(e.errOut, "dry run: nothing was recorded or launched")
		return writeRows(e.out, f.plan.output, []jobRow{jobRowOf(proposed(req, p), nil, nil, a.Now())})
	}
	if !f.yes {
		if err := e.confirm("job start", fmt.Sprintf("start the job, holding $%.2f", p.HoldUSD)); err != nil {
			return err
		}
	}
	j, err := job.Start(parent, svc, req, p)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.errOut, "job %s recorded (%s): a running gpumarket carries it out from %s; `gpumarket job run` drives it headless\n",
		j.ID, j.State, present.BothZones(j.Terms.Start))
	return writeRows(e.out, f.plan.output, []jobRow{jobRowOf(j, nil, nil, a.Now())})
}

// proposed is the job a dry run shows: not recorded, no id.
func proposed(req job.Request, p job.Proposal) ledger.Job {
	return ledger.Job{State: "dry-run", Strategy: req.Strategy,
		Terms: ledger.JobTerms{GPUs: req.Job.GPUs, Models: req.Job.Models, Hours: req.Job.Hours, Start: req.Job.Start, Deadline: req.Job.Deadline,
			ProgressFile: req.ProgressFile, ProgressCommand: req.ProgressCommand},
		Plan:   ledger.JobPlan{ExpectedUSD: p.Result.ExpectedCostUSD, P95USD: p.Result.P95CostUSD, OnTimePct: p.Result.OnTimePct},
		MaxUSD: req.MaxUSD, HoldUSD: p.HoldUSD}
}

func (cl *cli) jobListCmd() *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "list",
		Short: "The jobs of the ledger, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cl.withApp(cmd, func(a *runner) error {
				st, err := a.Ledger()
				if err != nil {
					return err
				}
				js, err := st.ListJobs(cmd.Context())
				if err != nil {
					return err
				}
				rows := make([]jobRow, 0, len(js))
				for _, j := range js {
					jr := jobRowOf(j, nil, nil, a.Now())
					if rs, err := st.JobRows(cmd.Context(), j.ID); err == nil {
						jr.SpentUSD = ledger.JobSpent(rs, a.Now())
					}
					rows = append(rows, jr)
				}
				return writeRows(a.out, output, rows)
			})
		},
	}
	addOutputFlag(c, &output)
	return c
}

// withJob runs f on the job args[0] names, with the ledger it is in; an
// unknown id is a usage error naming where ids come from.
func (cl *cli) withJob(cmd *cobra.Command, args []string, f func(ctx context.Context, a *runner, st *ledger.Store, j ledger.Job) error) error {
	id := strings.TrimSpace(args[0])
	if id == "" {
		return usagef("ID is empty: give a job id from `gpumarket job list`")
	}
	return cl.withApp(cmd, func(a *runner) error {
		st, err := a.Ledger()
		if err != nil {
			return err
		}
		j, err := st.GetJob(cmd.Context(), id)
		if errors.Is(err, ledger.ErrNotFound) {
			return usagef("no job %q in the ledger: want an id (or its first 6 or more characters) from `gpumarket job list`", id)
		}
		if err != nil {
			return err
		}
		return f(cmd.Context(), a, st, j)
	})
}

func (cl *cli) jobShowCmd() *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "show ID",
		Short: "A job: progress, spent against the plan, its outlook, its rows and every move its driver made",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cl.withJob(cmd, args, func(ctx context.Context, a *runner, st *ledger.Store, j ledger.Job) error {
				rows, err := st.JobRows(ctx, j.ID)
				if err != nil {
					return err
				}
				moves, err := st.JobMoves(ctx, j.ID)
				if err != nil {
					return err
				}
				jr := jobRowOf(j, rows, moves, a.Now())
				if output != formatTable {
					return writeRows(a.out, output, []jobRow{jr})
				}
				writeJobTable(a.out, j, jr)
				return nil
			})
		},
	}
	addOutputFlag(c, &output)
	return c
}

// writeJobTable shows a job for people: its figures, its rows beneath,
// then its moves.
func writeJobTable(w io.Writer, j ledger.Job, jr jobRow) {
	fmt.Fprintf(w, "job %s  %s  %s\n", j.ID, j.State, j.Strategy)
	fmt.Fprintf(w, "  progress   %.1f h of %g h (%s)\n", j.WorkDone, j.Terms.Hours, jr.ProgressSource)
	fmt.Fprintf(w, "  spent      $%.2f; plan expected $%.2f, p95 $%.2f, on time %.0f%%; hold $%.2f\n", jr.SpentUSD, j.Plan.ExpectedUSD,
		j.Plan.P95USD, j.Plan.OnTimePct, j.HoldUSD)
	fmt.Fprintf(w, "  window     %s to %s\n", present.BothZones(j.Terms.Start), present.BothZones(j.Terms.Deadline))
	if jr.OnTimePct != nil {
		fmt.Fprintf(w, "  on time    %.0f%% chance as of its last review (plan %.0f%%)\n", *jr.OnTimePct, j.Plan.OnTimePct)
	}
	if j.Outlook != "" {
		fmt.Fprintf(w, "  outlook    %s\n", j.Outlook)
	}
	if j.Reason != "" {
		fmt.Fprintf(w, "  reason     %s\n", j.Reason)
	}
	if len(jr.Rows) > 0 {
		fmt.Fprintln(w, "\nrows:")
		writeRows(w, formatTable, jr.Rows)
	}
	if len(jr.Moves) > 0 {
		fmt.Fprintln(w, "\nmoves:")
		for _, m := range jr.Moves {
			fmt.Fprintf(w, "  %s  %s → %s: %s\n", m.At.Local().Format(app.LocalLayout), m.From, m.To, m.Reason)
		}
	}
}

func (cl *cli) jobCancelCmd() *cobra.Command {
	var output string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a job: it launches nothing more, and every fleet it runs is deleted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cl.withJob(cmd, args, func(ctx context.Context, a *runner, st *ledger.Store, j ledger.Job) error {
				j, err := a.CancelJob(ctx, j.ID, timeout)
				if j.ID == "" {
					return err // nothing was cancelled
				}
				rows, _ := st.JobRows(ctx, j.ID)
				moves, _ := st.JobMoves(ctx, j.ID)
				if werr := writeRows(a.out, output, []jobRow{jobRowOf(j, rows, moves, a.Now())}); werr != nil && err == nil {
					err = werr
				}
				return err
			})
		},
	}
	addOutputFlag(c, &output)
	c.Flags().DurationVar(&timeout, "timeout", ledger.DefaultTimeout, "bound on each delete call")
	return c
}

func (cl *cli) jobRunCmd() *cobra.Command {
	var once bool
	c := &cobra.Command{
		Use:   "run",
		Short: "Drive the ledger's jobs headless until none is active (for systemd or cron)",
		Long: `job run carries out the jobs of the data dir as the TUI, serve and watch do:
it reviews each running job at least every minute and at each event it can
see, and returns once no job is scheduled or running. With --once it reviews
each job once and returns. A job another process drives is left to it until
that process's lease lapses.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cl.withApp(cmd, func(a *runner) error {
				return a.RunJobs(cmd.Context(), once, a.say)
			})
		},
	}
	c.Flags().BoolVar(&once, "once", false, "review each job once and return")
	return c
}
