package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// fakeReporter answers Usage with a fixed report or error per row id, and
// records the queries it got.
type fakeReporter struct {
	reports map[string]domain.UsageReport
	errs    map[string]error
	mu      sync.Mutex
	got     []domain.UsageQuery
}

func (f *fakeReporter) Usage(_ context.Context, q domain.UsageQuery) (domain.UsageReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, q)
	if err := f.errs[q.Ref]; err != nil {
		return domain.UsageReport{}, err
	}
	return f.reports[q.Ref], nil
}

var t0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

func at(h float64) time.Time { return t0.Add(time.Duration(h * float64(time.Hour))) }

// block is a settled capacity block row: n p5.48xlarge (8 GPUs each) over
// [start, end) hours after t0 for fee dollars.
func block(id string, n int, start, end, fee float64, state string) Entry {
	return Entry{ID: id, Kind: KindBlock, Provider: "fake", Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a",
		InstanceType: "p5.48xlarge", InstanceCount: n, GPUCount: float64(8 * n), Start: at(start), End: at(end),
		CostUSD: fee, State: state, ProviderRef: "cr-" + id, Actor: "local:alice", CreatedAt: at(start - 24), IdemKey: id}
}

func fleet(id string, n, onDemand int, start float64, estimate float64, state string) Entry {
	spec, _ := json.Marshal(domain.FleetSpec{Provider: "fake", Region: "us-east-1", InstanceTypes: []string{"g6.xlarge"},
		TargetCapacity: n, OnDemandBase: onDemand})
	return Entry{ID: id, Kind: KindFleet, Provider: "fake", Cloud: "aws", Region: "us-east-1",
		InstanceType: "g6.xlarge", InstanceCount: n, GPUCount: float64(n), Start: at(start), USDHour: estimate,
		CostNote: "estimate: first hour at current prices; a fleet bills until deleted", State: state,
		ProviderRef: "fleet-" + id, Actor: "local:bob", CreatedAt: at(start), IdemKey: id, Request: spec}
}

func inst(id string, start, end float64, share float64, spot bool) domain.InstanceUsage {
	in := domain.InstanceUsage{ID: id, InstanceType: "", Zone: "us-east-1a", Start: at(start), Spot: spot}
	if end >= 0 {
		in.End = at(end)
	}
	if share >= 0 {
		e := end
		if e < 0 {
			e = 1000
		}
		for h := start; h < e; h++ {
			in.Busy = append(in.Busy, domain.BusySample{At: at(h), Period: time.Hour, Share: share})
		}
	}
	return in
}

func compute(t testing.TB, rows []Entry, rep *fakeReporter, since, now float64, maxIdle float64) UsageReport {
	t.Helper()
	return Compute(context.Background(), rows, UsageOptions{Since: at(since), Now: at(now), MaxIdlePct: maxIdle,
		Reporter: func(name string) (domain.UsageReporter, bool) {
			if name == "fake" {
				return rep, true
			}
			return nil, false
		}})
}

func near(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b))
}

