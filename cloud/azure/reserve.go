package azure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/gpumarket/gpumarket/domain"
)

// NoDryRunMessage opens every dry run's message: Azure has no dry run.
const NoDryRunMessage = "no dry-run in Azure: validated the request locally"

// maxGroups bounds gpumarket's groups per region and zone: one per reservation of an already reserved size.
const maxGroups = 20

// groupName is the n-th (from 1) reservation group of a region and zone: a group
// holds "exactly one reservation for a given VM size" per zone
// (https://learn.microsoft.com/azure/virtual-machines/capacity-reservation-create#considerations).
func groupName(region, zone string, n int) string {
	name := "gpumarket-" + region
	if zone != "" {
		name += "-z" + zone
	}
	if n > 1 {
		name += "-" + strconv.Itoa(n)
	}
	return name
}

func groupIndex(name, region, zone string) int {
	base := groupName(region, zone, 1)
	if strings.EqualFold(name, base) {
		return 1
	}
	if len(name) <= len(base)+1 || !strings.EqualFold(name[:len(base)+1], base+"-") {
		return 0
	}
	rest := name[len(base)+1:]
	n, err := strconv.Atoi(rest)
	if err != nil || n < 2 || strconv.Itoa(n) != rest {
		return 0
	}
	return n
}

// resourceName makes an ARM name from a ledger ref (letters, digits, dashes, ≤ 64),
// so a retried booking PUTs the same reservation instead of buying a second.
func resourceName(ref, fallback string) string {
	s := ref
	if s == "" {
		s = fallback
	}
	var b strings.Builder
	b.WriteString("gpumarket-")
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.TrimRight(b.String(), "-")
	if len(out) > 64 {
		h := sha256.Sum256([]byte(s))
		out = out[:47] + "-" + hex.EncodeToString(h[:8])
	}
	return out
}

// groupsIn lists the resource group's reservation groups that keep accepts; none if it is missing.
func (p *Provider) groupsIn(ctx context.Context, c *armClients, keep func(string) bool) ([]string, error) {
	gs, err := listAll(ctx, c.groups.NewListByResourceGroupPager(c.resGroup, nil),
		func(p armcompute.CapacityReservationGroupsClientListByResourceGroupResponse) []*armcompute.CapacityReservationGroup {
			return p.Value
		})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list capacity reservation groups in %s: %w", c.resGroup, err)
	}
	var out []string
	for _, g := range gs {
		if g.Name != nil && keep(*g.Name) {
			out = append(out, *g.Name)
		}
	}
	return out, nil
}

func (p *Provider) regionGroups(ctx context.Context, c *armClients, region, zone string) ([]string, error) {
	gs, err := p.groupsIn(ctx, c, func(n string) bool { return groupIndex(n, region, zone) > 0 })
	if err != nil {
		return nil, err
	}
	sort.Slice(gs, func(i, j int) bool { return groupIndex(gs[i], region, zone) < groupIndex(gs[j], region, zone) })
	return gs, nil
}

// reservationsIn lists a group's reservations; a missing group has none.
func (p *Provider) reservationsIn(ctx context.Context, c *armClients, group string) ([]*armcompute.CapacityReservation, error) {
	out, err := listAll(ctx, c.reserve.NewListByCapacityReservationGroupPager(c.resGroup, group, nil),
		func(p armcompute.CapacityReservationsClientListByCapacityReservationGroupResponse) []*armcompute.CapacityReservation {
			return p.Value
		})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list reservations in %s: %w", group, err)
	}
	return out, nil
}

// live reports whether a reservation holds capacity: not Failed, Canceled or Deleting.
func live(r *armcompute.CapacityReservation) bool {
	state := ""
	if r.Properties != nil {
		state = deref(r.Properties.ProvisioningState)
	}
	s := ledgerState(state)
	return s != "failed" && s != "deleted"
}

type placement struct {
	group  string
	exists bool
	// found: a live reservation of the same offering or row, answered instead.
	found *armcompute.CapacityReservation
}

