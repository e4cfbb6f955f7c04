package aws

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gpumarket/gpumarket/domain"
)

// blockTerms are the terms of EC2 Capacity Blocks for ML.
var blockTerms = domain.CapacityBlockTerms

// AWS's own tag on a block: the count bought, while TotalInstanceCount reads 0
// before the start (EC2 User Guide, "View Capacity Blocks").
const tagRequestedQuantity = "aws:ec2capacityreservation:incrementalRequestedQuantity"

// maxBlockGPUs: 64 instances of the type with the most GPUs.
var maxBlockGPUs = func() int {
	most := 8.0
	for _, e := range domain.CatalogEntries(domain.CloudAWS) {
		most = math.Max(most, e.GPU.Count)
	}
	return blockTerms.MaxInstances * int(most)
}()

// ValidateOfferingQuery checks a query against AWS's limits and fills its
// defaults (start now … 8 weeks ahead).
func ValidateOfferingQuery(q domain.OfferingQuery, now time.Time) (domain.OfferingQuery, error) {
	model, ok := domain.NormalizeGPUModel(q.GPU)
	if !ok {
		return q, domain.InvalidQueryf("gpu %q: want one of %s", q.GPU, strings.Join(domain.GPUModels, ", "))
	}
	q.GPU = model
	switch {
	case q.Instances < 0 || q.GPUs < 0:
		return q, domain.InvalidQueryf("count: want a positive number of instances or GPUs")
	case q.Instances == 0 && q.GPUs == 0:
		return q, domain.InvalidQueryf("count: want a positive number of instances or GPUs, got none")
	case q.Instances > blockTerms.MaxInstances:
		return q, domain.InvalidQueryf("count %d: a capacity block holds 1 to %d instances", q.Instances, blockTerms.MaxInstances)
	case q.Instances == 0 && q.GPUs > maxBlockGPUs:
		return q, domain.InvalidQueryf("gpus %d: a capacity block holds at most %d instances (%d GPUs of the largest type)", q.GPUs, blockTerms.MaxInstances, maxBlockGPUs)
	}
	if q.Duration%time.Hour != 0 || !blockTerms.ValidHours(int(q.Duration/time.Hour)) {
		return q, domain.InvalidQueryf("duration %s: want %s", q.Duration, blockTerms.DurationForm)
	}
	if q.FlexDuration < 0 || q.FlexDuration >= q.Duration {
		return q, domain.InvalidQueryf("flex duration %s: want 0 (the asked length only) up to less than the duration (%s)", q.FlexDuration, q.Duration)
	}
	q.StartAfter = domain.Later(q.StartAfter, now)
	latest := now.Add(blockTerms.MaxLead)
	if q.StartAfter.After(latest) {
		return q, domain.InvalidQueryf("start-after %s: a capacity block starts at most 8 weeks ahead (before %s)",
			q.StartAfter.UTC().Format(time.RFC3339), latest.UTC().Format(time.RFC3339))
	}
	if q.StartBefore.IsZero() || q.StartBefore.After(latest) {
		q.StartBefore = latest
	}
	if !q.StartBefore.After(q.StartAfter) {
		return q, domain.InvalidQueryf("start range: start-before %s is not after start-after %s",
			q.StartBefore.UTC().Format(time.RFC3339), q.StartAfter.UTC().Format(time.RFC3339))
	}
	return q, nil
}

// FindOfferings lists the blocks on sale that are what was asked (length or
// FlexDuration, count, start range): AWS also answers with other lengths and
// starts, dropped here. Regions are asked at once; a partial failure comes
// back as domain.RegionErrors beside the offerings that answered.
func (p *Provider) FindOfferings(ctx context.Context, q domain.OfferingQuery) ([]domain.Offering, error) {
	if q.WantsKind(domain.KindTrainingPlan) {
		return p.withTrainingPlans(ctx, q)
	}
	q, err := ValidateOfferingQuery(q, p.opt.Now())
	if err != nil {
		return nil, err
	}
	regions, err := p.regions(ctx, domain.Query{Regions: q.Regions})
	if err != nil {
		return nil, err
	}
	out, failed := eachRegion(p, regions, func(region string) ([]domain.Offering, error) {
		offers, err := p.regionOfferings(ctx, region, q)
		if err != nil {
			// Returned and said once by the searcher; logged only for debugging.
			p.opt.Logger.Debug("capacity blocks", "region", region, "err", err)
		}
		return offers, err
	})
	return ranked(out, failed, len(regions))
}

// ranked is a search's answer: the offerings ranked, and the regions that
// failed beside them, or every region's error when none answered.
func ranked(out []domain.Offering, failed domain.RegionErrors, regions int) ([]domain.Offering, error) {
	rankOfferings(out)
	switch {
	case len(failed) == 0:
		return out, nil
	case len(failed) == regions:
		return nil, failed.Join()
	}
	return out, failed
}

// rankOfferings: asked length first, then flexible; cheapest per GPU-hour, then earliest.
func rankOfferings(out []domain.Offering) {
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].FlexLength != out[j].FlexLength {
			return !out[i].FlexLength
		}
		a, b := out[i].USDPerGPUHour(), out[j].USDPerGPUHour()
		if a != b {
			return a < b
		}
		return out[i].Start.Before(out[j].Start)
	})
}

func (p *Provider) regionOfferings(ctx context.Context, region string, q domain.OfferingQuery) ([]domain.Offering, error) {
	types, err := p.gpuTypes(ctx, region)
	if err != nil {
		return nil, err
	}
	var out []domain.Offering
	for _, t := range types {
		if t.GPU.Model != q.GPU {
			continue
		}
		count := cmp.Or(q.Instances, int(math.Ceil(float64(q.GPUs)/t.GPU.Count)))
		if count < 1 || count > blockTerms.MaxInstances {
			continue
		}
		// The longest accepted length at the latest accepted start.
		in := blockSearch(t.InstanceType, count, int(q.Duration/time.Hour), q.StartAfter, q.StartBefore.Add(q.Duration+q.FlexDuration))
		for page, err := range pages(ctx, ec2.NewDescribeCapacityBlockOfferingsPaginator(p.client(region), in)) {
			if countRefused(err) {
				return out, fmt.Errorf("capacity blocks of %s in %s: AWS does not sell a block of %d instances: %s",
					t.InstanceType, region, count, shortCause(err))
			}
			if notSoldAsBlocks(err) {
				break
			}
			if err != nil {
				return out, explain(fmt.Errorf("describe capacity blocks of %s in %s: %w", t.InstanceType, region, err))
			}
			for _, o := range page.CapacityBlockOfferings {
				off, err := offeringOf(region, t, o, count)
				if err != nil {
					p.opt.Logger.Warn("capacity block offering skipped", "offering", awssdk.ToString(o.CapacityBlockOfferingId),
						"region", region, "instance_type", t.InstanceType, "reason", err.Error())
					continue
				}
				if why := mismatch(off, off.End.Sub(off.Start), q, count); why != "" {
					p.opt.Logger.Debug("capacity block offering not asked for", "offering", off.ID, "region", region, "why", why)
					continue
				}
				off.FlexLength = off.End.Sub(off.Start) != q.Duration
				out = append(out, off)
			}
		}
	}
	return out, nil
}

