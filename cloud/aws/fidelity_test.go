package aws

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws/cwtest"
	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

// A scheduled (request) fleet lists no instances in DescribeFleets; its
// running count is read from DescribeFleetInstances: N/N once the fake
// fulfils it, fewer once the fake interrupts some, through the ledger's
// FleetsNow, which the Ledger view shows as RUN.
func TestRequestFleetRunningCount(t *testing.T) {
	clock := &testClock{t: testNow}
	f := newFixture(t, "us-east-1")
	f.fake.Now = clock.Now
	p := f.provider(t, func(o *Options) { o.LaunchTemplate = "lt-1"; o.Now = clock.Now })
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := ledger.New(st, []domain.Provider{p}, ledger.Options{Now: clock.Now, Timeout: 10 * time.Second, Actor: "organiser"})
	ctx := context.Background()
	start := testNow.Add(2 * time.Hour)
	spec := domain.FleetSpec{Provider: Name, Region: "us-east-1", InstanceTypes: []string{"g6.xlarge"}, TargetCapacity: 4,
		Start: start, End: start.Add(6 * time.Hour)}
	res, err := svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	running := func(at time.Time) domain.Fleet {
		t.Helper()
		clock.Set(at)
		if _, err := svc.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := st.Get(ctx, res.Row.ID)
		if err != nil {
			t.Fatal(err)
		}
		now := svc.FleetsNow(ctx, []ledger.Entry{r})[r.ID]
		if now.Err != nil {
			t.Fatalf("at %s: %v", at, now.Err)
		}
		return now.Fleet
	}
	if fl := running(start.Add(time.Minute)); fl.Instances != 4 || fl.Target != 4 || fl.State != "active" {
		t.Fatalf("fulfilled request fleet reads %d/%d (%s); want 4/4 active", fl.Instances, fl.Target, fl.State)
	}
	if f.fake.Count("DescribeFleetInstances", "us-east-1") == 0 {
		t.Fatal("the running count was not asked of DescribeFleetInstances")
	}
	if n := f.fake.Interrupt(res.Row.ProviderRef, 1); n != 1 {
		t.Fatalf("interrupted %d", n)
	}
	// FleetsNow asks a fleet at most every FleetsNowEvery.
	if fl := running(start.Add(time.Minute + ledger.FleetsNowEvery)); fl.Instances != 3 || fl.Target != 4 {
		t.Fatalf("after one interruption the fleet reads %d/%d; want 3/4", fl.Instances, fl.Target)
	}
}

// DeleteFleets may fail for an instant fleet of more than 1,000
// instances: all but 1,000 are terminated first, 1,000 per call.
func TestDeleteFleetOfMoreThanAThousandInstances(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, func(o *Options) { o.LaunchTemplate = "lt-1" })
	ctx := context.Background()
	spec := fleetSpec()
	spec.TargetCapacity = 2500
	fl, err := p.LaunchFleet(ctx, spec)
	if err != nil || fl.Instances != 2500 {
		t.Fatalf("launch: %+v, %v", fl, err)
	}
	if err := p.DeleteFleet(ctx, "us-east-1", fl.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	var terminated []int
	for _, c := range f.fake.Calls() {
		if c.Action == "TerminateInstances" {
			n := 0
			for k := range c.Params {
				if strings.HasPrefix(k, "InstanceId.") {
					n++
				}
			}
			terminated = append(terminated, n)
		}
	}
	if len(terminated) != 2 || terminated[0] != 1000 || terminated[1] != 500 {
		t.Fatalf("TerminateInstances calls of %v instances; want [1000 500] before DeleteFleets", terminated)
	}
	if rec := f.fake.Fleets()[0]; !strings.HasPrefix(rec.State, "deleted") || !rec.Terminated {
		t.Fatalf("fleet at the fake: %s terminated=%v", rec.State, rec.Terminated)
	}
	// A fleet of 1,000 is deleted in one call.
	spec.TargetCapacity, spec.ClientToken = 1000, "L10"
	if fl, err = p.LaunchFleet(ctx, spec); err != nil {
		t.Fatal(err)
	}
	before := f.fake.Count("TerminateInstances", "")
	if err := p.DeleteFleet(ctx, "us-east-1", fl.ID); err != nil || f.fake.Count("TerminateInstances", "") != before {
		t.Fatalf("delete of 1,000: %v, %d TerminateInstances calls", err, f.fake.Count("TerminateInstances", "")-before)
	}
}

