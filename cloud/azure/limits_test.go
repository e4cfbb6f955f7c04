package azure

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/gpumarket/gpumarket/domain"
)

// fakeClock is a clock that sleeping moves.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return nil
}

// TestBucketPacesAndPauses: the token bucket lets its size through at
// once, then one a 1/rate; a server's pause holds it whatever is left.
func TestBucketPacesAndPauses(t *testing.T) {
	clk := &fakeClock{now: testNow}
	b := newBucket(15, 3) // Resource Graph: 15 per 5 s
	b.clock, b.sleep = clk.Now, clk.Sleep
	for i := range 15 {
		if err := b.wait(context.Background()); err != nil || len(clk.slept) != 0 {
			t.Fatalf("query %d waited %v (%v)", i, clk.slept, err)
		}
	}
	if err := b.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	var waited time.Duration
	for _, d := range clk.slept {
		waited += d
	}
	if waited < 330*time.Millisecond || waited > 340*time.Millisecond {
		t.Errorf("the 16th query waited %v, want a third of a second (3 a second)", waited)
	}
	clk.slept = nil
	b.pause(4 * time.Second)
	if err := b.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	waited = 0
	for _, d := range clk.slept {
		waited += d
	}
	if waited < 4*time.Second {
		t.Errorf("after a 4 s pause the next query waited %v", waited)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.sleep = domain.Sleep
	b.pause(time.Minute)
	if err := b.wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled wait = %v", err)
	}
}

// cannedTransport answers every request with one response.
type cannedTransport struct {
	status int
	header http.Header
}

func (c cannedTransport) Do(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: c.status, Header: c.header, Body: io.NopCloser(strings.NewReader(`{}`)), Request: r}, nil
}

// TestServerQuotaWordsHoldTheBuckets: Resource Graph's "0 left, resets
// after 00:00:04" and ARM's 429 "Retry-After: 7" hold every later call of
// their bucket for that long, not only the retry of the call that heard
// it.
func TestServerQuotaWordsHoldTheBuckets(t *testing.T) {
	for _, tc := range []struct {
		name, method, url string
		status            int
		header            http.Header
		bucket            func(*limits) *bucket
		want              time.Duration
	}{
		{"resource graph quota", http.MethodPost, "https://management.azure.com/providers/Microsoft.ResourceGraph/resources?api-version=2024-04-01", 200,
			http.Header{"X-Ms-User-Quota-Remaining": {"0"}, "X-Ms-User-Quota-Resets-After": {"00:00:04"}}, func(l *limits) *bucket { return l.graph }, 4 * time.Second},
		{"arm read throttled", http.MethodGet, "https://management.azure.com/subscriptions/s/providers/Microsoft.Compute/skus", 429,
			http.Header{"Retry-After": {"7"}}, func(l *limits) *bucket { return l.reads }, 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimits(1)
			pl := runtime.NewPipeline("test", "v0", runtime.PipelineOptions{PerRetry: []policy.Policy{throttlePolicy{l}}},
				&policy.ClientOptions{Transport: cannedTransport{tc.status, tc.header}, Retry: policy.RetryOptions{MaxRetries: -1}})
			req, err := runtime.NewRequest(context.Background(), tc.method, tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pl.Do(req); err != nil {
				t.Fatal(err)
			}
			if d := tc.bucket(l).take(); d < tc.want-time.Second || d > tc.want {
				t.Errorf("next call waits %v, want about %v", d, tc.want)
			}
			if d := l.writes.take(); d != 0 {
				t.Errorf("another bucket waits %v", d)
			}
		})
	}
	if d, ok := parseHMS("01:02:03"); !ok || d != time.Hour+2*time.Minute+3*time.Second {
		t.Errorf("parseHMS = %v, %v", d, ok)
	}
	for _, bad := range []string{"", "5", "a:b:c", "00:-1:00"} {
		if _, ok := parseHMS(bad); ok {
			t.Errorf("parseHMS(%q) accepted", bad)
		}
	}
}

