package aws

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
)

func h100Query() domain.OfferingQuery {
	return domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour, Regions: []string{"us-east-1", "us-west-2"}}
}

func TestFindOfferings(t *testing.T) {
	f := newFixture(t)
	f.fake.AddFault(ec2test.Throttle("DescribeCapacityBlockOfferings", "", 1))
	p := f.provider(t, nil)
	offers, err := p.FindOfferings(context.Background(), h100Query())
	if err != nil {
		t.Fatal(err)
	}
	// The fake sells two 48 h p5.48xlarge blocks per region.
	if len(offers) != 4 {
		t.Fatalf("%d offerings, want 4: %+v", len(offers), offers)
	}
	var want = map[string]ec2test.Offering{}
	for _, r := range []string{"us-east-1", "us-west-2"} {
		for _, o := range f.fake.Region(r).Offerings {
			want[o.ID] = o
		}
	}
	prev := 0.0
	for _, o := range offers {
		w, ok := want[o.ID]
		if !ok || !strings.HasPrefix(o.ID, "cb-") {
			t.Fatalf("offering %s is not one the fake sells", o.ID)
		}
		if o.InstanceType != "p5.48xlarge" || o.GPU.Model != "H100" || o.InstanceCount != 1 || o.DurationHours() != 48 {
			t.Errorf("%s: %+v", o.ID, o)
		}
		if o.UpfrontUSD != w.UpfrontUSDPerInstance || !o.Start.Equal(w.Start) || o.Zone != w.Zone {
			t.Errorf("%s: fee %v start %v zone %s, want %v %v %s", o.ID, o.UpfrontUSD, o.Start, o.Zone, w.UpfrontUSDPerInstance, w.Start, w.Zone)
		}
		if got, want := o.USDPerGPUHour(), w.UpfrontUSDPerInstance/(8*48); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: $/GPU-h %v, want %v", o.ID, got, want)
		}
		if o.USDPerGPUHour() < prev {
			t.Errorf("offerings not sorted cheapest first")
		}
		prev = o.USDPerGPUHour()
	}
	// Only the H100 type is asked about: capacity blocks of other GPUs
	// are not wanted.
	for _, c := range f.fake.Calls() {
		if c.Action == "DescribeCapacityBlockOfferings" {
			if c.Params.Get("InstanceType") != "p5.48xlarge" || c.Params.Get("CapacityDurationHours") != "48" || c.Params.Get("InstanceCount") != "1" {
				t.Errorf("asked %v", c.Params)
			}
		}
	}
}

func TestFindOfferingsByGPUCount(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, nil)
	q := h100Query()
	q.Instances, q.GPUs = 0, 12 // 12 H100 = 2 p5.48xlarge
	offers, err := p.FindOfferings(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(offers) == 0 {
		t.Fatal("no offerings")
	}
	for _, o := range offers {
		if o.InstanceCount != 2 || o.GPUCount() != 16 {
			t.Errorf("%s: %d instances (%v GPUs), want 2 (16)", o.ID, o.InstanceCount, o.GPUCount())
		}
	}
}

