package ledger

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/fanout"
)

// FleetEstimate is a fleet's expected cost per hour; HoldOf holds it over its window.
type FleetEstimate struct {
	// USDHour is the whole fleet's expected cost per hour; NaN if unknown.
	USDHour float64
	// Basis says where the figure comes from, for the row and the screen.
	Basis string
	// GPUs counts the fleet's GPUs (target × GPUs of the first type).
	GPUs float64
	// PricedGPUs are the GPUs USDHour prices, the base of $ per GPU-hour; 0 when unknown.
	PricedGPUs float64
}

// Note is the cost note of a fleet row: what its hourly estimate rests on.
func (e FleetEstimate) Note() string { return "estimate at " + e.Basis }

// unknownPrices begins the basis of an estimate whose USDHour is NaN.
const unknownPrices = "unknown prices"

// EstimateFleet prices a fleet at current prices, spot at its dearest pool; NaN when unknown.
func (s *Service) EstimateFleet(ctx context.Context, spec domain.FleetSpec) FleetEstimate {
	est := FleetEstimate{USDHour: math.NaN(), Basis: unknownPrices}
	if len(spec.InstanceTypes) > 0 {
		est.GPUs = gpusOf(spec.InstanceTypes[0]) * float64(spec.TargetCapacity)
	}
	p, ok := s.provs[spec.Provider]
	if !ok {
		return est
	}
	want := map[string]bool{}
	for _, t := range spec.InstanceTypes {
		want[strings.ToLower(t)] = true
	}
	cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	q := domain.Query{Providers: []string{spec.Provider}, Regions: []string{spec.Region}}
	l, err := domain.ReadLatest(cctx, p, q, s.opt.Now(), 6*time.Hour)
	cancel()
	latest := map[string]float64{} // on-demand $/h by lower-cased type
	for _, pl := range l.Pools {
		if k := strings.ToLower(pl.InstanceType); want[k] && pl.OnDemandUSDHour != nil {
			latest[k] = *pl.OnDemandUSDHour
		}
	}
	var spot, ond float64
	var spotPool domain.PoolKey
	var ondType string
	// The price in force is each pool's latest point; the fleet may land in any.
	for k, pt := range l.Prices {
		// The spec's zones; none means all.
		if !want[strings.ToLower(k.InstanceType)] || (len(spec.Zones) > 0 && !slices.Contains(spec.Zones, k.Zone)) {
			continue
		}
		if pt.USDHour > spot || (pt.USDHour == spot && k.String() < spotPool.String()) {
			spot, spotPool = pt.USDHour, k
		}
	}
	for t, v := range latest {
		if v > ond || (v == ond && t < ondType) {
			ond, ondType = v, t
		}
	}
	basis := fmt.Sprintf("current prices in %s ($%.4f/h spot, %s %s", spec.Region, spot, spotPool.InstanceType, zoneOf(spotPool))
	if spec.MaxPriceUSD != nil && (spot == 0 || *spec.MaxPriceUSD < spot) {
		spot = *spec.MaxPriceUSD
		basis = fmt.Sprintf("the max price ($%.4f/h spot", spot)
		spotPool = domain.PoolKey{} // any type may pay it
	}
	if spot == 0 {
		if err != nil {
			est.Basis += ": " + err.Error()
		}
		return est
	}
	base := min(spec.OnDemandBase, spec.TargetCapacity)
	switch {
	case ond == 0 && base > 0:
		est.Basis = fmt.Sprintf("%s: no on-demand price in %s for the %d on-demand instances", unknownPrices, spec.Region, base)
		return est
	case ond == 0:
		basis += ")"
	default:
		basis += fmt.Sprintf("; $%.4f/h on-demand, %s)", ond, typeNamed(spec.InstanceTypes, ondType))
	}
	est.USDHour = float64(base)*ond + float64(spec.TargetCapacity-base)*spot
	est.Basis = basis
	// Spot priced at the max price counts the fewest GPUs of any type: any may pay it.
	fewest := math.Inf(1)
	for _, t := range spec.InstanceTypes {
		if g := gpusOf(t); g > 0 {
			fewest = min(fewest, g)
		}
	}
	priced := func(t string) float64 { return cmp.Or(gpusOf(t), fewest) }
	if g := float64(base)*priced(ondType) + float64(spec.TargetCapacity-base)*priced(spotPool.InstanceType); g > 0 && !math.IsInf(g, 0) {
		est.PricedGPUs = g
	}
	return est
}

