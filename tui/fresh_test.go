package tui

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
	"github.com/gpumarket/gpumarket/planner"
)

// ledgerRows lists the fixture's ledger.
func (f *moneyFixture) ledgerRows(t *testing.T) []ledger.Entry {
	t.Helper()
	rows, err := f.st.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestBlocksFreshTermsAskAgain: the provider
// reprices the block between the confirmation and the yes. Nothing is
// bought; the box shows the new terms — the new total first, what
// changed — and asks again; y then enter buys them, at the new price.
func TestBlocksFreshTermsAskAgain(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Blocks")
	b := f.blocks()
	press(f.m, "b")
	if !strings.Contains(f.screen(), "Buy this capacity block for $3000.00?") {
		t.Fatalf("confirmation:\n%s", f.screen())
	}
	f.fake.Reprice("cb-cheap", func(o *domain.Offering) { o.UpfrontUSD = 3900 })
	press(f.m, "y", "enter")
	if n := f.fake.Calls("Book"); n != 0 {
		t.Fatalf("%d purchases at terms the box did not show", n)
	}
	scr := flat(f.screen())
	if !b.confirm.open || b.confirm.sending {
		t.Fatalf("the box closed, or is still sending:\n%s", f.screen())
	}
	title := strings.Index(scr, "The terms changed: buy this capacity block for $3900.00 now (shown $3000.00)?")
	changed := strings.Index(scr, "Changed since shown (sim sells it on other terms now): total $3000.00 → $3900.00 (+$900.00)")
	total := strings.Index(scr, "Total upfront: $3900.00")
	if title < 0 || changed < title || total < changed || strings.Contains(scr, "Total upfront: $3000.00") {
		t.Fatalf("the renewed box does not say the new total first, then what changed, then the terms:\n%s", f.screen())
	}
	if !strings.Contains(scr, "dry run: Request would have succeeded") || !strings.Contains(scr, "[no]") {
		t.Fatalf("the new terms were not checked again, or the yes carried over:\n%s", f.screen())
	}
	// enter alone still is no.
	press(f.m, "enter")
	if f.fake.Calls("Book") != 0 {
		t.Fatal("enter without a new y bought the new terms")
	}
	press(f.m, "y", "enter")
	if n := f.fake.Calls("Book"); n != 1 || b.confirm.open {
		t.Fatalf("after y on the new terms: %d purchases, box open %v", n, b.confirm.open)
	}
	rows := f.ledgerRows(t)
	if len(rows) != 1 || rows[0].CostUSD != 3900 || rows[0].IdemKey != "cb-cheap" {
		t.Fatalf("ledger %+v: want one row at the new price", rows)
	}
}

// TestBlocksFreshTermsAtTheDryRun: the terms changed before the box was
// opened (the table is older than the provider's price): the box's own
// check finds it and shows the new terms before any yes is possible.
func TestBlocksFreshTermsAtTheDryRun(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Blocks")
	f.fake.Reprice("cb-cheap", func(o *domain.Offering) {
		o.Start, o.End = o.Start.Add(24*time.Hour), o.End.Add(24*time.Hour)
	})
	press(f.m, "b")
	scr := flat(f.screen())
	if !strings.Contains(scr, "The terms changed: buy this capacity block for $3000.00 now (shown $3000.00)?") ||
		!strings.Contains(scr, "start 11-24 14:00 UTC → 11-25 14:00 UTC; end 11-26 14:00 UTC → 11-27 14:00 UTC") ||
		!strings.Contains(scr, "start Wed 2026-11-25 14:00 UTC") {
		t.Fatalf("the box shows the old dates:\n%s", f.screen())
	}
	press(f.m, "y", "enter")
	rows := f.ledgerRows(t)
	if f.fake.Calls("Book") != 1 || len(rows) != 1 || !rows[0].Start.Equal(fixedNow.Add(48*time.Hour)) {
		t.Fatalf("%d purchases, ledger %+v: want the new dates bought", f.fake.Calls("Book"), rows)
	}
}

// A block that reprices again while its new terms are shown is asked
// for a third time: a yes buys only what the box shows.
func TestBlocksFreshTermsNeverBuysUnseenTerms(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Blocks")
	press(f.m, "b")
	for i, price := range []float64{3900, 4100} {
		f.fake.Reprice("cb-cheap", func(o *domain.Offering) { o.UpfrontUSD = price })
		press(f.m, "y", "enter")
		if f.fake.Calls("Book") != 0 || !strings.Contains(f.screen(), "Total upfront: $"+[]string{"3900.00", "4100.00"}[i]) {
			t.Fatalf("change %d: %d purchases; screen:\n%s", i+1, f.fake.Calls("Book"), f.screen())
		}
	}
	press(f.m, "esc")
	if f.blocks().confirm.open || f.fake.Calls("Book") != 0 || len(f.ledgerRows(t)) != 0 {
		t.Fatal("esc on the new terms did not leave without buying")
	}
}

// A later search (another session's) re-priced the id while the box was
// open; the provider, asked right before buying, still sells at the
// price shown. Neither purchase is sent on the yes: the search's terms
// are never bought, and the box asks again for the provider's, saying
// they are those shown before.
func TestBlocksBuysOnlyWhatTheConfirmationShowed(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Blocks")
	press(f.m, "b")
	if !f.blocks().confirm.open {
		t.Fatal("no confirmation")
	}
	dearer := ledgertest.Offering("sim", "cb-cheap", fixedNow.Add(24*time.Hour), 48, 1, 3900)
	if err := f.st.SaveOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour},
		[]domain.Offering{dearer}, fixedNow); err != nil {
		t.Fatal(err)
	}
	press(f.m, "y", "enter")
	if n := f.fake.Calls("Book"); n != 0 {
		t.Fatalf("%d purchases at terms the confirmation did not show", n)
	}
	scr := flat(f.screen())
	if !strings.Contains(scr, "Checked again: buy this capacity block for $3000.00?") || !strings.Contains(scr, "the terms are those shown before") ||
		strings.Contains(scr, "3900") {
		t.Fatalf("the box does not say the terms were checked again:\n%s", f.screen())
	}
	press(f.m, "y", "enter")
	if rows := f.ledgerRows(t); f.fake.Calls("Book") != 1 || len(rows) != 1 || rows[0].CostUSD != 3000 {
		t.Fatalf("%d purchases, ledger %+v", f.fake.Calls("Book"), rows)
	}
}

