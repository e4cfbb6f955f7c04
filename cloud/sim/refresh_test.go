package sim

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// clockAt is a market whose clock the test moves.
func clockAt(now *time.Time) *Market {
	return New(Options{Seed: 1, Now: func() time.Time { return *now }})
}

// TestRefreshOfferingBlocks: a block is described again on the terms the
// market sells it at now — the same while today's date is the same, at
// the next day's price the day after — under an id the market accepts;
// one bought or started is gone.
func TestRefreshOfferingBlocks(t *testing.T) {
	now := wed
	m := clockAt(&now)
	offs, err := m.FindOfferings(ctx, domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var o domain.Offering
	for _, c := range offs {
		if c.Kind == domain.KindBlock && c.Start.Sub(now) > 72*time.Hour {
			o = c
			break
		}
	}
	if o.ID == "" {
		t.Fatal("no capacity block starting in more than three days to check")
	}
	same, err := m.RefreshOffering(ctx, o)
	if err != nil || !reflect.DeepEqual(same, o) {
		t.Fatalf("refreshed the same day: %+v, %v; want %+v", same, err, o)
	}
	// A day later the lead time is a day shorter: dearer, and another id.
	now = wed.Add(24 * time.Hour)
	next, err := m.RefreshOffering(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if !next.Start.Equal(o.Start) || !next.End.Equal(o.End) || next.InstanceCount != o.InstanceCount || !(next.UpfrontUSD > o.UpfrontUSD) || next.ID == o.ID {
		t.Fatalf("a day later: %+v\nwas %+v: want the same block dearer, under a new id", next, o)
	}
	// The re-described offering is one the market sells: it can be bought.
	if _, err := m.Book(ctx, domain.BookRequest{Offering: next, Ref: "01ROW", Actor: "alice"}); err != nil {
		t.Fatalf("book the re-described offering: %v", err)
	}
	if _, err := m.RefreshOffering(ctx, o); !errors.Is(err, domain.ErrOfferingGone) {
		t.Fatalf("after it was bought: %v", err)
	}
	// Started: gone.
	var other domain.Offering
	for _, c := range offs {
		if !c.StartsOnPurchase && c.ID != o.ID {
			other = c
		}
	}
	if other.ID == "" {
		t.Fatal("no second block to check")
	}
	now = other.Start
	if _, err := m.RefreshOffering(ctx, other); !errors.Is(err, domain.ErrOfferingGone) {
		t.Fatalf("after its start: %v", err)
	}
	// Not the market's.
	foreign := o
	foreign.Provider, foreign.Simulated = "aws", false
	if _, err := m.RefreshOffering(ctx, foreign); !errors.Is(err, domain.ErrOfferingGone) {
		t.Fatalf("an offering of another provider: %v", err)
	}
}

// TestRefreshOfferingReservations: a reservation starts when it is
// bought: described an hour later it starts then, ends as before, costs
// the same per hour (an hour less in all) and can be bought.
func TestRefreshOfferingReservations(t *testing.T) {
	now := wed
	m := clockAt(&now)
	offs, err := m.FindOfferings(ctx, domain.OfferingQuery{GPU: "A100", Instances: 1, Duration: 36 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) == 0 || !offs[0].StartsOnPurchase {
		t.Fatalf("no reservation to check: %+v", offs)
	}
	o := offs[0]
	now = wed.Add(time.Hour)
	fresh, err := m.RefreshOffering(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	rate := func(x domain.Offering) float64 { return x.UpfrontUSD / x.DurationHours() }
	if !fresh.Start.Equal(now) || !fresh.End.Equal(o.End) || math.Abs(rate(fresh)-rate(o)) > 0.01 || fresh.UpfrontUSD >= o.UpfrontUSD {
		t.Fatalf("an hour later: %+v\nwas %+v", fresh, o)
	}
	if _, err := m.Book(ctx, domain.BookRequest{Offering: fresh}); err != nil {
		t.Fatalf("book the re-described reservation: %v", err)
	}
}

// TestListRecords: what the market sold and launched in this process is
// listed with the tags of the calls.
func TestListRecords(t *testing.T) {
	now := wed
	m := clockAt(&now)
	offs, err := m.FindOfferings(ctx, domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour})
	if err != nil || len(offs) == 0 {
		t.Fatalf("%d offerings, %v", len(offs), err)
	}
	o := offs[0]
	bk, err := m.Book(ctx, domain.BookRequest{Offering: o, Ref: "01ROWBLOCK", Actor: "alice@host"})
	if err != nil {
		t.Fatal(err)
	}
	fl, err := m.LaunchFleet(ctx, domain.FleetSpec{Provider: Name, Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"},
		TargetCapacity: 2, OnDemandBase: 1, Strategy: domain.StrategyLowestPrice, ClientToken: "01ROWFLEET", Actor: "bob@host"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := m.ListRecords(ctx, wed.Add(-time.Hour))
	if err != nil || len(recs) != 2 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	byRef := map[string]domain.CloudRecord{}
	for _, r := range recs {
		byRef[r.Ref] = r
	}
	b, f := byRef["01ROWBLOCK"], byRef["01ROWFLEET"]
	if b.ProviderRef != bk.ProviderRef || b.OfferingID != o.ID || b.Actor != "alice@host" || b.Kind != o.Terms().Kind || b.CostUSD != o.UpfrontUSD || !b.Start.Equal(o.Start) {
		t.Fatalf("block record %+v", b)
	}
	if f.ProviderRef != fl.ID || f.Kind != domain.KindFleet || f.Actor != "bob@host" || f.InstanceCount != 2 || f.State != "active" {
		t.Fatalf("fleet record %+v", f)
	}
	if recs, _ := m.ListRecords(ctx, wed.Add(time.Hour)); len(recs) != 0 {
		t.Fatalf("records since after both: %+v", recs)
	}
}