// gpusOf is an instance type's GPUs, 0 when unknown.
func gpusOf(t string) float64 {
	e, _ := domain.LookupGPU(t)
	return e.GPU.Count
}

// zoneOf names a pool's zone with its region, or the region when it has none.
func zoneOf(k domain.PoolKey) string {
	switch {
	case k.Zone == "":
		return k.Region
	case strings.HasPrefix(k.Zone, k.Region):
		return k.Zone
	}
	return k.Region + "/" + k.Zone
}

// typeNamed is the type of lower-cased name lower as the spec spells it.
func typeNamed(types []string, lower string) string {
	for _, t := range types {
		if strings.ToLower(t) == lower {
			return t
		}
	}
	return lower
}

// FleetRequest asks to launch a fleet.
type FleetRequest struct {
	Spec domain.FleetSpec
	// Estimate is the cost shown; NaN or zero means the service estimates it.
	Estimate FleetEstimate
	Actor    string
	Again    bool // a fleet on the same terms as one scheduled or running is meant
	// Job is the job the launch is for: its hold already counts against the cap.
	Job string
}

// ErrEstimateChanged is matched by an *EstimateChangedError.
var ErrEstimateChanged = errors.New("the fleet's estimated cost went up")

// EstimateChangedError refuses a launch whose prices rose since shown; Now is the new estimate.
type EstimateChangedError struct {
	Shown, Now FleetEstimate
}

func (e *EstimateChangedError) Error() string {
	return fmt.Sprintf("refused: the fleet's prices went up since they were shown: now about $%.2f per hour (%s), shown $%.2f; nothing was launched: look at the new estimate and confirm again",
		e.Now.USDHour, e.Now.Basis, e.Shown.USDHour)
}

// Is lets errors.Is(err, ErrEstimateChanged) match.
func (e *EstimateChangedError) Is(target error) bool { return target == ErrEstimateChanged }

// FleetResult is a launch's outcome.
type FleetResult struct {
	Row      Entry
	Fleet    domain.Fleet
	Estimate FleetEstimate
	DryRun   bool
}

// Short says what of a launched fleet did not launch, or "".
func (r FleetResult) Short() string {
	if r.Row.State != StateActive || r.Fleet.Target == 0 || r.Fleet.Instances >= r.Fleet.Target || r.Fleet.Message == "" {
		return ""
	}
	return r.Fleet.Message
}

// CheckFleet validates a fleet spec, naming the field and what is accepted.
func CheckFleet(spec domain.FleetSpec) error {
	switch {
	case spec.Region == "":
		return errors.New("fleet: region is required")
	case len(spec.InstanceTypes) == 0:
		return errors.New("fleet: at least one instance type is required")
	}
	if err := spec.CheckTerms(); err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	return nil
}

