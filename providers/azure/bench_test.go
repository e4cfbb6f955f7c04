package azure

import (
	"context"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/providers"
)

// BenchmarkParsePricesPage parses a page of the recorded meters (91 items,
// about the size of the API's 100-item pages).
func BenchmarkParsePricesPage(b *testing.B) {
	page := []byte(`{"BillingCurrency":"USD","Items":` + string(readTestdata(b, "retail-items.json")) + `,"NextPageLink":null,"Count":91}`)
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
		if err := p.Fetch(context.Background(), backfill(24*time.Hour, "eastus", "westeurope"), func(providers.Event) {}); err != nil {
			b.Fatal(err)
		}
	}
}
