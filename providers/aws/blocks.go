package aws

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gpumarket/gpumarket/providers"
)

// blockTerms are the terms of EC2 Capacity Blocks for ML (providers
// holds them once for every provider, fake and view).
var blockTerms = providers.CapacityBlockTerms

// RefTag is the tag a purchase carries with the ledger's id, so that
// reconciliation can tell our reservation from a look-alike.
const RefTag = "gpumarket:ref"

// ValidateOfferingQuery checks an offering query against the AWS limits
// and fills its defaults (start range now … 8 weeks ahead). Errors name
// the field and the accepted form.
func ValidateOfferingQuery(q providers.OfferingQuery, now time.Time) (providers.OfferingQuery, error) {
	model, ok := providers.NormalizeGPUModel(q.GPU)
	if !ok {
		return q, providers.InvalidQueryf("gpu %q: want one of %s", q.GPU, strings.Join(providers.GPUModels, ", "))
	}
	q.GPU = model
	switch {
	case q.Instances < 0 || q.GPUs < 0:
		return q, providers.InvalidQueryf("count: want a positive number of instances or GPUs")
	case q.Instances == 0 && q.GPUs == 0:
		return q, providers.InvalidQueryf("count: want a positive number of instances or GPUs, got none")
	case q.Instances > blockTerms.MaxInstances:
		return q, providers.InvalidQueryf("count %d: a capacity block holds 1 to %d instances", q.Instances, blockTerms.MaxInstances)
	}
	if q.Duration%time.Hour != 0 || !blockTerms.ValidHours(int(q.Duration/time.Hour)) {
		return q, providers.InvalidQueryf("duration %s: want %s", q.Duration, blockTerms.DurationForm)
	}
	if q.StartAfter.IsZero() || q.StartAfter.Before(now) {
		q.StartAfter = now
	}
	latest := now.Add(blockTerms.MaxLead)
	if q.StartBefore.IsZero() {
		q.StartBefore = latest
	}
	if q.StartAfter.After(latest) {
		return q, providers.InvalidQueryf("start-after %s: a capacity block starts at most 8 weeks ahead (before %s)",
			q.StartAfter.UTC().Format(time.RFC3339), latest.UTC().Format(time.RFC3339))
	}
	if q.StartBefore.After(latest) {
		q.StartBefore = latest
	}
	if !q.StartBefore.After(q.StartAfter) {
		return q, providers.InvalidQueryf("start range: start-before %s is not after start-after %s",
			q.StartBefore.UTC().Format(time.RFC3339), q.StartAfter.UTC().Format(time.RFC3339))
	}
	return q, nil
}

// FindOfferings lists the capacity blocks on sale for the query's GPU in
// its regions, cheapest per GPU-hour first. Regions are asked
// concurrently; one that fails is logged and skipped, and only when every
// region failed is the error returned.
func (p *Provider) FindOfferings(ctx context.Context, q providers.OfferingQuery) ([]providers.Offering, error) {
	q, err := ValidateOfferingQuery(q, p.opt.Now())
	if err != nil {
		return nil, err
	}
	regions, err := p.regions(ctx, providers.Query{Regions: q.Regions})
	if err != nil {
		return nil, err
	}
	var (
		mu     sync.Mutex
		out    []providers.Offering
		errs   []error
		wg     sync.WaitGroup
		failed int
	)
	sem := make(chan struct{}, p.opt.Concurrency)
	for _, region := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			offers, err := p.regionOfferings(ctx, region, q)
			mu.Lock()
			defer mu.Unlock()
			out = append(out, offers...)
			if err != nil {
				failed++
				errs = append(errs, err)
				p.opt.Logger.Warn("capacity blocks", "region", region, "err", err)
			}
		}()
	}
	wg.Wait()
	if failed == len(regions) && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].USDPerGPUHour(), out[j].USDPerGPUHour()
		if a != b {
			return a < b
		}
		return out[i].Start.Before(out[j].Start)
	})
	return out, nil
}

