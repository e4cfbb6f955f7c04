package azure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resourcegraph/armresourcegraph"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/fanout"
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
	// Grouped queries wait for the regions started (others would hold a batch for maxGather).
	var graph *graphBatcher
	if c != nil && bound >= len(regions) {
		graph = p.newGraphBatcher(ctx, c, regions)
	} else if c != nil {
		graph = p.newGraphBatcher(ctx, c, nil)
	}
	errs := make([]error, len(regions))
	fanout.Each(len(regions), bound, func(i int) {
		region := regions[i]
		if ctx.Err() != nil {
			return
		}
		if bound < len(regions) {
			graph.expect(region)
		}
		err := p.fetchRegion(ctx, c, graph, region, req.Missed[region].Widen(req), sink)
		if err != nil {
			sink(domain.Event{Provider: Name, Region: region, Err: err})
			errs[i] = err
		}
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if !slices.Contains(errs, nil) {
		return fmt.Errorf("azure: every region failed: %w", errors.Join(errs...))
	}
	return nil
}

// fetchRegion gets the sizes, then list prices, eviction rates and history at
// once; failures of account-only data come after the pools, so they still show.
func (p *Provider) fetchRegion(ctx context.Context, c *armClients, g *graphBatcher, region string, req domain.FetchRequest, sink domain.Sink) error {
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
		return err
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
	wg.Go(func() {
		if prices, priceErr = p.retailFor(ctx, region, all); priceErr == nil {
			step()
		}
	})
	if c == nil || len(names) == 0 {
		g.leave(region, typeEvictionRate)
		g.leave(region, typePriceHistory)
	} else {
		wg.Go(func() {
			evict, evErr = p.evictionsFor(ctx, g, region, names)
			step()
		})
		wg.Go(func() {
			hist, histErr = p.history(ctx, g, region, names, req)
			step()
		})
	}
	wg.Wait()
	if priceErr != nil {
		return priceErr
	}
	soft := []error{evErr, histErr} // errors.Join leaves out the nil ones
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
	if err := errors.Join(soft...); err != nil {
		// Only a history failure costs the hub a span to ask again.
		sink(domain.Event{Provider: Name, Region: region, Err: err, Soft: histErr == nil})
	}
	return nil
}

// sizesFor returns the region's GPU sizes from ResourceSKUs (cached), else the catalog.
func (p *Provider) sizesFor(ctx context.Context, c *armClients, region string) ([]gpuSize, error) {
	if c == nil {
		return catalogSizes(), nil
	}
	return cachedFor(p, p.skus, region, func() ([]gpuSize, error) { return p.listGPUSizes(ctx, c, region) })
}

// cachedFor returns m[key] while younger than ListTTL, else what load returns, kept.
func cachedFor[T any](p *Provider, m map[string]cached[T], key string, load func() (T, error)) (T, error) {
	p.cacheMu.Lock()
	e, ok := m[key]
	p.cacheMu.Unlock()
	if ok && p.now().Sub(e.at) < p.opt.ListTTL {
		return e.v, nil
	}
	v, err := load()
	if err != nil {
		return v, err
	}
	p.cacheMu.Lock()
	m[key] = cached[T]{v: v, at: p.now()}
	p.cacheMu.Unlock()
	return v, nil
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
	return cachedFor(p, p.prices, region+"|"+strings.Join(names, ","), func() (map[string]retailPrice, error) {
		prices, _, err := p.fetchRetail(ctx, region, names)
		return prices, err
	})
}

func (p *Provider) evictionsFor(ctx context.Context, g *graphBatcher, region string, names []string) (map[string]string, error) {
	defer g.leave(region, typeEvictionRate) // a cached answer asks nothing of the batch
	return cachedFor(p, p.evict, region+"|"+strings.Join(names, ","), func() (map[string]string, error) {
		rows, err := g.rows(ctx, graphKind{typ: typeEvictionRate}, region, names)
		if err != nil {
			return nil, fmt.Errorf("eviction rates in %s: %w", region, err)
		}
		m, err := parseEvictionRows(rows)
		if err != nil {
			return nil, fmt.Errorf("eviction rates in %s: %w", region, err)
		}
		return m, nil
	})
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

// The SpotResources record types gpumarket reads.
const (
	typePriceHistory = "microsoft.compute/skuspotpricehistory/ostype/location"
	typeEvictionRate = "microsoft.compute/skuspotevictionrate/location"
)

const graphPageSize = 1000

// maxGraphPages guards against a $skipToken that never ends.
const maxGraphPages = 1000

func kqlString(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}

func kqlList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = kqlString(s)
	}
	return "(" + strings.Join(q, ", ") + ")"
}

