package azure

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/azure/azuretest"
)

// pricesOnly makes a provider without an account against a Retail Prices
// handler, recording the waits between retries instead of sleeping.
func pricesOnly(t *testing.T, h http.Handler) (*Provider, *[]time.Duration) {
	t.Helper()
	t.Setenv("AZURE_SUBSCRIPTION_ID", "")
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	p := newTestProvider(t, Options{
		PricesURL: srv.URL + "/api/retail/prices", Regions: []string{"eastus"},
		HTTPClient: srv.Client(), Now: func() time.Time { return testNow }, RetryBase: time.Millisecond,
	})
	var mu sync.Mutex
	var waits []time.Duration
	p.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return nil
	}
	return p, &waits
}

func catalogNames() []string {
	var names []string
	for _, s := range catalogSizes() {
		names = append(names, s.Name)
	}
	return names
}

func loadPrices(t *testing.T) *azuretest.PricesServer {
	t.Helper()
	ps, err := azuretest.LoadPrices(retailItemsPath, 3)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestRetailPricesClassification(t *testing.T) {
	ps := loadPrices(t)
	p, _ := pricesOnly(t, ps)
	got, pages, err := p.fetchRetail(context.Background(), "eastus", catalogNames())
	if err != nil {
		t.Fatal(err)
	}
	if pages < 10 {
		t.Errorf("%d pages read, want every page followed", pages)
	}
	want := map[string][2]float64{ // on-demand, spot
		"standard_nc24ads_a100_v4": {3.673, 0.7346},
		"standard_nc96ads_a100_v4": {14.692, 2.9384},
		"standard_nd96isr_h100_v5": {98.32, 39.328},
		"standard_nc40ads_h100_v5": {6.98, 2.094},
		"standard_nv6ads_a10_v5":   {0.454, 0.0908},
		"standard_nv36ads_a10_v5":  {3.2, 0.64},
		"standard_nc4as_t4_v3":     {0.526, 0.0526},
	}
	if len(got) != len(want) {
		t.Errorf("%d sizes priced, want %d: %v", len(got), len(want), got)
	}
	for k, w := range want {
		rp, ok := got[k]
		if !ok || rp.OnDemand == nil || rp.Spot == nil {
			t.Errorf("%s: %+v, want both prices", k, rp)
			continue
		}
		if *rp.OnDemand != w[0] || *rp.Spot != w[1] {
			t.Errorf("%s: on-demand %v spot %v, want %v %v (Linux consumption meters only)", k, *rp.OnDemand, *rp.Spot, w[0], w[1])
		}
		if !rp.SpotAt.Equal(at("2025-07-15T00:00:00Z")) {
			t.Errorf("%s spot effective %v", k, rp.SpotAt)
		}
	}
	if _, ok := got["standard_d2s_v3"]; ok {
		t.Errorf("non-GPU Standard_D2s_v3 priced")
	}
}

func TestRetailItemFilter(t *testing.T) {
	want := map[string]bool{"standard_nc24ads_a100_v4": true}
	base := retailItem{CurrencyCode: "USD", RetailPrice: 1, ArmRegionName: "eastus", ProductName: "Virtual Machines NCads A100 v4 Series",
		SkuName: "NC24ads A100 v4 Spot", MeterName: "NC24ads A100 v4 Spot", ServiceName: "Virtual Machines", ArmSkuName: "Standard_NC24ads_A100_v4",
		Type: "Consumption", UnitOfMeasure: "1 Hour"}
	for _, tc := range []struct {
		name string
		edit func(*retailItem)
		spot bool
		od   bool
	}{
		{"linux spot", func(*retailItem) {}, true, false},
		{"linux on-demand", func(it *retailItem) { it.SkuName, it.MeterName = "NC24ads A100 v4", "NC24ads A100 v4" }, false, true},
		{"windows", func(it *retailItem) { it.ProductName += " Windows" }, false, false},
		{"low priority", func(it *retailItem) {
			it.SkuName, it.MeterName = "NC24ads A100 v4 Low Priority", "NC24ads A100 v4 Low Priority"
		}, false, false},
		{"non-GPU", func(it *retailItem) { it.ArmSkuName = "Standard_D2s_v3" }, false, false},
		{"other region", func(it *retailItem) { it.ArmRegionName = "westus" }, false, false},
		{"reservation", func(it *retailItem) { it.Type = "Reservation" }, false, false},
		{"dev/test", func(it *retailItem) { it.Type = "DevTestConsumption" }, false, false},
		{"other currency", func(it *retailItem) { it.CurrencyCode = "EUR" }, false, false},
		{"not hourly", func(it *retailItem) { it.UnitOfMeasure = "1/Month" }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := base
			tc.edit(&it)
			out := map[string]retailPrice{}
			addRetailItem(out, it, "eastus", want)
			rp := out["standard_nc24ads_a100_v4"]
			if (rp.Spot != nil) != tc.spot || (rp.OnDemand != nil) != tc.od {
				t.Errorf("spot %v on-demand %v, want spot %v on-demand %v", rp.Spot != nil, rp.OnDemand != nil, tc.spot, tc.od)
			}
		})
	}
}

