package aws

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
)

func backfill(window time.Duration) domain.FetchRequest {
	return domain.FetchRequest{Query: domain.Query{Regions: []string{"us-east-1", "us-west-2"}, Window: window},
		Since: testNow.Add(-window), Until: testNow, Backfill: true}
}

func gpuTypeNames(r *ec2test.Region) map[string]bool {
	out := map[string]bool{}
	for _, it := range r.InstanceTypes {
		if it.GPUCount > 0 {
			out[it.Name] = true
		}
	}
	return out
}

func TestFetchBackfillPagesThrottledRegions(t *testing.T) {
	f := newFixture(t)
	// The first call of each region is throttled, for every action.
	f.fake.AddFault(ec2test.Throttle("DescribeSpotPriceHistory", "", 1))
	f.fake.AddFault(ec2test.Throttle("DescribeInstanceTypes", "", 1))
	p := f.provider(t, nil)
	c := newCollector()
	req := backfill(24 * time.Hour)
	if err := p.Fetch(context.Background(), req, c.sink); err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if len(c.errs) != 0 {
		t.Fatalf("region errors: %v", c.errs)
	}
	for _, region := range []string{"us-east-1", "us-west-2"} {
		rd := f.fake.Region(region)
		gpu := gpuTypeNames(rd)
		pools := 0
		for k, pool := range c.pools {
			if k.Region != region {
				continue
			}
			pools++
			if !gpu[k.InstanceType] {
				t.Errorf("non-GPU type %s reported as a pool", k.InstanceType)
			}
			if pool.GPU.Model == "" || pool.GPU.Count <= 0 {
				t.Errorf("%s: no GPU spec: %+v", k, pool.GPU)
			}
			min, max, last, ok := expectedStats(rd, k.InstanceType, k.Zone, req.Since, req.Until)
			if !ok {
				t.Fatalf("%s: no data in the fake", k)
			}
			st := c.series[k].Stats(req.Since.Unix(), req.Until.Unix())
			if !st.OK || st.Min != min || st.Max != max || st.Last != last {
				t.Errorf("%s: stats min %v max %v last %v, want %v %v %v", k, st.Min, st.Max, st.Last, min, max, last)
			}
		}
		if want := len(gpu) * len(rd.Zones); pools != want {
			t.Errorf("%s: %d pools, want %d (GPU types × zones)", region, pools, want)
		}
		// 6 types × 3 zones × ~37 points at 50 a page: several pages,
		// plus the throttled first call.
		calls := f.fake.Count("DescribeSpotPriceHistory", region)
		if calls < 4 {
			t.Errorf("%s: %d DescribeSpotPriceHistory calls, want paging (≥4)", region, calls)
		}
		var first *ec2test.Call
		for _, call := range f.fake.Calls() {
			if call.Action == "DescribeSpotPriceHistory" && call.Region == region {
				first = &call
				break
			}
		}
		if first == nil || !first.Faulted {
			t.Errorf("%s: the first history call was not throttled", region)
		}
		prog := c.progress[region]
		if len(prog) < 3 || prog[len(prog)-1].Done != prog[len(prog)-1].Total {
			t.Errorf("%s: progress %v, want one per page ending done", region, prog)
		}
	}
	if len(c.notes) == 0 || c.notes[0] != "spot advisor: embedded 2025-06" {
		t.Errorf("notes %q, want the embedded advisor note first", c.notes)
	}
}

