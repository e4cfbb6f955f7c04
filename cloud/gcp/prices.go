package gcp

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"

	billing "google.golang.org/api/cloudbilling/v1"

	"github.com/gpumarket/gpumarket/domain"
)

// computeService is the Compute Engine service in the Billing Catalog.
const computeService = "services/6F81-5844-456A"

// part is what one SKU prices: a machine family's cores or RAM, or a GPU.
type part int

const (
	partCore part = iota
	partRAM
	partGPU
)

// skuKey is what a SKU prices: a part of a family, or a GPU's words; Spot or not.
type skuKey struct {
	part   part
	name   string
	spot   bool
	region string
}

// priceBook is the catalog's hourly prices: a core-, GiB- or GPU-hour by region.
type priceBook struct {
	usd map[skuKey]float64
	// legacy marks a plain "Preemptible" SKU's price: a "Spot" one replaces it.
	legacy map[skuKey]bool
}

// readSKU reads what a SKU prices from its description only; regions from serviceRegions.
func readSKU(s *billing.Sku) (k skuKey, legacy, ok bool) {
	if s.Category == nil || s.Category.ResourceFamily != "Compute" {
		return k, false, false
	}
	switch s.Category.UsageType {
	case "OnDemand":
	case "Preemptible":
		k.spot = true
	default:
		return k, false, false
	}
	d := s.Description
	if i := strings.Index(d, " running in "); i >= 0 {
		d = d[:i]
	} else {
		return k, false, false
	}
	switch {
	case strings.HasPrefix(d, "Spot Preemptible "):
		d = strings.TrimPrefix(d, "Spot Preemptible ")
	case strings.HasPrefix(d, "Preemptible "):
		d, legacy = strings.TrimPrefix(d, "Preemptible "), true
	}
	switch {
	case strings.HasSuffix(d, " attached to Spot Preemptible VMs"):
		d = strings.TrimSuffix(d, " attached to Spot Preemptible VMs")
	case strings.HasSuffix(d, " attached to Preemptible VMs"):
		d, legacy = strings.TrimSuffix(d, " attached to Preemptible VMs"), true
	}
	if k.spot != strings.Contains(s.Description, "Preemptible") {
		return k, false, false // usage type and words disagree
	}
	switch {
	case strings.HasSuffix(d, " Instance Core"):
		k.part, k.name = partCore, squash(strings.TrimSuffix(d, " Instance Core"))
	case strings.HasSuffix(d, " Instance Ram"):
		k.part, k.name = partRAM, squash(strings.TrimSuffix(d, " Instance Ram"))
	case strings.HasPrefix(d, "Nvidia ") && strings.HasSuffix(d, " GPU"):
		k.part, k.name = partGPU, words(strings.TrimSuffix(strings.TrimPrefix(d, "Nvidia "), " GPU"))
	default:
		return k, false, false
	}
	return k, legacy, true
}

// squash makes a family one lower-case word: "A3 Plus" is "a3plus".
func squash(s string) string { return strings.ToLower(strings.ReplaceAll(s, " ", "")) }

// words is a name's words, lower-case and sorted, so word order does not matter.
func words(s string) string {
	f := strings.Fields(strings.ToLower(s))
	slices.Sort(f)
	return strings.Join(f, " ")
}

// hourly is the SKU's first-tier USD per hour or GiB-hour.
func hourly(s *billing.Sku, p part) (float64, bool) {
	if len(s.PricingInfo) == 0 || s.PricingInfo[0].PricingExpression == nil {
		return 0, false
	}
	e := s.PricingInfo[0].PricingExpression
	want := "h"
	if p == partRAM {
		want = "GiBy.h"
	}
	if e.UsageUnit != want || len(e.TieredRates) == 0 {
		return 0, false
	}
	best := e.TieredRates[0]
	for _, t := range e.TieredRates {
		if t.StartUsageAmount < best.StartUsageAmount {
			best = t
		}
	}
	if best.UnitPrice == nil || (best.UnitPrice.CurrencyCode != "" && best.UnitPrice.CurrencyCode != "USD") {
		return 0, false
	}
	return float64(best.UnitPrice.Units) + float64(best.UnitPrice.Nanos)/1e9, true
}

// priceBook reads the Compute Engine SKUs (every page), kept for ListTTL.
func (p *Provider) priceBook(ctx context.Context) (*priceBook, error) {
	return keep(p, &p.prices, func() (*priceBook, error) { return p.readPriceBook(ctx) })
}

