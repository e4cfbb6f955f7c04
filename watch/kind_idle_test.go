package watch

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/testutil"
	"github.com/gpumarket/gpumarket/ledger"
)

// usedLedger is a UsageSource that computes the usage report as the
// Tracker does (ledger.Compute over the rows) from a reporter whose
// instances are as busy as the test says: each row runs one instance
// from its start, measured every hour at its share (below 0: no
// metrics).
type usedLedger struct {
	mu    sync.Mutex
	rows  []ledger.Entry
	busy  map[string]float64
	now   func() time.Time
	calls int
}

func (u *usedLedger) Report(ctx context.Context) (ledger.UsageReport, error) {
	u.mu.Lock()
	rows := append([]ledger.Entry(nil), u.rows...)
	u.calls++
	u.mu.Unlock()
	now := u.now()
	return ledger.Compute(ctx, rows, ledger.UsageOptions{Since: now.Add(-ledger.DefaultSince), Now: now,
		Reporter: func(string) (domain.UsageReporter, bool) { return u, true }}), nil
}

func (u *usedLedger) Usage(_ context.Context, q domain.UsageQuery) (domain.UsageReport, error) {
	u.mu.Lock()
	share := u.busy[q.Ref]
	u.mu.Unlock()
	in := domain.InstanceUsage{ID: "i-" + q.Ref, Zone: q.Zone, Start: q.Start}
	if share >= 0 {
		for t := q.Start; t.Before(q.To); t = t.Add(time.Hour) {
			in.Busy = append(in.Busy, domain.BusySample{At: t, Period: time.Hour, Share: share})
		}
	}
	return domain.UsageReport{Source: "gpu", Instances: []domain.InstanceUsage{in}}, nil
}

func (u *usedLedger) set(id string, share float64) {
	u.mu.Lock()
	u.busy[id] = share
	u.mu.Unlock()
}

func TestIdleRuleTellsEachRowOncePerCrossing(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	clk := newClock(t0)
	blk := func(id, kind string, start time.Time, state string) ledger.Entry {
		return ledger.Entry{ID: id, Kind: kind, Provider: "sim", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge",
			InstanceCount: 1, GPUCount: 8, Start: start, End: start.Add(24 * time.Hour), CostUSD: 24 * 8 * 10, State: state,
			ProviderRef: "cr-" + id}
	}
	u := &usedLedger{now: clk.Now, busy: map[string]float64{"b1": 0.3, "b2": 0, "b3": 0, "r1": 0.2}, rows: []ledger.Entry{
		blk("b1", ledger.KindBlock, t0.Add(-4*time.Hour), ledger.StateActive),
		blk("b2", ledger.KindBlock, t0.Add(-10*time.Minute), ledger.StateActive), // judged after 30 min
		blk("b3", ledger.KindBlock, t0.Add(-30*time.Hour), ledger.StateEnded),    // no longer runs
		blk("r1", ledger.KindReservation, t0.Add(-2*time.Hour), ledger.StateActive),
	}}
	rules := validRules(t, config.Notify{},
		Spec{Name: "idle-blocks", Cond: &IdleRule{AbovePct: 40, Kind: ledger.KindBlock}})
	e := newEvaluator(t, Options{Usage: u, Now: clk.Now, Rules: rules,
		Describe: func(string) domain.Descriptor { return domain.Descriptor{Simulated: true} }})
	ctx := context.Background()
	alerts := func() []Alert { return e.Alerts(0) }

	e.tick(ctx, false)
	got := alerts()
	if len(got) != 1 || strings.Join(got[0].LedgerIDs, ",") != "b1" {
		t.Fatalf("at 12:00: %+v, want one alert for b1 (70%% idle); b2 too young, b3 ended, r1 not a block", got)
	}
	a := got[0]
	// b1: 4 h of a $1,920 block ($80/h) so far, 70 % of them idle.
	if !a.Simulated || math.Abs(*a.IdlePct-70) > 1e-9 || math.Abs(*a.IdleUSD-224) > 1e-9 || *a.ThresholdPct != 40 || *a.GPUCount != 8 ||
		math.Abs(*a.TotalUSD-320) > 1e-9 ||
		!strings.Contains(a.Text, "block b1 8 GPU p5.48xlarge in us-east-1a is 70% idle: $224.0 of the $320.0 its 4 h so far cost went to idle GPU-hours (above 40%)") {
		t.Errorf("alert %+v: %s", a, a.Text)
	}
	var fields map[string]any
	if err := json.Unmarshal(a.JSON(), &fields); err != nil || math.Abs(fields["idle_pct"].(float64)-70) > 1e-9 || fields["kind"] != "idle" {
		t.Errorf("JSON %s (%v)", a.JSON(), err)
	}
	calls := u.calls
	e.tick(ctx, false)
	if n := len(alerts()); n != 1 {
		t.Fatalf("a second tick told %d alerts, want still 1 (b1 stays above: one alert per crossing)", n)
	}
	if u.calls != calls+1 {
		t.Errorf("one tick asked the usage source %d times, want once", u.calls-calls)
	}

	// b2 has run 30 min, all of it idle, but b1 was told 31 min ago:
	// owed until the hour's cooldown ends.
	clk.Set(t0.Add(31 * time.Minute))
	e.tick(ctx, false)
	if n := len(alerts()); n != 1 {
		t.Fatalf("b2 told inside the cooldown: %d alerts", n)
	}
	clk.Set(t0.Add(61 * time.Minute))
	e.tick(ctx, false)
	if got := alerts(); len(got) != 2 || strings.Join(got[len(got)-1].LedgerIDs, ",") != "b2" {
		t.Fatalf("after the cooldown: %+v, want b2 told", got)
	}

	// b1's metrics stop answering for a while: it keeps its place, and
	// is not told again when they come back.
	u.set("b1", -1)
	clk.Set(t0.Add(3 * time.Hour))
	e.tick(ctx, false)
	u.set("b1", 0.3)
	clk.Set(t0.Add(4 * time.Hour))
	e.tick(ctx, false)
	if n := len(alerts()); n != 2 {
		t.Fatalf("b1 told again after its metrics came back: %d alerts", n)
	}
	// b1 gets busy (10 % idle), then idle again: a new crossing.
	u.set("b1", 0.9)
	clk.Set(t0.Add(5 * time.Hour))
	e.tick(ctx, false)
	u.set("b1", 0.1)
	clk.Set(t0.Add(6 * time.Hour))
	e.tick(ctx, false)
	got = alerts()
	if len(got) != 3 || strings.Join(got[len(got)-1].LedgerIDs, ",") != "b1" {
		t.Fatalf("b1's second crossing: %+v, want it told again", got)
	}
}