func TestComputeRow(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name   string
		row    Entry
		report *domain.UsageReport
		err    error
		now    float64
		// want
		booked, running, busy, cost, idle float64
		interruptions                     int
		source                            string
		note                              string
	}{
		{
			name: "block half busy: idle is the price of the GPU-hours not busy",
			row:  block("b1", 2, 0, 24, 3840, StateEnded),
			report: &domain.UsageReport{Source: "gpu", Instances: []domain.InstanceUsage{
				inst("i-1", 0, 24, 0.5, false), inst("i-2", 0, 24, 0.5, false)}},
			now: 30, booked: 384, running: 384, busy: 192, cost: 3840, idle: 10 * 192, source: "gpu",
		},
		{
			name: "block still running: booked and idle so far, cost the whole fee",
			row:  block("b2", 1, 0, 24, 1920, StateActive),
			report: &domain.UsageReport{Source: "gpu", Instances: []domain.InstanceUsage{
				inst("i-1", 2, -1, 1, false)}},
			now: 12, booked: 96, running: 80, busy: 80, cost: 1920, idle: 10 * 16, source: "gpu",
		},
		{
			name:   "metrics answered nothing: busy and idle unknown, never 0 % busy",
			row:    block("b3", 1, 0, 24, 1920, StateEnded),
			report: &domain.UsageReport{Note: "CloudWatch: no datapoints", Instances: []domain.InstanceUsage{inst("i-1", 0, 24, -1, false)}},
			now:    30, booked: 192, running: 192, busy: nan, cost: 1920, idle: nan, note: "no metrics",
		},
		{
			name: "provider failed: running and busy unknown, the cost still known",
			row:  block("b4", 1, 0, 24, 1920, StateEnded),
			err:  errors.New("throttled"),
			now:  30, booked: 192, running: nan, busy: nan, cost: 1920, idle: nan, interruptions: -1, note: "usage: throttled",
		},
		{
			name:   "nothing ran in the block: all of it idle",
			row:    block("b5", 1, 0, 24, 1920, StateEnded),
			report: &domain.UsageReport{Source: "gpu"},
			now:    30, booked: 192, running: 0, busy: 0, cost: 1920, idle: 1920, source: "no instance ran",
		},
		{
			name: "reservation half way: cost so far at its rate",
			row: func() Entry {
				r := block("r1", 1, 0, 10, 100, StateActive)
				r.Kind = KindReservation
				return r
			}(),
			report: &domain.UsageReport{Source: "cpu", Instances: []domain.InstanceUsage{inst("vm-1", 0, -1, 0.25, false)}},
			now:    5, booked: 40, running: 40, busy: 10, cost: 50, idle: 1.25 * 30, source: "cpu",
		},
		{
			name: "fleet at its estimate over the hours it ran (as every view), one interrupted",
			row: func() Entry {
				r := fleet("f1", 3, 1, 0, 1.0, StateDeleted)
				r.End = at(10)
				return r
			}(),
			report: &domain.UsageReport{Source: "gpu", Instances: []domain.InstanceUsage{
				{ID: "i-od", InstanceType: "g6.xlarge", Start: at(0), End: at(10), Busy: inst("x", 0, 10, 1, false).Busy},
				{ID: "i-s1", InstanceType: "g6.xlarge", Spot: true, Start: at(0), End: at(10), Busy: inst("x", 0, 10, 0.5, false).Busy},
				{ID: "i-s2", InstanceType: "g6.xlarge", Spot: true, Start: at(0), End: at(4), Interrupted: true, Busy: inst("x", 0, 4, 0, false).Busy},
			}},
			now: 20, booked: 30, running: 24, busy: 15,
			cost: 1.0 * 10, idle: 10 * 9.0 / 24, interruptions: 1, source: "gpu", note: "launch estimate",
		},
		{
			name:   "fleet without price history: its launch estimate",
			row:    fleet("f2", 1, 0, 0, 0.5, StateActive),
			report: &domain.UsageReport{Source: "gpu", Instances: []domain.InstanceUsage{{ID: "i-1", InstanceType: "g6.xlarge", Spot: true, Start: at(0), Busy: inst("x", 0, 4, 1, false).Busy}}},
			now:    4, booked: 4, running: 4, busy: 4, cost: 2, idle: 0, source: "gpu", note: "launch estimate",
		},
		{
			name: "fleet launched at unknown prices and none known since: cost unknown",
			row: func() Entry {
				r := fleet("f3", 1, 0, 0, 0, StateActive)
				r.USDHour = math.NaN()
				return r
			}(),
			report: &domain.UsageReport{Source: "gpu", Instances: []domain.InstanceUsage{{ID: "i-1", InstanceType: "g6.xlarge", Spot: true, Start: at(0), Busy: inst("x", 0, 4, 1, false).Busy}}},
			now:    4, booked: 4, running: 4, busy: 4, cost: nan, idle: nan, source: "gpu", note: "no price known",
		},
		{
			name: "block begun before the span: only the span counts",
			row:  block("b6", 1, 0, 48, 3840, StateEnded),
			report: &domain.UsageReport{Source: "gpu", Instances: []domain.InstanceUsage{
				inst("i-1", 0, 48, 1, false)}},
			now: 60, booked: 8 * 24, running: 8 * 24, busy: 8 * 24, cost: 3840, idle: 0, source: "gpu",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fr := &fakeReporter{reports: map[string]domain.UsageReport{}, errs: map[string]error{}}
			if c.report != nil {
				fr.reports[c.row.ID] = *c.report
			}
			if c.err != nil {
				fr.errs[c.row.ID] = c.err
			}
			since := 0.0
			if c.row.ID == "b6" {
				since = 24
			}
			rep := compute(t, []Entry{c.row}, fr, since, c.now, 0)
			if len(rep.Rows) != 1 {
				t.Fatalf("rows = %d, want 1", len(rep.Rows))
			}
			r := rep.Rows[0]
			for _, f := range []struct {
				name      string
				got, want float64
			}{{"booked", r.BookedGPUHours, c.booked}, {"running", r.RunningGPUHours, c.running}, {"busy", r.BusyGPUHours, c.busy},
				{"cost", r.CostUSD, c.cost}, {"idle", r.IdleUSD, c.idle}} {
				if !near(f.got, f.want) {
					t.Errorf("%s = %v, want %v (note %q)", f.name, f.got, f.want, r.Note)
				}
			}
			if r.Interruptions != c.interruptions {
				t.Errorf("interruptions = %d, want %d", r.Interruptions, c.interruptions)
			}
			if r.MetricsSource != c.source {
				t.Errorf("metrics source = %q, want %q", r.MetricsSource, c.source)
			}
			if c.note != "" && !strings.Contains(r.Note, c.note) {
				t.Errorf("note = %q, want it to say %q", r.Note, c.note)
			}
			checkConsistent(t, r)
		})
	}
}

