package planner

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

func pool(model string, gpus float64, bucket string) domain.Pool {
	p := domain.Pool{Provider: "aws", Cloud: domain.CloudAWS, Region: "us-east-1", Zone: "us-east-1a", InstanceType: "x",
		GPU: domain.GPUSpec{Model: model, Count: gpus}}
	if bucket != "" {
		p.Interruption, _ = domain.NewInterruption(bucket, "aws spot advisor", time.Time{})
	}
	return p
}

// TestRiskOfBuckets: the bucket ranks pools, the class sets the level,
// and every class stays inside what the traces measured.
func TestRiskOfBuckets(t *testing.T) {
	for model := range DefaultPriors {
		prev := Risk{Availability: 2}
		for i, b := range domain.Buckets {
			r := RiskOf(pool(model, 8, b), nil)
			if r.InterruptionsPerHour <= prev.InterruptionsPerHour || r.Availability >= prev.Availability || r.GapMedianHours <= prev.GapMedianHours {
				t.Errorf("%s %s: %+v is not riskier than the bucket below (%+v)", model, b, r, prev)
			}
			// 0.1-1.4 interruptions per available hour, with a little room
			// for the damped class spread; median gaps 0.38-0.70 h.
			if r.InterruptionsPerHour < 0.06 || r.InterruptionsPerHour > 1.6 || r.GapMedianHours < 0.37 || r.GapMedianHours > 0.71 {
				t.Errorf("%s %s: %+v outside the traces' range", model, b, r)
			}
			if i == middleBucket {
				p := DefaultPriors[model]
				if math.Abs(r.InterruptionsPerHour-p.InterruptionsPerHour) > 1e-12 || math.Abs(r.Availability-p.Availability) > 0.01 {
					t.Errorf("%s at the middle bucket %+v, want its prior %+v", model, r, p)
				}
			}
			if !strings.Contains(r.Source, b) || r.RegionShare != DefaultRegionShare {
				t.Errorf("%s %s: source %q share %v", model, b, r.Source, r.RegionShare)
			}
			prev = r
		}
	}
	h, v := RiskOf(pool("H100", 8, ">20%"), nil), RiskOf(pool("V100", 8, ">20%"), nil)
	if h.InterruptionsPerHour <= v.InterruptionsPerHour {
		t.Errorf("H100 %v not above V100 %v in the same bucket", h.InterruptionsPerHour, v.InterruptionsPerHour)
	}
}

func TestRiskOfSources(t *testing.T) {
	// No bucket: the class prior alone, and it says so.
	r := RiskOf(pool("A100", 8, ""), nil)
	if r.InterruptionsPerHour != DefaultPriors["A100"].InterruptionsPerHour || !strings.Contains(r.Source, "no bucket") {
		t.Errorf("no bucket: %+v", r)
	}
	// A configured prior replaces the default.
	r = RiskOf(pool("A100", 8, "<5%"), Priors{"A100": {InterruptionsPerHour: 2, GapMedianHours: 1, Availability: 0.5}})
	if math.Abs(r.InterruptionsPerHour-0.4) > 1e-12 || !strings.Contains(r.Source, "configured") {
		t.Errorf("configured prior × <5%%: %+v", r)
	}
	// An unknown model falls back to a generic prior.
	if r := RiskOf(pool("Z9", 1, ""), nil); r.InterruptionsPerHour != fallbackPrior.InterruptionsPerHour {
		t.Errorf("unknown model: %+v", r)
	}
	// The source's own process wins over the bucket.
	p := pool("H100", 8, ">20%")
	p.Provider = "sim"
	p.Interruption.Process = &domain.SpotProcess{InterruptionsPerHour: 0.3, GapMedianHours: 0.4, Availability: 0.8, RegionShare: 0.25}
	r = RiskOf(p, nil)
	if r.InterruptionsPerHour != 0.3 || r.Availability != 0.8 || r.RegionShare != 0.25 || !strings.Contains(r.Source, "sim's own process") {
		t.Errorf("process: %+v", r)
	}
	// A pool always there (availability 1, the range's closed end) is a
	// process too; one above 1 is not.
	p.Interruption.Process = &domain.SpotProcess{InterruptionsPerHour: 0.3, GapMedianHours: 0.4, Availability: 1, RegionShare: 0.25}
	if r := RiskOf(p, nil); r.Availability != 1 || !strings.Contains(r.Source, "sim's own process") {
		t.Errorf("availability 1: %+v", r)
	}
	p.Interruption.Process = &domain.SpotProcess{InterruptionsPerHour: 0.3, GapMedianHours: 0.4, Availability: 1.01, RegionShare: 0.25}
	if r := RiskOf(p, nil); strings.Contains(r.Source, "own process") {
		t.Errorf("availability 1.01 used: %+v", r)
	}
	// …unless it is not a process.
	p.Interruption.Process = &domain.SpotProcess{InterruptionsPerHour: math.NaN(), GapMedianHours: 0.4, Availability: 0.8}
	if r := RiskOf(p, nil); math.IsNaN(r.InterruptionsPerHour) || !strings.Contains(r.Source, ">20%") {
		t.Errorf("a NaN process was used: %+v", r)
	}
}

