package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// legacyInFlight is how long an ownerless pending row counts as in flight, in every process.
const legacyInFlight = DefaultTimeout + 30*time.Second

// inFlight reports whether a pending row's call is live, by its owner's lock or heartbeat.
func (s *Service) inFlight(r Entry) (bool, string) {
	if r.State != StatePending {
		return false, ""
	}
	now := s.opt.Now()
	switch l, why := s.st.CallLiveness(r, now); l {
	case OwnerAlive:
		return true, why
	case OwnerGone:
		return false, why
	}
	if now.Sub(r.UpdatedAt) < legacyInFlight {
		return true, fmt.Sprintf("recorded %s ago by a process that names no owner", now.Sub(r.UpdatedAt).Round(time.Second))
	}
	return false, "no owner recorded and older than any call lasts"
}

// Unsettled is a row a reconciliation could not settle, and why.
type Unsettled struct {
	Row    Entry
	Reason string
}

// ReconcileReport is what Reconcile did.
type ReconcileReport struct {
	// Settled are rows whose outcome was found or whose dates moved them along.
	Settled   []Entry
	Unsettled []Unsettled
	// NextDue is when a schedule next asks for something; Keep wakes then.
	NextDue time.Time
}

// add files a row as settled, or unsettled for reason.
func (r *ReconcileReport) add(row Entry, reason string) {
	if reason == "" {
		r.Settled = append(r.Settled, row)
	} else {
		r.Unsettled = append(r.Unsettled, Unsettled{Row: row, Reason: reason})
	}
}

// due keeps the earliest time something is due.
func (r *ReconcileReport) due(t time.Time) {
	if !t.IsZero() && (r.NextDue.IsZero() || t.Before(r.NextDue)) {
		r.NextDue = t
	}
}