// checkConsistent asserts busy ≤ running ≤ booked for the row and each
// day, and that the days add up to the row.
func checkConsistent(t *testing.T, r UsageRow) {
	t.Helper()
	le := func(a, b float64) bool { return math.IsNaN(a) || math.IsNaN(b) || a <= b+1e-9 }
	if !le(r.BusyGPUHours, r.RunningGPUHours) || !le(r.RunningGPUHours, r.BookedGPUHours) {
		t.Errorf("row %s: busy %v ≤ running %v ≤ booked %v does not hold", r.ID, r.BusyGPUHours, r.RunningGPUHours, r.BookedGPUHours)
	}
	var booked, running, busy float64
	for _, d := range r.Days {
		if !le(d.BusyGPUHours, d.RunningGPUHours) || !le(d.RunningGPUHours, d.BookedGPUHours) {
			t.Errorf("row %s day %s: busy %v ≤ running %v ≤ booked %v does not hold", r.ID, d.Day, d.BusyGPUHours, d.RunningGPUHours, d.BookedGPUHours)
		}
		booked += d.BookedGPUHours
		running += d.RunningGPUHours
		busy += d.BusyGPUHours
	}
	for _, f := range []struct {
		name          string
		days, wantRow float64
	}{{"booked", booked, r.BookedGPUHours}, {"running", running, r.RunningGPUHours}, {"busy", busy, r.BusyGPUHours}} {
		if !near(f.days, f.wantRow) {
			t.Errorf("row %s: the days' %s sum to %v, the row says %v", r.ID, f.name, f.days, f.wantRow)
		}
	}
}

// TestComputeConsistentUnderAnyReport feeds random reports (instances
// beyond the booked count, overlapping samples, shares out of range) and
// checks busy ≤ running ≤ booked every time.
func TestComputeConsistentUnderAnyReport(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		r := block(fmt.Sprint("b", trial), 1+rng.IntN(3), 0, float64(24*(1+rng.IntN(3))), 1000, StateEnded)
		var ins []domain.InstanceUsage
		for i := range rng.IntN(6) {
			s := rng.Float64() * 80
			in := domain.InstanceUsage{ID: fmt.Sprint(i), Start: at(s - 10), End: at(s + rng.Float64()*40)}
			for j := range rng.IntN(30) {
				in.Busy = append(in.Busy, domain.BusySample{At: at(s + float64(j)*rng.Float64()), Period: time.Duration(rng.IntN(7200)) * time.Second, Share: rng.Float64()*1.6 - 0.3})
			}
			ins = append(ins, in)
		}
		fr := &fakeReporter{reports: map[string]domain.UsageReport{r.ID: {Source: "x", Instances: ins}}}
		rep := compute(t, []Entry{r}, fr, 5, 70, 0)
		for _, row := range rep.Rows {
			checkConsistent(t, row)
			if !math.IsNaN(row.IdleUSD) && (row.IdleUSD < -1e-9 || row.IdleUSD > row.CostUSD+1e-9) {
				t.Errorf("trial %d: idle %v outside [0, cost %v]", trial, row.IdleUSD, row.CostUSD)
			}
		}
	}
}

