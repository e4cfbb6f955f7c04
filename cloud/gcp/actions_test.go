package gcp

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/gcp/gcptest"
	"github.com/gpumarket/gpumarket/domain"
)

func findH100(t *testing.T, p *Provider, n int) []domain.Offering {
	t.Helper()
	offs, err := p.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: n, Duration: 48 * time.Hour,
		Regions: []string{"us-central1"}})
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

// The calendar-mode advice's windows are offerings of kind gcp-calendar,
// in the zone it recommends, priced at on-demand rates over the window.
func TestCalendarAdviceIsOfferings(t *testing.T) {
	p, _ := newTest(t, gcptest.Options{})
	offs := findH100(t, p, 2)
	if len(offs) == 0 {
		t.Fatal("no offerings")
	}
	rate := 208*0.02291161 + 1872*0.00307045 + 8*10.18
	for _, o := range offs {
		if o.Kind != domain.KindCalendar || o.Cloud != domain.CloudGCP || o.InstanceType != "a3-highgpu-8g" || o.InstanceCount != 2 ||
			o.End.Sub(o.Start) != 48*time.Hour || o.Start.Hour() != 0 || !strings.HasPrefix(o.Zone, "us-central1-") {
			t.Errorf("offering %+v", o)
		}
		if want := rate * 2 * 48; !near(o.UpfrontUSD/want, 1) {
			t.Errorf("%s: total %.2f, want %.2f", o.ID, o.UpfrontUSD, want)
		}
	}
	// Three instances fit in no zone (4 and 2 there, the first zone
	// recommended, the second told NO_CAPACITY): only us-central1-a.
	for _, o := range findH100(t, p, 3) {
		if o.Zone != "us-central1-a" {
			t.Errorf("3 instances offered in %s, which holds 2", o.Zone)
		}
	}
	if offs := findH100(t, p, 5); len(offs) != 0 {
		t.Errorf("5 instances: %d offerings, want none", len(offs))
	}
	if _, err := p.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 36 * time.Hour}); !errors.Is(err, domain.ErrInvalidQuery) {
		t.Errorf("36h: %v, want an invalid query (whole days)", err)
	}
}

// With a flex duration the advice is asked for a range of lengths; the
// windows of another length than asked are offerings marked FlexLength,
// priced over their own window; without one, only the asked length.
func TestCalendarAdviceFlexibleLength(t *testing.T) {
	p, _ := newTest(t, gcptest.Options{})
	q := domain.OfferingQuery{GPU: "H100", Instances: 2, Duration: 48 * time.Hour, FlexDuration: 24 * time.Hour, Regions: []string{"us-central1"}}
	offs, err := p.FindOfferings(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	rate := 208*0.02291161 + 1872*0.00307045 + 8*10.18
	flex := 0
	for _, o := range offs {
		d := o.End.Sub(o.Start)
		if d < 24*time.Hour || d > 72*time.Hour || o.FlexLength != (d != 48*time.Hour) {
			t.Errorf("%s lasts %s (flex %v): want 1 to 3 days, flex when not 2", o.ID, d, o.FlexLength)
		}
		if want := rate * 2 * d.Hours(); !near(o.UpfrontUSD/want, 1) {
			t.Errorf("%s: total %.2f over %s, want %.2f", o.ID, o.UpfrontUSD, d, want)
		}
		if o.FlexLength {
			flex++
		}
	}
	if flex == 0 {
		t.Errorf("no window of another length among %d offerings: the flex duration was not asked for or was dropped", len(offs))
	}
	q.FlexDuration = 0
	exact, err := p.FindOfferings(context.Background(), q)
	if err != nil || len(exact) == 0 {
		t.Fatalf("without flex: %d offerings, %v", len(exact), err)
	}
	for _, o := range exact {
		if o.FlexLength || o.End.Sub(o.Start) != 48*time.Hour {
			t.Errorf("without flex, %s lasts %s (flex %v)", o.ID, o.End.Sub(o.Start), o.FlexLength)
		}
	}
}

// A region whose advice fails is a RegionErrors entry beside the others'
// offerings; when every region failed there are no offerings, only errors.
func TestCalendarAdviceFailedRegion(t *testing.T) {
	p, f := newTest(t, gcptest.Options{})
	q := domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour, Regions: []string{"us-central1"}}
	f.Fail("advice.calendarMode", 403, "forbidden", "Required 'compute.advice.calendarMode' permission.")
	var re domain.RegionErrors
	if offs, err := p.FindOfferings(context.Background(), q); !errors.As(err, &re) || len(re) != 1 || offs != nil {
		t.Fatalf("the only region failed: %d offerings, %v; want none and its error", len(offs), err)
	}
	q.Regions = []string{"us-central1", "asia-northeast1"}
	f.Fail("advice.calendarMode", 403, "forbidden", "Required 'compute.advice.calendarMode' permission.")
	offs, err := p.FindOfferings(context.Background(), q)
	if !errors.As(err, &re) || len(re) != 1 || len(offs) == 0 {
		t.Fatalf("one of two regions failed: %d offerings, %v; want the other's and one error", len(offs), err)
	}
}