// Reconcile settles what it can; a row its provider does not show stays unknown.
func (s *Service) Reconcile(ctx context.Context) (ReconcileReport, error) {
	var rep ReconcileReport
	if s.st.ReadOnly() {
		return rep, fmt.Errorf("reconcile: %w: nothing can be settled or released here", ErrReadOnly)
	}
	s.remember(ctx)
	rows, err := s.st.List(ctx)
	if err != nil {
		return rep, err
	}
	now := s.opt.Now()
	for _, r := range rows {
		if err := s.reconcileOne(ctx, r, now, &rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// reconcileOne files what Reconcile does with one row in rep.
func (s *Service) reconcileOne(ctx context.Context, r Entry, now time.Time, rep *ReconcileReport) error {
	// settled files a row moved along from state from.
	settled := func(next Entry, from string) error {
		next, err := s.settle(ctx, next, from)
		if err == nil {
			rep.Settled = append(rep.Settled, next)
		}
		return err
	}
	if windowOver(r, now) {
		return s.endWindow(ctx, r, rep)
	}
	if !r.Settled() {
		if ok, why := s.inFlight(r); ok {
			rep.Unsettled = append(rep.Unsettled, Unsettled{Row: r, Reason: "the call is still in flight: " + why})
			return nil
		}
		next, ok, reason := s.reconcileRow(ctx, r)
		switch {
		case !ok:
			rep.Unsettled = append(rep.Unsettled, Unsettled{Row: next, Reason: reason})
		case windowOver(next, now):
			// Found only after its window ended: released now.
			return s.endWindow(ctx, next, rep)
		default:
			rep.Settled = append(rep.Settled, next)
		}
		return ctx.Err()
	}
	if next, ended := s.endedWithProcess(ctx, r); ended {
		return settled(next, r.State)
	}
	next, handled, reason, due, err := s.keepSchedule(ctx, r, now)
	switch {
	case err != nil:
		return err
	case handled:
		rep.add(next, reason)
		return nil
	}
	rep.due(due)
	if next := advance(r, now); next.State != r.State {
		return settled(next, r.State)
	}
	return nil
}

// endWindow ends a reservation whose window is over, filing it in rep.
func (s *Service) endWindow(ctx context.Context, r Entry, rep *ReconcileReport) error {
	next, reason, err := s.endReservation(ctx, r)
	if err == nil {
		rep.add(next, reason)
	}
	return err
}

// reconcileRow looks one unsettled row up: the row, whether settled, and why not.
func (s *Service) reconcileRow(ctx context.Context, r Entry) (Entry, bool, string) {
	if r.State == StatePending {
		// Its sender is gone: unknown until the provider says.
		_, why := s.inFlight(r)
		r.State = StateUnknown
		if r.Error == "" {
			r.Error = "no outcome recorded: the process stopped between intent and answer (" + why + ")"
		}
		u, err := s.settle(ctx, r, StatePending)
		if err != nil {
			return r, false, err.Error()
		}
		if u.State != StateUnknown {
			return u, u.Settled(), "the call is still in flight" // its own process answered meanwhile
		}
		r = u
	}
	switch {
	case Booked(r.Kind):
		return s.reconcileBlock(ctx, r)
	case r.Kind == KindFleet:
		return s.reconcileFleet(ctx, r)
	}
	return r, false, fmt.Sprintf("gpumarket cannot look up a %s row", r.Kind)
}

func (s *Service) reconcileBlock(ctx context.Context, r Entry) (Entry, bool, string) {
	b, err := ability[domain.Booker](s, r.Provider, "does not sell capacity blocks")
	if err != nil {
		return r, false, err.Error()
	}
	o, err := offeringOf(r)
	if err != nil {
		return r, false, err.Error()
	}
	cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	found, err := b.FindBooking(cctx, domain.BookRequest{Offering: o, After: r.CreatedAt, Ref: r.ID})
	var next *Entry
	if err == nil && found != nil {
		next = new(settleBlock(r, *found, s.opt.Now()))
	}
	// A purchase the simulated market does not know was lost with its process.
	u, settled, reason := s.lookedUp(ctx, r, "purchase", err, next, o.Simulated || s.Describe(r.Provider).Ephemeral,
		fmt.Sprintf("%s shows no reservation for %s %s×%d from %s yet; left unknown (never retried): check again later or in the console",
			r.Provider, r.Zone, r.InstanceType, r.InstanceCount, r.Start.UTC().Format(time.RFC3339)))
	if next != nil && settled {
		s.opt.Logger.Info("reconciled purchase", "row", r.ID, "ref", u.ProviderRef, "state", u.State)
	}
	return u, settled, reason
}

func (s *Service) reconcileFleet(ctx context.Context, r Entry) (Entry, bool, string) {
	p, ok := s.provs[r.Provider]
	if !ok {
		return r, false, fmt.Sprintf("provider %s is not in use in this run (add it to --provider)", r.Provider)
	}
	// The simulated market knows every fleet its process launched.
	lost := p.Describe().Ephemeral
	f, ok := p.(domain.FleetFinder)
	if !ok {
		return s.lookedUp(ctx, r, "launch", nil, nil, lost,
			fmt.Sprintf("%s cannot look a fleet up by its client token %s; left unknown: check the console", r.Provider, r.IdemKey))
	}
	cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	fl, err := f.FindFleet(cctx, r.Region, r.IdemKey)
	var next *Entry
	if err == nil && fl != nil {
		// Found after its answer was lost: it has run since its launch.
		next = new(r)
		next.Start = cmp.Or(next.Start, next.CreatedAt)
		*next = settleFleet(*next, *fl, s.opt.Now())
	}
	return s.lookedUp(ctx, r, "launch", err, next, lost,
		fmt.Sprintf("%s shows no fleet with client token %s yet; left unknown (never retried)", r.Provider, r.IdemKey))
}

// lookedUp settles an unknown row by its provider's look-up: next is the row found, nil when not found;
// lost fails it, as the simulated market lost it with its process (nothing was spent); else it stays unknown.
func (s *Service) lookedUp(ctx context.Context, r Entry, what string, err error, next *Entry, lost bool, missing string) (Entry, bool, string) {
	found := next != nil
	switch {
	case err != nil:
		return r, false, fmt.Sprintf("look-up at %s failed: %v", r.Provider, err)
	case !found && !lost:
		return r, false, missing
	case !found:
		next = new(r)
		next.State = StateFailed
		next.Error = "simulated market: the " + what + " was lost with the process that sent it; nothing was spent"
	}
	u, err := s.settle(ctx, *next, StateUnknown)
	if err != nil {
		return r, false, err.Error()
	}
	return u, found || u.Settled(), ""
}

// endedWithProcess ends a simulated fleet whose launching process has ended.
func (s *Service) endedWithProcess(ctx context.Context, r Entry) (Entry, bool) {
	if r.Kind != KindFleet || r.ProviderRef == "" || (r.State != StateActive && r.State != StateScheduled) {
		return r, false
	}
	p, ok := s.provs[r.Provider]
	if !ok || !p.Describe().Ephemeral {
		return r, false
	}
	why := ""
	switch l, how := s.st.ProcessLiveness(r.Owner); l {
	case OwnerAlive:
		return r, false
	case OwnerGone:
		why = how
	default:
		if r.Owner != "" {
			return r, false // on another host: only it can tell
		}
		fl, ok := p.(domain.FleetLauncher)
		if !ok {
			return r, false
		}
		cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
		_, err := fl.DescribeFleet(cctx, r.Region, r.ProviderRef)
		cancel()
		if err == nil || ctx.Err() != nil || cctx.Err() != nil {
			return r, false
		}
		why = "this process's simulated market does not know it"
	}
	r.State, r.Error = StateEnded, ""
	r.Note = simFleetGone + " (" + why + ")"
	return fleetDates(r, s.opt.Now()), true
}

// windowOver reports whether a held reservation's window ended: it bills until released.
func windowOver(r Entry, now time.Time) bool {
	return r.Kind == KindReservation && r.ProviderRef != "" && !r.End.IsZero() && !now.Before(r.End) &&
		(r.State == StateScheduled || r.State == StateActive)
}

// endReservation ends a reservation whose window is over; reason is "" once ended.
func (s *Service) endReservation(ctx context.Context, r Entry) (Entry, string, error) {
	p, ok := s.provs[r.Provider]
	if !ok {
		if from := r.State; from != StateActive {
			next := r
			next.State = StateActive
			var err error
			if r, err = s.settle(ctx, next, from); err != nil {
				return r, "", err
			}
		}
		return r, fmt.Sprintf("window ended %s; the reservation may bill until it is released, and provider %s is not in use in this run: run `gpumarket ledger --provider %s` to release it",
			r.End.UTC().Format(time.RFC3339), r.Provider, r.Provider), nil
	}
	if _, ok := p.(domain.BookingReleaser); !ok {
		from := r.State
		r.State = StateEnded
		next, err := s.settle(ctx, r, from)
		return next, "", err
	}
	next, err := s.release(ctx, r)
	if err != nil || next.State == StateEnded {
		return next, "", err
	}
	return next, next.Error, nil
}

// release releases an ended reservation; a failure leaves it active, billing, with the reason.
func (s *Service) release(ctx context.Context, r Entry) (Entry, error) {
	rel := s.provs[r.Provider].(domain.BookingReleaser)
	cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	from := r.State
	err := rel.ReleaseBooking(cctx, bookingOf(r))
	r.State, r.Error = StateEnded, ""
	if err != nil {
		r.State = StateActive
		r.Error = fmt.Sprintf("window ended %s but the reservation is still billing: release failed: %v", r.End.UTC().Format(time.RFC3339), err)
		s.opt.Logger.Warn("release reservation", "row", r.ID, "ref", r.ProviderRef, "err", err)
	} else {
		s.opt.Logger.Info("released reservation at the end of its window", "row", r.ID, "ref", r.ProviderRef)
	}
	return s.settle(ctx, r, from)
}

// keepMinWait is the shortest wait between two passes of Keep.
const keepMinWait = 100 * time.Millisecond

// Keep reconciles now and every interval until ctx ends, waking early for NextDue.
func (s *Service) Keep(ctx context.Context, every time.Duration) {
	s.keeping.Store(true)
	for {
		rep, err := s.Reconcile(ctx)
		if errors.Is(err, ErrReadOnly) {
			s.opt.Logger.Warn("no periodic reconciliation: the ledger is read-only here", "err", err)
			return
		}
		if err != nil && ctx.Err() == nil {
			s.opt.Logger.Warn("periodic reconciliation", "err", err)
		}
		wait := every
		if !rep.NextDue.IsZero() {
			// At the due time, but never spinning on a clock not quite there.
			wait = min(wait, max(rep.NextDue.Sub(s.opt.Now()), keepMinWait))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// NeedsReconcile reports whether r needs its own provider (descriptor d) to reconcile: an unsettled row is looked up,
// an ended reservation released (it bills until then), a simulated fleet found ended, a due schedule kept there.
func NeedsReconcile(r Entry, d domain.Descriptor, now time.Time) bool {
	ephemeralFleet := r.Kind == KindFleet && r.State == StateActive && d.Ephemeral
	return !r.Settled() || windowOver(r, now) || ephemeralFleet || ScheduleDue(r, now)
}
