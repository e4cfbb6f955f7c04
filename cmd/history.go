package cmd

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
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
			if err := checkOutputTimeout(output, timeout); err != nil {
				return err
			}
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
		Zone: optString(pv.Zone), InstanceType: pv.InstanceType,
	}
	for at, usd := range pv.History.Window(from, to) {
		r := base
		r.At, r.USDHour = time.Unix(max(at, from), 0).UTC(), usd
		rows = append(rows, r)
	}
	return rows
}