// The booking look-ups name only filters the model lists for
// DescribeCapacityReservations; the fake refuses any other, as EC2 does.
func TestBookingLookUpsAskOnlyDocumentedFilters(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, nil)
	ctx := context.Background()
	q := h100Query()
	q.Regions = []string{"us-east-1"}
	offers, err := p.FindOfferings(ctx, q)
	if err != nil || len(offers) == 0 {
		t.Fatalf("offerings: %d, %v", len(offers), err)
	}
	o := offers[0]
	b, err := p.Book(ctx, domain.BookRequest{Offering: o, Ref: "R1", Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	found, err := p.FindBooking(ctx, domain.BookRequest{Offering: o, Ref: "R1", After: testNow.Add(-time.Minute)})
	if err != nil || found == nil || found.ProviderRef != b.ProviderRef {
		t.Fatalf("FindBooking: %+v, %v; want %s", found, err, b.ProviderRef)
	}
	// Bought again: answered with the first purchase, found by its tag.
	again, err := p.Book(ctx, domain.BookRequest{Offering: o, Ref: "R2", Actor: "alice"})
	if err != nil || again.ProviderRef != b.ProviderRef {
		t.Fatalf("second purchase of the offering: %+v, %v; want %s", again, err, b.ProviderRef)
	}
}

// A block search for a count AWS does not sell is refused by AWS with
// InvalidParameterValue; the search says so for the region instead of
// reading it as "type not sold" and showing nothing.
func TestFindOfferingsSaysACountNotSold(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, nil)
	q := h100Query()
	q.Regions, q.Instances = []string{"us-east-1"}, 3
	offers, err := p.FindOfferings(context.Background(), q)
	if err == nil || len(offers) != 0 || !strings.Contains(err.Error(), "does not sell a block of 3 instances") ||
		!strings.Contains(err.Error(), "InstanceCount must be one of 1, 2, 4") {
		t.Fatalf("offers %d, err %v; want an error saying blocks of 3 are not sold and what is", len(offers), err)
	}
	q.Instances = 4
	if offers, err = p.FindOfferings(context.Background(), q); err != nil || len(offers) == 0 {
		t.Fatalf("a count sold: %d offers, %v", len(offers), err)
	}
}

// The CloudWatch agent's default NVIDIA metrics carry index, name and
// host (the instance's private DNS name, or its first label), not
// InstanceId: usage finds them by host and says so.
func TestUsageFindsTheGPUMetricByHost(t *testing.T) {
	f := newUsageFixture(t)
	p := f.provider(t)
	id, ids := f.launch(t, p, 2)
	host0 := ec2test.PrivateDNSName("us-east-1", ids[0])
	short1, _, _ := strings.Cut(ec2test.PrivateDNSName("us-east-1", ids[1]), ".")
	for gpu := range 2 {
		idx := strconv.Itoa(gpu)
		f.cw.Add("CWAgent", "nvidia_smi_utilization_gpu", map[string]string{"index": idx, "name": "NVIDIA L4", "host": host0}, hourlyPoints(3, 60+20*float64(gpu))...)
		f.cw.Add("CWAgent", "nvidia_smi_utilization_gpu", map[string]string{"index": idx, "name": "NVIDIA L4", "host": short1}, hourlyPoints(3, 30)...)
	}
	// Another instance's GPU with the same index and name is not these.
	f.cw.Add("CWAgent", "nvidia_smi_utilization_gpu", map[string]string{"index": "0", "name": "NVIDIA L4", "host": "ip-10-9-9-9.ec2.internal"}, hourlyPoints(3, 100)...)
	rep, err := p.Usage(context.Background(), fleetQuery(id, 2))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Source != SourceGPUHost {
		t.Fatalf("source %q, want %q", rep.Source, SourceGPUHost)
	}
	want := map[string]float64{ids[0]: 0.7, ids[1]: 0.3}
	for _, in := range rep.Instances {
		if len(in.Busy) == 0 {
			t.Fatalf("%s: no samples", in.ID)
		}
		for _, s := range in.Busy {
			if math.Abs(s.Share-want[in.ID]) > 1e-9 {
				t.Errorf("%s share %v, want %v (the mean of its GPUs)", in.ID, s.Share, want[in.ID])
			}
		}
	}
}

// Without any GPU metric, the CPU stands in and metrics_source says why.
func TestUsageSaysWhyNoGPUMetric(t *testing.T) {
	f := newUsageFixture(t)
	p := f.provider(t)
	id, ids := f.launch(t, p, 1)
	f.cw.Add("AWS/EC2", "CPUUtilization", map[string]string{"InstanceId": ids[0]}, hourlyPoints(2, 50)...)
	rep, err := p.Usage(context.Background(), fleetQuery(id, 1))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Source, "CPU as a stand-in") || !strings.Contains(rep.Source, "no nvidia_smi metric with InstanceId or host") {
		t.Fatalf("source %q: want the CPU, and why no GPU metric", rep.Source)
	}
}

