package sim

import (
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

var availFrom = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// measure reads a pool's capacity at 1-minute ticks for `days` and
// returns its availability, interruptions per available hour, median gap
// and the share of available time it held its full depth.
func measure(t *testing.T, m *Market, key domain.PoolKey, days int) (avail, rate, medGap, full float64) {
	t.Helper()
	c, err := m.Capacity(key, availFrom, time.Minute, days*24*60)
	if err != nil {
		t.Fatal(err)
	}
	depth := slices.Max(c)
	var up, downs, fullN int
	var gaps []float64
	gap := 0
	for i, v := range c {
		if v > 0 {
			up++
			if v == depth {
				fullN++
			}
			if gap > 0 && gap < i { // a gap that began inside the window
				gaps = append(gaps, float64(gap)/60)
			}
			gap = 0
			if i+1 < len(c) && c[i+1] == 0 {
				downs++
			}
		} else {
			gap++
		}
	}
	sort.Float64s(gaps)
	return float64(up) / float64(len(c)), float64(downs) / (float64(up) / 60), gaps[len(gaps)/2], float64(fullN) / float64(up)
}

// TestCapacityMatchesTruth draws half a year of a few pools and measures
// them: what the pool says of itself (its Process) is what it does, within
// sampling error.
func TestCapacityMatchesTruth(t *testing.T) {
	m := New(Options{Seed: 1})
	checked := map[string]bool{}
	for _, p := range m.pools {
		g := p.spec.Desc.GPU.Model
		if checked[g] || !slices.Contains([]string{"H100", "A100", "V100", "T4"}, g) {
			continue
		}
		checked[g] = true
		truth, ok := m.SpotProcess(p.spec.Desc.Key())
		if !ok {
			t.Fatal("no process")
		}
		a, rate, med, full := measure(t, m, p.spec.Desc.Key(), 180)
		if math.Abs(a-truth.Availability) > 0.04 || math.Abs(rate-truth.InterruptionsPerHour)/truth.InterruptionsPerHour > 0.15 {
			t.Errorf("%s: measured availability %.3f rate %.3f/h, truth %+v", p.spec.Desc.Key(), a, rate, truth)
		}
		// Gaps of the two layers overlap, so the pool's gaps run a little
		// longer than each layer's median.
		if med < 0.8*truth.GapMedianHours || med > 1.6*truth.GapMedianHours {
			t.Errorf("%s: median gap %.3f h, truth %.3f h", p.spec.Desc.Key(), med, truth.GapMedianHours)
		}
		if full < 0.9 {
			t.Errorf("%s: full depth %.1f%% of the available time, want about 94 %%", p.spec.Desc.Key(), 100*full)
		}
	}
	if len(checked) != 4 {
		t.Fatalf("checked %v", checked)
	}
}

// TestAvailabilityByClassAndBucket: rates and availability follow the GPU
// class and the bucket, inside DESIGN.md's measured ranges.
func TestAvailabilityByClassAndBucket(t *testing.T) {
	m := New(Options{Seed: 1})
	mean := map[string][2]float64{}
	for _, p := range m.pools {
		tr := p.avail.truth
		if tr.InterruptionsPerHour < 0.05 || tr.InterruptionsPerHour > 1.8 || tr.Availability < 0.08 || tr.Availability > 0.97 ||
			tr.GapMedianHours < 0.3 || tr.GapMedianHours > 0.85 || tr.RegionShare <= 0 || tr.RegionShare >= 1 {
			t.Errorf("%s (%s, bucket %d): %+v", p.spec.Desc.Key(), p.spec.Desc.GPU.Model, p.spec.Bucket, tr)
		}
		v := mean[p.spec.Desc.GPU.Model]
		mean[p.spec.Desc.GPU.Model] = [2]float64{v[0] + tr.InterruptionsPerHour, v[1] + 1}
	}
	rate := func(g string) float64 { return mean[g][0] / mean[g][1] }
	if !(rate("H100") > rate("A100") && rate("A100") > rate("V100") && rate("V100") > rate("T4")) {
		t.Errorf("mean rates H100 %.2f A100 %.2f V100 %.2f T4 %.2f: want the newest GPUs reclaimed most", rate("H100"), rate("A100"), rate("V100"), rate("T4"))
	}
	// Within a class, a wilder bucket is reclaimed more often.
	var calm, wild []float64
	for _, p := range m.pools {
		if p.spec.Desc.GPU.Model == "T4" {
			if p.spec.Bucket <= 1 {
				calm = append(calm, p.avail.truth.InterruptionsPerHour)
			} else if p.spec.Bucket >= 3 {
				wild = append(wild, p.avail.truth.InterruptionsPerHour)
			}
		}
	}
	if len(calm) == 0 || len(wild) == 0 || slices.Max(calm) >= slices.Min(wild) {
		t.Errorf("T4 calm %v wild %v", calm, wild)
	}
}

// TestZoneCorrelation: zones of a region lose the same GPU together more
// often than if they were independent (the region layer).
func TestZoneCorrelation(t *testing.T) {
	m := New(Options{Seed: 1})
	byGroup := map[string][]*simPool{}
	for _, p := range m.pools {
		if p.spec.Desc.InstanceType == "g5.xlarge" {
			k := p.spec.Region.Name
			byGroup[k] = append(byGroup[k], p)
		}
	}
	tested := 0
	for region, ps := range byGroup {
		if len(ps) < 2 {
			continue
		}
		a, _ := m.Capacity(ps[0].spec.Desc.Key(), availFrom, 5*time.Minute, 90*288)
		b, _ := m.Capacity(ps[1].spec.Desc.Key(), availFrom, 5*time.Minute, 90*288)
		var da, db, both float64
		for i := range a {
			if a[i] == 0 {
				da++
			}
			if b[i] == 0 {
				db++
			}
			if a[i] == 0 && b[i] == 0 {
				both++
			}
		}
		// The correlation of the two zones' "down" indicators: about 0.4
		// with half the process shared by the region, 0 if independent.
		n := float64(len(a))
		pa, pb, pab := da/n, db/n, both/n
		phi := (pab - pa*pb) / math.Sqrt(pa*(1-pa)*pb*(1-pb))
		if phi < 0.15 {
			t.Errorf("%s: both down %.3f, independent %.3f: correlation %.2f", region, pab, pa*pb, phi)
		}
		tested++
	}
	if tested < 3 {
		t.Fatalf("only %d regions with two g5.xlarge zones", tested)
	}
}

func TestCapacityIsAFunctionOfTime(t *testing.T) {
	m := New(Options{Seed: 1})
	key := m.pools[0].spec.Desc.Key()
	long, err := m.Capacity(key, availFrom, time.Minute, 20*24*60)
	if err != nil {
		t.Fatal(err)
	}
	// A later, shorter span across a week's boundary is the same ticks.
	off := 9*24*60 + 17
	short, _ := m.Capacity(key, availFrom.Add(time.Duration(off)*time.Minute), time.Minute, 3*24*60)
	if !slices.Equal(short, long[off:off+len(short)]) {
		t.Error("a sub-span differs from the same ticks of a longer one")
	}
	again, _ := New(Options{Seed: 1}).Capacity(key, availFrom, time.Minute, 20*24*60)
	other, _ := New(Options{Seed: 2}).Capacity(key, availFrom, time.Minute, 20*24*60)
	if !slices.Equal(again, long) || slices.Equal(other, long) {
		t.Error("not deterministic per seed")
	}
	for _, bad := range []struct {
		key domain.PoolKey
		gap time.Duration
		n   int
	}{{domain.PoolKey{Provider: "sim", Region: "nowhere"}, time.Minute, 10}, {key, time.Millisecond, 10}, {key, time.Minute, 0}, {key, time.Minute, MaxCapacityTicks + 1}} {
		if _, err := m.Capacity(bad.key, availFrom, bad.gap, bad.n); err == nil || !strings.HasPrefix(err.Error(), "sim capacity") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func TestDescriptionCarriesTheProcess(t *testing.T) {
	m := New(Options{Seed: 1})
	for _, p := range m.Pools(availFrom)[:20] {
		truth, _ := m.SpotProcess(p.Key())
		if p.Interruption == nil || p.Interruption.Process == nil || *p.Interruption.Process != truth {
			t.Fatalf("%s: %+v, want its process %+v", p.Key(), p.Interruption, truth)
		}
	}
	if _, ok := m.SpotProcess(domain.PoolKey{}); ok {
		t.Error("a process for no pool")
	}
}
