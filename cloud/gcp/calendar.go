package gcp

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/api/compute/v1"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/fanout"
)

// calendarTypes: Google sells calendar mode for its 8-GPU accelerator-optimised machines.
var calendarTypes = map[string]bool{
	"a3-highgpu-8g": true, "a3-megagpu-8g": true, "a3-ultragpu-8g": true, "a2-ultragpu-8g": true, "a2-highgpu-8g": true,
}

// calendarNote is what a buyer must know of calendar mode.
const calendarNote = "Google calendar-mode future reservation: held for the whole window and billed from its start to its end, used or not; its VMs end with it. " +
	"Priced here at on-demand rates, the most it costs (Google bills calendar mode at Dynamic Workload Scheduler prices, at or below them)."

const specKey = "gpumarket"

// FindOfferings asks each region's calendar-mode advice for the GPU's machine
// types: each deliverable window is an offering; failed regions come back as
// domain.RegionErrors.
func (p *Provider) FindOfferings(ctx context.Context, q domain.OfferingQuery) ([]domain.Offering, error) {
	gpu, err := checkQuery(q, p.now())
	if err != nil {
		return nil, err
	}
	regions := p.regions(q.Regions)
	if len(regions) == 0 {
		return nil, nil
	}
	ms, err := p.machines(ctx)
	if err != nil {
		return nil, err
	}
	book, err := p.priceBook(ctx)
	if err != nil {
		return nil, err
	}
	from, to := startRange(q, p.now())
	// Each region asks for its calendar types in turn; a failed type leaves the others'.
	regions = slices.Compact(slices.Sorted(slices.Values(regions)))
	out, failed := fanout.Gather(regions, 4, func(r string) ([]domain.Offering, error) {
		var out []domain.Offering
		var ferr error
		seen := map[string]bool{}
		for _, m := range ms {
			if regionOf(m.Zone) != r || !calendarTypes[m.Type] || m.GPU.Model != gpu || seen[m.Type] {
				continue
			}
			seen[m.Type] = true
			n := int64(q.Instances)
			if n == 0 {
				n = int64(math.Ceil(float64(q.GPUs) / m.GPU.Count))
			}
			offs, err := p.advise(ctx, r, m, n, from, to, q.Duration, q.FlexDuration)
			if err != nil {
				ferr = err
				continue
			}
			for _, o := range offs {
				if (o.End.Sub(o.Start)-q.Duration).Abs() <= q.FlexDuration && priced(book, m, &o) {
					out = append(out, o)
				}
			}
		}
		return out, ferr
	})
	slices.SortStableFunc(out, func(a, b domain.Offering) int {
		return cmp.Or(cmp.Compare(a.USDPerGPUHour(), b.USDPerGPUHour()), a.Start.Compare(b.Start))
	})
	if len(failed) > 0 {
		return out, domain.RegionErrors(failed) // out is empty when every region failed
	}
	return out, nil
}

// checkQuery refuses what calendar mode does not sell and returns the canonical GPU.
func checkQuery(q domain.OfferingQuery, now time.Time) (string, error) {
	gpu, ok := domain.NormalizeGPUModel(q.GPU)
	if !ok {
		return "", domain.InvalidQueryf("GPU %q: want one of %s", q.GPU, strings.Join(domain.GPUModels, ", "))
	}
	if err := domain.CalendarTerms.ValidDuration(q.Duration); err != nil {
		return "", domain.InvalidQueryf("%v", err)
	}
	if q.Instances < 0 || q.GPUs < 0 || q.Instances == 0 && q.GPUs == 0 {
		return "", domain.InvalidQueryf("count: want a positive number of instances or GPUs")
	}
	if limit := now.Add(domain.CalendarTerms.MaxLead); q.StartAfter.After(limit) {
		return "", domain.InvalidQueryf("start after %s: calendar-mode reservations start within 8 weeks (by %s)",
			q.StartAfter.UTC().Format(time.RFC3339), limit.UTC().Format(time.RFC3339))
	}
	return gpu, nil
}