func TestFetchRequestShape(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, nil)
	req := backfill(6 * time.Hour)
	req.Query.Regions = []string{"us-east-1"}
	if err := p.Fetch(context.Background(), req, newCollector().sink); err != nil {
		t.Fatal(err)
	}
	hist := 0
	for _, call := range f.fake.Calls() {
		if call.Action != "DescribeSpotPriceHistory" {
			continue
		}
		hist++
		q := call.Params
		if !q.Has("InstanceType.1") {
			t.Errorf("history call %v names no instance type", q)
		}
		if q.Get("ProductDescription.1") != "Linux/UNIX" || q.Get("MaxResults") != "1000" {
			t.Errorf("params %v: want Linux/UNIX and MaxResults 1000", q)
		}
		if got, want := q.Get("StartTime"), req.Since.Format("2006-01-02T15:04:05Z"); got != want {
			t.Errorf("StartTime %s, want %s", got, want)
		}
		for i := 1; q.Has("InstanceType." + itoa(i)); i++ {
			if typ := q.Get("InstanceType." + itoa(i)); strings.HasPrefix(typ, "m7i") || strings.HasPrefix(typ, "c6i") || strings.HasPrefix(typ, "r6g") {
				t.Errorf("asked history of non-GPU type %s", typ)
			}
		}
	}
	if hist == 0 {
		t.Fatal("no DescribeSpotPriceHistory call to check")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestFetchLivePollAsksOnlySince(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, nil)
	c := newCollector()
	first := backfill(24 * time.Hour)
	if err := p.Fetch(context.Background(), first, c.sink); err != nil {
		t.Fatal(err)
	}
	before := len(f.fake.Calls())
	poll := domain.FetchRequest{Query: first.Query, Since: testNow, Until: testNow.Add(30 * time.Second)}
	c2 := newCollector()
	if err := p.Fetch(context.Background(), poll, c2.sink); err != nil {
		t.Fatal(err)
	}
	calls := f.fake.Calls()[before:]
	hist := 0
	for _, call := range calls {
		switch call.Action {
		case "DescribeSpotPriceHistory":
			hist++
			if got := call.Params.Get("StartTime"); got != "2026-06-10T12:00:00Z" {
				t.Errorf("live poll StartTime %s, want the previous Until", got)
			}
		case "DescribeInstanceTypes":
			t.Errorf("live poll described instance types again")
		}
	}
	if hist != 2 {
		t.Errorf("%d history calls in the live poll, want one page per region", hist)
	}
	// The poll repeats only the price in force at its start: one point a
	// pool, already known, and no pool is described twice.
	for _, ev := range c2.events {
		if len(ev.Pools) > 0 {
			t.Errorf("live poll re-described %d pools", len(ev.Pools))
		}
		if ev.Progress != nil {
			t.Errorf("live poll reported back-fill progress")
		}
	}
	if len(c2.series) == 0 {
		t.Fatal("live poll sent no price: the price in force at its start is missing")
	}
	for k, s := range c2.series {
		if s.Len() != 1 {
			t.Errorf("%s: %d points in a 30 s poll, want the one in force", k, s.Len())
		}
	}
}

func TestFetchFailingRegion(t *testing.T) {
	f := newFixture(t)
	f.fake.AddFault(ec2test.Fault{Action: "DescribeSpotPriceHistory", Region: "us-west-2", Status: http.StatusInternalServerError,
		Code: "InternalError", Message: "An internal error has occurred"})
	p := f.provider(t, nil)
	c := newCollector()
	if err := p.Fetch(context.Background(), backfill(24*time.Hour), c.sink); err != nil {
		t.Fatalf("Fetch with one region failing: %v", err)
	}
	err := c.errs["us-west-2"]
	if err == nil || !strings.Contains(err.Error(), "describe spot prices in us-west-2") || !strings.Contains(err.Error(), "InternalError") {
		t.Fatalf("us-west-2 error %v, want a wrapped InternalError", err)
	}
	if got := f.fake.Count("DescribeSpotPriceHistory", "us-west-2"); got != 4 {
		t.Errorf("%d attempts in the failing region, want MaxAttempts (4)", got)
	}
	east := 0
	for k := range c.pools {
		if k.Region == "us-east-1" {
			east++
		}
	}
	if east == 0 || c.errs["us-east-1"] != nil {
		t.Errorf("us-east-1: %d pools, err %v; want data", east, c.errs["us-east-1"])
	}
}

func TestFetchEveryRegionFailing(t *testing.T) {
	f := newFixture(t)
	f.fake.AddFault(ec2test.Fault{Action: "DescribeSpotPriceHistory", Status: http.StatusBadRequest, Code: "InvalidParameterValue", Message: "nope"})
	p := f.provider(t, nil)
	c := newCollector()
	err := p.Fetch(context.Background(), backfill(time.Hour), c.sink)
	if err == nil || !strings.Contains(err.Error(), "every region failed") {
		t.Fatalf("Fetch: %v, want every region failed", err)
	}
	if len(c.errs) != 2 {
		t.Errorf("region errors %v, want both", c.errs)
	}
}