// LaunchFleet launches a fleet through the ledger (docs/DESIGN.md, "Money").
func (s *Service) LaunchFleet(ctx context.Context, req FleetRequest) (FleetResult, error) {
	spec := req.Spec
	if req.Job != "" {
		req.Again = true // a job moves its own fleets: several alike are meant
	}
	spec.Strategy = cmp.Or(spec.Strategy, domain.Strategies[0])
	if err := CheckFleet(spec); err != nil {
		return FleetResult{}, err
	}
	if !spec.Start.After(s.opt.Now()) {
		// A start that has come (a confirmation left open past it) is now.
		spec.Start = time.Time{}
	}
	if err := spec.CheckSchedule(s.opt.Now()); err != nil {
		return FleetResult{}, err
	}
	res := FleetResult{DryRun: spec.DryRun}
	fl, err := ability[domain.FleetLauncher](s, spec.Provider, "does not launch fleets")
	if err != nil {
		return res, err
	}
	if !spec.DryRun && s.st.ReadOnly() {
		return res, fmt.Errorf("refused: %w, and a launch is recorded before it is sent; nothing was launched", ErrReadOnly)
	}
	// An unsettled launch of the same fleet is looked up or re-sent, before the budget.
	if !spec.DryRun && spec.ClientToken == "" {
		prev, err := s.openFleet(ctx, spec)
		if err != nil {
			return res, err
		}
		if prev != nil {
			again, retry, err := s.fleetAgain(ctx, *prev)
			if !retry {
				res.Row = again
				return res, err
			}
			return s.sendFleet(ctx, fl, again, res, sendAgain)
		}
	}
	b := s.opt.Budget
	capped := b.MaxBookingUSD > 0 || b.MaxDailyUSD > 0
	est, err := s.launchEstimate(ctx, spec, req.Estimate, capped)
	res.Estimate = est
	if err != nil {
		return res, err
	}
	now := s.opt.Now()
	spec.Actor = cmp.Or(req.Actor, s.opt.Actor)
	// A spec the cloud's API would refuse is refused before a row is written.
	if v, ok := fl.(domain.FleetValidator); ok {
		if spec, err = v.ValidateFleet(spec); err != nil {
			return res, fmt.Errorf("fleet refused before any call: %w", err)
		}
	}
	intent := s.fleetIntent(spec, est, now)
	// With no cap, a fleet of unknown prices may launch (its row says so).
	check := func(spent Spending) error {
		switch {
		case !capped:
			return nil
		case req.Job != "":
			// The job's hold covers the day: only the per-purchase cap applies.
			return s.checkHold(Hold{Whole: est.USDHour}, nil)
		}
		return s.checkHold(HoldOf(intent), spent)
	}
	overCap := check(func(day time.Time) (float64, error) { return s.st.DaySpent(ctx, day) })
	if overCap != nil && !spec.DryRun {
		return res, overCap
	}
	if spec.DryRun {
		if !req.Again && overCap == nil {
			// Said before anyone confirms; the launch checks again under the lock.
			overCap = s.duplicateOf(ctx, spec, intent)
		}
		return s.dryRunFleet(ctx, fl, spec, res, overCap)
	}
	return s.recordFleet(ctx, fl, spec, intent, req.Again, check, res)
}

// launchEstimate is the estimate a launch is checked at, read again under a cap.
func (s *Service) launchEstimate(ctx context.Context, spec domain.FleetSpec, est FleetEstimate, capped bool) (FleetEstimate, error) {
	switch {
	case math.IsNaN(est.USDHour) || est.USDHour <= 0:
		est = s.EstimateFleet(ctx, spec)
	case capped && !spec.DryRun:
		now := s.EstimateFleet(ctx, spec)
		switch {
		case math.IsNaN(now.USDHour):
			// Not to be had now: the one shown stands.
		case cents(now.USDHour) > cents(est.USDHour):
			return now, &EstimateChangedError{Shown: est, Now: now}
		default:
			est = now
		}
	}
	if math.IsNaN(est.USDHour) && capped {
		return est, fmt.Errorf("refused: the fleet's cost is unknown (%s), so the budget cannot be checked; pass a max price", est.Basis)
	}
	return est, nil
}

// dryRunFleet sends only the dry-run call, returning overCap with its answer.
func (s *Service) dryRunFleet(ctx context.Context, fl domain.FleetLauncher, spec domain.FleetSpec, res FleetResult, overCap error) (FleetResult, error) {
	cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	f, err := fl.LaunchFleet(cctx, spec)
	if err != nil {
		return res, fmt.Errorf("dry run of the fleet at %s: %w", spec.Provider, err)
	}
	f.DryRun = true
	res.Fleet = f
	return res, overCap
}

