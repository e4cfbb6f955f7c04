package aws

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/testutil"
)

// TestHistoryFromDocumentedAnswer reads an answer in the shape of AWS's
// documented example: newest first, the prices in force at StartTime with
// their own older timestamps, another product, no zone ids, an empty
// nextToken. The other product is skipped; without zone ids no placement
// score can be matched to a zone, so none is shown rather than a wrong one.
func TestHistoryFromDocumentedAnswer(t *testing.T) {
	f := newFixture(t, "us-east-1")
	f.fake.AddFault(ec2test.Fault{Action: "DescribeSpotPriceHistory", Body: recorded(t, "describe-spot-price-history-gpu.xml"), Raw: true})
	p := f.provider(t, nil)
	c := newCollector()
	since := time.Date(2026, 6, 10, 7, 8, 9, 0, time.UTC)
	req := domain.FetchRequest{Query: domain.Query{Regions: []string{"us-east-1"}}, Since: since, Until: since.Add(time.Hour + time.Minute + time.Second), Backfill: true}
	if err := p.Fetch(context.Background(), req, c.sink); err != nil {
		t.Fatal(err)
	}
	if err := c.errs["us-east-1"]; err != nil {
		t.Fatal(err)
	}
	p5 := domain.PoolKey{Provider: Name, Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge"}
	g6e := domain.PoolKey{Provider: Name, Region: "us-east-1", Zone: "us-east-1b", InstanceType: "g6e.xlarge"}
	if len(c.pools) != 2 {
		t.Errorf("pools %v, want p5.48xlarge in us-east-1a and g6e.xlarge in us-east-1b", c.pools)
	}
	for k, want := range map[domain.PoolKey][]float64{p5: {37.95, 38.512}, g6e: {0.7601, 0.7713}} {
		s := c.series[k]
		if s.Len() != len(want) {
			t.Errorf("%s: %d points, want %v (the SUSE price 0.8713 is another product)", k, s.Len(), want)
			continue
		}
		for i, v := range want {
			if _, got := s.Point(i); got != v {
				t.Errorf("%s: point %d is %v, want %v", k, i, got, v)
			}
		}
		if pool := c.pools[k]; pool.PlacementScore != nil {
			t.Errorf("%s: score %d without a zone id to match it by", k, *pool.PlacementScore)
		}
	}
	// The price in force at StartTime, from the day before, counts.
	if st := c.series[g6e].Stats(since.Unix(), req.Until.Unix()); !st.OK || st.Min != 0.7601 {
		t.Errorf("g6e window stats %+v, want the price in force at the start (0.7601) as the minimum", st)
	}
}

// TestHistoryPagesWithRecordedNextToken follows a recorded nextToken to
// the second page and stops at its empty one.
func TestHistoryPagesWithRecordedNextToken(t *testing.T) {
	f := newFixture(t, "us-east-1")
	f.fake.AddFault(ec2test.Fault{Action: "DescribeSpotPriceHistory", Times: 1, Body: recorded(t, "describe-spot-price-history-page1.xml"), Raw: true})
	f.fake.AddFault(ec2test.Fault{Action: "DescribeSpotPriceHistory", Times: 1, Body: recorded(t, "describe-spot-price-history-page2.xml"), Raw: true})
	p := f.provider(t, nil)
	c := newCollector()
	req := backfill(12 * time.Hour)
	req.Query.Regions = []string{"us-east-1"}
	req.Query.GPUs = []string{"H100"}
	if err := p.Fetch(context.Background(), req, c.sink); err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, call := range f.fake.Calls() {
		if call.Action == "DescribeSpotPriceHistory" {
			tokens = append(tokens, call.Params.Get("NextToken"))
		}
	}
	if len(tokens) != 2 || tokens[0] != "" || tokens[1] != "AAEAAZqTeGZ0ZXh0Mwx8RQ7gYxHpV0o1wJ5yXeBYWI2c2FtcGxlLXRva2Vu" {
		t.Errorf("history calls with tokens %q, want the first page then the recorded token, then stop", tokens)
	}
	points := 0
	for _, s := range c.series {
		points += s.Len()
	}
	if points != 4 {
		t.Errorf("%d points over the two pages, want 4", points)
	}
	prog := c.progress["us-east-1"]
	if len(prog) != 2 || prog[1].Done != 2 || prog[1].Total != 2 {
		t.Errorf("progress %v, want one report a page ending 2 of 2", prog)
	}
}

// TestOnDemandFromRecordedPriceList reads on-demand prices of two regions
// from one recorded Price List answer, as one query with ANY_OF filters
// asks them, and caches a type the list lacks as having none.
func TestOnDemandFromRecordedPriceList(t *testing.T) {
	f := newFixture(t)
	f.fake.AddFault(ec2test.Fault{Action: "pricing:GetProducts", Body: recorded(t, "get-products-gpu.json")})
	p := f.provider(t, nil)
	c := newCollector()
	req := backfill(6 * time.Hour)
	req.Query.GPUs = []string{"H100", "L40S"}
	if err := p.Fetch(context.Background(), req, c.sink); err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, call := range f.fake.Calls() {
		if call.Action != "pricing:GetProducts" {
			continue
		}
		calls++
		if got := call.Params.Get("Filter.regionCode"); got != "ANY_OF:us-east-1,us-west-2" {
			t.Errorf("regionCode filter %q, want both regions in one ANY_OF", got)
		}
		if got := call.Params.Get("Filter.instanceType"); !strings.HasPrefix(got, "ANY_OF:") || !strings.Contains(got, "p5.48xlarge") || !strings.Contains(got, "g6e.xlarge") {
			t.Errorf("instanceType filter %q, want the wanted types in one ANY_OF", got)
		}
		if got := call.Params.Get("Filter.marketoption"); got != "TERM_MATCH:OnDemand" {
			t.Errorf("marketoption filter %q: a capacity block's product would be read", got)
		}
	}
	if calls != 1 {
		t.Errorf("%d Price List calls for 2 regions, want 1", calls)
	}
	checked := 0
	for k, pool := range c.pools {
		var want *float64
		switch {
		case k.InstanceType == "p5.48xlarge":
			want = domain.Float(98.32)
		case k.InstanceType == "g6e.xlarge" && k.Region == "us-east-1":
			want = domain.Float(1.861)
		}
		got := pool.OnDemandUSDHour
		if (got == nil) != (want == nil) || (got != nil && math.Abs(*got-*want) > 1e-9) {
			t.Errorf("%s: on-demand %v, want %v", k, deref(got), deref(want))
		}
		checked++
	}
	if checked != 12 {
		t.Errorf("%d pools checked, want p5.48xlarge and g6e.xlarge in 3 zones of 2 regions", checked)
	}
	if v, ok := p.cachedOnDemand("us-west-2", "g6e.xlarge"); !ok || v != nil {
		t.Errorf("g6e.xlarge in us-west-2 cached as %v (%v), want known to have no price", deref(v), ok)
	}
}

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

// A Price List that refuses the query leaves on-demand prices unknown: the
// source's note says so once (no warning per region in the log), the
// regions do not each ask again, and the spot market is shown all the same.
func TestPriceListFailureIsOneNote(t *testing.T) {
	f := newFixture(t)
	f.fake.AddFault(ec2test.Fault{Action: "pricing:GetProducts", Status: 400, Code: "AccessDeniedException", Message: "User is not authorized to perform: pricing:GetProducts"})
	var log testutil.Buffer
	p := f.provider(t, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	c := newCollector()
	if err := p.Fetch(context.Background(), backfill(6*time.Hour), c.sink); err != nil {
		t.Fatal(err)
	}
	if n := f.fake.Count("pricing:GetProducts", ""); n != 1 {
		t.Errorf("%d Price List calls, want the one query for both regions", n)
	}
	last := c.notes[len(c.notes)-1]
	if !strings.Contains(last, "on-demand prices unknown in 2 region(s)") || !strings.Contains(last, "AccessDeniedException") {
		t.Errorf("note %q, want the Price List's failure", last)
	}
	if log.String() != "" {
		t.Errorf("warnings logged beside the note: %s", log.String())
	}
	if len(c.pools) == 0 {
		t.Fatal("no pools: the Price List's failure hid the spot market")
	}
	for k, pool := range c.pools {
		if pool.OnDemandUSDHour != nil {
			t.Errorf("%s: on-demand %v from a Price List that refused", k, *pool.OnDemandUSDHour)
		}
	}
}
