package sim

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// poolOf is the market's pool of a key, for a test that picks one.
func poolOf(t *testing.T, m *Market, key string) *simPool {
	t.Helper()
	p, ok := m.byKey[key]
	if !ok {
		t.Fatalf("no pool %s", key)
	}
	return p
}

// capacityAt is a pool's capacity at a moment, as Capacity says.
func capacityAt(t *testing.T, m *Market, p *simPool, at time.Time) int {
	t.Helper()
	c, err := m.Capacity(p.spec.Desc.Key(), at, time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	return c[0]
}

// firstMinute is the first of n minutes from `from` whose capacity makes
// ok true, read from Capacity at 1-minute ticks.
func firstMinute(t *testing.T, m *Market, p *simPool, from time.Time, n int, ok func(c int) bool) time.Time {
	t.Helper()
	c, err := m.Capacity(p.spec.Desc.Key(), from, time.Minute, n)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range c {
		if ok(v) {
			return from.Add(time.Duration(i) * time.Minute)
		}
	}
	t.Fatalf("%s: no such minute in %d from %s", p.spec.Desc.Key(), n, from)
	return time.Time{}
}

// onePool is a spec of spot instances (and an on-demand base) in one pool.
func onePool(p *simPool, target, onDemand int, token string) domain.FleetSpec {
	d := p.spec.Desc
	return domain.FleetSpec{Region: d.Region, Zones: []string{d.Zone}, InstanceTypes: []string{d.InstanceType},
		TargetCapacity: target, OnDemandBase: onDemand, ClientToken: token}
}

// ledgerQuery is the usage question ledger asks of a fleet row:
// the spec's terms, the fleet id, and the row's start as the ledger dates
// it (when the launch's answer came, a little after the launch).
func ledgerQuery(ref string, s domain.FleetSpec, id string, start, to time.Time) domain.UsageQuery {
	return domain.UsageQuery{Ref: ref, Kind: domain.KindFleet, ProviderRef: id, Region: s.Region, InstanceType: s.InstanceTypes[0],
		InstanceTypes: s.InstanceTypes, Zones: s.Zones, InstanceCount: s.TargetCapacity, OnDemand: s.OnDemandBase, Strategy: s.Strategy,
		MaxPriceUSD: s.MaxPriceUSD, Start: start, From: start, To: to}
}

const insufficient = "InsufficientInstanceCapacity: There is no Spot capacity available that matches your request."

// TestFleetGetsNoSpotWhereThereIsNoCapacity: a fleet launched in a pool
// at a moment Capacity says it has none gets no spot instance there — its
// on-demand base runs, the rest is not launched, in EC2's words — and one
// launched where there are fewer than it asks for gets what there is.
func TestFleetGetsNoSpotWhereThereIsNoCapacity(t *testing.T) {
	now := wed
	m := clockAt(&now)
	p := poolOf(t, m, "sim/us-east-1/us-east-1a/g6.xlarge")
	none := firstMinute(t, m, p, wed.Add(-7*24*time.Hour), 7*24*60, func(c int) bool { return c == 0 })
	now = none

	fl, err := m.LaunchFleet(ctx, onePool(p, 3, 1, "with-base"))
	if err != nil {
		t.Fatal(err)
	}
	if fl.State != "active" || fl.Instances != 1 || !strings.Contains(fl.Message, "2 spot instances not launched: "+insufficient) {
		t.Errorf("at %s, no capacity: %+v; want the on-demand base alone running and 2 spot instances not launched", none, fl)
	}
	for _, a := range m.fleets[fl.ID].alloc {
		if !a.onDemand {
			t.Errorf("spot instances placed in %s with no capacity: %+v", p.spec.Desc.Key(), a)
		}
	}
	// Nothing launched: the fleet failed, as an instant fleet that
	// launched nothing does.
	fl, err = m.LaunchFleet(ctx, onePool(p, 2, 0, "spot-only"))
	if err != nil || fl.State != "failed" || fl.Instances != 0 || fl.EstimatedUSDh != 0 || !strings.Contains(fl.Message, insufficient) {
		t.Errorf("at %s, spot only: %+v, %v; want failed, nothing running", none, fl, err)
	}
	if d, _ := m.DescribeFleet(ctx, "us-east-1", fl.ID); d.State != "failed" || d.Instances != 0 {
		t.Errorf("described later: %+v", d)
	}

	// Fewer than asked: what there is.
	some := firstMinute(t, m, p, wed.Add(-7*24*time.Hour), 7*24*60, func(c int) bool { return c > 0 })
	now = some
	c := capacityAt(t, m, p, some)
	fl, err = m.LaunchFleet(ctx, onePool(p, c+2, 0, "more-than-there-is"))
	if err != nil || fl.State != "active" || fl.Instances != c || !strings.Contains(fl.Message, fmt.Sprintf("launched %d of %d instances; 2 spot instances not launched: %s", c, c+2, insufficient)) {
		t.Errorf("at %s, %d in the pool, %d asked: %+v, %v", some, c, c+2, fl, err)
	}
}

// TestFleetScheduledIsPlacedAtItsStart: a fleet scheduled ahead is placed
// when it starts, with the capacity there is then.
func TestFleetScheduledIsPlacedAtItsStart(t *testing.T) {
	now := wed
	m := clockAt(&now)
	p := poolOf(t, m, "sim/us-east-1/us-east-1a/g6.xlarge")
	some := firstMinute(t, m, p, wed, 7*24*60, func(c int) bool { return c > 0 })
	none := firstMinute(t, m, p, some, 7*24*60, func(c int) bool { return c == 0 })
	now = some
	s := onePool(p, 3, 1, "ahead")
	s.Start = none
	fl, err := m.LaunchFleet(ctx, s)
	if err != nil || fl.State != "scheduled" {
		t.Fatalf("%+v, %v", fl, err)
	}
	now = none
	if d, _ := m.DescribeFleet(ctx, "us-east-1", fl.ID); d.State != "active" || d.Instances != 1 || !strings.Contains(d.Message, insufficient) {
		t.Errorf("at its start, with no capacity then (there was at its launch): %+v; want the on-demand base alone", d)
	}
}

// TestFleetStrategiesPlaceByCapacity: each allocation strategy keeps its
// meaning over the pools' capacity at launch — lowest-price fills the
// cheapest pools that have capacity, capacity-optimized the deepest,
// price-capacity-optimized a pool deep enough for the whole fleet,
// diversified spreads over every pool with capacity — and none puts more
// in a pool than it has.
func TestFleetStrategiesPlaceByCapacity(t *testing.T) {
	now := wed
	m := clockAt(&now)
	types := []string{"g4dn.xlarge", "g5.xlarge", "g6.xlarge", "g6e.xlarge"}
	var pools []*simPool
	for _, p := range m.pools {
		if p.spec.Region.Name == "us-east-1" && slices.Contains(types, p.spec.Desc.InstanceType) {
			pools = append(pools, p)
		}
	}
	// A moment when at least four pools have capacity, not all as much.
	var caps map[*simPool]int
	var up []*simPool
	for at := wed; ; at = at.Add(-7 * time.Minute) {
		if wed.Sub(at) > 30*24*time.Hour {
			t.Fatal("no moment in a month with four pools up")
		}
		caps, up = map[*simPool]int{}, nil
		distinct := map[int]bool{}
		for _, p := range pools {
			if c := capacityAt(t, m, p, at); c > 0 {
				caps[p] = c
				up = append(up, p)
				distinct[c] = true
			}
		}
		if len(up) >= 4 && len(distinct) > 1 {
			now = at
			break
		}
	}
	perGPU := func(p *simPool) float64 {
		_, usd := p.model.inForce(now.Unix())
		return usd / p.spec.Desc.GPU.Count
	}
	slices.SortStableFunc(up, func(a, b *simPool) int { return cmpF(perGPU(a), perGPU(b)) })
	total := 0
	for _, p := range up {
		total += caps[p]
	}
	launch := func(strategy string, target int) placement {
		t.Helper()
		fl, err := m.LaunchFleet(ctx, domain.FleetSpec{Region: "us-east-1", InstanceTypes: types, TargetCapacity: target,
			Strategy: strategy, ClientToken: fmt.Sprint(strategy, target)})
		if err != nil {
			t.Fatal(err)
		}
		pl := m.fleets[fl.ID].placement
		placed := 0
		for _, a := range pl.alloc {
			if a.count < 1 || a.count > caps[a.pool] {
				t.Errorf("%s: %d instances in %s, which has %d", strategy, a.count, a.pool.spec.Desc.Key(), caps[a.pool])
			}
			placed += a.count
		}
		if placed != min(target, total) || fl.Instances != placed {
			t.Errorf("%s of %d: placed %d, running %d; want %d (%d in the pools)", strategy, target, placed, fl.Instances, min(target, total), total)
		}
		return pl
	}

	// lowest-price: the cheapest pool with capacity to its depth, the rest
	// in the next cheapest.
	cheapest, next := up[0], up[1]
	pl := launch(domain.StrategyLowestPrice, caps[cheapest]+1)
	if len(pl.alloc) != 2 || pl.alloc[0].pool != cheapest || pl.alloc[0].count != caps[cheapest] || pl.alloc[1].pool != next || pl.alloc[1].count != 1 {
		t.Errorf("lowest-price: %s, want %d in %s and 1 in %s", allocText(pl), caps[cheapest], cheapest.spec.Desc.Key(), next.spec.Desc.Key())
	}
	// capacity-optimized: all in the deepest pool.
	deepest := up[0]
	for _, p := range up {
		if caps[p] > caps[deepest] {
			deepest = p
		}
	}
	if pl := launch(domain.StrategyCapacityOptimized, 3); len(pl.alloc) != 1 || caps[pl.alloc[0].pool] != caps[deepest] {
		t.Errorf("capacity-optimized: %s, want all in a pool of %d", allocText(pl), caps[deepest])
	}
	// price-capacity-optimized: one pool that holds them all, and no
	// such pool both cheaper and calmer.
	target := caps[deepest]
	if pl := launch(domain.StrategyPriceCapacityOptimized, target); len(pl.alloc) != 1 {
		t.Errorf("price-capacity-optimized of %d: %s, want one pool that holds all", target, allocText(pl))
	} else {
		got := pl.alloc[0].pool
		for _, p := range up {
			if caps[p] >= target && perGPU(p) < perGPU(got) && p.spec.Bucket <= got.spec.Bucket {
				t.Errorf("price-capacity-optimized chose %s; %s holds them all, cheaper and calmer", got.spec.Desc.Key(), p.spec.Desc.Key())
			}
		}
	}
	// diversified: every pool with capacity gets its share, or all it
	// has.
	target = 2*len(up) + 1
	pl = launch(domain.StrategyDiversified, target)
	got := map[*simPool]int{}
	for _, a := range pl.alloc {
		got[a.pool] = a.count
	}
	for _, p := range up {
		if got[p] < min(caps[p], target/len(up)) {
			t.Errorf("diversified of %d over %d pools: %d in %s (capacity %d)", target, len(up), got[p], p.spec.Desc.Key(), caps[p])
		}
	}
	for _, p := range pools {
		if caps[p] == 0 && got[p] > 0 {
			t.Errorf("diversified: %d in %s, which has no capacity", got[p], p.spec.Desc.Key())
		}
	}
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func allocText(pl placement) string {
	var parts []string
	for _, a := range pl.alloc {
		parts = append(parts, fmt.Sprintf("%d in %s", a.count, a.pool.spec.Desc.Key()))
	}
	return strings.Join(parts, ", ")
}

// TestFleetInterruptedWhenItsPoolLosesCapacity: a spot instance is taken
// back at the first second the pool's capacity (Capacity at 1-second
// ticks) falls below what the fleet holds there; the fleet's view counts
// it gone from then, and the Usage of its ledger row — asked with the
// fleet id, or without it from the row's start — says it was interrupted
// then, with the same times over any span.
func TestFleetInterruptedWhenItsPoolLosesCapacity(t *testing.T) {
	now := wed
	m := clockAt(&now)
	p := poolOf(t, m, "sim/us-east-1/us-east-1b/g6.xlarge")
	// A launch a little after capacity comes back, with 3 spot and 1
	// on-demand instances.
	gap := firstMinute(t, m, p, wed.Add(-10*24*time.Hour), 7*24*60, func(c int) bool { return c == 0 })
	launch := firstMinute(t, m, p, gap, 7*24*60, func(c int) bool { return c >= 3 }).Add(90 * time.Second)
	if capacityAt(t, m, p, launch) < 3 {
		t.Skip("capacity went again within 90 s")
	}
	now = launch
	s := onePool(p, 4, 1, "01ROWFLEET")
	fl, err := m.LaunchFleet(ctx, s)
	if err != nil || fl.Instances != 4 {
		t.Fatalf("launch at %s: %+v, %v", launch, fl, err)
	}
	// What Capacity says: the rank-r spot instance (the fleet holds r+1)
	// goes at the first second the pool has r or fewer.
	const horizon = 72 * 3600
	c, err := m.Capacity(p.spec.Desc.Key(), launch, time.Second, horizon)
	if err != nil {
		t.Fatal(err)
	}
	var want []time.Time
	for r := range 3 {
		for i, v := range c {
			if v <= r {
				want = append(want, launch.Add(time.Duration(i)*time.Second))
				break
			}
		}
	}
	if len(want) != 3 {
		t.Fatalf("no interruption in %d h from %s: pick another pool", horizon/3600, launch)
	}
	sort.Slice(want, func(i, j int) bool { return want[i].Before(want[j]) })

	// The view: running now is the on-demand base and the spot instances
	// not taken back yet.
	for _, at := range []time.Time{launch, want[0].Add(-time.Second), want[0], want[1].Add(-time.Second), want[1], want[2].Add(-time.Second), want[2], want[2].Add(time.Hour)} {
		now = at
		running := 1
		for _, w := range want {
			if at.Before(w) {
				running++
			}
		}
		d, err := m.DescribeFleet(ctx, "us-east-1", fl.ID)
		if err != nil || d.Instances != running || d.State != "active" {
			t.Errorf("at launch+%s: %+v, %v; want %d running", at.Sub(launch), d, err, running)
		}
		_, spot := p.model.inForce(at.Unix())
		if usd := *p.spec.Desc.OnDemandUSDHour + float64(running-1)*spot; math.Abs(d.EstimatedUSDh-usd) > 1e-3 {
			t.Errorf("at launch+%s: $%.4f/h, want $%.4f/h for %d running", at.Sub(launch), d.EstimatedUSDh, usd, running)
		}
		if running < 4 && !strings.Contains(d.Message, fmt.Sprintf("%d spot instances interrupted", 4-running)) {
			t.Errorf("at launch+%s: message %q says nothing of the %d interrupted", at.Sub(launch), d.Message, 4-running)
		}
	}

	// Usage, as the ledger asks it: the row's start is when the answer
	// came; asked with the fleet id, and without one from a start at the
	// launch's second.
	to := launch.Add(horizon * time.Second)
	withID := ledgerQuery("01ROWFLEET", s, fl.ID, launch.Add(1500*time.Millisecond), to)
	withoutID := ledgerQuery("01ROWFLEET", s, "", launch, to)
	for name, q := range map[string]domain.UsageQuery{"with the fleet id": withID, "from the row's start": withoutID} {
		rep, err := m.Usage(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var got []time.Time
		onDemand := 0
		for _, in := range rep.Instances {
			if in.Zone != p.spec.Desc.Zone || in.InstanceType != p.spec.Desc.InstanceType || !in.Start.Equal(launch) {
				t.Errorf("%s: instance %+v; want one of %s started at %s", name, in, p.spec.Desc.Key(), launch)
			}
			switch {
			case !in.Spot:
				onDemand++
				if in.Interrupted || !in.End.IsZero() {
					t.Errorf("%s: the on-demand instance ended: %+v", name, in)
				}
			case in.Interrupted:
				got = append(got, in.End)
			}
		}
		sort.Slice(got, func(i, j int) bool { return got[i].Before(got[j]) })
		if onDemand != 1 || !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Errorf("%s: %d on-demand, spot interrupted at %v; want 1 and %v", name, onDemand, got, want)
		}
	}
	// A shorter span says the same of the hours it shares.
	short := withID
	short.To = want[1].Add(-time.Minute)
	rep, _ := m.Usage(ctx, short)
	long, _ := m.Usage(ctx, withID)
	for i, in := range rep.Instances {
		l := long.Instances[i]
		if in.ID != l.ID || in.Interrupted && !in.End.Equal(l.End) || !in.Interrupted && l.Interrupted && !l.End.After(short.To) {
			t.Errorf("span to %s: %+v; to %s: %+v", short.To, in, to, l)
		}
		if n := len(in.Busy); n > 1 && !reflect.DeepEqual(in.Busy[:n-1], l.Busy[:n-1]) {
			t.Errorf("instance %s: the busy samples of the hours both spans hold differ", in.ID)
		}
	}
	// The same row, seed and time tell the same story in another process.
	again, _ := New(Options{Seed: 1, Now: func() time.Time { return to }}).Usage(ctx, withID)
	if !reflect.DeepEqual(again, long) {
		t.Error("a fresh market told the row's story otherwise")
	}
}

// TestSimUsageInterruptionsMatchTheProcess is the coherence the user
// sees: plan with a pool's "N interruptions/h held", launch simulated
// fleets there, and the Usage view counts N interruptions per running
// instance-hour. Fleets of one spot instance are launched every 4 hours
// over two years in the calmest and the wildest pools of three GPU
// classes; each runs until its pool takes it back or 48 h pass.
//
// The tolerance: a run lasts an exponential time (both layers' runs are
// drawn exponential, so the time left at a launch is too), so the count
// of interruptions over the instance-hours observed is a Poisson count,
// of relative standard error 1/√n — n counted as distinct moments, as two
// fleets launched in one long run are taken back together. Four of those,
// plus one more interruption a week per running hour: each layer is drawn
// afresh from its long-run state every week (avail.go), which may end a
// run at the week's boundary.
func TestSimUsageInterruptionsMatchTheProcess(t *testing.T) {
	m := newAt(1, wed)
	var keys []string
	for _, g := range []string{"T4", "V100", "H100"} {
		var calm, wild *simPool
		for _, p := range m.pools {
			if p.spec.Desc.GPU.Model != g {
				continue
			}
			if calm == nil || p.avail.truth.InterruptionsPerHour < calm.avail.truth.InterruptionsPerHour {
				calm = p
			}
			if wild == nil || p.avail.truth.InterruptionsPerHour > wild.avail.truth.InterruptionsPerHour {
				wild = p
			}
		}
		keys = append(keys, calm.spec.Desc.Key().String(), wild.spec.Desc.Key().String())
	}
	from := wed.Add(-2 * 365 * 24 * time.Hour)
	for _, key := range keys {
		p := poolOf(t, m, key)
		truth, _ := m.SpotProcess(p.spec.Desc.Key())
		s := onePool(p, 1, 0, "")
		var n int
		var hours float64
		moments := map[time.Time]bool{}
		for i := 0; ; i++ {
			start := from.Add(time.Duration(i) * 4 * time.Hour)
			if start.After(wed) {
				break
			}
			q := ledgerQuery(fmt.Sprintf("%s-%d", key, i), s, "", start, start.Add(48*time.Hour))
			rep, err := m.Usage(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range rep.Instances {
				end := q.To
				if in.Interrupted {
					end = in.End
					n++
					moments[in.End] = true
				}
				hours += end.Sub(in.Start).Hours()
			}
		}
		rate := float64(n) / hours
		tol := 4*truth.InterruptionsPerHour/math.Sqrt(float64(len(moments))) + 1.0/168
		if len(moments) < 300 || math.Abs(rate-truth.InterruptionsPerHour) > tol {
			t.Errorf("%s: %d interruptions (%d moments) in %.0f running instance-hours, %.3f/h; its process says %.3f/h (± %.3f)",
				key, n, len(moments), hours, rate, truth.InterruptionsPerHour, tol)
		}
		t.Logf("%s: %d interruptions (%d moments) in %.0f instance-hours: %.3f/h, process %.3f/h ± %.3f", key, n, len(moments), hours, rate, truth.InterruptionsPerHour, tol)
	}
}

// TestFleetIDCarriesItsPlacement: a fleet id gives back the second its
// instances were placed; an id of another shape, or of a second more than
// a week before the row's start, gives nothing (the row's start is used).
func TestFleetIDCarriesItsPlacement(t *testing.T) {
	at := wed.Add(-3 * time.Hour)
	id := fleetID(strHash("fleet", "1", "tok"), at.Unix())
	for _, c := range []struct {
		id    string
		start time.Time
		ok    bool
	}{
		{id, at.Add(2 * time.Second), true},
		{id, at.Add(-time.Hour), true},
		{id, at.Add(6 * 24 * time.Hour), true}, // found by a reconciliation days later
		{id, at.Add(8 * 24 * time.Hour), false},
		{"fleet-11111111-2222-4333-8444-555555555555", wed, false},
		{"fleet-bench", wed, false},
		{"fleet-zzzzzzzz-2222-4333-8444-555555555555", wed, false},
		{"", wed, false},
	} {
		got, ok := placedAtOf(c.id, c.start)
		if ok != c.ok || ok && got != at.Unix() {
			t.Errorf("%q from %s: %d, %v; want %v", c.id, c.start, got, ok, c.ok)
		}
	}
}

// FuzzPlacedAtOf: any text in a row's fleet id is read without a panic,
// and a second read from it is never more than a week before the start.
func FuzzPlacedAtOf(f *testing.F) {
	f.Add(fleetID(1, wed.Unix()), wed.Unix())
	f.Add("fleet-11111111-2222-4333-8444-555555555555", int64(0))
	f.Add("fleet-", int64(-1))
	f.Fuzz(func(t *testing.T, id string, start int64) {
		s := time.Unix(start%(1<<40), 0)
		if got, ok := placedAtOf(id, s); ok && got < s.Add(-7*24*time.Hour).Unix() {
			t.Errorf("%q from %s: %d", id, s, got)
		}
	})
}

// oldFormatFleetID is the fleet id this market made before ids carried their
// placement second (up to 748acaa): "fleet-" and a UUID of the hash h
// alone, its first group h's top 32 bits.
func oldFormatFleetID(h uint64) string {
	g := mix(h)
	return fmt.Sprintf("fleet-%08x-%04x-4%03x-%04x-%012x", uint32(h>>32), uint16(h>>16), uint16(h)&0xfff,
		uint16(g>>48)&0x3fff|0x8000, g&0xffffffffffff)
}

// TestOldFleetIDsAreNoPlacement: a ledger of yesterday's simulated fleets
// has ids whose first group is a hash, read as a second anywhere from
// 1970 to 2106 — most of them after the row's start. Such a fleet is
// placed at its row's start, as before, not at a second the hash names
// (one in the future ran nothing at all).
func TestOldFleetIDsAreNoPlacement(t *testing.T) {
	start := wed.Add(-30 * time.Hour)
	n := 0
	for i := range 64 {
		h := strHash("fleet", "1", fmt.Sprint("tok", i))
		id := oldFormatFleetID(h)
		v, err := strconv.ParseUint(id[6:14], 16, 32)
		if err != nil || int64(v) < start.Add(-7*24*time.Hour).Unix() {
			continue // read as no placement already
		}
		n++
		if got, ok := placedAtOf(id, start); ok {
			t.Errorf("old id %s read as placed at %s", id, time.Unix(got, 0).UTC())
		}
		if i == 0 || n == 1 {
			q := usageQuery("OLD", domain.KindFleet, 3, start, time.Time{}, wed)
			q.ProviderRef, q.OnDemand = id, 3
			rep, err := newAt(1, wed).Usage(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Instances) != 3 || !rep.Instances[0].Start.Equal(start) {
				t.Errorf("old id %s: %d instances, want 3 from the row's start %s: %+v", id, len(rep.Instances), start, rep.Instances)
			}
		}
	}
	if n == 0 {
		t.Fatal("no old id read as a second after the week before the start: the test checks nothing")
	}
	// A new id whose hash part happens to look like an old one's is rare
	// (1 in 2^58); ids of this market still round-trip.
	for i := range 64 {
		at := start.Add(time.Duration(i) * time.Minute)
		if got, ok := placedAtOf(fleetID(strHash("fleet", "1", fmt.Sprint("tok", i)), at.Unix()), start); !ok || got != at.Unix() {
			t.Errorf("new id %d: %d, %v", i, got, ok)
		}
	}
}