func blockSearch(instanceType string, count, hours int, from, until time.Time) *ec2.DescribeCapacityBlockOfferingsInput {
	return &ec2.DescribeCapacityBlockOfferingsInput{
		InstanceType: awssdk.String(instanceType), InstanceCount: awssdk.Int32(int32(count)),
		CapacityDurationHours: awssdk.Int32(int32(hours)), StartDateRange: awssdk.Time(from), EndDateRange: awssdk.Time(until),
	}
}

// notSoldAsBlocks: most GPU types are not sold as blocks (InvalidParameterValue, Unsupported).
func notSoldAsBlocks(err error) bool {
	return !countRefused(err) && (apiCode(err) == "InvalidParameterValue" || apiCode(err) == "Unsupported")
}

// mismatch says how an offering of this length differs from the query, "" when
// it does not; count 0 is any count.
func mismatch(o domain.Offering, length time.Duration, q domain.OfferingQuery, count int) string {
	switch {
	case length != q.Duration && (q.FlexDuration == 0 || (length-q.Duration).Abs() > q.FlexDuration):
		return fmt.Sprintf("lasts %s, not %s", length, q.Duration)
	case o.Start.Before(q.StartAfter) || o.Start.After(q.StartBefore):
		return fmt.Sprintf("starts %s, outside [%s, %s]", o.Start.Format(time.RFC3339),
			q.StartAfter.UTC().Format(time.RFC3339), q.StartBefore.UTC().Format(time.RFC3339))
	case count != 0 && o.InstanceCount != count:
		return fmt.Sprintf("holds %d instances, not %d", o.InstanceCount, count)
	}
	return ""
}

// offeringOf reads one offering. The model marks every member optional: no id,
// start or valid fee is an error; a missing end, count or currency is inferred.
func offeringOf(region string, t GPUType, o ec2types.CapacityBlockOffering, asked int) (domain.Offering, error) {
	id := awssdk.ToString(o.CapacityBlockOfferingId)
	if id == "" {
		return domain.Offering{}, fmt.Errorf("offering without an id")
	}
	if o.StartDate == nil {
		return domain.Offering{}, fmt.Errorf("offering %s has no start date", id)
	}
	start := o.StartDate.UTC()
	var end time.Time
	switch {
	case o.EndDate != nil:
		end = o.EndDate.UTC()
	case o.CapacityBlockDurationHours != nil:
		end = start.Add(time.Duration(*o.CapacityBlockDurationHours)*time.Hour + time.Duration(awssdk.ToInt32(o.CapacityBlockDurationMinutes))*time.Minute)
	default:
		return domain.Offering{}, fmt.Errorf("offering %s has neither an end date nor a duration", id)
	}
	if !end.After(start) {
		return domain.Offering{}, fmt.Errorf("offering %s ends (%s) before it starts (%s)", id, end.Format(time.RFC3339), start.Format(time.RFC3339))
	}
	fee, ok := amount(strings.TrimSpace(awssdk.ToString(o.UpfrontFee)))
	if !ok {
		return domain.Offering{}, fmt.Errorf("offering %s: upfront fee %q is not an amount", id, awssdk.ToString(o.UpfrontFee))
	}
	count := asked
	if o.InstanceCount != nil {
		count = int(*o.InstanceCount)
	}
	typ := t.InstanceType
	if it := awssdk.ToString(o.InstanceType); it != "" && it != typ {
		return domain.Offering{}, fmt.Errorf("offering %s is for %s, not the %s asked for", id, it, typ)
	}
	return domain.Offering{
		ID: id, Provider: Name, Cloud: domain.CloudAWS, Region: region,
		Zone: awssdk.ToString(o.AvailabilityZone), InstanceType: typ, GPU: t.GPU,
		InstanceCount: count, Start: start, End: end,
		UpfrontUSD: fee, Currency: cmp.Or(awssdk.ToString(o.CurrencyCode), "USD"), Kind: domain.KindBlock,
	}, nil
}

// amount reads a USD amount; false unless a finite number ≥ 0.
func amount(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil && v >= 0 && !math.IsInf(v, 0)
}

// noRetry turns the SDK's retries off: PurchaseCapacityBlock has no idempotency
// token, so a lost answer is reconciled with FindBooking instead.
func noRetry(o *ec2.Options) { o.Retryer = awssdk.NopRetryer{} }

