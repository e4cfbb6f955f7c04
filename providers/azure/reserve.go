package azure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/gpumarket/gpumarket/providers"
)

// OfferingPrefix starts the ids gpumarket makes for Azure capacity
// reservations: Azure has no offering ids, so the id is a hash of the
// terms.
const OfferingPrefix = "azcr-"

// Tags gpumarket puts on what it creates, so a lost answer can be found
// again and a person can tell what made the resource.
const (
	TagRef      = "gpumarket-ref"
	TagOffering = "gpumarket-offering"
	TagEnd      = "gpumarket-end"
	TagManaged  = "managed-by"
)

// NoDryRunMessage opens the message of every dry run: Azure's APIs have no
// dry-run mode, so gpumarket checks what it can without spending.
const NoDryRunMessage = "no dry-run in Azure: validated the request locally"

func offeringID(region, zone, size string, count int, start, end time.Time) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%s|%d|%d|%d", region, zone, strings.ToLower(size), count, start.Unix(), end.Unix())))
	return OfferingPrefix + hex.EncodeToString(h[:8])
}

// FindOfferings prices On-demand Capacity Reservations for the query.
// Azure sells no fixed-window blocks here: a reservation holds capacity
// from the moment it is made until it is deleted and is billed at the
// on-demand rate all that time, used or not. So every offering starts now;
// one asked to start later runs from now to the requested start plus the
// duration, and its cost counts every one of those hours.
func (p *Provider) FindOfferings(ctx context.Context, q providers.OfferingQuery) ([]providers.Offering, error) {
	c, err := p.clients(ctx)
	if err != nil {
		return nil, fmt.Errorf("azure capacity reservations: %w (%v)", errNoAccount, err)
	}
	if q.Duration <= 0 {
		return nil, providers.InvalidQueryf("azure capacity reservations: duration %v: want a positive duration", q.Duration)
	}
	if q.Instances <= 0 && q.GPUs <= 0 {
		return nil, errors.New("azure capacity reservations: want a number of instances or GPUs")
	}
	now := p.now().UTC().Truncate(time.Minute)
	if !q.StartBefore.IsZero() && q.StartBefore.Before(now) {
		return nil, nil // a reservation cannot start in the past
	}
	end := now.Add(q.Duration)
	if q.StartAfter.After(now) {
		end = q.StartAfter.Add(q.Duration)
	}
	hours := end.Sub(now).Hours()
	note := fmt.Sprintf("On-demand Capacity Reservation: held and billed at the on-demand rate from now (Azure cannot start it later) until it is deleted; gpumarket prices it to %s",
		end.Format(time.RFC3339))
	if q.StartAfter.After(now) {
		note += fmt.Sprintf(", including the %.0f h before the requested start", q.StartAfter.Sub(now).Hours())
	}
	var out []providers.Offering
	var errs []error
	regions := p.regions(providers.Query{Regions: q.Regions})
	for _, region := range regions {
		sizes, err := p.sizesFor(ctx, c, region)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		prices, err := p.retailFor(ctx, region, sizes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, s := range sizes {
			if q.GPU != "" && !strings.EqualFold(q.GPU, s.GPU.Model) {
				continue
			}
			rp := prices[strings.ToLower(s.Name)]
			if rp.OnDemand == nil || s.GPU.Count <= 0 {
				continue // no price to quote
			}
			n := q.Instances
			if n <= 0 {
				n = int(math.Ceil(float64(q.GPUs)/s.GPU.Count - 1e-9))
			}
			zones := s.Zones
			if len(zones) == 0 {
				zones = []string{""}
			}
			for _, z := range zones {
				if s.Restricted(z) {
					continue
				}
				out = append(out, providers.Offering{
					ID: offeringID(region, z, s.Name, n, now, end), Provider: Name, Cloud: providers.CloudAzure,
					Region: region, Zone: z, InstanceType: s.Name, GPU: s.GPU, InstanceCount: n,
					Start: now, End: end, UpfrontUSD: *rp.OnDemand * float64(n) * hours, Currency: "USD", Note: note,
					StartsOnPurchase: true, Kind: providers.KindReservation,
				})
			}
		}
	}
	if len(out) == 0 && len(errs) > 0 && len(errs) == len(regions) {
		return nil, fmt.Errorf("azure capacity reservations: %w", errors.Join(errs...))
	}
	for _, e := range errs {
		p.log.Warn("azure offerings: region failed", "err", e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].UpfrontUSD < out[j].UpfrontUSD })
	return out, nil
}