// historyQuery is the Linux spot history query. A back-fill takes whole
// spotPrices arrays and trims them here: the point before the window is the
// price at its start, and KQL would need a union Resource Graph limits.
func historyQuery(regions, sizes []string, from time.Time, live bool) string {
	var b strings.Builder
	b.WriteString("SpotResources\n")
	fmt.Fprintf(&b, "| where type =~ %s\n", kqlString(typePriceHistory))
	fmt.Fprintf(&b, "| where location in~ %s\n", kqlList(regions))
	b.WriteString("| where tostring(properties.osType) =~ 'linux'\n")
	fmt.Fprintf(&b, "| where tostring(sku.name) in~ %s\n", kqlList(sizes))
	if !live {
		b.WriteString("| project skuName = tostring(sku.name), location, spotPrices = properties.spotPrices\n")
		b.WriteString("| order by location asc, skuName asc")
		return b.String()
	}
	// No limit clause: "The response won't contain $skipToken if: The query
	// contains a limit or sample/take operator" (Guidance for pagination).
	b.WriteString("| mv-expand spotPrice = properties.spotPrices\n")
	b.WriteString("| extend effectiveDate = todatetime(spotPrice.effectiveDate)\n")
	fmt.Fprintf(&b, "| where effectiveDate >= datetime(%s)\n", from.UTC().Format(time.RFC3339))
	b.WriteString("| project skuName = tostring(sku.name), location, effectiveDate, priceUSD = todouble(spotPrice.priceUSD)\n")
	b.WriteString("| order by location asc, skuName asc, effectiveDate asc")
	return b.String()
}

func evictionQuery(regions, sizes []string) string {
	var b strings.Builder
	b.WriteString("SpotResources\n")
	fmt.Fprintf(&b, "| where type =~ %s\n", kqlString(typeEvictionRate))
	fmt.Fprintf(&b, "| where location in~ %s\n", kqlList(regions))
	fmt.Fprintf(&b, "| where tostring(sku.name) in~ %s\n", kqlList(sizes))
	b.WriteString("| project skuName = tostring(sku.name), location, evictionRate = tostring(properties.evictionRate)\n")
	b.WriteString("| order by location asc, skuName asc")
	return b.String()
}

// maxGather: a region slow to list its sizes delays the others' history by no more.
const maxGather = time.Second

type graphKind struct {
	typ  string // typePriceHistory or typeEvictionRate
	from time.Time
	live bool
}

// graphBatcher runs one query per kind for all of a fetch's regions, as Azure
// advises: the quota counts queries (15 per 5 s)
// (https://learn.microsoft.com/azure/governance/resource-graph/concepts/guidance-for-throttled-requests#grouping-queries).
// A batch runs when every region asked or left, or after maxGather.
type graphBatcher struct {
	p      *Provider
	c      *armClients
	ctx    context.Context
	gather time.Duration

	mu sync.Mutex
	// waiting holds, per query type, the regions that may still ask.
	waiting map[string]map[string]bool
	open    map[graphKind]*graphBatch
}

type graphBatch struct {
	regions map[string]bool
	sizes   map[string]bool
	ready   chan struct{} // closed when no region is left to wait for
	isReady bool
	done    chan struct{}
	rows    []json.RawMessage
	err     error
}

