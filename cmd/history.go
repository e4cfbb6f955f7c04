package cmd

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/internal/sqlitedb"
	"github.com/gpumarket/gpumarket/present"
)

// historyRow is one spot price of one pool in `gpumarket history`.
type historyRow struct {
	Provider     string    `json:"provider"`
	Cloud        string    `json:"cloud"`
	Region       string    `json:"region"`
	Zone         *string   `json:"zone"`
	InstanceType string    `json:"instance_type"`
	At           time.Time `json:"at"`
	USDHour      float64   `json:"usd_hour"`
}

func (cl *cli) historyCmd() *cobra.Command {
	var output, instanceType string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "history",
		Short: "The spot price history of the matching pools over the window",
		Long: `history prints every spot price change of the pools matching the filters over
the window, oldest first, one pool after another. Prices are a step function:
each holds until the next row of its pool. The first row of each pool is the
price in force when the window starts, reported at the window's start time
(its "at" is the window start, not when the cloud first quoted it).`,
		Example: `  gpumarket history --gpu H100 --region us-east-1 --window 7d -o csv
  gpumarket history --instance-type p5.48xlarge -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("instance-type") {
				name, err := domain.InstanceTypeName(instanceType)
				if err != nil {
					return usagef("--instance-type %v", err)
				}
				instanceType = name
			}
			return cl.withApp(cmd, func(a *runner) error {
				snap, err := a.ReadySnapshot(cmd.Context(), timeout)
				if err != nil {
					return err
				}
				a.banner(output)
				return a.writeHistory(snap, instanceType, output)
			})
		},
	}
	addOutputFlag(c, &output)
	c.Flags().StringVar(&instanceType, "instance-type", "", "only this instance type or VM size (any case; an Azure size with or without Standard_)")
	c.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "how long to wait for the sources to answer")
	return c
}

// writeHistory writes the history rows pool by pool, so that 90 days of
// every pool need not be held at once.
func (e *env) writeHistory(snap *feed.Snapshot, instanceType, format string) error {
	rw, err := newRowWriter(e.out, format, reflect.TypeFor[historyRow]())
	if err != nil {
		return err
	}
	from, to := e.windowOf(snap)
	var rows []historyRow
	for i := range snap.Pools {
		pv := &snap.Pools[i]
		if !e.wantHistory(pv, instanceType) {
			continue
		}
		rows = poolHistory(rows[:0], pv, from, to)
		if err := rw.write(rows); err != nil {
			return err
		}
	}
	if rw.n == 0 && instanceType != "" {
		fmt.Fprintf(e.errOut, "gpumarket: warning: no pool of instance type %q matches the filters\n", instanceType)
	}
	return rw.close()
}

// windowOf is the env's window ending at the snapshot, in Unix seconds.
func (e *env) windowOf(snap *feed.Snapshot) (from, to int64) {
	return snap.Taken.Add(-e.Query.Window).Unix(), snap.Taken.Unix()
}

func (e *env) wantHistory(pv *feed.PoolView, instanceType string) bool {
	return e.Query.Matches(pv.Pool) && (instanceType == "" || strings.EqualFold(pv.InstanceType, instanceType))
}

// poolHistory appends the pool's points in [from, to] to rows. The price in
// force at the window start is reported at the window start.
func poolHistory(rows []historyRow, pv *feed.PoolView, from, to int64) []historyRow {
	base := historyRow{
		Provider: pv.Provider, Cloud: string(pv.Cloud), Region: pv.Region,
		Zone: present.OptString(pv.Zone), InstanceType: pv.InstanceType,
	}
	for at, usd := range pv.History.Window(from, to) {
		r := base
		r.At, r.USDHour = time.Unix(max(at, from), 0).UTC(), usd
		rows = append(rows, r)
	}
	return rows
}

func (cl *cli) cacheCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "cache",
		Short: "The history cache: what it holds (info) or remove it (clear)",
		Long: `gpumarket keeps the price history it fetched from the clouds in history.db in
the data dir, so that a restart shows it at once and asks the clouds only for
what is missing since. It keeps config cache.retention of history (default
90d). The simulated market is never cached: it regenerates its history.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("cache needs a subcommand: info or clear (see gpumarket cache --help)")
		},
	}
	c.AddCommand(cl.cacheInfoCmd(), cl.cacheClearCmd())
	return c
}

