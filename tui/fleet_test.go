package tui

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
)

func (f *moneyFixture) fleet() *fleetView {
	for _, v := range f.m.views {
		if x, ok := v.(*fleetView); ok {
			return x
		}
	}
	return nil
}

func (f *moneyFixture) ledger() *ledgerView {
	for _, v := range f.m.views {
		if x, ok := v.(*ledgerView); ok {
			return x
		}
	}
	return nil
}

func TestFleetLaunchFollowDelete(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{MaxBookingUSD: 2400}) // its first day at $100/h
	f.m.market.toggleMark("sim/us-east-1/us-east-1a/p5.48xlarge")
	f.m.market.toggleMark("sim/us-east-1/us-east-1b/g6e.xlarge")
	f.show(t, "Fleet")
	fv := f.fleet()
	if len(fv.poolKeys) != 2 || !strings.Contains(f.screen(), "sim/us-east-1/us-east-1a/p5.48xlarge") {
		t.Fatalf("pools %v\n%s", fv.poolKeys, f.screen())
	}
	// target 3, one on-demand
	press(f.m, "e", "backspace", "3", "down", "backspace", "1", "enter")
	if fv.form.target != "3" || fv.form.onDemand != "1" || fv.formErr != "" {
		t.Fatalf("form %+v err %q", fv.form, fv.formErr)
	}
	press(f.m, "L")
	scr := f.screen()
	// 1 on-demand at 60 $/h + 2 spot at 20 $/h (the fake's prices).
	if !strings.Contains(scr, "Estimated cost: $100.00 per hour") || !strings.Contains(scr, "dry run:") || !strings.Contains(scr, "Type y then enter to launch") {
		t.Fatalf("confirmation:\n%s", scr)
	}
	if f.fake.Calls("LaunchFleetDryRun") != 1 || f.fake.Calls("LaunchFleet") != 0 {
		t.Fatal("the dry run was not the only call")
	}
	press(f.m, "y", "enter")
	if f.fake.Calls("LaunchFleet") != 1 {
		t.Fatalf("%d launches", f.fake.Calls("LaunchFleet"))
	}
	if fv.rowID == "" || fv.row.ProviderRef != "fleet-0001" || !strings.Contains(f.screen(), "fleet-0001") {
		t.Fatalf("following %q %+v\n%s", fv.rowID, fv.row, f.screen())
	}
	row, _ := f.st.Get(context.Background(), fv.rowID)
	if row.Kind != ledger.KindFleet || row.USDHour != 100 || row.IdemKey != row.ID || row.InstanceType != "p5.48xlarge,g6e.xlarge" {
		t.Fatalf("ledger row %+v", row)
	}
	// The tick asks for the fleet's state.
	run(f.m, func() tea.Msg { return fleetTickMsg{seq: fv.tick} })
	if f.fake.Calls("DescribeFleet") != 1 {
		t.Fatalf("DescribeFleet calls %d", f.fake.Calls("DescribeFleet"))
	}

	// Delete it from the Ledger view, through its confirmation.
	f.show(t, "Ledger")
	lv := f.ledger()
	if len(lv.rows) != 1 || lv.rows[0].ProviderRef != "fleet-0001" {
		t.Fatalf("ledger rows %+v", lv.rows)
	}
	press(f.m, "d")
	if !strings.Contains(f.screen(), "Delete fleet fleet-0001?") {
		t.Fatalf("delete box:\n%s", f.screen())
	}
	press(f.m, "enter")
	if f.fake.Calls("DeleteFleet") != 0 {
		t.Fatal("deleted without y")
	}
	press(f.m, "y", "enter")
	if f.fake.Calls("DeleteFleet") != 1 {
		t.Fatalf("%d deletes", f.fake.Calls("DeleteFleet"))
	}
	row, _ = f.st.Get(context.Background(), fv.rowID)
	if row.State != ledger.StateDeleted {
		t.Fatalf("after delete: %+v", row)
	}
}

