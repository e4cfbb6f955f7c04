package watch

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/feed"
)

// planner answers the quotes the test sets, in turn.
type planner struct {
	mu     sync.Mutex
	quotes []PlanQuote
	jobs   []PlanJob
}

func (p *planner) BestPlan(_ context.Context, job PlanJob, _ *feed.Snapshot) (PlanQuote, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jobs = append(p.jobs, job)
	q := p.quotes[0]
	if len(p.quotes) > 1 {
		p.quotes = p.quotes[1:]
	}
	return q, nil
}

func TestPlanRuleAgainstAPlanner(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clk := newClock(t0)
	q := func(found bool, usd float64) PlanQuote {
		return PlanQuote{Found: found, Strategy: "spot+od-planner", ExpectedUSD: usd, USDPerUsefulGPUHour: usd / (16 * 48), OnTimePct: 97, Simulated: true}
	}
	p := &planner{quotes: []PlanQuote{q(true, 12000), q(true, 9000), q(true, 9500), q(false, 100), q(true, 8000)}}
	rule := Spec{Name: "plan", Cond: &PlanRule{GPU: "H100,H200", GPUs: 16, Hours: 48, Start: "2026-12-03", Deadline: "2026-12-07", BelowUSD: f64(10000)}}
	e := newEvaluator(t, Options{Planner: p, Now: clk.Now, Rules: validRules(t, config.Notify{}, rule)})
	ctx := context.Background()
	e.setLatest(&feed.Snapshot{Ready: true})
	var fired []int
	for i := range 5 {
		clk.Set(t0.Add(time.Duration(i) * 2 * time.Hour))
		e.tick(ctx, false) // due every 10 minutes: each of these ticks
		fired = append(fired, len(e.Alerts(0)))
	}
	if got := fired; got[0] != 0 || got[1] != 1 || got[2] != 1 || got[3] != 1 || got[4] != 2 {
		t.Fatalf("alerts after each plan: %v, want 0 1 1 1 2 (once per crossing; no plan on time is not cheaper)", got)
	}
	a := e.Alerts(0)[0]
	if *a.TotalUSD != 9000 || *a.ThresholdUSD != 10000 || *a.Strategy != "spot+od-planner" || !strings.Contains(a.Text, "under $10000") {
		t.Errorf("alert %+v %q", a, a.Text)
	}
	j := p.jobs[0]
	if strings.Join(j.Models, ",") != "H100,H200" || j.GPUs != 16 || j.OnTimePct != DefaultOnTimePct || j.Checkpoint != DefaultCheckpoint ||
		!j.Start.Equal(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("job %+v", j)
	}
}
