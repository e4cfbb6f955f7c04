package gcp

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/gcp/gcptest"
	"github.com/gpumarket/gpumarket/domain"
)

// newTest starts the fake and a provider signed in to it with a
// service-account key file whose token_uri is the fake's.
func newTest(t *testing.T, fo gcptest.Options) (*Provider, *gcptest.Server) {
	t.Helper()
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("HOME", t.TempDir())
	f := gcptest.New(fo)
	t.Cleanup(f.Close)
	key, err := f.KeyFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, b, m := f.Endpoints()
	p, err := New(context.Background(), Options{CredentialsFile: key, Endpoints: Endpoints{Compute: c, Billing: b, Monitoring: m},
		RetryBase: time.Millisecond, PollEvery: time.Millisecond, Now: fo.Now})
	if err != nil {
		t.Fatal(err)
	}
	return p, f
}

func collect(t *testing.T, p *Provider, req domain.FetchRequest) (map[string]domain.Pool, map[string]float64) {
	t.Helper()
	var mu sync.Mutex
	pools, spot := map[string]domain.Pool{}, map[string]float64{}
	err := p.Fetch(context.Background(), req, func(ev domain.Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Err != nil {
			t.Errorf("event error: %v", ev.Err)
		}
		for _, pl := range ev.Pools {
			pools[pl.Key().String()] = pl
		}
		for pt := range ev.PricePoints() {
			spot[pt.Pool.String()] = pt.USDHour
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return pools, spot
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-3 }

// Every machine is priced as Google bills it, vCPUs + memory + GPUs, from
// the SKUs of its family and region, whatever the place name: Tokyo's A3
// Mega, "Japan"'s A2, the Americas' A3 and N1 + T4 (Spot from "Spot
// Preemptible", not the legacy "Preemptible" SKU). Commitments, sole
// tenancy and workstation GPUs are not read; every list was paged.
func TestFetchPricesEachMachineFromItsParts(t *testing.T) {
	p, f := newTest(t, gcptest.Options{})
	now := time.Now().UTC().Truncate(time.Second)
	pools, spot := collect(t, p, domain.FetchRequest{Since: now.Add(-time.Hour), Until: now, Backfill: true})
	key := func(zone, typ string) string {
		return domain.PoolKey{Provider: Name, Region: regionOf(zone), Zone: zone, InstanceType: typ}.String()
	}
	cases := []struct {
		zone, typ string
		od, spot  float64
	}{
		{"us-central1-a", "a3-highgpu-8g", 208*0.02291161 + 1872*0.00307045 + 8*10.18, 208*0.0075 + 1872*0.001 + 8*2.6},
		{"asia-northeast1-b", "a3-megagpu-8g", 208*0.0294 + 1872*0.0039 + 8*13.1, 208*0.0098 + 1872*0.0013 + 8*3.9},
		{"asia-northeast1-a", "a2-highgpu-1g", 12*0.0406 + 85*0.00545 + 3.77, 12*0.0122 + 85*0.00164 + 1.41},
		{"us-central1-a", "a2-highgpu-1g", 12*0.031611 + 85*0.004237 + 2.933908, 12*0.00952 + 85*0.00128 + 1.1},
		{"us-central1-a", "n1-standard-8+1xt4", 8*0.031611 + 30*0.004237 + 0.35, 8*0.00698 + 30*0.000936 + 0.14},
		{"us-central1-b", "n1-standard-4+1xt4", 4*0.031611 + 15*0.004237 + 0.35, 4*0.00698 + 15*0.000936 + 0.14},
		{"us-central1-c", "g2-standard-8", 8*0.024988 + 32*0.002927 + 0.56, 8*0.0099 + 32*0.00116 + 0.2},
	}
	for _, c := range cases {
		pl, ok := pools[key(c.zone, c.typ)]
		if !ok {
			t.Errorf("%s %s: no pool", c.zone, c.typ)
			continue
		}
		if pl.OnDemandUSDHour == nil || !near(*pl.OnDemandUSDHour, c.od) {
			t.Errorf("%s %s on-demand %v, want %.4f", c.zone, c.typ, pl.OnDemandUSDHour, c.od)
		}
		if got := spot[key(c.zone, c.typ)]; !near(got, c.spot) {
			t.Errorf("%s %s spot %.4f, want %.4f", c.zone, c.typ, got, c.spot)
		}
		if pl.Cloud != domain.CloudGCP || pl.Interruption == nil || pl.Interruption.Bucket != "" || !strings.Contains(pl.Interruption.Source, "30 s") {
			t.Errorf("%s %s: cloud %q, interruption %+v; want gcp, no bucket, the 30 s notice said", c.zone, c.typ, pl.Cloud, pl.Interruption)
		}
	}
	for k := range pools {
		if strings.Contains(k, "n2-") || strings.Contains(k, "e2-") || strings.Contains(k, "v100") && strings.Contains(k, "us-central1-b") {
			t.Errorf("pool %s: not a GPU machine the zone sells", k)
		}
	}
	// V100 in us-central1-a: n1-standard-8 there takes one card.
	if _, ok := pools[key("us-central1-a", "n1-standard-8+1xv100")]; !ok {
		t.Error("no n1-standard-8+1xv100 pool in us-central1-a")
	}
	for _, call := range []string{"machineTypes.aggregatedList", "acceleratorTypes.aggregatedList", "services.skus.list"} {
		if f.Calls[call] < 2 {
			t.Errorf("%s called %d times: the list was not paged", call, f.Calls[call])
		}
	}
}

// A live poll sends only prices that changed; the catalog is not asked
// again within its TTL.
func TestLivePollSendsOnlyChanges(t *testing.T) {
	p, f := newTest(t, gcptest.Options{})
	now := time.Now().UTC()
	collect(t, p, domain.FetchRequest{Since: now.Add(-time.Hour), Until: now, Backfill: true})
	skus := f.Calls["services.skus.list"]
	_, spot := collect(t, p, domain.FetchRequest{Since: now, Until: now.Add(30 * time.Second)})
	if len(spot) != 0 {
		t.Errorf("a live poll with no change sent %d prices", len(spot))
	}
	if f.Calls["services.skus.list"] != skus {
		t.Error("the catalog was read again within its TTL")
	}
}

// 429 and 503 answers are waited out with backoff; a list still answers.
func TestThrottlingIsWaitedOut(t *testing.T) {
	p, f := newTest(t, gcptest.Options{})
	f.Throttle(429, 503, 429, 503)
	now := time.Now().UTC()
	pools, _ := collect(t, p, domain.FetchRequest{Since: now.Add(-time.Hour), Until: now, Backfill: true})
	if len(pools) == 0 {
		t.Fatal("no pools after throttling")
	}
}

// Throttling that does not end is said, after the bounded retries.
func TestEndlessThrottlingFails(t *testing.T) {
	p, f := newTest(t, gcptest.Options{})
	f.Throttle(429, 429, 429, 429, 429, 429, 429)
	err := p.Fetch(context.Background(), domain.FetchRequest{Until: time.Now(), Backfill: true}, func(domain.Event) {})
	if err == nil || !strings.Contains(err.Error(), "429") || strings.Contains(err.Error(), "\n") || Declined(err) {
		t.Fatalf("err %v, want one line naming the 429, not a definite no", err)
	}
}

// No credentials at all, or a key the token endpoint refuses (signed with
// another key), is one line matching ErrNoCredentials.
func TestCredentialsMissingOrRefused(t *testing.T) {
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GCE_METADATA_HOST", "")
	if !adcMayFind() {
		// Nothing to find: refused without asking a metadata server.
		if _, err := New(context.Background(), Options{}); !errors.Is(err, ErrNoCredentials) || strings.Contains(err.Error(), "\n") {
			t.Errorf("no credentials: %v", err)
		}
	}
	t.Setenv("GCE_METADATA_HOST", "127.0.0.1:9") // a metadata server where nothing listens
	_, err := New(context.Background(), Options{CredentialTimeout: 5 * time.Second})
	if !errors.Is(err, ErrNoCredentials) || strings.Contains(err.Error(), "\n") {
		t.Errorf("no credentials: %v", err)
	}

	other := gcptest.New(gcptest.Options{})
	defer other.Close()
	f := gcptest.New(gcptest.Options{})
	defer f.Close()
	key, err := other.KeyFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The key is other's; its token_uri is other's too: point it at f.
	data := strings.ReplaceAll(readFile(t, key), other.URL, f.URL)
	writeFile(t, key, data)
	_, err = New(context.Background(), Options{CredentialsFile: key})
	if !errors.Is(err, ErrNoCredentials) || !strings.Contains(err.Error(), "Signature") {
		t.Errorf("a key the token endpoint refuses: %v", err)
	}
}