// Book creates the future reservation in calendar mode, named by the
// ledger row, tagged in its description, and reads its state back as the
// API reports it; the window is then held.
func TestBookCreatesACalendarModeFutureReservation(t *testing.T) {
	p, f := newTest(t, gcptest.Options{OpPolls: 3})
	o := findH100(t, p, 2)[0]
	fresh, err := p.RefreshOffering(context.Background(), o)
	if err != nil || fresh.ID != o.ID || fresh.UpfrontUSD != o.UpfrontUSD {
		t.Fatalf("refresh: %+v %v", fresh, err)
	}
	dry, err := p.Book(context.Background(), domain.BookRequest{Offering: o, DryRun: true})
	if err != nil || !dry.DryRun || f.FutureReservation(o.Zone, reservationName("01ROW")) != nil {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	b, err := p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: "01ROW", Actor: "alice@host"})
	if err != nil {
		t.Fatal(err)
	}
	fr := f.FutureReservation(o.Zone, "gpumarket-01row")
	if fr == nil || fr.ReservationMode != "CALENDAR" || fr.PlanningStatus != "SUBMITTED" || fr.SpecificSkuProperties.TotalCount != 2 ||
		!strings.Contains(fr.Description, "gpumarket:ref=01ROW") || !strings.Contains(fr.Description, "gpumarket:offering="+o.ID) {
		t.Fatalf("future reservation %+v", fr)
	}
	if b.State != "scheduled" || !strings.Contains(b.Message, "planning status SUBMITTED, procurement status APPROVED") ||
		!b.Start.Equal(o.Start) || b.InstanceCount != 2 || !strings.HasSuffix(b.ProviderRef, "/futureReservations/gpumarket-01row") {
		t.Errorf("booking %+v", b)
	}
	if _, err := p.RefreshOffering(context.Background(), o); o.Zone == "us-central1-c" && !errors.Is(err, domain.ErrOfferingGone) {
		t.Errorf("refresh of a window now held: %v, want gone", err)
	}
	other := o
	other.InstanceCount = 1
	if got, err := p.FindBooking(context.Background(), domain.BookRequest{Offering: other}); err != nil || got != nil {
		t.Errorf("another count: %+v %v, want none", got, err)
	}
	// The window in the other zone is offered too: the refresh asks only
	// for its zone.
	if o.Zone != "us-central1-a" {
		t.Fatalf("the advice recommended %s before us-central1-a", o.Zone)
	}
	inC := o
	inC.Zone = "us-central1-c"
	if fresh, err := p.RefreshOffering(context.Background(), inC); err != nil || fresh.Zone != inC.Zone {
		t.Errorf("refresh in %s: %+v %v", inC.Zone, fresh, err)
	}
	// Found by its name, and by its terms with no name.
	for _, ref := range []string{"01ROW", ""} {
		got, err := p.FindBooking(context.Background(), domain.BookRequest{Offering: o, Ref: ref})
		if err != nil || got == nil || got.ProviderRef != b.ProviderRef {
			t.Errorf("find booking (ref %q): %+v %v", ref, got, err)
		}
	}
}

