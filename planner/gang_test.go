package planner

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestMixLevels(t *testing.T) {
	for _, c := range []struct {
		n    int
		want []int
	}{{1, nil}, {2, []int{1}}, {3, []int{2}}, {4, []int{3, 2}}, {16, []int{15, 12, 8}}} {
		if got := mixLevels(c.n); !slices.Equal(got, c.want) {
			t.Errorf("mixLevels(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

// TestPartialGangWhereOnDemandWouldBePaid: with no whole gang anywhere and
// the slack down to the reserve, the planner holds the partial gang (part
// on spot, the rest on on-demand) when an interruption would still leave
// time for on-demand, and on-demand for all otherwise; a partial gang
// dearer per hour of work than on-demand is left alone.
func TestPartialGangWhereOnDemandWouldBePaid(t *testing.T) {
	const w, d, odUSD, mixUSD = 10.0, 0.2, 16 * 3.06, 8*0.918 + 8*3.06
	cases := []struct {
		name     string
		deadline float64
		mixScore float64
		want     float64
	}{
		{"room for a changeover and an interruption", w + 3*d, mixUSD, mixUSD * (w + d)},
		{"no room for an interruption", w + 1.5*d, mixUSD, odUSD * (w + d)},
		{"dearer than on-demand", w + 3*d, odUSD * 1.01, odUSD * (w + d)},
	}
	for _, c := range cases {
		sp := spec{work: w, deadline: c.deadline, d: d, horizon: c.deadline + w}
		lanes := []lane{
			{usdHour: 16 * 0.918, speed: 1, score: 16 * 0.918, tl: steady(false)},
			{usdHour: mixUSD, speed: 1, score: c.mixScore, mix: true},
		}
		r := &run{sp: &sp, lanes: lanes, od: &lane{usdHour: odUSD, speed: 1}}
		o := r.exec(policyFor(PolicyPlanner, 0.01))
		if !o.onTime(sp.deadline) || math.Abs(o.cost-c.want) > 1e-6 {
			t.Errorf("%s: $%.2f, on time %v; want $%.2f, on time", c.name, o.cost, o.onTime(sp.deadline), c.want)
		}
	}
}

// TestPartialGangGivesWayToTheWholeGang: on a partial gang when the
// whole gang comes back with slack to spare, the planner moves to it.
func TestPartialGangGivesWayToTheWholeGang(t *testing.T) {
	const w, d = 10.0, 0.2
	whole := &timeline{up0: false, bounds: []float64{2, math.Inf(1)}}
	sp := spec{work: w, deadline: w + 3*d + 0.5, d: d, horizon: 40}
	lanes := []lane{
		{usdHour: 16 * 0.918, speed: 1, score: 16 * 0.918, tl: whole},
		{usdHour: 8*0.918 + 8*3.06, speed: 1, score: 8*0.918 + 8*3.06, mix: true},
	}
	r := &run{sp: &sp, lanes: lanes, od: &lane{usdHour: 16 * 3.06, speed: 1}}
	o := r.exec(policyFor(PolicyPlanner, 0.5))
	// The mix from the start, the whole gang from 2 h to the end.
	if !o.onTime(sp.deadline) || o.cost >= (8*0.918+8*3.06)*(w+d) || o.odHours != 0 {
		t.Errorf("got %+v; want on time, cheaper than the partial gang throughout, no on-demand for all", o)
	}
}

// TestCoversReadAndWiden: a pool whose count falls in steps around the
// whole gang's gaps is read as covers, and a draw widened by them holds
// the partial gang where the trace did.
func TestCoversReadAndWiden(t *testing.T) {
	tr := Trace{Name: "steps.json", GapSeconds: 3600, Data: []int{16, 16, 12, 12, 0, 0, 12, 16, 16, 9, 16}}
	whole, part := tr.timeline(16), tr.timeline(12)
	cs := coversOf(whole, part, 0, tr.Hours())
	want := []gapCover{{hours: 1}, {hours: 5, tail: 2, head: 1}}
	if !slices.Equal(cs, want) {
		t.Fatalf("covers %+v, want %+v", cs, want)
	}
	var tl timeline
	rng := rand.New(rand.NewPCG(1, 2))
	tl.widen(whole, cs[1:], rng, 1)
	tl.closeAt(tr.Hours())
	part.rewindTo(0)
	for h := 0.5; h < tr.Hours(); h++ {
		got, _ := tl.at(h)
		if want, _ := part.at(h); got != want && h != 9.5 { // the 1 h gap drawn as the 5 h one: tail 2 covers it
			t.Errorf("at %v h: partial gang up %v, the trace %v", h, got, want)
		}
	}
	tl.widen(whole, nil, rng, 1)
	if !slices.Equal(tl.bounds, whole.bounds) || tl.up0 != whole.up0 {
		t.Errorf("no covers: %+v, want the whole gang's %+v", tl, whole)
	}
}

// TestPlanPricesPartialGangs: a pool that always holds 8 of a 16-GPU
// job's instances and never all 16 is priced at 8 on spot and 8 on
// on-demand by the planner's strategy, as the backtest realizes it.
func TestPlanPricesPartialGangs(t *testing.T) {
	tr := flat("eight.json", 8, 30*24*6)
	start := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	job := Job{GPUs: 16, Models: []string{"V100"}, Hours: 24, Start: start, Deadline: start.Add(30 * time.Hour),
		Checkpointable: true, Changeover: 12 * time.Minute}
	m := Market{Pools: []Pool{TracePool(tr, "V100", 16, 0.918, 3.06, nil)}}
	rs, err := Plan(job, m, Options{Runs: 400})
	if err != nil {
		t.Fatal(err)
	}
	mix := (8*0.918 + 8*3.06) * 24.2
	for _, r := range rs {
		if r.Strategy == StrategySafetyNet && (r.OnTimePct != 100 || math.Abs(r.ExpectedCostUSD-mix) > 0.03*mix) {
			t.Errorf("planner row: $%.2f, %.0f%% on time; want about $%.2f (8 on spot, 8 on on-demand), on time", r.ExpectedCostUSD, r.OnTimePct, mix)
		}
	}
	cfg := BacktestConfig{JobHours: 24, DeadlineHours: 30, SpotUSDHour: 0.918, OnDemandUSDHour: 3.06,
		Changeover: 12 * time.Minute, Starts: 20, Instances: 16}
	rows, err := Backtest([]Trace{tr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := rows[3].MeanCostUSD; math.Abs(got-mix) > 1e-6 {
		t.Errorf("backtest planner $%.2f, want $%.2f", got, mix)
	}
}

// TestPartialGangMustHedge: where two changeovers cost more than a partial
// gang saves over a run, it is never taken: on zones holding all of a gang
// or none, 16 instances then replay exactly as one at 16 times the prices.
func TestPartialGangMustHedge(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var gang, one []Trace
	for z := range 3 {
		tr := flat("zone.json", 0, 14*24*6)
		up := false
		for i := range tr.Data {
			if rng.IntN(30) == 0 {
				up = !up
			}
			if up {
				tr.Data[i] = 16
			}
		}
		tr.Name = string(rune('a' + z))
		gang = append(gang, tr)
		o := Trace{Name: tr.Name, GapSeconds: tr.GapSeconds, Data: make([]int, len(tr.Data))}
		for i, v := range tr.Data {
			o.Data[i] = v / 16
		}
		one = append(one, o)
	}
	cfg := BacktestConfig{JobHours: 24, DeadlineHours: 30, SpotUSDHour: 0.918, OnDemandUSDHour: 3.06,
		Changeover: 90 * time.Minute, Starts: 60, Instances: 16}
	a, err := Backtest(gang, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Instances, cfg.SpotUSDHour, cfg.OnDemandUSDHour = 1, 16*0.918, 16*3.06
	b, err := Backtest(one, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(a[3].MeanCostUSD-b[3].MeanCostUSD) > 1e-6 || a[3].MeanCostUSD >= 16*3.06*25.5-50 {
		t.Errorf("planner over 16 all-or-none: $%.2f; as one instance: $%.2f (want equal, and spot used)", a[3].MeanCostUSD, b[3].MeanCostUSD)
	}
}

func TestHedges(t *testing.T) {
	const od, d = 16 * 3.06, 0.2
	for _, c := range []struct {
		usd, rate float64
		want      bool
	}{
		{15*0.918 + 3.06, 0.5, true}, // saves $64 a run, changeovers $20
		{8*0.918 + 8*3.06, 0.5, true},
		{0.918 + 15*3.06, 0.5, false}, // saves $4 a run
		{15*0.918 + 3.06, 2, false},   // runs of half an hour: $16
		{0.918 + 15*3.06, 0, true},    // never interrupted
	} {
		if got := hedges(c.usd, od, c.rate, d); got != c.want {
			t.Errorf("hedges($%.2f/h at %v/h) = %v, want %v", c.usd, c.rate, got, c.want)
		}
	}
}

// TestPredictDrawsPartialGangs: at a start after a week in which a pool
// always held 8 of a 16-instance gang, the planner is predicted to hold
// that partial gang, as it then does.
func TestPredictDrawsPartialGangs(t *testing.T) {
	tr := flat("eight.json", 8, 16*24*6)
	cfg := BacktestConfig{JobHours: 24, DeadlineHours: 30, SpotUSDHour: 0.918, OnDemandUSDHour: 3.06,
		Changeover: 12 * time.Minute, Starts: 10, Instances: 16, Predict: true, PredictRuns: 100}
	rows, err := Backtest([]Trace{tr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mix := (8*0.918 + 8*3.06) * 24.2
	if p := rows[3]; math.Abs(p.PredictedCostUSD-mix) > 0.03*mix || math.Abs(p.MeanCostUSD-mix) > 1e-6 {
		t.Errorf("planner predicted $%.2f, realized $%.2f; want both about $%.2f (8 on spot, 8 on on-demand)", p.PredictedCostUSD, p.MeanCostUSD, mix)
	}
}
