package domain

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestPerGPUHourAndSavings(t *testing.T) {
	if got := PerGPUHour(55.04, 8); !near(got, 6.88) {
		t.Errorf("p5 per GPU = %v", got)
	}
	if got := PerGPUHour(0.45, 1.0/6); !near(got, 2.7) {
		t.Errorf("NV6ads_A10_v5 per GPU = %v", got)
	}
	if !math.IsNaN(PerGPUHour(1, 0)) {
		t.Error("0 GPUs should be NaN")
	}
	if got := SavingsPct(0.3, 1); !near(got, 70) {
		t.Errorf("savings = %v", got)
	}
	if !math.IsNaN(SavingsPct(1, 0)) {
		t.Error("unknown on-demand should be NaN")
	}
}

func TestNormalizeBucket(t *testing.T) {
	for in, want := range map[string]string{
		"<5%": "<5%", "0-5": "<5%", "5-10": "5-10%", "5-10%": "5-10%", "10-15": "10-15%",
		"15-20 %": "15-20%", "20+": ">20%", ">20%": ">20%",
	} {
		if got, ok := NormalizeBucket(in); !ok || got != want {
			t.Errorf("NormalizeBucket(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "high", "5", "25-30"} {
		if _, ok := NormalizeBucket(bad); ok {
			t.Errorf("NormalizeBucket(%q) accepted", bad)
		}
	}
	if BucketRank("<5%") >= BucketRank(">20%") || BucketRank("?") != len(Buckets) {
		t.Error("bucket ranks out of order")
	}
}