// recordFleet commits the intent under the ledger's lock, then sends it (or leaves it scheduled).
func (s *Service) recordFleet(ctx context.Context, fl domain.FleetLauncher, spec domain.FleetSpec, intent Entry, again bool, check func(Spending) error, res FleetResult) (FleetResult, error) {
	spec.ClientToken = cmp.Or(spec.ClientToken, intent.ID)
	desc := s.Describe(spec.Provider)
	reqJSON, err := json.Marshal(fleetRequest{FleetSpec: spec, Keeper: intent.Schedule.Keeper})
	if err != nil {
		return res, fmt.Errorf("launch fleet: %w", err)
	}
	intent.Request, intent.IdemKey = reqJSON, spec.ClientToken
	later := intent.Schedule.Keeper == KeptByGpumarket && spec.Start.After(intent.CreatedAt)
	if intent.Schedule.Keeper != "" {
		intent.Note = "schedule: " + KeeperNote(desc)
	}
	if later {
		intent.State = StateScheduled
	}
	row, err := s.st.RecordIntent(ctx, intent, func(spent Spending, existing *Entry, live []Entry) error {
		if existing != nil {
			return nil
		}
		for _, o := range live {
			switch {
			case (o.State == StatePending || o.State == StateUnknown) && asks(o, spec, false):
				// Another process recorded the same fleet since openFleet looked.
				return fmt.Errorf("refused: a launch of the same fleet is in flight (ledger row %s, by %s); it is not sent twice", o.ID, o.Actor)
			case !again && sameTerms(o, intent):
				return duplicateFleet(o)
			}
		}
		return check(spent)
	})
	if err != nil {
		var dup *DuplicateError
		if errors.As(err, &dup) {
			return res, fmt.Errorf("refused: a fleet with client token %s is already in the ledger: row %s (%s, state %s)",
				spec.ClientToken, dup.Existing.ID, dup.Existing.ProviderRef, dup.Existing.State)
		}
		return res, err
	}
	if later {
		s.opt.Logger.Info("fleet scheduled: gpumarket launches it at its start", "row", row.ID, "provider", spec.Provider, "start", spec.Start, "end", spec.End)
		res.Row = row
		res.Fleet = domain.Fleet{Provider: spec.Provider, Region: spec.Region, State: StateScheduled, Target: spec.TargetCapacity,
			Message: "scheduled: " + WindowText(spec.Start, spec.End, intent.CreatedAt) + "; " + KeeperNote(desc)}
		return res, nil
	}
	s.opt.Logger.Info("launch intent recorded", "row", row.ID, "provider", spec.Provider, "region", spec.Region, "usd_hour", intent.USDHour)
	return s.sendFleet(ctx, fl, row, res, sendFresh)
}

// What a launch cancelled before its call leaves in its row: a new intent failed (nothing was sent),
// a re-send of a lost answer unknown again, a scheduled launch scheduled again.
var (
	sendFresh     = [2]string{StateFailed, "not sent: cancelled before the call; nothing was launched"}
	sendAgain     = [2]string{StateUnknown, "no answer to the first launch; its re-send was cancelled before the call"}
	sendScheduled = [2]string{StateScheduled, ""}
)

// sendFleet makes the launch call of a recorded intent and records its outcome.
func (s *Service) sendFleet(ctx context.Context, fl domain.FleetLauncher, row Entry, res FleetResult, cancelled [2]string) (FleetResult, error) {
	res.Row = row
	var spec domain.FleetSpec
	if err := json.Unmarshal(row.Request, &spec); err != nil {
		s.st.EndCall(row.ID)
		return res, fmt.Errorf("ledger row %s: stored fleet: %w", row.ID, err)
	}
	var err error
	res.Row, err = s.transact(ctx, row, transaction{
		provider: spec.Provider, noun: "launch", subject: "fleet launch", made: "launched",
		cancelled: cancelled,
		call: func(cctx context.Context) (func(Entry) Entry, string, error) {
			f, err := fl.LaunchFleet(cctx, spec)
			if err == nil {
				res.Fleet = f
			}
			return func(r Entry) Entry { return settleFleet(r, f, s.opt.Now()) }, f.ID, err
		},
	})
	return res, err
}

// openFleet returns the newest unsettled row asking for the same fleet, or nil.
func (s *Service) openFleet(ctx context.Context, spec domain.FleetSpec) (*Entry, error) {
	rows, err := s.st.List(ctx, StatePending, StateUnknown)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if r.Kind == KindFleet && asks(r, spec, false) {
			return &r, nil
		}
	}
	return nil, nil
}

// fleetIntent is the pending row of a fleet launch at now.
func (s *Service) fleetIntent(spec domain.FleetSpec, est FleetEstimate, now time.Time) Entry {
	var cloud string
	if e, ok := domain.LookupGPU(spec.InstanceTypes[0]); ok {
		cloud = string(e.Cloud)
	}
	r := Entry{
		ID: NewID(now), Kind: KindFleet, Provider: spec.Provider, Cloud: cloud, Region: spec.Region,
		Zone: strings.Join(spec.Zones, ","), InstanceType: strings.Join(spec.InstanceTypes, ","),
		InstanceCount: spec.TargetCapacity, GPUCount: est.GPUs, CostUSD: math.NaN(), USDHour: est.USDHour, CostNote: est.Note(),
		State: StatePending, Actor: spec.Actor, CreatedAt: now, Start: spec.Start, End: spec.End,
	}
	if spec.Scheduled(now) {
		r.Schedule = FleetSchedule{Start: spec.Start, End: spec.End, Keeper: KeeperOf(s.Describe(spec.Provider))}
	}
	return r
}