// groupName is the capacity reservation group of a region and zone: one
// per zone, because a group's reservations must lie in the group's zones.
func groupName(region, zone string) string {
	if zone == "" {
		return "gpumarket-" + region
	}
	return "gpumarket-" + region + "-z" + zone
}

// resourceName makes an ARM resource name from a ledger ref: letters,
// digits and dashes, at most 64 characters. Deriving the name from the
// ref makes the PUT idempotent: a retried booking updates the same
// reservation instead of buying a second one.
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

// validateSize checks, without spending, that the size is offered to the
// subscription in the region and zones, and returns it.
func (p *Provider) validateSize(ctx context.Context, c *armClients, region, size string, zones []string) (gpuSize, error) {
	sizes, err := p.sizesFor(ctx, c, region)
	if err != nil {
		return gpuSize{}, err
	}
	for _, s := range sizes {
		if !strings.EqualFold(s.Name, size) {
			continue
		}
		if s.RegionRestricted {
			return s, fmt.Errorf("%s is not offered to this subscription in %s", s.Name, region)
		}
		for _, z := range zones {
			if z == "" {
				continue
			}
			if len(s.Zones) > 0 && !contains(s.Zones, z) {
				return s, fmt.Errorf("%s is not offered in %s zone %s (zones: %s)", s.Name, region, z, strings.Join(s.Zones, ", "))
			}
			if s.Restricted(z) {
				return s, fmt.Errorf("%s is not offered to this subscription in %s zone %s", s.Name, region, z)
			}
		}
		return s, nil
	}
	return gpuSize{}, fmt.Errorf("%s is not a GPU size offered in %s", size, region)
}

// checkQuota compares the vCPUs a request needs with the subscription's
// regional and family quotas. A failure to read the quota is not a
// refusal: the answer says it was not checked.
func (p *Provider) checkQuota(ctx context.Context, c *armClients, region string, s gpuSize, count int) (string, error) {
	need := s.VCPUs * count
	if need <= 0 || s.Family == "" {
		return "quota not checked (size has no vCPU count or family)", nil
	}
	pager := c.usage.NewListPager(region, nil)
	var notes []string
	found := false
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return "quota not checked: " + firstLine(err).Error(), nil
		}
		for _, u := range page.Value {
			if u == nil || u.Name == nil || u.CurrentValue == nil || u.Limit == nil {
				continue
			}
			name := deref(u.Name.Value)
			if !strings.EqualFold(name, s.Family) && !strings.EqualFold(name, "cores") {
				continue
			}
			found = true
			used, limit := int64(*u.CurrentValue), *u.Limit
			if used+int64(need) > limit {
				return "", fmt.Errorf("quota %s in %s: %d of %d vCPUs used, %d more needed: ask Azure for a quota increase", name, region, used, limit, need)
			}
			notes = append(notes, fmt.Sprintf("quota %s %d+%d of %d vCPUs", name, used, need, limit))
		}
	}
	if !found {
		return "quota not checked (no usage entry for " + s.Family + ")", nil
	}
	return strings.Join(notes, ", "), nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// Book makes an On-demand Capacity Reservation for the offering: a group
