package app

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

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

// LedgerRun is `ledger` up to its listing: the unreadable file kept aside and
// rows rebuilt from the clouds when asked, then every row reconciled, each
// step said in a line; detail adds the scheduled and running fleets' lines.
func (a *App) LedgerRun(ctx context.Context, timeout time.Duration, rebuild, detail bool, say func(string)) ([]ledger.Entry, error) {
	sayf := func(format string, args ...any) { say(fmt.Sprintf("ledger: "+format, args...)) }
	st, err := a.Ledger()
	if rebuild && errors.Is(err, ledger.ErrUnreadable) {
		// Asked for in so many words: the unreadable file is kept, under
		// another name, and a new ledger is made from the clouds.
		aside, serr := ledger.SetAside(filepath.Join(a.s.DataDir, ledger.FileName), time.Now())
		if serr != nil {
			return nil, fmt.Errorf("%w (%v)", serr, err)
		}
		sayf("the unreadable ledger was kept aside as %s; starting a new one", aside)
		st, err = a.Ledger()
	}
	if err != nil {
		return nil, err
	}
	if st.ReadOnly() {
		if rebuild {
			return nil, fmt.Errorf("ledger --rebuild: %s is read-only here (%w): run it as the user who owns the data dir", st.Path(), ledger.ErrReadOnly)
		}
		snap := ""
		if st.Snapshot() {
			snap = " (as a snapshot: what another process writes meanwhile is not seen)"
		}
		sayf("%s is read-only here%s: rows are listed as recorded; nothing was reconciled or released — run `gpumarket ledger` as a user who may write the data dir for that", st.Path(), snap)
		return st.List(ctx)
	}
	if rebuild {
		if err := a.rebuildLedger(ctx, timeout, say); err != nil {
			return nil, err
		}
	}
	all, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	// A row to reconcile needs its own provider, even when --provider names others.
	names := slices.Clone(a.s.Query.Providers)
	now := a.s.Now()
	for _, r := range all {
		if ledger.NeedsReconcile(r, a.table.Describe(r.Provider), now) {
			names = appendNew(names, r.Provider)
		}
	}
	svc, err := a.Booking(a.reachable(ctx, names, "ledger", say), timeout)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	rep, rerr := svc.Reconcile(rctx)
	cancel()
	for _, r := range rep.Settled {
		switch {
		case r.Kind == ledger.KindReservation && r.State == ledger.StateEnded && r.ProviderRef != "":
			// Released now that its window is over: it stops billing.
			sayf("released %s (reservation %s × %d, %s): its window ended %s", r.ID, r.InstanceType, r.InstanceCount, r.ProviderRef, r.End.UTC().Format(time.RFC3339))
		case ledger.Booked(r.Kind) && (r.State == ledger.StateActive || r.State == ledger.StateEnded) && r.ProviderRef != "":
			// moved along by its dates: not news
		case r.Kind == ledger.KindFleet && r.State == ledger.StateActive && r.Schedule.Keeper != "":
			who := "gpumarket launched"
			if r.Schedule.Keeper == ledger.KeptByCloud {
				who = r.Provider + " started" // the cloud keeps its schedule
			}
			sayf("%s the scheduled fleet %s (%s × %d, %s) at its start", who, r.ID, r.InstanceType, r.InstanceCount, r.ProviderRef)
		case r.Note != "":
			sayf("%s (%s %s): %s: %s", r.ID, r.Kind, r.ProviderRef, r.State, r.Note)
		default:
			sayf("reconciled %s (%s %s): %s %s", r.ID, r.Kind, r.InstanceType, r.State, r.ProviderRef)
		}
	}
	sort.Slice(rep.Unsettled, func(i, j int) bool { return rep.Unsettled[i].Row.ID < rep.Unsettled[j].Row.ID })
	for _, u := range rep.Unsettled {
		sayf("%s (%s %s × %d, %s) not settled yet: %s", u.Row.ID, u.Row.Kind, u.Row.InstanceType, u.Row.InstanceCount, u.Row.Provider, u.Reason)
	}
	if rerr != nil {
		sayf("reconciliation stopped: %v", rerr)
	}
	rows, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	if detail {
		for _, r := range rows {
			a.sayFleet(r, now, sayf)
		}
	}
	// Capacity running idle past budget.max_idle_pct: a line each, its usage
	// at the launch estimates (no hub).
	if a.s.Config.Budget.MaxIdlePct > 0 {
		rep, err := a.UsageReport(ctx, ledger.DefaultSince, timeout, say)
		if err != nil {
			sayf("cannot check idle capacity: %v", err)
		}
		for _, al := range rep.Alerts {
			sayf("warning: %s (`gpumarket usage` for the figures)", strings.TrimSpace(al.String()))
		}
	}
	return rows, nil
}

