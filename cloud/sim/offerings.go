package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// The simulated market sells on the clouds' own terms.
var (
	blockTerms       = domain.CapacityBlockTerms
	reservationTerms = domain.ReservationTerms
)

const offersPerPool = 3

// dryRunMessage is EC2's own answer to a dry run that would succeed.
const dryRunMessage = "Request would have succeeded, but DryRun flag is set. (simulated market)"

// blockRate is a block's price range per GPU-hour by type (2025: above spot, below on-demand).
var blockRate = map[string][2]float64{
	"p5.48xlarge":   {3.9, 4.9},
	"p5e.48xlarge":  {4.4, 5.6},
	"p5en.48xlarge": {4.5, 5.7},
	"p4d.24xlarge":  {1.9, 2.6},
	"p4de.24xlarge": {2.3, 3.1},
}

// azureReservable: the families whose sizes take capacity reservations; H100 ones take none
// (https://learn.microsoft.com/azure/virtual-machines/capacity-reservation-overview, "Limitations").
var azureReservable = map[string]bool{"NC A100 v4": true}

type offerQuery struct {
	gpu                     string // canonical, "" for every block GPU
	instances, gpus         int
	dur                     time.Duration
	startAfter, startBefore time.Time
	regions                 []string
	// blocks, calendar: whether AWS blocks / Google calendar mode are sold for the duration.
	blocks, calendar bool
	plans            bool // training plans are asked for (by kind) and sold for the duration
	kinds            domain.OfferingQuery
}

func (m *Market) validateOfferingQuery(q domain.OfferingQuery) (offerQuery, error) {
	v := offerQuery{instances: q.Instances, gpus: q.GPUs, dur: q.Duration, regions: q.Regions}
	if q.GPU != "" {
		g, ok := domain.NormalizeGPUModel(q.GPU)
		if !ok {
			return v, domain.InvalidQueryf("GPU %q: want one of %s", q.GPU, strings.Join(domain.GPUModels, ", "))
		}
		if !slices.Contains(blockGPUs, g) {
			return v, domain.InvalidQueryf("GPU %s: the simulated market sells blocks of %s only", g, strings.Join(blockGPUs, ", "))
		}
		v.gpu = g
	}
	switch {
	case q.Instances < 0 || q.GPUs < 0:
		return v, domain.InvalidQueryf("count: want a positive number of instances (1-%d) or GPUs", blockTerms.MaxInstances)
	case q.Instances > blockTerms.MaxInstances:
		return v, domain.InvalidQueryf("instance count %d: a capacity block holds 1 to %d instances", q.Instances, blockTerms.MaxInstances)
	case q.Instances == 0 && q.GPUs == 0:
		return v, domain.InvalidQueryf("count: want the number of instances (1-%d) or of GPUs", blockTerms.MaxInstances)
	case q.Instances == 0 && q.GPUs > 8*blockTerms.MaxInstances:
		return v, domain.InvalidQueryf("GPU count %d: a capacity block holds at most %d instances (%d GPUs of 8-GPU types)", q.GPUs, blockTerms.MaxInstances, 8*blockTerms.MaxInstances)
	}
	// A duration that suits only Azure's whole hours gets only Azure's.
	if reservationTerms.ValidDuration(q.Duration) != nil {
		return v, domain.InvalidQueryf("duration %s: want whole hours up to 182 days (AWS capacity blocks: %s)", q.Duration, blockTerms.DurationForm)
	}
	v.blocks = blockTerms.ValidDuration(q.Duration) == nil
	v.calendar = calendarTerms.ValidDuration(q.Duration) == nil
	v.kinds = domain.OfferingQuery{Kinds: q.Kinds}
	v.plans = q.WantsKind(domain.KindTrainingPlan) && planTerms.ValidDuration(q.Duration) == nil
	if q.OnlyKind(domain.KindTrainingPlan) {
		if err := planTerms.ValidDuration(q.Duration); err != nil {
			return v, domain.InvalidQueryf("sim: %v", err)
		}
		if q.Instances > 0 && !planTerms.ValidCount(q.Instances) {
			return v, domain.InvalidQueryf("sim: %v", planTerms.ValidInstances(q.Instances))
		}
	}
	now := m.opt.Now().UTC()
	limit := now.Add(blockTerms.MaxLead)
	v.startAfter, v.startBefore = q.StartAfter.UTC(), q.StartBefore.UTC()
	v.startAfter = domain.Later(v.startAfter, now) // a zero start is now too
	if q.StartBefore.IsZero() || v.startBefore.After(limit) {
		v.startBefore = limit
	}
	if v.startAfter.After(limit) {
		return v, domain.InvalidQueryf("start after %s: blocks start within 8 weeks (by %s)", v.startAfter.Format(time.RFC3339), limit.Format(time.RFC3339))
	}
	if v.startBefore.Before(v.startAfter) {
		return v, domain.InvalidQueryf("start before %s is earlier than start after %s", v.startBefore.Format(time.RFC3339), v.startAfter.Format(time.RFC3339))
	}
	return v, nil
}