// place finds the first of gpumarket's groups in the region and zone without
// the size, or a new one; a reservation already bought from the offering or
// for the row is answered instead of bought again.
func (p *Provider) place(ctx context.Context, c *armClients, o domain.Offering, ref string) (placement, error) {
	groups, err := p.regionGroups(ctx, c, o.Region, o.Zone)
	if err != nil {
		return placement{}, err
	}
	var free placement
	last := 0
	for _, g := range groups {
		last = max(last, groupIndex(g, o.Region, o.Zone))
		rs, err := p.reservationsIn(ctx, c, g)
		if err != nil {
			return placement{}, err
		}
		taken := false
		for _, r := range rs {
			sameRef := ref != "" && tagOf(r.Tags, TagRef) == ref
			if sameRef || tagOf(r.Tags, TagOffering) == o.ID {
				if live(r) {
					return placement{group: g, exists: true, found: r}, nil
				}
				if sameRef {
					// This intent's own failed attempt: the same-named PUT retries it in place.
					return placement{group: g, exists: true}, nil
				}
			}
			if r.SKU != nil && strings.EqualFold(deref(r.SKU.Name), o.InstanceType) {
				taken = true
			}
		}
		if !taken && free.group == "" {
			free = placement{group: g, exists: true}
		}
	}
	if free.group != "" {
		return free, nil
	}
	if last >= maxGroups {
		return placement{}, fmt.Errorf("%d reservation groups in %s%s already hold a reservation of %s (Azure takes one per size per zone per group): release one first",
			last, o.Region, zoneSuffix(o.Zone), o.InstanceType)
	}
	return placement{group: groupName(o.Region, o.Zone, last+1)}, nil
}

var _ interface {
	domain.Booker
	domain.BookingReleaser
} = (*Provider)(nil)

// Book makes an On-demand Capacity Reservation named after req.Ref, so a retry
// cannot buy twice, and tagged with the ledger row; it starts when made and the
// ledger deletes it at its end. With req.DryRun it only validates: Azure has none.
func (p *Provider) Book(ctx context.Context, req domain.BookRequest) (domain.Booking, error) {
	o := req.Offering
	c, err := p.clients(ctx)
	if err != nil {
		return domain.Booking{}, refuse("azure booking: %w (%v)", errNoAccount, err)
	}
	if !strings.HasPrefix(o.ID, OfferingPrefix) {
		return domain.Booking{}, refuse("azure booking: offering id %q: want an id %s… from an Azure offerings search", o.ID, OfferingPrefix)
	}
	window := o.End.Sub(o.Start)
	if o.InstanceCount <= 0 || o.InstanceType == "" || !IsRegion(o.Region) || window <= 0 {
		return domain.Booking{}, refuse("azure booking %s: want an instance type, a region, a positive instance count and a window", o.ID)
	}
	if c.resGroup == "" {
		return domain.Booking{}, refuse("azure booking: azure.resource_group is not set: reservations are made in a resource group")
	}
	size, err := p.validateSize(ctx, c, o.Region, o.InstanceType, []string{o.Zone})
	if err != nil {
		return domain.Booking{}, refuse("azure booking %s: %w", o.ID, err)
	}
	if !size.Reservable {
		return domain.Booking{}, refuse("azure booking %s: Azure does not take capacity reservations for %s (its CapacityReservationSupported capability is not true; Azure lists ND-series and NCads H100 v5 among such sizes): nothing was bought",
			o.ID, size.Name)
	}
	quota, err := p.checkQuota(ctx, c, o.Region, needsOf(size, o.InstanceCount, false))
	if err != nil {
		return domain.Booking{}, refuse("azure booking %s: %w", o.ID, err)
	}
	pl, err := p.place(ctx, c, o, req.Ref)
	if err != nil {
		return domain.Booking{}, refuse("azure booking %s: nothing was requested: %w", o.ID, err)
	}
	if pl.found != nil {
		got := bookedFrom(pl.found, o)
		got.DryRun = req.DryRun
		got.Message = fmt.Sprintf("capacity reservation %s in group %s was already made from offering %s (for ledger row %q): answered with it; nothing was bought again",
			deref(pl.found.Name), pl.group, o.ID, tagOf(pl.found.Tags, TagRef))
		return got, nil
	}
	now := p.now().UTC()
	b := domain.Booking{
		Provider: Name, Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType,
		InstanceCount: o.InstanceCount, Start: now, End: now.Add(window), CostUSD: o.UpfrontUSD,
	}
	if req.DryRun {
		b.DryRun = true
		b.Message = fmt.Sprintf("%s: %s is offered in %s%s, not restricted and takes capacity reservations; it would go in reservation group %s; %s",
			NoDryRunMessage, o.InstanceType, o.Region, zoneSuffix(o.Zone), pl.group, quota)
		return b, nil
	}
	if !pl.exists {
		g := armcompute.CapacityReservationGroup{Location: to.Ptr(o.Region), Tags: azureTags("", "", "", nil)}
		if o.Zone != "" {
			g.Zones = []*string{to.Ptr(o.Zone)}
		}
		if _, err := c.groups.CreateOrUpdate(ctx, c.resGroup, pl.group, g, nil); err != nil {
			// The group costs nothing and no reservation was asked for.
			return domain.Booking{}, domain.MarkDeclined(fmt.Errorf("azure booking %s: create reservation group %s (no reservation was requested): %w", o.ID, pl.group, firstLine(err)))
		}
	}
	name := resourceName(req.Ref, o.ID)
	r := armcompute.CapacityReservation{
		Location: to.Ptr(o.Region),
		SKU:      &armcompute.SKU{Name: to.Ptr(o.InstanceType), Capacity: to.Ptr(int64(o.InstanceCount))},
		Tags: azureTags(req.Ref, req.Actor, o.ID, map[string]string{
			TagEnd: b.End.Format(time.RFC3339), TagCost: strconv.FormatFloat(o.UpfrontUSD, 'f', 2, 64),
		}),
	}
	if o.Zone != "" {
		r.Zones = []*string{to.Ptr(o.Zone)}
	}
	poller, err := c.reserve.BeginCreateOrUpdate(ctx, c.resGroup, pl.group, name, r, nil)
	if err != nil {
		err = fmt.Errorf("azure booking %s: create reservation %s: %w", o.ID, name, err)
		if conflict(err) {
			// azcore re-sends a PUT after a 5xx, which can meet a 409 if the first made it:
			// a reservation under this intent's name is ours, so only its absence is a "no".
			if _, gerr := c.reserve.Get(ctx, c.resGroup, pl.group, name, nil); !isNotFound(gerr) {
				return domain.Booking{}, fmt.Errorf("%w (a reservation named %s may exist: it is looked up, not re-sent)", err, name)
			}
		}
		return domain.Booking{}, settle(err)
	}
	resp, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opt.PollFrequency})
	if err != nil {
		return domain.Booking{}, settle(fmt.Errorf("azure booking %s: reservation %s: %w", o.ID, name, err))
	}
	got := bookingFrom(&resp.CapacityReservation, o.Region)
	b.ProviderRef, b.State = got.ProviderRef, got.State
	b.Message = fmt.Sprintf("capacity reservation %s in group %s: billed at the on-demand rate from now until it is deleted; gpumarket deletes it at %s (Azure does not end it by itself)",
		name, pl.group, b.End.Format(time.RFC3339))
	return b, nil
}