func startRange(q domain.OfferingQuery, now time.Time) (from, to time.Time) {
	from, to = q.StartAfter.UTC(), q.StartBefore.UTC()
	if from.Before(now) {
		from = now.UTC()
	}
	if limit := now.Add(domain.CalendarTerms.MaxLead).UTC(); to.IsZero() || to.After(limit) {
		to = limit
	}
	return from, to
}

// advise asks for windows of n machines lasting d (give or take flex, within
// calendar mode's lengths) starting in [from, to], in any zone of region not denied.
func (p *Provider) advise(ctx context.Context, region string, m machine, n int64, from, to time.Time, d, flex time.Duration, deny ...string) ([]domain.Offering, error) {
	secs := func(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) + "s" }
	flex = flex.Truncate(24 * time.Hour) // calendar mode sells whole days
	spec := &compute.FutureResourcesSpec{
		DeploymentType: "DENSE",
		TargetResources: &compute.FutureResourcesSpecTargetResources{
			SpecificSkuResources: &compute.FutureResourcesSpecSpecificSKUResources{MachineType: m.Base, InstanceCount: n},
		},
		TimeRangeSpec: &compute.FlexibleTimeRange{
			StartTimeNotEarlierThan: from.Format(time.RFC3339), StartTimeNotLaterThan: to.Format(time.RFC3339),
			MinDuration: secs(max(d-flex, 24*time.Hour)), MaxDuration: secs(min(d+flex, domain.CalendarTerms.MaxDuration)),
		},
	}
	if len(deny) > 0 {
		locs := map[string]compute.FutureResourcesSpecLocationPolicyLocation{}
		for _, z := range deny {
			locs["zones/"+z] = compute.FutureResourcesSpecLocationPolicyLocation{Preference: "DENY"}
		}
		spec.LocationPolicy = &compute.FutureResourcesSpecLocationPolicy{Locations: locs}
	}
	req := &compute.CalendarModeAdviceRequest{FutureResourcesSpecs: map[string]compute.FutureResourcesSpec{specKey: *spec}}
	resp, err := p.compute.Advice.CalendarMode(p.project, region, req).Context(ctx).Do()
	if err != nil {
		return nil, apiErr("calendar-mode advice in "+region, err)
	}
	var out []domain.Offering
	for _, rec := range resp.Recommendations {
		r, ok := rec.RecommendationsPerSpec[specKey]
		if !ok || r.Location == "" || (r.RecommendationType != "" && r.RecommendationType != "FUTURE_RESERVATION") {
			continue
		}
		z := path.Base(r.Location)
		start, err1 := time.Parse(time.RFC3339, r.StartTime)
		end, err2 := time.Parse(time.RFC3339, r.EndTime)
		if err1 != nil || err2 != nil || !end.After(start) || regionOf(z) != region || slices.Contains(deny, z) {
			continue
		}
		o := domain.Offering{Provider: Name, Cloud: domain.CloudGCP, Region: region, Zone: z, InstanceType: m.Type, GPU: m.GPU,
			InstanceCount: int(n), Start: start.UTC(), End: end.UTC(), Currency: "USD", Kind: domain.KindCalendar, Note: calendarNote}
		o.FlexLength = end.Sub(start) != d
		out = append(out, o)
	}
	return out, nil
}

// priced sets the window's on-demand total, rate and id; false if the catalog lacks the price.
func priced(book *priceBook, m machine, o *domain.Offering) bool {
	rate := book.price(m, false)
	if math.IsNaN(rate) {
		return false
	}
	o.HourlyUSD = rate * float64(o.InstanceCount)
	o.UpfrontUSD = math.Round(o.HourlyUSD*o.End.Sub(o.Start).Hours()*100) / 100
	o.ID = offeringID(*o)
	return true
}

// offeringID names an offering by its terms: Google's windows have no lasting id.
func offeringID(o domain.Offering) string {
	return fmt.Sprintf("gcpcal-%016x", fnv64(fmt.Sprint(o.Zone, o.InstanceType, o.InstanceCount, o.Start.Unix(), o.End.Unix())))
}