// FindOfferings returns the blocks and reservations on sale for the query,
// cheapest per GPU-hour first: a pure function of seed and terms, less what was booked.
func (m *Market) FindOfferings(ctx context.Context, q domain.OfferingQuery) ([]domain.Offering, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sim offerings: %w", err)
	}
	v, err := m.validateOfferingQuery(q)
	if err != nil {
		return nil, err
	}
	// As on Azure, a reservation starts when made: sold only if the start range holds now.
	reservable := !v.startAfter.After(m.opt.Now().UTC().Add(time.Minute))
	if !v.blocks && !v.calendar && !v.plans && !reservable {
		return nil, domain.InvalidQueryf("duration %s with a start after %s: capacity blocks last %s, and capacity reservations start when they are made (search from now)",
			domain.FormatWindow(v.dur), v.startAfter.Format(time.RFC3339), blockTerms.DurationForm)
	}
	var out []domain.Offering
	for _, p := range m.pools {
		if !p.blockable() || (v.gpu != "" && p.spec.Desc.GPU.Model != v.gpu) || !domain.Query.WantsRegion(domain.Query{Regions: v.regions}, p.spec.Region.Name) {
			continue
		}
		n := v.instances
		if n == 0 {
			n = int(math.Ceil(float64(v.gpus) / p.spec.Desc.GPU.Count))
		}
		if n < 1 || n > blockTerms.MaxInstances {
			continue
		}
		if p.spec.Desc.Cloud == domain.CloudAWS {
			out = append(out, m.planOffers(p, n, v)...)
		}
		if p.spec.Desc.Cloud == domain.CloudAWS && !v.blocks || p.spec.Desc.Cloud == domain.CloudAzure && !reservable ||
			p.spec.Desc.Cloud == domain.CloudGCP && !v.calendar {
			continue
		}
		out = append(out, m.offersOf(p, n, v)...)
	}
	m.mu.Lock()
	kept := slices.DeleteFunc(out, func(o domain.Offering) bool { return m.bookedLocked(o) || !v.kinds.WantsKind(o.Kind) })
	m.mu.Unlock()
	slices.SortStableFunc(kept, func(a, b domain.Offering) int {
		return cmp.Or(cmp.Compare(a.USDPerGPUHour(), b.USDPerGPUHour()), a.Start.Compare(b.Start))
	})
	return kept, nil
}

func (p *simPool) blockable() bool {
	switch p.spec.Desc.Cloud {
	case domain.CloudAWS:
		_, ok := blockRate[p.spec.Desc.InstanceType]
		return ok
	case domain.CloudGCP:
		return gcpCalendar[p.spec.Desc.InstanceType]
	}
	return azureReservable[p.spec.Family]
}

func (m *Market) offersOf(p *simPool, n int, v offerQuery) []domain.Offering {
	var starts []time.Time
	aws, gcp := p.spec.Desc.Cloud == domain.CloudAWS, p.spec.Desc.Cloud == domain.CloudGCP
	if gcp {
		starts = dailyStarts(v.startAfter, v.startBefore, 0)
	} else if aws {
		starts = dailyStarts(v.startAfter, v.startBefore, blockTerms.StartOfDayUTC)
	} else {
		starts = append(starts, m.opt.Now().UTC().Truncate(time.Minute))
	}
	// Large and long blocks are scarcer.
	odds := 0.3
	if n > 8 {
		odds *= 0.6
	}
	if n > 32 {
		odds *= 0.5
	}
	if v.dur > 14*24*time.Hour {
		odds *= 0.5
	}
	if !aws {
		odds *= 1.5
	}
	key := p.spec.Desc.Key().String()
	var out []domain.Offering
	for _, s := range starts {
		h := mix(uint64(m.opt.Seed)*0x9e3779b97f4a7c15 ^ strHash("offer", key, s.Format(time.RFC3339), fmt.Sprint(n), v.dur.String()))
		if unit(h) >= odds {
			continue
		}
		o := p.offering(n, s, s.Add(v.dur), domain.KindBlock)
		switch {
		case gcp:
			asCalendar(&o, *p.spec.Desc.OnDemandUSDHour)
		case aws:
			rate := m.leadRate(blockRate[o.InstanceType], s, blockTerms.MaxLead, unit(mix(h)))
			o.UpfrontUSD = math.Round(rate*o.GPU.Count*float64(n)*o.DurationHours()*100) / 100
		default:
			o.StartsOnPurchase, o.Kind = true, domain.KindReservation
			o.Note = "simulated Azure capacity reservation: held and billed at the on-demand rate from purchase until deleted; gpumarket prices it, and releases it, at " + o.End.Format(time.RFC3339)
			billHourly(&o, *p.spec.Desc.OnDemandUSDHour) // as Azure bills it
		}
		o.ID = m.offeringID(o)
		out = append(out, o)
		if len(out) == offersPerPool {
			break
		}
	}
	return out
}

