package gcp

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
	monitoring "google.golang.org/api/monitoring/v3"

	"github.com/gpumarket/gpumarket/cloud/gcp/gcptest"
	"github.com/gpumarket/gpumarket/domain"
)

// Billing and Monitoring put an error's reason in a google.rpc.ErrorInfo
// detail, with no "errors" list; Compute keeps it in "errors". Each
// reason is named in the one-line error.
func TestErrorInfoReasonIsNamed(t *testing.T) {
	p, f := newTest(t, gcptest.Options{})
	f.Fail("services.skus.list", 403, "SERVICE_DISABLED", "Cloud Billing API has not been used in project gpumarket-test before or it is disabled.")
	err := p.Fetch(context.Background(), domain.FetchRequest{Until: time.Now(), Backfill: true}, func(domain.Event) {})
	var ge *googleapi.Error
	if !errors.As(err, &ge) || len(ge.Errors) != 0 || len(ge.Details) != 1 {
		t.Fatalf("billing error %v: want an ErrorInfo detail and no errors list", err)
	}
	if !strings.Contains(err.Error(), "403 SERVICE_DISABLED: Cloud Billing API") || strings.Contains(err.Error(), "\n") {
		t.Errorf("billing error %q: want one line naming the reason", err)
	}

	p.opt.Image = "img"
	fl, err := p.LaunchFleet(context.Background(), domain.FleetSpec{Region: "us-central1", InstanceTypes: []string{"g2-standard-8"}, TargetCapacity: 1, ClientToken: "01INFO"})
	if err != nil {
		t.Fatal(err)
	}
	f.Fail("projects.timeSeries.list", 403, "IAM_PERMISSION_DENIED", "Permission monitoring.timeSeries.list denied on resource.")
	_, err = p.Usage(context.Background(), domain.UsageQuery{Kind: domain.KindFleet, ProviderRef: fl.ID, From: time.Now().Add(-time.Hour), To: time.Now()})
	if err == nil || !strings.Contains(err.Error(), "403 IAM_PERMISSION_DENIED: Permission") {
		t.Errorf("monitoring error %v: want the reason named", err)
	}

	f.Fail("machineTypes.aggregatedList", 403, "forbidden", "Required 'compute.machineTypes.list' permission.")
	p.mu.Lock()
	p.types = cached[[]machine]{}
	p.mu.Unlock()
	err = p.Fetch(context.Background(), domain.FetchRequest{Until: time.Now(), Backfill: true}, func(domain.Event) {})
	if !errors.As(err, &ge) || len(ge.Errors) != 1 || !strings.Contains(err.Error(), "403 forbidden: Required") {
		t.Errorf("compute error %v: want its errors list's reason", err)
	}
}

// An operation is PENDING when made, RUNNING when first asked, and shows
// its error only once DONE; the provider waits for that and says it in
// one line.
func TestOperationErrorIsShownWhenDone(t *testing.T) {
	p, f := newTest(t, gcptest.Options{OpPolls: 3})
	o := findH100(t, p, 1)[0]
	f.FailOperation("futureReservations.insert", "QUOTA_EXCEEDED", "Quota 'GPUS_ALL_REGIONS' exceeded.")
	zone := o.Zone
	fr := &compute.FutureReservation{Name: "gpumarket-01ops", ReservationMode: "CALENDAR",
		SpecificSkuProperties: &compute.FutureReservationSpecificSKUProperties{TotalCount: 1,
			InstanceProperties: &compute.AllocationSpecificSKUAllocationReservedInstanceProperties{MachineType: o.InstanceType}},
		TimeWindow: &compute.FutureReservationTimeWindow{StartTime: o.Start.UTC().Format(time.RFC3339), EndTime: o.End.UTC().Format(time.RFC3339)}}
	op, err := p.compute.FutureReservations.Insert(p.project, zone, fr).Do()
	if err != nil || op.Status != "PENDING" || op.Error != nil {
		t.Fatalf("insert answered %+v %v: want PENDING with no error yet", op, err)
	}
	var seen []string
	for op.Status != "DONE" {
		if op, err = p.compute.ZoneOperations.Get(p.project, zone, op.Name).Do(); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, op.Status)
		if op.Status != "DONE" && (op.Error != nil || op.HttpErrorStatusCode != 0) {
			t.Errorf("%s operation carries an error: %+v", op.Status, op.Error)
		}
	}
	if strings.Join(seen, " ") != "RUNNING RUNNING DONE" || op.Error == nil || op.HttpErrorStatusCode != 400 {
		t.Fatalf("polls saw %v, done with %+v", seen, op.Error)
	}
	werr := &opError{what: "book", op: op}
	if !strings.Contains(werr.Error(), "QUOTA_EXCEEDED: Quota") || !errors.Is(werr, domain.ErrDeclined) {
		t.Errorf("said %q", werr)
	}

	// Through the provider: a failed bulk insert is one line once done.
	p.opt.Image = "img"
	f.FailOperation("regionInstances.bulkInsert", "ZONE_RESOURCE_POOL_EXHAUSTED", "The zone does not have enough resources available.\nTry later.")
	_, err = p.LaunchFleet(context.Background(), domain.FleetSpec{Region: "us-central1", InstanceTypes: []string{"g2-standard-8"}, TargetCapacity: 2, ClientToken: "01FULL"})
	if err == nil || !Declined(err) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "ZONE_RESOURCE_POOL_EXHAUSTED") {
		t.Errorf("failed bulk insert: %v", err)
	}
	if f.Calls["regionOperations.get"] < 3 {
		t.Errorf("the bulk insert's operation was asked %d times: not waited for", f.Calls["regionOperations.get"])
	}
}