func TestFetchMalformedXML(t *testing.T) {
	// The SDK reads a body with no XML element (JSON, nothing) as an
	// answer with no members: no data, and no error to show.
	emptyToSDK := map[string]bool{"not xml": true, "empty body": true}
	for name, body := range map[string]string{
		"truncated":  `<?xml version="1.0"?><DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><spotPriceHistorySet><item><spotPrice>1.0`,
		"not xml":    `{"this": "is json"}`,
		"bad price":  `<DescribeSpotPriceHistoryResponse><spotPriceHistorySet><item><instanceType>p5.48xlarge</instanceType><availabilityZone>us-east-1a</availabilityZone><spotPrice>cheap</spotPrice><timestamp>2026-06-10T11:00:00.000Z</timestamp><productDescription>Linux/UNIX</productDescription></item></spotPriceHistorySet></DescribeSpotPriceHistoryResponse>`,
		"bad time":   `<DescribeSpotPriceHistoryResponse><spotPriceHistorySet><item><timestamp>yesterday</timestamp></item></spotPriceHistorySet></DescribeSpotPriceHistoryResponse>`,
		"empty body": ``,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.fake.AddFault(ec2test.Fault{Action: "DescribeSpotPriceHistory", Region: "us-east-1", Body: body, Raw: true})
			p := f.provider(t, nil)
			c := newCollector()
			if err := p.Fetch(context.Background(), backfill(time.Hour), c.sink); err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			err := c.errs["us-east-1"]
			if emptyToSDK[name] {
				for k := range c.pools {
					if k.Region == "us-east-1" {
						t.Errorf("pool %s from an answer with no data", k)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "us-east-1") {
				t.Fatalf("us-east-1 error %v, want a clear error naming the region", err)
			}
			if c.errs["us-west-2"] != nil {
				t.Errorf("us-west-2 failed too: %v", c.errs["us-west-2"])
			}
		})
	}
}

func TestFetchOnDemandAdvisorAndScores(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, nil)
	c := newCollector()
	if err := p.Fetch(context.Background(), backfill(24*time.Hour), c.sink); err != nil {
		t.Fatal(err)
	}
	rd := f.fake.Region("us-east-1")
	zoneID := map[string]string{}
	for _, z := range rd.Zones {
		zoneID[z.Name] = z.ID
	}
	k := domain.PoolKey{Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge"}
	pool, ok := c.pools[k]
	if !ok {
		t.Fatalf("no pool %s", k)
	}
	if pool.OnDemandUSDHour == nil || math.Abs(*pool.OnDemandUSDHour-rd.OnDemand["p5.48xlarge"]) > 1e-9 {
		t.Errorf("on-demand %v, want %v", pool.OnDemandUSDHour, rd.OnDemand["p5.48xlarge"])
	}
	if pool.GPU != (domain.GPUSpec{Model: "H100", Count: 8, MemoryGiB: 80}) {
		t.Errorf("gpu %+v", pool.GPU)
	}
	// Every pool has the score of the set of types a fleet would use
	// (the fake's: its best member's in the zone).
	set := map[string]bool{}
	for key := range c.pools {
		set[key.InstanceType] = true
	}
	if len(set) < 3 {
		t.Fatalf("%d types: the fixture wants three or more to be scored", len(set))
	}
	for key, pl := range c.pools {
		ids := map[string]string{}
		for _, z := range f.fake.Region(key.Region).Zones {
			ids[z.Name] = z.ID
		}
		want := 0
		for typ := range set {
			want = max(want, f.fake.Region(key.Region).Scores[typ][ids[key.Zone]])
		}
		if pl.PlacementScore == nil || *pl.PlacementScore != want || pl.PlacementNote != "" {
			t.Errorf("%s: placement score %v (%q), want %d, the set's", key, pl.PlacementScore, pl.PlacementNote, want)
		}
	}
	// g4dn.xlarge is in the embedded June 2025 advisor for us-east-1.
	g4 := c.pools[domain.PoolKey{Provider: "aws", Region: "us-east-1", Zone: "us-east-1b", InstanceType: "g4dn.xlarge"}]
	if g4.Interruption == nil || !strings.Contains(g4.Interruption.Source, "embedded 2025-06") {
		t.Errorf("g4dn.xlarge interruption %+v, want the embedded advisor's", g4.Interruption)
	}
	if f.fake.Count("pricing:GetProducts", "us-east-1") == 0 {
		t.Errorf("the Price List API was not asked")
	}
	// A second provider on the same data dir reads the day-long caches.
	before := f.fake.Count("pricing:GetProducts", "")
	types := f.fake.Count("DescribeInstanceTypes", "")
	p2 := f.provider(t, func(o *Options) { o.DataDir = p.opt.DataDir })
	if err := p2.Fetch(context.Background(), backfill(time.Hour), newCollector().sink); err != nil {
		t.Fatal(err)
	}
	if got := f.fake.Count("pricing:GetProducts", ""); got != before {
		t.Errorf("%d more Price List calls with a warm cache", got-before)
	}
	if got := f.fake.Count("DescribeInstanceTypes", ""); got != types {
		t.Errorf("%d more DescribeInstanceTypes calls with a warm cache", got-types)
	}
}

