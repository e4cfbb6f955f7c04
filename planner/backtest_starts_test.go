package planner

import (
	"errors"
	"math"
	"testing"
	"time"
)

func backtestRow(t *testing.T, rows []BacktestRow, policy string) BacktestRow {
	t.Helper()
	for _, r := range rows {
		if r.Policy == policy {
			return r
		}
	}
	t.Fatalf("no %s row in %+v", policy, rows)
	return BacktestRow{}
}

// hourlyTrace is a trace of one tick an hour, capacity up (1) or down (0)
// as ups says, hour by hour.
func hourlyTrace(ups ...int) Trace { return Trace{Name: "t", GapSeconds: 3600, Data: ups} }

func always(hours int) Trace {
	d := make([]int, hours)
	for i := range d {
		d[i] = 1
	}
	return hourlyTrace(d...)
}

// On-demand meets a deadline only when the work and its changeover fit:
// 10 h of work and 30 minutes of changeover do not fit in 10 h, a job the
// backtest refuses; in 10.5 h they fit.
func TestBacktestOnDemandCountsItsChangeover(t *testing.T) {
	for _, c := range []struct {
		deadline float64
		met      float64
	}{{10, 0}, {10.5, 100}} {
		rows, err := Backtest([]Trace{always(12)}, BacktestConfig{JobHours: 10, DeadlineHours: c.deadline, SpotUSDHour: 1,
			OnDemandUSDHour: 3, Changeover: 30 * time.Minute, Starts: 5})
		var fe *FieldError
		if c.met == 0 {
			if !errors.As(err, &fe) || fe.Field != "deadline-hours" {
				t.Errorf("deadline %v h for 10 h + 30m: %v, want it refused", c.deadline, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := backtestRow(t, rows, PolicyOnDemand).DeadlinesMetPct; got != c.met {
			t.Errorf("deadline %v h: on-demand met %v%%, want %v%%", c.deadline, got, c.met)
		}
	}
}

// A trace exactly as long as the deadline holds one window, from its
// start; one a tick longer, two.
func TestBacktestWindowsOfAShortTrace(t *testing.T) {
	rows, err := Backtest([]Trace{always(10)}, BacktestConfig{JobHours: 5, DeadlineHours: 10, SpotUSDHour: 1, OnDemandUSDHour: 3, Starts: 20})
	if err != nil {
		t.Fatal(err)
	}
	if r := backtestRow(t, rows, PolicyGreedy); r.Runs != 20 || r.DeadlinesMetPct != 100 {
		t.Errorf("a 10 h trace, 10 h deadline: %+v", r)
	}
	// 11 h: starts at 0 h or 1 h. Spot is up in the first hour only: from
	// 0 h the hour of work is spot ($1); from 1 h Greedy waits, then runs
	// it on-demand ($3). Both are drawn.
	d := make([]int, 11)
	d[0] = 1
	rows, err = Backtest([]Trace{hourlyTrace(d...)}, BacktestConfig{JobHours: 1, DeadlineHours: 10, SpotUSDHour: 1, OnDemandUSDHour: 3, Starts: 200})
	if err != nil {
		t.Fatal(err)
	}
	r := backtestRow(t, rows, PolicyGreedy)
	if !(r.MeanCostUSD > 1+1e-9 && r.MeanCostUSD < 3-1e-9) {
		t.Errorf("starts over 0 h and 1 h: mean $%v; want between $1 and $3, both windows drawn", r.MeanCostUSD)
	}
}

// A run the engine gives up on before its deadline (capacity flipping
// every second, more changes than it follows) is not on time.
func TestBacktestUnfinishedRunIsNotOnTime(t *testing.T) {
	if testing.Short() {
		t.Skip("a million steps of the engine (2 s, 21 s with -race)")
	}
	const hours = 500
	d := make([]int, hours*3600)
	for i := range d {
		d[i] = i % 2
	}
	rows, err := Backtest([]Trace{{Name: "flips", GapSeconds: 1, Data: d}}, BacktestConfig{JobHours: 300, DeadlineHours: hours,
		SpotUSDHour: 1, OnDemandUSDHour: 3, Starts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r := backtestRow(t, rows, PolicyGreedy); r.DeadlinesMetPct != 0 {
		t.Errorf("greedy, given up on at the engine's step limit: %v%% on time, want 0", r.DeadlinesMetPct)
	}
}

// What the planner learns of a pool before a start: an interruption
// ending exactly at the start counts; with no history it assumes the
// prior (0.5 an hour, capacity half the time), which a day of history
// moves halfway.
func TestLearnedFromHistory(t *testing.T) {
	calm := fixed(false)            // up throughout
	dropped := fixed(false, 10, 11) // down from 10 h to 11 h
	lanes, _ := learned([]*timeline{calm, dropped}, 10, 24, 1, 0.2, 0.25)
	if !(lanes[1].score > lanes[0].score) {
		t.Errorf("a pool interrupted at the start scores %v, one never interrupted %v; want it worse", lanes[1].score, lanes[0].score)
	}
	lanes, anyAvail := learned([]*timeline{fixed(false)}, 0, 24, 1, 0.2, 0.25)
	if want := 1 / efficiency(0.5, 0.2, 0.25); math.Abs(lanes[0].score-want) > 1e-9 {
		t.Errorf("no history: score %v, want the prior rate's %v", lanes[0].score, want)
	}
	if anyAvail != 0.5 {
		t.Errorf("no history: capacity %v of the time, want the prior 0.5", anyAvail)
	}
	if _, anyAvail := learned([]*timeline{fixed(false)}, 24, 24, 1, 0.2, 0.25); anyAvail != 0.75 {
		t.Errorf("a day always up: capacity %v of the time, want 0.75 (halfway from the prior)", anyAvail)
	}
}

// Spot down for the first 6 of 12 hours: Greedy waits for it and runs the
// 4 h of work on spot; Uniform Progress falls behind its line and pays
// for on-demand meanwhile (Can't Be Late's two baselines, as published).
func TestBacktestGreedyWaitsWhereUniformProgressPays(t *testing.T) {
	ups := make([]int, 12)
	for i := 6; i < len(ups); i++ {
		ups[i] = 1
	}
	rows, err := Backtest([]Trace{hourlyTrace(ups...)}, BacktestConfig{JobHours: 4, DeadlineHours: 12, SpotUSDHour: 1, OnDemandUSDHour: 3, Starts: 1})
	if err != nil {
		t.Fatal(err)
	}
	g, up := backtestRow(t, rows, PolicyGreedy), backtestRow(t, rows, PolicyUniformProgress)
	if g.DeadlinesMetPct != 100 || math.Abs(g.MeanCostUSD-4) > 1e-9 {
		t.Errorf("greedy: %+v; want on time on spot alone, $4", g)
	}
	if up.DeadlinesMetPct != 100 || up.MeanCostUSD <= 4+1e-9 {
		t.Errorf("uniform progress: %+v; want on time with on-demand bought while behind its line", up)
	}
}