func TestRetailPricesThrottling(t *testing.T) {
	ps := loadPrices(t)
	ps.FailNext(http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusRequestTimeout)
	p, waits := pricesOnly(t, ps)
	got, _, err := p.fetchRetail(context.Background(), "eastus", catalogNames())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 7 {
		t.Errorf("%d sizes after retries, want 7", len(got))
	}
	want := []time.Duration{3 * time.Second, 2 * time.Millisecond, 4 * time.Millisecond}
	if len(*waits) != len(want) || (*waits)[0] != want[0] || (*waits)[1] != want[1] || (*waits)[2] != want[2] {
		t.Errorf("waits = %v, want %v (Retry-After honoured, then backoff for 503 and 408)", *waits, want)
	}
}

func TestRetailPricesGiveUp(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "throttled", http.StatusTooManyRequests)
	})
	p, waits := pricesOnly(t, h)
	_, _, err := p.fetchRetail(context.Background(), "eastus", []string{"Standard_NC24ads_A100_v4"})
	if err == nil || !strings.Contains(err.Error(), "HTTP 429") || !strings.Contains(err.Error(), "retail prices in eastus (page 1)") {
		t.Errorf("err = %v", err)
	}
	if len(*waits) != 5 {
		t.Errorf("%d retries, want MaxRetries = 5", len(*waits))
	}
	// A client error is not retried.
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"Error":{"Code":"BadRequest","Message":"Invalid OData parameters"}}`, http.StatusBadRequest)
	})
	p, waits = pricesOnly(t, h)
	_, _, err = p.fetchRetail(context.Background(), "eastus", []string{"Standard_NC24ads_A100_v4"})
	if err == nil || !strings.Contains(err.Error(), "Invalid OData parameters") || len(*waits) != 0 {
		t.Errorf("400: err = %v, %d retries", err, len(*waits))
	}
}

func TestRetailPricesMalformed(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"truncated", `{"Items": [ {"armSkuName": "Standard_NC24ads_A100_v4"`, "not the API's JSON"},
		{"html", `<html>maintenance</html>`, "not the API's JSON"},
		{"no items", `{"BillingCurrency":"USD","Count":0}`, "no Items array"},
		{"items not array", `{"Items": {"a": 1}}`, "not the API's JSON"},
		{"price a string", `{"Items": [{"retailPrice": "cheap"}]}`, "not the API's JSON"},
		{"negative price", `{"Items": [{"retailPrice": -1, "armSkuName": "x"}]}`, "is not a price"},
		{"relative next", `{"Items": [], "NextPageLink": "/page2"}`, "want an absolute http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := pricesOnly(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte(tc.body))
			}))
			_, _, err := p.fetchRetail(context.Background(), "eastus", []string{"Standard_NC24ads_A100_v4"})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "retail prices in eastus") {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRetailPricesNextPageLoop(t *testing.T) {
	var srvURL string
	p, _ := pricesOnly(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"Items": [], "NextPageLink": "` + srvURL + `/api/retail/prices?$skip=1"}`))
	}))
	srvURL = strings.TrimSuffix(p.pricesU, "/api/retail/prices")
	_, _, err := p.fetchRetail(context.Background(), "eastus", []string{"Standard_NC24ads_A100_v4"})
	if err == nil || !strings.Contains(err.Error(), "NextPageLink repeats") {
		t.Errorf("err = %v", err)
	}
}

func TestPriceFilter(t *testing.T) {
	got := priceFilter("eastus", []string{"Standard_NC24ads_A100_v4", "Standard_NV6ads_A10_v5"})
	want := "serviceName eq 'Virtual Machines' and armRegionName eq 'eastus' and priceType eq 'Consumption' and " +
		"(armSkuName eq 'Standard_NC24ads_A100_v4' or armSkuName eq 'Standard_NV6ads_A10_v5')"
	if got != want {
		t.Errorf("filter =\n%s\nwant\n%s", got, want)
	}
	if got := priceFilter("x'y", nil); !strings.Contains(got, "'x''y'") {
		t.Errorf("quote not escaped: %s", got)
	}
}

