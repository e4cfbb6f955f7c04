package azure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// retailItem is the fields gpumarket reads of one Retail Prices meter.
type retailItem struct {
	CurrencyCode         string  `json:"currencyCode"`
	RetailPrice          float64 `json:"retailPrice"`
	UnitPrice            float64 `json:"unitPrice"`
	ArmRegionName        string  `json:"armRegionName"`
	EffectiveStartDate   string  `json:"effectiveStartDate"`
	MeterName            string  `json:"meterName"`
	ProductName          string  `json:"productName"`
	SkuName              string  `json:"skuName"`
	ServiceName          string  `json:"serviceName"`
	ArmSkuName           string  `json:"armSkuName"`
	Type                 string  `json:"type"`
	UnitOfMeasure        string  `json:"unitOfMeasure"`
	IsPrimaryMeterRegion *bool   `json:"isPrimaryMeterRegion"`
}

type pricesPage struct {
	BillingCurrency string       `json:"BillingCurrency"`
	Items           []retailItem `json:"Items"`
	NextPageLink    string       `json:"NextPageLink"`
	Count           int          `json:"Count"`
}

type retailPrice struct {
	Size     string // armSkuName as the API spells it
	Spot     *float64
	SpotAt   time.Time // the spot meter's effectiveStartDate
	OnDemand *float64
	// spotPrim, odPrim: from the primary meter region; odAt: the on-demand meter's effectiveStartDate.
	spotPrim, odPrim bool
	odAt             time.Time
}

// parsePricesPage reads one page of the documented shape; anything else is an error saying what was wrong.
func parsePricesPage(data []byte) (pricesPage, error) {
	var page pricesPage
	if err := json.Unmarshal(data, &page); err != nil {
		return pricesPage{}, fmt.Errorf("retail prices page is not the API's JSON (want an object with Items and NextPageLink): %w", err)
	}
	if page.Items == nil { // absent or null
		return pricesPage{}, errors.New("retail prices page has no Items array")
	}
	for i, it := range page.Items {
		if math.IsNaN(it.RetailPrice) || math.IsInf(it.RetailPrice, 0) || it.RetailPrice < 0 {
			return pricesPage{}, fmt.Errorf("retail prices item %d (%s): retailPrice %v is not a price", i, it.ArmSkuName, it.RetailPrice)
		}
	}
	if page.NextPageLink != "" {
		u, err := url.Parse(page.NextPageLink)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return pricesPage{}, fmt.Errorf("retail prices NextPageLink %q: want an absolute http(s) URL", page.NextPageLink)
		}
	}
	return page, nil
}

// priceFilter names the sizes so the API does not page through thousands of
// meters; items are still checked, as an endpoint may ignore parts of it.
func priceFilter(region string, sizes []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "serviceName eq 'Virtual Machines' and armRegionName eq '%s' and priceType eq 'Consumption'", odataQuote(region))
	if len(sizes) > 0 {
		b.WriteString(" and (")
		for i, s := range sizes {
			if i > 0 {
				b.WriteString(" or ")
			}
			fmt.Fprintf(&b, "armSkuName eq '%s'", odataQuote(s))
		}
		b.WriteString(")")
	}
	return b.String()
}

func odataQuote(s string) string { return strings.ReplaceAll(s, "'", "''") }

const priceChunk = 25

// maxPricePages guards against a NextPageLink that never ends.
const maxPricePages = 1000