// RefreshOffering asks the advice again for the offering's window and zone, priced from the catalog now.
func (p *Provider) RefreshOffering(ctx context.Context, o domain.Offering) (domain.Offering, error) {
	m, err := p.machineOf(ctx, o.Zone, o.InstanceType)
	if err != nil {
		return domain.Offering{}, err
	}
	if !o.Start.After(p.now()) {
		return domain.Offering{}, fmt.Errorf("gcp: offering %s started at %s: %w", o.ID, o.Start.UTC().Format(time.RFC3339), domain.ErrOfferingGone)
	}
	var others []string
	ms, _ := p.machines(ctx)
	for _, x := range ms {
		if x.Type == o.InstanceType && regionOf(x.Zone) == o.Region && x.Zone != o.Zone && !slices.Contains(others, x.Zone) {
			others = append(others, x.Zone)
		}
	}
	offs, err := p.advise(ctx, o.Region, m, int64(o.InstanceCount), o.Start, o.Start, o.End.Sub(o.Start), 0, others...)
	if err != nil {
		return domain.Offering{}, err
	}
	book, err := p.priceBook(ctx)
	if err != nil {
		return domain.Offering{}, err
	}
	for _, f := range offs {
		if f.Zone == o.Zone && f.Start.Equal(o.Start) && f.End.Equal(o.End) && priced(book, m, &f) {
			return f, nil
		}
	}
	return domain.Offering{}, fmt.Errorf("gcp: calendar-mode advice no longer offers %d × %s in %s from %s: %w",
		o.InstanceCount, o.InstanceType, o.Zone, o.Start.UTC().Format(time.RFC3339), domain.ErrOfferingGone)
}

// machineOf finds a machine gpumarket knows in a zone.
func (p *Provider) machineOf(ctx context.Context, zone, typ string) (machine, error) {
	ms, err := p.machines(ctx)
	if err != nil {
		return machine{}, err
	}
	for _, m := range ms {
		if m.Zone == zone && m.Type == typ {
			return m, nil
		}
	}
	return machine{}, fmt.Errorf("gcp: %s is not sold in %s: %w", typ, zone, domain.ErrOfferingGone)
}

// reservationName derives from the ledger row, so a lost answer is settled by name.
func reservationName(ref string) string { return resourceName("gpumarket", ref) }

// Book creates the calendar-mode future reservation and reads back its status.
// No dry run in the API: a dry run asks the advice whether the window is still offered.
func (p *Provider) Book(ctx context.Context, req domain.BookRequest) (domain.Booking, error) {
	o := req.Offering
	m, err := p.machineOf(ctx, o.Zone, o.InstanceType)
	if err != nil {
		return domain.Booking{}, err
	}
	if req.DryRun {
		if _, err := p.RefreshOffering(ctx, o); err != nil {
			return domain.Booking{}, err
		}
		return domain.Booking{Provider: Name, Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType, InstanceCount: o.InstanceCount,
			Start: o.Start, End: o.End, CostUSD: o.UpfrontUSD, DryRun: true,
			Message: "Compute Engine has no dry run for future reservations: the calendar-mode advice still offers this window in " + o.Zone}, nil
	}
	ref := req.Ref
	if ref == "" {
		ref = o.ID
	}
	fr := &compute.FutureReservation{
		Name:            reservationName(ref),
		Description:     describeTags(reservationTags(req)),
		ReservationMode: "CALENDAR",
		PlanningStatus:  "SUBMITTED",
		DeploymentType:  "DENSE",
		SpecificSkuProperties: &compute.FutureReservationSpecificSKUProperties{
			InstanceProperties: &compute.AllocationSpecificSKUAllocationReservedInstanceProperties{MachineType: m.Base},
			TotalCount:         int64(o.InstanceCount),
		},
		TimeWindow:                        &compute.FutureReservationTimeWindow{StartTime: o.Start.UTC().Format(time.RFC3339), EndTime: o.End.UTC().Format(time.RFC3339)},
		AutoDeleteAutoCreatedReservations: true,
		SpecificReservationRequired:       true,
	}
	what := "create future reservation " + fr.Name + " in " + o.Zone
	op, err := p.compute.FutureReservations.Insert(p.project, o.Zone, fr).RequestId(requestID(ref, "future-reservation")).Context(ctx).Do()
	if err != nil {
		return domain.Booking{}, apiErr(what, err)
	}
	if _, err := p.wait(ctx, what, op); err != nil {
		return domain.Booking{}, err
	}
	got, err := p.compute.FutureReservations.Get(p.project, o.Zone, fr.Name).Context(ctx).Do()
	if err != nil {
		return domain.Booking{}, apiErr("read future reservation "+fr.Name, err)
	}
	b := p.bookingOf(got, o.Zone, o.UpfrontUSD)
	if b.State == "failed" {
		return b, fmt.Errorf("gcp: %s: %w: %s", what, domain.ErrDeclined, b.Message)
	}
	return b, nil
}