func (p *Provider) regionOfferings(ctx context.Context, region string, q providers.OfferingQuery) ([]providers.Offering, error) {
	types, err := p.gpuTypes(ctx, region)
	if err != nil {
		return nil, err
	}
	var out []providers.Offering
	for _, t := range types {
		if t.GPU.Model != q.GPU {
			continue
		}
		count := q.Instances
		if count == 0 {
			count = int(math.Ceil(float64(q.GPUs) / t.GPU.Count))
		}
		if count < 1 || count > blockTerms.MaxInstances {
			continue
		}
		pg := ec2.NewDescribeCapacityBlockOfferingsPaginator(p.client(region), &ec2.DescribeCapacityBlockOfferingsInput{
			CapacityDurationHours: awssdk.Int32(int32(q.Duration / time.Hour)),
			InstanceType:          awssdk.String(t.InstanceType),
			InstanceCount:         awssdk.Int32(int32(count)),
			StartDateRange:        awssdk.Time(q.StartAfter),
			EndDateRange:          awssdk.Time(q.StartBefore.Add(q.Duration)),
		})
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				// Most GPU types are not sold as blocks; AWS says so
				// with InvalidParameterValue.
				if apiCode(err) == "InvalidParameterValue" || apiCode(err) == "Unsupported" {
					break
				}
				return out, explain(fmt.Errorf("describe capacity blocks of %s in %s: %w", t.InstanceType, region, err))
			}
			for _, o := range page.CapacityBlockOfferings {
				off, err := offeringOf(region, t, o)
				if err != nil {
					return out, fmt.Errorf("describe capacity blocks of %s in %s: %w", t.InstanceType, region, err)
				}
				if off.Start.Before(q.StartAfter) || off.Start.After(q.StartBefore) {
					continue
				}
				out = append(out, off)
			}
		}
	}
	return out, nil
}

func offeringOf(region string, t GPUType, o ec2types.CapacityBlockOffering) (providers.Offering, error) {
	if o.CapacityBlockOfferingId == nil || o.StartDate == nil || o.EndDate == nil || o.InstanceCount == nil {
		return providers.Offering{}, fmt.Errorf("offering without id, dates or count")
	}
	fee, err := strconv.ParseFloat(awssdk.ToString(o.UpfrontFee), 64)
	if err != nil || fee < 0 {
		return providers.Offering{}, fmt.Errorf("offering %s: upfront fee %q is not an amount", *o.CapacityBlockOfferingId, awssdk.ToString(o.UpfrontFee))
	}
	cur := awssdk.ToString(o.CurrencyCode)
	if cur == "" {
		cur = "USD"
	}
	return providers.Offering{
		ID: *o.CapacityBlockOfferingId, Provider: Name, Cloud: providers.CloudAWS, Region: region,
		Zone: awssdk.ToString(o.AvailabilityZone), InstanceType: t.InstanceType, GPU: t.GPU,
		InstanceCount: int(*o.InstanceCount), Start: o.StartDate.UTC(), End: o.EndDate.UTC(),
		UpfrontUSD: fee, Currency: cur, Kind: providers.KindBlock,
	}, nil
}

// noRetry turns the SDK's retries off for one call. PurchaseCapacityBlock
// has no idempotency token: a retry after a lost answer could buy a second
// block, so a failed purchase is reconciled with FindBooking instead.
func noRetry(o *ec2.Options) { o.Retryer = awssdk.NopRetryer{} }

// Book buys a capacity block (PurchaseCapacityBlock, never retried). With
// req.DryRun, AWS's DryRunOperation answer (HTTP 412) means the purchase
// would succeed and is returned as a Booking with DryRun set; any other
// answer is an error.
func (p *Provider) Book(ctx context.Context, req providers.BookRequest) (providers.Booking, error) {
	o := req.Offering
	if !strings.HasPrefix(o.ID, "cb-") {
		return providers.Booking{}, specErrorf("aws: offering id %q: want a capacity block offering id (cb-…) from a search", o.ID)
	}
	if o.Region == "" {
		return providers.Booking{}, specErrorf("aws: offering %s has no region", o.ID)
	}
	in := &ec2.PurchaseCapacityBlockInput{
		CapacityBlockOfferingId: awssdk.String(o.ID),
		InstancePlatform:        ec2types.CapacityReservationInstancePlatformLinuxUnix,
		DryRun:                  awssdk.Bool(req.DryRun),
	}
	if req.Ref != "" {
		in.TagSpecifications = []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeCapacityReservation,
			Tags:         []ec2types.Tag{{Key: awssdk.String(RefTag), Value: awssdk.String(req.Ref)}},
		}}
	}
	out, err := p.client(o.Region).PurchaseCapacityBlock(ctx, in, noRetry)
	if req.DryRun {
		if apiCode(err) == "DryRunOperation" {
			return providers.Booking{Provider: Name, Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType,
				InstanceCount: o.InstanceCount, Start: o.Start, End: o.End, CostUSD: o.UpfrontUSD, DryRun: true,
				Message: "dry run: AWS says the purchase would succeed"}, nil
		}
		if err == nil {
			return providers.Booking{}, fmt.Errorf("aws: dry-run purchase of %s in %s: AWS answered without DryRunOperation; nothing is known to be bought — check with FindBooking", o.ID, o.Region)
		}
		return providers.Booking{}, explain(fmt.Errorf("aws: dry-run purchase of %s in %s: %w", o.ID, o.Region, err))
	}
	if err != nil {
		return providers.Booking{}, explain(fmt.Errorf("aws: purchase capacity block %s in %s: %w", o.ID, o.Region, err))
	}
	if out.CapacityReservation == nil {
		return providers.Booking{}, fmt.Errorf("aws: purchase capacity block %s in %s: the answer names no reservation; check with FindBooking", o.ID, o.Region)
	}
	b := bookingOf(o.Region, *out.CapacityReservation)
	b.CostUSD = o.UpfrontUSD
	b.Message = "purchased " + b.ProviderRef
	return b, nil
}