// A 503 after Google did the insert is retried with the same requestId,
// which Google ignores as done: one reservation, one fleet, not two.
func TestRetriedInsertsAreDoneOnce(t *testing.T) {
	p, f := newTest(t, gcptest.Options{})
	p.opt.Image = "img"
	o := findH100(t, p, 1)[0]
	f.FailAfter("futureReservations.insert", 503)
	if _, err := p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: "01AGAIN"}); err != nil {
		t.Fatalf("book: %v", err)
	}
	f.FailAfter("regionInstances.bulkInsert", 503)
	fl, err := p.LaunchFleet(context.Background(), domain.FleetSpec{Region: "us-central1", InstanceTypes: []string{"g2-standard-4"}, TargetCapacity: 2, ClientToken: "01TWICE"})
	if err != nil || fl.Instances != 2 || len(f.VMs()) != 2 {
		t.Fatalf("launch: %+v %v, VMs %v", fl, err, f.VMs())
	}
}

// A purchase whose answer was lost is settled by its name: the
// reservation is there, found, and nothing is bought twice.
func TestLostBookingIsFoundByName(t *testing.T) {
	p, f := newTest(t, gcptest.Options{})
	o := findH100(t, p, 1)[0]
	f.LoseAnswer("futureReservations.insert")
	if _, err := p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: "01LOST"}); err == nil || Declined(err) {
		t.Fatalf("lost answer: %v, want an error that is not a definite no", err)
	}
	got, err := p.FindBooking(context.Background(), domain.BookRequest{Offering: o, Ref: "01LOST"})
	if err != nil || got == nil || got.State != "scheduled" {
		t.Fatalf("find: %+v %v", got, err)
	}
	if none, err := p.FindBooking(context.Background(), domain.BookRequest{Offering: o, Ref: "01OTHER", After: time.Now().Add(time.Hour)}); err != nil || none != nil {
		t.Errorf("another row: %+v %v, want none", none, err)
	}
}

// A booking answered 503 is sent again whole (its body read anew), with the
// same requestId, and makes one reservation of the offering's terms.
func TestThrottledBookingIsResentWhole(t *testing.T) {
	p, f := newTest(t, gcptest.Options{})
	o := findH100(t, p, 2)[0]
	f.Throttle(503)
	if _, err := p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: "01RETRY"}); err != nil {
		t.Fatal(err)
	}
	fr := f.FutureReservation(o.Zone, "gpumarket-01retry")
	if fr == nil || fr.SpecificSkuProperties == nil || fr.SpecificSkuProperties.TotalCount != 2 || fr.ReservationMode != "CALENDAR" {
		t.Fatalf("future reservation after a 503: %+v, want the offering's two machines in calendar mode", fr)
	}
}

// A failed operation is said in one line and is Google's definite no; a
// reservation Google declines is one too.
func TestFailedOperationIsOneLine(t *testing.T) {
	p, f := newTest(t, gcptest.Options{})
	o := findH100(t, p, 1)[0]
	f.FailOperation("futureReservations.insert", "QUOTA_EXCEEDED", "Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 8.0 globally.\nSee quotas.")
	_, err := p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: "01FAIL"})
	if err == nil || !Declined(err) || !errors.Is(err, domain.ErrDeclined) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "QUOTA_EXCEEDED") {
		t.Errorf("failed operation: %v", err)
	}
	o.InstanceCount = 9 // more than calendar mode holds there
	_, err = p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: "01DECL"})
	if !errors.Is(err, domain.ErrDeclined) || !strings.Contains(err.Error(), "procurement status DECLINED") {
		t.Errorf("declined: %v", err)
	}
}