func zoneSuffix(z string) string {
	if z == "" {
		return ""
	}
	return " zone " + z
}

// createdAt is timeCreated, else provisioningTime: a PUT's answer and list items
// show only the latter (the Compute REST examples' CapacityReservation_*.json),
// which for a reservation never updated is when it was made.
func createdAt(r *armcompute.CapacityReservation) time.Time {
	if r.Properties == nil {
		return time.Time{}
	}
	if t := r.Properties.TimeCreated; t != nil {
		return t.UTC()
	}
	if t := r.Properties.ProvisioningTime; t != nil {
		return t.UTC()
	}
	return time.Time{}
}

func bookingFrom(r *armcompute.CapacityReservation, region string) domain.Booking {
	b := domain.Booking{Provider: Name, Region: region, ProviderRef: deref(r.ID), Start: createdAt(r)}
	if r.SKU != nil {
		b.InstanceType = deref(r.SKU.Name)
		b.InstanceCount = int(deref(r.SKU.Capacity))
	}
	if len(r.Zones) > 0 {
		b.Zone = deref(r.Zones[0])
	}
	if e := tagOf(r.Tags, TagEnd); e != "" {
		b.End, _ = time.Parse(time.RFC3339, e)
	}
	state := ""
	if r.Properties != nil {
		state = deref(r.Properties.ProvisioningState)
	}
	b.State = ledgerState(state)
	return b
}

// bookedFrom reads a reservation made from o: Azure keeps neither its end (else o's window) nor its cost.
func bookedFrom(r *armcompute.CapacityReservation, o domain.Offering) domain.Booking {
	b := bookingFrom(r, o.Region)
	if b.End.IsZero() && !b.Start.IsZero() {
		b.End = b.Start.Add(o.End.Sub(o.Start))
	}
	b.CostUSD = o.UpfrontUSD
	return b
}

// ledgerState maps an ARM provisioning state onto the ledger's: Failed and
// Canceled hold nothing; Creating, Updating and the like are work in progress.
func ledgerState(provisioning string) string {
	switch strings.ToLower(provisioning) {
	case "succeeded":
		return "active"
	case "failed", "canceled", "cancelled":
		return "failed"
	case "deleting":
		return "deleted"
	default: // creating, updating, migrating, or not said
		return "pending"
	}
}

// FindBooking looks in gpumarket's groups of the region and zone for the reservation
// tagged req.Ref, or one of the same terms made after req.After; nil, nil if none.
func (p *Provider) FindBooking(ctx context.Context, req domain.BookRequest) (*domain.Booking, error) {
	c, err := p.clients(ctx)
	if err != nil {
		return nil, fmt.Errorf("azure booking lookup: %w (%v)", errNoAccount, err)
	}
	if c.resGroup == "" {
		return nil, errors.New("azure booking lookup: azure.resource_group is not set")
	}
	o := req.Offering
	groups, err := p.regionGroups(ctx, c, o.Region, o.Zone)
	if err != nil {
		return nil, fmt.Errorf("azure booking lookup: %w", err)
	}
	for _, g := range groups {
		rs, err := p.reservationsIn(ctx, c, g)
		if err != nil {
			return nil, fmt.Errorf("azure booking lookup: %w", err)
		}
		for _, r := range rs {
			if !matchesRequest(r, req) {
				continue
			}
			b := bookedFrom(r, o)
			return &b, nil
		}
	}
	return nil, nil
}