// Monitoring's pageSize counts points: one VM's hour of 5-minute points
// comes over several pages, the series cut between them, and the usage
// read from them is the whole run.
func TestUsageOfSeriesSplitOverPages(t *testing.T) {
	clock := time.Now().UTC().Truncate(time.Hour).Add(-2*time.Hour + 2*time.Minute)
	p, _ := newTest(t, gcptest.Options{Now: func() time.Time { return clock }, PageSize: 3})
	p.opt.Image = "img"
	fl, err := p.LaunchFleet(context.Background(), domain.FleetSpec{Region: "us-central1", InstanceTypes: []string{"g2-standard-8"}, TargetCapacity: 1, ClientToken: "01PAGES"})
	if err != nil {
		t.Fatal(err)
	}
	launched := clock
	clock = clock.Add(time.Hour)

	var pages, points int
	names := map[string]int{}
	filter := `metric.type = "` + metricUptime + `" AND resource.type = "gce_instance" AND metadata.user_labels."` + labelFleet + `" = "` + fl.ID + `"`
	err = p.monitor.Projects.TimeSeries.List("projects/"+p.project).Filter(filter).
		IntervalStartTime(launched.Add(-10*time.Minute).Format(time.RFC3339)).IntervalEndTime(clock.Format(time.RFC3339)).
		AggregationAlignmentPeriod("300s").AggregationPerSeriesAligner("ALIGN_SUM").
		Pages(context.Background(), func(r *monitoring.ListTimeSeriesResponse) error {
			pages++
			n := 0
			for _, ts := range r.TimeSeries {
				n += len(ts.Points)
				names[ts.Resource.Labels["instance_id"]]++
			}
			if n > 3 {
				t.Errorf("page %d has %d points, more than its size 3", pages, n)
			}
			points += n
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || pages < 4 || points < 12 {
		t.Fatalf("%d series over %d pages, %d points: want one series cut over the pages", len(names), pages, points)
	}

	rep, err := p.Usage(context.Background(), domain.UsageQuery{Kind: domain.KindFleet, ProviderRef: fl.ID, From: launched.Add(-10 * time.Minute), To: clock})
	if err != nil || len(rep.Instances) != 1 {
		t.Fatalf("usage %+v %v", rep, err)
	}
	if u := rep.Instances[0]; !u.Start.Equal(launched) || !u.End.IsZero() || len(u.Busy) < 12 {
		t.Errorf("usage %+v: want started %s, running, busy in every period", u, launched)
	}
}

// A Retry-After given as an HTTP date is waited out until that time.
func TestRetryAfterIsHonoured(t *testing.T) {
	p, f := newTest(t, gcptest.Options{})
	at := time.Now().Add(2 * time.Second).UTC()
	f.ThrottleRetryAfter(503, at.Format(http.TimeFormat))
	if _, err := p.compute.MachineTypes.AggregatedList(p.project).MaxResults(1).Do(); err != nil {
		t.Fatal(err)
	}
	if now := time.Now(); now.Before(at.Truncate(time.Second)) {
		t.Errorf("answered at %s, before the Retry-After %s", now.Format(time.RFC3339Nano), at.Format(http.TimeFormat))
	}
	for _, c := range []struct {
		header string
		want   time.Duration
	}{
		{"Sun, 06 Dec 2026 12:00:30 GMT", 30 * time.Second},
		{"Sun, 06 Dec 2026 11:59:00 GMT", 0},
		{"Sun, 06 Dec 2026 13:00:00 GMT", time.Minute},
		{"7", 7 * time.Second},
	} {
		now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
		if got := backoff(time.Millisecond, 0, c.header, now); got != c.want {
			t.Errorf("Retry-After %q: waited %s, want %s", c.header, got, c.want)
		}
	}
}

// A booking searched for by its terms (no name: its ledger row was lost)
// is found on a later page of the zone's future reservations.
func TestBookingFoundByTermsOnALaterPage(t *testing.T) {
	p, f := newTest(t, gcptest.Options{PageSize: 1})
	offs := findH100(t, p, 1)
	var inZone []domain.Offering
	for _, o := range offs {
		if o.Zone == offs[0].Zone {
			inZone = append(inZone, o)
		}
	}
	if len(inZone) < 2 {
		t.Fatalf("%d windows in %s, want two or more", len(inZone), offs[0].Zone)
	}
	refs := []string{"01AAA", "01ZZZ"} // listed by name: the last is on the last page
	for i, o := range inZone[:2] {
		if _, err := p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: refs[i]}); err != nil {
			t.Fatal(err)
		}
	}
	before := f.Calls["futureReservations.list"]
	got, err := p.FindBooking(context.Background(), domain.BookRequest{Offering: inZone[1]})
	if err != nil || got == nil || !strings.HasSuffix(got.ProviderRef, "/gpumarket-01zzz") {
		t.Fatalf("found %+v %v, want gpumarket-01zzz", got, err)
	}
	if n := f.Calls["futureReservations.list"] - before; n < 2 {
		t.Errorf("the list was asked %d times: the match was not on a later page", n)
	}
}
