package azure

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/gpumarket/gpumarket/domain"
)

// Tags on what gpumarket creates (domain.Tags), spelled with a dash for the
// colon that Azure names may not hold; values cut to 256 characters
// (https://learn.microsoft.com/azure/azure-resource-manager/management/tag-resources#limitations).
const (
	TagRef      = "gpumarket-ref"
	TagActor    = "gpumarket-actor"
	TagTool     = "gpumarket-tool"
	TagOffering = "gpumarket-offering"
	// TagEnd (RFC 3339) and TagCost (USD) of a reservation: Azure records neither.
	TagEnd  = "gpumarket-end"
	TagCost = "gpumarket-cost-usd"
	// TagManaged ("managed-by: gpumarket") marks every resource and group gpumarket made.
	TagManaged = "managed-by"
)

const maxTagValue = 256

func azureTags(ref, actor, offeringID string, extra map[string]string) map[string]*string {
	out := map[string]*string{TagManaged: to.Ptr(domain.ToolName)}
	add := func(k, v string) {
		if v == "" {
			return
		}
		for len(v) > maxTagValue {
			_, n := utf8.DecodeLastRuneInString(v)
			v = v[:len(v)-n]
		}
		out[k] = to.Ptr(v)
	}
	for k, v := range domain.Tags(ref, actor, offeringID) {
		add(strings.ReplaceAll(k, ":", "-"), v)
	}
	for k, v := range extra {
		add(k, v)
	}
	return out
}

func ours(tags map[string]*string) bool {
	return tagOf(tags, TagTool) == domain.ToolName || tagOf(tags, TagManaged) == domain.ToolName || tagOf(tags, TagRef) != ""
}

func tagOf(tags map[string]*string, k string) string {
	if v, ok := tags[k]; ok && v != nil {
		return *v
	}
	return ""
}

// regionName reads an ARM location ("West US") as a region name ("westus").
func regionName(loc string) string {
	return strings.ToLower(strings.ReplaceAll(loc, " ", ""))
}

var _ domain.RecordLister = (*Provider)(nil)

// ListRecords lists gpumarket-tagged reservations and scale sets created since,
// so a lost ledger can be written again; one without a creation time is listed.
func (p *Provider) ListRecords(ctx context.Context, since time.Time) ([]domain.CloudRecord, error) {
	c, err := p.clients(ctx)
	if err != nil {
		return nil, fmt.Errorf("azure records: %w (%v)", errNoAccount, err)
	}
	if c.resGroup == "" {
		return nil, errors.New("azure records: azure.resource_group is not set: gpumarket's reservations and scale sets are kept in it")
	}
	var out []domain.CloudRecord
	groups, err := p.groupsIn(ctx, c, func(name string) bool { return strings.HasPrefix(name, "gpumarket-") })
	if err != nil {
		return nil, fmt.Errorf("azure records: %w", err)
	}
	for _, g := range groups {
		rs, err := p.reservationsIn(ctx, c, g)
		if err != nil {
			return nil, fmt.Errorf("azure records: %w", err)
		}
		for _, r := range rs {
			if rec := reservationRecord(r); ours(r.Tags) && (rec.CreatedAt.IsZero() || !rec.CreatedAt.Before(since)) {
				out = append(out, rec)
			}
		}
	}
	sets, err := listAll(ctx, c.vmss.NewListPager(c.resGroup, nil),
		func(p armcompute.VirtualMachineScaleSetsClientListResponse) []*armcompute.VirtualMachineScaleSet {
			return p.Value
		})
	if err != nil && !isNotFound(err) { // no resource group: nothing was made
		return nil, fmt.Errorf("azure records: list scale sets in %s: %w", c.resGroup, err)
	}
	for _, ss := range sets {
		if rec := scaleSetRecord(ss); ours(ss.Tags) && (rec.CreatedAt.IsZero() || !rec.CreatedAt.Before(since)) {
			out = append(out, rec)
		}
	}
	return out, nil
}

func reservationRecord(r *armcompute.CapacityReservation) domain.CloudRecord {
	b := bookingFrom(r, regionName(deref(r.Location)))
	rec := domain.CloudRecord{
		Kind: domain.KindReservation, Ref: tagOf(r.Tags, TagRef), Actor: tagOf(r.Tags, TagActor),
		OfferingID: tagOf(r.Tags, TagOffering), ProviderRef: b.ProviderRef, Provider: Name, Cloud: domain.CloudAzure,
		Region: b.Region, Zone: b.Zone, InstanceType: b.InstanceType, InstanceCount: b.InstanceCount,
		Start: b.Start, End: b.End, CostUSD: math.NaN(), State: b.State, CreatedAt: b.Start,
	}
	if v, err := strconv.ParseFloat(tagOf(r.Tags, TagCost), 64); err == nil && v >= 0 && !math.IsInf(v, 0) {
		rec.CostUSD = v
	}
	return rec
}

func scaleSetRecord(ss *armcompute.VirtualMachineScaleSet) domain.CloudRecord {
	rec := domain.CloudRecord{
		Kind: domain.KindFleet, Ref: tagOf(ss.Tags, TagRef), Actor: tagOf(ss.Tags, TagActor),
		ProviderRef: deref(ss.ID), Provider: Name, Cloud: domain.CloudAzure, Region: regionName(deref(ss.Location)),
		CostUSD: math.NaN(), State: "pending",
	}
	if len(ss.Zones) == 1 {
		rec.Zone = deref(ss.Zones[0])
	}
	if ss.SKU != nil {
		rec.InstanceType = deref(ss.SKU.Name)
		rec.InstanceCount = int(deref(ss.SKU.Capacity))
	}
	if ss.Properties != nil {
		rec.State = ledgerState(deref(ss.Properties.ProvisioningState))
		if t := ss.Properties.TimeCreated; t != nil {
			rec.CreatedAt, rec.Start = t.UTC(), t.UTC()
		}
	}
	return rec
}
