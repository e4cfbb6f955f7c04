package planner

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// poolIn is a p5 pool (8 H100) in region/zone at spot and od $/h.
func poolIn(region, zone string, spot, od float64, bucket string) Pool {
	p := domain.Pool{Provider: "sim", Cloud: domain.CloudAWS, Region: region, Zone: zone, InstanceType: "p5.48xlarge",
		GPU: domain.GPUSpec{Model: "H100", Count: 8}, OnDemandUSDHour: domain.Float(od)}
	p.Interruption, _ = domain.NewInterruption(bucket, "test", time.Time{})
	return PoolOf(p, spot, nil)
}

func regionsOfPools(m Market, keys []string) map[string]int {
	by := map[string]Pool{}
	for _, p := range m.Pools {
		by[p.Key] = p
	}
	out := map[string]int{}
	for _, k := range keys {
		out[by[k].Region]++
	}
	return out
}

// A multi-pool strategy spreads over regions: at most two pools of one
// region, however cheap the others there.
func TestSpreadTakesAtMostTwoPoolsARegion(t *testing.T) {
	var m Market
	for i := range 5 {
		m.Pools = append(m.Pools, poolIn("us-east-1", fmt.Sprintf("us-east-1%c", 'a'+i), 10+float64(i)*0.1, 55, "<5%"))
	}
	m.Pools = append(m.Pools, poolIn("us-west-2", "us-west-2a", 14, 55, "<5%"), poolIn("eu-west-1", "eu-west-1a", 14.5, 55, "<5%"))
	rs, err := Plan(goodJob(), m, Options{Runs: 200, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	multi, ok := byStrategy(rs, StrategySpotMulti)
	if !ok {
		t.Fatal("no multi-pool strategy")
	}
	if got := regionsOfPools(m, multi.Pools); got["us-east-1"] != 2 || len(multi.Pools) != 4 {
		t.Errorf("multi-pool spreads over %v (%d pools); want two of us-east-1 and one of each other region", got, len(multi.Pools))
	}
}

// A multi-pool strategy takes at most Options.MaxPools pools.
func TestSpreadTakesAtMostMaxPools(t *testing.T) {
	var m Market
	for i := range 8 {
		r := fmt.Sprintf("region-%d", i)
		m.Pools = append(m.Pools, poolIn(r, r+"a", 10+float64(i)*0.1, 55, "<5%"))
	}
	for _, max := range []int{3, 6} {
		rs, err := Plan(goodJob(), m, Options{Runs: 200, Seed: 1, MaxPools: max})
		if err != nil {
			t.Fatal(err)
		}
		if multi, ok := byStrategy(rs, StrategySpotMulti); !ok || len(multi.Pools) != max {
			t.Errorf("MaxPools %d: the multi-pool strategy runs on %v", max, multi.Pools)
		}
	}
}

// When every pool costs more per hour of work than on-demand, the safety
// net's assumptions say it runs on on-demand; when spot is cheaper, not.
func TestSafetyNetSaysWhenSpotIsNotWorthIt(t *testing.T) {
	const words = "every pool is expected to cost more per hour of work than on-demand"
	for _, c := range []struct {
		spot float64
		says bool
	}{{1.3 * 55, true}, {0.3 * 55, false}} {
		m := Market{Pools: []Pool{poolIn("us-east-1", "us-east-1a", c.spot, 55, "<5%"), poolIn("us-west-2", "us-west-2a", c.spot, 55, "<5%")}}
		rs, err := Plan(goodJob(), m, Options{Runs: 200, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		net, ok := byStrategy(rs, StrategySafetyNet)
		if !ok {
			t.Fatal("no safety-net strategy")
		}
		if strings.Contains(net.Assumptions, words) != c.says {
			t.Errorf("spot at $%.2f/h against $55 on-demand: assumptions %q; want the words %v", c.spot, net.Assumptions, c.says)
		}
	}
}

// A block that leaves too little time after it for spot and the
// on-demand safety net to finish the rest is not paired with spot after
// it (nor before: it starts too early).
func TestBlockThenSpotOnlyWhenTheRestFits(t *testing.T) {
	job := Job{GPUs: 16, Models: []string{"H100"}, Hours: 40, Start: t0, Deadline: t0.Add(41 * time.Hour),
		Checkpointable: true, Checkpoint: 15 * time.Minute, Changeover: 12 * time.Minute}
	m := Market{Pools: []Pool{poolIn("us-east-2", "us-east-2a", 12, 55, "<5%"), poolIn("us-west-2", "us-west-2a", 13, 55, "<5%")}}
	block := func(from, hours float64) domain.Offering {
		start := t0.Add(time.Duration(from * float64(time.Hour)))
		// A capacity block's instances stop 30 minutes before its end.
		end := start.Add(time.Duration(hours*float64(time.Hour)) + 30*time.Minute)
		return domain.Offering{ID: "cb", Provider: "sim", Cloud: domain.CloudAWS, Region: "us-east-2", Zone: "us-east-2a",
			InstanceType: "p5.48xlarge", GPU: domain.GPUSpec{Model: "H100", Count: 8}, InstanceCount: 2,
			Start: start, End: end, UpfrontUSD: 1 * 16 * hours, Currency: "USD"}
	}
	// From 1 h to 31 h: 29.8 h of work; the 10.2 h left need 10.4 h, and
	// only 10 h remain after it.
	m.Offerings = []domain.Offering{block(1, 30)}
	rs, err := Plan(job, m, Options{Runs: 200, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := byStrategy(rs, StrategyBlockSpot); ok {
		t.Errorf("a block leaving 10 h for 10.4 h of rest was paired with spot: %+v", r)
	}
	// From the start to 27 h: 26.8 h of work; the 13.2 h left need
	// 13.4 h, and 14 h remain after it: it pairs.
	m.Offerings = []domain.Offering{block(0, 27)}
	rs, err = Plan(job, m, Options{Runs: 200, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := byStrategy(rs, StrategyBlockSpot); !ok {
		t.Error("a block leaving room after it for the rest was not paired with spot")
	}
}

// A pool whose source gives its own process, available all the time, is
// read from that process.
func TestRiskOfAPoolAlwaysAvailable(t *testing.T) {
	p := domain.Pool{Provider: "sim", GPU: domain.GPUSpec{Model: "H100", Count: 8},
		Interruption: &domain.Interruption{Process: &domain.SpotProcess{InterruptionsPerHour: 0.01, GapMedianHours: 0.5, Availability: 1, RegionShare: 0.3}}}
	r := RiskOf(p, nil)
	if r.Availability != 1 || !strings.Contains(r.Source, "own process") {
		t.Errorf("risk %+v; want availability 1 from the source's own process", r)
	}
}

// The nearest-rank quantile: p95 of 1…20 is 19, the median of 1…100 is
// 50, and of one value that value.
func TestQuantileNearestRank(t *testing.T) {
	seq := func(n int) []float64 {
		var xs []float64
		for i := n; i >= 1; i-- {
			xs = append(xs, float64(i))
		}
		return xs
	}
	for _, c := range []struct {
		xs   []float64
		q    float64
		want float64
	}{{seq(20), 0.95, 19}, {seq(100), 0.5, 50}, {seq(1), 0.95, 1}, {seq(10), 1, 10}, {seq(10), 0.05, 1}} {
		if got := quantile(c.xs, c.q); got != c.want {
			t.Errorf("quantile of 1…%d at %v = %v, want %v", len(c.xs), c.q, got, c.want)
		}
	}
}

// How often some pool has capacity: one pool, its own availability; two
// regions, independent; two zones of one region share the region's part.
func TestAnyAvailability(t *testing.T) {
	c := func(group string, a, share float64) *candidate {
		return &candidate{regionGroup: group, risk: Risk{Availability: a, RegionShare: share}}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	if got := anyAvailability([]*candidate{c("r1", 0.9, 0.5)}); !near(got, 0.9) {
		t.Errorf("one pool at 0.9: %v", got)
	}
	if got := anyAvailability([]*candidate{c("r1", 0.9, 0.5), c("r2", 0.8, 0.5)}); !near(got, 1-0.1*0.2) {
		t.Errorf("two regions at 0.9 and 0.8: %v, want %v", got, 1-0.1*0.2)
	}
	// Zones of one region at 0.81 with half shared: the region is up
	// 0.9 of the time, and then each zone 0.9: 0.9 × (1 − 0.1²).
	if got := anyAvailability([]*candidate{c("r1", 0.81, 0.5), c("r1", 0.81, 0.5)}); !near(got, 0.9*(1-0.01)) {
		t.Errorf("two zones of one region: %v, want %v", got, 0.9*0.99)
	}
}