func (p *Provider) newGraphBatcher(ctx context.Context, c *armClients, regions []string) *graphBatcher {
	g := &graphBatcher{p: p, c: c, ctx: ctx, gather: maxGather, open: map[graphKind]*graphBatch{}, waiting: map[string]map[string]bool{}}
	for _, typ := range []string{typePriceHistory, typeEvictionRate} {
		g.waiting[typ] = map[string]bool{}
	}
	for _, r := range regions {
		g.expect(r)
	}
	return g
}

func (g *graphBatcher) expect(region string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.waiting {
		w[strings.ToLower(region)] = true
	}
}

// leave says the region will not ask (again) for the type; may be said twice.
func (g *graphBatcher) leave(region, typ string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.settled(strings.ToLower(region), typ)
}

// settled drops a region from the waiting list, freeing batches when none is left; g.mu is held.
func (g *graphBatcher) settled(region, typ string) {
	delete(g.waiting[typ], region)
	if len(g.waiting[typ]) > 0 {
		return
	}
	for k, b := range g.open {
		if k.typ == typ && !b.isReady {
			b.isReady = true
			close(b.ready)
		}
	}
}

// rows returns the region's rows of the kind's query, batched with the fetch's other regions.
func (g *graphBatcher) rows(ctx context.Context, kind graphKind, region string, sizes []string) ([]json.RawMessage, error) {
	region = strings.ToLower(region)
	g.mu.Lock()
	b := g.open[kind]
	if b == nil {
		b = &graphBatch{regions: map[string]bool{}, sizes: map[string]bool{}, ready: make(chan struct{}), done: make(chan struct{})}
		g.open[kind] = b
		go g.run(kind, b)
	}
	b.regions[region] = true
	for _, s := range sizes {
		b.sizes[s] = true
	}
	g.settled(region, kind.typ)
	g.mu.Unlock()
	select {
	case <-b.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if b.err != nil {
		return nil, b.err
	}
	var out []json.RawMessage
	for _, raw := range b.rows {
		var r struct {
			Location string `json:"location"`
		}
		if json.Unmarshal(raw, &r) == nil && strings.EqualFold(r.Location, region) {
			out = append(out, raw)
		}
	}
	return out, nil
}

// run waits for the batch to gather, closes it and runs its query.
func (g *graphBatcher) run(kind graphKind, b *graphBatch) {
	defer close(b.done)
	timer := time.NewTimer(g.gather)
	defer timer.Stop()
	select {
	case <-b.ready:
	case <-timer.C:
	case <-g.ctx.Done():
		b.err = g.ctx.Err()
		return
	}
	g.mu.Lock()
	delete(g.open, kind)
	regions, sizes := slices.Sorted(maps.Keys(b.regions)), slices.Sorted(maps.Keys(b.sizes))
	g.mu.Unlock()
	q := evictionQuery(regions, sizes)
	if kind.typ == typePriceHistory {
		q = historyQuery(regions, sizes, kind.from, kind.live)
	}
	b.rows, _, b.err = g.p.graphRows(g.ctx, g.c, q)
}

// graphRows runs a query and returns every row, following $skipToken.
func (p *Provider) graphRows(ctx context.Context, c *armClients, query string) ([]json.RawMessage, int, error) {
	var rows []json.RawMessage
	var skip *string
	seen := map[string]bool{}
	for pages := 1; ; pages++ {
		if pages > maxGraphPages {
			return nil, pages, fmt.Errorf("resource graph: more than %d pages", maxGraphPages)
		}
		req := armresourcegraph.QueryRequest{
			Query:         &query,
			Subscriptions: []*string{to.Ptr(c.subID)},
			Options: &armresourcegraph.QueryRequestOptions{
				ResultFormat: to.Ptr(armresourcegraph.ResultFormatObjectArray),
				Top:          to.Ptr[int32](graphPageSize),
				SkipToken:    skip,
			},
		}
		resp, err := c.graph.Resources(ctx, req, nil)
		if err != nil {
			return nil, pages, fmt.Errorf("resource graph query (page %d): %w", pages, err)
		}
		raw, err := json.Marshal(resp.Data)
		if err != nil {
			return nil, pages, fmt.Errorf("resource graph page %d: %w", pages, err)
		}
		var page []json.RawMessage
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, pages, fmt.Errorf("resource graph page %d: data is not an array of rows (want resultFormat objectArray): %w", pages, err)
		}
		rows = append(rows, page...)
		if resp.SkipToken == nil || *resp.SkipToken == "" {
			// Truncated without a token: a partial history must not pass for the whole.
			if resp.ResultTruncated != nil && *resp.ResultTruncated == armresourcegraph.ResultTruncatedTrue &&
				resp.TotalRecords != nil && int64(len(rows)) < *resp.TotalRecords {
				return nil, pages, fmt.Errorf("resource graph: the answer was cut at %d of %d rows and gave no $skipToken to read the rest", len(rows), *resp.TotalRecords)
			}
			return rows, pages, nil
		}
		if seen[*resp.SkipToken] {
			return nil, pages, fmt.Errorf("resource graph: $skipToken repeats")
		}
		seen[*resp.SkipToken] = true
		skip = resp.SkipToken
	}
}