// A fleet is Spot VMs by bulk insert: SPOT, termination action DELETE,
// labelled with the fleet; described, found by its token after a lost
// answer, deleted; its usage read from Monitoring with the preemption the
// zone recorded.
func TestSpotFleet(t *testing.T) {
	// Off the 5-minute periods of the metrics, so runs' ends are read
	// inside them.
	clock := time.Now().UTC().Truncate(time.Hour).Add(-3*time.Hour + 2*time.Minute)
	now := func() time.Time { return clock }
	p, f := newTest(t, gcptest.Options{Now: now, PageSize: 2})
	p.opt.Image = "projects/debian-cloud/global/images/family/debian-12"
	spec := domain.FleetSpec{Provider: Name, Region: "us-central1", InstanceTypes: []string{"g2-standard-8"}, TargetCapacity: 3,
		ClientToken: "01FLEET", Actor: "alice@host", End: clock.Add(3 * time.Hour)}
	f.LoseAnswer("regionInstances.bulkInsert")
	if _, err := p.LaunchFleet(context.Background(), spec); err == nil || Declined(err) {
		t.Fatalf("lost launch: %v", err)
	}
	found, err := p.FindFleet(context.Background(), "us-central1", "01FLEET")
	if err != nil || found == nil || found.Instances != 3 || found.ID != FleetID("01FLEET") {
		t.Fatalf("find: %+v %v", found, err)
	}
	// A relaunch with the same token is the same bulk insert (requestId).
	fl, err := p.LaunchFleet(context.Background(), spec)
	if err != nil || fl.Instances != 3 || len(f.VMs()) != 3 {
		t.Fatalf("launch again: %+v %v, VMs %v", fl, err, f.VMs())
	}
	if fl.EstimatedUSDh <= 0 {
		t.Errorf("estimate %v", fl.EstimatedUSDh)
	}
	for _, name := range f.VMs() {
		vm := f.VM(name)
		if s := vm.Scheduling; s.ProvisioningModel != "SPOT" || s.InstanceTerminationAction != "DELETE" || s.TerminationTime != spec.End.Format(time.RFC3339) ||
			vm.Labels[labelFleet] != fl.ID || vm.Labels[labelActor] != "alice_host" {
			t.Errorf("VM %s: scheduling %+v, labels %v", name, vm.Scheduling, vm.Labels)
		}
	}
	clock = clock.Add(40 * time.Minute)
	if err := f.Preempt(f.VMs()[0]); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(30 * time.Minute)
	rep, err := p.Usage(context.Background(), domain.UsageQuery{Kind: domain.KindFleet, ProviderRef: fl.ID, Region: "us-central1",
		InstanceType: "g2-standard-8", From: clock.Add(-2 * time.Hour), To: clock})
	if err != nil {
		t.Fatal(err)
	}
	interrupted := 0
	for _, u := range rep.Instances {
		if u.Interrupted {
			interrupted++
			if !u.End.Equal(clock.Add(-30 * time.Minute)) {
				t.Errorf("preempted %s ended %s, want the preemption's time", u.ID, u.End)
			}
		} else if !u.End.IsZero() {
			t.Errorf("%s still runs, ended %s", u.ID, u.End)
		}
		if d := u.Start.Sub(clock.Add(-70 * time.Minute)); d < -time.Minute || d > time.Minute {
			t.Errorf("%s started %s, launched %s", u.ID, u.Start, clock.Add(-70*time.Minute))
		}
		if !u.Spot || len(u.Busy) == 0 || u.Busy[0].Share != 0.4 {
			t.Errorf("instance %+v", u)
		}
	}
	if len(rep.Instances) != 3 || interrupted != 1 || !strings.Contains(rep.Source, "cpu/utilization") {
		t.Errorf("usage: %d instances, %d interrupted, source %q", len(rep.Instances), interrupted, rep.Source)
	}
	for _, call := range []string{"instances.aggregatedList", "projects.timeSeries.list"} {
		if f.Calls[call] < 2 {
			t.Errorf("%s asked %d times: not paged", call, f.Calls[call])
		}
	}
	// A launch that failed, its answer lost, is found failed by its
	// operation (clientOperationId, the requestId) though no VM is listed.
	f.FailOperation("regionInstances.bulkInsert", "ZONE_RESOURCE_POOL_EXHAUSTED", "The zone does not have enough resources.")
	f.LoseAnswer("regionInstances.bulkInsert")
	failed := spec
	failed.ClientToken = "01NONE"
	if _, err := p.LaunchFleet(context.Background(), failed); err == nil {
		t.Fatal("a lost answer said nothing")
	}
	if got, err := p.FindFleet(context.Background(), "us-central1", "01NONE"); err != nil || got == nil || got.State != "failed" ||
		!strings.Contains(got.Message, "ZONE_RESOURCE_POOL_EXHAUSTED") {
		t.Errorf("find the failed launch: %+v %v", got, err)
	}
	if err := p.DeleteFleet(context.Background(), "us-central1", fl.ID); err != nil || len(f.VMs()) != 0 {
		t.Fatalf("delete: %v, left %v", err, f.VMs())
	}
	d, err := p.DescribeFleet(context.Background(), "us-central1", fl.ID)
	if err != nil || d.Instances != 0 || d.State != "ended" {
		t.Errorf("after delete: %+v %v", d, err)
	}
	deleted := clock
	clock = clock.Add(20 * time.Minute)
	rep, err = p.Usage(context.Background(), domain.UsageQuery{Kind: domain.KindFleet, ProviderRef: fl.ID, From: deleted.Add(-2 * time.Hour), To: clock})
	if err != nil || len(rep.Instances) != 3 {
		t.Fatalf("usage after delete: %+v %v", rep, err)
	}
	for _, u := range rep.Instances {
		if !u.Interrupted && !u.End.Equal(deleted) {
			t.Errorf("%s ended %s, deleted %s", u.ID, u.End, deleted)
		}
	}
}