// sameTerms reports whether a scheduled or running row is the intent's fleet over an overlapping time.
func sameTerms(r, intent Entry) bool {
	if r.State != StateScheduled && r.State != StateActive {
		return false
	}
	var b domain.FleetSpec
	if json.Unmarshal(intent.Request, &b) != nil || !asks(r, b, true) {
		return false
	}
	from1, until1 := runWindow(r)
	from2, until2 := runWindow(intent)
	return (until2.IsZero() || from1.Before(until2)) && (until1.IsZero() || from2.Before(until1))
}

// duplicateOf refuses a fleet on the same terms as a scheduled or running one.
func (s *Service) duplicateOf(ctx context.Context, spec domain.FleetSpec, intent Entry) error {
	rows, err := s.st.List(ctx, StateScheduled, StateActive)
	if err != nil {
		return err
	}
	intent.Request, _ = json.Marshal(spec)
	for _, o := range rows {
		if sameTerms(o, intent) {
			return duplicateFleet(o)
		}
	}
	return nil
}

func duplicateFleet(o Entry) error {
	return fmt.Errorf("refused: a fleet on the same terms is already %s over the same time: ledger row %s (%s); nothing was launched — "+
		"to launch another one like it, say so: `fleet launch … --again`", o.State, o.ID, cmp.Or(o.ProviderRef, "not launched yet"))
}

// runWindow is from a row's asked start (else its launch) to its asked end.
func runWindow(r Entry) (from, until time.Time) {
	from = r.Schedule.Start
	if from.IsZero() {
		from = r.CreatedAt
	}
	return from, r.Schedule.End
}

// asks reports whether a fleet row asks for spec, client token aside (and its window, anyTime).
func asks(r Entry, spec domain.FleetSpec, anyTime bool) bool {
	var got domain.FleetSpec
	if r.Kind != KindFleet || json.Unmarshal(r.Request, &got) != nil {
		return false
	}
	for _, s := range []*domain.FleetSpec{&got, &spec} {
		s.ClientToken, s.DryRun, s.Actor = "", false, ""
		if anyTime {
			s.Start, s.End = time.Time{}, time.Time{}
		}
	}
	a, err1 := json.Marshal(got)
	b, err2 := json.Marshal(spec)
	return err1 == nil && err2 == nil && string(a) == string(b)
}

// fleetAgain decides whether an unsettled row's fleet is refused or re-sent (retry).
func (s *Service) fleetAgain(ctx context.Context, prev Entry) (row Entry, retry bool, err error) {
	if ok, why := s.inFlight(prev); ok {
		return prev, false, fmt.Errorf("refused: a launch of the same fleet is in flight (ledger row %s, by %s: %s); it is not sent twice", prev.ID, prev.Actor, why)
	}
	r, settled, reason := s.reconcileRow(ctx, prev)
	if settled {
		if r.State == StateFailed {
			return r, false, fmt.Errorf("refused for now: the earlier launch of the same fleet (ledger row %s) turned out failed (%s); run the command again to launch it", r.ID, r.Error)
		}
		return r, false, fmt.Errorf("refused: the earlier launch of the same fleet, whose answer was lost, did land: ledger row %s (%s, state %s); nothing new was launched — run the command again with --again to launch another",
			r.ID, r.ProviderRef, r.State)
	}
	if r.State != StateUnknown {
		return r, false, fmt.Errorf("refused: a launch of the same fleet is in flight (ledger row %s, by %s); it is not sent twice (%s)", r.ID, r.Actor, reason)
	}
	// Not found: re-send under the same token, if no one else did meanwhile.
	next := r
	next.State, next.Error = StatePending, ""
	u, err := s.st.UpdateFrom(ctx, next, StateUnknown)
	if errors.Is(err, ErrConflict) {
		cur, _ := s.st.Get(ctx, r.ID)
		return cur, false, fmt.Errorf("refused: a launch of the same fleet is in flight (ledger row %s, state %s); it is not sent twice", r.ID, cur.State)
	}
	if err != nil {
		return r, false, err
	}
	s.opt.Logger.Info("re-sending a launch whose answer was lost, under its own client token", "row", u.ID, "token", u.IdemKey, "reason", reason)
	return u, true, nil
}

// fleetRowState is a provider's state in the ledger's words: its pending is active.
func fleetRowState(state string) string {
	if state == "" || state == StatePending {
		return StateActive
	}
	return state
}

