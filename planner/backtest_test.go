package planner

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func flat(name string, n, ticks int) Trace {
	d := make([]int, ticks)
	for i := range d {
		d[i] = n
	}
	return Trace{Name: name, GapSeconds: 600, Data: d}
}

var published = BacktestConfig{JobHours: 48, DeadlineHours: 60, SpotUSDHour: 0.918, OnDemandUSDHour: 3.06,
	Changeover: 12 * time.Minute, Starts: 50, Seed: 1}

func TestBacktestConfigErrors(t *testing.T) {
	week := []Trace{flat("a.json", 1, 7*24*6)}
	cases := []struct {
		field string
		edit  func(*BacktestConfig)
		tr    []Trace
	}{
		{"trace", func(*BacktestConfig) {}, nil},
		{"job-hours", func(c *BacktestConfig) { c.JobHours = 0 }, week},
		{"job-hours", func(c *BacktestConfig) { c.JobHours = math.NaN() }, week},
		{"deadline-hours", func(c *BacktestConfig) { c.DeadlineHours = 47 }, week},
		// The work fits, one changeover does not.
		{"deadline-hours", func(c *BacktestConfig) { c.DeadlineHours = 48.1 }, week},
		{"spot-usd-hour", func(c *BacktestConfig) { c.SpotUSDHour = -1 }, week},
		{"on-demand-usd-hour", func(c *BacktestConfig) { c.OnDemandUSDHour = 0 }, week},
		{"changeover", func(c *BacktestConfig) { c.Changeover = -time.Second }, week},
		{"checkpoint", func(c *BacktestConfig) { c.Checkpoint = -time.Second }, week},
		{"starts", func(c *BacktestConfig) { c.Starts = 0 }, week},
		{"instances", func(c *BacktestConfig) { c.Instances = -2 }, week},
		{"trace", func(*BacktestConfig) {}, []Trace{flat("short.json", 1, 10)}},
	}
	for _, tc := range cases {
		cfg := published
		tc.edit(&cfg)
		_, err := Backtest(tc.tr, cfg)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: got %v", tc.field, err)
		}
	}
	_, err := Backtest([]Trace{flat("short.json", 1, 10)}, published)
	if err == nil || !strings.Contains(err.Error(), "short.json (1.7 h)") {
		t.Errorf("short trace: %v", err)
	}
}

// TestBacktestKnownOutcomes: a pool that always has capacity costs every
// policy but on-demand the spot price for the work and one changeover; a
// pool that never has it leaves them all on on-demand, on time.
func TestBacktestKnownOutcomes(t *testing.T) {
	week := 7 * 24 * 6
	rows, err := Backtest([]Trace{flat("always.json", 16, week)}, published)
	if err != nil {
		t.Fatal(err)
	}
	want := 0.918 * 48.2
	for _, r := range rows {
		if r.DeadlinesMetPct != 100 || r.Runs != 50 {
			t.Errorf("%s: %+v", r.Policy, r)
		}
		if r.Policy != PolicyOnDemand && (math.Abs(r.MeanCostUSD-want) > 1e-9 || math.Abs(r.SavingsVsOnDemandPct-70) > 1e-9) {
			t.Errorf("%s on a pool always there: $%v (%.2f%%), want $%v, the 70 %% ceiling", r.Policy, r.MeanCostUSD, r.SavingsVsOnDemandPct, want)
		}
	}
	if rows[0].Policy != PolicyOnDemand || math.Abs(rows[0].MeanCostUSD-3.06*48.2) > 1e-9 || math.Abs(rows[0].SavingsVsOnDemandPct) > 1e-9 {
		t.Errorf("on-demand row %+v", rows[0])
	}
	rows, err = Backtest([]Trace{flat("never.json", 0, week)}, published)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.DeadlinesMetPct != 100 || r.MeanCostUSD < 3.06*48.2-1e-9 {
			t.Errorf("%s on a pool never there: %+v", r.Policy, r)
		}
	}
	// Instances: 16 at once from a pool that has 8: never there for a
	// whole gang; the planner holds a partial gang of 8 on spot and 8 on
	// on-demand for the work and one changeover.
	cfg := published
	cfg.Instances = 16
	rows, err = Backtest([]Trace{flat("eight.json", 8, week)}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows[1:3] {
		if r.MeanCostUSD < 16*3.06*48.2-1e-6 {
			t.Errorf("%s: 16 instances from a pool of 8 ran on spot: %+v", r.Policy, r)
		}
	}
	if mix := (8*0.918 + 8*3.06) * 48.2; math.Abs(rows[3].MeanCostUSD-mix) > 1e-6 || rows[3].DeadlinesMetPct != 100 {
		t.Errorf("planner on a pool of 8 for 16: %+v, want $%.2f (8 on spot, 8 on on-demand)", rows[3], mix)
	}
	// The same seed draws the same starts; per-pool policies run once per
	// pool per start.
	two := []Trace{flat("a.json", 1, week), flat("b.json", 0, week)}
	a, _ := Backtest(two, published)
	b, _ := Backtest(two, published)
	if !slices.Equal(a, b) || a[1].Runs != 100 || a[3].Runs != 50 {
		t.Errorf("runs %+v / %+v", a, b)
	}
}