// Book buys a capacity block (never retried), tagged with domain.Tags and its
// fee, which AWS does not show. A reservation already bought from the offering
// is answered instead, so a purchase is never made twice. With req.DryRun,
// DryRunOperation (HTTP 412) is a Booking with DryRun set.
func (p *Provider) Book(ctx context.Context, req domain.BookRequest) (domain.Booking, error) {
	o := req.Offering
	if isPlan(o) {
		return p.bookTrainingPlan(ctx, req)
	}
	switch {
	case !strings.HasPrefix(o.ID, "cb-"):
		return domain.Booking{}, specErrorf("aws: offering id %q: want a capacity block offering id (cb-…) from a search", o.ID)
	case o.Region == "":
		return domain.Booking{}, specErrorf("aws: offering %s has no region", o.ID)
	case o.InstanceCount < 0 || o.InstanceCount > blockTerms.MaxInstances:
		return domain.Booking{}, limitErrorf("aws: offering %s holds %d instances: a capacity block holds 1 to %d", o.ID, o.InstanceCount, blockTerms.MaxInstances)
	}
	prior, err := p.boughtFrom(ctx, o.Region, o.ID)
	if err != nil {
		return domain.Booking{}, domain.MarkDeclined(fmt.Errorf("aws: look for an earlier purchase of %s in %s before buying (nothing was bought): %w", o.ID, o.Region, err))
	}
	if prior != nil {
		prior.DryRun = req.DryRun
		prior.CostUSD = o.UpfrontUSD
		prior.Message = fmt.Sprintf("already bought from offering %s as %s%s; not bought again", o.ID, prior.ProviderRef, prior.Message)
		return *prior, nil
	}
	in := &ec2.PurchaseCapacityBlockInput{
		CapacityBlockOfferingId: awssdk.String(o.ID),
		InstancePlatform:        ec2types.CapacityReservationInstancePlatformLinuxUnix,
		DryRun:                  awssdk.Bool(req.DryRun),
		TagSpecifications:       tagSpecs(ec2types.ResourceTypeCapacityReservation, blockTags(req, o)),
	}
	out, err := p.client(o.Region).PurchaseCapacityBlock(ctx, in, noRetry)
	if req.DryRun {
		if apiCode(err) == "DryRunOperation" {
			return offered(o, true, "dry run: AWS says the purchase would succeed"), nil
		}
		if err == nil {
			return domain.Booking{}, fmt.Errorf("aws: dry-run purchase of %s in %s: AWS answered without DryRunOperation; nothing is known to be bought — check with FindBooking", o.ID, o.Region)
		}
		return domain.Booking{}, explain(fmt.Errorf("aws: dry-run purchase of %s in %s: %w", o.ID, o.Region, err))
	}
	if err != nil {
		return domain.Booking{}, explain(fmt.Errorf("aws: purchase capacity block %s in %s: %w", o.ID, o.Region, err))
	}
	if out.CapacityReservation == nil {
		return domain.Booking{}, fmt.Errorf("aws: purchase capacity block %s in %s: the answer names no reservation; check with FindBooking", o.ID, o.Region)
	}
	b := p.bookingOf(o.Region, *out.CapacityReservation)
	b.InstanceCount = cmp.Or(b.InstanceCount, o.InstanceCount)
	b.CostUSD = o.UpfrontUSD
	b.Message = "purchased " + b.ProviderRef + b.Message
	return b, nil
}

// offered is a Booking of the offering's terms, before the cloud names it.
func offered(o domain.Offering, dryRun bool, msg string) domain.Booking {
	return domain.Booking{Provider: Name, Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType, InstanceCount: o.InstanceCount,
		Start: o.Start, End: o.End, CostUSD: o.UpfrontUSD, DryRun: dryRun, Message: msg}
}

// blockTags are a purchase's tags: domain.Tags and the fee.
func blockTags(req domain.BookRequest, o domain.Offering) map[string]string {
	tags := domain.Tags(req.Ref, req.Actor, o.ID)
	if o.UpfrontUSD >= 0 && !math.IsInf(o.UpfrontUSD, 0) {
		tags[TagCost] = strconv.FormatFloat(o.UpfrontUSD, 'f', 2, 64)
	}
	return tags
}

// boughtFrom returns the unfailed reservation tagged with the offering, nil if none.
func (p *Provider) boughtFrom(ctx context.Context, region, offeringID string) (*domain.Booking, error) {
	var best *domain.Booking
	var bestCreated time.Time
	for page, err := range p.reservations(ctx, region, nil) {
		if err != nil {
			return nil, explain(err)
		}
		for _, cr := range page.CapacityReservations {
			if v, _ := tagValue(cr.Tags, domain.TagOffering); v != offeringID {
				continue
			}
			b := p.bookingOf(region, cr)
			if b.State == "failed" || b.State == "deleted" {
				continue
			}
			created := awssdk.ToTime(cr.CreateDate)
			if best == nil || created.After(bestCreated) {
				if ref, ok := tagValue(cr.Tags, domain.TagRef); ok {
					b.Message = " (ledger row " + ref + ")" + b.Message
				}
				best, bestCreated = &b, created
			}
		}
	}
	return best, nil
}

// tagSpecs is one TagSpecification of the tags, in a stable order.
func tagSpecs(rt ec2types.ResourceType, tags map[string]string) []ec2types.TagSpecification {
	spec := ec2types.TagSpecification{ResourceType: rt}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		spec.Tags = append(spec.Tags, ec2types.Tag{Key: awssdk.String(k), Value: awssdk.String(tags[k])})
	}
	return []ec2types.TagSpecification{spec}
}

// FindBooking looks for the block a purchase may have made: same type, zone,
// dates and count, created after req.After less clock skew, not another row's;
// one tagged with req.Ref beats an untagged look-alike. nil, nil when none.
func (p *Provider) FindBooking(ctx context.Context, req domain.BookRequest) (*domain.Booking, error) {
	o := req.Offering
	if isPlan(o) {
		return p.findTrainingPlan(ctx, req)
	}
	if o.Region == "" || o.InstanceType == "" {
		return nil, fmt.Errorf("aws: find booking: the offering has no region or instance type")
	}
	filters := []ec2types.Filter{
		{Name: awssdk.String("instance-type"), Values: []string{o.InstanceType}},
	}
	if o.Zone != "" {
		filters = append(filters, ec2types.Filter{Name: awssdk.String("availability-zone"), Values: []string{o.Zone}})
	}
	after := req.After.Add(-5 * time.Minute)
	var best *domain.Booking
	var bestCreated time.Time
	bestMine := false
	for page, err := range p.reservations(ctx, o.Region, filters) {
		if err != nil {
			return nil, explain(fmt.Errorf("aws: describe capacity reservations in %s: %w", o.Region, err))
		}
		for _, cr := range page.CapacityReservations {
			if cr.ReservationType != ec2types.CapacityReservationTypeCapacityBlock ||
				cr.StartDate == nil || !cr.StartDate.Equal(o.Start) || cr.EndDate == nil || !cr.EndDate.Equal(o.End) ||
				reservationCount(cr) != o.InstanceCount ||
				cr.CreateDate == nil || cr.CreateDate.Before(after) {
				continue
			}
			if from, ok := tagValue(cr.Tags, domain.TagOffering); ok && from != o.ID {
				continue // bought from another offering
			}
			ref, tagged := tagValue(cr.Tags, domain.TagRef)
			if tagged && ref != req.Ref {
				continue // another intent's purchase
			}
			mine := tagged && req.Ref != ""
			if best == nil || (mine && !bestMine) || (mine == bestMine && cr.CreateDate.After(bestCreated)) {
				b := p.bookingOf(o.Region, cr)
				b.CostUSD = o.UpfrontUSD
				b.Message = "found " + b.ProviderRef + b.Message
				best, bestCreated, bestMine = &b, *cr.CreateDate, mine
			}
		}
	}
	return best, nil
}