func matchesRequest(r *armcompute.CapacityReservation, req domain.BookRequest) bool {
	if req.Ref != "" {
		return tagOf(r.Tags, TagRef) == req.Ref
	}
	o := req.Offering
	if r.SKU == nil || !strings.EqualFold(deref(r.SKU.Name), o.InstanceType) || int(deref(r.SKU.Capacity)) != o.InstanceCount {
		return false
	}
	zone := ""
	if len(r.Zones) > 0 {
		zone = deref(r.Zones[0])
	}
	if zone != o.Zone {
		return false
	}
	if t := createdAt(r); !t.IsZero() && t.Before(req.After) {
		return false
	}
	return true
}

// reservationID reads the resource id Book writes as ProviderRef; its Parent is the group.
func reservationID(ref string) (*arm.ResourceID, error) {
	id, err := arm.ParseResourceID(ref)
	if err != nil || !strings.EqualFold(id.ResourceType.String(), "Microsoft.Compute/capacityReservationGroups/capacityReservations") || id.Parent == nil {
		return nil, fmt.Errorf("%q is not a capacity reservation resource id", ref)
	}
	return id, nil
}

// inSubscription refuses another subscription's reservation: asked here it is not found.
func inSubscription(id *arm.ResourceID, c *armClients) error {
	if !strings.EqualFold(id.SubscriptionID, c.subID) {
		return fmt.Errorf("capacity reservation %s is in subscription %s, and gpumarket is signed in to subscription %s (azure.subscription_id): it can be read and deleted only there",
			id.Name, id.SubscriptionID, c.subID)
	}
	return nil
}

// DeleteBooking deletes a reservation, ending its billing; one already gone is
// fine. Azure refuses while VMs are associated: the error names them.
func (p *Provider) DeleteBooking(ctx context.Context, providerRef string) error {
	c, err := p.clients(ctx)
	if err != nil {
		return refuse("azure delete reservation: %w (%v)", errNoAccount, err)
	}
	id, err := reservationID(providerRef)
	if err != nil {
		return refuse("azure delete reservation: %w", err)
	}
	if err := inSubscription(id, c); err != nil {
		// Asked here the 404 would read as deleted while it still bills.
		return refuse("azure delete reservation: %w", err)
	}
	poller, err := c.reserve.BeginDelete(ctx, id.ResourceGroupName, id.Parent.Name, id.Name, nil)
	if isNotFound(err) {
		return nil
	}
	if err == nil {
		_, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opt.PollFrequency})
		if err == nil || isNotFound(err) {
			return nil
		}
	}
	err = fmt.Errorf("azure delete reservation %s: %w", id.Name, err)
	return settle(p.explainDelete(ctx, c, id, err))
}

// explainDelete names the VMs keeping a reservation; only the user can move them
// (https://learn.microsoft.com/azure/virtual-machines/capacity-reservation-remove-vm).
func (p *Provider) explainDelete(ctx context.Context, c *armClients, id *arm.ResourceID, err error) error {
	s := statusOf(err)
	if s < 400 || s >= 500 || s == http.StatusRequestTimeout || s == http.StatusTooManyRequests {
		return err
	}
	got, gerr := c.reserve.Get(ctx, id.ResourceGroupName, id.Parent.Name, id.Name, nil)
	if gerr != nil || got.Properties == nil || len(got.Properties.VirtualMachinesAssociated) == 0 {
		return err
	}
	var vms []string
	for _, vm := range got.Properties.VirtualMachinesAssociated {
		if vm == nil || vm.ID == nil {
			continue
		}
		name := *vm.ID
		if rid, perr := arm.ParseResourceID(name); perr == nil {
			name = rid.Name
		}
		vms = append(vms, name)
	}
	return fmt.Errorf("%w: %d VM(s) are still associated with it (%s), and Azure deletes a capacity reservation only when none is: deallocate each VM and set its capacity reservation group to none (or delete it); the reservation bills until then, and gpumarket tries the release again at every reconciliation",
		err, len(got.Properties.VirtualMachinesAssociated), strings.Join(vms, ", "))
}

// ReleaseBooking deletes a reservation whose window ended: Azure bills until deletion.
func (p *Provider) ReleaseBooking(ctx context.Context, b domain.Booking) error {
	return p.DeleteBooking(ctx, b.ProviderRef)
}