// A later search re-priced the id while the box was open, and the
// provider sells it at that price: the box shows it, what changed
// measured from what it showed.
func TestBlocksShowsALaterSearchsTerms(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Blocks")
	press(f.m, "b")
	dearer := ledgertest.Offering("sim", "cb-cheap", fixedNow.Add(24*time.Hour), 48, 1, 3900)
	if err := f.st.SaveOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour},
		[]domain.Offering{dearer}, fixedNow); err != nil {
		t.Fatal(err)
	}
	f.fake.Reprice("cb-cheap", func(o *domain.Offering) { o.UpfrontUSD = 3900 })
	press(f.m, "y", "enter")
	if scr := flat(f.screen()); f.fake.Calls("Book") != 0 || !strings.Contains(scr, "Changed since shown (a later search re-priced it): total $3000.00 → $3900.00") {
		t.Fatalf("%d purchases; box:\n%s", f.fake.Calls("Book"), f.screen())
	}
	press(f.m, "y", "enter")
	if rows := f.ledgerRows(t); f.fake.Calls("Book") != 1 || len(rows) != 1 || rows[0].CostUSD != 3900 {
		t.Fatalf("%d purchases, ledger %+v", f.fake.Calls("Book"), rows)
	}
}

// TestPlanFreshTermsAskAgain: the Plan view's b on a block runs the same
// action: the new terms are asked for, with the plan's notes kept under
// them.
func TestPlanFreshTermsAskAgain(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Plan")
	p := f.plan()
	p.runs = testRuns
	f.job8()
	press(f.m, "r")
	f.selectStrategy(t, planner.StrategyBlock)
	press(f.m, "b")
	f.fake.Reprice("cb-cheap", func(o *domain.Offering) { o.UpfrontUSD = 3300 })
	press(f.m, "y", "enter")
	scr := flat(f.screen())
	for _, want := range []string{"The terms changed: buy this capacity block for $3300.00 now (shown $3000.00)?",
		"total $3000.00 → $3300.00 (+$300.00)", "Total upfront: $3300.00", "capacity-block: expected $3000.00", "Not automated: running your job on it."} {
		if !strings.Contains(scr, want) {
			t.Errorf("renewed box lacks %q", want)
		}
	}
	if f.fake.Calls("Book") != 0 || !p.confirm.open {
		t.Fatalf("%d purchases; box open %v:\n%s", f.fake.Calls("Book"), p.confirm.open, f.screen())
	}
	if strings.Contains(f.screen(), "carried out since") {
		t.Error("the plan says it was carried out, though nothing was bought")
	}
	press(f.m, "y", "enter")
	if rows := f.ledgerRows(t); f.fake.Calls("Book") != 1 || len(rows) != 1 || rows[0].CostUSD != 3300 {
		t.Fatalf("%d purchases, ledger %+v", f.fake.Calls("Book"), rows)
	}
}

