package azure

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resourcegraph/armresourcegraph"
)

// The SpotResources record types gpumarket reads.
const (
	typePriceHistory = "microsoft.compute/skuspotpricehistory/ostype/location"
	typeEvictionRate = "microsoft.compute/skuspotevictionrate/location"
)

// graphPageSize is the rows asked per Resource Graph page (its maximum).
const graphPageSize = 1000

// maxGraphPages guards against a $skipToken that never ends.
const maxGraphPages = 1000

// kqlString quotes s as a KQL string literal.
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

// historyQuery is the Resource Graph query for the Linux spot price
// history of sizes in a region.
//
// A back-fill takes each size's whole spotPrices array (one row per size,
// at most 90 days of points) and trims it here, because the point before
// the window's start is the price in force at the start, and finding it
// in KQL needs a union that Resource Graph limits. A live poll expands
// the arrays and asks only for points from `from` on.
func historyQuery(region string, sizes []string, from time.Time, live bool) string {
	var b strings.Builder
	b.WriteString("SpotResources\n")
	fmt.Fprintf(&b, "| where type =~ %s\n", kqlString(typePriceHistory))
	fmt.Fprintf(&b, "| where location =~ %s\n", kqlString(region))
	b.WriteString("| where tostring(properties.osType) =~ 'linux'\n")
	fmt.Fprintf(&b, "| where tostring(sku.name) in~ %s\n", kqlList(sizes))
	if !live {
		b.WriteString("| project skuName = tostring(sku.name), location, spotPrices = properties.spotPrices\n")
		b.WriteString("| order by skuName asc")
		return b.String()
	}
	b.WriteString("| mv-expand spotPrice = properties.spotPrices limit 400\n")
	b.WriteString("| extend effectiveDate = todatetime(spotPrice.effectiveDate)\n")
	fmt.Fprintf(&b, "| where effectiveDate >= datetime(%s)\n", from.UTC().Format(time.RFC3339))
	b.WriteString("| project skuName = tostring(sku.name), location, effectiveDate, priceUSD = todouble(spotPrice.priceUSD)\n")
	b.WriteString("| order by skuName asc, effectiveDate asc")
	return b.String()
}

// evictionQuery is the Resource Graph query for the eviction rates of
// sizes in a region.
func evictionQuery(region string, sizes []string) string {
	var b strings.Builder
	b.WriteString("SpotResources\n")
	fmt.Fprintf(&b, "| where type =~ %s\n", kqlString(typeEvictionRate))
	fmt.Fprintf(&b, "| where location =~ %s\n", kqlString(region))
	fmt.Fprintf(&b, "| where tostring(sku.name) in~ %s\n", kqlList(sizes))
	b.WriteString("| project skuName = tostring(sku.name), location, evictionRate = tostring(properties.evictionRate)\n")
	b.WriteString("| order by skuName asc")
	return b.String()
}

// graphRows runs a query in the subscription and returns every row,
// following $skipToken.
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
			return rows, pages, nil
		}
		if seen[*resp.SkipToken] {
			return nil, pages, fmt.Errorf("resource graph: $skipToken repeats")
		}
		seen[*resp.SkipToken] = true
		skip = resp.SkipToken
	}
}

// spotPoint is one spot price of the history.
type spotPoint struct {
	At  time.Time
	USD float64
}

// historyRow is a row of either history query.
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

// parseHistoryRows turns history rows into points per size (lower-case
// name), sorted by time. A back-fill keeps the points in [since, until]
// and the last one before since; a live poll keeps what it was sent.
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

// evictionRow is a row of the eviction-rate query.
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