// reservations pages DescribeCapacityReservations; the model lists no tag or
// reservation-type filter, so callers pick among the pages.
func (p *Provider) reservations(ctx context.Context, region string, filters []ec2types.Filter) iter.Seq2[*ec2.DescribeCapacityReservationsOutput, error] {
	return pages(ctx, ec2.NewDescribeCapacityReservationsPaginator(p.client(region), &ec2.DescribeCapacityReservationsInput{Filters: filters}))
}

// reservationCount is TotalInstanceCount once active, AWS's requested-quantity tag before.
func reservationCount(cr ec2types.CapacityReservation) int {
	if n := int(awssdk.ToInt32(cr.TotalInstanceCount)); n > 0 {
		return n
	}
	if v, ok := tagValue(cr.Tags, tagRequestedQuantity); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

func tagValue(tags []ec2types.Tag, key string) (string, bool) {
	for _, t := range tags {
		if awssdk.ToString(t.Key) == key {
			return awssdk.ToString(t.Value), true
		}
	}
	return "", false
}

// bookingOf reads a reservation as a Booking; Message says what the state does not.
func (p *Provider) bookingOf(region string, cr ec2types.CapacityReservation) domain.Booking {
	start, end := awssdk.ToTime(cr.StartDate).UTC(), awssdk.ToTime(cr.EndDate).UTC()
	state, note := reservationState(cr.State, start, end, p.opt.Now())
	b := domain.Booking{
		ProviderRef: awssdk.ToString(cr.CapacityReservationId), Provider: Name, Region: region,
		Zone: awssdk.ToString(cr.AvailabilityZone), InstanceType: awssdk.ToString(cr.InstanceType),
		InstanceCount: reservationCount(cr), State: state, Start: start, End: end,
	}
	if note != "" {
		b.Message = " (" + note + ")"
	}
	return b
}

// datedState is the state of something held from start to end, by the dates alone.
func datedState(start, end, now time.Time) string {
	switch {
	case !start.IsZero() && now.Before(start):
		return "scheduled"
	case end.IsZero() || now.Before(end):
		return "active"
	}
	return "ended"
}

// stateNote is a cloud state as the ledger's, with a note; state "" goes
// by the dates (datedState).
type stateNote struct{ state, note string }

// cloudState looks s up in states; one not there exists, so it goes by the
// dates too, and the note says this version does not know it (what: whose).
func cloudState[S ~string](states map[S]stateNote, what string, s S, start, end, now time.Time) (state, note string) {
	sn, ok := states[s]
	if !ok {
		sn.note = fmt.Sprintf("%s %q, which this version of gpumarket does not know", what, string(s))
	}
	if sn.state == "" {
		sn.state = datedState(start, end, now)
	}
	return sn.state, sn.note
}

// reservationStates are AWS's reservation states. None reads "unknown" or
// "pending" (a lost answer, a call in flight): payment-pending is held for
// the buyer, so scheduled or active by its dates.
var reservationStates = map[ec2types.CapacityReservationState]stateNote{
	ec2types.CapacityReservationStateActive:         {"active", ""},
	ec2types.CapacityReservationStateExpired:        {"ended", ""},
	ec2types.CapacityReservationStateCancelled:      {"deleted", ""},
	ec2types.CapacityReservationStateCancelling:     {"deleted", "AWS is cancelling it; the capacity is released"},
	ec2types.CapacityReservationStateFailed:         {"failed", "AWS reports the reservation failed"},
	ec2types.CapacityReservationStateUnsupported:    {"failed", "AWS cannot deliver it (unsupported)"},
	ec2types.CapacityReservationStatePaymentFailed:  {"failed", "AWS could not take the upfront payment within 12 hours and released the block"},
	ec2types.CapacityReservationStatePaymentPending: {"", "payment pending at AWS: the block is held while AWS takes the upfront payment (up to 12 hours)"},
	ec2types.CapacityReservationStateScheduled:      {},
	ec2types.CapacityReservationStatePending:        {},
	ec2types.CapacityReservationStateAssessing:      {},
	ec2types.CapacityReservationStateDelayed:        {},
	ec2types.CapacityReservationStateUnavailable:    {"", "AWS reports its capacity unavailable"},
}

func reservationState(s ec2types.CapacityReservationState, start, end, now time.Time) (state, note string) {
	return cloudState(reservationStates, "AWS state", s, start, end, now)
}

// RefreshOffering finds the offering's id again in the same search as AWS sells
// now; one no longer offered matches domain.ErrOfferingGone.
func (p *Provider) RefreshOffering(ctx context.Context, o domain.Offering) (domain.Offering, error) {
	if isPlan(o) {
		return p.refreshTrainingPlan(ctx, o)
	}
	switch {
	case !strings.HasPrefix(o.ID, "cb-"):
		return o, specErrorf("aws: offering id %q: want a capacity block offering id (cb-…) from a search", o.ID)
	case o.Region == "" || o.InstanceType == "":
		return o, specErrorf("aws: offering %s has no region or instance type", o.ID)
	case o.InstanceCount < 1 || o.InstanceCount > blockTerms.MaxInstances:
		return o, limitErrorf("aws: offering %s holds %d instances: a capacity block holds 1 to %d", o.ID, o.InstanceCount, blockTerms.MaxInstances)
	case !o.End.After(o.Start):
		return o, specErrorf("aws: offering %s has no dates", o.ID)
	}
	from := domain.Later(o.Start.Add(-24*time.Hour), p.opt.Now())
	in := blockSearch(o.InstanceType, o.InstanceCount, sellableHours(o.End.Sub(o.Start)), from, o.End.Add(24*time.Hour))
	t := GPUType{InstanceType: o.InstanceType, GPU: o.GPU}
	for page, err := range pages(ctx, ec2.NewDescribeCapacityBlockOfferingsPaginator(p.client(o.Region), in)) {
		if notSoldAsBlocks(err) {
			break // the type is no longer sold as blocks
		}
		if err != nil {
			return o, explain(fmt.Errorf("aws: describe offering %s in %s again: %w", o.ID, o.Region, err))
		}
		for _, x := range page.CapacityBlockOfferings {
			if awssdk.ToString(x.CapacityBlockOfferingId) != o.ID {
				continue
			}
			fresh, err := offeringOf(o.Region, t, x, o.InstanceCount)
			if err != nil {
				return o, fmt.Errorf("aws: describe offering %s in %s again: %w", o.ID, o.Region, err)
			}
			fresh.FlexLength = o.FlexLength
			return fresh, nil
		}
	}
	return o, fmt.Errorf("aws: offering %s in %s (%d × %s from %s): %w", o.ID, o.Region, o.InstanceCount, o.InstanceType,
		o.Start.UTC().Format(time.RFC3339), domain.ErrOfferingGone)
}

// sellableHours is the sold length nearest d: AWS refuses a search for another.
func sellableHours(d time.Duration) int {
	best, bestDiff := 24, time.Duration(math.MaxInt64)
	for h := 24; h <= int(blockTerms.MaxDuration/time.Hour); h += 24 {
		if !blockTerms.ValidHours(h) {
			continue
		}
		if diff := (time.Duration(h)*time.Hour - d).Abs(); diff < bestDiff {
			best, bestDiff = h, diff
		}
	}
	return best
}

// TagCost carries a block's cost in USD: AWS shows no price of a sold block, and a rebuilt ledger needs it.
const TagCost = "gpumarket:cost-usd"

// ourTags mark a resource as gpumarket's: TagTool, and TagRef on earlier purchases.
var ourTags = []string{domain.TagTool, domain.TagRef}

// ListRecords lists from their tags the blocks and fleets gpumarket bought or
// launched since, so a lost ledger can be rebuilt: blocks by tag key, request
// fleets paged, instant fleets named by their tagged instances' aws:ec2:fleet-id
// (one whose instances are all gone is not found). A block's cost is its TagCost,
// else NaN; regions that failed are named in the error beside the records.
func (p *Provider) ListRecords(ctx context.Context, since time.Time) ([]domain.CloudRecord, error) {
	regions, err := p.regions(ctx, domain.Query{})
	if err != nil {
		return nil, err
	}
	out, failed := eachRegion(p, regions, func(region string) ([]domain.CloudRecord, error) {
		return p.regionRecords(ctx, region, since)
	})
	var errs []error
	for _, r := range failed.Regions() {
		errs = append(errs, fmt.Errorf("aws: list gpumarket's records in %s: %w", r, failed[r]))
	}
	domain.SortRecords(out)
	return out, errors.Join(errs...)
}

func (p *Provider) regionRecords(ctx context.Context, region string, since time.Time) ([]domain.CloudRecord, error) {
	var out []domain.CloudRecord
	for page, err := range p.reservations(ctx, region, nil) {
		if err != nil {
			return out, explain(fmt.Errorf("describe capacity reservations: %w", err))
		}
		for _, cr := range page.CapacityReservations {
			if cr.CreateDate != nil && cr.CreateDate.Before(since) || !tagged(cr.Tags) {
				continue
			}
			out = append(out, p.blockRecord(region, cr))
		}
	}
	for fd, err := range p.fleets(ctx, region, ec2types.Filter{Name: awssdk.String("tag-key"), Values: ourTags}) {
		if err != nil {
			return out, explain(err)
		}
		if (fd.CreateTime == nil || !fd.CreateTime.Before(since)) && tagged(fd.Tags) {
			out = append(out, p.fleetRecord(region, fd))
		}
	}
	return out, nil
}

func tagged(tags []ec2types.Tag) bool {
	return slices.ContainsFunc(ourTags, func(k string) bool {
		_, ok := tagValue(tags, k)
		return ok
	})
}

func (p *Provider) blockRecord(region string, cr ec2types.CapacityReservation) domain.CloudRecord {
	b := p.bookingOf(region, cr)
	r := domain.CloudRecord{
		Kind: domain.KindBlock, ProviderRef: b.ProviderRef, Provider: Name, Cloud: domain.CloudAWS,
		Region: region, Zone: b.Zone, InstanceType: b.InstanceType, InstanceCount: b.InstanceCount,
		Start: b.Start, End: b.End, CostUSD: math.NaN(), State: b.State, CreatedAt: awssdk.ToTime(cr.CreateDate).UTC(),
	}
	r.Ref, _ = tagValue(cr.Tags, domain.TagRef)
	r.Actor, _ = tagValue(cr.Tags, domain.TagActor)
	r.OfferingID, _ = tagValue(cr.Tags, domain.TagOffering)
	if v, ok := tagValue(cr.Tags, TagCost); ok {
		if usd, ok := amount(v); ok {
			r.CostUSD = usd
		}
	}
	return r
}

func (p *Provider) fleetRecord(region string, fd ec2types.FleetData) domain.CloudRecord {
	f := p.fleetOf(region, fd)
	r := domain.CloudRecord{
		Kind: domain.KindFleet, ProviderRef: f.ID, Provider: Name, Cloud: domain.CloudAWS, Region: region,
		InstanceCount: f.Target, CostUSD: math.NaN(), State: f.State, CreatedAt: awssdk.ToTime(fd.CreateTime).UTC(),
		Start: cmp.Or(awssdk.ToTime(fd.ValidFrom), awssdk.ToTime(fd.CreateTime)).UTC(), End: awssdk.ToTime(fd.ValidUntil).UTC(),
	}
	var types, zones []string
	add := func(list []string, v string) []string {
		if v == "" || slices.Contains(list, v) {
			return list
		}
		return append(list, v)
	}
	for _, c := range fd.LaunchTemplateConfigs {
		for _, o := range c.Overrides {
			types, zones = add(types, string(o.InstanceType)), add(zones, awssdk.ToString(o.AvailabilityZone))
		}
	}
	r.InstanceType, r.Zone = strings.Join(types, ","), strings.Join(zones, ",")
	r.Ref, _ = tagValue(fd.Tags, domain.TagRef)
	r.Actor, _ = tagValue(fd.Tags, domain.TagActor)
	return r
}

// EC2 Fleet limits checked before any call ("Quotas for EC2 Fleet and Spot Fleet", EC2 User Guide).
const (
	// MaxFleetTarget is the most instances one EC2 Fleet may target.
	MaxFleetTarget = 10000
	// MaxFleetPools is the most pools (type × zone) a request or maintain fleet may name.
	MaxFleetPools = 300
)

const tagFleetID = "aws:ec2:fleet-id"

// LaunchFleet launches a spot fleet with CreateFleet; its client token is the
// ledger row's id, so a repeat returns the first fleet. A fleet to run now is
// "instant": one call answering what launched and what could not, no standing
// request billing after gpumarket exits. A scheduled one is "request", the type
// AWS documents ValidFrom/ValidUntil for, likewise not replacing interruptions.
func (p *Provider) LaunchFleet(ctx context.Context, spec domain.FleetSpec) (domain.Fleet, error) {
	if err := p.validateFleet(&spec); err != nil {
		return domain.Fleet{}, err
	}
	now := p.opt.Now()
	in := p.createFleetInput(spec, now)
	out, err := p.client(spec.Region).CreateFleet(ctx, in)
	if spec.DryRun {
		if apiCode(err) == "DryRunOperation" {
			return domain.Fleet{Provider: Name, Region: spec.Region, Target: spec.TargetCapacity, DryRun: true,
				Message: "dry run: AWS says the fleet would launch" + scheduleNote(in)}, nil
		}
		if err == nil {
			return domain.Fleet{}, fmt.Errorf("aws: dry-run fleet in %s: AWS answered without DryRunOperation (fleet %s); delete it if it exists",
				spec.Region, awssdk.ToString(out.FleetId))
		}
		return domain.Fleet{}, explain(fmt.Errorf("aws: dry-run fleet in %s: %w", spec.Region, err))
	}
	if err != nil {
		return domain.Fleet{}, explain(fmt.Errorf("aws: create fleet in %s: %w", spec.Region, err))
	}
	f := domain.Fleet{ID: awssdk.ToString(out.FleetId), Provider: Name, Region: spec.Region, Target: spec.TargetCapacity, State: "active"}
	if in.Type != ec2types.FleetTypeInstant {
		if f.ID == "" {
			return f, fmt.Errorf("aws: create fleet in %s: the answer names no fleet; look it up by its client token", spec.Region)
		}
		if in.ValidFrom != nil {
			f.State = "scheduled"
		}
		f.Message = fmt.Sprintf("fleet %s of %d instances requested%s", f.ID, f.Target, scheduleNote(in))
		return f, nil
	}
	for _, inst := range out.Instances {
		f.Instances += len(inst.InstanceIds)
	}
	var msgs []string
	for _, e := range out.Errors {
		msgs = append(msgs, awssdk.ToString(e.ErrorCode)+": "+awssdk.ToString(e.ErrorMessage))
	}
	switch {
	case f.ID == "":
		return f, fmt.Errorf("aws: create fleet in %s launched nothing: %s", spec.Region, strings.Join(msgs, "; "))
	case f.Instances == 0:
		f.State = "failed"
	}
	f.Message = fmt.Sprintf("launched %d of %d instances", f.Instances, f.Target)
	if len(msgs) > 0 {
		f.Message += "; " + strings.Join(msgs, "; ")
	}
	return f, nil
}

func (p *Provider) createFleetInput(spec domain.FleetSpec, now time.Time) *ec2.CreateFleetInput {
	ltSpec := &ec2types.FleetLaunchTemplateSpecificationRequest{Version: awssdk.String("$Default")}
	if strings.HasPrefix(spec.LaunchTemplate, "lt-") {
		ltSpec.LaunchTemplateId = awssdk.String(spec.LaunchTemplate)
	} else {
		ltSpec.LaunchTemplateName = awssdk.String(spec.LaunchTemplate)
	}
	var maxPrice *string
	if spec.MaxPriceUSD != nil {
		maxPrice = awssdk.String(strconv.FormatFloat(*spec.MaxPriceUSD, 'f', -1, 64))
	}
	var overrides []ec2types.FleetLaunchTemplateOverridesRequest
	zones := spec.Zones
	if len(zones) == 0 {
		zones = []string{""}
	}
	for _, t := range spec.InstanceTypes {
		for _, z := range zones {
			o := ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(t), MaxPrice: maxPrice}
			if z != "" {
				o.AvailabilityZone = awssdk.String(z)
			}
			overrides = append(overrides, o)
		}
	}
	tags := domain.Tags(spec.ClientToken, spec.Actor, "")
	in := &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: ltSpec, Overrides: overrides,
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       awssdk.Int32(int32(spec.TargetCapacity)),
			OnDemandTargetCapacity:    awssdk.Int32(int32(spec.OnDemandBase)),
			SpotTargetCapacity:        awssdk.Int32(int32(spec.TargetCapacity - spec.OnDemandBase)),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeSpot,
		},
		SpotOptions:       &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategy(spec.Strategy)},
		DryRun:            awssdk.Bool(spec.DryRun),
		TagSpecifications: append(tagSpecs(ec2types.ResourceTypeFleet, tags), tagSpecs(ec2types.ResourceTypeInstance, tags)...),
	}
	if spec.OnDemandBase > 0 {
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	if spec.ClientToken != "" {
		in.ClientToken = awssdk.String(spec.ClientToken)
	}
	if spec.Start.After(now) || !spec.End.IsZero() {
		in.Type = ec2types.FleetTypeRequest
		// A request fleet tags only itself; instances get the launch template's tags.
		in.TagSpecifications = tagSpecs(ec2types.ResourceTypeFleet, tags)
		if spec.Start.After(now) {
			in.ValidFrom = awssdk.Time(spec.Start.UTC().Truncate(time.Second))
		}
		if !spec.End.IsZero() {
			// Truncated: the fleet never ends later than asked.
			in.ValidUntil = awssdk.Time(spec.End.UTC().Truncate(time.Second))
			in.TerminateInstancesWithExpiration = awssdk.Bool(true)
		}
	}
	return in
}