func TestPlacementScoresDenied(t *testing.T) {
	f := newFixture(t)
	f.fake.DenyPlacementScores = true
	p := f.provider(t, nil)
	c := newCollector()
	if err := p.Fetch(context.Background(), backfill(time.Hour), c.sink); err != nil {
		t.Fatal(err)
	}
	if len(c.pools) == 0 {
		t.Fatal("no pools")
	}
	for k, pool := range c.pools {
		if pool.PlacementScore != nil {
			t.Errorf("%s: score %d with scores denied, want nil", k, *pool.PlacementScore)
		}
	}
	// The types are asked at once (one call each, the newest GPUs
	// first, at most maxScoreTypes); after the denial, never again.
	first := f.fake.Count("GetSpotPlacementScores", "")
	if first == 0 || first > maxScoreTypes {
		t.Errorf("%d score calls, want one per type (at most %d) then stop", first, maxScoreTypes)
	}
	if err := p.Fetch(context.Background(), backfill(time.Hour), c.sink); err != nil {
		t.Fatal(err)
	}
	if got := f.fake.Count("GetSpotPlacementScores", ""); got != first {
		t.Errorf("asked again after the denial: %d calls", got-first)
	}
}

func TestFetchGPUFilter(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, nil)
	c := newCollector()
	req := backfill(time.Hour)
	req.Query.GPUs = []string{"h100"}
	if err := p.Fetch(context.Background(), req, c.sink); err != nil {
		t.Fatal(err)
	}
	if len(c.pools) != 6 {
		t.Errorf("%d pools, want p5.48xlarge in 3 zones of 2 regions", len(c.pools))
	}
	for k := range c.pools {
		if k.InstanceType != "p5.48xlarge" {
			t.Errorf("pool %s does not match the H100 filter", k)
		}
	}
}

func TestNewWithoutCredentials(t *testing.T) {
	f := newFixture(t)
	cfg := f.awsConfig()
	cfg.Credentials = failingCreds{}
	_, err := New(context.Background(), Options{Config: cfg})
	if !errors.Is(err, ErrNoCredentials) || !strings.Contains(err.Error(), "aws sso login") {
		t.Fatalf("New: %v, want ErrNoCredentials with a hint", err)
	}
	cfg.Credentials = nil
	if _, err := New(context.Background(), Options{Config: cfg}); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("New with nil credentials: %v", err)
	}
}

func TestRejectedCredentials(t *testing.T) {
	f := newFixture(t)
	f.fake.AddFault(ec2test.Fault{Status: http.StatusUnauthorized, Code: "AuthFailure", Message: "AWS was not able to validate the provided access credentials"})
	p := f.provider(t, nil)
	c := newCollector()
	err := p.Fetch(context.Background(), backfill(time.Hour), c.sink)
	if !errors.Is(err, ErrNoCredentials) || !strings.Contains(err.Error(), "AuthFailure") {
		t.Fatalf("Fetch: %v, want ErrNoCredentials naming AuthFailure", err)
	}
}