// With the Ops Agent, busy is the mean of the VM's GPUs.
func TestFleetUsageReadsTheAgentsGPUMetric(t *testing.T) {
	p, _ := newTest(t, gcptest.Options{AgentGPU: true})
	p.opt.Image = "img"
	fl, err := p.LaunchFleet(context.Background(), domain.FleetSpec{Region: "us-central1", InstanceTypes: []string{"a2-highgpu-1g"}, TargetCapacity: 1, ClientToken: "01GPU"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rep, err := p.Usage(context.Background(), domain.UsageQuery{Kind: domain.KindFleet, ProviderRef: fl.ID, From: now.Add(-time.Hour), To: now.Add(10 * time.Minute)})
	if err != nil || len(rep.Instances) != 1 || !strings.Contains(rep.Source, "gpu/utilization") {
		t.Fatalf("usage %+v %v", rep, err)
	}
	if b := rep.Instances[0].Busy; len(b) == 0 || !near(b[0].Share, 0.85) {
		t.Errorf("busy %+v, want 0.85 (80 %% and 90 %%)", b)
	}
}

// What bulk insert cannot take is refused before any call.
func TestValidateFleet(t *testing.T) {
	p, _ := newTest(t, gcptest.Options{})
	max := 3.0
	for _, spec := range []domain.FleetSpec{
		{Region: "us-central1", InstanceTypes: []string{"g2-standard-8"}, TargetCapacity: 1}, // no image
	} {
		if _, err := p.ValidateFleet(spec); err == nil || !strings.Contains(err.Error(), "gcp.image") {
			t.Errorf("%+v: %v", spec, err)
		}
	}
	p.opt.Image = "img"
	for _, c := range []struct {
		spec domain.FleetSpec
		want string
	}{
		{domain.FleetSpec{Region: "us-east-1", InstanceTypes: []string{"g2-standard-8"}, TargetCapacity: 1}, "Google Cloud region"},
		{domain.FleetSpec{Region: "us-central1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 1}, "Google GPU machine type"},
		{domain.FleetSpec{Region: "us-central1", InstanceTypes: []string{"n1-standard-8+1xt4", "g2-standard-8"}, TargetCapacity: 1}, "alone"},
		{domain.FleetSpec{Region: "us-central1", InstanceTypes: []string{"g2-standard-8"}, TargetCapacity: 1, MaxPriceUSD: &max}, "no maximum price"},
		{domain.FleetSpec{Region: "us-central1", InstanceTypes: []string{"g2-standard-8"}, TargetCapacity: 1, Zones: []string{"us-east1-b"}}, "not in us-central1"},
	} {
		if _, err := p.ValidateFleet(c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
		}
	}
}
