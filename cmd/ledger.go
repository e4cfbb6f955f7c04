package cmd

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/booking"
	"github.com/gpumarket/gpumarket/providers/store"
)

// ledgerRow is one ledger row with DESIGN.md's fields, exactly. Values
// that do not apply or are not known yet (a fleet's dates, the provider id
// of an unknown purchase) are null.
type ledgerRow struct {
	ID            string     `json:"id"`
	Kind          string     `json:"kind"`
	Provider      string     `json:"provider"`
	Cloud         string     `json:"cloud" table:"-"`
	Region        string     `json:"region"`
	Zone          *string    `json:"zone"`
	InstanceType  string     `json:"instance_type"`
	InstanceCount int        `json:"instance_count"`
	GPUCount      float64    `json:"gpu_count" table:"%g"`
	Start         *time.Time `json:"start"`
	End           *time.Time `json:"end"`
	CostUSD       float64    `json:"cost_usd" table:"%.2f"`
	State         string     `json:"state"`
	ProviderRef   *string    `json:"provider_ref"`
	Actor         string     `json:"actor" table:"-"`
	CreatedAt     time.Time  `json:"created_at"`
	Error         *string    `json:"error"`
}

func ledgerRowOf(r store.Row) ledgerRow {
	out := ledgerRow{ID: r.ID, Kind: r.Kind, Provider: r.Provider, Cloud: r.Cloud, Region: r.Region, Zone: optString(r.Zone),
		InstanceType: r.InstanceType, InstanceCount: r.InstanceCount, GPUCount: r.GPUCount, CostUSD: r.CostUSD,
		State: r.State, ProviderRef: optString(r.ProviderRef), Actor: r.Actor, CreatedAt: r.CreatedAt.UTC(), Error: optString(r.Error)}
	if booking.CostUnknown(r) {
		out.CostUSD = math.NaN() // null: the fleet's prices were unknown at launch
	}
	if !r.Start.IsZero() {
		t := r.Start.UTC()
		out.Start = &t
	}
	if !r.End.IsZero() {
		t := r.End.UTC()
		out.End = &t
	}
	return out
}

func (cl *cli) ledgerCmd() *cobra.Command {
	var output string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "ledger",
		Short: "What was booked or launched: state, cost, provider ids (reconciles unknown outcomes first)",
		Long: `ledger prints every recorded purchase, fleet launch and deletion, newest first.

Before printing it reconciles: every row whose outcome is unknown (the answer
was lost to a timeout or a crash) is looked up at its provider, within
--timeout, and recorded if found. Rows it cannot settle yet stay "unknown" and
are named on stderr; they are never retried. cost_usd of a fleet is the
estimate of its first hour: a fleet bills until deleted.`,
		Example: `  gpumarket ledger
  gpumarket ledger -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutputTimeout(output, timeout); err != nil {
				return err
			}
			a, err := cl.newApp(cmd)
			if err != nil {
				return err
			}
			defer a.Close()
			return a.runLedger(cmd.Context(), timeout, output)
		},
	}
	addOutputFlag(c, &output)
	c.Flags().DurationVar(&timeout, "timeout", booking.DefaultTimeout, "bound on the reconciliation of unknown outcomes")
	return c
}

func (a *app) runLedger(ctx context.Context, timeout time.Duration, output string) error {
	e := a.env
	st, err := a.Ledger()
	if err != nil {
		return err
	}
	all, err := st.List(ctx)
	if err != nil {
		return err
	}
	// Reconciling a row needs its own provider, even when this run's
	// --provider names others: an unsettled row is looked up there, and
	// a reservation whose window has ended is released there (it bills
	// until it is).
	names := append([]string(nil), e.query.Providers...)
	now := time.Now()
	for _, r := range all {
		unsettled := !r.Settled()
		windowOver := r.Kind == store.KindReservation && r.ProviderRef != "" && !r.End.IsZero() && !now.Before(r.End) &&
			(r.State == store.StateScheduled || r.State == store.StateActive)
		if (unsettled || windowOver) && !contains(names, r.Provider) {
			names = append(names, r.Provider)
		}
	}
	var ps []providers.Provider
	for _, name := range names {
		p, err := a.provider(ctx, name)
		if err != nil {
			fmt.Fprintf(e.errOut, "gpumarket: ledger: cannot reach %s to reconcile: %v\n", name, err)
			continue
		}
		ps = append(ps, p)
	}
	svc, err := a.Booking(ps, timeout)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	rep, rerr := svc.Reconcile(rctx)
	cancel()
	for _, r := range rep.Settled {
		if r.Kind == store.KindReservation && r.State == store.StateEnded && r.ProviderRef != "" {
			// Released now that its window is over: it stops billing.
			fmt.Fprintf(e.errOut, "gpumarket: ledger: released %s (reservation %s × %d, %s): its window ended %s\n",
				r.ID, r.InstanceType, r.InstanceCount, r.ProviderRef, r.End.UTC().Format(time.RFC3339))
			continue
		}
		if store.Booked(r.Kind) && (r.State == store.StateActive || r.State == store.StateEnded) && r.ProviderRef != "" {
			continue // moved along by its dates: not news
		}
		fmt.Fprintf(e.errOut, "gpumarket: ledger: reconciled %s (%s %s): %s %s\n", r.ID, r.Kind, r.InstanceType, r.State, r.ProviderRef)
	}
	sort.Slice(rep.Unsettled, func(i, j int) bool { return rep.Unsettled[i].Row.ID < rep.Unsettled[j].Row.ID })
	for _, u := range rep.Unsettled {
		fmt.Fprintf(e.errOut, "gpumarket: ledger: %s (%s %s × %d, %s) not settled yet: %s\n",
			u.Row.ID, u.Row.Kind, u.Row.InstanceType, u.Row.InstanceCount, u.Row.Provider, u.Reason)
	}
	if rerr != nil {
		fmt.Fprintf(e.errOut, "gpumarket: ledger: reconciliation stopped: %v\n", rerr)
	}
	rows, err := st.List(ctx)
	if err != nil {
		return err
	}
	out := make([]ledgerRow, 0, len(rows))
	fleets := false
	for _, r := range rows {
		out = append(out, ledgerRowOf(r))
		fleets = fleets || r.Kind == store.KindFleet
	}
	if fleets && output == formatTable {
		fmt.Fprintln(e.errOut, "gpumarket: ledger: a fleet's cost_usd is the estimate of its first hour; a fleet bills until deleted")
	}
	// Capacity running idle past budget.max_idle_pct: one warning line
	// each (issue 13).
	for _, w := range a.idleWarnings(ctx, timeout) {
		fmt.Fprintln(e.errOut, "gpumarket: ledger: "+w)
	}
	return writeRows(e.out, output, out)
}
