package cmd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// ledgerRow is a ledger row as every command writes it, through
// present.Ledger: DESIGN.md's fields; what does not apply or is not known
// yet (a fleet's dates, the provider id of an unknown purchase) is null.
type ledgerRow = present.LedgerRow

func ledgerRowOf(r ledger.Entry, now time.Time) ledgerRow { return present.NewLedgerRow(r, now) }

func (cl *cli) ledgerCmd() *cobra.Command {
	var output string
	var timeout time.Duration
	var rebuild bool
	c := &cobra.Command{
		Use:   "ledger",
		Short: "What was booked or launched: state, cost, provider ids (reconciles unknown outcomes first)",
		Long: `ledger prints every recorded purchase, fleet launch and deletion, newest first.

Before printing it reconciles: every row whose outcome is unknown (the answer
was lost to a timeout or a crash) is looked up at its provider, within
--timeout, and recorded if found. Rows it cannot settle yet stay "unknown" and
are named on stderr; they are never retried. A row whose call another process
is still making (its owner's lock or heartbeat says so) is left alone, whatever
--timeout says. committed_usd is what a row may cost over its known window
(null for a fleet with no end), cost_so_far_usd what it has cost up to now (a
fleet at its hourly estimate over the hours it ran), cost_usd its final cost
once it is over (null before). start and end are when it became active and
when it ended — for a scheduled fleet (fleet launch --start/--for), its window
until then. A fleet that launched nothing costs 0.

Reconciling also keeps the schedules gpumarket keeps (where the cloud has none:
Azure scale sets): a fleet whose start has come is launched, one whose end has
come is deleted, at once, and the row's note says how late. A fleet whose
whole window passed with no gpumarket running is not launched (failed, nothing
spent). A scheduled fleet not launched yet is cancelled with fleet delete.

--rebuild re-creates the rows the ledger lacks from what the clouds show: every
purchase and launch carries tags naming its ledger row, and every provider in
--provider that can list them is asked. Rows the ledger has are left as they
are, so it may be run again. A ledger file that is empty or not a ledger is
refused by every command; --rebuild keeps it aside (renamed
gpumarket.db.unreadable-<time>) and starts a new ledger from the clouds.

On a data dir this user may not write, the ledger is opened read-only: it is
listed as recorded, and nothing is reconciled, released or rebuilt.`,
		Example: `  gpumarket ledger
  gpumarket ledger -o json
  gpumarket ledger --rebuild --provider aws,azure`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutputTimeout(output, timeout); err != nil {
				return err
			}
			return cl.withApp(cmd, func(a *runner) error {
				return a.runLedger(cmd.Context(), timeout, output, rebuild)
			})
		},
	}
	addOutputFlag(c, &output)
	c.Flags().DurationVar(&timeout, "timeout", ledger.DefaultTimeout, "bound on the reconciliation of unknown outcomes")
	c.Flags().BoolVar(&rebuild, "rebuild", false, "re-create the rows the ledger lacks from what the clouds show (their tags); an unreadable ledger file is kept aside")
	return c
}

