package gcp

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/api/compute/v1"

	"github.com/gpumarket/gpumarket/cloud/gcp/gcptest"
	"github.com/gpumarket/gpumarket/domain"
)

// tickingClock moves a second on at every reading, so each VM of a bulk
// insert is created at a time of its own.
func tickingClock(start time.Time) func() time.Time {
	var n atomic.Int64
	return func() time.Time { return start.Add(time.Duration(n.Add(1)) * time.Second) }
}

// The future reservations named gpumarket-… and the VMs labelled by
// gpumarket come back as records, every list followed page by page: the
// reservation with its exact row id, actor and cost from its description,
// the fleet as one record whose start is its earliest VM's creation.
func TestListRecordsFromReservationsAndVMs(t *testing.T) {
	start := time.Now().UTC().Truncate(time.Second)
	p, f := newTest(t, gcptest.Options{PageSize: 1, Now: tickingClock(start)})
	p.opt.Image = "img"
	ctx := context.Background()
	o := findH100(t, p, 2)[0]
	actor := `ssh:SHA256:abc "alice" host`
	if _, err := p.Book(ctx, domain.BookRequest{Offering: o, Ref: "01KRES", Actor: actor}); err != nil {
		t.Fatal(err)
	}
	// Spot VMs (-s-) are made first, on-demand (-o-) after, and are
	// listed first by name: the earliest VM is not the first listed.
	fl, err := p.LaunchFleet(ctx, domain.FleetSpec{Region: "us-central1", InstanceTypes: []string{"g2-standard-8"}, TargetCapacity: 3,
		OnDemandBase: 1, ClientToken: "01KFLEET", Actor: "bob@host"})
	if err != nil || len(f.VMs()) != 3 {
		t.Fatalf("launch: %+v %v, VMs %v", fl, err, f.VMs())
	}
	// Not gpumarket's: another name, and a gpumarket-like name whose
	// description does not say it is gpumarket's.
	for _, name := range []string{"team-reservation", "gpumarket-by-hand"} {
		fr := &compute.FutureReservation{Name: name, Description: "made by hand",
			SpecificSkuProperties: &compute.FutureReservationSpecificSKUProperties{TotalCount: 1,
				InstanceProperties: &compute.AllocationSpecificSKUAllocationReservedInstanceProperties{MachineType: "a3-highgpu-8g"}},
			TimeWindow: &compute.FutureReservationTimeWindow{StartTime: o.Start.Format(time.RFC3339), EndTime: o.End.Format(time.RFC3339)}}
		if _, err := p.compute.FutureReservations.Insert(p.project, "us-central1-b", fr).Do(); err != nil {
			t.Fatal(err)
		}
	}

	recs, err := p.ListRecords(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records %+v, want the reservation and the fleet", len(recs), recs)
	}
	res, fleet := recs[0], recs[1]
	if res.Kind != domain.KindCalendar || res.Ref != "01KRES" || res.Actor != actor || res.OfferingID != o.ID || res.CostUSD != o.UpfrontUSD ||
		res.Zone != o.Zone || res.Region != o.Region || res.InstanceType != "a3-highgpu-8g" || res.InstanceCount != 2 ||
		!res.Start.Equal(o.Start) || !res.End.Equal(o.End) || res.State != "scheduled" || res.Cloud != domain.CloudGCP ||
		res.ProviderRef != "projects/"+gcptest.Project+"/zones/"+o.Zone+"/futureReservations/gpumarket-01kres" {
		t.Errorf("reservation record %+v", res)
	}
	var earliest, latest time.Time
	for _, name := range f.VMs() {
		c, _ := time.Parse(time.RFC3339, f.VM(name).CreationTimestamp)
		if earliest.IsZero() || c.Before(earliest) {
			earliest = c
		}
		if c.After(latest) {
			latest = c
		}
	}
	if !earliest.Before(latest) {
		t.Fatalf("the VMs were all made at %s: the test cannot tell the earliest", earliest)
	}
	if fleet.Kind != domain.KindFleet || fleet.ProviderRef != fl.ID || fleet.Ref != "01KFLEET" || fleet.Actor != "bob@host" ||
		fleet.Region != "us-central1" || fleet.InstanceType != "g2-standard-8" || fleet.InstanceCount != 3 || fleet.State != "active" ||
		!math.IsNaN(fleet.CostUSD) || !fleet.End.IsZero() {
		t.Errorf("fleet record %+v", fleet)
	}
	if !fleet.Start.Equal(earliest) || !fleet.CreatedAt.Equal(earliest) {
		t.Errorf("fleet start %s, created %s; want the earliest VM's creation %s", fleet.Start, fleet.CreatedAt, earliest)
	}
	for _, call := range []string{"futureReservations.aggregatedList", "instances.aggregatedList"} {
		if f.Calls[call] < 2 {
			t.Errorf("%s called %d times: the list was not paged", call, f.Calls[call])
		}
	}

	// Since the fleet's launch: the reservation is older.
	recs, err = p.ListRecords(ctx, earliest)
	if err != nil || len(recs) != 1 || recs[0].Kind != domain.KindFleet {
		t.Errorf("records since %s: %+v %v; want the fleet only", earliest, recs, err)
	}
}

// A fleet with an end carries it on its VMs (terminationTime): the
// record's end.
func TestFleetRecordEndsAtTheVMsTerminationTime(t *testing.T) {
	p, _ := newTest(t, gcptest.Options{})
	p.opt.Image = "img"
	end := time.Now().UTC().Add(3 * time.Hour).Truncate(time.Second)
	if _, err := p.LaunchFleet(context.Background(), domain.FleetSpec{Region: "us-central1", InstanceTypes: []string{"g2-standard-8"},
		TargetCapacity: 1, ClientToken: "01KEND", End: end}); err != nil {
		t.Fatal(err)
	}
	recs, err := p.ListRecords(context.Background(), time.Time{})
	if err != nil || len(recs) != 1 || !recs[0].End.Equal(end) {
		t.Fatalf("records %+v %v; want one fleet ending %s", recs, err, end)
	}
}

// The description round-trips any value, spaces and quotes included.
func TestDescribedTagsReadBack(t *testing.T) {
	in := map[string]string{domain.TagRef: "01ROW", domain.TagActor: `ssh:SHA256:x "a b" c`, TagCost: "12.5", domain.TagTool: domain.ToolName}
	got := readTags(describeTags(in))
	if len(got) != len(in) {
		t.Fatalf("read %v from %q", got, describeTags(in))
	}
	for k, v := range in {
		if got[k] != v {
			t.Errorf("%s: read %q, wrote %q", k, got[k], v)
		}
	}
}
