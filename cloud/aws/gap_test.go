package aws

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
)

// A region whose back-fill failed while another answered (so the hub
// counts the fetch a success and moves on to live polls from its Until)
// reports its failure as an Event, and the hub's next poll, carrying the
// gap, catches up on its whole window with its on-demand prices.
func TestFetchRegionFailedBackfillCatchesUp(t *testing.T) {
	f := newFixture(t)
	f.fake.AddFault(ec2test.Fault{Action: "DescribeSpotPriceHistory", Region: "us-west-2", Times: 4,
		Status: http.StatusInternalServerError, Code: "InternalError", Message: "An internal error has occurred"})
	p := f.provider(t, nil)
	c := newCollector()
	first := backfill(24 * time.Hour)
	if err := p.Fetch(context.Background(), first, c.sink); err != nil {
		t.Fatalf("Fetch with one region failing: %v", err)
	}
	if c.errs["us-west-2"] == nil {
		t.Fatal("us-west-2 did not fail: the fault did not bite")
	}
	// The hub's next poll: live, from the back-fill's Until, with the region's gap.
	poll := domain.FetchRequest{Query: first.Query, Since: first.Until, Until: first.Until.Add(30 * time.Second),
		Missed: map[string]domain.Gap{"us-west-2": {From: first.Since, Until: first.Until}}}
	if err := p.Fetch(context.Background(), poll, c.sink); err != nil {
		t.Fatal(err)
	}
	rd := f.fake.Region("us-west-2")
	pools := 0
	for k, pool := range c.pools {
		if k.Region != "us-west-2" {
			continue
		}
		pools++
		min, max, last, ok := expectedStats(rd, k.InstanceType, k.Zone, first.Since, first.Until)
		if !ok {
			t.Fatalf("%s: no data in the fake", k)
		}
		st := c.series[k].Stats(first.Since.Unix(), first.Until.Unix())
		if !st.OK || st.Min != min || st.Max != max || st.Last != last {
			t.Errorf("%s: window stats min %v max %v last %v, want %v %v %v (the failed back-fill was never made up)",
				k, st.Min, st.Max, st.Last, min, max, last)
		}
		if want, sold := rd.OnDemand[k.InstanceType]; sold && (pool.OnDemandUSDHour == nil || *pool.OnDemandUSDHour != want) {
			t.Errorf("%s: on-demand %v, want %v", k, pool.OnDemandUSDHour, want)
		}
	}
	if pools == 0 {
		t.Fatal("no us-west-2 pools after the catch-up poll")
	}
	// The provider keeps no gap: a poll without one asks only from its own Since.
	before := len(f.fake.Calls())
	next := domain.FetchRequest{Query: first.Query, Since: poll.Until, Until: poll.Until.Add(30 * time.Second)}
	if err := p.Fetch(context.Background(), next, c.sink); err != nil {
		t.Fatal(err)
	}
	for _, call := range f.fake.Calls()[before:] {
		if call.Action == "DescribeSpotPriceHistory" && call.Params.Get("StartTime") != next.Since.Format("2006-01-02T15:04:05Z") {
			t.Errorf("%s: StartTime %s after catching up, want %s", call.Region, call.Params.Get("StartTime"), next.Since.Format(time.RFC3339))
		}
	}
}

// A region that fails a live poll reports it; the next poll, carrying that
// span as the region's gap, asks again from where the failed one began.
func TestFetchRegionFailedLivePollRetriesItsSpan(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, nil)
	c := newCollector()
	first := backfill(24 * time.Hour)
	first.Until = testNow.Add(-6 * time.Hour)
	first.Since = first.Until.Add(-24 * time.Hour)
	if err := p.Fetch(context.Background(), first, c.sink); err != nil {
		t.Fatal(err)
	}
	f.fake.AddFault(ec2test.Fault{Action: "DescribeSpotPriceHistory", Region: "us-west-2", Times: 4,
		Status: http.StatusInternalServerError, Code: "InternalError", Message: "An internal error has occurred"})
	failed := domain.FetchRequest{Query: first.Query, Since: first.Until, Until: testNow.Add(-time.Hour)}
	if err := p.Fetch(context.Background(), failed, c.sink); err != nil {
		t.Fatal(err)
	}
	if c.errs["us-west-2"] == nil {
		t.Fatal("us-west-2 did not fail: the fault did not bite")
	}
	next := domain.FetchRequest{Query: first.Query, Since: failed.Until, Until: testNow,
		Missed: map[string]domain.Gap{"us-west-2": {From: failed.Since, Until: failed.Until}}}
	if err := p.Fetch(context.Background(), next, c.sink); err != nil {
		t.Fatal(err)
	}
	rd := f.fake.Region("us-west-2")
	pools := 0
	for k := range c.pools {
		if k.Region != "us-west-2" {
			continue
		}
		pools++
		min, max, last, _ := expectedStats(rd, k.InstanceType, k.Zone, first.Since, testNow)
		st := c.series[k].Stats(first.Since.Unix(), testNow.Unix())
		if !st.OK || st.Min != min || st.Max != max || st.Last != last {
			t.Errorf("%s: stats min %v max %v last %v, want %v %v %v (the failed poll's span is lost)", k, st.Min, st.Max, st.Last, min, max, last)
		}
	}
	if pools == 0 {
		t.Fatal("no us-west-2 pools: nothing was checked")
	}
}

// The hub with the real provider: us-west-2's failed back-fill reaches the
// hub as an Event, the hub sets the region's gap on its next poll, and the
// provider's answer fills the whole window.
func TestHubCatchesUpAFailedRegionThroughItsGap(t *testing.T) {
	f := newFixture(t)
	f.fake.AddFault(ec2test.Fault{Action: "DescribeSpotPriceHistory", Region: "us-west-2", Times: 4,
		Status: http.StatusInternalServerError, Code: "InternalError", Message: "An internal error has occurred"})
	p := f.provider(t, nil)
	var clock atomic.Int64
	clock.Store(testNow.Unix())
	first := backfill(24 * time.Hour)
	h := feed.New([]domain.Provider{p}, feed.Options{Query: first.Query, PublishEvery: time.Millisecond,
		Interval: func(string) time.Duration { return 24 * time.Hour },
		Now:      func() time.Time { return time.Unix(clock.Load(), 0).UTC() }})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go h.Run(ctx)
	rd := f.fake.Region("us-west-2")
	// wrong says how the snapshot's us-west-2 history differs from the fake's window, "" if not.
	wrong := func(s *feed.Snapshot) string {
		pools := 0
		for _, pv := range s.Pools {
			if pv.Region != "us-west-2" {
				continue
			}
			pools++
			min, max, last, _ := expectedStats(rd, pv.InstanceType, pv.Zone, first.Since, first.Until)
			st := pv.History.Stats(first.Since.Unix(), first.Until.Unix())
			if !st.OK || st.Min != min || st.Max != max || st.Last != last {
				return fmt.Sprintf("%s: min %v max %v last %v, want %v %v %v", pv.Key, st.Min, st.Max, st.Last, min, max, last)
			}
		}
		if pools == 0 {
			return "no us-west-2 pools"
		}
		return ""
	}
	s, err := h.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if wrong(s) == "" {
		t.Fatal("us-west-2 has its window after the failed back-fill: the fault did not bite")
	}
	clock.Store(testNow.Add(30 * time.Second).Unix())
	h.Refresh()
	why := "no snapshot after the poll"
	for s := range h.Subscribe(ctx) {
		if why = wrong(s); why == "" {
			return
		}
	}
	t.Fatalf("the hub's next poll did not catch up on us-west-2's window: %s", why)
}
