package aws

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/series"
)

// testNow is the fixed clock of the tests.
var testNow = time.Date(2026, 6, 10, 12, 0, 0, 0, time.UTC)

// fixture is a fake EC2 endpoint with generated data for two regions.
type fixture struct {
	fake *ec2test.Server
	srv  *httptest.Server
}

func newFixture(t testing.TB, regions ...string) *fixture {
	t.Helper()
	if len(regions) == 0 {
		regions = []string{"us-east-1", "us-west-2"}
	}
	data := ec2test.Generate(1, regions, testNow.Add(-48*time.Hour), testNow, 40*time.Minute)
	fake := ec2test.New(data...)
	fake.Now = func() time.Time { return testNow }
	fake.MaxPage = 50
	srv := fake.Start()
	t.Cleanup(srv.Close)
	return &fixture{fake: fake, srv: srv}
}

// awsConfig points the real SDK at the fake with static keys.
func (f *fixture) awsConfig() *awssdk.Config {
	return &awssdk.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		BaseEndpoint: awssdk.String(f.srv.URL),
		HTTPClient:   f.srv.Client(),
	}
}

func (f *fixture) provider(t testing.TB, mod func(*Options)) *Provider {
	t.Helper()
	opt := Options{
		Config:      f.awsConfig(),
		Now:         func() time.Time { return testNow },
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxAttempts: 4,
		MaxBackoff:  time.Millisecond,
		DataDir:     t.TempDir(),
	}
	if mod != nil {
		mod(&opt)
	}
	p, err := New(context.Background(), opt)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// collector folds events the way the hub does: pools by key, points merged
// into a Series per pool.
type collector struct {
	mu       sync.Mutex
	events   []domain.Event
	pools    map[domain.PoolKey]domain.Pool
	series   map[domain.PoolKey]series.Series
	errs     map[string]error
	progress map[string][]domain.Progress
	notes    []string
}

func newCollector() *collector {
	return &collector{pools: map[domain.PoolKey]domain.Pool{}, series: map[domain.PoolKey]series.Series{},
		errs: map[string]error{}, progress: map[string][]domain.Progress{}}
}

func (c *collector) sink(ev domain.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
	for _, p := range ev.Pools {
		c.pools[p.Key()] = p
	}
	byPool := map[domain.PoolKey][]domain.PricePoint{}
	for _, pt := range ev.Points {
		byPool[pt.Pool] = append(byPool[pt.Pool], pt)
	}
	for k, pts := range byPool {
		at := make([]int64, len(pts))
		usd := make([]float64, len(pts))
		for i, pt := range pts {
			at[i], usd[i] = pt.At.Unix(), pt.USDHour
		}
		c.series[k] = c.series[k].Merge(at, usd)
	}
	if ev.Err != nil {
		c.errs[ev.Region] = ev.Err
	}
	if ev.Progress != nil {
		c.progress[ev.Region] = append(c.progress[ev.Region], *ev.Progress)
	}
	if ev.Note != "" {
		c.notes = append(c.notes, ev.Note)
	}
}

// expectedStats computes, straight from the fake's data, the figures a
// pool should show over [from, to]: the price in force at from counts.
func expectedStats(r *ec2test.Region, typ, zone string, from, to time.Time) (min, max, last float64, ok bool) {
	var pts []ec2test.SpotPrice
	for _, p := range r.Prices {
		if p.InstanceType == typ && p.Zone == zone && !p.At.After(to) {
			pts = append(pts, p)
		}
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].At.Before(pts[j].At) })
	start := -1
	for i, p := range pts {
		if !p.At.After(from) {
			start = i
		}
	}
	if start < 0 {
		start = 0
	}
	if len(pts) == 0 {
		return 0, 0, 0, false
	}
	min, max = pts[start].USD, pts[start].USD
	for _, p := range pts[start:] {
		if p.USD < min {
			min = p.USD
		}
		if p.USD > max {
			max = p.USD
		}
	}
	return min, max, pts[len(pts)-1].USD, true
}
