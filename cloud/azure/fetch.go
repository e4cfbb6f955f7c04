package azure

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

const interruptionSource = "azure resource graph"

// Fetch reports the query's Azure GPU pools with list prices and, with an account,
// spot history and eviction rates. A failed region is an Event with Err; the
// error means all failed.
func (p *Provider) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	regions := p.regions(req.Query)
	if len(regions) == 0 {
		return nil // the query names only other clouds' regions
	}
	c, authErr := p.clients(ctx)
	if authErr != nil {
		sink(domain.Event{Provider: Name, Note: "list prices only: spot history, eviction rates and actions need a signed-in Azure account (" + authErr.Error() + ")"})
	} else {
		sink(domain.Event{Provider: Name, Note: "signed in to subscription " + c.subID})
	}
	bound := p.opt.Concurrency
	if bound <= 0 {
		bound = len(regions)
	}
	sem := make(chan struct{}, bound)
	// Grouped queries wait for the regions started (others would hold a batch for maxGather).
	var graph *graphBatcher
	if c != nil && bound >= len(regions) {
		graph = p.newGraphBatcher(ctx, c, regions)
	} else if c != nil {
		graph = p.newGraphBatcher(ctx, c, nil)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, region := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			if bound < len(regions) {
				graph.expect(region)
			}
			rreq := p.regionRequest(region, req)
			histOK, err := p.fetchRegion(ctx, c, graph, region, rreq, sink)
			p.settle(region, rreq, !histOK || err != nil)
			if err != nil {
				sink(domain.Event{Provider: Name, Region: region, Err: err})
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(errs) == len(regions) {
		return fmt.Errorf("azure: every region failed: %w", errors.Join(errs...))
	}
	return nil
}

// regionRequest widens the request over what the region's failed fetches missed:
// the hub moves on to live polls when any region answers.
func (p *Provider) regionRequest(region string, req domain.FetchRequest) domain.FetchRequest {
	if req.Aside {
		return req
	}
	p.cacheMu.Lock()
	defer p.cacheMu.Unlock()
	return p.gaps[region].Widen(req)
}

// settle records whether the region got its history (or list prices): a miss is asked again.
func (p *Provider) settle(region string, req domain.FetchRequest, failed bool) {
	if req.Aside {
		return // the hub's next fetch catches up, not this one
	}
	p.cacheMu.Lock()
	defer p.cacheMu.Unlock()
	if g := p.gaps[region].After(req, failed); g != (domain.Gap{}) {
		p.gaps[region] = g
	} else {
		delete(p.gaps, region)
	}
}

// fetchRegion gets the sizes, then list prices, eviction rates and history at
// once; failures of account-only data come after the pools, so they still show.
func (p *Provider) fetchRegion(ctx context.Context, c *armClients, g *graphBatcher, region string, req domain.FetchRequest, sink domain.Sink) (histOK bool, err error) {
	// The others' grouped queries stop waiting for this region.
	defer g.leave(region, typeEvictionRate)
	defer g.leave(region, typePriceHistory)
	total := 2
	if c != nil {
		total = 4
	}
	var done atomic.Int32
	step := func() {
		if n := int(done.Add(1)); req.Backfill && n < total {
			sink(domain.Event{Provider: Name, Region: region, Progress: &domain.Progress{Done: n, Total: total}})
		}
	}
	all, err := p.sizesFor(ctx, c, region)
	if err != nil {
		return false, err
	}
	step()
	var sizes []gpuSize
	var names []string
	for _, s := range all {
		if req.Query.WantsGPU(s.GPU.Model) {
			sizes = append(sizes, s)
			names = append(names, s.Name)
		}
	}
	var (
		wg              sync.WaitGroup
		prices          map[string]retailPrice
		priceErr, evErr error
		histErr         error
		evict           map[string]string
		hist            map[string][]spotPoint
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if prices, priceErr = p.retailFor(ctx, region, all); priceErr == nil {
			step()
		}
	}()
	if c == nil || len(names) == 0 {
		g.leave(region, typeEvictionRate)
		g.leave(region, typePriceHistory)
	} else {
		wg.Add(2)
		go func() {
			defer wg.Done()
			evict, evErr = p.evictionsFor(ctx, g, region, names)
			step()
		}()
		go func() {
			defer wg.Done()
			hist, histErr = p.history(ctx, g, region, names, req)
			step()
		}()
	}
	wg.Wait()
	if priceErr != nil {
		return false, priceErr
	}
	var soft []error
	if evErr != nil {
		soft = append(soft, evErr)
	}
	histOK = histErr == nil
	if histErr != nil {
		soft = append(soft, histErr)
	}
	ev := domain.Event{Provider: Name, Region: region, Progress: &domain.Progress{Done: total, Total: total}}
	p.cacheMu.Lock()
	for _, s := range sizes {
		key := strings.ToLower(s.Name)
		rp, priced := prices[key]
		if c == nil && !priced {
			continue // without ResourceSKUs, a size with no meter here is not sold here
		}
		var inter *domain.Interruption
		if label, ok := evict[key]; ok {
			if in, ok := domain.NewInterruption(label, interruptionSource, time.Time{}); ok {
				inter = in
			} else {
				soft = append(soft, fmt.Errorf("eviction rate of %s in %s: unknown label %q (want 0-5, 5-10, 10-15, 15-20 or 20+)", s.Name, region, label))
			}
		}
		zones := s.Zones
		if len(zones) == 0 {
			zones = []string{""}
		}
		for _, z := range zones {
			pool := domain.Pool{
				Provider: Name, Cloud: domain.CloudAzure, Region: region, Zone: z,
				InstanceType: s.Name, GPU: s.GPU, Interruption: inter, Restricted: s.Restricted(z),
			}
			if rp.OnDemand != nil {
				pool.OnDemandUSDHour = domain.Float(*rp.OnDemand)
			}
			ev.Pools = append(ev.Pools, pool)
			k := pool.Key()
			// Azure's spot prices are per region: each zone gets the region's.
			if pts := hist[key]; len(pts) > 0 {
				p.hasHistory[k] = true
				for _, pt := range pts {
					ev.Points = append(ev.Points, domain.PricePoint{Pool: k, At: pt.At, USDHour: pt.USD})
				}
			} else if rp.Spot != nil && !p.hasHistory[k] {
				at := rp.SpotAt
				if at.IsZero() || at.After(req.Until) {
					at = req.Until
				}
				ev.Points = append(ev.Points, domain.PricePoint{Pool: k, At: at, USDHour: *rp.Spot})
			}
		}
	}
	p.cacheMu.Unlock()
	sink(ev)
	if len(soft) > 0 {
		sink(domain.Event{Provider: Name, Region: region, Err: errors.Join(soft...)})
	}
	return histOK, nil
}

// sizesFor returns the region's GPU sizes from ResourceSKUs (cached), else the catalog.
func (p *Provider) sizesFor(ctx context.Context, c *armClients, region string) ([]gpuSize, error) {
	if c == nil {
		return catalogSizes(), nil
	}
	p.cacheMu.Lock()
	e, ok := p.skus[region]
	p.cacheMu.Unlock()
	if ok && p.now().Sub(e.at) < p.opt.ListTTL {
		return e.v, nil
	}
	sizes, err := p.listGPUSizes(ctx, c, region)
	if err != nil {
		return nil, err
	}
	p.cacheMu.Lock()
	p.skus[region] = cached[[]gpuSize]{v: sizes, at: p.now()}
	p.cacheMu.Unlock()
	return sizes, nil
}

func (p *Provider) retailFor(ctx context.Context, region string, sizes []gpuSize) (map[string]retailPrice, error) {
	names := make([]string, len(sizes))
	for i, s := range sizes {
		names[i] = s.Name
	}
	if len(names) == 0 {
		return map[string]retailPrice{}, nil
	}
	// Keyed by the sizes: signing in later brings sizes the catalog lacks.
	key := region + "|" + strings.Join(names, ",")
	p.cacheMu.Lock()
	e, ok := p.prices[key]
	p.cacheMu.Unlock()
	if ok && p.now().Sub(e.at) < p.opt.ListTTL {
		return e.v, nil
	}
	prices, _, err := p.fetchRetail(ctx, region, names)
	if err != nil {
		return nil, err
	}
	p.cacheMu.Lock()
	p.prices[key] = cached[map[string]retailPrice]{v: prices, at: p.now()}
	p.cacheMu.Unlock()
	return prices, nil
}

func (p *Provider) evictionsFor(ctx context.Context, g *graphBatcher, region string, names []string) (map[string]string, error) {
	key := region + "|" + strings.Join(names, ",")
	p.cacheMu.Lock()
	e, ok := p.evict[key]
	p.cacheMu.Unlock()
	if ok && p.now().Sub(e.at) < p.opt.ListTTL {
		g.leave(region, typeEvictionRate)
		return e.v, nil
	}
	rows, err := g.rows(ctx, graphKind{typ: typeEvictionRate}, region, names)
	if err != nil {
		return nil, fmt.Errorf("eviction rates in %s: %w", region, err)
	}
	m, err := parseEvictionRows(rows)
	if err != nil {
		return nil, fmt.Errorf("eviction rates in %s: %w", region, err)
	}
	p.cacheMu.Lock()
	p.evict[key] = cached[map[string]string]{v: m, at: p.now()}
	p.cacheMu.Unlock()
	return m, nil
}

func (p *Provider) history(ctx context.Context, g *graphBatcher, region string, names []string, req domain.FetchRequest) (map[string][]spotPoint, error) {
	live := !req.Backfill && !req.Since.IsZero()
	from := req.Since
	if live {
		from = req.Since.Add(-p.opt.HistoryLookback)
	}
	rows, err := g.rows(ctx, graphKind{typ: typePriceHistory, from: from.UTC(), live: live}, region, names)
	if err != nil {
		return nil, fmt.Errorf("spot price history in %s: %w", region, err)
	}
	h, err := parseHistoryRows(rows, req.Since, req.Until, live)
	if err != nil {
		return nil, fmt.Errorf("spot price history in %s: %w", region, err)
	}
	return h, nil
}
