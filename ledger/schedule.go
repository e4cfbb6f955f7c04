package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Keeper says who starts and ends a scheduled fleet.
type Keeper string

const (
	// KeptByCloud: the cloud starts and ends the fleet; nothing of gpumarket need run.
	KeptByCloud Keeper = "cloud"
	// KeptByGpumarket: the reconcile loop launches and deletes it on time.
	KeptByGpumarket Keeper = "gpumarket"
)

// KeeperOf is the cloud when it schedules fleets that outlive gpumarket, else gpumarket.
func KeeperOf(d domain.Descriptor) Keeper {
	if d.SchedulesFleets && !d.Ephemeral {
		return KeptByCloud
	}
	return KeptByGpumarket
}

// KeeperNote says who starts and stops a scheduled fleet of the provider.
func KeeperNote(d domain.Descriptor) string { return KeeperOf(d).Note(d) }

// Note says who keeps a schedule kept by k ("" is the descriptor's keeper).
func (k Keeper) Note(d domain.Descriptor) string {
	if k == "" {
		k = KeeperOf(d)
	}
	switch {
	case k == KeptByCloud:
		who := d.CloudName()
		if who == "" {
			who = d.Name
		}
		return who + " starts and ends it at the cloud; it ends on time even if gpumarket is not running (a fleet given no end runs until deleted)"
	case d.Ephemeral:
		return "gpumarket starts and deletes it: a gpumarket TUI or `serve` must be running at those times (the simulated market lives in that process)"
	}
	return "gpumarket starts and deletes it: a gpumarket TUI or `serve` must be running at those times (or run `gpumarket ledger`)"
}

// fleetRequest is a fleet row's Request: the spec plus its keeper.
type fleetRequest struct {
	domain.FleetSpec
	Keeper Keeper `json:",omitempty"`
}

// FleetSchedule is the window a fleet row was asked for and who keeps it.
type FleetSchedule struct {
	// Start is the asked start; zero when it was launched at once.
	Start time.Time
	// End is the asked end; zero when it runs until deleted.
	End time.Time
	// Keeper is who starts and ends it.
	Keeper Keeper
}

// ScheduleOf is a fleet row's schedule; false when it has none.
func ScheduleOf(r Entry) (FleetSchedule, bool) {
	if r.Kind != KindFleet || r.Schedule.Keeper == "" {
		return FleetSchedule{}, false
	}
	return r.Schedule, true
}

// WindowText says a fleet's window in now's location and UTC, with its length.
func WindowText(start, end, now time.Time) string {
	loc := now.Location()
	from := "now"
	if start.IsZero() {
		start = now
	} else {
		from = start.In(loc).Format("Mon 01-02 15:04 MST")
	}
	if end.IsZero() {
		if from == "now" {
			return "from now until deleted"
		}
		return fmt.Sprintf("from %s (%s UTC) until deleted", from, start.UTC().Format("15:04"))
	}
	to := end.In(loc).Format("Mon 01-02 15:04 MST")
	if sameDay(start.In(loc), end.In(loc)) && from != "now" {
		to = end.In(loc).Format("15:04 MST")
	}
	utc := fmt.Sprintf("%s–%s UTC", start.UTC().Format("15:04"), end.UTC().Format("15:04"))
	if !sameDay(start.UTC(), end.UTC()) {
		utc = fmt.Sprintf("%s – %s UTC", start.UTC().Format("Mon 15:04"), end.UTC().Format("Mon 15:04"))
	}
	return fmt.Sprintf("%s – %s (%s), %s", from, to, utc, Countdown(end.Sub(start)))
}

func sameDay(a, b time.Time) bool { return a.Format(time.DateOnly) == b.Format(time.DateOnly) }

// Countdown says a duration as a countdown reads: 2d 4h, 3h 20m, 45m.
func Countdown(d time.Duration) string {
	d = d.Round(time.Minute)
	days := int(d / (24 * time.Hour))
	hours := int(d % (24 * time.Hour) / time.Hour)
	mins := int(d % time.Hour / time.Minute)
	switch {
	case days > 0 && hours == 0:
		return fmt.Sprintf("%dd", days)
	case days > 0:
		return fmt.Sprintf("%dd %dh", days, hours)
	case hours > 0 && mins == 0:
		return fmt.Sprintf("%dh", hours)
	case hours > 0:
		return fmt.Sprintf("%dh %dm", hours, mins)
	}
	return fmt.Sprintf("%dm", mins)
}