// settleFleet writes what a Fleet says into a row, at now.
func settleFleet(r Entry, f domain.Fleet, now time.Time) Entry {
	if f.ID != "" {
		r.ProviderRef = f.ID
	}
	r.State = fleetRowState(f.State)
	if r.State != StateFailed {
		r.Error = ""
	} else if f.Message != "" {
		r.Error = f.Message
	}
	return fleetDates(r, now)
}

// fleetDates dates a fleet row by its state.
func fleetDates(r Entry, now time.Time) Entry {
	switch r.State {
	case StateActive:
		if r.Start.IsZero() {
			r.Start = now
		}
	case StateEnded, StateDeleted:
		if r.ProviderRef == "" {
			return r // never launched: the window it was asked for stays, for the record
		}
		if r.Start.IsZero() {
			r.Start = r.CreatedAt // it ran from its launch, as far as anyone knows
		}
		if r.Start.After(now) {
			r.Start = now // ended before its scheduled start: it never ran
		}
		// Found over after its window's end, it ended then; deleted before, now.
		if r.End.IsZero() || r.End.After(now) {
			r.End = now
		}
	}
	return r
}

// FleetRow finds a fleet's ledger row by its row id or provider id.
func (s *Service) FleetRow(ctx context.Context, id string) (Entry, error) {
	r, err := s.st.Get(ctx, id)
	if err != nil {
		if r, err = s.st.FindByRef(ctx, id); err != nil {
			return Entry{}, fmt.Errorf("no fleet %q in the ledger (give its ledger id or fleet id)", id)
		}
	}
	if r.Kind != KindFleet {
		return Entry{}, fmt.Errorf("ledger row %s is a %s, not a fleet", r.ID, r.Kind)
	}
	return r, nil
}