// TestBacktestAllStarts: every start slot once, whatever the seed; the
// slots run from 0 to the last that leaves room for the deadline.
func TestBacktestAllStarts(t *testing.T) {
	// 10 min ticks; a pool there only in the trace's last 12 hours.
	ticks := 5 * 24 * 6
	tr := flat("late.json", 0, ticks)
	for i := ticks - 12*6; i < ticks; i++ {
		tr.Data[i] = 1
	}
	cfg := published
	cfg.AllStarts, cfg.Starts = true, 0
	rows, err := Backtest([]Trace{tr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	slots := (5*24-60)*6 + 1
	if rows[3].Runs != slots {
		t.Errorf("%d runs, want every one of the %d start slots", rows[3].Runs, slots)
	}
	cfg.Seed = 9
	again, _ := Backtest([]Trace{tr}, cfg)
	if !slices.Equal(rows, again) {
		t.Errorf("another seed moved the figures of every slot: %+v / %+v", rows, again)
	}
	// Only windows that reach the last 12 hours (starts after 48 h, 72 of
	// 361) can use spot, and at most the work done there.
	if rows[3].MeanCostUSD >= rows[0].MeanCostUSD || rows[3].MeanCostUSD < rows[0].MeanCostUSD*(1-72.0/361*12/48.2) {
		t.Errorf("planner $%v against on-demand $%v over %d slots", rows[3].MeanCostUSD, rows[0].MeanCostUSD, slots)
	}
}

// TestBacktestPredict: the prediction at a start sees only the trace
// before it. At the turn of a pool away for 8 days and there for 8 after,
// the planner is predicted to cost about on-demand and realizes spot; a
// week into the pool's good days, it is predicted near spot (the prior,
// a day of history, still says 0.4 interruptions an hour).
func TestBacktestPredict(t *testing.T) {
	ticks := 16 * 24 * 6 // 10-minute ticks
	tr := flat("late.json", 0, ticks)
	for i := ticks / 2; i < ticks; i++ {
		tr.Data[i] = 1
	}
	tls := []*timeline{tr.timeline(1)}
	cfg := BacktestConfig{JobHours: 24, DeadlineHours: 30, SpotUSDHour: 0.918, OnDemandUSDHour: 3.06,
		Changeover: 12 * time.Minute, Seed: 1, Instances: 1, PredictRuns: 200}
	od, spot := 3.06*24.2, 0.918*24.2
	pr := newPredictor([]Trace{tr}, tls, mixLanes([]Trace{tr}, cfg), cfg, 7*24, 1.0/6)
	for _, c := range []struct {
		start          float64
		lo, hi, actual float64
	}{{8 * 24, 0.8 * od, od * 1.001, spot}, {14 * 24, spot, 1.4 * spot, spot}} {
		lanes, anyAvail := learned(tls, c.start, 7*24, 0.918, 0.2, 0)
		pd := pr.at(0, c.start, lanes, anyAvail)
		got := pd[2][0]
		if got.cost < c.lo || got.cost > c.hi || got.onTimePct != 100 {
			t.Errorf("at %v h: predicted $%.2f, %.0f%% on time; want $%.2f to $%.2f, on time", c.start, got.cost, got.onTimePct, c.lo, c.hi)
		}
		sp := spec{work: 24, start: c.start, deadline: c.start + 30, d: 0.2, quantum: 1.0 / 6, horizon: c.start + 54}
		r := &run{sp: &sp, lanes: lanes, od: &lane{usdHour: 3.06, speed: 1}}
		if o := r.exec(policyFor(PolicyPlanner, anyAvail)); math.Abs(o.cost-c.actual) > 0.01 {
			t.Errorf("at %v h: realized $%.2f, want $%.2f", c.start, o.cost, c.actual)
		}
	}
	// Through Backtest: on-demand is predicted exactly; every row has its
	// predictions.
	cfg.Predict, cfg.Starts, cfg.PredictRuns = true, 20, 50
	rows, err := Backtest([]Trace{tr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(rows[0].PredictedCostUSD-od) > 1e-9 || rows[0].OverP95Pct != 0 || rows[0].PredictedOnTimePct != 100 {
		t.Errorf("on-demand %+v", rows[0])
	}
	for _, r := range rows[1:] {
		if r.PredictedCostUSD <= 0 || r.PredictedP95CostUSD < r.PredictedCostUSD || r.PredictedOnTimePct <= 0 {
			t.Errorf("%s: %+v", r.Policy, r)
		}
	}
}

// TestLearnedBlendsThePrior: the planner's view of a pool at a start is
// its history before it, pulled towards the prior by a day's weight: up
// 26 of 48 h with 3 interruptions (one at the start itself) reads as
// (3 + 0.5·24)/(26 + 24) = 0.3 an hour, and any pool up (26 + 0.5·24)/(48
// + 24) of the time.
func TestLearnedBlendsThePrior(t *testing.T) {
	tl := fixed(false, 10, 12, 20, 40, 48)
	lanes, anyAvail := learned([]*timeline{tl}, 48, 48, 2, 0.2, 0)
	if want := 2 / efficiency(0.3, 0.2, 0); math.Abs(lanes[0].score-want) > 1e-12 {
		t.Errorf("score %v, want %v (rate 0.3)", lanes[0].score, want)
	}
	if want := 38.0 / 72; math.Abs(anyAvail-want) > 1e-12 {
		t.Errorf("any pool up %v, want %v", anyAvail, want)
	}
	// No history at all: the prior alone.
	lanes, anyAvail = learned([]*timeline{fixed(false, 48)}, 0, 48, 2, 0.2, 0)
	if want := 2 / efficiency(0.5, 0.2, 0); math.Abs(lanes[0].score-want) > 1e-12 || anyAvail != 0.5 {
		t.Errorf("no history: score %v (want %v), any %v", lanes[0].score, want, anyAvail)
	}
}