func TestQueries(t *testing.T) {
	sizes := []string{"Standard_NC24ads_A100_v4", "Standard_ND96isr_H100_v5"}
	backfill := historyQuery([]string{"eastus", "westus3"}, sizes, testNow.Add(-24*time.Hour), false)
	want := `SpotResources
| where type =~ 'microsoft.compute/skuspotpricehistory/ostype/location'
| where location in~ ('eastus', 'westus3')
| where tostring(properties.osType) =~ 'linux'
| where tostring(sku.name) in~ ('Standard_NC24ads_A100_v4', 'Standard_ND96isr_H100_v5')
| project skuName = tostring(sku.name), location, spotPrices = properties.spotPrices
| order by location asc, skuName asc`
	if backfill != want {
		t.Errorf("back-fill query =\n%s\nwant\n%s", backfill, want)
	}
	live := historyQuery([]string{"eastus"}, sizes, testNow.Add(-time.Hour), true)
	want = `SpotResources
| where type =~ 'microsoft.compute/skuspotpricehistory/ostype/location'
| where location in~ ('eastus')
| where tostring(properties.osType) =~ 'linux'
| where tostring(sku.name) in~ ('Standard_NC24ads_A100_v4', 'Standard_ND96isr_H100_v5')
| mv-expand spotPrice = properties.spotPrices
| extend effectiveDate = todatetime(spotPrice.effectiveDate)
| where effectiveDate >= datetime(2026-11-29T11:00:00Z)
| project skuName = tostring(sku.name), location, effectiveDate, priceUSD = todouble(spotPrice.priceUSD)
| order by location asc, skuName asc, effectiveDate asc`
	if live != want {
		t.Errorf("live query =\n%s\nwant\n%s", live, want)
	}
	ev := evictionQuery([]string{"westeurope"}, sizes[:1])
	want = `SpotResources
| where type =~ 'microsoft.compute/skuspotevictionrate/location'
| where location in~ ('westeurope')
| where tostring(sku.name) in~ ('Standard_NC24ads_A100_v4')
| project skuName = tostring(sku.name), location, evictionRate = tostring(properties.evictionRate)
| order by location asc, skuName asc`
	if ev != want {
		t.Errorf("eviction query =\n%s\nwant\n%s", ev, want)
	}
	if got := kqlString(`a'b\c`); got != `'a\'b\\c'` {
		t.Errorf("kqlString = %s", got)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, opt := range []Options{
		{PricesURL: "prices.azure.com/api"},
		{Regions: []string{"us-east-1"}},
	} {
		if _, err := New(context.Background(), opt); err == nil {
			t.Errorf("New(%+v) accepted", opt)
		}
	}
}

func TestRegionsOfQuery(t *testing.T) {
	p := newTestProvider(t, Options{Regions: []string{"westeurope"}})
	if got := p.regions(queryRegions("us-east-1", "EastUS", "eastus")); len(got) != 1 || got[0] != "eastus" {
		t.Errorf("regions = %v, want [eastus]", got)
	}
	if got := p.regions(queryRegions()); len(got) != 1 || got[0] != "westeurope" {
		t.Errorf("regions = %v, want the configured [westeurope]", got)
	}
}

func FuzzParsePricesPage(f *testing.F) {
	f.Add([]byte(`{"Items":[],"NextPageLink":null,"Count":0}`))
	f.Add([]byte(`{"Items":[{"retailPrice":1.5,"armSkuName":"Standard_NC24ads_A100_v4","skuName":"NC24ads A100 v4 Spot"}],"NextPageLink":"https://prices.azure.com/api/retail/prices?$skip=100"}`))
	f.Add([]byte(`{"Items": [`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"Items":[{"retailPrice":-0.0}],"NextPageLink":"::"}`))
	if b, err := os.ReadFile(retailItemsPath); err == nil {
		f.Add([]byte(`{"Items":` + string(b) + `}`))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		page, err := parsePricesPage(data)
		if err != nil {
			if page.Items != nil || page.NextPageLink != "" {
				t.Errorf("error %v with a page", err)
			}
			return
		}
		if page.Items == nil {
			t.Errorf("accepted a page without Items: %q", data)
		}
		for _, it := range page.Items {
			if it.RetailPrice < 0 {
				t.Errorf("accepted negative price %v", it.RetailPrice)
			}
			out := map[string]retailPrice{}
			addRetailItem(out, it, it.ArmRegionName, map[string]bool{strings.ToLower(it.ArmSkuName): true})
		}
	})
}