func TestComputeLeavesOutWhatBoughtNothing(t *testing.T) {
	failed := block("failed", 1, 0, 24, 100, StateFailed)
	pending := block("pending", 1, 0, 24, 100, StatePending)
	noRef := block("noref", 1, 0, 24, 100, StateActive)
	noRef.ProviderRef = ""
	future := block("future", 1, 48, 72, 100, StateScheduled)
	old := block("old", 1, 0, 24, 100, StateEnded)
	kept := block("kept", 1, 0, 24, 100, StateActive)
	rep := compute(t, []Entry{failed, pending, noRef, future, old, kept}, &fakeReporter{}, 0, 12, 0)
	var ids []string
	for _, r := range rep.Rows {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, ",") != "old,kept" && strings.Join(ids, ",") != "kept,old" {
		t.Errorf("rows = %v, want old and kept only", ids)
	}
}

func TestComputeNamesAProviderNotInUse(t *testing.T) {
	r := block("b", 1, 0, 24, 100, StateEnded)
	r.Provider = "elsewhere"
	rep := compute(t, []Entry{r}, &fakeReporter{}, 0, 30, 0)
	got := rep.Rows[0]
	if !got.NoMetrics() || !math.IsNaN(got.RunningGPUHours) || !strings.Contains(got.Note, "elsewhere is not in use") {
		t.Errorf("row = %+v, want running and busy unknown and a note naming the provider", got)
	}
	if got.CostUSD != 100 {
		t.Errorf("cost = %v, want the fee 100", got.CostUSD)
	}
}

func TestOrderFiveMostIdleFirst(t *testing.T) {
	var rows []Entry
	fr := &fakeReporter{reports: map[string]domain.UsageReport{}}
	// Seven blocks started an hour apart; block i is busy (i/7) of the
	// time, so block 0 is the most idle and block 6 the least.
	for i := range 7 {
		id := fmt.Sprint("b", i)
		rows = append(rows, block(id, 1, float64(i), float64(i+24), 1920, StateEnded))
		fr.reports[id] = domain.UsageReport{Source: "g", Instances: []domain.InstanceUsage{inst("i", float64(i), float64(i+24), float64(i)/7, false)}}
	}
	noMetrics := block("nm", 1, 10, 34, 1920, StateEnded)
	fr.reports["nm"] = domain.UsageReport{Instances: []domain.InstanceUsage{inst("i", 10, 34, -1, false)}}
	rows = append(rows, noMetrics)
	rep := compute(t, rows, fr, 0, 40, 0)
	var ids []string
	for _, r := range rep.Rows {
		ids = append(ids, r.ID)
	}
	// The five most idle by idle cost, then the rest newest first (the
	// row without metrics is never among the most idle).
	want := "b0,b1,b2,b3,b4,nm,b6,b5"
	if strings.Join(ids, ",") != want {
		t.Errorf("order = %s, want %s", strings.Join(ids, ","), want)
	}
}

func TestTotalsByDayAndActor(t *testing.T) {
	a := block("a", 1, 12, 36, 1920, StateEnded) // two days: 12h + 12h
	b := fleet("f", 2, 0, 0, 1.0, StateActive)
	b.Actor = "ssh:SHA256:x carol"
	fr := &fakeReporter{reports: map[string]domain.UsageReport{
		"a": {Source: "g", Instances: []domain.InstanceUsage{inst("i", 12, 36, 0.5, false)}},
		"f": {Source: "g", Instances: []domain.InstanceUsage{
			{ID: "s1", InstanceType: "g6.xlarge", Spot: true, Start: at(0), Busy: inst("x", 0, 40, 1, false).Busy},
			{ID: "s2", InstanceType: "g6.xlarge", Spot: true, Start: at(0), End: at(30), Interrupted: true},
		}},
	}}
	rep := compute(t, []Entry{a, b}, fr, 0, 40, 0)
	if len(rep.Days) != 2 || rep.Days[0].Key != "2026-03-02" || rep.Days[1].Key != "2026-03-03" {
		t.Fatalf("days = %+v, want 2026-03-02 and 2026-03-03", rep.Days)
	}
	var dayBooked, dayCost, dayIdle float64
	for _, d := range rep.Days {
		dayBooked += d.BookedGPUHours
		dayCost += d.CostUSD
		dayIdle += d.IdleUSD
	}
	if !near(dayBooked, rep.All.BookedGPUHours) || !near(dayIdle, rep.All.IdleUSD) {
		t.Errorf("days sum to booked %v idle %v; all says %v, %v", dayBooked, dayIdle, rep.All.BookedGPUHours, rep.All.IdleUSD)
	}
	// A block's fee is paid up front: the row's cost is the whole fee,
	// the days spread it over its hours. The fleet costs its estimate
	// over the 40 hours it has run.
	if want := 1920 + 1.0*40; !near(rep.All.CostUSD, want) || !near(dayCost, want) {
		t.Errorf("cost all %v days %v, want %v", rep.All.CostUSD, dayCost, want)
	}
	if len(rep.Actors) != 2 || rep.All.Interruptions != 1 || rep.All.Rows != 2 {
		t.Fatalf("actors %+v all %+v: want two actors, one interruption, two rows", rep.Actors, rep.All)
	}
	if rep.Days[0].Interruptions != 0 || rep.Days[1].Interruptions != 1 {
		t.Errorf("interruptions by day %d, %d; want the one at hour 30 on the second day", rep.Days[0].Interruptions, rep.Days[1].Interruptions)
	}
	if rep.Actors[0].Key != "local:alice" {
		t.Errorf("actors by idle cost: first %s, want local:alice (the half-idle block)", rep.Actors[0].Key)
	}
}