// FindBooking looks for the reservation a request may have made: by its row's name, else its terms.
func (p *Provider) FindBooking(ctx context.Context, req domain.BookRequest) (*domain.Booking, error) {
	o := req.Offering
	if req.Ref != "" {
		fr, err := p.compute.FutureReservations.Get(p.project, o.Zone, reservationName(req.Ref)).Context(ctx).Do()
		switch {
		case err == nil:
			b := p.bookingOf(fr, o.Zone, o.UpfrontUSD)
			return &b, nil
		case !notFound(err):
			return nil, apiErr("read future reservation "+reservationName(req.Ref), err)
		}
	}
	base, _, _, err := ParseType(o.InstanceType)
	if err != nil {
		return nil, err
	}
	var found *domain.Booking
	err = p.compute.FutureReservations.List(p.project, o.Zone).Pages(ctx, func(l *compute.FutureReservationsListResponse) error {
		for _, fr := range l.Items {
			if found == nil && sameTerms(fr, base, o) && createdAfter(fr, req.After) {
				b := p.bookingOf(fr, o.Zone, o.UpfrontUSD)
				found = &b
			}
		}
		return nil
	})
	if err != nil {
		return nil, apiErr("list future reservations in "+o.Zone, err)
	}
	return found, nil
}

func sameTerms(fr *compute.FutureReservation, base string, o domain.Offering) bool {
	s, w := fr.SpecificSkuProperties, fr.TimeWindow
	if s == nil || s.InstanceProperties == nil || w == nil || s.InstanceProperties.MachineType != base || s.TotalCount != int64(o.InstanceCount) {
		return false
	}
	start, err1 := time.Parse(time.RFC3339, w.StartTime)
	end, err2 := time.Parse(time.RFC3339, w.EndTime)
	return err1 == nil && err2 == nil && start.Equal(o.Start) && end.Equal(o.End)
}

func createdAfter(fr *compute.FutureReservation, after time.Time) bool {
	t, err := time.Parse(time.RFC3339, fr.CreationTimestamp)
	return after.IsZero() || err != nil || !t.Before(after.Add(-time.Minute))
}

// bookingOf reads a future reservation's window and status as a ledger state.
func (p *Provider) bookingOf(fr *compute.FutureReservation, zone string, cost float64) domain.Booking {
	b := domain.Booking{Provider: Name, Region: regionOf(zone), Zone: zone, CostUSD: cost,
		ProviderRef: fmt.Sprintf("projects/%s/zones/%s/futureReservations/%s", p.project, zone, fr.Name)}
	if s := fr.SpecificSkuProperties; s != nil {
		b.InstanceCount = int(s.TotalCount)
		if s.InstanceProperties != nil {
			b.InstanceType = s.InstanceProperties.MachineType
		}
	}
	if w := fr.TimeWindow; w != nil {
		b.Start, _ = time.Parse(time.RFC3339, w.StartTime)
		b.End, _ = time.Parse(time.RFC3339, w.EndTime)
	}
	status := ""
	if fr.Status != nil {
		status = fr.Status.ProcurementStatus
	}
	b.State = ledgerState(status, b.Start, b.End, p.now())
	b.Message = fmt.Sprintf("future reservation %s in %s: planning status %s, procurement status %s", fr.Name, zone, orUnset(fr.PlanningStatus), orUnset(status))
	return b
}