func scheduleNote(in *ec2.CreateFleetInput) string {
	var s string
	if in.ValidFrom != nil {
		s += "; AWS launches it at " + in.ValidFrom.UTC().Format(time.RFC3339)
	}
	if in.ValidUntil != nil {
		s += "; AWS terminates its instances at " + in.ValidUntil.UTC().Format(time.RFC3339)
	}
	return s
}

// ValidateFleet checks a spec without a call and fills its defaults; errors
// match ErrInvalidSpec and domain.ErrDeclined.
func (p *Provider) ValidateFleet(spec domain.FleetSpec) (domain.FleetSpec, error) {
	err := p.validateFleet(&spec)
	return spec, err
}

func (p *Provider) validateFleet(spec *domain.FleetSpec) error {
	if spec.Region == "" {
		return specErrorf("aws: fleet: region is required")
	}
	if len(spec.InstanceTypes) == 0 {
		return specErrorf("aws: fleet: at least one instance type is required")
	}
	if spec.TargetCapacity < 1 {
		return specErrorf("aws: fleet: target %d: want at least 1 instance", spec.TargetCapacity)
	}
	if spec.TargetCapacity > MaxFleetTarget {
		return limitErrorf("aws: fleet: target %d: an EC2 Fleet targets at most %d instances (AWS's quota per fleet)", spec.TargetCapacity, MaxFleetTarget)
	}
	if spec.OnDemandBase < 0 || spec.OnDemandBase > spec.TargetCapacity {
		return specErrorf("aws: fleet: on-demand base %d: want 0 to the target (%d)", spec.OnDemandBase, spec.TargetCapacity)
	}
	spec.Strategy = cmp.Or(spec.Strategy, domain.StrategyPriceCapacityOptimized)
	if !slices.Contains(domain.Strategies, spec.Strategy) {
		return specErrorf("aws: fleet: strategy %q: want one of %s", spec.Strategy, strings.Join(domain.Strategies, ", "))
	}
	if spec.MaxPriceUSD != nil && (*spec.MaxPriceUSD <= 0 || math.IsNaN(*spec.MaxPriceUSD) || math.IsInf(*spec.MaxPriceUSD, 0)) {
		return specErrorf("aws: fleet: max price %g: want a positive USD per instance-hour", *spec.MaxPriceUSD)
	}
	now := p.opt.Now()
	if !spec.End.IsZero() {
		start := domain.Later(spec.Start, now)
		if !spec.End.After(start.Add(time.Minute)) {
			return specErrorf("aws: fleet: end %s: want a time after the start (%s)", spec.End.UTC().Format(time.RFC3339), start.UTC().Format(time.RFC3339))
		}
	}
	if pools := len(spec.InstanceTypes) * max(1, len(spec.Zones)); (spec.Start.After(now) || !spec.End.IsZero()) && pools > MaxFleetPools {
		return limitErrorf("aws: fleet: %d instance types × zones: a scheduled fleet names at most %d (AWS's quota of capacity pools per request fleet)", pools, MaxFleetPools)
	}
	spec.LaunchTemplate = cmp.Or(spec.LaunchTemplate, p.opt.LaunchTemplate)
	if spec.LaunchTemplate == "" {
		return specErrorf("aws: fleet: no launch template: set aws.launch_template in the config file (an id lt-… or a name)")
	}
	return nil
}

