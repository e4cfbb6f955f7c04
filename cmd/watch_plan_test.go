package cmd

import (
	"context"
	"fmt"
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
	isolate(t)
	e, _, _ := testEnv(t, domain.Query{Providers: []string{"sim"}, GPUs: []string{"H100"}, Window: 24 * time.Hour})
	e.DataDir = t.TempDir()
	a := newCLI().appOf(context.Background(), e)
	defer a.Close()
	snap, err := a.ReadySnapshot(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := a.Providers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	svc, err := a.Booking(ps, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p := watchPlanner{a: a, svc: svc}
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
	changeover := a.Config.Plan.Changeover.D()
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

// TestWatchOncePricesAPlanRule: `watch --once` loads a plan rule and
// prices it on the simulated market: a budget any on-time plan beats
// fires (exit 3, the alert naming the strategy), one none can meet does
// not (exit 0).
func TestWatchOncePricesAPlanRule(t *testing.T) {
	start := time.Now().UTC().Add(48 * time.Hour).Format("2006-01-02")
	deadline := time.Now().UTC().Add(7 * 24 * time.Hour).Format("2006-01-02")
	rule := func(name, below string) string {
		return fmt.Sprintf("  - name: %s\n    plan: {gpu: H100, gpus: 8, hours: 24, start: %q, deadline: %q, below_usd: %s}\n", name, start, deadline, below)
	}
	s := newSession(t, "watch:\n"+rule("cheap-enough", "1000000"))
	code, out, errOut := s.run("watch", "--once")
	if code != exitFired || !strings.Contains(out, "alert cheap-enough") {
		t.Fatalf("a plan under a huge budget: exit %d, stdout %q, stderr %s; want %d and an alert", code, out, errOut, exitFired)
	}
	s = newSession(t, "watch:\n"+rule("never", "1"))
	if code, out, errOut := s.run("watch", "--once"); code != 0 || out != "" {
		t.Errorf("a plan under $1: exit %d, stdout %q, stderr %s; want 0 and nothing", code, out, errOut)
	}
}