// offering is an offering of n of the pool's instances over [start, end).
func (p *simPool) offering(n int, start, end time.Time, kind string) domain.Offering {
	d := p.spec.Desc
	return domain.Offering{Provider: Name, Cloud: d.Cloud, Region: d.Region, Zone: d.Zone, InstanceType: d.InstanceType, GPU: d.GPU,
		InstanceCount: n, Start: start, End: end, Currency: "USD", Simulated: true, Kind: kind}
}

// leadRate is a price in rate's range, draw in [0, 1) picking it: sooner starts
// are dearer; lead counts from today's date, so a price holds all day.
func (m *Market) leadRate(rate [2]float64, start time.Time, maxLead time.Duration, draw float64) float64 {
	lead := start.Sub(m.opt.Now().UTC().Truncate(24*time.Hour)).Hours() / maxLead.Hours()
	return rate[0] + (rate[1]-rate[0])*(0.6*draw+0.4*(1-math.Min(1, lead)))
}

// dailyStarts are the times of day at (after midnight UTC) in [after, before].
func dailyStarts(after, before time.Time, at time.Duration) []time.Time {
	var out []time.Time
	day := after.Truncate(24 * time.Hour).Add(at)
	if day.Before(after) {
		day = day.Add(24 * time.Hour)
	}
	for ; !day.After(before); day = day.Add(24 * time.Hour) {
		out = append(out, day)
	}
	return out
}

// offeringID derives an id from the seed and every term, so a later process
// recognises it and a changed term does not pass for it.
func (m *Market) offeringID(o domain.Offering) string {
	if o.Kind == domain.KindTrainingPlan {
		return m.planID(o)
	}
	h := mix(uint64(m.opt.Seed)*0x9e3779b97f4a7c15 ^ strHash("id", string(o.Cloud), o.Region, o.Zone, o.InstanceType,
		fmt.Sprint(o.InstanceCount, o.Start.Unix(), o.End.Unix(), int64(math.Round(o.UpfrontUSD*100)))))
	switch o.Cloud {
	case domain.CloudAzure:
		return fmt.Sprintf("azcr-%016x", h)
	case domain.CloudGCP:
		return fmt.Sprintf("gcpcal-%016x", h)
	}
	return fmt.Sprintf("cb-%016x%x", h, mix(h)&0xf)
}

// booking is a block bought in this process, with its purchase's tags.
type booking struct {
	offering   domain.Offering
	booking    domain.Booking
	ref, actor string
	at         time.Time
}

// checkOffering verifies the market made the offering and it can be bought at now.
func (m *Market) checkOffering(o domain.Offering, now time.Time) error {
	if o.Provider != Name || !o.Simulated {
		return fmt.Errorf("offering %s is from provider %q, not the simulated market", o.ID, o.Provider)
	}
	if o.ID == "" || m.offeringID(o) != o.ID {
		return fmt.Errorf("offering %s is not one the simulated market (seed %d) made with these terms: search again", o.ID, m.opt.Seed)
	}
	if !o.End.After(now) {
		return fmt.Errorf("offering %s ended at %s: search again", o.ID, o.End.UTC().Format(time.RFC3339))
	}
	return nil
}

// ErrAlreadyBooked is returned for an offering bought before.
var ErrAlreadyBooked = errors.New("offering already booked")

