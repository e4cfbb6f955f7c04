package domain

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestTrainingPlanTerms(t *testing.T) {
	tp := TermsOfKind(KindTrainingPlan)
	if tp != TrainingPlanTerms {
		t.Fatalf("TermsOfKind(%q) = %v: the kind is not in AllTerms", KindTrainingPlan, tp)
	}
	for n := -1; n <= 65; n++ {
		want := n == 1 || n == 2 || n == 4 || n == 8 || n == 16 || n == 32 || n == 64
		if got := tp.ValidCount(n); got != want {
			t.Errorf("ValidCount(%d) = %v, want %v", n, got, want)
		}
	}
	if err := tp.ValidInstances(3); err == nil || !strings.Contains(err.Error(), "1, 2, 4, 8, 16, 32 or 64") {
		t.Errorf("ValidInstances(3) = %v, want the accepted counts named", err)
	}
	for _, c := range []struct {
		d  time.Duration
		ok bool
	}{{24 * time.Hour, true}, {48 * time.Hour, true}, {182 * 24 * time.Hour, true}, {183 * 24 * time.Hour, false},
		{36 * time.Hour, false}, {12 * time.Hour, false}, {15 * 24 * time.Hour, true}} {
		err := tp.ValidDuration(c.d)
		if (err == nil) != c.ok {
			t.Errorf("ValidDuration(%s) = %v, want ok %v", c.d, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "whole days, 1 to 182") {
			t.Errorf("ValidDuration(%s) = %v: does not name what is accepted", c.d, err)
		}
	}
	// A block's count keeps its own rule: 1 to 64, any number.
	if !CapacityBlockTerms.ValidCount(3) || CapacityBlockTerms.ValidCount(65) {
		t.Error("capacity block counts changed")
	}
}

func TestSegmentsHoldOnlyTheirHours(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 11, 30, 0, 0, time.UTC)
	o := Offering{GPU: GPUSpec{Model: "H100", Count: 8}, InstanceCount: 2, Start: t0, End: t0.Add(72 * time.Hour), UpfrontUSD: 48 * 16 * 5,
		Segments: []Segment{{Start: t0, End: t0.Add(24 * time.Hour)}, {Start: t0.Add(48 * time.Hour), End: t0.Add(72 * time.Hour)}}}
	if h := o.HeldHours(); h != 48 {
		t.Errorf("HeldHours = %v, want 48 (the day between the segments is not held)", h)
	}
	if r := o.USDPerGPUHour(); math.Abs(r-5) > 1e-9 {
		t.Errorf("USDPerGPUHour = %v, want 5 (fee over the held GPU-hours)", r)
	}
	if w := (Offering{Start: t0, End: t0.Add(time.Hour), InstanceCount: 3}).Windows(); len(w) != 1 || w[0].InstanceCount != 3 || !w[0].End.Equal(t0.Add(time.Hour)) {
		t.Errorf("a block's Windows = %+v, want its one window", w)
	}
}