// DeleteFleet deletes a launched fleet and records it; deleting again is safe.
func (s *Service) DeleteFleet(ctx context.Context, id, actor string) (Entry, error) {
	r, err := s.FleetRow(ctx, id)
	if err != nil {
		return r, err
	}
	switch {
	case r.State == StateDeleted:
		return r, fmt.Errorf("fleet %s is already deleted", r.ProviderRef)
	case r.ProviderRef == "" && r.State == StateScheduled:
		return s.cancelScheduled(ctx, r, actor)
	case r.ProviderRef == "":
		return r, fmt.Errorf("ledger row %s has no fleet id (state %s): reconcile it first with `gpumarket ledger`", r.ID, r.State)
	}
	p, err := s.launcher(r.Provider)
	if err != nil {
		return r, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	if err := p.DeleteFleet(cctx, r.Region, r.ProviderRef); err != nil {
		if s.Describe(r.Provider).Ephemeral && cctx.Err() == nil {
			// A simulated fleet lives in its process: gone with it, nothing bills.
			r.State, r.Error = StateDeleted, ""
			r.Note = simFleetGone + " (" + err.Error() + ")"
			return s.st.Update(context.WithoutCancel(ctx), fleetDates(r, s.opt.Now()))
		}
		return r, fmt.Errorf("delete fleet %s: %w (the ledger still shows it %s; deleting again is safe)", r.ProviderRef, err, r.State)
	}
	// A delete is news, not an error: who did it goes to the note.
	r.State, r.Error, r.Note = StateDeleted, "", "deleted"
	if actor != "" {
		r.Note = "deleted by " + actor
	}
	return s.st.Update(context.WithoutCancel(ctx), fleetDates(r, s.opt.Now()))
}

// cancelScheduled deletes a fleet not yet launched, unless the loop took it meanwhile.
func (s *Service) cancelScheduled(ctx context.Context, r Entry, actor string) (Entry, error) {
	if s.st.ReadOnly() {
		return r, fmt.Errorf("cancel scheduled fleet %s: %w", r.ID, ErrReadOnly)
	}
	r.State, r.Error, r.Note = StateDeleted, "", "cancelled before its start; nothing was launched or spent"
	if actor != "" {
		r.Note = "cancelled by " + actor + " before its start; nothing was launched or spent"
	}
	next, err := s.st.UpdateFrom(ctx, r, StateScheduled)
	if errors.Is(err, ErrConflict) {
		cur, _ := s.st.Get(ctx, r.ID)
		return cur, fmt.Errorf("ledger row %s is being launched now (state %s): delete it once it is launched", r.ID, cur.State)
	}
	if err != nil {
		return r, err
	}
	return next, nil
}

func (s *Service) launcher(provider string) (domain.FleetLauncher, error) {
	if p, ok := s.provs[provider].(domain.FleetLauncher); ok {
		return p, nil
	}
	return nil, fmt.Errorf("provider %s is not in use in this run or does not launch fleets", provider)
}

// simFleetGone is the note of a simulated fleet whose process ended.
const simFleetGone = "simulated fleet ended with the process that launched it; nothing was billed"

// RefreshFleet asks the provider for a fleet's state and records it.
func (s *Service) RefreshFleet(ctx context.Context, id string) (domain.Fleet, Entry, error) {
	r, err := s.FleetRow(ctx, id)
	if err != nil {
		return domain.Fleet{}, r, err
	}
	if sched, ok := ScheduleOf(r); ok && r.ProviderRef == "" && r.State == StateScheduled {
		// Kept by gpumarket, not launched yet: the ledger is all there is.
		return domain.Fleet{Provider: r.Provider, Region: r.Region, State: r.State, Target: r.InstanceCount,
			Message: "scheduled: gpumarket launches it at " + sched.Start.UTC().Format(time.RFC3339)}, r, nil
	}
	if r.ProviderRef == "" {
		return domain.Fleet{}, r, fmt.Errorf("ledger row %s has no fleet id yet (state %s)", r.ID, r.State)
	}
	p, err := s.launcher(r.Provider)
	if err != nil {
		return domain.Fleet{}, r, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	f, err := p.DescribeFleet(cctx, r.Region, r.ProviderRef)
	if err != nil {
		return f, r, fmt.Errorf("describe fleet %s: %w", r.ProviderRef, err)
	}
	if f.State != "" && fleetRowState(f.State) != r.State && r.State != StateDeleted {
		// Only over the state read above: a delete recorded meanwhile stands.
		from := r.State
		r.State = fleetRowState(f.State)
		if r, err = s.settle(ctx, fleetDates(r, s.opt.Now()), from); err != nil {
			return f, r, err
		}
	}
	return f, r, nil
}

// FleetsNowEvery is how long all views share one describe per fleet.
const FleetsNowEvery = 30 * time.Second

// fleetsNowWork bounds one describe: one slow provider must not hold the rest.
const fleetsNowWork = 15 * time.Second

// FleetNow is what a provider said of a fleet, and when.
type FleetNow struct {
	// Fleet is its answer: Instances running now of Target asked.
	Fleet domain.Fleet
	// Err is why it could not say; the last answer, if any, is kept.
	Err error
	At  time.Time
}

type fleetsNowCache struct {
	mu     sync.Mutex
	byRow  map[string]FleetNow
	asking map[string]bool
}

// LiveFleet reports whether a row is a fleet that may be running.
func LiveFleet(r Entry) bool {
	return r.Kind == KindFleet && r.ProviderRef != "" && (r.State == StateActive || r.State == StateScheduled)
}

// FleetsNow says how many instances of each live fleet run now, one shared call per fleet.
func (s *Service) FleetsNow(ctx context.Context, rows []Entry) map[string]FleetNow {
	c := &s.fleetsNow
	now := s.opt.Now()
	var ask []Entry
	c.mu.Lock()
	if c.byRow == nil {
		c.byRow, c.asking = map[string]FleetNow{}, map[string]bool{}
	}
	for _, r := range rows {
		if !LiveFleet(r) || !s.CanLaunch(r.Provider) || c.asking[r.ID] {
			continue
		}
		if last, ok := c.byRow[r.ID]; ok && now.Sub(last.At) < FleetsNowEvery && now.Sub(last.At) >= 0 {
			continue
		}
		c.asking[r.ID] = true
		ask = append(ask, r)
	}
	c.mu.Unlock()
	fanout.Each(len(ask), 0, func(i int) {
		id := ask[i].ID
		cctx, cancel := context.WithTimeout(ctx, min(fleetsNowWork, s.opt.Timeout))
		f, _, err := s.RefreshFleet(cctx, id)
		cancel()
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.asking, id)
		if err != nil {
			last := c.byRow[id]
			last.Err, last.At = err, now
			c.byRow[id] = last
			return
		}
		c.byRow[id] = FleetNow{Fleet: f, At: now}
	})
	out := map[string]FleetNow{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rows {
		if v, ok := c.byRow[r.ID]; ok && r.Kind == KindFleet {
			out[r.ID] = v
		}
	}
	return out
}