func TestAlertsOnlyForRunningRowsOverTheThreshold(t *testing.T) {
	busy := block("busy", 1, 0, 24, 1920, StateActive)
	idle := block("idle", 1, 0, 24, 1920, StateActive)
	over := block("over", 1, 0, 24, 1920, StateEnded)
	fr := &fakeReporter{reports: map[string]domain.UsageReport{
		"busy": {Source: "g", Instances: []domain.InstanceUsage{inst("i", 0, -1, 0.9, false)}},
		"idle": {Source: "g", Instances: []domain.InstanceUsage{inst("i", 0, -1, 0.2, false)}},
		"over": {Source: "g", Instances: []domain.InstanceUsage{inst("i", 0, 24, 0.0, false)}},
	}}
	rep := compute(t, []Entry{busy, idle, over}, fr, 0, 10, 50)
	if len(rep.Alerts) != 1 || rep.Alerts[0].Row.ID != "idle" || !near(rep.Alerts[0].IdlePct, 80) {
		t.Fatalf("alerts = %+v, want one for the running row 80%% idle", rep.Alerts)
	}
	if s := rep.Alerts[0].String(); !strings.Contains(s, "80% idle") || !strings.Contains(s, "budget.max_idle_pct 50%") {
		t.Errorf("alert reads %q", s)
	}
	if rep := compute(t, []Entry{idle}, fr, 0, 10, 0); len(rep.Alerts) != 0 {
		t.Errorf("max_idle_pct 0 (off) raised %+v", rep.Alerts)
	}
}

func TestQueryCarriesTheFleetSpec(t *testing.T) {
	f := fleet("f", 4, 1, 0, 1, StateDeleted)
	f.UpdatedAt = at(6)
	// The rest of the spec, which the simulated market places the
	// fleet's instances by.
	f.Request, _ = json.Marshal(domain.FleetSpec{Provider: "fake", Region: "us-east-1", InstanceTypes: []string{"g6.xlarge", "g5.xlarge"},
		Zones: []string{"us-east-1a", "us-east-1b"}, TargetCapacity: 4, OnDemandBase: 1, Strategy: domain.StrategyCapacityOptimized,
		MaxPriceUSD: domain.Float(0.5)})
	fr := &fakeReporter{}
	compute(t, []Entry{f}, fr, 0, 10, 0)
	if len(fr.got) != 1 {
		t.Fatalf("queries = %d", len(fr.got))
	}
	q := fr.got[0]
	if q.OnDemand != 1 || len(q.InstanceTypes) != 2 || q.ProviderRef != "fleet-f" || !q.End.Equal(at(6)) || !q.From.Equal(at(0)) || !q.To.Equal(at(10)) ||
		strings.Join(q.Zones, ",") != "us-east-1a,us-east-1b" || q.Strategy != domain.StrategyCapacityOptimized || q.MaxPriceUSD == nil || *q.MaxPriceUSD != 0.5 {
		t.Errorf("query = %+v", q)
	}
}