// Without a usage source (no ledger), an idle rule says so once and
// raises nothing.
func TestIdleRuleWithoutUsageSaysSo(t *testing.T) {
	var buf testutil.Buffer
	rules := validRules(t, config.Notify{}, Spec{Name: "idle", Cond: &IdleRule{AbovePct: 10}})
	e := newEvaluator(t, Options{Rules: rules, Logger: logger(&buf)})
	e.tick(context.Background(), false)
	e.tick(context.Background(), false)
	if n := len(e.Alerts(0)); n != 0 {
		t.Errorf("%d alerts", n)
	}
	if c := strings.Count(buf.String(), "idle rules are not evaluated"); c != 1 {
		t.Errorf("said %d times, want once: %s", c, buf.String())
	}
}

// An idle rule on one row says why it cannot judge it: no such row in
// the report, or the row is not running; the note goes once it can.
func TestIdleRuleOnOneRowSaysWhyNot(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	clk := newClock(t0)
	u := &usedLedger{now: clk.Now, busy: map[string]float64{"b1": 0.3}, rows: []ledger.Entry{
		{ID: "b1", Kind: ledger.KindBlock, Provider: "sim", Region: "us-east-1", InstanceType: "p5.48xlarge", InstanceCount: 1, GPUCount: 8,
			Start: t0.Add(-4 * time.Hour), End: t0.Add(20 * time.Hour), CostUSD: 1920, State: ledger.StateEnded, ProviderRef: "cr-b1"},
	}}
	var buf testutil.Buffer
	rules := validRules(t, config.Notify{},
		Spec{Name: "missing", Cond: &IdleRule{AbovePct: 40, ID: "nope"}},
		Spec{Name: "ended", Cond: &IdleRule{AbovePct: 40, ID: "b1"}})
	e := newEvaluator(t, Options{Usage: u, Now: clk.Now, Rules: rules, Logger: logger(&buf)})
	e.tick(context.Background(), false)
	notes := map[string]string{}
	for _, rs := range e.Rules() {
		notes[rs.Name] = rs.Note
	}
	if !strings.Contains(notes["missing"], "ledger row nope is not in the usage report") || !strings.Contains(notes["missing"], "last 7d") {
		t.Errorf("missing row: note %q", notes["missing"])
	}
	if notes["ended"] != "ledger row b1 is ended, not running" {
		t.Errorf("ended row: note %q", notes["ended"])
	}
	if n := len(e.Alerts(0)); n != 0 {
		t.Errorf("%d alerts", n)
	}
	// Running again: judged, the note gone, and told.
	u.mu.Lock()
	u.rows[0].State = ledger.StateActive
	u.mu.Unlock()
	e.tick(context.Background(), false)
	for _, rs := range e.Rules() {
		if rs.Name == "ended" && rs.Note != "" {
			t.Errorf("note %q left once the row runs", rs.Note)
		}
	}
	if got := e.Alerts(0); len(got) != 1 || got[0].Rule != "ended" {
		t.Errorf("alerts %+v", got)
	}
}
