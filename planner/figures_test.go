package planner

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

func riskyPool(key, model string, spot, od float64, r Risk) Pool {
	return Pool{Key: key, Provider: "sim", Cloud: domain.CloudAWS, Region: "r-" + key, Zone: "z", InstanceType: "t-" + key, GPUModel: model,
		GPUsPerInstance: 8, SpotUSDHour: spot, OnDemandUSDHour: od, Risk: r}
}

// END is the median finish of every run, the late ones too: a strategy
// on time in few runs ends after the deadline, one on time in most ends
// by it; END_P95 is never before END.
func TestEndIsTheMedianFinish(t *testing.T) {
	// On time in a few runs of 2,000, as the 0.15 %: the mean
	// end of those few is before the deadline, the median of all after.
	scarce := Risk{InterruptionsPerHour: 1, GapMedianHours: 1, Availability: 0.6}
	j := Job{GPUs: 8, Models: []string{"H100"}, Hours: 10, Start: t0, Deadline: t0.Add(13 * time.Hour), Changeover: 12 * time.Minute,
		Checkpointable: true, Checkpoint: 15 * time.Minute}
	rs, err := Plan(j, Market{Pools: []Pool{riskyPool("a", "H100", 10, 40, scarce)}}, Options{Runs: 2000})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, r := range rs {
		if r.EndP95.Before(r.End) {
			t.Errorf("%s: end_p95 %v before end %v", r.Strategy, r.EndP95, r.End)
		}
		switch {
		case r.OnTimePct < 40 && !r.End.After(j.Deadline):
			t.Errorf("%s on time %.1f %% of the runs ends %v, by the deadline %v", r.Strategy, r.OnTimePct, r.End, j.Deadline)
		case r.OnTimePct > 60 && r.End.After(j.Deadline):
			t.Errorf("%s on time %.1f %% of the runs ends %v, after the deadline %v", r.Strategy, r.OnTimePct, r.End, j.Deadline)
		}
		if r.Strategy == StrategySpotOne {
			seen++
			if r.OnTimePct > 10 || r.OnTimePct == 0 {
				t.Fatalf("the scarce pool is on time %.1f %%: the case tests nothing", r.OnTimePct)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no spot-one-pool row")
	}
}

// A safety net that cannot finish by the deadline is none: with H100 and
// A100 acceptable, the A100 on-demand that is cheaper per hour of work but
// too slow for the deadline gives way to H100 on-demand.
func TestSafetyNetTakesOnDemandThatCanMeetTheDeadline(t *testing.T) {
	calm := Risk{InterruptionsPerHour: 0.3, GapMedianHours: 1, Availability: 0.6}
	h100 := riskyPool("h", "H100", 14, 55, calm)
	a100 := riskyPool("a", "A100", 4, 20, calm) // 20/0.45 = $44 per hour of H100 work
	j := Job{GPUs: 8, Models: []string{"H100", "A100"}, Hours: 10, Start: t0, Deadline: t0.Add(14 * time.Hour),
		Checkpointable: true, Checkpoint: 15 * time.Minute, Changeover: 12 * time.Minute}
	rs, err := Plan(j, Market{Pools: []Pool{h100, a100}}, Options{Runs: 2000})
	if err != nil {
		t.Fatal(err)
	}
	net, ok := byStrategy(rs, StrategySafetyNet)
	if !ok {
		t.Fatal("no safety-net row")
	}
	if net.OnDemandPool != "h" || net.OnTimePct < 99 {
		t.Errorf("safety net on %q, on time %.1f %%; want H100 on-demand (h), on time", net.OnDemandPool, net.OnTimePct)
	}
	// With the time for it, the cheaper A100 net stays.
	j.Deadline = t0.Add(30 * time.Hour)
	rs, _ = Plan(j, Market{Pools: []Pool{h100, a100}}, Options{Runs: 500})
	if net, _ := byStrategy(rs, StrategySafetyNet); net.OnDemandPool != "a" {
		t.Errorf("with 30 h the net is %q; want the cheaper A100 (a)", net.OnDemandPool)
	}
}

// Numbers in the assumptions are rounded as the columns are: work on a
// faster model is said to a tenth of an hour.
func TestAssumptionsAreRounded(t *testing.T) {
	j := goodJob()
	j.Models = []string{"A100", "H100"} // 48 h of A100 work is 21.6 h on an H100
	rs, err := Plan(j, testMarket(), Options{Runs: 200})
	if err != nil {
		t.Fatal(err)
	}
	long := regexp.MustCompile(`\d\.\d{3,}`)
	seen := false
	for _, r := range rs {
		if m := long.FindString(r.Assumptions); m != "" {
			t.Errorf("%s: %q in %q", r.Strategy, m, r.Assumptions)
		}
		seen = seen || strings.Contains(r.Assumptions, "21.6 h of work")
	}
	if !seen {
		t.Error("no block row says 21.6 h of work")
	}
}
