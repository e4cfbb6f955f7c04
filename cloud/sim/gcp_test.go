package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// A Google pool's Spot price changes at most once in 30 days, stays in
// the band, and the price in force agrees with the points.
func TestGooglePricesStepMonthly(t *testing.T) {
	m := newAt(1, wed)
	from, to := wed.Add(-90*24*time.Hour).Unix(), wed.Unix()
	n := 0
	for _, p := range m.pools {
		if p.spec.Desc.Cloud != domain.CloudGCP {
			continue
		}
		n++
		at, q := p.model.appendTicks(nil, nil, from, to, nil)
		if len(at) < 2 || len(at) > 4 {
			t.Fatalf("%s: %d changes in 90 days, want 2 to 4 (a month apart)", p.spec.Desc.Key(), len(at))
		}
		for i := range at {
			if i > 0 && at[i]-at[i-1] != monthSec {
				t.Errorf("%s: changes %d s apart", p.spec.Desc.Key(), at[i]-at[i-1])
			}
			ratio := float64(q[i]) / priceScale / *p.spec.Desc.OnDemandUSDHour
			if ratio < ratioLo-1e-4 || ratio > ratioHi+1e-4 {
				t.Errorf("%s: spot %.1f %% of on-demand, out of the band", p.spec.Desc.Key(), 100*ratio)
			}
			if a, v := p.model.inForceTicks(at[i]+1, nil); a != at[i] || v != q[i] {
				t.Errorf("%s: in force after %d is %d %d, want the point %d", p.spec.Desc.Key(), at[i], a, v, q[i])
			}
		}
	}
	if n == 0 {
		t.Fatal("no Google pools")
	}
}

// Calendar-mode offerings: kind gcp-calendar, days from 00:00 UTC, whole
// days only, priced at on-demand over the window; booked through Book.
func TestGoogleCalendarOfferings(t *testing.T) {
	m := newAt(1, wed)
	offs, err := m.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 2, Duration: 72 * time.Hour,
		Regions: []string{"us-central1", "us-east4", "us-east5", "europe-west4", "asia-northeast1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) == 0 {
		t.Fatal("no Google calendar offerings")
	}
	for _, o := range offs {
		if o.Kind != domain.KindCalendar || o.Cloud != domain.CloudGCP || o.Start.Hour() != 0 || o.Start.Minute() != 0 ||
			!strings.HasPrefix(o.ID, "gcpcal-") || o.StartsOnPurchase {
			t.Errorf("offering %+v", o)
		}
		od := *m.byKey[domain.PoolKey{Provider: Name, Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType}.String()].spec.Desc.OnDemandUSDHour
		if want := od * 2 * 72; o.UpfrontUSD < want-0.01 || o.UpfrontUSD > want+0.01 {
			t.Errorf("%s: %.2f, want %.2f", o.ID, o.UpfrontUSD, want)
		}
	}
	b, err := m.Book(context.Background(), domain.BookRequest{Offering: offs[0], Ref: "r1"})
	if err != nil || !strings.Contains(b.ProviderRef, "/futureReservations/") || b.State != "scheduled" {
		t.Fatalf("book: %+v %v", b, err)
	}
	if _, err := m.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 2, Duration: 36 * time.Hour, Regions: []string{"us-central1"}}); err != nil {
		t.Fatalf("36 h (no calendar, no block): %v", err)
	}
}

// A Google Spot fleet launches in the sim; a max price is refused.
func TestGoogleSpotFleet(t *testing.T) {
	m := newAt(1, wed)
	spec := domain.FleetSpec{Region: "us-central1", InstanceTypes: []string{"g2-standard-8"}, TargetCapacity: 2, ClientToken: "t1"}
	f, err := m.LaunchFleet(context.Background(), spec)
	if err != nil || f.Target != 2 {
		t.Fatalf("launch: %+v %v", f, err)
	}
	price := 1.0
	spec.ClientToken, spec.MaxPriceUSD = "t2", &price
	if _, err := m.LaunchFleet(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "no maximum price") {
		t.Errorf("max price: %v", err)
	}
}