// FindBooking looks for the reservation a purchase may have made: a
// capacity block of the offering's type, zone, dates and count, created
// after req.After (less a few minutes of clock skew), and not tagged with
// another ledger id. It returns nil, nil when there is none.
func (p *Provider) FindBooking(ctx context.Context, req providers.BookRequest) (*providers.Booking, error) {
	o := req.Offering
	if o.Region == "" || o.InstanceType == "" {
		return nil, fmt.Errorf("aws: find booking: the offering has no region or instance type")
	}
	filters := []ec2types.Filter{{Name: awssdk.String("instance-type"), Values: []string{o.InstanceType}}}
	if o.Zone != "" {
		filters = append(filters, ec2types.Filter{Name: awssdk.String("availability-zone"), Values: []string{o.Zone}})
	}
	after := req.After.Add(-5 * time.Minute)
	pg := ec2.NewDescribeCapacityReservationsPaginator(p.client(o.Region), &ec2.DescribeCapacityReservationsInput{Filters: filters})
	var best *providers.Booking
	var bestCreated time.Time
	bestTagged := false
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, explain(fmt.Errorf("aws: describe capacity reservations in %s: %w", o.Region, err))
		}
		for _, cr := range page.CapacityReservations {
			if cr.ReservationType != ec2types.CapacityReservationTypeCapacityBlock ||
				cr.StartDate == nil || !cr.StartDate.Equal(o.Start) || cr.EndDate == nil || !cr.EndDate.Equal(o.End) ||
				int(awssdk.ToInt32(cr.TotalInstanceCount)) != o.InstanceCount ||
				cr.CreateDate == nil || cr.CreateDate.Before(after) {
				continue
			}
			ref, tagged := tagValue(cr.Tags, RefTag)
			if tagged && req.Ref != "" && ref != req.Ref {
				continue // another intent's purchase
			}
			mine := tagged && ref == req.Ref && req.Ref != ""
			if best == nil || (mine && !bestTagged) || (mine == bestTagged && cr.CreateDate.After(bestCreated)) {
				b := bookingOf(o.Region, cr)
				b.CostUSD = o.UpfrontUSD
				b.Message = "found " + b.ProviderRef
				best, bestCreated, bestTagged = &b, *cr.CreateDate, mine
			}
		}
	}
	return best, nil
}

func tagValue(tags []ec2types.Tag, key string) (string, bool) {
	for _, t := range tags {
		if awssdk.ToString(t.Key) == key {
			return awssdk.ToString(t.Value), true
		}
	}
	return "", false
}

func bookingOf(region string, cr ec2types.CapacityReservation) providers.Booking {
	b := providers.Booking{
		ProviderRef: awssdk.ToString(cr.CapacityReservationId), Provider: Name, Region: region,
		Zone: awssdk.ToString(cr.AvailabilityZone), InstanceType: awssdk.ToString(cr.InstanceType),
		InstanceCount: int(awssdk.ToInt32(cr.TotalInstanceCount)), State: reservationState(cr.State),
	}
	if cr.StartDate != nil {
		b.Start = cr.StartDate.UTC()
	}
	if cr.EndDate != nil {
		b.End = cr.EndDate.UTC()
	}
	return b
}

// reservationState maps AWS's reservation states onto the ledger's.
func reservationState(s ec2types.CapacityReservationState) string {
	switch s {
	case "active":
		return "active"
	case "expired":
		return "ended"
	case "cancelled":
		return "deleted"
	case "failed", "payment-failed", "unsupported":
		return "failed"
	case "scheduled", "payment-pending", "pending", "assessing", "delayed":
		return "scheduled"
	}
	return "unknown"
}