// DescribeFleet returns a fleet's state and running instances.
func (p *Provider) DescribeFleet(ctx context.Context, region, id string) (domain.Fleet, error) {
	fd, err := p.fleetByID(ctx, region, id)
	if err != nil {
		return domain.Fleet{}, explain(fmt.Errorf("aws: describe fleet %s in %s: %w", id, region, err))
	}
	if fd == nil {
		return domain.Fleet{}, fmt.Errorf("aws: describe fleet %s in %s: no such fleet", id, region)
	}
	return p.describedFleet(ctx, region, *fd), nil
}

// fleetByID describes one fleet; nil if AWS does not list it.
func (p *Provider) fleetByID(ctx context.Context, region, id string) (*ec2types.FleetData, error) {
	out, err := p.client(region).DescribeFleets(ctx, &ec2.DescribeFleetsInput{FleetIds: []string{id}})
	if err != nil {
		return nil, err
	}
	for _, fd := range out.Fleets {
		if awssdk.ToString(fd.FleetId) == id {
			return &fd, nil
		}
	}
	return nil, nil
}

// describedFleet counts a fleet's running instances: an instant fleet lists them;
// another's come from DescribeFleetInstances, else FulfilledCapacity.
func (p *Provider) describedFleet(ctx context.Context, region string, fd ec2types.FleetData) domain.Fleet {
	f := p.fleetOf(region, fd)
	if fd.Type == ec2types.FleetTypeInstant {
		for _, inst := range fd.Instances {
			f.Instances += len(inst.InstanceIds)
		}
		return f
	}
	f.Instances = int(awssdk.ToFloat64(fd.FulfilledCapacity))
	if f.State != "active" {
		return f
	}
	n, err := p.activeInstances(ctx, region, f.ID)
	if err != nil {
		f.Message += " (running count from FulfilledCapacity: " + err.Error() + ")"
		return f
	}
	f.Instances = n
	return f
}