// Billing says how long a fleet bills, with its window's total at the estimate.
func (e FleetEstimate) Billing(spec domain.FleetSpec, now time.Time) string {
	if spec.End.IsZero() {
		return "a fleet bills until deleted"
	}
	start := spec.Start
	if !start.After(now) {
		start = now
	}
	hours := spec.End.Sub(start)
	if math.IsNaN(e.USDHour) {
		return fmt.Sprintf("it bills until its end, %s from its start", Countdown(hours))
	}
	return fmt.Sprintf("it bills until its end: about $%.2f for its %s", e.USDHour*hours.Hours(), Countdown(hours))
}

// ScheduleLines are what a confirmation says of a scheduled fleet.
func (s *Service) ScheduleLines(spec domain.FleetSpec, now time.Time) []string {
	if !spec.Scheduled(now) {
		return nil
	}
	return []string{"Window: " + WindowText(spec.Start, spec.End, now), "Schedule: " + KeeperNote(s.Describe(spec.Provider)) + "."}
}

// lateBy is how late a scheduled action may be and still be on time.
const lateBy = 2 * time.Minute

// keepSchedule does what a row's schedule asks now; else due is when it next asks.
func (s *Service) keepSchedule(ctx context.Context, r Entry, now time.Time) (next Entry, handled bool, reason string, due time.Time, err error) {
	sched, ok := ScheduleOf(r)
	if !ok {
		return r, false, "", time.Time{}, nil
	}
	switch {
	case sched.Keeper == KeptByGpumarket && r.State == StateScheduled && r.ProviderRef == "":
		switch {
		case now.Before(sched.Start):
			return r, false, "", sched.Start, nil
		case !sched.End.IsZero() && !now.Before(sched.End):
			r.State = StateFailed
			r.Error = fmt.Sprintf("not launched: no gpumarket with provider %s ran between its start %s and its end %s; nothing was launched or spent",
				r.Provider, sched.Start.UTC().Format(time.RFC3339), sched.End.UTC().Format(time.RFC3339))
			next, err := s.settle(ctx, r, StateScheduled)
			return next, true, "", time.Time{}, err
		}
		next, reason, err := s.launchDue(ctx, r, sched, now)
		return next, true, reason, time.Time{}, err
	case sched.Keeper == KeptByGpumarket && r.State == StateActive && r.ProviderRef != "" && !sched.End.IsZero():
		if now.Before(sched.End) {
			return r, false, "", sched.End, nil
		}
		next, reason, err := s.endDue(ctx, r, sched, now)
		return next, true, reason, time.Time{}, err
	case sched.Keeper == KeptByCloud && r.ProviderRef != "" &&
		(r.State == StateScheduled || (r.State == StateActive && !sched.End.IsZero())):
		// The cloud keeps it: once a date has passed, ask how it went.
		at, what := sched.End, "end"
		if r.State == StateScheduled {
			at, what = sched.Start, "start"
		}
		if now.Before(at) {
			return r, false, "", at, nil
		}
		_, next, err := s.RefreshFleet(ctx, r.ID)
		if err != nil {
			return r, true, fmt.Sprintf("its %s passed at %s; %v", what, at.UTC().Format(time.RFC3339), err), time.Time{}, nil
		}
		if next.State == r.State {
			return next, true, fmt.Sprintf("%s still shows it %s", r.Provider, r.State), time.Time{}, nil
		}
		return next, true, "", time.Time{}, nil
	}
	return r, false, "", time.Time{}, nil
}

