package cmd

import (
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/present"
)

// defaultTimeout bounds how long prices and history wait for the sources'
// first answer: an AWS back-fill of 90 days in many regions takes a while.
const defaultTimeout = 2 * time.Minute

func (cl *cli) pricesCmd() *cobra.Command {
	var output string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "prices",
		Short: "One row per spot pool: current and window prices, savings, interruption, EFF $/GPU-h",
		Long: `prices prints one row per pool matching the filters, cheapest effective
$/GPU-hour first. effective_usd_gpu_hour is what the default job (config
plan.gpus GPUs for plan.hours hours, default 8 × 24 h, with plan.checkpoint and
plan.changeover) pays per useful GPU-hour on the pool's spot capacity alone:
its $/GPU-h times the paid hours per hour of work, given how often the pool is
interrupted (the planner's risk model: interruptions per hour, from the
simulated market's own process, else the GPU class's prior scaled by the
interruption bucket or Azure eviction rate). window_avg_usd_hour is
time-weighted: each price counts for as long as it held. Unknown values are
null in JSON, empty in CSV and "-" in the table.`,
		Example: `  gpumarket prices --gpu H100 --window 7d -o json
  gpumarket prices --provider aws --region us-east-1,us-west-2 -o csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cl.withApp(cmd, func(a *runner) error {
				snap, err := a.ReadySnapshot(cmd.Context(), timeout)
				if err != nil {
					return err
				}
				rows := a.priceRows(snap)
				a.banner(output)
				return writeRows(a.out, output, rows)
			})
		},
	}
	addOutputFlag(c, &output)
	c.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "how long to wait for the sources to answer")
	return c
}

// banner says "SIMULATED MARKET" first when the sim is a source: on stdout
// before a table, on stderr for json and csv so scripts read clean data.
func (a *runner) banner(format string) {
	if a.Simulated() {
		fmt.Fprintln(a.summaryOut(format), a.Table().SimBanner())
	}
}

// priceRows makes one row per pool of the snapshot that matches the query,
// sorted by effective $/GPU-hour (unknown last), then by pool key: the
// Market view's rows and its first order, printed through the columns
// present.Prices declares (DESIGN.md's fields). Unknown values are null
// in JSON, never made up.
func (e *env) priceRows(snap *feed.Snapshot) []present.Row {
	from, to := e.windowOf(snap)
	basis := e.PlanBasis()
	rows := make([]present.Row, 0, len(snap.Pools))
	for i := range snap.Pools {
		pv := &snap.Pools[i]
		if !e.Query.Matches(pv.Pool) {
			continue
		}
		rows = append(rows, present.Derive(pv, basis, from, to))
	}
	slices.SortStableFunc(rows, func(a, b present.Row) int { return present.Compare(present.Sorts[0], &a, &b, false) })
	return rows
}