func TestFleetComposeNeedsOneRegion(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.m.market.toggleMark("sim/us-east-1/us-east-1a/p5.48xlarge")
	f.m.market.toggleMark("sim/us-west-2/us-west-2b/p5.48xlarge")
	f.show(t, "Fleet")
	press(f.m, "L")
	if f.fleet().confirm.open || !strings.Contains(f.fleet().formErr, "one region") {
		t.Fatalf("two regions accepted: %q", f.fleet().formErr)
	}
	// At 80 columns the whole refusal is read, wrapped.
	f.m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	if scr := strings.Join(strings.Fields(f.screen()), " "); !strings.Contains(scr, "span 1 provider and 2 regions: a fleet is one provider's, in one region") {
		t.Errorf("80-column refusal:\n%s", f.screen())
	}
}

func TestLedgerOrderAndCountdown(t *testing.T) {
	now := fixedNow
	rows := []ledger.Entry{
		{ID: "01", Kind: ledger.KindBlock, State: ledger.StateEnded, Start: now.Add(-72 * time.Hour), End: now.Add(-24 * time.Hour)},
		{ID: "02", Kind: ledger.KindBlock, State: ledger.StateScheduled, Start: now.Add(50 * time.Hour), End: now.Add(98 * time.Hour)},
		{ID: "03", Kind: ledger.KindBlock, State: ledger.StateScheduled, Start: now.Add(3*time.Hour + 20*time.Minute), End: now.Add(27 * time.Hour)},
		{ID: "04", Kind: ledger.KindBlock, State: ledger.StateActive, Start: now.Add(-time.Hour), End: now.Add(45 * time.Minute)},
		{ID: "05", Kind: ledger.KindFleet, State: ledger.StateDeleted},
		{ID: "06", Kind: ledger.KindBlock, State: ledger.StateUnknown, Start: now.Add(time.Hour), End: now.Add(25 * time.Hour)},
	}
	var got []string
	for _, r := range orderLedger(rows) {
		got = append(got, r.ID+" "+present.TimeLeft(r, now))
	}
	want := []string{"04 ends in 45m", "03 starts in 3h 20m", "02 starts in 2d 2h", "06 starts in 1h 0m", "05 -", "01 ended"}
	// A reservation past its window that was not released still bills.
	billing := ledger.Entry{Kind: ledger.KindReservation, State: ledger.StateActive, Start: now.Add(-48 * time.Hour), End: now.Add(-time.Hour)}
	if got := present.TimeLeft(billing, now); got != "over: billing until released" {
		t.Errorf("unreleased reservation: %q", got)
	}
	billing.State = ledger.StateEnded
	if got := present.TimeLeft(billing, now); got != "ended" {
		t.Errorf("released reservation: %q", got)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
}

func TestNoBookingService(t *testing.T) {
	m := newBare(Options{Now: nowFn, NoColor: true})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	run(m, m.broadcast(snapshotMsg{snap: fixtureSnapshot()}))
	for _, title := range []string{"Blocks", "Fleet", "Ledger"} {
		for m.views[m.active].Title() != title {
			press(m, "tab")
		}
		press(m, "b", "L", "d")
		if !strings.Contains(m.views[m.active].View(), "session") {
			t.Errorf("%s without a ledger: %q", title, m.views[m.active].View())
		}
	}
}

// BenchmarkBlocksView renders the Blocks view with 100 offerings over a
// 1000-pool market (each row looks for its spot alternative).
func BenchmarkBlocksView(b *testing.B) {
	v := newBlocksView(&common{styles: newStyles(true, true), keys: newGlobalKeys(), now: nowFn, eff: planner.DefaultBasis}, context.Background(), &ledger.Service{}, nil)
	v.SetSize(160, 40)
	v.snap = bigSnapshot(1000)
	for i := 0; i < 100; i++ {
		v.offers = append(v.offers, ledgertest.Offering("sim", fmt.Sprintf("cb-%d", i), fixedNow.Add(time.Duration(i)*time.Hour), 48, 1, 3000+float64(i)))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = v.View()
	}
}

// TestLedgerUnknownFleetCost: a fleet launched at unknown prices is
// recorded with cost 0; the ledger shows "-", not a price of zero.
func TestLedgerUnknownFleetCost(t *testing.T) {
	f := newMoneyFixture(t, RoleViewer, ledger.Budget{})
	f.show(t, "Ledger")
	lv := f.ledger()
	rows := []ledger.Entry{
		{ID: "01JA", Kind: ledger.KindFleet, State: ledger.StateActive, Region: "us-east-1", InstanceType: "p5.48xlarge", InstanceCount: 2,
			USDHour: math.NaN(), CostNote: ledger.FleetEstimate{Basis: "unknown prices"}.Note(), ProviderRef: "fleet-a", CreatedAt: fixedNow.Add(-time.Hour)},
		{ID: "01JB", Kind: ledger.KindFleet, State: ledger.StateActive, Region: "us-east-1", InstanceType: "g6e.xlarge", InstanceCount: 3,
			USDHour: 240, CostNote: ledger.FleetEstimate{Basis: "current prices"}.Note(), ProviderRef: "fleet-b", CreatedAt: fixedNow.Add(-time.Hour)},
	}
	lv.rows, lv.ready = orderLedger(rows), true
	lv.SetSize(200, 20)
	out := ansi.Strip(lv.View())
	if !strings.Contains(out, present.Money(240)+"/h") {
		t.Fatalf("no priced fleet cost %q in\n%s", present.Money(240)+"/h", out)
	}
	if strings.Contains(out, present.Money(0)) {
		t.Errorf("an unknown fleet cost is shown as %q:\n%s", present.Money(0), out)
	}
}

// TestLedgerFitsAndScrolls: at 80 columns a workshop attendee still sees
// what, where, when and the countdown; a ledger longer than the screen
// scrolls with the cursor.
func TestLedgerFitsAndScrolls(t *testing.T) {
	f := newMoneyFixture(t, RoleViewer, ledger.Budget{})
	f.show(t, "Ledger")
	lv := f.ledger()
	var rows []ledger.Entry
	for i := range 30 {
		rows = append(rows, ledger.Entry{ID: fmt.Sprintf("01J%03d", i), Kind: ledger.KindBlock, State: ledger.StateScheduled,
			Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge", InstanceCount: i + 1,
			Start: fixedNow.Add(time.Duration(24*(i+1))*time.Hour + 14*time.Hour), End: fixedNow.Add(time.Duration(24*(i+3)) * time.Hour),
			CostUSD: 1000, ProviderRef: "cr-0123456789abcdef0"})
	}
	lv.rows, lv.ready = orderLedger(rows), true
	lv.SetSize(80, 20)
	out := ansi.Strip(lv.View())
	for _, want := range []string{"STATE", "WHAT", "WHERE", "START (local)", "TIME LEFT", "1×p5.48xlarge", "us-east-1a", "starts in 1d 14h", "11-25 04:00 UTC"} {
		if !strings.Contains(out, want) {
			t.Errorf("80 columns: no %q in\n%s", want, out)
		}
	}
	for i, l := range strings.Split(out, "\n") {
		if w := ansi.StringWidth(l); w > 80 {
			t.Errorf("line %d is %d wide: %q", i, w, l)
		}
	}
	if n := strings.Count(out, "\n") + 1; n > 20 {
		t.Errorf("%d lines in a 20-line view", n)
	}
	for range 29 {
		press(f.m, "j")
	}
	out = ansi.Strip(lv.View())
	if !strings.Contains(out, "› scheduled 30×p5.48xlarge") {
		t.Errorf("the cursor's row scrolled out of sight:\n%s", out)
	}
	lv.SetSize(160, 20)
	if out := ansi.Strip(lv.View()); !strings.Contains(out, "cr-0123456789abcdef0") || !strings.Contains(out, "COST $") {
		t.Errorf("160 columns: no provider id or cost:\n%s", out)
	}
}

// TestEscAndSlashEverywhere: esc goes back to the Market from the money
// views (when no form is open) and / in a view with nothing to filter
// opens the Market's filter, as the help says.
func TestEscAndSlashEverywhere(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	for _, title := range []string{"Blocks", "Plan", "Fleet", "Ledger"} {
		f.show(t, title)
		press(f.m, "esc")
		if got := f.m.views[f.m.active].Title(); got != "Market" {
			t.Errorf("esc in %s: in %s", title, got)
		}
	}
	// esc in the Blocks form closes the form only.
	f.show(t, "Blocks")
	press(f.m, "e", "esc")
	if got := f.m.views[f.m.active].Title(); got != "Blocks" || f.blocks().editing {
		t.Errorf("esc in the Blocks form: in %s, editing %v", got, f.blocks().editing)
	}
	for _, title := range []string{"Chart", "Fleet", "Ledger"} {
		f.show(t, title)
		press(f.m, "/", "H")
		if got := f.m.views[f.m.active].Title(); got != "Market" || !f.m.market.typing || f.m.market.needle != "h" {
			t.Errorf("/ in %s: in %s, typing %v, needle %q", title, got, f.m.market.typing, f.m.market.needle)
		}
		press(f.m, "esc")
	}
}

// TestFleetShowsMarksAsTheyAre: tabbing to Fleet right after marking shows
// the marks (not those of the last market tick), and with nothing marked
// it says the pool is the one under the cursor.
func TestFleetShowsMarksAsTheyAre(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Fleet")
	if scr := f.screen(); !strings.Contains(scr, "under the Market cursor: none marked") {
		t.Fatalf("nothing marked:\n%s", scr)
	}
	f.show(t, "Market")
	f.m.market.toggleMark("sim/us-east-2/us-east-2a/g4dn.xlarge")
	for f.m.views[f.m.active].Title() != "Fleet" {
		press(f.m, "tab") // no market tick on the way
	}
	scr := f.screen()
	if !strings.Contains(scr, "Pools (marked in Market)") || !strings.Contains(scr, "sim/us-east-2/us-east-2a/g4dn.xlarge") || len(f.fleet().poolKeys) != 1 {
		t.Fatalf("one marked pool:\n%s", scr)
	}
}

// TestHelpNotesWrapAt80: the full help's notes are sentences; at 80
// columns they wrap instead of losing their ends.
func TestHelpNotesWrapAt80(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.m.Update(tea.WindowSizeMsg{Width: 80, Height: 40})
	checked := 0
	for _, v := range f.m.views {
		n, ok := v.(helpNoter)
		if !ok {
			continue
		}
		checked++
		f.show(t, v.Title())
		press(f.m, "?")
		scr := strings.Join(strings.Fields(f.screen()), " ")
		for _, w := range strings.Fields(n.helpNote()) {
			if !strings.Contains(scr, w) {
				t.Errorf("%s help at 80 columns lacks %q:\n%s", v.Title(), w, f.screen())
				break
			}
		}
		press(f.m, "?")
	}
	if checked == 0 {
		t.Fatal("no view has a help note: nothing was checked")
	}
}

func TestDryRunAnswerSaysDryRunOnce(t *testing.T) {
	for in, want := range map[string]string{
		"dry run: AWS says the purchase would succeed": "AWS says the purchase would succeed",
		"Dry run: ok": "ok",
		"Request would have succeeded, but DryRun flag is set.": "Request would have succeeded, but DryRun flag is set.",
		"": "",
	} {
		if got := dryRunAnswer(in); got != want {
			t.Errorf("dryRunAnswer(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMoneyViewsAtTinySizes: Blocks (table, form, confirmation), Plan
// (form, plan, confirmation, help), Fleet and Ledger never panic and
// never draw past the terminal.
func TestMoneyViewsAtTinySizes(t *testing.T) {
	for _, sz := range [][2]int{{0, 0}, {1, 1}, {3, 2}, {20, 5}, {5, 20}, {40, 8}, {80, 24}} {
		for _, c := range []struct {
			view string
			keys []string
		}{{"Blocks", nil}, {"Blocks", []string{"e"}}, {"Blocks", []string{"b"}}, {"Fleet", nil}, {"Fleet", []string{"e"}},
			{"Fleet", []string{"L"}}, {"Ledger", nil}, {"Ledger", []string{"?"}},
			{"Plan", nil}, {"Plan", []string{"e"}}, {"Plan", []string{"r"}}, {"Plan", []string{"r", "b"}}, {"Plan", []string{"r", "?"}}} {
			f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
			f.plan().runs = testRuns
			f.show(t, c.view)
			press(f.m, c.keys...)
			f.m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			out := f.m.View().Content
			lines := strings.Split(out, "\n")
			if out != "" && len(lines) > sz[1] {
				t.Errorf("%s %v at %dx%d: %d lines", c.view, c.keys, sz[0], sz[1], len(lines))
			}
			for _, l := range lines {
				if w := ansi.StringWidth(l); w > sz[0] {
					t.Errorf("%s %v at %dx%d: line of %d cells: %q", c.view, c.keys, sz[0], sz[1], w, l)
				}
			}
		}
	}
}

// TestFleetPollTickReachesHiddenView: a launched fleet's state is asked
// for on its tick even while another view is on screen (the tick is routed
// to the Fleet view, not given to whichever view is shown).
func TestFleetPollTickReachesHiddenView(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	var ticks []tea.Cmd // the fleet's, held here and run below
	f.m.c.after = func(_ time.Duration, fn func(time.Time) tea.Msg) tea.Cmd {
		if r, ok := fn(fixedNow).(resultMsg); ok {
			if _, ok := r.msg.(fleetTickMsg); ok {
				ticks = append(ticks, func() tea.Msg { return r })
			}
		}
		return nil
	}
	f.m.market.toggleMark("sim/us-east-1/us-east-1a/p5.48xlarge")
	f.show(t, "Fleet")
	press(f.m, "L", "y", "enter")
	if f.fleet().rowID == "" || len(ticks) == 0 {
		t.Fatalf("no fleet followed (row %q, %d ticks)", f.fleet().rowID, len(ticks))
	}
	f.show(t, "Ledger")
	// (The Ledger, shown, asks once how many of its instances run.)
	before := f.fake.Calls("DescribeFleet")
	tick := ticks[len(ticks)-1]
	run(f.m, tick)
	if n := f.fake.Calls("DescribeFleet") - before; n != 1 {
		t.Fatalf("the tick, delivered while the Ledger was shown, asked for the fleet's state %d times, want 1", n)
	}
	if f.fleet().lastPoll.IsZero() || len(ticks) < 2 {
		t.Errorf("the hidden Fleet view did not re-arm its tick (%d ticks)", len(ticks))
	}
}

// TestFleetRefusalGoesWhenAPoolIsUnmarked: "the marked pools span 1
// provider and 2 regions" is about the marks; once a pool is unmarked
// and the rest make a fleet, the Fleet view no longer says it.
func TestFleetRefusalGoesWhenAPoolIsUnmarked(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.m.market.toggleMark("sim/us-east-1/us-east-1a/p5.48xlarge")
	f.m.market.toggleMark("sim/us-west-2/us-west-2b/p5.48xlarge")
	f.show(t, "Fleet")
	press(f.m, "L")
	if !strings.Contains(f.screen(), "span 1 provider and 2 regions") {
		t.Fatalf("no refusal for two regions:\n%s", f.screen())
	}
	f.show(t, "Market")
	f.m.market.toggleMark("sim/us-west-2/us-west-2b/p5.48xlarge")
	f.show(t, "Fleet")
	if strings.Contains(f.screen(), "span 1 provider") || f.fleet().formErr != "" {
		t.Errorf("the refusal %q outlived its marks:\n%s", f.fleet().formErr, f.screen())
	}
}

// TestFleetTitleSaysWhatTheFleetIs: the confirmation's question names
// the mix the user chose, not "a spot fleet" for on-demand instances.
func TestFleetTitleSaysWhatTheFleetIs(t *testing.T) {
	for _, tc := range []struct {
		target, onDemand int
		want             string
	}{
		{5, 5, "an on-demand fleet of 5 instances"},
		{5, 0, "a spot fleet of 5 instances"},
		{5, 2, "a fleet of 5 instances (2 on-demand, 3 spot)"},
		{1, 0, "a spot fleet of 1 instance"},
	} {
		if got := fleetKind(domain.FleetSpec{TargetCapacity: tc.target, OnDemandBase: tc.onDemand}); got != tc.want {
			t.Errorf("%d with %d on-demand: %q, want %q", tc.target, tc.onDemand, got, tc.want)
		}
	}
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.m.market.toggleMark("sim/us-east-1/us-east-1a/p5.48xlarge")
	f.show(t, "Fleet")
	press(f.m, "e", "backspace", "5", "down", "backspace", "5", "enter", "L")
	scr := strings.Join(strings.Fields(f.screen()), " ")
	if !strings.Contains(scr, "Launch an on-demand fleet of 5 instances in us-east-1?") || strings.Contains(scr, "spot fleet") {
		t.Errorf("5 on-demand + 0 spot:\n%s", f.screen())
	}
	// The estimate names the pool it priced.
	if !strings.Contains(scr, "p5.48xlarge us-east-1a") {
		t.Errorf("the estimate names no pool:\n%s", f.screen())
	}
}

// TestLedgerShowsWhoAndFleetTimes: the Ledger shows who booked each row
// (a column with room, the line under the cursor at 80 columns), and for
// a fleet its start, end, time running and cost so far.
func TestLedgerShowsWhoAndFleetTimes(t *testing.T) {
	f := newMoneyFixture(t, RoleViewer, ledger.Budget{})
	f.show(t, "Ledger")
	lv := f.ledger()
	lv.rows = orderLedger(goldenLedgerRows())
	lv.cur = 1 // the running fleet
	f.m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	scr := f.screen()
	for _, want := range []string{"BY", "bob@laptop", "alice", "SO FAR $", "running 2h 30m", "11-23 11:30 UTC", "250.0", "ran 3h 0m", "0.6000"} {
		if !strings.Contains(scr, want) {
			t.Errorf("120 columns: no %q in\n%s", want, scr)
		}
	}
	f.m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	scr = strings.Join(strings.Fields(f.screen()), " ")
	for _, want := range []string{"BY bob@laptop", "SO FAR $ 250.0", "running 2h 30m", "100.0/h"} {
		if !strings.Contains(scr, want) {
			t.Errorf("80 columns: no %q in\n%s", want, f.screen())
		}
	}
	// A fleet row without the times (written before the ledger kept them)
	// is taken to start at its launch and end at its last update.
	old := ledger.Entry{Kind: ledger.KindFleet, State: ledger.StateDeleted, ProviderRef: "fleet-x", USDHour: 2,
		CostNote:  ledger.FleetEstimate{Basis: "current prices"}.Note(),
		CreatedAt: fixedNow.Add(-5 * time.Hour), UpdatedAt: fixedNow.Add(-2 * time.Hour)}
	if got := present.TimeLeft(old, fixedNow); got != "ran 3h 0m" {
		t.Errorf("old fleet row: %q", got)
	}
	if got := ledger.FiguresOf(old, fixedNow).SoFar; got != 6 {
		t.Errorf("old fleet row cost so far %v, want 6", got)
	}
	unknown := old
	unknown.USDHour = math.NaN()
	if got := ledger.FiguresOf(unknown, fixedNow).SoFar; !math.IsNaN(got) {
		t.Errorf("a fleet at unknown prices has cost %v so far, want unknown", got)
	}
}

// The Fleet form's Start and For schedule the fleet; the
// confirmation says its window (local and UTC) and who starts and stops
// it; confirmed on a provider whose cloud keeps no schedule, the ledger
// holds it scheduled and nothing but the dry run was sent.
func TestFleetFormSchedules(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.m.market.toggleMark("sim/us-east-1/us-east-1a/p5.48xlarge")
	f.show(t, "Fleet")
	press(f.m, "e", "down", "down", "down", "down", "T", "h", "u", "space", "1", "4", ":", "0", "0", "down", "3", "h", "enter", "L")
	scr := strings.Join(strings.Fields(f.screen()), " ")
	for _, want := range []string{
		"Schedule a spot fleet of 2 instances in us-east-1 from Thu 11-26 14:00?",
		"Window: Thu 11-26 14:00 UTC – 17:00 UTC (14:00–17:00 UTC), 3h",
		"Schedule: gpumarket starts and deletes it: a gpumarket TUI or `serve` must be running at those times",
	} {
		if !strings.Contains(scr, want) {
			t.Errorf("the confirmation lacks %q:\n%s", want, f.screen())
		}
	}
	press(f.m, "y", "enter")
	rows, err := f.st.List(context.Background())
	if err != nil || len(rows) != 1 {
		t.Fatalf("ledger: %+v, %v", rows, err)
	}
	start := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	if r := rows[0]; r.State != ledger.StateScheduled || !r.Start.Equal(start) || !r.End.Equal(start.Add(3*time.Hour)) || r.ProviderRef != "" {
		t.Fatalf("scheduled row %+v", r)
	}
	if f.fake.Calls("LaunchFleet") != 0 || f.fake.Calls("LaunchFleetDryRun") != 1 {
		t.Fatalf("%d launches, %d dry runs; want only the dry run", f.fake.Calls("LaunchFleet"), f.fake.Calls("LaunchFleetDryRun"))
	}
	// The followed row shows its countdown and who keeps it.
	if scr := strings.Join(strings.Fields(f.screen()), " "); !strings.Contains(scr, "starts in 3d 0h") || !strings.Contains(scr, "gpumarket starts and deletes it") {
		t.Errorf("the launched section:\n%s", f.screen())
	}
	// A cloud that keeps the schedule says so.
	f.fake.Desc.SchedulesFleets, f.fake.Desc.Ephemeral, f.fake.Desc.Cloud, f.fake.Desc.CloudTitle = true, false, domain.CloudAWS, "AWS"
	press(f.m, "L")
	if scr := strings.Join(strings.Fields(f.screen()), " "); !strings.Contains(scr, "AWS starts and ends it at the cloud; it ends on time even if gpumarket is not running") {
		t.Errorf("AWS's confirmation:\n%s", f.screen())
	}
}

// A schedule that cannot be kept is refused in the form, naming the
// field, before any confirmation.
func TestFleetFormRefusesBadSchedules(t *testing.T) {
	for _, c := range []struct {
		keys []string
		want string
	}{
		{[]string{"down", "down", "down", "down", "s", "o", "o", "n"}, `start "soon": want`},
		{[]string{"down", "down", "down", "down", "+", "9", "1", "d"}, `start "+91d": more than 90 days ahead`},
		{[]string{"down", "down", "down", "down", "down", "0"}, `for "0": want`},
		{[]string{"down", "down", "down", "down", "down", "9", "1", "d"}, `lasts at most 90 days`},
	} {
		f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
		f.m.market.toggleMark("sim/us-east-1/us-east-1a/p5.48xlarge")
		f.show(t, "Fleet")
		press(f.m, "e")
		press(f.m, c.keys...)
		press(f.m, "enter", "L")
		scr := strings.Join(strings.Fields(f.screen()), " ")
		if !strings.Contains(scr, c.want) || strings.Contains(scr, "Type y then enter") {
			t.Errorf("%v: want %q and no confirmation:\n%s", c.keys, c.want, f.screen())
		}
	}
}

// The Ledger shows each running fleet's instances running
// now of those asked, from the provider's describe — asked after a load,
// once per fleet per ledger.FleetsNowEvery whatever the sessions and
// reloads, and never per key.
func TestLedgerRunningNowFromTheProvider(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	spec := domain.FleetSpec{Provider: "sim", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2}
	if _, err := f.svc.LaunchFleet(context.Background(), ledger.FleetRequest{Spec: spec}); err != nil {
		t.Fatal(err)
	}
	f.show(t, "Ledger")
	lv := f.ledger()
	if len(lv.rows) != 1 || f.fake.Calls("DescribeFleet") != 1 {
		t.Fatalf("rows %+v, %d describes", lv.rows, f.fake.Calls("DescribeFleet"))
	}
	f.m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	if scr := f.screen(); !strings.Contains(scr, "RUN") || !strings.Contains(scr, "2/2") {
		t.Fatalf("no instances running now:\n%s", scr)
	}
	press(f.m, "j", "k", "j", "k", "?", "?")
	run(f.m, lv.load(false)) // a reload within the interval
	// A second session's Ledger, over the same service.
	other := newBare(Options{Now: nowFn, NoColor: true, Role: RoleViewer, Actor: "ssh:x", Booking: f.svc})
	other.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	for other.views[other.active].Title() != "Ledger" {
		press(other, "tab")
	}
	run(other, other.broadcast(snapshotMsg{snap: fixtureSnapshot()}))
	if !strings.Contains(ansi.Strip(other.View().Content), "2/2") {
		t.Errorf("the second session does not show it:\n%s", ansi.Strip(other.View().Content))
	}
	if n := f.fake.Calls("DescribeFleet"); n != 1 {
		t.Fatalf("%d describes for keys, a reload and a second session within %s; want 1", n, ledger.FleetsNowEvery)
	}
}

// TestLedgerReconcileSaysWhatItDid: r says when its reconciliation is
// done and what it settled; it used to say "reconciling unknown
// outcomes…" and then nothing. The reconciliation at the view's first
// load says nothing.
func TestLedgerReconcileSaysWhatItDid(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Ledger")
	if strings.Contains(f.m.notice.text, "reconciled") {
		t.Fatalf("the first load spoke: %q", f.m.notice.text)
	}
	press(f.m, "r")
	if f.m.notice.text != "reconciled: nothing was waiting on an answer" {
		t.Fatalf("after r: %q", f.m.notice.text)
	}
	if got := reconciled(&ledger.ReconcileReport{Settled: make([]ledger.Entry, 2), Unsettled: make([]ledger.Unsettled, 1)})().(noticeMsg).text; got !=
		"reconciled: 2 rows settled, 1 not yet (see the line over the rows)" {
		t.Errorf("settled and not: %q", got)
	}
}

// TestCountdownUnderAMinute: a schedule less than half a minute away
// reads "starts in <1m", not "starts in 0m" (read as started).
func TestCountdownUnderAMinute(t *testing.T) {
	for d, want := range map[time.Duration]string{20 * time.Second: "<1m", 0: "0m", 45 * time.Second: "1m", 90 * time.Minute: "1h 30m"} {
		if got := present.Span(d); got != want {
			t.Errorf("span(%s) = %q, want %q", d, got, want)
		}
	}
}

// A fleet the cloud took but launched nothing of is told as a failure in
// the footer, with the cloud's reason, never as "launched".
func TestFleetThatLaunchedNothingIsAFailure(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{MaxBookingUSD: 1000})
	f.fake.LaunchNothing = "InsufficientInstanceCapacity: There is no Spot capacity available that matches your request."
	f.m.market.toggleMark("sim/us-east-1/us-east-1a/p5.48xlarge")
	f.show(t, "Fleet")
	press(f.m, "L")
	msgs := press(f.m, "y", "enter")
	if f.fake.Calls("LaunchFleet") != 1 {
		t.Fatalf("%d launches", f.fake.Calls("LaunchFleet"))
	}
	scr := f.screen()
	if !strings.Contains(scr, "not launched: InsufficientInstanceCapacity") || hasNotice(msgs, "launched fleet-") {
		t.Errorf("footer:\n%s\n%v", scr, msgs)
	}
	rows, _ := f.st.List(context.Background())
	if len(rows) != 1 || rows[0].State != ledger.StateFailed || !strings.Contains(rows[0].Error, "InsufficientInstanceCapacity") {
		t.Errorf("ledger %+v", rows)
	}
}
