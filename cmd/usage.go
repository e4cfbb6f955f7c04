package cmd

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// usageRow is one ledger row's usage as `usage` writes it, through
// present.Usage: the README's fields; unknown figures are null.
type usageRow = ledger.UsageRow

// usageDayRow and usageActorRow are the totals of one UTC day (--by day)
// or one actor (--by actor). Unknown figures of a row are left out of the
// sums; rows_without_metrics counts the rows whose busy GPU-hours (so
// idle cost) are unknown. (Flat structs: the row writer reads one level
// of fields.)
type usageDayRow struct {
	Day               string   `json:"day"`
	Rows              int      `json:"rows"`
	BookedGPUHours    *float64 `json:"booked_gpu_hours"`
	RunningGPUHours   *float64 `json:"running_gpu_hours"`
	BusyGPUHours      *float64 `json:"busy_gpu_hours"`
	Interruptions     int      `json:"interruptions"`
	CostUSD           *float64 `json:"cost_usd"`
	IdleUSD           *float64 `json:"idle_usd"`
	RowsWithoutMetric int      `json:"rows_without_metrics"`
}

type usageActorRow struct {
	Actor             string   `json:"actor"`
	Rows              int      `json:"rows"`
	BookedGPUHours    *float64 `json:"booked_gpu_hours"`
	RunningGPUHours   *float64 `json:"running_gpu_hours"`
	BusyGPUHours      *float64 `json:"busy_gpu_hours"`
	Interruptions     int      `json:"interruptions"`
	CostUSD           *float64 `json:"cost_usd"`
	IdleUSD           *float64 `json:"idle_usd"`
	RowsWithoutMetric int      `json:"rows_without_metrics"`
}

func dayRowOf(t ledger.Total) usageDayRow {
	return usageDayRow{Day: t.Key, Rows: t.Rows, BookedGPUHours: present.Round(t.BookedGPUHours, 3), RunningGPUHours: present.Round(t.RunningGPUHours, 3),
		BusyGPUHours: present.Round(t.BusyGPUHours, 3), Interruptions: t.Interruptions, CostUSD: present.Round(t.CostUSD, 2), IdleUSD: present.Round(t.IdleUSD, 2),
		RowsWithoutMetric: t.NoMetrics}
}

func actorRowOf(t ledger.Total) usageActorRow {
	d := dayRowOf(t)
	return usageActorRow{Actor: t.Key, Rows: d.Rows, BookedGPUHours: d.BookedGPUHours, RunningGPUHours: d.RunningGPUHours,
		BusyGPUHours: d.BusyGPUHours, Interruptions: d.Interruptions, CostUSD: d.CostUSD, IdleUSD: d.IdleUSD, RowsWithoutMetric: d.RowsWithoutMetric}
}

// Groupings of `usage --by`.
const (
	byRow   = "row"
	byDay   = "day"
	byActor = "actor"
)

