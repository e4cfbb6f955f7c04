package domain

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestOfferingFigures(t *testing.T) {
	start := time.Date(2026, 12, 1, 11, 30, 0, 0, time.UTC)
	o := Offering{GPU: GPUSpec{Model: "H100", Count: 8}, InstanceCount: 2, Start: start, End: start.Add(48 * time.Hour), UpfrontUSD: 7680}
	if o.GPUCount() != 16 || o.DurationHours() != 48 || !near(o.USDPerGPUHour(), 10) {
		t.Fatalf("gpus %v hours %v $/GPU-h %v", o.GPUCount(), o.DurationHours(), o.USDPerGPUHour())
	}
	if got := o.CostTerms(); !strings.HasPrefix(got, "Total upfront: $7680.00 USD, non-refundable") || !strings.Contains(got, "$10.0000 per GPU-hour") {
		t.Errorf("block terms %q", got)
	}
	o.StartsOnPurchase = true
	if got := o.CostTerms(); !strings.HasPrefix(got, "Estimated cost: $7680.00 USD") || !strings.Contains(got, "until the reservation is deleted") || strings.Contains(got, "non-refundable") {
		t.Errorf("reservation terms %q", got)
	}
}

// TestCheckTermsNamesTheField: every screen's fleet check is this one; it
// takes the bounds themselves and names the field past them.
func TestCheckTermsNamesTheField(t *testing.T) {
	ok := FleetSpec{TargetCapacity: MaxInstances, OnDemandBase: MaxInstances, MaxPriceUSD: Float(0.01)}
	if err := ok.CheckTerms(); err != nil {
		t.Fatalf("the bounds themselves: %v", err)
	}
	for _, c := range []struct {
		edit  func(*FleetSpec)
		field string
	}{
		{func(s *FleetSpec) { s.TargetCapacity = 0 }, "target"},
		{func(s *FleetSpec) { s.TargetCapacity, s.OnDemandBase = MaxInstances+1, 0 }, "target"},
		{func(s *FleetSpec) { s.OnDemandBase = -1 }, "on-demand-base"},
		{func(s *FleetSpec) { s.TargetCapacity = 3 }, "on-demand-base"},
		{func(s *FleetSpec) { s.Strategy = "cheapest" }, "strategy"},
		{func(s *FleetSpec) { s.MaxPriceUSD = Float(math.NaN()) }, "max-price"},
	} {
		s := ok
		c.edit(&s)
		var fe *FleetError
		if err := s.CheckTerms(); !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: %v, want the %s refused", s, err, c.field)
		}
	}
}
