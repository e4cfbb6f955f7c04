package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/watch"
)

// TestPlanRulePricedByThePlanner: a plan rule is priced by the planner
// over the simulated market (not refused as it was before the planner was
// in the build): the quote names an on-time strategy and its cost, and a
// job that cannot be on time often enough is not found.
func TestPlanRulePricedByThePlanner(t *testing.T) {
	s := simSettings(t, domain.Query{Providers: []string{"sim"}, GPUs: []string{"H100"}, Window: 24 * time.Hour})
	a := New(context.Background(), s, DefaultTable(), nil)
	defer a.Close()
	ps, err := a.Providers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap, err := a.HubOver(ps).WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := a.Booking(ps, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p := planRule{a: a, svc: svc}
	start := time.Now().Add(24 * time.Hour).Truncate(time.Hour)
	q, err := p.BestPlan(context.Background(), watch.PlanJob{Models: []string{"H100"}, GPUs: 8, Hours: 12,
		Start: start, Deadline: start.Add(48 * time.Hour), Checkpoint: 15 * time.Minute, OnTimePct: 95}, snap)
	if err != nil {
		t.Fatal(err)
	}
	if !q.Found || q.Strategy == "" || !(q.ExpectedUSD > 0) || q.OnTimePct < 95 || !q.Simulated {
		t.Errorf("quote %+v: want an on-time strategy of the simulated market with its cost", q)
	}
	// No slack beyond the changeover and 100 % on time asked: spot cannot
	// promise it, but on-demand (or a block) still may; a plan is found
	// only if on time.
	changeover := s.Config.Plan.Changeover.D()
	tight, err := p.BestPlan(context.Background(), watch.PlanJob{Models: []string{"H100"}, GPUs: 8, Hours: 12,
		Start: start, Deadline: start.Add(12*time.Hour + changeover), Checkpoint: 15 * time.Minute, OnTimePct: 100}, snap)
	if err != nil {
		t.Fatal(err)
	}
	// Without time for the changeover no strategy fits: said, not priced.
	if _, err := p.BestPlan(context.Background(), watch.PlanJob{Models: []string{"H100"}, GPUs: 8, Hours: 12,
		Start: start, Deadline: start.Add(12 * time.Hour), Checkpoint: 15 * time.Minute, OnTimePct: 100}, snap); err == nil ||
		!strings.Contains(err.Error(), "no strategy fits") {
		t.Errorf("a job the changeover does not fit: %v", err)
	}
	if tight.Found && tight.OnTimePct < 100 {
		t.Errorf("tight job: found %+v below the asked 100 %% on time", tight)
	}
}