func (p *Provider) fleetOf(region string, fd ec2types.FleetData) domain.Fleet {
	state, note := fleetState(fd, p.opt.Now())
	f := domain.Fleet{ID: awssdk.ToString(fd.FleetId), Provider: Name, Region: region, State: state}
	if fd.TargetCapacitySpecification != nil {
		f.Target = int(awssdk.ToInt32(fd.TargetCapacitySpecification.TotalTargetCapacity))
	}
	f.Message = string(fd.FleetState)
	if note != "" {
		f.Message += " (" + note + ")"
	}
	return f
}

// activeInstances counts a request or maintain fleet's instances (not instant fleets).
func (p *Provider) activeInstances(ctx context.Context, region, id string) (int, error) {
	n := 0
	var token *string
	for {
		out, err := p.client(region).DescribeFleetInstances(ctx, &ec2.DescribeFleetInstancesInput{
			FleetId: awssdk.String(id), MaxResults: awssdk.Int32(1000), NextToken: token})
		if err != nil {
			return 0, err
		}
		n += len(out.ActiveInstances)
		if token = out.NextToken; awssdk.ToString(token) == "" {
			return n, nil
		}
	}
}

// FindFleet finds the fleet launched with a client token, nil, nil if none.
// DescribeFleets has no token filter and lists instant fleets only by id: listed
// fleets are matched, then instances tagged with the token name theirs.
func (p *Provider) FindFleet(ctx context.Context, region, clientToken string) (*domain.Fleet, error) {
	for fd, err := range p.fleets(ctx, region, ec2types.Filter{Name: awssdk.String("tag:" + domain.TagRef), Values: []string{clientToken}}) {
		if err != nil {
			return nil, explain(fmt.Errorf("aws: find fleet with client token %s in %s: %w", clientToken, region, err))
		}
		if awssdk.ToString(fd.ClientToken) == clientToken {
			f := p.describedFleet(ctx, region, fd)
			return &f, nil
		}
	}
	return nil, nil
}