// Book buys an offering in memory; with req.DryRun it changes nothing.
func (m *Market) Book(ctx context.Context, req domain.BookRequest) (domain.Booking, error) {
	if err := ctx.Err(); err != nil {
		return domain.Booking{}, fmt.Errorf("sim book %s: %w", req.Offering.ID, err)
	}
	o := req.Offering
	now := m.opt.Now()
	if err := m.checkOffering(o, now); err != nil {
		return domain.Booking{}, fmt.Errorf("sim book: %w", err)
	}
	b := m.bookingOf(o, now)
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.bookings[o.ID]; ok {
		return domain.Booking{}, fmt.Errorf("sim book: offering %s: %w as %s; search again for another", o.ID, ErrAlreadyBooked, prev.booking.ProviderRef)
	}
	if m.bookedLocked(o) {
		return domain.Booking{}, fmt.Errorf("sim book: offering %s: %w (the same capacity and window was bought); search again for another", o.ID, ErrAlreadyBooked)
	}
	if req.DryRun {
		b.ProviderRef, b.State, b.DryRun, b.Message = "", "", true, dryRunMessage
		if o.Terms().NoDryRun {
			b.Message = planDryRun
		}
		return b, nil
	}
	b.Message = fmt.Sprintf("simulated %s booked: %d × %s in %s from %s to %s, $%.2f",
		b.ProviderRef, o.InstanceCount, o.InstanceType, o.Zone, o.Start.UTC().Format(time.RFC3339), o.End.UTC().Format(time.RFC3339), o.UpfrontUSD)
	m.bookings[o.ID] = &booking{offering: o, booking: b, ref: req.Ref, actor: req.Actor, at: now}
	return b, nil
}

// bookingOf is the booking of the offering bought at now.
func (m *Market) bookingOf(o domain.Offering, now time.Time) domain.Booking {
	b := domain.Booking{
		Provider: Name, Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType,
		InstanceCount: o.InstanceCount, Start: o.Start, End: o.End, CostUSD: o.UpfrontUSD,
		ProviderRef: m.reservationRef(o), State: "scheduled",
	}
	if !now.Before(o.Start) {
		b.State = "active"
	}
	return b
}

// reservationRef is the booking's id: AWS "cr-…" or an Azure reservation's resource id.
func (m *Market) reservationRef(o domain.Offering) string {
	h := mix(strHash("cr", o.ID))
	if o.Kind == domain.KindTrainingPlan {
		return planARN(o, h)
	}
	if o.Cloud == domain.CloudGCP {
		return gcpRef(o, h)
	}
	if o.Cloud == domain.CloudAzure {
		return fmt.Sprintf("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/gpumarket-sim/providers/Microsoft.Compute/capacityReservationGroups/gpumarket-%s/capacityReservations/cr-%016x", o.Region, h)
	}
	return fmt.Sprintf("cr-%016x%x", h, mix(h)&0xf)
}

// FindBooking returns this process's booking of the request's offering (same id,
// or same pool, count and dates), nil if none.
func (m *Market) FindBooking(ctx context.Context, req domain.BookRequest) (*domain.Booking, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sim find booking %s: %w", req.Offering.ID, err)
	}
	o := req.Offering
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.boughtLocked(o, true); b != nil {
		c := b.booking
		return &c, nil
	}
	return nil, nil
}

// bookedLocked reports whether the offering's pool and window were bought.
func (m *Market) bookedLocked(o domain.Offering) bool { return m.boughtLocked(o, false) != nil }

// boughtLocked is the offering's booking, else one of its pool and window (and count, with sameCount).
func (m *Market) boughtLocked(o domain.Offering, sameCount bool) *booking {
	if b, ok := m.bookings[o.ID]; ok {
		return b
	}
	for _, b := range m.bookings {
		if sameWindow(b.offering, o) && (!sameCount || b.offering.InstanceCount == o.InstanceCount) {
			return b
		}
	}
	return nil
}

func sameWindow(a, b domain.Offering) bool {
	return a.Region == b.Region && a.Zone == b.Zone && a.InstanceType == b.InstanceType &&
		a.Start.Equal(b.Start) && a.End.Equal(b.End)
}

// RememberBookings takes the ledger's booked offerings at start, so they are not
// sold again; an intent with no outcome counts as bought, the safe side.
func (m *Market) RememberBookings(booked []domain.BookedOffering) {
	now := m.opt.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, bo := range booked {
		o := bo.Offering
		if _, ok := m.bookings[o.ID]; ok || o.ID == "" {
			continue
		}
		b := bo.Booking
		if b.ProviderRef == "" {
			b = m.bookingOf(o, now)
		}
		m.bookings[o.ID] = &booking{offering: o, booking: b, at: now}
	}
}

