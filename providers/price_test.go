package providers

import (
	"math"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestRatePerHour(t *testing.T) {
	for _, tc := range []struct {
		p, want float64
	}{
		{0, 0},
		{0.05, -math.Log(0.95) / 720}, // "<5%"
		{0.10, -math.Log(0.90) / 720}, // "5-10%"
		{0.30, 0.000495381866581573},  // open ">20%" bucket: −ln(0.7)/720
	} {
		if got := RatePerHour(tc.p); !near(got, tc.want) {
			t.Errorf("RatePerHour(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if !math.IsInf(RatePerHour(1), 1) {
		t.Error("RatePerHour(1) should be +Inf")
	}
}

func TestEffectiveKnownValues(t *testing.T) {
	// A pool in the ">20%" bucket (p = 0.30): λ = 4.9539e-4 per hour.
	// Defaults c = 0.25 h, r = 0.1 h: loss = λ·(0.125 + 0.1) = 1.11462e-4.
	in, _ := NewInterruption(">20%", "test", time.Time{})
	lambda, ok := in.Rate()
	if !ok || !near(lambda, 0.000495381866581573) {
		t.Fatalf("rate = %v %v", lambda, ok)
	}
	loss := DefaultRisk.LossShare(lambda)
	if !near(loss, 0.000495381866581573*0.225) {
		t.Fatalf("loss = %v", loss)
	}
	// $2.00 per GPU-hour on spot costs 2 / (1 − loss) per useful GPU-hour.
	if got, want := DefaultRisk.Effective(2, lambda), 2/(1-0.000495381866581573*0.225); !near(got, want) {
		t.Fatalf("effective = %v, want %v", got, want)
	}
	// 64 instances, 4 h checkpoints, 1 h restart: n·λ·(c/2+r) = 64·λ·3.
	r := RiskParams{CheckpointInterval: 4 * time.Hour, RestartOverhead: time.Hour, Instances: 64}
	if got, want := r.LossShare(lambda), 64*0.000495381866581573*3; !near(got, want) {
		t.Fatalf("64-instance loss = %v, want %v", got, want)
	}
	// The cap: a job that would lose more than 95 % loses 95 %.
	huge := RiskParams{CheckpointInterval: 1000 * time.Hour, Instances: 1000}
	if got := huge.LossShare(lambda); got != MaxLoss {
		t.Fatalf("capped loss = %v", got)
	}
	if got := huge.Effective(1, lambda); !near(got, 20) {
		t.Fatalf("capped effective = %v, want 20", got)
	}
	// Blocks and on-demand: λ = 0, no adjustment.
	if got := DefaultRisk.Effective(3.5, 0); got != 3.5 {
		t.Fatalf("λ=0 effective = %v", got)
	}
}

func TestObservedRateReplacesBucket(t *testing.T) {
	in, _ := NewInterruption("<5%", "test", time.Time{})
	obs := 0.01
	in.ObservedPerHour = &obs
	if l, ok := in.Rate(); !ok || l != 0.01 {
		t.Fatalf("rate = %v %v, want the observed 0.01", l, ok)
	}
	var none *Interruption
	if _, ok := none.Rate(); ok {
		t.Fatal("nil interruption has a rate")
	}
}

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