func TestForInstances(t *testing.T) {
	r := Risk{InterruptionsPerHour: 1, GapMedianHours: 0.5, Availability: 0.5}
	if got := r.ForInstances(1); got != r {
		t.Errorf("one instance changed the risk: %+v", got)
	}
	got := r.ForInstances(16)
	if got.Availability != 0.5*ClusterShare || got.InterruptionsPerHour != 1 {
		t.Errorf("16 instances: %+v", got)
	}
	if m := r.MeanGapHours(); math.Abs(m-1) > 1e-12 {
		t.Errorf("mean gap %v, want (1−a)/(aλ) = 1", m)
	}
}

// TestPaidHoursKnownValues checks the closed forms against values worked
// by hand (written out in each case).
func TestPaidHoursKnownValues(t *testing.T) {
	cases := []struct {
		name            string
		lambda, w, d, c float64
		want            float64
	}{
		// No interruptions: the work and one changeover.
		{"calm", 0, 24, 0.2, 0.25, 24.2},
		// Progress never lost (c = 0): η = e^(−0.2) = 0.818731, the last run
		// keeps r = η/λ = 0.818731 h: (24 − r)/η + d + r = 29.331 h.
		{"kept", 1, 24, 0.2, 0, (24-math.Exp(-0.2))/math.Exp(-0.2) + 0.2 + math.Exp(-0.2)},
		// The prices test's pool: λ = 1.44, c = 0.25 h: 38.468532 h.
		{"checkpointed", 1.44, 24, 0.2, 0.25, 38.468532349500634},
		// Not checkpointable: attempts of w + d = 2.2 h until one lasts:
		// (1 − e^(−1.1)) / (0.5 e^(−1.1)) = 2(e^1.1 − 1) = 4.008332 h.
		{"restart", 0.5, 2, 0.2, math.Inf(1), 2 * math.Expm1(1.1)},
		// A long job that cannot checkpoint never finishes.
		{"hopeless", 2, 400, 0.2, math.Inf(1), math.Inf(1)},
	}
	for _, tc := range cases {
		got := paidHours(tc.lambda, tc.w, tc.d, tc.c)
		if math.IsInf(tc.want, 1) {
			if !math.IsInf(got, 1) {
				t.Errorf("%s: %v, want +Inf", tc.name, got)
			}
			continue
		}
		if math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("%s: paidHours = %v, want %v", tc.name, got, tc.want)
		}
	}
	if e := efficiency(1.44, 0.2, 0.25); math.Abs(e-0.6228844941899734) > 1e-12 {
		t.Errorf("efficiency %v", e)
	}
}

// TestEffectiveRanksByRisk tests EFF: two pools at the same
// price, one calm and one wild, differ by more than 5 % and change places
// with a slightly cheaper wild pool.
func TestEffectiveRanksByRisk(t *testing.T) {
	b := DefaultBasis
	calm, wild := pool("H100", 8, "<5%"), pool("H100", 8, ">20%")
	ec, ew := b.Effective(calm, 24), b.Effective(wild, 24)
	if !(ew > 1.05*ec) {
		t.Errorf("EFF calm %v wild %v: want the wild pool more than 5 %% dearer", ec, ew)
	}
	if ec < 3 || ec > 3.3 {
		t.Errorf("EFF of a calm pool at $3/GPU-h = %v, want a little above 3", ec)
	}
	if cheapWild := b.Effective(wild, 22); !(cheapWild > ec) {
		t.Errorf("a wild pool 8 %% cheaper (%v) ranks before the calm one (%v)", cheapWild, ec)
	}
	// Eight 1-GPU instances held together cost what one 8-GPU instance
	// does per GPU: zones hold a cluster whole or not at all, so the rate
	// per usable hour is the pool's (only the usable time shrinks, which
	// EFF does not charge for).
	small := pool("H100", 1, "<5%")
	if b.Instances(1) != 8 || b.Instances(8) != 1 || b.Instances(0) != 0 {
		t.Errorf("instances %d %d", b.Instances(1), b.Instances(8))
	}
	if es := b.Effective(small, 3); math.Abs(es-ec) > 1e-9 {
		t.Errorf("EFF on 8 × 1 GPU %v vs 1 × 8 GPUs %v", es, ec)
	}
	if v := b.Effective(pool("H100", 0, "<5%"), 24); !math.IsNaN(v) {
		t.Errorf("unknown GPU count: %v, want NaN", v)
	}
	if v := b.Effective(calm, math.NaN()); !math.IsNaN(v) {
		t.Errorf("unknown price: %v, want NaN", v)
	}
	nc := b
	nc.Checkpoint = 0
	if v := nc.Effective(wild, 24); !math.IsInf(v, 1) && v < 10*ew {
		t.Errorf("a 24 h job that cannot checkpoint on a wild pool: EFF %v, want far above %v", v, ew)
	}
	if b.Label() != "8 GPUs × 24 h" {
		t.Errorf("label %q", b.Label())
	}
}