// cacheRow is one span of a region's cached history (or the region's
// pools alone, when no span covers them: from and until are then null).
type cacheRow struct {
	File      string     `json:"file" table:"-"`
	SizeBytes int64      `json:"size_bytes" table:"-"`
	Provider  string     `json:"provider"`
	Region    string     `json:"region"`
	GPUs      string     `json:"gpus"`
	Pools     int        `json:"pools"`
	Points    int64      `json:"points"`
	From      *time.Time `json:"from"`
	Until     *time.Time `json:"until"`
}

func cacheRows(info feed.Info) []cacheRow {
	var rows []cacheRow
	for _, r := range info.Regions {
		row := cacheRow{File: info.Path, SizeBytes: info.Size, Provider: r.Provider, Region: r.Region, GPUs: "-", Pools: r.Pools, Points: r.Points}
		if len(r.Spans) == 0 {
			rows = append(rows, row)
		}
		for _, s := range r.Spans {
			row := row
			row.GPUs = "all"
			if len(s.GPUs) > 0 {
				row.GPUs = strings.Join(s.GPUs, ",")
			}
			from, until := s.From.UTC(), s.Until.UTC()
			row.From, row.Until = &from, &until
			rows = append(rows, row)
		}
	}
	return rows
}

func (cl *cli) cacheInfoCmd() *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "info",
		Short: "What the history cache holds: file, size, and per provider and region its pools, points and spans",
		Long: `cache info prints the history cache's file and size, then one row per provider,
region and GPU filter: the pools and price points kept, and the span of time
(from, until) over which the region's history is whole. A region with pools
but no span has history the next start fetches again. It changes nothing.`,
		Example: `  gpumarket cache info
  gpumarket cache info -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := cl.setup(cmd)
			if err != nil {
				return err
			}
			info, err := feed.Stat(cmd.Context(), e.DataDir)
			switch {
			case errors.Is(err, feed.ErrNoCache):
				fmt.Fprintf(e.summaryOut(output), "no history cache at %s (nothing cached yet)\n", info.Path)
				if output == formatTable {
					return nil
				}
				return writeRows(e.out, output, []cacheRow{})
			case err != nil:
				if sqlitedb.ProblemOf(err) != 0 {
					return fmt.Errorf("history cache %w; the next start moves it aside, or run gpumarket cache clear", err)
				}
				return fmt.Errorf("read history cache: %w", err)
			}
			fmt.Fprintf(e.summaryOut(output), "history cache %s: %s, %d pools, %d price points, retention %s\n",
				info.Path, byteSize(info.Size), info.Pools, info.Points, domain.FormatWindow(e.Config.Cache.Retention.D()))
			return writeRows(e.out, output, cacheRows(info))
		},
	}
	addOutputFlag(c, &output)
	return c
}

// summaryOut is where a line about the output goes: before a table, or
// on stderr so that json and csv stay clean data.
func (e *env) summaryOut(output string) io.Writer {
	if output == formatTable {
		return e.out
	}
	return e.errOut
}

func (cl *cli) cacheClearCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "clear",
		Short: "Remove the history cache (the ledger is not touched)",
		Long: `cache clear removes history.db (with its write-ahead log) from the data dir, and
the unreadable copies earlier starts moved aside. It holds nothing that cannot
be fetched again, so it does not ask. The ledger is not touched. A gpumarket
running meanwhile keeps writing to the removed file until it exits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := cl.setup(cmd)
			if err != nil {
				return err
			}
			what := ""
			if info, err := feed.Stat(cmd.Context(), e.DataDir); err == nil {
				what = fmt.Sprintf(" (%s: %d pools, %d price points)", byteSize(info.Size), info.Pools, info.Points)
			}
			removed, err := feed.Remove(e.DataDir)
			for _, p := range removed {
				if p == feed.Path(e.DataDir) {
					fmt.Fprintf(e.out, "removed %s%s\n", p, what)
				} else {
					fmt.Fprintf(e.out, "removed %s\n", p)
				}
			}
			if err != nil {
				return fmt.Errorf("clear history cache: %w", err)
			}
			if len(removed) == 0 {
				fmt.Fprintf(e.out, "no history cache at %s: nothing removed\n", feed.Path(e.DataDir))
			}
			return nil
		},
	}
}

// byteSize writes a size for people: 17.2 MiB.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[i])
}

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

// priceRows are the Market view's rows of the pools the query matches, in
// its first order: EFF (unknown last), then pool key.
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