// ReleaseBooking ends a simulated Azure reservation; its capacity is not sold again.
func (m *Market) ReleaseBooking(ctx context.Context, b domain.Booking) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sim release %s: %w", b.ProviderRef, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, bk := range m.bookings {
		if bk.booking.ProviderRef == b.ProviderRef {
			bk.booking.State = "ended"
		}
	}
	return nil
}

var _ domain.BookingReleaser = (*Market)(nil)

// RefreshOffering describes an offering as sold now, right before buying;
// one no longer sold matches domain.ErrOfferingGone.
func (m *Market) RefreshOffering(ctx context.Context, o domain.Offering) (domain.Offering, error) {
	if err := ctx.Err(); err != nil {
		return domain.Offering{}, fmt.Errorf("sim refresh %s: %w", o.ID, err)
	}
	gone := func(why string) (domain.Offering, error) {
		return domain.Offering{}, fmt.Errorf("sim offering %s %s: %w", o.ID, why, domain.ErrOfferingGone)
	}
	if o.Provider != Name || !o.Simulated {
		return gone(fmt.Sprintf("is from provider %q, not the simulated market", o.Provider))
	}
	p, ok := m.byKey[domain.PoolKey{Provider: Name, Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType}.String()]
	if !ok || !p.blockable() {
		return gone("is of no pool the market sells blocks of")
	}
	m.mu.Lock()
	booked := m.bookedLocked(o)
	m.mu.Unlock()
	now := m.opt.Now().UTC()
	switch {
	case booked:
		return gone("was bought")
	case !o.End.After(now):
		return gone("ended at " + o.End.UTC().Format(time.RFC3339))
	case o.StartsOnPurchase:
		fresh := o
		fresh.Start = domain.Later(now.Truncate(time.Minute), fresh.Start)
		billHourly(&fresh, *p.spec.Desc.OnDemandUSDHour)
		fresh.ID = m.offeringID(fresh)
		return fresh, nil
	case !now.Before(o.Start):
		return gone("started at " + o.Start.UTC().Format(time.RFC3339))
	case o.Kind == domain.KindTrainingPlan:
		return m.refreshPlan(p, o)
	}
	v := offerQuery{instances: o.InstanceCount, dur: o.End.Sub(o.Start), startAfter: o.Start, startBefore: o.Start, blocks: true}
	for _, c := range m.offersOf(p, o.InstanceCount, v) {
		if c.Start.Equal(o.Start) && c.End.Equal(o.End) {
			return c, nil
		}
	}
	return gone("is no longer on sale")
}

