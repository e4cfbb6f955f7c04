package tui

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
	"github.com/gpumarket/gpumarket/planner"

	"github.com/gpumarket/gpumarket/watch"
)

// planSession is a session of role over the money fixture's provider
// with a watch that saves the rules it makes, on the Plan view.
func planSession(t *testing.T, role Role, ev *watch.Evaluator) (*Model, *planView) {
	t.Helper()
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fake := ledgertest.New("sim", ledgertest.Offering("sim", "cb-cheap", fixedNow.Add(24*time.Hour), 48, 1, 3000)).Simulated()
	fake.SpotUSDHour = 20
	svc := ledger.New(st, []domain.Provider{fake}, ledger.Options{Now: nowFn, Timeout: time.Second})
	m := newBare(Options{Now: nowFn, NoColor: true, Role: role, Booking: svc, Watch: ev, Actor: "ssh:SHA256:abc alice"})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	run(m, m.broadcast(snapshotMsg{snap: fixtureSnapshot()}))
	showView(t, m, "Plan")
	for _, v := range m.views {
		if p, ok := v.(*planView); ok {
			p.runs = testRuns
			p.form.gpus, p.form.hours, p.form.start, p.form.deadline = "16", "48", "2026-11-24 09:00", "2026-11-27 09:00"
			return m, p
		}
	}
	t.Fatal("no Plan view")
	return nil, nil
}

// TestPlanMakesAPlanRule: a on the
// Plan view makes a plan rule for the job the table shows — "the best
// plan on time that often gets cheaper than $X", X below the best
// expected cost now to start with — saved with the other rules made in
// the TUI; only a booker may.
func TestPlanMakesAPlanRule(t *testing.T) {
	ev := newWatch(t)
	m, p := planSession(t, RoleBooker, ev)

	// Before any plan: the job as typed, no figure to start from.
	press(m, "a")
	if scr := flat(ansiStrip(m)); !p.prompt.open || !strings.Contains(scr, "r runs the plan: its best is a figure to start from") {
		t.Fatalf("prompt before a plan:\n%s", ansiStrip(m))
	}
	if msgs := press(m, "enter"); !p.prompt.open || !strings.Contains(ansiStrip(m), "want a price above 0") || len(ev.Rules()) != 0 {
		t.Fatalf("an empty figure was saved: %v", msgs)
	}
	press(m, "esc")

	press(m, "r")
	var best planner.Result
	for _, r := range p.res.results {
		if r.OnTimePct >= 95 {
			best = r
			break
		}
	}
	if best.Strategy == "" {
		t.Fatal("no plan on time: nothing to start from")
	}
	want := math.Floor(best.ExpectedCostUSD*95) / 100
	press(m, "a")
	scr := flat(ansiStrip(m))
	prompt := "alert when the best plan for 16 H100 × 48h by 11-27 09:00, on time ≥95%, is below $" + strconv.FormatFloat(want, 'f', -1, 64) +
		"▏ (best now $" + strconv.FormatFloat(best.ExpectedCostUSD, 'f', 2, 64) + ", " + best.Strategy + ")"
	if !strings.Contains(scr, prompt) {
		t.Fatalf("prompt: want %q in\n%s", prompt, ansiStrip(m))
	}
	for _, l := range strings.Split(ansiStrip(m), "\n") {
		if cellWidth(l) > 80 {
			t.Errorf("line wider than 80: %q", l)
		}
	}
	// The keys are the prompt's: b types nothing and buys nothing.
	msgs := pressAll(m, "b", "enter")
	if !hasNotice(msgs, "rule plan-H100-16-48h saved") || !hasNotice(msgs, ev.RulesFile()) || p.confirm.open {
		t.Fatalf("save: %v (box open %v)", msgs, p.confirm.open)
	}
	rs := ev.Rules()
	if len(rs) != 1 {
		t.Fatalf("rules %+v", rs)
	}
	r, ok := rs[0].Cond.(*watch.PlanRule)
	if !ok {
		t.Fatalf("rule %+v", rs[0])
	}
	if r.GPU != "H100" || r.GPUs != 16 || r.Hours != 48 || r.Start != "2026-11-24T09:00:00Z" || r.Deadline != "2026-11-27T09:00:00Z" ||
		r.OnTimePct == nil || *r.OnTimePct != 95 || r.BelowUSD == nil || *r.BelowUSD != want || r.BelowUSDGPUHour != nil ||
		r.CheckpointOrDefault() != p.res.terms.job.Checkpoint || rs[0].MadeBy != "ssh:SHA256:abc alice" || rs[0].From != watch.FromRulesFile {
		t.Errorf("plan rule %+v (%+v)", r, rs[0])
	}

	viewer, vp := planSession(t, RoleViewer, ev)
	press(viewer, "r")
	if msgs := press(viewer, "a"); !hasNotice(msgs, "only a booker may make alert rules") || vp.prompt.open {
		t.Errorf("a viewer opened a rule prompt: %v", msgs)
	}
	none, np := planSession(t, RoleBooker, nil)
	if msgs := press(none, "a"); !hasNotice(msgs, "cannot be made in this session") || np.prompt.open {
		t.Errorf("a session without a watch: %v", msgs)
	}
}

// A job that cannot checkpoint, planned in some regions only: the rule
// says 0s (not the default 15m), and the prompt says the rule watches
// every region.
func TestPlanRuleKeepsTheJobsTerms(t *testing.T) {
	ev := newWatch(t)
	m, p := planSession(t, RoleBooker, ev)
	p.form.checkpointable, p.form.regions = false, "us-east-1,us-west-2"
	press(m, "r", "a")
	if !strings.Contains(flat(ansiStrip(m)), "in every region (a plan rule has no region filter)") {
		t.Errorf("prompt:\n%s", ansiStrip(m))
	}
	press(m, "enter")
	rs := ev.Rules()
	if len(rs) != 1 || rs[0].Cond.(*watch.PlanRule).Checkpoint == nil || rs[0].Cond.(*watch.PlanRule).CheckpointOrDefault() != 0 {
		t.Fatalf("rules %+v", rs)
	}
}
