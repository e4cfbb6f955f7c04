package azure

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resourcegraph/armresourcegraph"
)

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
	regions, sizes := sortedKeys(b.regions), sortedKeys(b.sizes)
	g.mu.Unlock()
	q := evictionQuery(regions, sizes)
	if kind.typ == typePriceHistory {
		q = historyQuery(regions, sizes, kind.from, kind.live)
	}
	b.rows, _, b.err = g.p.graphRows(g.ctx, g.c, q)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
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
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].At.Before(pts[j].At) })
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
