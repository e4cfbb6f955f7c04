package azure

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// BenchmarkParsePricesPage parses a page of the recorded meters (91 items,
// about the size of the API's 100-item pages).
func BenchmarkParsePricesPage(b *testing.B) {
	page := []byte(`{"BillingCurrency":"USD","Items":` + string(readTestdata(b, filepath.Join("retailprices", "items.json"))) + `,"NextPageLink":null,"Count":91}`)
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parsePricesPage(page); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseHistoryRows trims a back-fill's rows: 50 sizes with 90
// daily points each.
func BenchmarkParseHistoryRows(b *testing.B) {
	var rows []jsonRaw
	for i := range 50 {
		row := `{"skuName":"Standard_Size` + string(rune('A'+i%26)) + string(rune('a'+i/26)) + `","location":"eastus","spotPrices":[`
		for d := range 90 {
			if d > 0 {
				row += ","
			}
			row += `{"effectiveDate":"` + testNow.Add(-time.Duration(d)*24*time.Hour).Format(time.RFC3339) + `","priceUSD":1.25}`
		}
		rows = append(rows, jsonRaw(row+"]}"))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseHistoryRows(rows, testNow.Add(-7*24*time.Hour), testNow, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFetchListPrices is a cold list-prices-only fetch of two regions
// from the loopback fake (every page followed).
func BenchmarkFetchListPrices(b *testing.B) {
	f := newFakeARM(b)
	opt := f.options()
	opt.SubscriptionID = ""
	b.Setenv("AZURE_SUBSCRIPTION_ID", "")
	b.ReportAllocs()
	for b.Loop() {
		p, err := New(context.Background(), opt)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Fetch(context.Background(), backfill(24*time.Hour, "eastus", "westeurope"), func(domain.Event) {}); err != nil {
			b.Fatal(err)
		}
	}
}

// copyRegion gives the fake a region answering as eastus does: its sizes,
// list prices and spot records under the new name.
func copyRegion(f *fakeARM, to string) {
	swap := func(b []byte) []byte { return []byte(strings.ReplaceAll(string(b), `"eastus"`, `"`+to+`"`)) }
	for _, raw := range f.skus["eastus"] {
		f.skus[to] = append(f.skus[to], swap(raw))
	}
	var items []jsonRaw
	for _, raw := range f.prices.Items {
		if strings.Contains(string(raw), `"armRegionName": "eastus"`) || strings.Contains(string(raw), `"armRegionName":"eastus"`) {
			items = append(items, swap(raw))
		}
	}
	f.prices.Items = append(f.prices.Items, items...)
	for _, recs := range []*[]spotRecord{&f.history, &f.eviction} {
		for _, r := range *recs {
			if r.Location == "eastus" {
				r.Location = to
				*recs = append(*recs, r)
			}
		}
	}
}

// BenchmarkFetchEveryRegion is a signed-in back-fill of ten regions that
// each answer as eastus does, every request to the loopback fake taking
// 50 ms: every region at once (the default) against the earlier bound of
// four regions at a time.
func BenchmarkFetchEveryRegion(b *testing.B) {
	for _, bound := range []int{4, 0} {
		b.Run(fmt.Sprintf("concurrency=%d", bound), func(b *testing.B) {
			f := newFakeARM(b)
			for _, r := range manyRegions {
				if r != "eastus" && r != "westeurope" {
					copyRegion(f, r)
				}
			}
			f.latency = 50 * time.Millisecond
			f.graphPageSize = graphPageSize // one page a query, as real answers of this size are
			opt := f.options()
			opt.Concurrency = bound
			for b.Loop() {
				p, err := New(context.Background(), opt)
				if err != nil {
					b.Fatal(err)
				}
				var rec recorder
				if err := p.Fetch(context.Background(), backfill(24*time.Hour, manyRegions...), rec.sink); err != nil {
					b.Fatal(err)
				}
				for _, r := range manyRegions {
					if err := rec.regionErr(r); err != nil {
						b.Fatalf("%s: %v", r, err)
					}
				}
			}
		})
	}
}
