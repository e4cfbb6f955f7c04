package gcp

import (
	"context"
	"math"
	"sort"

	"github.com/gpumarket/gpumarket/domain"
)

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
	byRegion := map[string][]domain.Pool{}
	var points []domain.PricePoint
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
			points = append(points, domain.PricePoint{Pool: pool.Key(), At: at, USDHour: spot})
			if !req.Aside {
				p.sent[pool.Key()] = spot
			}
		}
	}
	p.mu.Unlock()
	regions := make([]string, 0, len(byRegion))
	for r := range byRegion {
		regions = append(regions, r)
	}
	sort.Strings(regions)
	for _, r := range regions {
		var pts []domain.PricePoint
		for _, pt := range points {
			if pt.Pool.Region == r {
				pts = append(pts, pt)
			}
		}
		ev := domain.Event{Provider: Name, Region: r, Pools: byRegion[r], Points: pts, Note: historyNote}
		if req.Backfill {
			ev.Progress = &domain.Progress{Done: 1, Total: 1}
		}
		sink(ev)
	}
	if len(regions) == 0 {
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