// launchDue launches a fleet gpumarket keeps, its start come.
func (s *Service) launchDue(ctx context.Context, r Entry, sched FleetSchedule, now time.Time) (Entry, string, error) {
	p, ok := s.provs[r.Provider]
	if !ok {
		return r, fmt.Sprintf("due at %s, and provider %s is not in use in this run: a gpumarket running with --provider %s launches it",
			sched.Start.UTC().Format(time.RFC3339), r.Provider, r.Provider), nil
	}
	fl, ok := p.(domain.FleetLauncher)
	if !ok {
		return r, fmt.Sprintf("provider %s does not launch fleets", r.Provider), nil
	}
	if p.Describe().Ephemeral && !s.keeping.Load() {
		// A simulated fleet would end with this one-shot process.
		return r, fmt.Sprintf("due at %s: the simulated market lives in a running gpumarket (a TUI or `serve`), which launches it; this command does not",
			sched.Start.UTC().Format(time.RFC3339)), nil
	}
	if err := ctx.Err(); err != nil {
		return r, "", err
	}
	next := r
	next.State, next.Error, next.Start = StatePending, "", now
	// Checked again at its start: the caps or the ledger may have changed.
	var overCap error
	u, err := s.st.UpdateFromChecked(ctx, next, StateScheduled, func(spent Spending) error {
		overCap = s.checkHold(HoldOf(r), spent)
		return overCap
	})
	if overCap != nil {
		r.State = StateFailed
		r.Error = "not launched at its start: " + overCap.Error()
		s.opt.Logger.Warn("a scheduled fleet is over a cap at its start: not launched", "row", r.ID, "err", overCap)
		failed, err := s.settle(ctx, r, StateScheduled)
		return failed, "", err
	}
	if errors.Is(err, ErrConflict) {
		cur, _ := s.st.Get(ctx, r.ID)
		return cur, "another gpumarket is launching it", nil
	}
	if err != nil {
		return r, "", err
	}
	late := now.Sub(sched.Start)
	s.opt.Logger.Info("launching a scheduled fleet", "row", u.ID, "provider", u.Provider, "start", sched.Start, "late", late.Round(time.Second))
	// Once pending, the call runs to its answer even when the loop stops.
	res, err := s.sendFleet(context.WithoutCancel(ctx), fl, u, FleetResult{}, sendScheduled)
	switch {
	case err != nil && res.Row.ID == "":
		return r, "", err
	case res.Row.State == StateUnknown:
		return res.Row, "launched at its start, but the answer was lost: it is looked up by its client token, never re-sent", nil
	case res.Row.State == StateScheduled:
		return res.Row, fmt.Sprintf("not sent: %v", err), nil
	}
	if res.Row.State == StateActive && late > lateBy {
		res.Row.Note = fmt.Sprintf("launched by gpumarket %s after its start: no gpumarket was running then; %s", Countdown(late), KeeperNote(p.Describe()))
		if res.Row, err = s.settle(ctx, res.Row, StateActive); err != nil {
			return res.Row, "", err
		}
	}
	return res.Row, "", nil
}

// endDue deletes a fleet gpumarket keeps, its end come; a failure is retried next pass.
func (s *Service) endDue(ctx context.Context, r Entry, sched FleetSchedule, now time.Time) (Entry, string, error) {
	p, ok := s.provs[r.Provider].(domain.FleetLauncher)
	if !ok {
		return r, fmt.Sprintf("its end %s has passed and it may bill until deleted, and provider %s is not in use in this run: run `gpumarket ledger --provider %s` to delete it",
			sched.End.UTC().Format(time.RFC3339), r.Provider, r.Provider), nil
	}
	if err := ctx.Err(); err != nil {
		return r, "", err
	}
	// Sent, the delete runs to its answer: the row must say whether it bills.
	ctx = context.WithoutCancel(ctx)
	cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	err := p.DeleteFleet(cctx, r.Region, r.ProviderRef)
	timedOut := cctx.Err() != nil
	cancel()
	// A simulated fleet its market does not know ended with its process.
	if err != nil && !(s.Describe(r.Provider).Ephemeral && !timedOut) {
		r.Error = fmt.Sprintf("its end %s has passed but it is still running: delete failed: %v; gpumarket tries again every minute (or `gpumarket fleet delete %s`)",
			sched.End.UTC().Format(time.RFC3339), err, r.ID)
		s.opt.Logger.Warn("delete a fleet at its end", "row", r.ID, "ref", r.ProviderRef, "err", err)
		next, uerr := s.settle(ctx, r, StateActive)
		if uerr != nil {
			return next, "", uerr
		}
		return next, next.Error, nil
	}
	late := now.Sub(sched.End)
	r.State, r.Error, r.End = StateEnded, "", now
	r.Note = "deleted by gpumarket at its end"
	if late > lateBy {
		r.Note = fmt.Sprintf("deleted by gpumarket %s after its end %s: no gpumarket was running then, and it billed until now",
			Countdown(late), sched.End.UTC().Format(time.RFC3339))
		s.opt.Logger.Warn("a scheduled fleet was deleted late", "row", r.ID, "ref", r.ProviderRef, "late", late.Round(time.Second))
	} else {
		s.opt.Logger.Info("deleted a fleet at its end", "row", r.ID, "ref", r.ProviderRef)
	}
	if err != nil {
		r.Note += " (the simulated market no longer knew it: " + err.Error() + ")"
	}
	if r.Start.After(now) {
		r.Start = now
	}
	next, err := s.settle(ctx, r, StateActive)
	return next, "", err
}

// ScheduleDue reports whether a fleet row's schedule asks for something now.
func ScheduleDue(r Entry, now time.Time) bool {
	sched, ok := ScheduleOf(r)
	if !ok {
		return false
	}
	switch r.State {
	case StateScheduled:
		return !now.Before(sched.Start)
	case StateActive:
		return !sched.End.IsZero() && !now.Before(sched.End)
	}
	return false
}