func (cl *cli) usageCmd() *cobra.Command {
	var output, since, by string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "usage",
		Short: "What was bought and how much of it was used: booked, running and busy GPU-hours, idle cost",
		Long: `usage reports, for every capacity block, reservation and fleet in the ledger
that ran within --since, the GPU-hours booked, the GPU-hours instances ran in,
the GPU-hours they were busy (GPU utilization from the cloud's metrics: the
CloudWatch agent's NVIDIA metrics on AWS, falling back to CPU utilization and
saying so; Azure Monitor for scale sets), interruptions, the cost so far and
the idle cost: what was paid for GPU-hours not running or not busy.

A row whose metrics could not be read says "no metrics": its busy GPU-hours
and idle cost are null, never 0 % busy. The table lists the five most idle
rows first, then the rest newest first, then the totals per day and per
actor; -o json and csv print the rows, or with --by day or --by actor the
totals.`,
		Example: `  gpumarket usage
  gpumarket usage --since 30d -o json
  gpumarket usage --by actor -o csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutputTimeout(output, timeout); err != nil {
				return err
			}
			span, err := domain.ParseWindow(since)
			if err != nil {
				return usagef("--since %q: want %s", since, domain.WindowForm)
			}
			if by != byRow && by != byDay && by != byActor {
				return usagef("--by %q: want row, day or actor", by)
			}
			return cl.withApp(cmd, func(a *app) error {
				return a.runUsage(cmd.Context(), span, by, timeout, output)
			})
		},
	}
	addOutputFlag(c, &output)
	c.Flags().StringVar(&since, "since", "7d", "how far back: "+domain.WindowForm)
	c.Flags().StringVar(&by, "by", byRow, "what one output row is: row (a ledger row), day (UTC) or actor")
	c.Flags().DurationVar(&timeout, "timeout", ledger.DefaultTimeout, "bound on each provider's usage and price lookups")
	return c
}

func (a *app) runUsage(ctx context.Context, since time.Duration, by string, timeout time.Duration, output string) error {
	rep, err := a.usageReport(ctx, since, timeout)
	if err != nil {
		return err
	}
	e := a.env
	sim := false
	for _, r := range rep.Rows {
		sim = sim || a.table.describe(r.Provider).Simulated
	}
	if sim {
		// On stdout before a table, on stderr for json and csv.
		w := e.errOut
		if output == formatTable {
			w = e.out
		}
		fmt.Fprintln(w, "SIMULATED MARKET: the usage of simulated capacity is generated by gpumarket's simulator")
	}
	for _, r := range rep.Rows {
		if r.Note != "" {
			fmt.Fprintf(e.errOut, "gpumarket: usage: %s (%s %s): %s\n", r.ID, r.Kind, r.InstanceType, r.Note)
		}
	}
	if output != formatTable {
		switch by {
		case byDay:
			out := make([]usageDayRow, 0, len(rep.Days))
			for _, t := range rep.Days {
				out = append(out, dayRowOf(t))
			}
			return writeRows(e.out, output, out)
		case byActor:
			out := make([]usageActorRow, 0, len(rep.Actors))
			for _, t := range rep.Actors {
				out = append(out, actorRowOf(t))
			}
			return writeRows(e.out, output, out)
		}
		return writeRows(e.out, output, rep.Rows)
	}
	return writeUsageTable(e.out, rep, by)
}

// usageReport computes the usage of the ledger's rows over the last
// since: each row asks its own provider (built even when --provider names
// others, as `ledger` does); every cost is ledger.CostSoFar's.
func (a *app) usageReport(ctx context.Context, since time.Duration, timeout time.Duration) (ledger.UsageReport, error) {
	st, err := a.Ledger()
	if err != nil {
		return ledger.UsageReport{}, err
	}
	rows, err := st.List(ctx)
	if err != nil {
		return ledger.UsageReport{}, err
	}
	now := a.now()
	var names []string
	for _, r := range rows {
		if ledger.Counted(r) && !slices.Contains(names, r.Provider) {
			names = append(names, r.Provider)
		}
	}
	ps := a.reachable(ctx, names, "usage")
	// What the clouds show is kept in the ledger (they forget ended
	// instances and deleted reservations); a store opened read-only
	// reads what is kept and saves nothing.
	keepFailed := func(err error) {
		a.log.Warn("usage: what the clouds showed could not be kept in the ledger (the report is complete)", "err", err)
	}
	return ledger.Compute(ctx, rows, ledger.UsageOptions{Since: now.Add(-since), Now: now, Reporter: ledger.Reporters(ps),
		Timeout: timeout, MaxIdlePct: a.cfg.Budget.MaxIdlePct, Kept: st, SaveFailed: keepFailed}), nil
}

// writeUsageTable prints the rows (the five most idle first), then the
// totals per day with a bar of booked, running and busy GPU-hours, per
// actor, and over all. --by day or actor prints only that section.
func writeUsageTable(w io.Writer, rep ledger.UsageReport, by string) error {
	if by == byRow {
		if err := writeRows(w, formatTable, rep.Rows); err != nil {
			return err
		}
		if len(rep.Rows) == 0 {
			fmt.Fprintf(w, "(nothing in the ledger ran since %s)\n", rep.Since.Format(time.RFC3339))
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if by == byRow || by == byDay {
		fmt.Fprintf(tw, "DAY (UTC)\tBOOKED GPU-H\tRUNNING GPU-H\tBUSY GPU-H\tBOOKED ▒ RUNNING ▓ BUSY █\tINTERRUPTIONS\tCOST $\tIDLE $\n")
		peak := 0.0
		for _, d := range rep.Days {
			peak = math.Max(peak, d.BookedGPUHours)
		}
		for _, d := range rep.Days {
			busy := fmt.Sprintf("%.1f", d.BusyGPUHours)
			if d.NoMetrics > 0 {
				busy += fmt.Sprintf(" (%d without metrics)", d.NoMetrics)
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%s\t%s\t%d\t%.2f\t%.2f\n", d.Key, d.BookedGPUHours, d.RunningGPUHours, busy,
				ledger.Bar(d.BookedGPUHours, d.RunningGPUHours, d.BusyGPUHours, peak, 24), d.Interruptions, d.CostUSD, d.IdleUSD)
		}
		fmt.Fprintln(tw)
	}
	if by == byRow || by == byActor {
		fmt.Fprintf(tw, "ACTOR\tROWS\tBOOKED GPU-H\tRUNNING GPU-H\tBUSY GPU-H\tINTERRUPTIONS\tCOST $\tIDLE $\tWITHOUT METRICS\n")
		for _, t := range append(append([]ledger.Total(nil), rep.Actors...), rep.All) {
			key := t.Key
			if key == "" {
				key = "-"
			}
			if t.Key == "all" && len(rep.Actors) > 0 {
				key = "ALL"
			}
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%d\t%.2f\t%.2f\t%d\n", key, t.Rows, t.BookedGPUHours, t.RunningGPUHours,
				t.BusyGPUHours, t.Interruptions, t.CostUSD, t.IdleUSD, t.NoMetrics)
		}
	}
	return tw.Flush()
}

// idleWarnings are the `ledger` lines for running rows over
// budget.max_idle_pct: their usage is computed at the launch estimates
// (no hub), within timeout.
func (a *app) idleWarnings(ctx context.Context, timeout time.Duration) []string {
	if a.cfg.Budget.MaxIdlePct <= 0 {
		return nil
	}
	rep, err := a.usageReport(ctx, ledger.DefaultSince, timeout)
	if err != nil {
		return []string{"cannot check idle capacity: " + err.Error()}
	}
	var out []string
	for _, al := range rep.Alerts {
		out = append(out, "warning: "+strings.TrimSpace(al.String())+" (`gpumarket usage` for the figures)")
	}
	return out
}

// usageTracker is the one usage tracker of the run, built on first use:
// every TUI session of the process (serve's included) shares it, so the
// clouds' metrics are asked once per TTL whatever the number of
// sessions. It asks the hub's providers; nil when there is no ledger.
func (a *app) usageTracker(h *feed.Hub) *ledger.Tracker {
	var ps []domain.Provider
	if h != nil {
		ps = h.Providers()
	}
	return a.usageTrackerOver(ps)
}

// usageTrackerOver is usageTracker asking the providers ps, for a run
// whose market may be narrower than the ledger (a headless watch).
func (a *app) usageTrackerOver(ps []domain.Provider) *ledger.Tracker {
	st, err := a.Ledger()
	if err != nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.usage == nil {
		a.usage = ledger.NewTracker(ledger.TrackerOptions{Ledger: st, Reporter: ledger.Reporters(ps),
			MaxIdlePct: a.cfg.Budget.MaxIdlePct, Kept: st, Log: a.log, Now: a.now})
	}
	return a.usage
}