// fetchRetail returns the sizes' Linux spot and on-demand list prices by lower-case armSkuName.
func (p *Provider) fetchRetail(ctx context.Context, region string, sizes []string) (map[string]retailPrice, int, error) {
	want := map[string]bool{}
	for _, s := range sizes {
		want[strings.ToLower(s)] = true
	}
	sort.Strings(sizes)
	out := map[string]retailPrice{}
	pages := 0
	for start := 0; start < len(sizes); start += priceChunk {
		end := min(start+priceChunk, len(sizes))
		next := p.pricesU + "?$filter=" + strings.ReplaceAll(url.QueryEscape(priceFilter(region, sizes[start:end])), "+", "%20")
		seen := map[string]bool{}
		for next != "" {
			if seen[next] {
				return nil, pages, fmt.Errorf("retail prices in %s: NextPageLink repeats %s", region, next)
			}
			seen[next] = true
			if pages++; pages > maxPricePages {
				return nil, pages, fmt.Errorf("retail prices in %s: more than %d pages", region, maxPricePages)
			}
			body, err := p.getWithRetry(ctx, next)
			if err != nil {
				return nil, pages, fmt.Errorf("retail prices in %s (page %d): %w", region, pages, err)
			}
			page, err := parsePricesPage(body)
			if err != nil {
				return nil, pages, fmt.Errorf("retail prices in %s (page %d): %w", region, pages, err)
			}
			for _, it := range page.Items {
				addRetailItem(out, it, region, want)
			}
			next = page.NextPageLink
		}
	}
	return out, pages, nil
}

// addRetailItem folds in a Linux spot or on-demand hourly meter of a wanted size.
func addRetailItem(out map[string]retailPrice, it retailItem, region string, want map[string]bool) {
	key := strings.ToLower(it.ArmSkuName)
	switch {
	case !want[key]: // not a GPU size
	case !strings.EqualFold(it.ArmRegionName, region):
	case it.ServiceName != "" && it.ServiceName != "Virtual Machines":
	case it.Type != "Consumption":
	case it.CurrencyCode != "" && it.CurrencyCode != "USD":
	case it.UnitOfMeasure != "" && it.UnitOfMeasure != "1 Hour":
	case strings.Contains(it.ProductName, "Windows"):
	case strings.HasSuffix(it.SkuName, " Low Priority"), strings.Contains(it.MeterName, "Low Priority"):
	default:
		rp := out[key]
		rp.Size = it.ArmSkuName
		primary := it.IsPrimaryMeterRegion == nil || *it.IsPrimaryMeterRegion
		at, _ := time.Parse(time.RFC3339, it.EffectiveStartDate)
		price := it.RetailPrice
		if strings.HasSuffix(it.SkuName, " Spot") {
			// A meter listed twice: the primary meter region's, then the newest, wins.
			if rp.Spot == nil || (primary && !rp.spotPrim) || (primary == rp.spotPrim && at.After(rp.SpotAt)) {
				rp.Spot, rp.SpotAt, rp.spotPrim = &price, at, primary
			}
		} else if rp.OnDemand == nil || (primary && !rp.odPrim) || (primary == rp.odPrim && at.After(rp.odAt)) {
			rp.OnDemand, rp.odPrim, rp.odAt = &price, primary, at
		}
		out[key] = rp
	}
}

// getWithRetry retries 429 (Retry-After), 408 and 5xx with backoff; an unreachable endpoint is said at once.
func (p *Provider) getWithRetry(ctx context.Context, u string) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		release, err := p.lim.acquirePrices(ctx)
		if err != nil {
			return nil, err
		}
		resp, err := p.http.Do(req)
		if err != nil {
			release()
			if ctx.Err() != nil || attempt >= p.opt.MaxRetries || dialFailure(err) {
				return nil, err
			}
			if err := p.sleep(ctx, p.backoff(attempt)); err != nil {
				return nil, err
			}
			continue
		}
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		release()
		if resp.StatusCode == http.StatusOK {
			if rerr != nil {
				return nil, fmt.Errorf("read body: %w", rerr)
			}
			return body, nil
		}
		retryable := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode >= 500
		if !retryable || attempt >= p.opt.MaxRetries {
			return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, snippet(body))
		}
		wait := p.backoff(attempt)
		if ra, ok := domain.RetryAfter(resp.Header.Get("Retry-After"), p.now(), maxRetryWait); ok {
			wait = ra
		}
		p.log.Debug("azure retail prices: retrying", "status", resp.StatusCode, "wait", wait)
		if err := p.sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

const maxRetryWait = 2 * time.Minute

func (p *Provider) backoff(attempt int) time.Duration {
	d := p.opt.RetryBase << min(attempt, 16)
	return min(d, maxRetryWait)
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}
