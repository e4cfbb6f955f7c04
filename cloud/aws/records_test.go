package aws

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
)

// Nothing on the cloud side recorded which purchases gpumarket
// made, so a lost ledger could not be rebuilt.
func TestListRecordsRebuildsTheLedgerFromTags(t *testing.T) {
	f := newFixture(t)
	f.fake.MaxPage = 1
	p := f.provider(t, func(o *Options) { o.LaunchTemplate = "lt-1"; o.Regions = []string{"us-east-1", "us-west-2"} })
	ctx := context.Background()
	o := firstOffering(t, p)
	b, err := p.Book(ctx, domain.BookRequest{Offering: o, After: testNow, Ref: "L1", Actor: "alice@host"})
	if err != nil {
		t.Fatal(err)
	}
	instant, err := p.LaunchFleet(ctx, domain.FleetSpec{Region: "us-west-2", InstanceTypes: []string{"g6.xlarge"}, Zones: []string{"us-west-2b"},
		TargetCapacity: 2, ClientToken: "L2", Actor: "bob@host"})
	if err != nil {
		t.Fatal(err)
	}
	start := testNow.Add(time.Hour)
	sched, err := p.LaunchFleet(ctx, domain.FleetSpec{Region: "us-east-1", InstanceTypes: []string{"g6e.xlarge", "g6.xlarge"},
		TargetCapacity: 3, ClientToken: "L3", Actor: "carol@host", Start: start, End: start.Add(3 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	// Not gpumarket's: an untagged look-alike reservation.
	f.fake.AddReservation(ec2test.Reservation{Region: o.Region, InstanceType: o.InstanceType, Zone: o.Zone, Count: 1,
		Start: o.Start, End: o.End, Created: testNow, State: "scheduled"})
	// Older than asked for.
	f.fake.AddReservation(ec2test.Reservation{Region: "us-west-2", InstanceType: "p5.48xlarge", Zone: "us-west-2a", Count: 1,
		Start: testNow.Add(-96 * time.Hour), End: testNow.Add(-72 * time.Hour), Created: testNow.Add(-100 * time.Hour), State: "expired",
		Tags: domain.Tags("L0", "alice@host", "cb-old")})

	recs, err := p.ListRecords(ctx, testNow.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	byRef := map[string]domain.CloudRecord{}
	for _, r := range recs {
		byRef[r.Ref] = r
	}
	if len(recs) != 3 || len(byRef) != 3 {
		t.Fatalf("%d records %+v, want the block and the two fleets", len(recs), recs)
	}
	blk := byRef["L1"]
	if blk.Kind != domain.KindBlock || blk.ProviderRef != b.ProviderRef || blk.Actor != "alice@host" || blk.OfferingID != o.ID ||
		blk.InstanceCount != o.InstanceCount || !blk.Start.Equal(o.Start) || !blk.End.Equal(o.End) || blk.State != "scheduled" ||
		blk.Region != o.Region || blk.Zone != o.Zone || blk.InstanceType != o.InstanceType || blk.CostUSD != o.UpfrontUSD || blk.Cloud != domain.CloudAWS {
		t.Errorf("block record %+v", blk)
	}
	ins := byRef["L2"]
	if ins.Kind != domain.KindFleet || ins.ProviderRef != instant.ID || ins.Actor != "bob@host" || ins.Region != "us-west-2" ||
		ins.InstanceType != "g6.xlarge" || ins.Zone != "us-west-2b" || ins.InstanceCount != 2 || ins.State != "active" || !ins.End.IsZero() {
		t.Errorf("instant fleet record %+v", ins)
	}
	sc := byRef["L3"]
	if sc.Kind != domain.KindFleet || sc.ProviderRef != sched.ID || sc.Actor != "carol@host" || sc.InstanceType != "g6e.xlarge,g6.xlarge" ||
		sc.InstanceCount != 3 || sc.State != "scheduled" || !sc.Start.Equal(start) || !sc.End.Equal(start.Add(3*time.Hour)) {
		t.Errorf("scheduled fleet record %+v", sc)
	}
	// Everything since the old one includes it.
	recs, err = p.ListRecords(ctx, time.Time{})
	if err != nil || len(recs) != 4 || recs[0].Ref != "L0" || recs[0].State != "ended" {
		t.Errorf("all records: %+v, %v; want 4, oldest first", recs, err)
	}
}

func TestListRecordsReportsARegionThatDidNotAnswer(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, func(o *Options) { o.Regions = []string{"us-east-1", "us-west-2"} })
	o := firstOffering(t, p)
	if _, err := p.Book(context.Background(), domain.BookRequest{Offering: o, After: testNow, Ref: "L1"}); err != nil {
		t.Fatal(err)
	}
	other := "us-west-2"
	if o.Region == other {
		other = "us-east-1"
	}
	f.fake.AddFault(ec2test.Fault{Action: "DescribeCapacityReservations", Region: other, Status: 400, Code: "UnauthorizedOperation", Message: "no"})
	recs, err := p.ListRecords(context.Background(), time.Time{})
	if err == nil || len(recs) != 1 || recs[0].Ref != "L1" {
		t.Errorf("records %+v, err %v; want the answering region's record and an error naming %s", recs, err, other)
	}
	if err != nil && !strings.Contains(err.Error(), other) {
		t.Errorf("error %v does not name %s", err, other)
	}
}

// TestBlockRecordKeepsWhatItCost: AWS shows no price of a capacity block,
// so a ledger rebuilt from the clouds' tags had no cost for any block
// (and the day's spending could not be known). The purchase carries its
// fee as a tag, as Azure's reservations do (azure.TagCost), and the
// record reads it back; a block of an earlier version, without the tag,
// stays of unknown cost.
func TestBlockRecordKeepsWhatItCost(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, func(o *Options) { o.Regions = []string{"us-east-1"} })
	ctx := context.Background()
	o := firstOffering(t, p)
	if _, err := p.Book(ctx, domain.BookRequest{Offering: o, After: testNow, Ref: "L1", Actor: "alice@host"}); err != nil {
		t.Fatal(err)
	}
	res := f.fake.Reservations()
	if len(res) != 1 || res[0].Tags[TagCost] == "" {
		t.Fatalf("the purchase carries no %s tag: %+v", TagCost, res)
	}
	f.fake.AddReservation(ec2test.Reservation{Region: "us-east-1", InstanceType: "p5.48xlarge", Zone: "us-east-1a", Count: 1,
		Start: testNow.Add(96 * time.Hour), End: testNow.Add(120 * time.Hour), Created: testNow, State: "scheduled",
		Tags: domain.Tags("L0", "alice@host", "cb-old")})
	for _, bad := range []string{"NaN", "-5", "Inf", "a lot"} {
		f.fake.AddReservation(ec2test.Reservation{Region: "us-east-1", InstanceType: "p5.48xlarge", Zone: "us-east-1a", Count: 1,
			Start: testNow.Add(96 * time.Hour), End: testNow.Add(120 * time.Hour), Created: testNow, State: "scheduled",
			Tags: map[string]string{domain.TagRef: "bad-" + bad, domain.TagTool: domain.ToolName, TagCost: bad}})
	}
	recs, err := p.ListRecords(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 6 {
		t.Fatalf("%d records, want 6: %+v", len(recs), recs)
	}
	for _, r := range recs {
		switch {
		case r.Ref == "L1":
			if r.CostUSD != o.UpfrontUSD {
				t.Errorf("the block bought for $%v reads $%v", o.UpfrontUSD, r.CostUSD)
			}
		case !math.IsNaN(r.CostUSD):
			t.Errorf("record %s (cost tag %q) reads $%v, want unknown", r.Ref, r.Ref, r.CostUSD)
		}
	}
}