// for the region and zone (made if missing), then the reservation, named
// after req.Ref so that a retry cannot buy twice. With req.DryRun it only
// validates the request locally, since Azure has no dry run.
func (p *Provider) Book(ctx context.Context, req providers.BookRequest) (providers.Booking, error) {
	o := req.Offering
	c, err := p.clients(ctx)
	if err != nil {
		return providers.Booking{}, refuse("azure booking: %w (%v)", errNoAccount, err)
	}
	if !strings.HasPrefix(o.ID, OfferingPrefix) {
		return providers.Booking{}, refuse("azure booking: offering id %q: want an id %s… from an Azure offerings search", o.ID, OfferingPrefix)
	}
	if o.InstanceCount <= 0 || o.InstanceType == "" || !IsRegion(o.Region) {
		return providers.Booking{}, refuse("azure booking %s: want an instance type, a region and a positive instance count", o.ID)
	}
	if c.resGroup == "" {
		return providers.Booking{}, refuse("azure booking: azure.resource_group is not set: reservations are made in a resource group")
	}
	size, err := p.validateSize(ctx, c, o.Region, o.InstanceType, []string{o.Zone})
	if err != nil {
		return providers.Booking{}, refuse("azure booking %s: %w", o.ID, err)
	}
	quota, err := p.checkQuota(ctx, c, o.Region, size, o.InstanceCount)
	if err != nil {
		return providers.Booking{}, refuse("azure booking %s: %w", o.ID, err)
	}
	now := p.now().UTC()
	b := providers.Booking{
		Provider: Name, Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType,
		InstanceCount: o.InstanceCount, Start: now, End: o.End, CostUSD: o.UpfrontUSD,
	}
	if req.DryRun {
		b.DryRun = true
		b.Message = fmt.Sprintf("%s: %s is offered in %s%s and not restricted; %s", NoDryRunMessage, o.InstanceType, o.Region, zoneSuffix(o.Zone), quota)
		return b, nil
	}
	group := groupName(o.Region, o.Zone)
	g := armcompute.CapacityReservationGroup{
		Location: to.Ptr(o.Region),
		Tags:     map[string]*string{TagManaged: to.Ptr("gpumarket")},
	}
	if o.Zone != "" {
		g.Zones = []*string{to.Ptr(o.Zone)}
	}
	if _, err := c.groups.CreateOrUpdate(ctx, c.resGroup, group, g, nil); err != nil {
		// Whatever became of the group (which costs nothing), the
		// reservation was not asked for: nothing was bought.
		return providers.Booking{}, declinedError{fmt.Errorf("azure booking %s: create reservation group %s (no reservation was requested): %w", o.ID, group, firstLine(err))}
	}
	name := resourceName(req.Ref, o.ID)
	r := armcompute.CapacityReservation{
		Location: to.Ptr(o.Region),
		SKU:      &armcompute.SKU{Name: to.Ptr(o.InstanceType), Capacity: to.Ptr(int64(o.InstanceCount))},
		Tags: map[string]*string{
			TagManaged: to.Ptr("gpumarket"), TagRef: to.Ptr(req.Ref), TagOffering: to.Ptr(o.ID),
			TagEnd: to.Ptr(o.End.UTC().Format(time.RFC3339)),
		},
	}
	if o.Zone != "" {
		r.Zones = []*string{to.Ptr(o.Zone)}
	}
	poller, err := c.reserve.BeginCreateOrUpdate(ctx, c.resGroup, group, name, r, nil)
	if err != nil {
		err = fmt.Errorf("azure booking %s: create reservation %s: %w", o.ID, name, err)
		if conflict(err) {
			// azcore re-sends a PUT after a 5xx or a lost connection; if
			// the first one made the reservation, the retry can meet a
			// 409. The name is this intent's own, so a reservation under
			// it is ours: only its absence makes the 409 a "no".
			if _, gerr := c.reserve.Get(ctx, c.resGroup, group, name, nil); !isNotFound(gerr) {
				return providers.Booking{}, fmt.Errorf("%w (a reservation named %s may exist: it is looked up, not re-sent)", err, name)
			}
		}
		return providers.Booking{}, settle(err)
	}
	resp, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opt.PollFrequency})
	if err != nil {
		return providers.Booking{}, settle(fmt.Errorf("azure booking %s: reservation %s: %w", o.ID, name, err))
	}
	got := bookingFrom(&resp.CapacityReservation, o.Region)
	b.ProviderRef, b.State = got.ProviderRef, got.State
	b.Message = fmt.Sprintf("capacity reservation %s in group %s: billed at the on-demand rate from now until it is deleted; Azure does not end it at %s by itself",
		name, group, o.End.UTC().Format(time.RFC3339))
	return b, nil
}

func zoneSuffix(z string) string {
	if z == "" {
		return ""
	}
	return " zone " + z
}

// bookingFrom reads a reservation as a Booking.
func bookingFrom(r *armcompute.CapacityReservation, region string) providers.Booking {
	b := providers.Booking{Provider: Name, Region: region, ProviderRef: deref(r.ID)}
	if r.SKU != nil {
		b.InstanceType = deref(r.SKU.Name)
		b.InstanceCount = int(deref(r.SKU.Capacity))
	}
	if len(r.Zones) > 0 {
		b.Zone = deref(r.Zones[0])
	}
	if e, ok := r.Tags[TagEnd]; ok && e != nil {
		b.End, _ = time.Parse(time.RFC3339, *e)
	}
	state := ""
	if r.Properties != nil {
		state = deref(r.Properties.ProvisioningState)
		if t := r.Properties.TimeCreated; t != nil {
			b.Start = t.UTC()
		}
	}
	b.State = ledgerState(state)
	return b
}