// TestThrottledAnswersAreWaitedOut: ARM's 429 with Retry-After, and
// Resource Graph's quota (a few queries a second here), slow a fetch
// down but do not fail it.
func TestThrottledAnswersAreWaitedOut(t *testing.T) {
	f := newFakeARM(t)
	f.throttleNext = 2
	f.graphQuota, f.graphWindow = 6, time.Second
	opt := f.options()
	opt.ClientOptions.Retry.MaxRetries = 4
	p := newTestProvider(t, opt)
	var rec recorder
	if err := p.Fetch(context.Background(), backfill(24*time.Hour, "eastus", "westeurope"), rec.sink); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"eastus", "westeurope"} {
		if err := rec.regionErr(r); err != nil {
			t.Errorf("%s: %v", r, err)
		}
	}
	if n := f.count(func() int { return f.throttled }); n != 2 {
		t.Errorf("%d ARM requests throttled, want the 2 faked", n)
	}
	if n := f.count(func() int { return f.graphPages }); n <= 6 {
		t.Errorf("%d Resource Graph pages: the quota of 6 was never reached, the test proves nothing", n)
	}
	if len(rec.pools()) != 27 {
		t.Errorf("%d pools, want 27", len(rec.pools()))
	}
}

// countingTransport counts requests by host.
type countingTransport struct {
	mu    sync.Mutex
	n     int
	inner http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.inner.RoundTrip(r)
}

func (c *countingTransport) Do(r *http.Request) (*http.Response, error) { return c.RoundTrip(r) }

func (c *countingTransport) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestConnectionRefusedReportedAtOnce: an endpoint that refuses
// connections is reported on the first attempt, per region, with the
// endpoint and the cause: not retried with backoff (azcore's default is 3
// retries over about 9 s; the Retail Prices client's 5 over 31 s), so the
// user hears within the 5 s the issue asks. Throttling and 5xx are still
// retried (TestThrottledAnswersAreWaitedOut, TestRetailPricesThrottling).
func TestConnectionRefusedReportedAtOnce(t *testing.T) {
	addr := closedPort(t)
	arms := &countingTransport{inner: http.DefaultTransport}
	prices := &countingTransport{inner: http.DefaultTransport}
	p := newTestProvider(t, Options{
		SubscriptionID: testSub, ResourceGroup: "rg-gpu", Credential: fakeCredential{},
		PricesURL: "http://" + addr + "/api/retail/prices", Regions: []string{"eastus", "westeurope"},
		HTTPClient: &http.Client{Transport: prices}, Now: func() time.Time { return testNow },
		ClientOptions: &arm.ClientOptions{ClientOptions: policy.ClientOptions{
			Cloud: cloud.Configuration{Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
				cloud.ResourceManager: {Endpoint: "https://" + addr, Audience: "https://management.azure.com"},
			}},
			Transport: arms, // azcore's default retry options
		}, DisableRPRegistration: true},
	})
	var mu sync.Mutex
	var waits []time.Duration
	p.sleep = func(_ context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d)
		return nil
	}
	var rec recorder
	err := p.Fetch(context.Background(), backfill(time.Hour, "eastus", "westeurope"), rec.sink)
	if err == nil || !strings.Contains(err.Error(), "every region failed") {
		t.Fatalf("fetch = %v, want every region failed", err)
	}
	for _, r := range []string{"eastus", "westeurope"} {
		e := rec.regionErr(r)
		if e == nil || !strings.Contains(e.Error(), addr) || !strings.Contains(e.Error(), "connection refused") {
			t.Errorf("%s: %v, want the endpoint and the cause", r, e)
		}
	}
	if n := arms.count(); n != 2 {
		t.Errorf("%d ARM attempts for 2 regions, want 2: a refused connection was retried", n)
	}
	// Without an account the prices are the only source: the same.
	t.Setenv("AZURE_SUBSCRIPTION_ID", "")
	q := newTestProvider(t, Options{PricesURL: "http://" + addr + "/api/retail/prices", Regions: []string{"eastus"},
		HTTPClient: &http.Client{Transport: prices}, Now: func() time.Time { return testNow }})
	q.sleep = p.sleep
	if err := q.Fetch(context.Background(), backfill(time.Hour, "eastus"), (&recorder{}).sink); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("prices only: %v", err)
	}
	if n := prices.count(); n != 1 || len(waits) != 0 {
		t.Errorf("%d Retail Prices attempts and waits %v, want 1 and none", n, waits)
	}
	if !shouldRetry(&http.Response{StatusCode: 503}, nil) || !shouldRetry(&http.Response{StatusCode: 429}, nil) || shouldRetry(&http.Response{StatusCode: 404}, nil) ||
		!shouldRetry(nil, errors.New("connection reset by peer")) {
		t.Error("shouldRetry gave up on a server fault or retried a 404")
	}
}

// barrier holds requests until n have arrived, so that a test passes only
// when they are in flight together; it gives up after a while, recording
// that they were not.
type barrier struct {
	mu     sync.Mutex
	n      int
	seen   map[string]bool
	open   chan struct{}
	failed atomic.Bool
}