func TestValidateOfferingQuery(t *testing.T) {
	ok := h100Query()
	for name, tc := range map[string]struct {
		mod  func(*domain.OfferingQuery)
		want string
	}{
		"unknown gpu":                  {func(q *domain.OfferingQuery) { q.GPU = "Z80" }, "gpu \"Z80\": want one of"},
		"no count":                     {func(q *domain.OfferingQuery) { q.Instances = 0 }, "count"},
		"too many":                     {func(q *domain.OfferingQuery) { q.Instances = 65 }, "1 to 64"},
		"30h":                          {func(q *domain.OfferingQuery) { q.Duration = 30 * time.Hour }, "whole days"},
		"15 days":                      {func(q *domain.OfferingQuery) { q.Duration = 15 * 24 * time.Hour }, "whole weeks"},
		"183 days":                     {func(q *domain.OfferingQuery) { q.Duration = 183 * 24 * time.Hour }, "4368h"},
		"start too late":               {func(q *domain.OfferingQuery) { q.StartAfter = testNow.Add(60 * 24 * time.Hour) }, "8 weeks"},
		"negative flex":                {func(q *domain.OfferingQuery) { q.FlexDuration = -time.Hour }, "flex duration"},
		"flex as long as the duration": {func(q *domain.OfferingQuery) { q.FlexDuration = q.Duration }, "flex duration"},
		"gpus beyond any block":        {func(q *domain.OfferingQuery) { q.Instances, q.GPUs = 0, 4294967298 }, "a capacity block holds at most 64 instances"},
		"range backwards": {func(q *domain.OfferingQuery) {
			q.StartBefore = testNow.Add(time.Hour)
			q.StartAfter = testNow.Add(2 * time.Hour)
		}, "not after"},
	} {
		t.Run(name, func(t *testing.T) {
			q := ok
			tc.mod(&q)
			_, err := ValidateOfferingQuery(q, testNow)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
	for _, h := range []int{24, 48, 336, 504, 672, 4368} {
		q := ok
		q.Duration = time.Duration(h) * time.Hour
		if _, err := ValidateOfferingQuery(q, testNow); err != nil {
			t.Errorf("%dh refused: %v", h, err)
		}
	}
	got, err := ValidateOfferingQuery(ok, testNow)
	if err != nil || !got.StartAfter.Equal(testNow) || !got.StartBefore.Equal(testNow.Add(blockTerms.MaxLead)) {
		t.Errorf("defaults %v %v (%v), want now and 8 weeks ahead", got.StartAfter, got.StartBefore, err)
	}
}

func firstOffering(t *testing.T, p *Provider) domain.Offering {
	t.Helper()
	// The regions the endpoint serves (DescribeRegions): a region it
	// does not know fails, and fails the search's region with it.
	q := h100Query()
	q.Regions = nil
	offers, err := p.FindOfferings(context.Background(), q)
	if err != nil || len(offers) == 0 {
		t.Fatalf("FindOfferings: %v, %d", err, len(offers))
	}
	return offers[0]
}

func TestBookDryRun(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, nil)
	o := firstOffering(t, p)
	b, err := p.Book(context.Background(), domain.BookRequest{Offering: o, DryRun: true, After: testNow, Ref: "L1"})
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if !b.DryRun || !strings.Contains(b.Message, "would succeed") || b.CostUSD != o.UpfrontUSD {
		t.Errorf("booking %+v", b)
	}
	if n := len(f.fake.Reservations()); n != 0 {
		t.Errorf("a dry run bought %d reservations", n)
	}
	calls := f.fake.Calls()
	last := calls[len(calls)-1]
	if last.Action != "PurchaseCapacityBlock" || last.Params.Get("DryRun") != "true" || last.Params.Get("InstancePlatform") != "Linux/UNIX" {
		t.Errorf("last call %s %v", last.Action, last.Params)
	}
}

func TestBookAndFind(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, nil)
	o := firstOffering(t, p)
	req := domain.BookRequest{Offering: o, After: testNow, Ref: "L42"}
	b, err := p.Book(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.ProviderRef, "cr-") || b.State != "scheduled" || !b.Start.Equal(o.Start) || !b.End.Equal(o.End) || b.InstanceCount != 1 {
		t.Errorf("booking %+v", b)
	}
	res := f.fake.Reservations()
	if len(res) != 1 || res[0].Tags[domain.TagRef] != "L42" {
		t.Fatalf("reservations %+v, want one tagged with the ledger id", res)
	}
	found, err := p.FindBooking(context.Background(), req)
	if err != nil || found == nil || found.ProviderRef != b.ProviderRef {
		t.Fatalf("FindBooking: %+v, %v; want %s", found, err, b.ProviderRef)
	}
	// Another intent does not claim this purchase.
	other := req
	other.Ref = "L43"
	if found, err := p.FindBooking(context.Background(), other); err != nil || found != nil {
		t.Errorf("FindBooking for another ref: %+v, %v; want none", found, err)
	}
	// Nor does one recorded after it was made.
	later := req
	later.After = testNow.Add(time.Hour)
	if found, err := p.FindBooking(context.Background(), later); err != nil || found != nil {
		t.Errorf("FindBooking after the purchase: %+v, %v; want none", found, err)
	}
	// Buying the same offering again answers with the block bought from
	// it (tagged with the offering), and buys nothing.
	again, err := p.Book(context.Background(), domain.BookRequest{Offering: o, After: testNow, Ref: "L44"})
	if err != nil || again.ProviderRef != b.ProviderRef || !strings.Contains(again.Message, "not bought again") {
		t.Errorf("buying a bought offering: %+v, %v; want %s", again, err, b.ProviderRef)
	}
	if n := f.fake.Count("PurchaseCapacityBlock", ""); n != 1 {
		t.Errorf("%d PurchaseCapacityBlock calls, want 1", n)
	}
}

func TestBookLostAnswerIsReconciledNotRetried(t *testing.T) {
	f := newFixture(t)
	f.fake.AddFault(ec2test.Fault{Action: "PurchaseCapacityBlock", Drop: true, AfterApply: true, Times: 1})
	p := f.provider(t, nil)
	o := firstOffering(t, p)
	req := domain.BookRequest{Offering: o, After: testNow.Add(-time.Second), Ref: "L7"}
	if _, err := p.Book(context.Background(), req); err == nil {
		t.Fatal("Book with a lost answer succeeded")
	}
	if n := f.fake.Count("PurchaseCapacityBlock", ""); n != 1 {
		t.Fatalf("%d PurchaseCapacityBlock calls, want exactly 1 (no retry)", n)
	}
	found, err := p.FindBooking(context.Background(), req)
	if err != nil || found == nil {
		t.Fatalf("FindBooking: %+v, %v; want the block bought before the answer was lost", found, err)
	}
	if res := f.fake.Reservations(); len(res) != 1 || res[0].ID != found.ProviderRef {
		t.Errorf("found %s, bought %+v", found.ProviderRef, res)
	}
	if n := f.fake.Count("PurchaseCapacityBlock", ""); n != 1 {
		t.Errorf("%d PurchaseCapacityBlock calls after reconciliation, want 1", n)
	}
}

func TestBookThrottledIsNotRetried(t *testing.T) {
	f := newFixture(t)
	f.fake.AddFault(ec2test.Throttle("PurchaseCapacityBlock", "", 1))
	p := f.provider(t, nil)
	o := firstOffering(t, p)
	_, err := p.Book(context.Background(), domain.BookRequest{Offering: o, After: testNow})
	if err == nil || !strings.Contains(err.Error(), "RequestLimitExceeded") {
		t.Fatalf("Book: %v, want the throttling error", err)
	}
	if n := f.fake.Count("PurchaseCapacityBlock", ""); n != 1 {
		t.Errorf("%d purchase calls, want 1", n)
	}
	if len(f.fake.Reservations()) != 0 {
		t.Errorf("bought despite the error")
	}
}

func TestBookRefusesBadOffering(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, nil)
	if _, err := p.Book(context.Background(), domain.BookRequest{Offering: domain.Offering{ID: "sim-1", Region: "us-east-1"}}); err == nil || !strings.Contains(err.Error(), "cb-") || !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("Book(sim-1): %v", err)
	}
	if n := f.fake.Count("PurchaseCapacityBlock", ""); n != 0 {
		t.Errorf("%d purchase calls for a bad id", n)
	}
}

