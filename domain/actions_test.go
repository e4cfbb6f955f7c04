package domain

import (
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