// ledgerState maps a procurement status onto a ledger state.
func ledgerState(status string, start, end, now time.Time) string {
	switch status {
	case "DECLINED", "FAILED":
		return "failed"
	case "CANCELLED":
		return "deleted"
	}
	switch {
	case !end.IsZero() && !now.Before(end):
		return "ended"
	case status == "FAILED_PARTIALLY_FULFILLED" || !start.IsZero() && !now.Before(start):
		return "active"
	}
	return "scheduled"
}

func orUnset(s string) string {
	if s == "" {
		return "unset"
	}
	return s
}

// TagCost carries a future reservation's cost in USD: Compute shows none, and a rebuilt ledger needs it.
const TagCost = "gpumarket:cost-usd"

// reservationRecord reads a future reservation; false if its description is not gpumarket's.
func (p *Provider) reservationRecord(scope string, fr *compute.FutureReservation) (domain.CloudRecord, bool) {
	tags := readTags(fr.Description)
	if tags[domain.TagTool] != domain.ToolName && tags[domain.TagRef] == "" {
		return domain.CloudRecord{}, false
	}
	zone := path.Base(fr.Zone)
	if fr.Zone == "" {
		zone = strings.TrimPrefix(scope, "zones/")
	}
	b := p.bookingOf(fr, zone, math.NaN())
	rec := domain.CloudRecord{
		Kind: domain.KindCalendar, Ref: tags[domain.TagRef], Actor: tags[domain.TagActor], OfferingID: tags[domain.TagOffering],
		ProviderRef: b.ProviderRef, Provider: Name, Cloud: domain.CloudGCP, Region: b.Region, Zone: zone,
		InstanceType: b.InstanceType, InstanceCount: b.InstanceCount, Start: b.Start, End: b.End,
		CostUSD: math.NaN(), State: b.State,
	}
	rec.CreatedAt, _ = time.Parse(time.RFC3339, fr.CreationTimestamp)
	rec.CreatedAt = rec.CreatedAt.UTC()
	if usd, err := strconv.ParseFloat(tags[TagCost], 64); err == nil && usd >= 0 && !math.IsInf(usd, 0) {
		rec.CostUSD = usd
	}
	return rec, true
}

// describeTags writes tags in a description (reservations take no labels):
// key=value by spaces, values with spaces or quotes Go-quoted.
func describeTags(tags map[string]string) string {
	keys := slices.Sorted(maps.Keys(tags))
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := tags[k]
		if v == "" || strings.ContainsAny(v, " \t\n\"") {
			v = strconv.Quote(v)
		}
		parts[i] = k + "=" + v
	}
	return strings.Join(parts, " ")
}

// readTags reads what describeTags wrote; what is not key=value ends it.
func readTags(desc string) map[string]string {
	out := map[string]string{}
	s := strings.TrimLeft(desc, " ")
	for s != "" {
		k, rest, ok := strings.Cut(s, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \"") {
			break
		}
		v := rest
		if q, err := strconv.QuotedPrefix(rest); err == nil && rest[0] == '"' {
			v, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else if i := strings.IndexByte(rest, ' '); i >= 0 {
			v, rest = rest[:i], rest[i:]
		} else {
			rest = ""
		}
		out[k] = v
		s = strings.TrimLeft(rest, " ")
	}
	return out
}

// reservationTags are domain.Tags and the cost.
func reservationTags(req domain.BookRequest) map[string]string {
	tags := domain.Tags(req.Ref, req.Actor, req.Offering.ID)
	if usd := req.Offering.UpfrontUSD; usd >= 0 && !math.IsNaN(usd) && !math.IsInf(usd, 0) {
		tags[TagCost] = strconv.FormatFloat(usd, 'f', -1, 64)
	}
	return tags
}
