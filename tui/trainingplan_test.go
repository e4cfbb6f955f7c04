package tui

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
)

// TestTrainingPlanConfirmationNamesItsSegments: the Blocks view lists a
// training plan beside blocks with its KIND, and its confirmation names
// each segment, the target resource and that SageMaker has no dry run, at
// 80 columns too.
func TestTrainingPlanConfirmationNamesItsSegments(t *testing.T) {
	plan := ledgertest.Offering("sim", "tpo-plan", fixedNow.Add(24*time.Hour), 72, 1, 2500)
	plan.Kind, plan.TargetResource = domain.KindTrainingPlan, domain.TargetHyperPodCluster
	plan.Segments = []domain.Segment{
		{InstanceType: "p5.48xlarge", InstanceCount: 1, Zone: "us-east-1a", Start: plan.Start, End: plan.Start.Add(24 * time.Hour)},
		{InstanceType: "p5.48xlarge", InstanceCount: 1, Zone: "us-east-1b", Start: plan.Start.Add(48 * time.Hour), End: plan.End},
	}
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fake := ledgertest.New("sim", plan,
		ledgertest.Offering("sim", "cb-cheap", fixedNow.Add(24*time.Hour), 48, 1, 3000),
		ledgertest.Offering("sim", "cb-dear", fixedNow.Add(48*time.Hour), 48, 1, 6000),
	).Simulated()
	svc := ledger.New(st, []domain.Provider{fake}, ledger.Options{Now: nowFn, Timeout: time.Second, Actor: "tester"})
	m := newBare(Options{Now: nowFn, NoColor: true, Role: RoleBooker, Actor: "local:tester", Booking: svc})
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	run(m, m.broadcast(snapshotMsg{snap: fixtureSnapshot()}))
	f := &moneyFixture{m: m, fake: fake, svc: svc, st: st}
	f.show(t, "Blocks")
	b := f.blocks()
	if len(b.offers) != 3 || b.offers[0].ID != "tpo-plan" {
		t.Fatalf("offers %+v, want the plan first (cheapest per GPU-hour held)", b.offers)
	}
	f.m.Update(tea.WindowSizeMsg{Width: 220, Height: 40}) // KIND is the first column a narrower screen leaves out
	if scr := f.screen(); !strings.Contains(scr, "KIND") || !strings.Contains(scr, "training-plan") {
		t.Fatalf("blocks screen without the plan's kind (%q, w %d):\n%s", b.offers[0].Kind, b.w, scr)
	}
	if !strings.Contains(f.screen(), "    48     ") {
		t.Errorf("HOURS is not the 48 h the plan's segments hold:\n%s", f.screen())
	}
	f.m.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	press(f.m, "b")
	scr := f.screen()
	for _, want := range []string{"segment 1 of 2", "segment 2 of 2", "us-east-1b", "held 48 h in all", "serves only: hyperpod-cluster", "no dry run:"} {
		if !strings.Contains(scr, want) {
			t.Errorf("confirmation without %q:\n%s", want, scr)
		}
	}
	f.m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	for i, line := range strings.Split(f.screen(), "\n") {
		if w := len([]rune(line)); w > 80 {
			t.Errorf("line %d is %d wide at 80 columns: %q", i, w, line)
		}
	}
	press(f.m, "y", "enter")
	if n := f.fake.Calls("Book"); n != 1 {
		t.Fatalf("%d purchases, want 1", n)
	}
}