type spotPoint struct {
	At  time.Time
	USD float64
}

type historyRow struct {
	SkuName    string `json:"skuName"`
	Location   string `json:"location"`
	SpotPrices []struct {
		EffectiveDate string   `json:"effectiveDate"`
		PriceUSD      *float64 `json:"priceUSD"`
	} `json:"spotPrices"`
	EffectiveDate string   `json:"effectiveDate"`
	PriceUSD      *float64 `json:"priceUSD"`
}

// parseHistoryRows returns points per lower-case size, by time: a back-fill's in
// [since, until] plus the last before since; a live poll's as sent.
func parseHistoryRows(rows []json.RawMessage, since, until time.Time, live bool) (map[string][]spotPoint, error) {
	all := map[string][]spotPoint{}
	add := func(sku, date string, usd *float64) error {
		at, err := time.Parse(time.RFC3339, date)
		if err != nil {
			return fmt.Errorf("spot price history of %s: effectiveDate %q is not an RFC 3339 time", sku, date)
		}
		if usd == nil || *usd < 0 || math.IsNaN(*usd) || math.IsInf(*usd, 0) {
			return fmt.Errorf("spot price history of %s at %s: priceUSD missing or not a price", sku, date)
		}
		k := strings.ToLower(sku)
		all[k] = append(all[k], spotPoint{At: at.UTC(), USD: *usd})
		return nil
	}
	for i, raw := range rows {
		var r historyRow
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("spot price history row %d: %w", i, err)
		}
		if r.SkuName == "" {
			return nil, fmt.Errorf("spot price history row %d has no skuName", i)
		}
		if live {
			if err := add(r.SkuName, r.EffectiveDate, r.PriceUSD); err != nil {
				return nil, err
			}
			continue
		}
		for _, sp := range r.SpotPrices {
			if err := add(r.SkuName, sp.EffectiveDate, sp.PriceUSD); err != nil {
				return nil, err
			}
		}
	}
	for k, pts := range all {
		slices.SortStableFunc(pts, func(a, b spotPoint) int { return a.At.Compare(b.At) })
		if live {
			continue
		}
		var keep []spotPoint
		before := -1
		for i, pt := range pts {
			switch {
			case pt.At.Before(since):
				before = i
			case !pt.At.After(until):
				keep = append(keep, pt)
			}
		}
		if before >= 0 {
			keep = append([]spotPoint{pts[before]}, keep...)
		}
		all[k] = keep
	}
	return all, nil
}

type evictionRow struct {
	SkuName      string `json:"skuName"`
	Location     string `json:"location"`
	EvictionRate string `json:"evictionRate"`
}

// parseEvictionRows maps size (lower-case) to Azure's eviction-rate label.
func parseEvictionRows(rows []json.RawMessage) (map[string]string, error) {
	out := map[string]string{}
	for i, raw := range rows {
		var r evictionRow
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("eviction rate row %d: %w", i, err)
		}
		if r.SkuName == "" {
			return nil, fmt.Errorf("eviction rate row %d has no skuName", i)
		}
		out[strings.ToLower(r.SkuName)] = r.EvictionRate
	}
	return out, nil
}