// sayFleet says when a scheduled fleet starts, and how long a running one
// has run and what it has cost.
func (a *App) sayFleet(r ledger.Entry, now time.Time, sayf func(string, ...any)) {
	sched, scheduled := ledger.ScheduleOf(r)
	if scheduled && r.State == ledger.StateScheduled {
		sayf("fleet %s scheduled %s (starts in %s); %s", r.ID, ledger.WindowText(sched.Start, sched.End, now),
			ledger.Countdown(sched.Start.Sub(now)), sched.Keeper.Note(a.table.Describe(r.Provider)))
	}
	f := ledger.FiguresOf(r, now)
	if r.Kind != ledger.KindFleet || r.State != ledger.StateActive || f.Start.IsZero() {
		return
	}
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
			ledger.Countdown(sched.End.Sub(now)), sched.Keeper.Note(a.table.Describe(r.Provider)))
	}
	sayf("fleet %s (%s) running for %s, %s%s", r.ProviderRef, r.ID, ledger.Countdown(ran), so, ends)
}

// rebuildLedger re-creates the rows the ledger lacks from the records of
// every provider in --provider that lists them.
func (a *App) rebuildLedger(ctx context.Context, timeout time.Duration, say func(string)) error {
	provs := a.s.Query.Providers
	svc, err := a.Booking(a.reachable(ctx, provs, "ledger: --rebuild", say), timeout)
	if err != nil {
		return err
	}
	rep, err := svc.Rebuild(ctx)
	if err != nil {
		return fmt.Errorf("ledger --rebuild: %w", err)
	}
	if len(rep.Asked) == 0 {
		return fmt.Errorf("ledger --rebuild: none of the providers in use (%s) lists its records; name the clouds with --provider (such as --provider aws,azure)", strings.Join(provs, ", "))
	}
	for _, name := range rep.Asked {
		if err := rep.Failed[name]; err != nil {
			say(fmt.Sprintf("ledger: --rebuild: %s: its records could not be read: %v", name, err))
		}
	}
	if len(rep.Failed) == len(rep.Asked) {
		return fmt.Errorf("ledger --rebuild: no provider's records could be read (%s); nothing was re-created", strings.Join(rep.Asked, ", "))
	}
	say(fmt.Sprintf("ledger: --rebuild: asked %s: re-created %d row(s); %d already in the ledger", strings.Join(rep.Asked, ", "), len(rep.Created), rep.Present))
	for _, r := range rep.Created {
		say(fmt.Sprintf("ledger: --rebuild: re-created %s (%s %s × %d, %s, %s)", r.ID, r.Kind, r.InstanceType, r.InstanceCount, r.ProviderRef, r.State))
	}
	return nil
}

// UsageReport computes the usage of the ledger's rows over the last since:
// each row asks its own provider (built even when --provider names others, as
// `ledger` does); every cost is ledger.CostSoFar's. say hears who cannot be reached.
func (a *App) UsageReport(ctx context.Context, since, timeout time.Duration, say func(string)) (ledger.UsageReport, error) {
	st, err := a.Ledger()
	if err != nil {
		return ledger.UsageReport{}, err
	}
	rows, err := st.List(ctx)
	if err != nil {
		return ledger.UsageReport{}, err
	}
	now := a.s.Now()
	var names []string
	for _, r := range rows {
		if ledger.Counted(r) {
			names = appendNew(names, r.Provider)
		}
	}
	ps := a.reachable(ctx, names, "usage", say)
	// What the clouds show is kept in the ledger (they forget ended
	// instances and deleted reservations); a store opened read-only
	// reads what is kept and saves nothing.
	keepFailed := func(err error) {
		a.s.Log.Warn("usage: what the clouds showed could not be kept in the ledger (the report is complete)", "err", err)
	}
	return ledger.Compute(ctx, rows, ledger.UsageOptions{Since: now.Add(-since), Now: now, Reporter: ledger.Reporters(ps),
		Timeout: timeout, MaxIdlePct: a.s.Config.Budget.MaxIdlePct, Kept: st, SaveFailed: keepFailed}), nil
}

// reachable builds the named providers; one that cannot be built is said and left out.
func (a *App) reachable(ctx context.Context, names []string, command string, say func(string)) []domain.Provider {
	var ps []domain.Provider
	for _, name := range names {
		p, err := a.Provider(ctx, name)
		if err != nil {
			say(fmt.Sprintf("%s: cannot reach %s: %s", command, name, Unprefixed(name, err.Error())))
			continue
		}
		ps = append(ps, p)
	}
	return ps
}

// DrainLedger waits until no call a session started is pending, so the process
// never exits between an intent and its outcome.
func DrainLedger(st *ledger.Store, since time.Time) func(context.Context) error {
	return func(ctx context.Context) error {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			rows, err := st.List(context.WithoutCancel(ctx), ledger.StatePending)
			if err != nil {
				return fmt.Errorf("read the ledger: %w", err)
			}
			var pending []string
			for _, r := range rows {
				if strings.HasPrefix(r.Actor, "ssh:") && !r.CreatedAt.Before(since) {
					pending = append(pending, r.ID)
				}
			}
			if len(pending) == 0 {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("ledger rows %s still pending (they will be reconciled at the next start): %w", strings.Join(pending, ", "), ctx.Err())
			case <-tick.C:
			}
		}
	}
}