func TestFetchSkipsOtherCloudsRegions(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, nil)
	c := newCollector()
	req := backfill(time.Hour)
	req.Query.Regions = []string{"eastus", "us-east-1"}
	if err := p.Fetch(context.Background(), req, c.sink); err != nil {
		t.Fatal(err)
	}
	if len(c.errs) != 0 {
		t.Errorf("errors %v", c.errs)
	}
	for k := range c.pools {
		if k.Region != "us-east-1" {
			t.Errorf("pool %s", k)
		}
	}
	req.Query.Regions = []string{"westeurope"}
	if err := p.Fetch(context.Background(), req, c.sink); err != nil {
		t.Errorf("Fetch with only Azure regions: %v", err)
	}
}

func TestFetchBatchesPagesButReportsEachPage(t *testing.T) {
	f := newFixture(t, "us-east-1")
	f.fake.MaxPage = 5
	p := f.provider(t, nil)
	c := newCollector()
	req := backfill(24 * time.Hour)
	req.Query.Regions = []string{"us-east-1"}
	if err := p.Fetch(context.Background(), req, c.sink); err != nil {
		t.Fatal(err)
	}
	pages := f.fake.Count("DescribeSpotPriceHistory", "us-east-1")
	withPoints := 0
	for _, ev := range c.events {
		if len(ev.Points) > 0 {
			withPoints++
		}
	}
	prog := c.progress["us-east-1"]
	if len(prog) != pages {
		t.Errorf("%d progress reports for %d pages", len(prog), pages)
	}
	for i, pr := range prog {
		if pr.Done != i+1 || (i < len(prog)-1 && pr.Total != pr.Done+1) {
			t.Errorf("progress %d: %+v", i, pr)
		}
	}
	if last := prog[len(prog)-1]; last.Done != last.Total {
		t.Errorf("last progress %+v not done", last)
	}
	// ~1,300 points at 5 a page: 260 pages in about 9 doubling batches.
	if pages < 100 || withPoints > 12 {
		t.Errorf("%d pages sent in %d events with points, want few doubling batches", pages, withPoints)
	}
	// Notes and descriptions may come first, in any order: the first points are one page.
	for _, ev := range c.events {
		if len(ev.Points) > 0 {
			if len(ev.Points) != 5 {
				t.Errorf("first event with points has %d, want the first page at once", len(ev.Points))
			}
			break
		}
	}
}

// TestEveryBackfillDescribesItsPools: a back-fill is the first fetch of a
// window for whoever asks it, who knows no pool yet. The provider sent
// only the descriptions that changed since its own earlier fetches, so a
// second back-fill on the same provider (the fleet estimate, after
// `fleet launch` asked which types the region sells; any estimate in a
// TUI whose hub had fetched) carried no on-demand price, and a fleet
// with an on-demand base had an unknown cost and was refused under the
// default budget caps. Every back-fill describes every pool it reports;
// a live poll still sends only what changed.
func TestEveryBackfillDescribesItsPools(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, nil)
	ctx := context.Background()
	first := newCollector()
	req := domain.FetchRequest{Query: domain.Query{Regions: []string{"us-east-1"}, GPUs: []string{"L4"}, Window: 6 * time.Hour},
		Since: testNow.Add(-6 * time.Hour), Until: testNow, Backfill: true}
	if err := p.Fetch(ctx, req, first.sink); err != nil {
		t.Fatal(err)
	}
	if len(first.pools) == 0 {
		t.Fatal("the first back-fill described no pool")
	}
	second := newCollector()
	req.Query.GPUs = nil
	if err := p.Fetch(ctx, req, second.sink); err != nil {
		t.Fatal(err)
	}
	for k := range second.series {
		pool, ok := second.pools[k]
		if !ok {
			t.Errorf("the second back-fill reports prices of %s without describing it", k)
			continue
		}
		if _, seen := first.pools[k]; seen && pool.OnDemandUSDHour == nil {
			t.Errorf("%s: described again without its on-demand price", k)
		}
	}
	live := newCollector()
	req.Backfill, req.Since, req.Until = false, testNow, testNow.Add(time.Minute)
	if err := p.Fetch(ctx, req, live.sink); err != nil {
		t.Fatal(err)
	}
	if len(live.pools) != 0 {
		t.Errorf("a live poll re-sent %d unchanged descriptions", len(live.pools))
	}
}
