package aws

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
)

// gate wraps the fake endpoint and holds chosen requests until a condition
// is met, to prove what a fetch sends before what: a request the provider
// sends only after another one (its wait) would never be released. A held
// request gives up after gateWait and records why, so a wrong order fails
// the test instead of hanging it.
type gate struct {
	fake    *ec2test.Server
	regions int

	mu       sync.Mutex
	history  map[string]chan struct{} // closed at a region's first history request
	any      chan struct{}            // closed at the first history request
	all      chan struct{}            // closed when every region has asked for history
	failures []string
}

const gateWait = 10 * time.Second

func newGate(fake *ec2test.Server, regions []string) *gate {
	g := &gate{fake: fake, regions: len(regions), history: map[string]chan struct{}{}, any: make(chan struct{}), all: make(chan struct{})}
	for _, r := range regions {
		g.history[r] = make(chan struct{})
	}
	return g
}

func (g *gate) hold(ch chan struct{}, why string) {
	select {
	case <-ch:
	case <-time.After(gateWait):
		g.mu.Lock()
		g.failures = append(g.failures, why)
		g.mu.Unlock()
	}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	form, _ := url.ParseQuery(string(body))
	region := credentialRegion(r.Header.Get("Authorization"))
	switch action := form.Get("Action"); {
	case action == "DescribeSpotPriceHistory":
		g.mu.Lock()
		first := g.history[region]
		select {
		case <-first:
		default:
			close(first)
			select {
			case <-g.any:
			default:
				close(g.any)
			}
			seen := 0
			for _, ch := range g.history {
				select {
				case <-ch:
					seen++
				default:
				}
			}
			if seen == g.regions {
				close(g.all)
			}
		}
		g.mu.Unlock()
		g.hold(g.all, "not every region's history was asked at once")
	case action == "DescribeInstanceTypes":
		g.hold(g.history[region], "the history of "+region+" waited for DescribeInstanceTypes")
	case action == "GetSpotPlacementScores":
		g.hold(g.any, "the history waited for the placement scores")
	case r.Header.Get("X-Amz-Target") != "":
		g.hold(g.any, "the history waited for the Price List")
	}
	g.fake.ServeHTTP(w, r)
}

func credentialRegion(auth string) string {
	i := strings.Index(auth, "Credential=")
	if i < 0 {
		return ""
	}
	parts := strings.Split(auth[i+len("Credential="):], "/")
	if len(parts) < 3 {
		return ""
	}
	return parts[2]
}

// TestFetchAsksEveryRegionAtOnce: the sixteen
// regions' history requests are all in flight together (a fixed bound of
// four regions, as before, never fills the gate), and a region's history
// starts before DescribeInstanceTypes, the Price List and the placement
// scores have answered.
func TestFetchAsksEveryRegionAtOnce(t *testing.T) {
	regions := ec2test.GPURegions
	fake := ec2test.New(ec2test.Generate(1, regions, testNow.Add(-6*time.Hour), testNow, 40*time.Minute)...)
	g := newGate(fake, regions)
	srv := httptest.NewServer(g)
	defer srv.Close()
	f := &fixture{fake: fake, srv: srv}
	p := f.provider(t, nil)
	c := newCollector()
	req := backfill(6 * time.Hour)
	req.Query.Regions = regions
	if err := p.Fetch(context.Background(), req, c.sink); err != nil {
		t.Fatal(err)
	}
	for _, why := range g.failures {
		t.Error(why)
	}
	for _, r := range regions {
		if c.errs[r] != nil {
			t.Errorf("%s: %v", r, c.errs[r])
		}
	}
	for _, action := range []string{"DescribeInstanceTypes", "pricing:GetProducts", "GetSpotPlacementScores"} {
		if fake.Count(action, "") == 0 {
			t.Errorf("no %s call: the gate checked nothing", action)
		}
	}
	// AWS scores its top 10 zones only: the others say so.
	priced, scored, noted := 0, 0, 0
	zones := map[string]bool{}
	for _, pool := range c.pools {
		if pool.OnDemandUSDHour != nil {
			priced++
		}
		switch {
		case pool.PlacementScore != nil:
			scored++
			zones[pool.Zone] = true
		case pool.PlacementNote == NoteNotInTop10:
			noted++
		}
	}
	if want := len(regions) * 6 * 3; len(c.pools) != want || priced != want || scored+noted != want || len(zones) != 10 {
		t.Errorf("%d pools, %d with on-demand prices, %d with scores in %d zones, %d not in the top 10; want %d, scores in 10 zones",
			len(c.pools), priced, scored, len(zones), noted, want)
	}
}

