package azure

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/fanout"
)

// OfferingPrefix starts gpumarket's reservation offering ids, a hash of the terms: Azure has none.
const OfferingPrefix = "azcr-"

func offeringID(region, zone, size string, count int, start, end time.Time) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%s|%d|%d|%d", region, zone, strings.ToLower(size), count, start.Unix(), end.Unix())))
	return OfferingPrefix + hex.EncodeToString(h[:8])
}

// startsNow refuses a start range without now: a reservation starts when made
// and cannot be scheduled.
func startsNow(q domain.OfferingQuery, now time.Time) error {
	const form = "2006-01-02T15:04Z"
	switch {
	case q.StartAfter.After(now):
		return domain.InvalidQueryf("azure capacity reservations start when they are made (now, %s) and cannot be scheduled: --start-after %s is later; search without it, or again when the start comes",
			now.Format(form), q.StartAfter.UTC().Format(form))
	case !q.StartBefore.IsZero() && q.StartBefore.Before(now):
		return domain.InvalidQueryf("azure capacity reservations start when they are made (now, %s): --start-before %s has passed",
			now.Format(form), q.StartBefore.UTC().Format(form))
	}
	return nil
}

func reservationNote(hourly float64, d time.Duration) string {
	return fmt.Sprintf("On-demand Capacity Reservation: starts when it is made (Azure cannot schedule it) and bills $%.2f an hour at the on-demand rate, used or not, until it is deleted; gpumarket deletes it %s after it starts",
		hourly, domain.FormatWindow(d))
}

var _ interface {
	domain.OfferingFinder
	domain.OfferingRefresher
} = (*Provider)(nil)

// FindOfferings prices On-demand Capacity Reservations: one starts now, bills
// on-demand until deleted, and lasts the asked duration (the ledger deletes it).
// Sizes without CapacityReservationSupported are left out; failed regions come
// back as domain.RegionErrors beside the others' offerings.
func (p *Provider) FindOfferings(ctx context.Context, q domain.OfferingQuery) ([]domain.Offering, error) {
	c, err := p.clients(ctx)
	if err != nil {
		return nil, fmt.Errorf("azure capacity reservations: %w (%v)", errNoAccount, err)
	}
	if err := domain.ReservationTerms.ValidDuration(q.Duration); err != nil {
		return nil, domain.InvalidQueryf("azure %v", err)
	}
	if q.Instances <= 0 && q.GPUs <= 0 {
		return nil, domain.InvalidQueryf("azure capacity reservations: want a number of instances or GPUs, at least 1")
	}
	now := p.now().UTC()
	if err := startsNow(q, now); err != nil {
		return nil, err
	}
	// The minute keeps one search's ids stable a while.
	start := now.Truncate(time.Minute)
	if start.Before(q.StartAfter) {
		start = q.StartAfter.UTC()
	}
	end := start.Add(q.Duration)
	regions := p.regions(domain.Query{Regions: q.Regions})
	out, failed := fanout.Gather(regions, 0, func(region string) ([]domain.Offering, error) {
		return p.regionOfferings(ctx, c, region, q, start, end)
	})
	if len(failed) > 0 && len(failed) == len(regions) {
		return nil, fmt.Errorf("azure capacity reservations: %w", domain.RegionErrors(failed).Join())
	}
	slices.SortStableFunc(out, func(a, b domain.Offering) int {
		return cmp.Or(cmp.Compare(a.UpfrontUSD, b.UpfrontUSD), strings.Compare(a.ID, b.ID))
	})
	if len(failed) > 0 {
		return out, domain.RegionErrors(failed)
	}
	return out, nil
}