func TestFleetLaunchDescribeDelete(t *testing.T) {
	f := newFixture(t)
	f.fake.LaunchTemplates = []string{"lt-0123456789abcdef0"}
	p := f.provider(t, func(o *Options) { o.LaunchTemplate = "lt-0123456789abcdef0" })
	spec := domain.FleetSpec{Region: "us-east-1", InstanceTypes: []string{"g6e.xlarge", "g6.xlarge"},
		Zones: []string{"us-east-1a", "us-east-1b"}, TargetCapacity: 3, OnDemandBase: 1, MaxPriceUSD: domain.Float(0.9), ClientToken: "L9"}
	dry := spec
	dry.DryRun = true
	fl, err := p.LaunchFleet(context.Background(), dry)
	if err != nil || !fl.DryRun {
		t.Fatalf("dry run: %+v %v", fl, err)
	}
	if len(f.fake.Fleets()) != 0 {
		t.Fatal("dry run made a fleet")
	}
	fl, err = p.LaunchFleet(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(fl.ID, "fleet-") || fl.Instances != 3 || fl.State != "active" {
		t.Errorf("fleet %+v", fl)
	}
	rec := f.fake.Fleets()[0]
	if rec.Type != "instant" || rec.Strategy != domain.StrategyPriceCapacityOptimized || rec.OnDemand != 1 || rec.Target != 3 || rec.ClientToken != "L9" {
		t.Errorf("fleet record %+v", rec)
	}
	if len(rec.Overrides) != 4 || rec.Overrides[0].Get("MaxPrice") != "0.9" || rec.Overrides[1].Get("AvailabilityZone") != "us-east-1b" {
		t.Errorf("overrides %v, want types × zones with the max price", rec.Overrides)
	}
	// The same client token returns the same fleet.
	again, err := p.LaunchFleet(context.Background(), spec)
	if err != nil || again.ID != fl.ID || len(f.fake.Fleets()) != 1 {
		t.Errorf("relaunch with the same token: %+v %v, %d fleets", again, err, len(f.fake.Fleets()))
	}
	d, err := p.DescribeFleet(context.Background(), "us-east-1", fl.ID)
	if err != nil || d.State != "active" || d.Instances != 3 || d.Target != 3 {
		t.Errorf("describe: %+v %v", d, err)
	}
	// A launch whose answer was lost is found by its client token.
	found, err := p.FindFleet(context.Background(), "us-east-1", "L9")
	if err != nil || found == nil || found.ID != fl.ID || found.Instances != 3 {
		t.Errorf("find by token: %+v %v", found, err)
	}
	if none, err := p.FindFleet(context.Background(), "us-east-1", "never-sent"); err != nil || none != nil {
		t.Errorf("find an unknown token: %+v %v", none, err)
	}
	if err := p.DeleteFleet(context.Background(), "us-east-1", fl.ID); err != nil {
		t.Fatal(err)
	}
	if rec := f.fake.Fleets()[0]; rec.State != "deleted_terminating" {
		t.Errorf("after delete: %s, want deleted_terminating", rec.State)
	}
	d, err = p.DescribeFleet(context.Background(), "us-east-1", fl.ID)
	if err != nil || d.State != "deleted" || d.Instances != 0 {
		t.Errorf("describe after delete: %+v %v", d, err)
	}
	if err := p.DeleteFleet(context.Background(), "us-east-1", "fleet-nope"); err == nil {
		t.Errorf("deleting an unknown fleet succeeded")
	}
}

func TestFleetValidation(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, nil)
	base := domain.FleetSpec{Region: "us-east-1", InstanceTypes: []string{"g6.xlarge"}, TargetCapacity: 2}
	for name, tc := range map[string]struct {
		mod  func(*domain.FleetSpec)
		want string
	}{
		"no template":  {func(*domain.FleetSpec) {}, "aws.launch_template"},
		"bad strategy": {func(s *domain.FleetSpec) { s.LaunchTemplate = "x"; s.Strategy = "cheapest" }, "price-capacity-optimized"},
		"no target":    {func(s *domain.FleetSpec) { s.LaunchTemplate = "x"; s.TargetCapacity = 0 }, "target"},
		"base > total": {func(s *domain.FleetSpec) { s.LaunchTemplate = "x"; s.OnDemandBase = 3 }, "on-demand base"},
		"no types":     {func(s *domain.FleetSpec) { s.LaunchTemplate = "x"; s.InstanceTypes = nil }, "instance type"},
	} {
		t.Run(name, func(t *testing.T) {
			s := base
			tc.mod(&s)
			if _, err := p.LaunchFleet(context.Background(), s); err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	if n := f.fake.Count("CreateFleet", ""); n != 0 {
		t.Errorf("%d CreateFleet calls for invalid specs", n)
	}
}

func TestFleetUnknownTemplate(t *testing.T) {
	f := newFixture(t)
	f.fake.LaunchTemplates = []string{"lt-1"}
	p := f.provider(t, nil)
	_, err := p.LaunchFleet(context.Background(), domain.FleetSpec{Region: "us-east-1", InstanceTypes: []string{"g6.xlarge"}, TargetCapacity: 1, LaunchTemplate: "lt-2"})
	if err == nil || !strings.Contains(err.Error(), "InvalidLaunchTemplateId.NotFound") || errors.Is(err, ErrInvalidSpec) {
		t.Errorf("err %v", err)
	}
}