// fleets ranges over a region's fleets: DescribeFleets' pages, then the instant
// fleets it does not list, named by the filter's instances' aws:ec2:fleet-id.
func (p *Provider) fleets(ctx context.Context, region string, filter ec2types.Filter) iter.Seq2[ec2types.FleetData, error] {
	return func(yield func(ec2types.FleetData, error) bool) {
		c, seen := p.client(region), map[string]bool{}
		each := func(fleets []ec2types.FleetData) bool {
			for _, fd := range fleets {
				seen[awssdk.ToString(fd.FleetId)] = true
				if !yield(fd, nil) {
					return false
				}
			}
			return true
		}
		for page, err := range pages(ctx, ec2.NewDescribeFleetsPaginator(c, &ec2.DescribeFleetsInput{MaxResults: awssdk.Int32(1000)})) {
			if err != nil {
				yield(ec2types.FleetData{}, fmt.Errorf("describe fleets: %w", err))
				return
			} else if !each(page.Fleets) {
				return
			}
		}
		var ids []string
		in := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{filter}, MaxResults: awssdk.Int32(1000)}
		for page, err := range pages(ctx, ec2.NewDescribeInstancesPaginator(c, in)) {
			if err != nil {
				yield(ec2types.FleetData{}, fmt.Errorf("describe instances: %w", err))
				return
			}
			for _, r := range page.Reservations {
				for _, inst := range r.Instances {
					if id, _ := tagValue(inst.Tags, tagFleetID); id != "" && !seen[id] {
						seen[id] = true
						ids = append(ids, id)
					}
				}
			}
		}
		slices.Sort(ids)
		for chunk := range slices.Chunk(ids, 100) {
			out, err := c.DescribeFleets(ctx, &ec2.DescribeFleetsInput{FleetIds: chunk})
			if err != nil {
				yield(ec2types.FleetData{}, fmt.Errorf("describe fleets %s: %w", strings.Join(chunk, ", "), err))
				return
			} else if !each(out.Fleets) {
				return
			}
		}
	}
}

// DeleteFleet deletes a fleet and terminates its instances. DeleteFleets "might
// fail" for an instant fleet over 1,000 instances (the model), so those beyond
// are terminated first.
func (p *Provider) DeleteFleet(ctx context.Context, region, id string) error {
	if err := p.trimInstantFleet(ctx, region, id); err != nil {
		return explain(fmt.Errorf("aws: delete fleet %s in %s: %w", id, region, err))
	}
	out, err := p.client(region).DeleteFleets(ctx, &ec2.DeleteFleetsInput{FleetIds: []string{id}, TerminateInstances: awssdk.Bool(true)})
	if err != nil {
		return explain(fmt.Errorf("aws: delete fleet %s in %s: %w", id, region, err))
	}
	for _, u := range out.UnsuccessfulFleetDeletions {
		if awssdk.ToString(u.FleetId) == id {
			msg := ""
			if u.Error != nil {
				msg = string(u.Error.Code) + ": " + awssdk.ToString(u.Error.Message)
			}
			return fmt.Errorf("aws: delete fleet %s in %s: %s", id, region, msg)
		}
	}
	if !slices.ContainsFunc(out.SuccessfulFleetDeletions, func(s ec2types.DeleteFleetSuccessItem) bool { return awssdk.ToString(s.FleetId) == id }) {
		return fmt.Errorf("aws: delete fleet %s in %s: AWS did not confirm the deletion", id, region)
	}
	return nil
}

// maxInstantDelete: DeleteFleets' documented instant limit and TerminateInstances' ids per call.
const maxInstantDelete = 1000

// trimInstantFleet terminates an instant fleet's instances beyond maxInstantDelete.
func (p *Provider) trimInstantFleet(ctx context.Context, region, id string) error {
	fd, err := p.fleetByID(ctx, region, id)
	if err != nil || fd == nil || fd.Type != ec2types.FleetTypeInstant {
		return nil // DeleteFleets, asked next, says what is wrong
	}
	var ids []string
	for _, inst := range fd.Instances {
		ids = append(ids, inst.InstanceIds...)
	}
	for len(ids) > maxInstantDelete {
		n := min(maxInstantDelete, len(ids)-maxInstantDelete)
		if _, err := p.client(region).TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:n]}); err != nil {
			return fmt.Errorf("terminate %d of its %d instances before deleting it: %w", n, len(ids), err)
		}
		ids = ids[n:]
	}
	return nil
}

// fleetState maps a fleet onto the ledger's states, with a note: before
// ValidFrom scheduled, past ValidUntil ended; an unknown state is active.
func fleetState(fd ec2types.FleetData, now time.Time) (state, note string) {
	expired := fd.ValidUntil != nil && !now.Before(*fd.ValidUntil)
	switch fd.FleetState {
	case ec2types.FleetStateCodeSubmitted, ec2types.FleetStateCodeModifying, ec2types.FleetStateCodeActive:
		switch {
		case expired:
			return "ended", "past its end; AWS is expiring it"
		case fd.ValidFrom != nil && now.Before(*fd.ValidFrom):
			return "scheduled", "AWS launches it at " + fd.ValidFrom.UTC().Format(time.RFC3339)
		}
		return "active", ""
	case ec2types.FleetStateCodeDeletedRunning:
		note = "its instances were left running"
		fallthrough
	case ec2types.FleetStateCodeDeleted, ec2types.FleetStateCodeDeletedTerminatingInstances:
		if expired {
			return "ended", note
		}
		return "deleted", note
	case ec2types.FleetStateCodeFailed:
		return "failed", ""
	}
	return "active", fmt.Sprintf("AWS state %q, which this version of gpumarket does not know", string(fd.FleetState))
}
