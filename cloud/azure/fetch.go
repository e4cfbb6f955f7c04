package azure

import (
	"cmp"
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

// regionFetch is one region's part of a fetch; the grouped queries fill evict and hist.
type regionFetch struct {
	region      string
	req         domain.FetchRequest
	all, sizes  []gpuSize // every GPU size in the region; those the query wants
	names       []string
	prices      map[string]retailPrice
	evict       map[string]string
	hist        map[string][]spotPoint
	sized       chan struct{} // closed when all, sizes and names are read
	err, pErr   error         // the sizes or the prices failed: no pools
	evErr, hErr error         // account-only data failed: pools without it
	done, total int32
	sink        domain.Sink
}

// step reports a back-fill's progress in the region.
func (f *regionFetch) step() {
	if n := atomic.AddInt32(&f.done, 1); f.req.Backfill && n < f.total {
		f.sink(domain.Event{Provider: Name, Region: f.region, Progress: &domain.Progress{Done: int(n), Total: int(f.total)}})
	}
}

// Fetch reports the query's Azure GPU pools with list prices and, with an account,
// spot history and eviction rates. A failed region is an Event with Err; the
// error means all failed. Sizes come first, so that one history query and one
// eviction-rate query serve every region, as Azure advises: the quota counts
// queries (15 per 5 s)
// (https://learn.microsoft.com/azure/governance/resource-graph/concepts/guidance-for-throttled-requests#grouping-queries).
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
	rs := make([]*regionFetch, len(regions))
	for i, r := range regions {
		rs[i] = &regionFetch{region: r, req: req.Missed[r].Widen(req), total: 2, sink: sink, sized: make(chan struct{})}
		if c != nil {
			rs[i].total = 4
		}
	}
	// A region's prices follow its sizes; the grouped queries wait for every region's.
	var wg sync.WaitGroup
	sized := make(chan struct{})
	wg.Go(func() {
		defer close(sized)
		fanout.Each(len(rs), bound, func(i int) {
			f := rs[i]
			defer close(f.sized)
			if f.all, f.err = p.sizesFor(ctx, c, f.region); f.err != nil {
				return
			}
			f.step()
			for _, s := range f.all {
				if req.Query.WantsGPU(s.GPU.Model) {
					f.sizes = append(f.sizes, s)
					f.names = append(f.names, s.Name)
				}
			}
		})
	})
	wg.Go(func() {
		fanout.Each(len(rs), bound, func(i int) {
			f := rs[i]
			if <-f.sized; f.err == nil {
				if f.prices, f.pErr = p.retailFor(ctx, f.region, f.all); f.pErr == nil {
					f.step()
				}
			}
		})
	})
	if c != nil {
		wg.Go(func() { <-sized; p.evictions(ctx, c, rs) })
		wg.Go(func() { <-sized; p.histories(ctx, c, rs) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	var errs []error
	for _, f := range rs {
		err := cmp.Or(f.err, f.pErr)
		if err == nil {
			p.sinkRegion(f, c != nil)
			continue
		}
		sink(domain.Event{Provider: Name, Region: f.region, Err: err})
		errs = append(errs, err)
	}
	if len(errs) == len(rs) {
		return fmt.Errorf("azure: every region failed: %w", errors.Join(errs...))
	}
	return nil
}

// sinkRegion sends a region's pools; failures of account-only data come after
// them, so the pools still show.
func (p *Provider) sinkRegion(f *regionFetch, signedIn bool) {
	soft := []error{f.evErr, f.hErr} // errors.Join leaves out the nil ones
	ev := domain.Event{Provider: Name, Region: f.region, Progress: &domain.Progress{Done: int(f.total), Total: int(f.total)}}
	p.cacheMu.Lock()
	for _, s := range f.sizes {
		key := strings.ToLower(s.Name)
		rp, priced := f.prices[key]
		if !signedIn && !priced {
			continue // without ResourceSKUs, a size with no meter here is not sold here
		}
		var inter *domain.Interruption
		if label, ok := f.evict[key]; ok {
			if in, ok := domain.NewInterruption(label, interruptionSource, time.Time{}); ok {
				inter = in
			} else {
				soft = append(soft, fmt.Errorf("eviction rate of %s in %s: unknown label %q (want 0-5, 5-10, 10-15, 15-20 or 20+)", s.Name, f.region, label))
			}
		}
		zones := s.Zones
		if len(zones) == 0 {
			zones = []string{""}
		}
		for _, z := range zones {
			pool := domain.Pool{
				Provider: Name, Cloud: domain.CloudAzure, Region: f.region, Zone: z,
				InstanceType: s.Name, GPU: s.GPU, Interruption: inter, Restricted: s.Restricted(z),
			}
			if rp.OnDemand != nil {
				pool.OnDemandUSDHour = domain.Float(*rp.OnDemand)
			}
			ev.Pools = append(ev.Pools, pool)
			k := pool.Key()
			// Azure's spot prices are per region: each zone gets the region's.
			if pts := f.hist[key]; len(pts) > 0 {
				p.hasHistory[k] = true
				for _, pt := range pts {
					ev.Points = append(ev.Points, domain.PricePoint{Pool: k, At: pt.At, USDHour: pt.USD})
				}
			} else if rp.Spot != nil && !p.hasHistory[k] {
				at := rp.SpotAt
				if at.IsZero() || at.After(f.req.Until) {
					at = f.req.Until
				}
				ev.Points = append(ev.Points, domain.PricePoint{Pool: k, At: at, USDHour: *rp.Spot})
			}
		}
	}
	p.cacheMu.Unlock()
	f.sink(ev)
	if err := errors.Join(soft...); err != nil {
		// Only a history failure costs the hub a span to ask again.
		f.sink(domain.Event{Provider: Name, Region: f.region, Err: err, Soft: f.hErr == nil})
	}
}

// sizesFor returns the region's GPU sizes from ResourceSKUs (cached), else the catalog.
func (p *Provider) sizesFor(ctx context.Context, c *armClients, region string) ([]gpuSize, error) {
	if c == nil {
		return catalogSizes(), nil
	}
	return cachedFor(p, p.skus, region, func() ([]gpuSize, error) { return p.listGPUSizes(ctx, c, region) })
}

// fromCache returns m[key] while younger than ListTTL.
func fromCache[T any](p *Provider, m map[string]cached[T], key string) (T, bool) {
	p.cacheMu.Lock()
	defer p.cacheMu.Unlock()
	e, ok := m[key]
	return e.v, ok && p.now().Sub(e.at) < p.opt.ListTTL
}

func toCache[T any](p *Provider, m map[string]cached[T], key string, v T) {
	p.cacheMu.Lock()
	m[key] = cached[T]{v: v, at: p.now()}
	p.cacheMu.Unlock()
}

// cachedFor returns m[key] while younger than ListTTL, else what load returns, kept.
func cachedFor[T any](p *Provider, m map[string]cached[T], key string, load func() (T, error)) (T, error) {
	if v, ok := fromCache(p, m, key); ok {
		return v, nil
	}
	v, err := load()
	if err == nil {
		toCache(p, m, key, v)
	}
	return v, err
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

// evictions reads the regions' eviction rates: cached, else one query for the rest.
func (p *Provider) evictions(ctx context.Context, c *armClients, rs []*regionFetch) {
	var ask []*regionFetch
	for _, f := range rs {
		if f.err != nil || len(f.names) == 0 {
			continue
		}
		var ok bool
		if f.evict, ok = fromCache(p, p.evict, f.region+"|"+strings.Join(f.names, ",")); ok {
			f.step()
		} else {
			ask = append(ask, f)
		}
	}
	p.grouped(ctx, c, ask, evictionQuery, func(f *regionFetch, rows []json.RawMessage) error {
		m, err := parseEvictionRows(rows)
		if err == nil {
			f.evict = m
			toCache(p, p.evict, f.region+"|"+strings.Join(f.names, ","), m)
		}
		return err
	}, func(f *regionFetch, err error) {
		f.evErr = fmt.Errorf("eviction rates in %s: %w", f.region, err)
	})
}

// histories reads the regions' spot price history, one query for the regions of one window.
func (p *Provider) histories(ctx context.Context, c *armClients, rs []*regionFetch) {
	type window struct {
		from time.Time
		live bool
	}
	groups := map[window][]*regionFetch{}
	for _, f := range rs {
		if f.err != nil || len(f.names) == 0 {
			continue
		}
		w := window{f.req.Since.UTC(), !f.req.Backfill && !f.req.Since.IsZero()}
		if w.live {
			w.from = f.req.Since.Add(-p.opt.HistoryLookback).UTC()
		}
		groups[w] = append(groups[w], f)
	}
	var wg sync.WaitGroup
	for w, fs := range groups {
		query := func(regions, sizes []string) string { return historyQuery(regions, sizes, w.from, w.live) }
		wg.Go(func() {
			p.grouped(ctx, c, fs, query, func(f *regionFetch, rows []json.RawMessage) (err error) {
				f.hist, err = parseHistoryRows(rows, f.req.Since, f.req.Until, w.live)
				return err
			}, func(f *regionFetch, err error) {
				f.hErr = fmt.Errorf("spot price history in %s: %w", f.region, err)
			})
		})
	}
	wg.Wait()
}

// grouped runs one Resource Graph query for the regions fs and hands each its rows to use, or the error to fail.
func (p *Provider) grouped(ctx context.Context, c *armClients, fs []*regionFetch, query func(regions, sizes []string) string,
	use func(f *regionFetch, rows []json.RawMessage) error, fail func(f *regionFetch, err error)) {
	if len(fs) == 0 {
		return
	}
	regions, sizes := map[string]bool{}, map[string]bool{}
	for _, f := range fs {
		regions[strings.ToLower(f.region)] = true
		for _, s := range f.names {
			sizes[s] = true
		}
	}
	rows, _, err := p.graphRows(ctx, c, query(slices.Sorted(maps.Keys(regions)), slices.Sorted(maps.Keys(sizes))))
	byRegion := map[string][]json.RawMessage{}
	for _, raw := range rows {
		var r struct {
			Location string `json:"location"`
		}
		if json.Unmarshal(raw, &r) == nil {
			byRegion[strings.ToLower(r.Location)] = append(byRegion[strings.ToLower(r.Location)], raw)
		}
	}
	for _, f := range fs {
		ferr := err
		if ferr == nil {
			ferr = use(f, byRegion[strings.ToLower(f.region)])
		}
		if ferr != nil {
			fail(f, ferr)
		}
		f.step()
	}
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
