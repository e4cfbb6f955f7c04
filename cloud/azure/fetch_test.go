package azure

import (
	"context"
	"errors"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// recorder collects a fetch's events.
type recorder struct {
	mu     sync.Mutex
	events []domain.Event
}

func (r *recorder) sink(ev domain.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) pools() map[domain.PoolKey]domain.Pool {
	out := map[domain.PoolKey]domain.Pool{}
	for _, ev := range r.events {
		for _, p := range ev.Pools {
			out[p.Key()] = p
		}
	}
	return out
}

func (r *recorder) points(k domain.PoolKey) []domain.PricePoint {
	var out []domain.PricePoint
	for _, ev := range r.events {
		for _, pt := range ev.Points {
			if pt.Pool == k {
				out = append(out, pt)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

func (r *recorder) regionErr(region string) error {
	var errs []error
	for _, ev := range r.events {
		if ev.Region == region && ev.Err != nil {
			errs = append(errs, ev.Err)
		}
	}
	return errors.Join(errs...)
}

// soft reports whether the region's errors all lost it no history, so the hub asks nothing again.
func (r *recorder) soft(region string) bool {
	for _, ev := range r.events {
		if ev.Region == region && ev.Err != nil && !ev.Soft {
			return false
		}
	}
	return true
}

func (r *recorder) notes() string {
	var s []string
	for _, ev := range r.events {
		if ev.Note != "" {
			s = append(s, ev.Note)
		}
	}
	return strings.Join(s, "\n")
}

func key(region, zone, size string) domain.PoolKey {
	return domain.PoolKey{Provider: "azure", Region: region, Zone: zone, InstanceType: size}
}

func newTestProvider(t *testing.T, opt Options) *Provider {
	t.Helper()
	p, err := New(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func backfill(window time.Duration, regions ...string) domain.FetchRequest {
	return domain.FetchRequest{
		Query: domain.Query{Regions: regions, Window: window},
		Since: testNow.Add(-window), Until: testNow, Backfill: true,
	}
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestFetchSignedIn(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	var rec recorder
	if err := p.Fetch(context.Background(), backfill(24*time.Hour, "eastus", "westeurope", "us-east-1"), rec.sink); err != nil {
		t.Fatal(err)
	}
	if err := rec.regionErr("eastus"); err != nil {
		t.Fatalf("eastus: %v", err)
	}
	if !strings.Contains(rec.notes(), "signed in to subscription "+testSub) {
		t.Errorf("notes = %q", rec.notes())
	}
	pools := rec.pools()

	a100 := pools[key("eastus", "2", "Standard_NC24ads_A100_v4")]
	if a100.Cloud != domain.CloudAzure || a100.GPU.Model != "A100" || a100.GPU.Count != 1 || a100.Restricted {
		t.Errorf("A100 pool = %+v", a100)
	}
	if a100.OnDemandUSDHour == nil || *a100.OnDemandUSDHour != 3.673 {
		t.Errorf("A100 on-demand = %v, want 3.673 (the Linux consumption meter)", a100.OnDemandUSDHour)
	}
	if a100.Interruption == nil || a100.Interruption.Bucket != "<5%" || a100.Interruption.Source != "azure resource graph" {
		t.Errorf("A100 interruption = %+v, want <5%% from azure resource graph", a100.Interruption)
	}
	for _, z := range []string{"1", "2", "3"} {
		if _, ok := pools[key("eastus", z, "Standard_NC24ads_A100_v4")]; !ok {
			t.Errorf("no A100 pool in eastus zone %s", z)
		}
	}
	// Restrictions are shown, marked.
	if p := pools[key("eastus", "3", "Standard_NC96ads_A100_v4")]; !p.Restricted {
		t.Errorf("NC96ads zone 3 restricted = false, want true (zone restriction)")
	}
	if p := pools[key("eastus", "1", "Standard_NC96ads_A100_v4")]; p.Restricted || p.InstanceType == "" {
		t.Errorf("NC96ads zone 1 = %+v, want an unrestricted pool", p)
	}
	for _, z := range []string{"1", "2"} {
		if p := pools[key("eastus", z, "Standard_ND96isr_H100_v5")]; !p.Restricted || p.Interruption == nil || p.Interruption.Bucket != ">20%" {
			t.Errorf("H100 eastus zone %s = %+v, want restricted (location restriction), >20%%", z, p)
		}
	}
	// The partial A10 reports 1 GPU; the catalog says 1/6, and its share
	// of the memory (4 GiB, not a whole A10's 24).
	if a10 := pools[key("eastus", "1", "Standard_NV6ads_A10_v5")]; math.Abs(a10.GPU.Count-1.0/6) > 1e-9 || a10.GPU.MemoryGiB != 4 {
		t.Errorf("NV6ads A10 GPU = %+v, want 1/6 of an A10 with its 4 GiB", a10.GPU)
	}
	if _, ok := pools[key("eastus", "", "Standard_NV36ads_A10_v5")]; !ok {
		t.Errorf("a size without zones should make one pool with zone \"\"")
	}
	for k := range pools {
		if k.InstanceType == "Standard_D2s_v3" || k.InstanceType == "Premium_LRS" {
			t.Errorf("non-GPU %s made a pool", k)
		}
		if k.Region != "eastus" && k.Region != "westeurope" {
			t.Errorf("pool in %s: only Azure regions of the query are fetched", k.Region)
		}
	}
	if n := len(pools); n != 17+10 {
		t.Errorf("%d pools, want 27 (17 eastus, 10 westeurope)", n)
	}

	// History: the point before the window counts, older ones and the
	// Windows history do not; every zone gets the region's price.
	for _, z := range []string{"1", "2", "3"} {
		pts := rec.points(key("eastus", z, "Standard_NC24ads_A100_v4"))
		want := []domain.PricePoint{
			{At: at("2026-11-27T00:00:00Z"), USDHour: 0.75},
			{At: at("2026-11-28T18:00:00Z"), USDHour: 0.7346},
			{At: at("2026-11-29T08:00:00Z"), USDHour: 0.71},
		}
		if len(pts) != len(want) {
			t.Fatalf("zone %s: %d points %+v, want %d", z, len(pts), pts, len(want))
		}
		for i := range want {
			if !pts[i].At.Equal(want[i].At) || pts[i].USDHour != want[i].USDHour {
				t.Errorf("zone %s point %d = %v %v, want %v %v", z, i, pts[i].At, pts[i].USDHour, want[i].At, want[i].USDHour)
			}
		}
	}
	// A size without history gets the list price's spot meter.
	h100 := rec.points(key("eastus", "1", "Standard_NC40ads_H100_v5"))
	if len(h100) != 1 || h100[0].USDHour != 2.094 || !h100[0].At.Equal(at("2025-07-15T00:00:00Z")) {
		t.Errorf("NC40ads H100 points = %+v, want the list spot price 2.094 from 2025-07-15", h100)
	}

	// Paging was followed everywhere.
	if f.skuPages != 4 {
		t.Errorf("ResourceSKUs pages = %d, want 4 (2 regions × 2 pages)", f.skuPages)
	}
	if f.graphPages <= len(f.graphQueries) {
		t.Errorf("resource graph: %d pages for %d queries: $skipToken not followed", f.graphPages, len(f.graphQueries))
	}
	if f.prices.Pages() < 10 {
		t.Errorf("retail prices pages = %d: NextPageLink not followed", f.prices.Pages())
	}
	for _, q := range f.prices.Filters() {
		if !strings.Contains(q, "armSkuName eq 'Standard_NC24ads_A100_v4'") || !strings.Contains(q, "priceType eq 'Consumption'") {
			t.Errorf("retail $filter = %q, want the GPU sizes and priceType named", q)
		}
	}
	// Progress was reported during the back-fill.
	progress := 0
	for _, ev := range rec.events {
		if ev.Progress != nil && ev.Region == "eastus" {
			progress++
		}
	}
	if progress < 2 {
		t.Errorf("%d progress events for eastus, want several", progress)
	}
}

func TestFetchGPUFilter(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	var rec recorder
	req := backfill(24*time.Hour, "eastus")
	req.Query.GPUs = []string{"h100"}
	if err := p.Fetch(context.Background(), req, rec.sink); err != nil {
		t.Fatal(err)
	}
	if len(rec.pools()) == 0 {
		t.Fatal("no H100 pools: the filter left nothing to check")
	}
	for k, pool := range rec.pools() {
		if pool.GPU.Model != "H100" {
			t.Errorf("pool %s is %s, want only H100", k, pool.GPU.Model)
		}
	}
	for _, q := range f.graphQueries {
		if strings.Contains(q, "A100") {
			t.Errorf("query asks for A100 sizes though the filter is H100:\n%s", q)
		}
	}
}

func TestFetchLivePollAsksOnlyWhatChanged(t *testing.T) {
	f := newFakeARM(t)
	opt := f.options()
	opt.HistoryLookback = time.Hour
	p := newTestProvider(t, opt)
	if err := p.Fetch(context.Background(), backfill(24*time.Hour, "eastus"), (&recorder{}).sink); err != nil {
		t.Fatal(err)
	}
	before := len(f.graphQueries)
	var rec recorder
	live := domain.FetchRequest{Query: domain.Query{Regions: []string{"eastus"}}, Since: at("2026-11-29T09:00:00Z"), Until: testNow}
	if err := p.Fetch(context.Background(), live, rec.sink); err != nil {
		t.Fatal(err)
	}
	if err := rec.regionErr("eastus"); err != nil {
		t.Fatalf("eastus: %v", err)
	}
	var histQ []string
	for _, q := range f.graphQueries[before:] {
		if strings.Contains(q, typePriceHistory) {
			histQ = append(histQ, q)
		}
		if strings.Contains(q, typeEvictionRate) {
			t.Errorf("live poll re-asked the eviction rates within ListTTL")
		}
	}
	if len(histQ) != 1 || !strings.Contains(histQ[0], "mv-expand") || !strings.Contains(histQ[0], "datetime(2026-11-29T08:00:00Z)") {
		t.Fatalf("live history queries = %q, want one expanding from Since − lookback", histQ)
	}
	pts := rec.points(key("eastus", "1", "Standard_NC24ads_A100_v4"))
	if len(pts) != 1 || pts[0].USDHour != 0.71 {
		t.Errorf("live points = %+v, want only the 08:00 point", pts)
	}
	// A pool that has history gets no list-price point mixed in.
	for _, pt := range rec.points(key("eastus", "1", "Standard_NV6ads_A10_v5")) {
		t.Errorf("NV6ads got %v on a live poll with no new history", pt)
	}
	if pools := rec.pools(); len(pools) != 17 {
		t.Errorf("live poll described %d pools, want all 17 again", len(pools))
	}
}

func TestFetchFailingRegion(t *testing.T) {
	f := newFakeARM(t)
	f.failSKURegion = "westeurope"
	p := newTestProvider(t, f.options())
	var rec recorder
	if err := p.Fetch(context.Background(), backfill(24*time.Hour, "eastus", "westeurope"), rec.sink); err != nil {
		t.Fatalf("one failing region failed the fetch: %v", err)
	}
	err := rec.regionErr("westeurope")
	if err == nil || !strings.Contains(err.Error(), "list VM sizes in westeurope") || !strings.Contains(err.Error(), "500") {
		t.Errorf("westeurope error = %v, want the SKU listing's 500", err)
	}
	if err := rec.regionErr("eastus"); err != nil {
		t.Errorf("eastus error = %v", err)
	}
	n := 0
	for k := range rec.pools() {
		if k.Region == "westeurope" {
			t.Errorf("pool %s from the failed region", k)
		}
		n++
	}
	if n != 17 {
		t.Errorf("%d eastus pools, want 17", n)
	}

	// When every region fails, the fetch fails.
	f.failSKURegion = "eastus"
	p = newTestProvider(t, f.options())
	err = p.Fetch(context.Background(), backfill(24*time.Hour, "eastus"), (&recorder{}).sink)
	if err == nil || !strings.Contains(err.Error(), "every region failed") {
		t.Errorf("all regions failing: err = %v", err)
	}
}

func TestFetchGraphFailureKeepsPools(t *testing.T) {
	f := newFakeARM(t)
	f.failGraph = true
	p := newTestProvider(t, f.options())
	var rec recorder
	if err := p.Fetch(context.Background(), backfill(24*time.Hour, "eastus"), rec.sink); err != nil {
		t.Fatal(err)
	}
	err := rec.regionErr("eastus")
	if err == nil || !strings.Contains(err.Error(), "spot price history in eastus") || !strings.Contains(err.Error(), "eviction rates in eastus") {
		t.Errorf("region error = %v, want history and eviction failures named", err)
	}
	pools := rec.pools()
	if len(pools) != 17 {
		t.Errorf("%d pools, want 17 despite Resource Graph failing", len(pools))
	}
	// Without history, the list price's spot meter gives the price.
	pts := rec.points(key("eastus", "1", "Standard_NC24ads_A100_v4"))
	if len(pts) != 1 || pts[0].USDHour != 0.7346 {
		t.Errorf("points = %+v, want the list spot price 0.7346 (not the non-primary 9.99, not Windows, not Low Priority)", pts)
	}
	// The error event comes after the pools, so the hub keeps it.
	last := -1
	for i, ev := range rec.events {
		if ev.Region == "eastus" && ev.Err != nil {
			last = i
		}
		if ev.Region == "eastus" && len(ev.Pools) > 0 && last >= 0 {
			t.Errorf("pools sent after the region's error: the hub would clear the error")
		}
	}
}

// countingCredential records whether anything asked it for a token.
type countingCredential struct {
	fakeCredential
	mu    sync.Mutex
	calls int
}

func (c *countingCredential) GetToken(ctx context.Context, o policyTokenOptions) (tokenType, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.fakeCredential.GetToken(ctx, o)
}

func TestFetchWithoutAccountListsPrices(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sub    string
		cred   *countingCredential
		reason string
		calls  int
	}{
		{"no subscription", "", &countingCredential{}, "no subscription configured", 0},
		{"not signed in", testSub, &countingCredential{fakeCredential: fakeCredential{err: errors.New("DefaultAzureCredential: failed to acquire a token.\nAttempted credentials: …")}}, "not signed in to Azure: DefaultAzureCredential: failed to acquire a token.", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AZURE_SUBSCRIPTION_ID", "")
			f := newFakeARM(t)
			opt := f.options()
			opt.SubscriptionID = tc.sub
			opt.Credential = tc.cred
			p := newTestProvider(t, opt)
			var rec recorder
			if err := p.Fetch(context.Background(), backfill(24*time.Hour, "eastus", "westeurope"), rec.sink); err != nil {
				t.Fatal(err)
			}
			if tc.cred.calls != tc.calls {
				t.Errorf("credential asked %d times, want %d", tc.cred.calls, tc.calls)
			}
			note := rec.notes()
			if !strings.Contains(note, "list prices only: spot history, eviction rates and actions need a signed-in Azure account") || !strings.Contains(note, tc.reason) {
				t.Errorf("note = %q, want it to say list prices only and why (%s)", note, tc.reason)
			}
			if len(f.graphQueries) != 0 || f.skuPages != 0 {
				t.Errorf("ARM was called without an account")
			}
			pools := rec.pools()
			// Every catalog size with a Linux meter in the region, zone "".
			want := map[domain.PoolKey]float64{
				key("eastus", "", "Standard_NC24ads_A100_v4"):     0.7346,
				key("eastus", "", "Standard_NC96ads_A100_v4"):     2.9384,
				key("eastus", "", "Standard_ND96isr_H100_v5"):     39.328,
				key("eastus", "", "Standard_NC40ads_H100_v5"):     2.094,
				key("eastus", "", "Standard_NV6ads_A10_v5"):       0.0908,
				key("eastus", "", "Standard_NV36ads_A10_v5"):      0.64,
				key("eastus", "", "Standard_NC4as_T4_v3"):         0.0526,
				key("westeurope", "", "Standard_NC24ads_A100_v4"): 0.9696,
				key("westeurope", "", "Standard_NC96ads_A100_v4"): 3.8784,
				key("westeurope", "", "Standard_ND96isr_H100_v5"): 43.26,
				key("westeurope", "", "Standard_NV6ads_A10_v5"):   0.11,
				key("westeurope", "", "Standard_NV36ads_A10_v5"):  0.77,
				key("westeurope", "", "Standard_NC4as_T4_v3"):     0.0696,
			}
			if len(pools) != len(want) {
				t.Errorf("%d pools, want %d", len(pools), len(want))
			}
			for k, spot := range want {
				pool, ok := pools[k]
				if !ok {
					t.Errorf("no pool %s", k)
					continue
				}
				if pool.OnDemandUSDHour == nil || pool.Interruption != nil || pool.Restricted {
					t.Errorf("%s = %+v: want an on-demand price, no interruption data", k, pool)
				}
				pts := rec.points(k)
				if len(pts) != 1 || pts[0].USDHour != spot {
					t.Errorf("%s points = %+v, want the list spot price %v", k, pts, spot)
				}
			}
		})
	}
}

func TestFetchNoAzureRegionInQuery(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	var rec recorder
	if err := p.Fetch(context.Background(), backfill(time.Hour, "us-east-1"), rec.sink); err != nil {
		t.Fatal(err)
	}
	if len(rec.events) != 0 || f.prices.Pages() != 0 {
		t.Errorf("a query naming only AWS regions fetched Azure: %d events", len(rec.events))
	}
}

func TestEvictionRateMapping(t *testing.T) {
	f := newFakeARM(t)
	// One size per Azure label, and one label Azure does not use.
	labels := map[string]string{
		"Standard_NC24ads_A100_v4": "0-5", "Standard_NC96ads_A100_v4": "5-10", "Standard_NV6ads_A10_v5": "10-15",
		"Standard_NC40ads_H100_v5": "15-20", "Standard_ND96isr_H100_v5": "20+", "Standard_NC4as_T4_v3": "often",
	}
	want := map[string]string{
		"Standard_NC24ads_A100_v4": "<5%", "Standard_NC96ads_A100_v4": "5-10%", "Standard_NV6ads_A10_v5": "10-15%",
		"Standard_NC40ads_H100_v5": "15-20%", "Standard_ND96isr_H100_v5": ">20%",
	}
	for i := range f.eviction {
		if l, ok := labels[skuCase(f.eviction[i].SKU.Name)]; ok && f.eviction[i].Location == "eastus" {
			f.eviction[i].Properties.EvictionRate = l
		}
	}
	p := newTestProvider(t, f.options())
	var rec recorder
	if err := p.Fetch(context.Background(), backfill(time.Hour, "eastus"), rec.sink); err != nil {
		t.Fatal(err)
	}
	for k, pool := range rec.pools() {
		w, ok := want[k.InstanceType]
		got := "(none)"
		if pool.Interruption != nil {
			got = pool.Interruption.Bucket
		}
		if !ok {
			w = "(none)"
		}
		if got != w {
			t.Errorf("%s interruption = %s, want %s", k, got, w)
		}
	}
	if err := rec.regionErr("eastus"); err == nil || !strings.Contains(err.Error(), `unknown label "often"`) {
		t.Errorf("unknown label: err = %v", err)
	}
	if !rec.soft("eastus") {
		t.Error("an unknown eviction label is not Soft: the hub would ask the region's history again at every poll")
	}
}

// skuCase maps the lower-case names of SpotResources back to the catalog's.
func skuCase(lower string) string {
	if e, ok := domain.LookupGPU(lower); ok {
		return e.InstanceType
	}
	return lower
}

func TestMalformedGraphRows(t *testing.T) {
	for _, tc := range []struct {
		name, row, want string
	}{
		{"not an object", `[1,2]`, "row 0"},
		{"no sku", `{"location":"eastus","spotPrices":[]}`, "no skuName"},
		{"bad date", `{"skuName":"x","spotPrices":[{"effectiveDate":"yesterday","priceUSD":1}]}`, `effectiveDate "yesterday"`},
		{"no price", `{"skuName":"x","spotPrices":[{"effectiveDate":"2026-11-01T00:00:00Z"}]}`, "priceUSD missing"},
		{"negative", `{"skuName":"x","spotPrices":[{"effectiveDate":"2026-11-01T00:00:00Z","priceUSD":-1}]}`, "not a price"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseHistoryRows([]jsonRaw{jsonRaw(tc.row)}, testNow.Add(-time.Hour), testNow, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func queryRegions(regions ...string) domain.Query { return domain.Query{Regions: regions} }