// ledgerState maps an ARM provisioning state onto the ledger's states.
func ledgerState(provisioning string) string {
	switch strings.ToLower(provisioning) {
	case "succeeded":
		return "active"
	case "failed", "canceled":
		return "failed"
	case "deleting":
		return "deleted"
	default: // creating, updating, or not said
		return "pending"
	}
}

// FindBooking looks for the reservation a request may have made: in the
// request's group, the one tagged with req.Ref, or (without a ref) one of
// the same size, count and zone created after req.After. It returns nil,
// nil when there is none.
func (p *Provider) FindBooking(ctx context.Context, req providers.BookRequest) (*providers.Booking, error) {
	c, err := p.clients(ctx)
	if err != nil {
		return nil, fmt.Errorf("azure booking lookup: %w (%v)", errNoAccount, err)
	}
	if c.resGroup == "" {
		return nil, errors.New("azure booking lookup: azure.resource_group is not set")
	}
	o := req.Offering
	group := groupName(o.Region, o.Zone)
	pager := c.reserve.NewListByCapacityReservationGroupPager(c.resGroup, group, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if isNotFound(err) {
			return nil, nil // no group, so no reservation
		}
		if err != nil {
			return nil, fmt.Errorf("azure booking lookup: list reservations in %s: %w", group, err)
		}
		for _, r := range page.Value {
			if r == nil {
				continue
			}
			if !matchesRequest(r, req) {
				continue
			}
			b := bookingFrom(r, o.Region)
			b.CostUSD = o.UpfrontUSD
			return &b, nil
		}
	}
	return nil, nil
}

func matchesRequest(r *armcompute.CapacityReservation, req providers.BookRequest) bool {
	if req.Ref != "" {
		t, ok := r.Tags[TagRef]
		return ok && t != nil && *t == req.Ref
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
	if r.Properties != nil && r.Properties.TimeCreated != nil && r.Properties.TimeCreated.Before(req.After) {
		return false
	}
	return true
}

// DeleteBooking deletes a capacity reservation by its resource id, which
// ends its billing. A reservation already gone is not an error.
func (p *Provider) DeleteBooking(ctx context.Context, providerRef string) error {
	c, err := p.clients(ctx)
	if err != nil {
		return refuse("azure delete reservation: %w (%v)", errNoAccount, err)
	}
	id, err := arm.ParseResourceID(providerRef)
	if err != nil || !strings.EqualFold(id.ResourceType.String(), "Microsoft.Compute/capacityReservationGroups/capacityReservations") || id.Parent == nil {
		return refuse("azure delete reservation: %q is not a capacity reservation resource id", providerRef)
	}
	poller, err := c.reserve.BeginDelete(ctx, id.ResourceGroupName, id.Parent.Name, id.Name, nil)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return settle(fmt.Errorf("azure delete reservation %s: %w", id.Name, err))
	}
	if _, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opt.PollFrequency}); err != nil && !isNotFound(err) {
		return settle(fmt.Errorf("azure delete reservation %s: %w", id.Name, err))
	}
	return nil
}

func conflict(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusConflict
}

func isNotFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// declinedError is a definitive refusal: the action was not done. It
// reads as its cause and matches providers.ErrDeclined, so the ledger
// records "failed" instead of reconciling.
type declinedError struct{ err error }

func (e declinedError) Error() string   { return e.err.Error() }
func (e declinedError) Unwrap() []error { return []error{e.err, providers.ErrDeclined} }

// refuse makes a declinedError for a request refused before any call that
// spends: nothing was made.
func refuse(format string, args ...any) error {
	return declinedError{fmt.Errorf(format, args...)}
}

// settle classifies an ARM call's error for the ledger: a 4xx answer (but
// 408 and 429) or a long-running operation that ended Failed is the
// cloud's definitive "no"; a timeout, a lost connection or a 5xx leaves
// the outcome unknown.
func settle(err error) error {
	var re *azcore.ResponseError
	if err == nil || !errors.As(err, &re) {
		return err
	}
	switch {
	case re.StatusCode == http.StatusRequestTimeout, re.StatusCode == http.StatusTooManyRequests, re.StatusCode >= 500:
		return err
	}
	return declinedError{err}
}

// ReleaseBooking deletes a capacity reservation whose window has ended:
// Azure bills a reservation until it is deleted.
func (p *Provider) ReleaseBooking(ctx context.Context, b providers.Booking) error {
	return p.DeleteBooking(ctx, b.ProviderRef)
}

var _ providers.BookingReleaser = (*Provider)(nil)