// ListRecords lists what this process sold and launched since the time, so a
// ledger lost meanwhile can be rebuilt.
func (m *Market) ListRecords(ctx context.Context, since time.Time) ([]domain.CloudRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sim list records: %w", err)
	}
	now := m.opt.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []domain.CloudRecord
	for _, b := range m.bookings {
		if b.at.Before(since) {
			continue
		}
		o, bk := b.offering, b.booking
		state := bk.State
		if state == "" || state == "scheduled" || state == "active" {
			state = "scheduled"
			if !now.Before(o.Start) {
				state = "active"
			}
			if !now.Before(o.End) && !o.StartsOnPurchase {
				state = "ended"
			}
		}
		out = append(out, domain.CloudRecord{Kind: o.Terms().Kind, Ref: b.ref, Actor: b.actor, OfferingID: o.ID,
			ProviderRef: bk.ProviderRef, Provider: Name, Cloud: o.Cloud, Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType,
			InstanceCount: o.InstanceCount, Start: o.Start, End: o.End, CostUSD: o.UpfrontUSD, State: state, CreatedAt: b.at})
	}
	for _, f := range m.fleets {
		if f.at.Before(since) {
			continue
		}
		v := m.viewLocked(f, now)
		out = append(out, domain.CloudRecord{Kind: domain.KindFleet, Ref: f.token, Actor: f.actor, ProviderRef: v.ID,
			Provider: Name, Cloud: f.cloud, Region: v.Region, InstanceType: f.types, InstanceCount: v.Target,
			CostUSD: v.EstimatedUSDh, State: v.State, Start: domain.Later(f.start, f.at), End: f.end, CreatedAt: f.at})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

var (
	_ domain.OfferingRefresher = (*Market)(nil)
	_ domain.RecordLister      = (*Market)(nil)
)

var planTerms = domain.TrainingPlanTerms

const planNote = "simulated SageMaker training plan: paid upfront, no refund; it serves only its target resource (%s); its instances are reserved for its segments' windows only; SageMaker has no dry run"

// planDryRun answers a dry run of a plan as the AWS provider does: SageMaker has none.
const planDryRun = "SageMaker has no dry run for CreateTrainingPlan: the offering is still on sale at these terms; nothing was sent (simulated market)"

// planOffers returns training plans of n instances of an AWS pool: one segment
// per start, and one split in two whole-day windows, as SageMaker answers.
func (m *Market) planOffers(p *simPool, n int, v offerQuery) []domain.Offering {
	if !v.plans || !planTerms.ValidCount(n) || planTerms.ValidDuration(v.dur) != nil {
		return nil
	}
	rate, ok := blockRate[p.spec.Desc.InstanceType]
	if !ok {
		return nil
	}
	key := p.spec.Desc.Key().String()
	var out []domain.Offering
	// Training plans are made of capacity blocks: they start at the blocks' time of day.
	for _, day := range dailyStarts(v.startAfter.UTC(), v.startBefore, blockTerms.StartOfDayUTC) {
		if len(out) == offersPerPool {
			break
		}
		h := mix(uint64(m.opt.Seed)*0x9e3779b97f4a7c15 ^ strHash("plan", key, day.Format(time.RFC3339), fmt.Sprint(n), v.dur.String()))
		if unit(h) >= 0.35 {
			continue
		}
		segs := []domain.Segment{{Start: day, End: day.Add(v.dur)}}
		days := int(v.dur / (24 * time.Hour))
		if days >= 2 && unit(mix(h^1)) < 0.5 {
			first := time.Duration((days+1)/2) * 24 * time.Hour
			gap := time.Duration(1+mix(h^2)%2) * 24 * time.Hour
			segs = []domain.Segment{{Start: day, End: day.Add(first)}, {Start: day.Add(first + gap), End: day.Add(v.dur + gap)}}
		}
		for i := range segs {
			segs[i].InstanceType, segs[i].InstanceCount, segs[i].Zone = p.spec.Desc.InstanceType, n, p.spec.Desc.Zone
		}
		target := domain.TargetTrainingJob
		if mix(h^3)%3 == 0 {
			target = domain.TargetHyperPodCluster
		}
		o := p.offering(n, segs[0].Start, segs[len(segs)-1].End, domain.KindTrainingPlan)
		o.Segments, o.TargetResource, o.Note = segs, target, fmt.Sprintf(planNote, target)
		// As blocks, sooner starts are dearer; a split plan is a little cheaper.
		r := m.leadRate(rate, day, planTerms.MaxLead, unit(mix(h^4)))
		if len(segs) > 1 {
			r *= 0.95
		}
		o.UpfrontUSD = math.Round(r*o.GPU.Count*float64(n)*o.HeldHours()*100) / 100
		o.ID = m.offeringID(o)
		out = append(out, o)
	}
	return out
}

func (m *Market) planID(o domain.Offering) string {
	parts := []string{"plan", o.Region, o.Zone, o.InstanceType, o.TargetResource,
		fmt.Sprint(o.InstanceCount, int64(math.Round(o.UpfrontUSD*100)))}
	for _, s := range o.Segments {
		parts = append(parts, s.Zone, s.InstanceType, fmt.Sprint(s.InstanceCount, s.Start.Unix(), s.End.Unix()))
	}
	return fmt.Sprintf("tpo-%016x", mix(uint64(m.opt.Seed)*0x9e3779b97f4a7c15^strHash(parts...)))
}

func planARN(o domain.Offering, h uint64) string {
	return fmt.Sprintf("arn:aws:sagemaker:%s:000000000000:training-plan/gpumarket-%016x", o.Region, h)
}

// refreshPlan describes a plan offering as the same search answers it now.
func (m *Market) refreshPlan(p *simPool, o domain.Offering) (domain.Offering, error) {
	v := offerQuery{instances: o.InstanceCount, dur: time.Duration(o.HeldHours() * float64(time.Hour)), startAfter: o.Start, startBefore: o.Start, plans: true}
	for _, c := range m.planOffers(p, o.InstanceCount, v) {
		if c.TargetResource == o.TargetResource && slices.Equal(c.Segments, o.Segments) {
			return c, nil
		}
	}
	return domain.Offering{}, fmt.Errorf("sim training plan offering %s is no longer on sale: %w", o.ID, domain.ErrOfferingGone)
}