func newBarrier(n int) *barrier {
	return &barrier{n: n, seen: map[string]bool{}, open: make(chan struct{})}
}

func (b *barrier) arrive(key string) {
	b.mu.Lock()
	if !b.seen[key] {
		b.seen[key] = true
		if len(b.seen) == b.n {
			close(b.open)
		}
	}
	b.mu.Unlock()
	select {
	case <-b.open:
	case <-time.After(5 * time.Second):
		b.failed.Store(true)
	}
}

var manyRegions = []string{"eastus", "eastus2", "southcentralus", "westus2", "westus3", "westeurope", "northeurope", "swedencentral", "japaneast", "australiaeast"}

// TestEveryRegionAtOnce: the regions' first calls are all in
// flight at once (no region waits for another), and within a region the
// Resource Graph queries (eviction rates, history) run beside each other.
func TestEveryRegionAtOnce(t *testing.T) {
	f := newFakeARM(t)
	skus := newBarrier(len(manyRegions))
	graph := newBarrier(2)
	f.hook = func(r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/skus") && r.URL.Query().Get("page") == "":
			skus.arrive(r.URL.Query().Get("$filter"))
		case strings.HasSuffix(r.URL.Path, "/resources"):
			var body []byte
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			if strings.Contains(string(body), "'eastus'") && !strings.Contains(string(body), "skipToken") {
				graph.arrive(map[bool]string{true: "history", false: "eviction"}[strings.Contains(string(body), typePriceHistory)])
			}
		}
	}
	p := newTestProvider(t, f.options())
	var rec recorder
	if err := p.Fetch(context.Background(), backfill(24*time.Hour, manyRegions...), rec.sink); err != nil {
		t.Fatal(err)
	}
	if skus.failed.Load() {
		t.Errorf("the %d regions' first calls were not in flight together", len(manyRegions))
	}
	if graph.failed.Load() {
		t.Errorf("eastus's history and eviction queries ran one after the other")
	}
	if err := rec.regionErr("eastus"); err != nil {
		t.Errorf("eastus: %v", err)
	}
	// The offerings search too.
	f2 := newFakeARM(t)
	offers := newBarrier(len(manyRegions))
	f2.hook = func(r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/skus") && r.URL.Query().Get("page") == "" {
			offers.arrive(r.URL.Query().Get("$filter"))
		}
	}
	q := newTestProvider(t, f2.options())
	offs, err := q.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "A100", Instances: 1, Duration: time.Hour, Regions: manyRegions})
	if err != nil || len(offs) == 0 {
		t.Fatalf("offerings: %d, %v", len(offs), err)
	}
	if offers.failed.Load() {
		t.Errorf("the offerings search asked the regions one after another")
	}
}

// TestResourceGraphQueriesGroupRegions: Resource Graph's quota counts
// queries (15 per 5 s), so the regions of a fetch share one history query
// and one eviction-rate query (Azure's "grouping queries" advice) instead
// of two each, and every region still gets its own rows.
func TestResourceGraphQueriesGroupRegions(t *testing.T) {
	f := newFakeARM(t)
	regions := []string{"eastus", "eastus2", "southcentralus", "westus2", "westeurope"}
	for _, r := range regions {
		if r != "eastus" && r != "westeurope" {
			copyRegion(f, r)
		}
	}
	f.graphPageSize = graphPageSize
	p := newTestProvider(t, f.options())
	var rec recorder
	if err := p.Fetch(context.Background(), backfill(24*time.Hour, regions...), rec.sink); err != nil {
		t.Fatal(err)
	}
	queries := f.count(func() int { return len(f.graphQueries) })
	if queries != 2 {
		t.Errorf("%d Resource Graph queries for %d regions, want 2 (history and eviction rates, grouped)", queries, len(regions))
	}
	for _, r := range regions {
		if err := rec.regionErr(r); err != nil {
			t.Errorf("%s: %v", r, err)
		}
		pool := rec.pools()[key(r, "1", "Standard_NC24ads_A100_v4")]
		want := "<5%"
		if r == "westeurope" {
			want = "5-10%"
		}
		if pool.Interruption == nil || pool.Interruption.Bucket != want {
			t.Errorf("%s A100 interruption = %+v, want %s", r, pool.Interruption, want)
		}
		if pts := rec.points(key(r, "1", "Standard_NC24ads_A100_v4")); r != "westeurope" && (len(pts) != 3 || pts[2].USDHour != 0.71) {
			t.Errorf("%s A100 history = %+v, want eastus's three points", r, pts)
		}
	}
}