// A span that ended more than two weeks ago: SEARCH cannot see its GPU
// metrics (the report says so), and a span that started more than 63
// days ago is asked in hours, the only resolution CloudWatch keeps.
func TestUsageOfAnOldSpan(t *testing.T) {
	f := newUsageFixture(t)
	p := f.provider(t)
	start := testNow.Add(-70 * 24 * time.Hour)
	ids := []string{"i-0aaaaaaaaaaaaaaa1"}
	f.blockInstances = `<item><instanceId>i-0aaaaaaaaaaaaaaa1</instanceId><instanceType>p5.48xlarge</instanceType>
  <instanceState><code>48</code><name>terminated</name></instanceState>
  <reason>User initiated (` + start.Add(2*time.Hour).Format("2006-01-02 15:04:05") + ` GMT)</reason>
  <launchTime>` + start.Format(time.RFC3339) + `</launchTime></item>`
	var pts []cwtest.Point
	for at := start; at.Before(start.Add(2 * time.Hour)); at = at.Add(time.Minute) {
		pts = append(pts, cwtest.Point{At: at, Value: 40})
	}
	f.cw.Add("AWS/EC2", "CPUUtilization", map[string]string{"InstanceId": ids[0]}, pts...)
	f.cw.Add("CWAgent", "nvidia_smi_utilization_gpu", map[string]string{"InstanceId": ids[0], "index": "0", "name": "NVIDIA L4", "host": "x"}, pts...)
	q := domain.UsageQuery{Ref: "B1", Kind: domain.KindBlock, ProviderRef: "cr-0123456789abcdef0", Region: "us-east-1",
		InstanceType: "p5.48xlarge", InstanceCount: 1, From: start, To: start.Add(2 * time.Hour)}
	before := len(f.cw.Calls())
	rep, err := p.Usage(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range f.cw.Calls()[before:] {
		for _, c := range call {
			if c.Expression != "" || c.Period != 3600 {
				t.Errorf("query %s: expression %q period %d; want no SEARCH, and a period of 3600", c.ID, c.Expression, c.Period)
			}
		}
	}
	if rep.Source != SourceCPUOld || len(rep.Instances) != 1 || len(rep.Instances[0].Busy) != 2 || rep.Instances[0].Busy[0].Share != 0.4 {
		t.Fatalf("source %q instances %+v; want two hours of CPU and why no GPU", rep.Source, rep.Instances)
	}
}

// Placement scores are asked for the set of types a fleet of the GPU
// filter would use, three or more; a filter that leaves fewer is not
// asked and says why, never a number.
func TestPlacementScoresOfASetAndTheTop10(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, nil)
	c := newCollector()
	if err := p.Fetch(context.Background(), domain.FetchRequest{Query: domain.Query{Regions: []string{"us-east-1"}}, Since: testNow.Add(-time.Hour), Until: testNow, Backfill: true}, c.sink); err != nil {
		t.Fatal(err)
	}
	for _, call := range f.fake.Calls() {
		if call.Action == "GetSpotPlacementScores" && call.Params.Get("InstanceType.3") == "" {
			t.Errorf("GetSpotPlacementScores asked for fewer than three types: %v", call.Params)
		}
	}
	if f.fake.Count("GetSpotPlacementScores", "") != 1 {
		t.Errorf("%d GetSpotPlacementScores calls, want one for the set", f.fake.Count("GetSpotPlacementScores", ""))
	}

	f = newFixture(t, "us-east-1")
	p = f.provider(t, nil)
	c = newCollector()
	q := domain.Query{Regions: []string{"us-east-1"}, GPUs: []string{"H100"}}
	if err := p.Fetch(context.Background(), domain.FetchRequest{Query: q, Since: testNow.Add(-time.Hour), Until: testNow, Backfill: true}, c.sink); err != nil {
		t.Fatal(err)
	}
	if n := f.fake.Count("GetSpotPlacementScores", ""); n != 0 {
		t.Errorf("%d GetSpotPlacementScores calls for one H100 type: AWS scores fewer than three always low", n)
	}
	if len(c.pools) == 0 {
		t.Fatal("no H100 pools")
	}
	for k, pool := range c.pools {
		if pool.PlacementScore != nil || pool.PlacementNote != NoteTooFewTypes {
			t.Errorf("%s: score %v note %q, want none and %q", k, pool.PlacementScore, pool.PlacementNote, NoteTooFewTypes)
		}
	}
}