// TestFetchUnreachableEndpointFailsFast: against
// a port nothing listens on, through the SDK's own HTTP client, each region
// is reported once, naming the endpoint and the cause, and Fetch returns
// well within 5 seconds (the deadline below is the bound: it is not
// reached) instead of retrying the refused connection for 40 seconds.
func TestFetchUnreachableEndpointFailsFast(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close()
	regions := ec2test.GPURegions
	p, err := New(context.Background(), Options{
		Config: &awssdk.Config{Region: "us-east-1", BaseEndpoint: awssdk.String(endpoint),
			Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")},
		Now: func() time.Time { return testNow }, DataDir: t.TempDir(), AdvisorURL: endpoint + "/spot-advisor-data.json",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := newCollector()
	req := backfill(24 * time.Hour)
	req.Query.Regions = regions
	err = p.Fetch(ctx, req, c.sink)
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "every region failed") {
		t.Fatalf("Fetch: %v, want every region failed before the 5s deadline", err)
	}
	perRegion := map[string]int{}
	for _, ev := range c.events {
		if ev.Err != nil {
			perRegion[ev.Region]++
		}
	}
	for _, r := range regions {
		e := c.errs[r]
		if e == nil || !strings.Contains(e.Error(), endpoint) || !strings.Contains(e.Error(), "connection refused") || strings.Contains(e.Error(), "\n") {
			t.Errorf("%s: %v, want one line naming %s and the refused connection", r, e, endpoint)
		}
		if r == "us-east-1" {
			t.Logf("us-east-1: %v", e)
		}
		if perRegion[r] != 1 {
			t.Errorf("%s reported %d times, want once", r, perRegion[r])
		}
	}
}

// An endpoint that cannot be resolved is reported at once too: each call
// dials once, where the retrying client dialled MaxAttempts times.
func TestFetchUnresolvableEndpointIsNotRetried(t *testing.T) {
	var dials atomic.Int32
	noHost := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: "ec2.us-east-1.amazonaws.com", IsNotFound: true}}
	}}}
	regions := []string{"us-east-1", "us-west-2", "eu-west-1"}
	p, err := New(context.Background(), Options{
		Config: &awssdk.Config{Region: "us-east-1", HTTPClient: noHost,
			Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")},
		Now: func() time.Time { return testNow }, DataDir: t.TempDir(), MaxAttempts: 4, MaxBackoff: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := newCollector()
	req := backfill(time.Hour)
	req.Query.Regions = regions
	if err := p.Fetch(context.Background(), req, c.sink); err == nil {
		t.Fatal("Fetch succeeded with no host")
	}
	for _, r := range regions {
		if e := c.errs[r]; e == nil || !strings.Contains(e.Error(), "no such host") {
			t.Errorf("%s: %v, want the unresolved host", r, e)
		}
	}
	// Per region DescribeInstanceTypes and one history page, and the
	// Price List's queries (at most one a region): each dialled once.
	if n := int(dials.Load()); n == 0 || n > 3*len(regions) {
		t.Errorf("%d dials for %d regions: calls were retried", n, len(regions))
	}
}

// A region whose endpoint takes requests and never answers fails after the
// attempt timeout, without retries, and the other regions' rows come.
func TestFetchHangingRegion(t *testing.T) {
	f := newFixture(t)
	f.fake.AddFault(ec2test.Fault{Region: "us-west-2", Hang: true})
	p := f.provider(t, func(o *Options) { o.AttemptTimeout = 2 * time.Second })
	c := newCollector()
	if err := p.Fetch(context.Background(), backfill(24*time.Hour), c.sink); err != nil {
		t.Fatalf("Fetch with one region hanging: %v", err)
	}
	if e := c.errs["us-west-2"]; e == nil || !strings.Contains(e.Error(), "no answer within 2s") {
		t.Errorf("us-west-2: %v, want no answer within the attempt timeout", e)
	}
	if n := f.fake.Count("DescribeSpotPriceHistory", "us-west-2"); n != 1 {
		t.Errorf("%d history calls to the hanging region, want 1 (a hang is not retried)", n)
	}
	east := 0
	for k := range c.pools {
		if k.Region == "us-east-1" {
			east++
		}
	}
	if east == 0 || c.errs["us-east-1"] != nil {
		t.Errorf("us-east-1: %d pools, err %v", east, c.errs["us-east-1"])
	}
}

// The fetch keeps to AWS's documented buckets: a region paged more than a
// hundred times in a row waits for its bucket to refill instead of being
// throttled by the fake, which enforces them.
func TestFetchStaysWithinDocumentedRateLimits(t *testing.T) {
	f := newFixture(t, "us-east-1")
	f.fake.MaxPage = 5
	f.fake.EnforceRateLimits = true
	p := f.provider(t, nil)
	c := newCollector()
	req := backfill(24 * time.Hour)
	req.Query.Regions = []string{"us-east-1"}
	if err := p.Fetch(context.Background(), req, c.sink); err != nil {
		t.Fatal(err)
	}
	if n := f.fake.Count("DescribeSpotPriceHistory", "us-east-1"); n <= 100 {
		t.Fatalf("%d history pages: the bucket of 100 was not reached, nothing was checked", n)
	}
	for _, call := range f.fake.Calls() {
		if call.Faulted {
			t.Errorf("%s in %s was throttled", call.Action, call.Region)
		}
	}
}

func TestTokenBucket(t *testing.T) {
	b := newTokenBucket(apiLimit{capacity: 10, refill: 5})
	for i := 0; i < 9; i++ { // 90% of 10
		if err := b.wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// The next token is 200ms away: a caller that cannot wait 1ms does
	// not get it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := b.wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("10th token at once: %v, want to wait", err)
	}
	if err := b.wait(context.Background()); err != nil {
		t.Errorf("refilled token: %v", err)
	}
}

func TestRetryPolicy(t *testing.T) {
	r := newRetryer(6, 20*time.Second)()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.OpError{Op: "connect", Err: syscall.ECONNREFUSED}}
	for name, tc := range map[string]struct {
		err   error
		retry bool
	}{
		"refused":       {&url.Error{Op: "Post", URL: "http://127.0.0.1:1/", Err: refused}, false},
		"no such host":  {&net.OpError{Op: "dial", Err: &net.DNSError{Name: "ec2.x", Err: "no such host", IsNotFound: true}}, false},
		"dns temporary": {&net.OpError{Op: "dial", Err: &net.DNSError{Name: "ec2.x", Err: "server misbehaving", IsTemporary: true}}, false},
		"throttled":     {&smithy.GenericAPIError{Code: "RequestLimitExceeded"}, true},
		"internal":      {&smithy.GenericAPIError{Code: "InternalError"}, true},
		"reset":         {errors.New("read tcp: connection reset by peer"), true},
		"bad request":   {&smithy.GenericAPIError{Code: "InvalidParameterValue"}, false},
	} {
		if got := r.IsErrorRetryable(tc.err); got != tc.retry {
			t.Errorf("%s: retryable %v, want %v", name, got, tc.retry)
		}
	}
	for attempt := 1; attempt <= 3; attempt++ {
		limit := 200 * time.Millisecond << (attempt - 1)
		for i := 0; i < 50; i++ {
			d, err := r.RetryDelay(attempt, &smithy.GenericAPIError{Code: "RequestLimitExceeded"})
			if err != nil || d < 0 || d >= limit {
				t.Fatalf("throttle retry %d waits %s, want under %s", attempt, d, limit)
			}
			if d, _ := r.RetryDelay(attempt, &smithy.GenericAPIError{Code: "InternalError"}); d >= limit/4 {
				t.Fatalf("server error retry %d waits %s, want under %s", attempt, d, limit/4)
			}
		}
	}
}

// The first history request of a cold region names the catalog's types
// before DescribeInstanceTypes answers; if the region's API refuses one
// (a type it does not know yet), the region asks again for its own types
// instead of failing.
func TestFetchCatalogTypeRefused(t *testing.T) {
	f := newFixture(t, "us-east-1")
	f.fake.AddFault(ec2test.Fault{Action: "DescribeSpotPriceHistory", Times: 1, Status: http.StatusBadRequest,
		Code: "InvalidParameterValue", Message: "Invalid value 'p9.mega' for InstanceType."})
	p := f.provider(t, nil)
	c := newCollector()
	req := backfill(6 * time.Hour)
	req.Query.Regions = []string{"us-east-1"}
	if err := p.Fetch(context.Background(), req, c.sink); err != nil {
		t.Fatal(err)
	}
	if err := c.errs["us-east-1"]; err != nil {
		t.Fatalf("us-east-1: %v", err)
	}
	if len(c.pools) != 6*3 {
		t.Errorf("%d pools, want the region's 6 GPU types in 3 zones", len(c.pools))
	}
	var retried url.Values
	for _, call := range f.fake.Calls() {
		if call.Action == "DescribeSpotPriceHistory" && !call.Faulted {
			retried = call.Params
			break
		}
	}
	if retried == nil || retried.Has("InstanceType.7") {
		t.Errorf("the second request names %v, want only the region's 6 types", retried)
	}
}