func (p *Provider) readPriceBook(ctx context.Context) (*priceBook, error) {
	b := &priceBook{usd: map[skuKey]float64{}, legacy: map[skuKey]bool{}}
	err := p.billing.Services.Skus.List(computeService).CurrencyCode("USD").PageSize(5000).
		Pages(ctx, func(r *billing.ListSkusResponse) error {
			for _, s := range r.Skus {
				b.add(s)
			}
			return nil
		})
	if err != nil {
		return nil, apiErr("list Compute Engine SKUs", err)
	}
	return b, nil
}

func (b *priceBook) add(s *billing.Sku) {
	k, legacy, ok := readSKU(s)
	if !ok {
		return
	}
	usd, ok := hourly(s, k.part)
	if !ok {
		return
	}
	for _, r := range s.ServiceRegions {
		k.region = r
		if _, have := b.usd[k]; have && legacy && !b.legacy[k] {
			continue
		}
		b.usd[k], b.legacy[k] = usd, legacy
	}
}

// price is a machine's hourly price as billed in parts, NaN when one is missing.
func (b *priceBook) price(m machine, spot bool) float64 {
	region := regionOf(m.Zone)
	get := func(pt part, name string) float64 {
		if v, ok := b.usd[skuKey{part: pt, name: name, spot: spot, region: region}]; ok {
			return v
		}
		return math.NaN()
	}
	gpus := m.GPU.Count
	if m.AccelCount > 0 {
		gpus = float64(m.AccelCount)
	}
	usd := float64(m.CPUs)*get(partCore, m.Family) + m.MemGiB*get(partRAM, m.Family) + gpus*get(partGPU, words(m.GPUSKU))
	return math.Round(usd*1e4) / 1e4
}

// interruptionSource: Google publishes no rate, so the planner uses its GPU-class prior.
const interruptionSource = "Google publishes no interruption rate; Spot VMs get a 30 s preemption notice, too short to save a checkpoint"

// historyNote is the header's note: the prices have no past but ours.
const historyNote = "Spot prices from the Cloud Billing Catalog; Google publishes no price history (the chart shows what gpumarket recorded)"

// Fetch reports the regions' GPU machines with on-demand and current Spot
// prices. No published history: a back-fill sends the price at Until, a poll the changes.
func (p *Provider) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	ms, err := p.machines(ctx)
	if err != nil {
		return err
	}
	book, err := p.priceBook(ctx)
	if err != nil {
		return err
	}
	at := req.Until
	if at.IsZero() {
		at = p.now()
	}
	byRegion, points := map[string][]domain.Pool{}, map[string][]domain.PricePoint{}
	p.mu.Lock()
	for _, m := range ms {
		pool := p.pool(m, book)
		if !req.Query.Matches(pool) {
			continue
		}
		region := pool.Region
		spot := book.price(m, true)
		if math.IsNaN(spot) {
			if req.Backfill {
				byRegion[region] = append(byRegion[region], pool)
			}
			continue
		}
		last, seen := p.sent[pool.Key()]
		if req.Backfill || req.Aside || !seen || last != spot {
			byRegion[region] = append(byRegion[region], pool)
			points[region] = append(points[region], domain.PricePoint{Pool: pool.Key(), At: at, USDHour: spot})
			if !req.Aside {
				p.sent[pool.Key()] = spot
			}
		}
	}
	p.mu.Unlock()
	for _, r := range slices.Sorted(maps.Keys(byRegion)) {
		ev := domain.Event{Provider: Name, Region: r, Pools: byRegion[r], Points: points[r], Note: historyNote}
		if req.Backfill {
			ev.Progress = &domain.Progress{Done: 1, Total: 1}
		}
		sink(ev)
	}
	if len(byRegion) == 0 {
		sink(domain.Event{Provider: Name, Note: historyNote})
	}
	return nil
}

// pool describes a machine as a pool.
func (p *Provider) pool(m machine, book *priceBook) domain.Pool {
	pl := domain.Pool{Provider: Name, Cloud: domain.CloudGCP, Region: regionOf(m.Zone), Zone: m.Zone, InstanceType: m.Type, GPU: m.GPU,
		Interruption: &domain.Interruption{Source: interruptionSource}}
	if od := book.price(m, false); !math.IsNaN(od) {
		pl.OnDemandUSDHour = domain.Float(od)
	}
	return pl
}