func (p *Provider) regionOfferings(ctx context.Context, c *armClients, region string, q domain.OfferingQuery, start, end time.Time) ([]domain.Offering, error) {
	sizes, err := p.sizesFor(ctx, c, region)
	if err != nil {
		return nil, err
	}
	prices, err := p.retailFor(ctx, region, sizes)
	if err != nil {
		return nil, err
	}
	var out []domain.Offering
	for _, s := range sizes {
		if q.GPU != "" && !strings.EqualFold(q.GPU, s.GPU.Model) {
			continue
		}
		rp := prices[strings.ToLower(s.Name)]
		if rp.OnDemand == nil || s.GPU.Count <= 0 || !s.Reservable {
			continue // no price to quote, or Azure does not reserve the size
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
			out = append(out, reservationOffering(region, z, s, n, *rp.OnDemand, start, end))
		}
	}
	return out, nil
}

func reservationOffering(region, zone string, s gpuSize, n int, onDemand float64, start, end time.Time) domain.Offering {
	hourly := onDemand * float64(n)
	return domain.Offering{
		ID: offeringID(region, zone, s.Name, n, start, end), Provider: Name, Cloud: domain.CloudAzure,
		Region: region, Zone: zone, InstanceType: s.Name, GPU: s.GPU, InstanceCount: n,
		Start: start, End: end, UpfrontUSD: hourly * end.Sub(start).Hours(), HourlyUSD: hourly, Currency: "USD",
		Note: reservationNote(hourly, end.Sub(start)), StartsOnPurchase: true, Kind: domain.KindReservation,
	}
}

// RefreshOffering re-checks the offering right before purchase: still sold and
// reservable there, at the list price of the moment; id and window kept. One
// gone matches domain.ErrOfferingGone.
func (p *Provider) RefreshOffering(ctx context.Context, o domain.Offering) (domain.Offering, error) {
	if o.Provider != Name || !strings.HasPrefix(o.ID, OfferingPrefix) {
		return o, fmt.Errorf("azure refresh: offering %q is not an Azure capacity reservation (want an id %s…)", o.ID, OfferingPrefix)
	}
	c, err := p.clients(ctx)
	if err != nil {
		return o, fmt.Errorf("azure refresh %s: %w (%v)", o.ID, errNoAccount, err)
	}
	sizes, err := p.listGPUSizes(ctx, c, o.Region)
	if err != nil {
		return o, fmt.Errorf("azure refresh %s: %w", o.ID, err)
	}
	p.cacheMu.Lock()
	p.skus[o.Region] = cached[[]gpuSize]{v: sizes, at: p.now()}
	p.cacheMu.Unlock()
	var s *gpuSize
	for i := range sizes {
		if strings.EqualFold(sizes[i].Name, o.InstanceType) {
			s = &sizes[i]
		}
	}
	gone := func(why string) error {
		return fmt.Errorf("azure refresh %s: %s: %w", o.ID, why, domain.ErrOfferingGone)
	}
	switch {
	case s == nil:
		return o, gone(fmt.Sprintf("%s is no longer offered in %s", o.InstanceType, o.Region))
	case s.Restricted(o.Zone):
		return o, gone(fmt.Sprintf("%s is no longer offered to this subscription in %s%s", s.Name, o.Region, zoneSuffix(o.Zone)))
	case o.Zone != "" && len(s.Zones) > 0 && !slices.Contains(s.Zones, o.Zone):
		return o, gone(fmt.Sprintf("%s is no longer offered in %s zone %s", s.Name, o.Region, o.Zone))
	case !s.Reservable:
		return o, gone(fmt.Sprintf("Azure no longer takes capacity reservations for %s (CapacityReservationSupported is not true)", s.Name))
	}
	prices, _, err := p.fetchRetail(ctx, o.Region, []string{s.Name})
	if err != nil {
		return o, fmt.Errorf("azure refresh %s: %w", o.ID, err)
	}
	rp := prices[strings.ToLower(s.Name)]
	if rp.OnDemand == nil {
		return o, gone(fmt.Sprintf("%s has no on-demand list price in %s", s.Name, o.Region))
	}
	fresh := reservationOffering(o.Region, o.Zone, *s, o.InstanceCount, *rp.OnDemand, o.Start, o.End)
	fresh.ID = o.ID
	return fresh, nil
}
