package aws

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gpumarket/gpumarket/domain"
)

var (
	_ domain.RecordLister      = (*Provider)(nil)
	_ domain.OfferingRefresher = (*Provider)(nil)
)

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
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ProviderRef < out[j].ProviderRef
	})
	return out, errors.Join(errs...)
}

func (p *Provider) regionRecords(ctx context.Context, region string, since time.Time) ([]domain.CloudRecord, error) {
	var out []domain.CloudRecord
	// The model lists no tag filter for DescribeCapacityReservations.
	pg := ec2.NewDescribeCapacityReservationsPaginator(p.client(region), &ec2.DescribeCapacityReservationsInput{})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
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
	seen := map[string]bool{}
	fp := ec2.NewDescribeFleetsPaginator(p.client(region), &ec2.DescribeFleetsInput{MaxResults: awssdk.Int32(1000)})
	for fp.HasMorePages() {
		page, err := fp.NextPage(ctx)
		if err != nil {
			return out, explain(fmt.Errorf("describe fleets: %w", err))
		}
		for _, fd := range page.Fleets {
			seen[awssdk.ToString(fd.FleetId)] = true
			if fd.CreateTime != nil && fd.CreateTime.Before(since) || !tagged(fd.Tags) {
				continue
			}
			out = append(out, p.fleetRecord(region, fd))
		}
	}
	ids, err := p.taggedFleetIDs(ctx, region, ec2types.Filter{Name: awssdk.String("tag-key"), Values: ourTags})
	if err != nil {
		return out, explain(fmt.Errorf("describe instances: %w", err))
	}
	var instant []string
	for _, id := range ids {
		if !seen[id] {
			instant = append(instant, id)
		}
	}
	for len(instant) > 0 {
		n := min(len(instant), 100)
		page, err := p.client(region).DescribeFleets(ctx, &ec2.DescribeFleetsInput{FleetIds: instant[:n]})
		if err != nil {
			return out, explain(fmt.Errorf("describe fleets %s: %w", strings.Join(instant[:n], ", "), err))
		}
		instant = instant[n:]
		for _, fd := range page.Fleets {
			if fd.CreateTime != nil && fd.CreateTime.Before(since) || !tagged(fd.Tags) {
				continue
			}
			out = append(out, p.fleetRecord(region, fd))
		}
	}
	return out, nil
}

func tagged(tags []ec2types.Tag) bool {
	for _, k := range ourTags {
		if _, ok := tagValue(tags, k); ok {
			return true
		}
	}
	return false
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
		if usd, err := strconv.ParseFloat(v, 64); err == nil && usd >= 0 && !math.IsInf(usd, 0) {
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
		Start: awssdk.ToTime(fd.CreateTime).UTC(),
	}
	if fd.ValidFrom != nil {
		r.Start = fd.ValidFrom.UTC()
	}
	if fd.ValidUntil != nil {
		r.End = fd.ValidUntil.UTC()
	}
	var types, zones []string
	add := func(list []string, v string) []string {
		for _, x := range list {
			if x == v {
				return list
			}
		}
		return append(list, v)
	}
	for _, c := range fd.LaunchTemplateConfigs {
		for _, o := range c.Overrides {
			if o.InstanceType != "" {
				types = add(types, string(o.InstanceType))
			}
			if z := awssdk.ToString(o.AvailabilityZone); z != "" {
				zones = add(zones, z)
			}
		}
	}
	r.InstanceType, r.Zone = strings.Join(types, ","), strings.Join(zones, ",")
	r.Ref, _ = tagValue(fd.Tags, domain.TagRef)
	r.Actor, _ = tagValue(fd.Tags, domain.TagActor)
	return r
}