// TestPlanFleetEstimateChangedAsksAgain: with a budget cap the booking
// service reads the fleet's prices again right before the launch; they
// went up, so nothing is launched and the box shows the new estimate —
// its cost first — and asks again; y then enter launches at it, and the
// ledger records it.
func TestPlanFleetEstimateChangedAsksAgain(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{MaxBookingUSD: 100000})
	f.show(t, "Plan")
	p := f.plan()
	p.runs = testRuns
	f.job16()
	press(f.m, "r")
	f.selectStrategy(t, planner.StrategyOnDemand)
	press(f.m, "b")
	if scr := flat(f.screen()); !strings.Contains(scr, "Estimated cost: $120.00 per hour") {
		t.Fatalf("first estimate:\n%s", f.screen())
	}
	f.fake.SpotUSDHour = 26
	press(f.m, "y", "enter")
	if n := f.fake.Calls("LaunchFleet"); n != 0 || !p.confirm.open {
		t.Fatalf("%d launches at prices the box did not show; box open %v", n, p.confirm.open)
	}
	scr := flat(f.screen())
	title := strings.Index(scr, "The prices went up: schedule an on-demand fleet of 2 instances in us-east-1")
	changed := strings.Index(scr, "Changed since shown: about $120.00 → $156.00 an hour (+$36.00)")
	cost := strings.Index(scr, "Estimated cost: $156.00 per hour")
	if title < 0 || changed < title || cost < changed || !strings.Contains(scr, "at about $156.00 an hour now (shown $120.00)?") {
		t.Fatalf("the renewed box:\n%s", f.screen())
	}
	if !strings.Contains(scr, "on-demand: expected $") || !strings.Contains(scr, "dry run: Request would have succeeded") {
		t.Fatalf("the plan's notes or the dry run are missing:\n%s", f.screen())
	}
	press(f.m, "y", "enter")
	// The plan starts later and this provider keeps no schedules: the
	// fleet is recorded scheduled, at the new estimate, and gpumarket's
	// loop launches it at its start.
	rows := f.ledgerRows(t)
	if f.fake.Calls("LaunchFleet") != 0 || len(rows) != 1 || rows[0].USDHour != 156 || rows[0].State != ledger.StateScheduled {
		t.Fatalf("%d launches, ledger %+v: want one fleet scheduled at the new estimate", f.fake.Calls("LaunchFleet"), rows)
	}
}

// A provider whose terms change at every look is not asked again for
// ever while the box says "checking": after a few renewals the box says
// so, and nothing is bought.
func TestBlocksTermsThatKeepChangingAreRefused(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.fake.RefreshHook = func(context.Context, domain.Offering) error {
		f.fake.Reprice("cb-cheap", func(o *domain.Offering) { o.UpfrontUSD++ })
		return nil
	}
	f.show(t, "Blocks")
	press(f.m, "b")
	scr := flat(f.screen())
	if !strings.Contains(scr, "the terms changed 4 times while being checked: nothing was bought") || !strings.Contains(scr, "esc closes; nothing was spent") {
		t.Fatalf("box:\n%s", f.screen())
	}
	if n := f.fake.Calls("RefreshOffering"); n != maxQuoteRenewals+1 {
		t.Errorf("%d looks at the provider, want %d", n, maxQuoteRenewals+1)
	}
	press(f.m, "y", "enter")
	if f.fake.Calls("Book") != 0 {
		t.Fatal("bought terms that were never settled")
	}
}

// The renewed box at 80×24 and 120×40: the new total in the question,
// what changed, then the terms, and the prompt.
func TestGoldenBlocksFreshTerms(t *testing.T) {
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
			f.m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			f.show(t, "Blocks")
			f.fake.Reprice("cb-cheap", func(o *domain.Offering) { o.UpfrontUSD = 3900 })
			press(f.m, "b")
			golden.RequireEqual(t, f.screen())
		})
	}
}

// TestFleetEstimateChangedAsksAgain: the Fleet view's L runs the same
// launch: prices that went up before the yes are shown and asked for.
func TestFleetEstimateChangedAsksAgain(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{MaxBookingUSD: 100000})
	markTwo(f)
	f.show(t, "Fleet")
	press(f.m, "L")
	if !strings.Contains(flat(f.screen()), "Estimated cost: $") {
		t.Fatalf("first estimate:\n%s", f.screen())
	}
	f.fake.SpotUSDHour = 30
	press(f.m, "y", "enter")
	if scr := flat(f.screen()); f.fake.Calls("LaunchFleet") != 0 || !strings.Contains(scr, "The prices went up: launch") || !strings.Contains(scr, "Changed since shown: about $") {
		t.Fatalf("%d launches; box:\n%s", f.fake.Calls("LaunchFleet"), f.screen())
	}
	press(f.m, "y", "enter")
	if rows := f.ledgerRows(t); f.fake.Calls("LaunchFleet") != 1 || len(rows) != 1 {
		t.Fatalf("%d launches, ledger %+v", f.fake.Calls("LaunchFleet"), rows)
	}
}