func (a *runner) runLedger(ctx context.Context, timeout time.Duration, output string, rebuild bool) error {
	e := a.env
	st, err := a.Ledger()
	if rebuild && errors.Is(err, ledger.ErrUnreadable) {
		// Asked for in so many words: the unreadable file is kept, under
		// another name, and a new ledger is made from the clouds.
		aside, serr := ledger.SetAside(filepath.Join(a.DataDir, ledger.FileName), time.Now())
		if serr != nil {
			return fmt.Errorf("%w (%v)", serr, err)
		}
		fmt.Fprintf(e.errOut, "gpumarket: ledger: the unreadable ledger was kept aside as %s; starting a new one\n", aside)
		st, err = a.Ledger()
	}
	if err != nil {
		return err
	}
	if st.ReadOnly() {
		if rebuild {
			return fmt.Errorf("ledger --rebuild: %s is read-only here (%w): run it as the user who owns the data dir", st.Path(), ledger.ErrReadOnly)
		}
		snap := ""
		if st.Snapshot() {
			snap = " (as a snapshot: what another process writes meanwhile is not seen)"
		}
		fmt.Fprintf(e.errOut, "gpumarket: ledger: %s is read-only here%s: rows are listed as recorded; nothing was reconciled or released — run `gpumarket ledger` as a user who may write the data dir for that\n", st.Path(), snap)
		rows, err := st.List(ctx)
		if err != nil {
			return err
		}
		return a.writeLedger(rows, output)
	}
	if rebuild {
		if err := a.rebuildLedger(ctx, timeout); err != nil {
			return err
		}
	}
	all, err := st.List(ctx)
	if err != nil {
		return err
	}
	// A row to reconcile needs its own provider, even when --provider names others.
	names := append([]string(nil), e.Query.Providers...)
	now := a.Now()
	for _, r := range all {
		if ledger.NeedsReconcile(r, a.Table().Describe(r.Provider), now) && !slices.Contains(names, r.Provider) {
			names = append(names, r.Provider)
		}
	}
	svc, err := a.Booking(a.reachable(ctx, names, "ledger"), timeout)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	rep, rerr := svc.Reconcile(rctx)
	cancel()
	for _, r := range rep.Settled {
		switch {
		case r.Kind == ledger.KindReservation && r.State == ledger.StateEnded && r.ProviderRef != "":
			// Released now that its window is over: it stops billing.
			fmt.Fprintf(e.errOut, "gpumarket: ledger: released %s (reservation %s × %d, %s): its window ended %s\n",
				r.ID, r.InstanceType, r.InstanceCount, r.ProviderRef, r.End.UTC().Format(time.RFC3339))
		case ledger.Booked(r.Kind) && (r.State == ledger.StateActive || r.State == ledger.StateEnded) && r.ProviderRef != "":
			// moved along by its dates: not news
		case r.Kind == ledger.KindFleet && r.State == ledger.StateActive && r.Schedule.Keeper != "":
			who := "gpumarket launched"
			if r.Schedule.Keeper == ledger.KeptByCloud {
				who = r.Provider + " started" // the cloud keeps its schedule
			}
			fmt.Fprintf(e.errOut, "gpumarket: ledger: %s the scheduled fleet %s (%s × %d, %s) at its start\n", who, r.ID, r.InstanceType, r.InstanceCount, r.ProviderRef)
		case r.Note != "":
			fmt.Fprintf(e.errOut, "gpumarket: ledger: %s (%s %s): %s: %s\n", r.ID, r.Kind, r.ProviderRef, r.State, r.Note)
		default:
			fmt.Fprintf(e.errOut, "gpumarket: ledger: reconciled %s (%s %s): %s %s\n", r.ID, r.Kind, r.InstanceType, r.State, r.ProviderRef)
		}
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
	if output == formatTable {
		for _, r := range rows {
			sched, scheduled := ledger.ScheduleOf(r)
			if scheduled && r.State == ledger.StateScheduled {
				fmt.Fprintf(e.errOut, "gpumarket: ledger: fleet %s scheduled %s (starts in %s); %s\n", r.ID, ledger.WindowText(sched.Start, sched.End, now),
					ledger.Countdown(sched.Start.Sub(now)), sched.Keeper.Note(a.Table().Describe(r.Provider)))
			}
			if f := ledger.FiguresOf(r, now); r.Kind == ledger.KindFleet && r.State == ledger.StateActive && !f.Start.IsZero() {
				ran := now.Sub(f.Start)
				if !f.End.IsZero() && f.End.Before(now) {
					ran = f.End.Sub(f.Start)
				}
				so := "cost unknown"
				if !math.IsNaN(f.SoFar) {
					so = fmt.Sprintf("about $%.2f so far at $%.2f/h", f.SoFar, r.USDHour)
				}
				ends := ""
				if scheduled && !sched.End.IsZero() && sched.End.After(now) {
					ends = fmt.Sprintf("; ends %s (in %s): %s", sched.End.In(now.Location()).Format("Mon 15:04 MST"),
						ledger.Countdown(sched.End.Sub(now)), sched.Keeper.Note(a.Table().Describe(r.Provider)))
				}
				fmt.Fprintf(e.errOut, "gpumarket: ledger: fleet %s (%s) running for %s, %s%s\n", r.ProviderRef, r.ID, ledger.Countdown(ran), so, ends)
			}
		}
	}
	// Capacity running idle past budget.max_idle_pct: one warning line each.
	for _, w := range a.idleWarnings(ctx, timeout) {
		fmt.Fprintln(e.errOut, "gpumarket: ledger: "+w)
	}
	return a.writeLedger(rows, output)
}

// writeLedger prints the rows.
func (a *runner) writeLedger(rows []ledger.Entry, output string) error {
	out := make([]ledgerRow, 0, len(rows))
	now := time.Now()
	for _, r := range rows {
		out = append(out, ledgerRowOf(r, now))
	}
	return writeRows(a.out, output, out)
}

// rebuildLedger re-creates the rows the ledger lacks from the records of
// every provider in --provider that lists them.
func (a *runner) rebuildLedger(ctx context.Context, timeout time.Duration) error {
	e := a.env
	ps := a.reachable(ctx, e.Query.Providers, "ledger: --rebuild")
	svc, err := a.Booking(ps, timeout)
	if err != nil {
		return err
	}
	rep, err := svc.Rebuild(ctx)
	if err != nil {
		return fmt.Errorf("ledger --rebuild: %w", err)
	}
	if len(rep.Asked) == 0 {
		return fmt.Errorf("ledger --rebuild: none of the providers in use (%s) lists its records; name the clouds with --provider (such as --provider aws,azure)", strings.Join(e.Query.Providers, ", "))
	}
	for _, name := range rep.Asked {
		if err := rep.Failed[name]; err != nil {
			fmt.Fprintf(e.errOut, "gpumarket: ledger: --rebuild: %s: its records could not be read: %v\n", name, err)
		}
	}
	if len(rep.Failed) == len(rep.Asked) {
		return fmt.Errorf("ledger --rebuild: no provider's records could be read (%s); nothing was re-created", strings.Join(rep.Asked, ", "))
	}
	fmt.Fprintf(e.errOut, "gpumarket: ledger: --rebuild: asked %s: re-created %d row(s); %d already in the ledger\n",
		strings.Join(rep.Asked, ", "), len(rep.Created), rep.Present)
	for _, r := range rep.Created {
		fmt.Fprintf(e.errOut, "gpumarket: ledger: --rebuild: re-created %s (%s %s × %d, %s, %s)\n", r.ID, r.Kind, r.InstanceType, r.InstanceCount, r.ProviderRef, r.State)
	}
	return nil
}
