package tui

import (
	"context"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
)

// flat is a screen as one line of words, a word broken after its hyphen
// joined again.
func flat(s string) string {
	return strings.Join(strings.Fields(hyphenBreak.ReplaceAllString(s, "-")), " ")
}

var hyphenBreak = regexp.MustCompile(`-\n\s*`)

func (f *moneyFixture) plan() *planView {
	for _, v := range f.m.views {
		if p, ok := v.(*planView); ok {
			return p
		}
	}
	return nil
}

// testRuns are the Monte Carlo runs of a plan in the tests that do not
// read its figures: the goldens keep the product's 10,000.
const testRuns = 1000

// setJob fills the Plan view's form, as typed, without running it.
func (f *moneyFixture) setJob(gpus, hours, start, deadline string) {
	p := f.plan()
	p.form.gpus, p.form.hours, p.form.start, p.form.deadline = gpus, hours, start, deadline
}

// job16 is the brief's job on the fixture's clock: 16 H100 for 48 h from
// tomorrow 09:00, due three days later.
func (f *moneyFixture) job16() { f.setJob("16", "48", "2026-11-24 09:00", "2026-11-27 09:00") }

// job8 fits one of the fake's one-instance blocks (8 GPUs, 48 h from
// tomorrow 14:00): 8 H100 for 24 h from tomorrow 09:00, due two days on.
func (f *moneyFixture) job8() { f.setJob("8", "24", "2026-11-24 09:00", "2026-11-26 14:00") }

// selectStrategy moves the cursor to the first row of the strategy.
func (f *moneyFixture) selectStrategy(t *testing.T, name string) planner.Result {
	t.Helper()
	p := f.plan()
	for i, r := range p.res.results {
		if r.Strategy == name {
			p.cur = i
			return r
		}
	}
	t.Fatalf("no %s among %d strategies", name, len(p.res.results))
	return planner.Result{}
}

func TestPlanFormParse(t *testing.T) {
	good := planForm{gpus: "16", models: "h100, H200", hours: "48", start: "2026-11-24 09:00", deadline: "+4d",
		checkpointable: true, checkpoint: "30m", changeover: "12m", regions: "us-east-1, eastus", onTime: "99"}
	terms, err := good.parse(fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	j := terms.job
	if j.GPUs != 16 || strings.Join(j.Models, ",") != "H100,H200" || j.Hours != 48 || !j.Start.Equal(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)) ||
		!j.Deadline.Equal(fixedNow.Add(96*time.Hour)) || !j.Checkpointable || j.Checkpoint != 30*time.Minute || j.Changeover != 12*time.Minute ||
		strings.Join(terms.regions, ",") != "us-east-1,eastus" || terms.onTime != 99 {
		t.Fatalf("parsed %+v %+v", j, terms)
	}
	// An empty start is now, as the plan command's default.
	now := good
	now.start = ""
	if terms, err := now.parse(fixedNow); err != nil || !terms.job.Start.Equal(fixedNow.Add(time.Minute)) {
		t.Fatalf("empty start: %v %v", terms.job.Start, err)
	}
	// Not checkpointable: the interval is not read.
	nock := good
	nock.checkpointable, nock.checkpoint = false, "soon"
	if terms, err := nock.parse(fixedNow); err != nil || terms.job.Checkpointable {
		t.Fatalf("not checkpointable: %+v %v", terms.job, err)
	}
	for _, c := range []struct {
		edit func(*planForm)
		want string
	}{
		{func(f *planForm) { f.gpus = "0" }, "GPUs \"0\": want a whole number of GPUs from 1 to 512"},
		{func(f *planForm) { f.gpus = "lots" }, "GPUs \"lots\""},
		{func(f *planForm) { f.models = "H100,X9" }, "unknown GPU \"X9\"; want one or more of H200, H100"},
		{func(f *planForm) { f.models = "H100,h100" }, "H100 is named twice"},
		{func(f *planForm) { f.models = " , " }, "GPU models: none"},
		{func(f *planForm) { f.hours = "-3" }, "hours of work \"-3\""},
		{func(f *planForm) { f.start = "tomorrow" }, "earliest start \"tomorrow\": want a local time (YYYY-MM-DD HH:MM"},
		{func(f *planForm) { f.deadline = "" }, "deadline: missing"},
		{func(f *planForm) { f.deadline = "2026-11-25 09:00" }, "deadline: 2026-11-25 09:00 UTC is before start + hours"},
		// The CLI's GPU names exactly: no substring of a typo.
		{func(f *planForm) { f.models = "a1000" }, "unknown GPU \"a1000\""},
		{func(f *planForm) { f.models = "L40" }, "unknown GPU \"L40\""},
		// A window in the past (a one-digit month typo) is refused.
		{func(f *planForm) { f.start, f.deadline = "2026-10-24 09:00", "2026-10-28 09:00" }, "earliest start: 2026-10-24 09:00 UTC has passed"},
		{func(f *planForm) { f.start, f.deadline = "", "2026-11-23 09:00" }, "deadline: 2026-11-23 09:00 UTC has passed"},
		// The changeover counts.
		{func(f *planForm) { f.models, f.hours, f.deadline = "H100", "3", "2026-11-24 12:00" }, "no strategy fits: the 12m changeover leaves 2h48m for 3h of work"},
		{func(f *planForm) { f.checkpoint = "0s" }, "checkpoint every \"0s\""},
		{func(f *planForm) { f.changeover = "25h" }, "changeover: 25h0m0s: want a duration from 0s to 24h"},
		{func(f *planForm) { f.changeover = "a bit" }, "changeover \"a bit\""},
		{func(f *planForm) { f.onTime = "101" }, "on time \"101\": want a percentage from 0 to 100"},
	} {
		bad := good
		c.edit(&bad)
		if _, err := bad.parse(fixedNow); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", bad, err, c.want)
		}
	}
}

func FuzzPlanForm(f *testing.F) {
	f.Add("16", "H100", "48", "2026-11-24 09:00", "+4d", "15m", "12m", "95")
	f.Add("0", "x", "-1", "soon", "", "0", "1y", "NaN")
	f.Fuzz(func(t *testing.T, gpus, models, hours, start, deadline, ckpt, changeover, onTime string) {
		terms, err := planForm{gpus: gpus, models: models, hours: hours, start: start, deadline: deadline,
			checkpointable: true, checkpoint: ckpt, changeover: changeover, onTime: onTime}.parse(fixedNow)
		if err != nil {
			return
		}
		if verr := terms.job.Check(fixedNow, nil); verr != nil {
			t.Fatalf("accepted a job the planner refuses: %+v: %v", terms.job, verr)
		}
		if terms.onTime < 0 || terms.onTime > 100 {
			t.Fatalf("on time %v accepted", terms.onTime)
		}
	})
}

// TestPlanFromMarketTakesTheFilters: p in the Market opens the Plan
// view's form with the GPU filter as the acceptable models and the
// region filter as where; with no region filter, all regions.
func TestPlanFromMarketTakesTheFilters(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.m.market.gpus, f.m.market.regions = []string{"H100", "H200"}, []string{"us-east-1"}
	press(f.m, "p")
	p := f.plan()
	if f.m.views[f.m.active] != p || !p.editing || p.form.models != "H100,H200" || p.form.regions != "us-east-1" {
		t.Fatalf("after p: view %s, editing %v, form %+v", f.m.views[f.m.active].Title(), p.editing, p.form)
	}
	if !strings.Contains(f.screen(), "GPU models        H100,H200") {
		t.Fatalf("form:\n%s", f.screen())
	}
	// Typing is the form's: q is text here, not quit; esc leaves the form.
	press(f.m, "esc")
	f.show(t, "Market")
	f.m.market.regions = nil
	press(f.m, "p")
	if p.form.regions != "" || p.form.models != "H100,H200" {
		t.Fatalf("no region filter: %+v", p.form)
	}
}

// TestPlanFromBlocksTakesTheSearch: p in the Blocks view plans its
// search as a job: its GPUs (instances counted as 8 GPUs each) for its
// duration, from its earliest start, done by its latest start plus the
// duration, or else by the default deadline.
func TestPlanFromBlocksTakesTheSearch(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Blocks")
	b := f.blocks()
	b.terms = blocksForm{gpu: "H200", size: "2", instances: true, duration: "2d", after: "2026-11-24 09:00"}
	press(f.m, "p")
	p := f.plan()
	if f.m.views[f.m.active] != p || p.form.models != "H200" || p.form.gpus != "16" || p.form.hours != "48" ||
		p.form.start != "2026-11-24 09:00" || p.form.deadline != "2026-11-27 09:00" {
		t.Fatalf("from Blocks: %+v", p.form)
	}
	press(f.m, "esc")
	f.show(t, "Blocks")
	b.terms = blocksForm{gpu: "H100", size: "16", duration: "8h", after: "+1d", before: "2026-11-25 10:00"}
	press(f.m, "p")
	if p.form.gpus != "16" || p.form.hours != "8" || p.form.start != "+1d" || p.form.deadline != "2026-11-25 18:00" {
		t.Fatalf("from Blocks with a latest start: %+v", p.form)
	}
}

// TestPlanRunsAndRanks: r runs the plan as a task; the strategies come
// ranked (on time at least 95 % first, cheapest expected first), and
// the selected row's assumptions are under the table.
func TestPlanRunsAndRanks(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Plan")
	p := f.plan()
	p.runs = testRuns
	f.job16()
	_, cmd := f.m.Update(tea.KeyPressMsg{Code: 'r', Text: "r"})
	if cmd == nil || !p.running || len(p.res.results) != 0 {
		t.Fatalf("r did not start a task (running %v)", p.running)
	}
	run(f.m, cmd)
	rs := p.res.results
	if p.running || len(rs) < 5 || p.formErr != "" {
		t.Fatalf("after the task: running %v, %d results, error %q", p.running, len(rs), p.formErr)
	}
	seen := map[string]bool{}
	for i, r := range rs {
		seen[r.Strategy] = true
		if i == 0 {
			continue
		}
		a := rs[i-1]
		okA, okB := a.OnTimePct >= 95, r.OnTimePct >= 95
		if (!okA && okB) || (okA && okB && a.ExpectedCostUSD > r.ExpectedCostUSD) {
			t.Errorf("row %d (%s %.1f%% $%.0f) after row %d (%s %.1f%% $%.0f)", i+1, r.Strategy, r.OnTimePct, r.ExpectedCostUSD, i, a.Strategy, a.OnTimePct, a.ExpectedCostUSD)
		}
	}
	for _, s := range []string{planner.StrategyOnDemand, planner.StrategySpotOne, planner.StrategySpotMulti, planner.StrategySafetyNet} {
		if !seen[s] {
			t.Errorf("no %s", s)
		}
	}
	scr := f.screen()
	if !strings.Contains(scr, rs[0].Strategy) || !strings.Contains(strings.Join(strings.Fields(scr), " "), strings.Join(strings.Fields(rs[0].Assumptions), " ")[:60]) {
		t.Fatalf("screen lacks the first row or its assumptions:\n%s", scr)
	}
	press(f.m, "down")
	if p.cur != 1 || !strings.Contains(f.screen(), "#2 "+rs[1].Strategy) {
		t.Fatalf("down: cursor %d\n%s", p.cur, f.screen())
	}
}

// TestPlanResultReachesHiddenView: a plan's answer goes to the Plan view
// even when another view is on screen (routed by the view's id), and an
// answer older than the latest run is dropped.
func TestPlanResultReachesHiddenView(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Plan")
	p := f.plan()
	p.runs = testRuns
	f.job16()
	_, first := f.m.Update(tea.KeyPressMsg{Code: 'r', Text: "r"})
	f.setJob("8", "24", "2026-11-24 09:00", "2026-11-26 14:00")
	_, second := f.m.Update(tea.KeyPressMsg{Code: 'r', Text: "r"})
	f.show(t, "Ledger")
	run(f.m, second)
	if len(p.res.results) == 0 || p.res.terms.job.GPUs != 8 || p.running {
		t.Fatalf("the hidden Plan view did not take its answer: %d results for %d GPUs, running %v", len(p.res.results), p.res.terms.job.GPUs, p.running)
	}
	if f.m.views[f.m.active].Title() != "Ledger" {
		t.Fatal("the answer switched views")
	}
	run(f.m, first)
	if p.res.terms.job.GPUs != 8 {
		t.Fatalf("the older run's answer (16 GPUs) replaced the newer one's")
	}
}

// TestPlanErrorsNameTheField: a job the form or the planner refuses is
// said beside the form, naming the field; nothing runs.
func TestPlanErrorsNameTheField(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Plan")
	p := f.plan()
	p.runs = testRuns
	press(f.m, "e", "down", "backspace", "backspace", "backspace", "backspace", "V", "1", "0", "0", "enter")
	// The form parses; the planner says no pool sells a V100.
	if p.editing || !strings.Contains(p.formErr, "GPU models: no pool or offering of the market sells V100") {
		t.Fatalf("V100: editing %v, error %q", p.editing, p.formErr)
	}
	press(f.m, "e", "down", "down", "backspace", "backspace", "x", "enter")
	if !p.editing || !strings.Contains(p.formErr, "hours of work \"x\"") || !strings.Contains(f.screen(), "hours of work \"x\"") {
		t.Fatalf("bad hours: editing %v, error %q\n%s", p.editing, p.formErr, f.screen())
	}
	// esc goes back to the terms last run.
	press(f.m, "esc")
	if p.editing || p.form.hours != "24" {
		t.Fatalf("esc: %+v", p.form)
	}
}

// TestPlanBooksABlock: b on a block strategy books the offering the plan
// carries through the booking service: the usual confirmation (total,
// dry run, y then enter), the plan's figures, what booking does not do,
// and a ledger row.
func TestPlanBooksABlock(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Plan")
	p := f.plan()
	p.runs = testRuns
	f.job8()
	press(f.m, "r")
	r := f.selectStrategy(t, planner.StrategyBlock)
	if r.OfferingID != "cb-cheap" {
		t.Fatalf("block strategy books %q, want the cheap block", r.OfferingID)
	}
	press(f.m, "b")
	scr := flat(f.screen())
	for _, want := range []string{"Buy this capacity block for $3000.00?", "Total upfront: $3000.00", "offering cb-cheap",
		"capacity-block: expected $3000.00, p95 $3000.00", "a model, not a quote", "Not automated: running your job on it.",
		"dry run: Request would have succeeded", "Type y then enter to buy"} {
		if !strings.Contains(scr, want) {
			t.Errorf("confirmation lacks %q:\n%s", want, f.screen())
		}
	}
	if f.fake.Calls("BookDryRun") != 1 || f.fake.Calls("Book") != 0 {
		t.Fatalf("before yes: %d dry runs, %d purchases", f.fake.Calls("BookDryRun"), f.fake.Calls("Book"))
	}
	press(f.m, "enter")
	if f.fake.Calls("Book") != 0 || !p.confirm.open {
		t.Fatal("enter without y bought, or closed the box")
	}
	press(f.m, "y", "enter")
	if f.fake.Calls("Book") != 1 || !f.fake.Bought("cb-cheap") || p.confirm.open {
		t.Fatalf("after y: %d purchases, box open %v", f.fake.Calls("Book"), p.confirm.open)
	}
	rows, err := f.st.List(context.Background())
	if err != nil || len(rows) != 1 || rows[0].Kind != ledger.KindBlock || rows[0].IdemKey != "cb-cheap" || rows[0].Actor != "local:tester" {
		t.Fatalf("ledger %+v %v", rows, err)
	}
	if !strings.Contains(f.m.notice.text, "booked cr-cb-cheap") {
		t.Fatalf("footer %q", f.m.notice.text)
	}
	// The plan shown was made on a market with that block for sale.
	if !strings.Contains(f.screen(), "carried out since: r plans again on what is left") {
		t.Fatalf("no word that the plan is out of date:\n%s", f.screen())
	}
	// b again on the same row: the ledger holds the block; nothing more is
	// bought.
	press(f.m, "b")
	if !strings.Contains(flat(f.screen()), "refused: already booked") || f.fake.Calls("Book") != 1 {
		t.Fatalf("the same block again:\n%s", f.screen())
	}
}

// TestPlanStartsAJob: b on the safety net starts a job carrying the
// whole plan out: the confirmation holds the plan's p95 against the caps,
// gives the plan's figures and says what happens while no gpumarket
// runs; yes records the job, scheduled at the plan's start, and launches
// nothing yet.
func TestPlanStartsAJob(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Plan")
	p := f.plan()
	p.runs = testRuns
	f.job16()
	press(f.m, "r")
	f.selectStrategy(t, planner.StrategySafetyNet)
	f.m.Update(tea.WindowSizeMsg{Width: 100, Height: 50})
	press(f.m, "b")
	scr := flat(f.screen())
	for _, want := range []string{"Start a job carrying out spot+od-planner?", "SIMULATED MARKET: nothing real is launched",
		"Hold: $", "against the budget caps", "Plan: expected $", "spot+od-planner: expected $", "While none runs, no move is made"} {
		if !strings.Contains(scr, want) {
			t.Errorf("confirmation lacks %q:\n%s", want, f.screen())
		}
	}
	for i := 0; i < 10 && !strings.Contains(f.screen(), "Type y then enter to start the job"); i++ {
		press(f.m, "pgdown")
	}
	press(f.m, "y", "enter")
	js, err := f.st.ListJobs(context.Background())
	if err != nil || len(js) != 1 {
		t.Fatalf("jobs %+v %v\n%s", js, err, f.screen())
	}
	if js[0].Strategy != planner.StrategySafetyNet || js[0].State != ledger.JobScheduled || js[0].HoldUSD <= 0 ||
		!js[0].Terms.Start.Equal(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("job %+v", js[0])
	}
	if f.fake.Calls("LaunchFleet") != 0 {
		t.Fatalf("%d launches before the plan's start", f.fake.Calls("LaunchFleet"))
	}
	// The Ledger view lists the job over the rows.
	f.show(t, "Ledger")
	if want := "job " + short(js[0].ID) + " scheduled spot+od-planner · 0.0 h of 48"; !strings.Contains(f.screen(), want) {
		t.Errorf("the Ledger view lacks %q:\n%s", want, f.screen())
	}
}

// TestPlanSchedulesTheFleet: with a provider that schedules fleets, the
// fleet starts at the plan's start and ends at its deadline, and the
// confirmation says the cloud does it; on-demand is an on-demand fleet.
func TestPlanSchedulesTheFleet(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.fake.Desc.SchedulesFleets, f.fake.Desc.Ephemeral = true, false
	f.show(t, "Plan")
	p := f.plan()
	p.runs = testRuns
	f.job16()
	press(f.m, "r")
	f.selectStrategy(t, planner.StrategyOnDemand)
	press(f.m, "b")
	scr := flat(f.screen())
	for _, want := range []string{"Schedule an on-demand fleet of 2 instances in", "for Tue 11-24 09:00?",
		"The cloud launches it at Tue 11-24 09:00 (09:00 UTC) and ends it at the deadline, Fri 11-27 09:00 (09:00 UTC)",
		"On-demand capacity is not reserved"} {
		if !strings.Contains(scr, want) {
			t.Errorf("confirmation lacks %q:\n%s", want, f.screen())
		}
	}
	if strings.Contains(scr, "safety net") {
		t.Errorf("on-demand has no safety net to speak of:\n%s", f.screen())
	}
	press(f.m, "y", "enter")
	rows, err := f.st.List(context.Background())
	if err != nil || len(rows) != 1 {
		t.Fatalf("ledger %+v %v", rows, err)
	}
	var spec domain.FleetSpec
	if err := json.Unmarshal(rows[0].Request, &spec); err != nil || spec.OnDemandBase != 2 || spec.TargetCapacity != 2 ||
		!spec.Start.Equal(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)) || !spec.End.Equal(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)) || len(spec.Zones) != 0 {
		t.Fatalf("scheduled %+v %v", spec, err)
	}
}

// TestPlanViewerRefused: a viewer may plan but carries nothing out; a
// session without a ledger neither.
func TestPlanViewerRefused(t *testing.T) {
	f := newMoneyFixture(t, RoleViewer, ledger.Budget{})
	f.show(t, "Plan")
	p := f.plan()
	p.runs = testRuns
	f.job8()
	press(f.m, "r")
	if len(p.res.results) == 0 {
		t.Fatalf("a viewer cannot plan: %q", p.formErr)
	}
	f.selectStrategy(t, planner.StrategyBlock)
	press(f.m, "b")
	if p.confirm.open || !strings.Contains(f.m.notice.text, "read-only session") || !strings.Contains(f.m.notice.text, "nothing was spent") {
		t.Fatalf("viewer b: box %v, footer %q", p.confirm.open, f.m.notice.text)
	}
	f.selectStrategy(t, planner.StrategySafetyNet)
	press(f.m, "b", "y", "enter")
	if n := f.fake.Calls("Book") + f.fake.Calls("BookDryRun") + f.fake.Calls("LaunchFleet") + f.fake.Calls("LaunchFleetDryRun"); n != 0 {
		t.Fatalf("a viewer made %d money calls", n)
	}

	m := newBare(Options{Now: nowFn, NoColor: true})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m.Update(snapshotMsg{snap: fixtureSnapshot()})
	for m.views[m.active].Title() != "Plan" {
		press(m, "tab")
	}
	var pv *planView
	for _, v := range m.views {
		if x, ok := v.(*planView); ok {
			pv = x
		}
	}
	pv.runs = testRuns
	pv.form.gpus, pv.form.hours, pv.form.start, pv.form.deadline = "16", "48", "2026-11-24 09:00", "2026-11-27 09:00"
	press(m, "r", "b")
	if len(pv.res.results) == 0 || pv.confirm.open || !strings.Contains(m.notice.text, "no ledger") {
		t.Fatalf("no ledger: %d results, box %v, footer %q", len(pv.res.results), pv.confirm.open, m.notice.text)
	}
}

// TestPlanChartPlacesPoints: the cheapest is at the bottom, the dearest
// at the top, 100 % on time at the right, 0 % at the left, the
// threshold dotted between, each point marked with its row.
func TestPlanChartPlacesPoints(t *testing.T) {
	st := newStyles(true, true)
	rs := []planner.Result{{ExpectedCostUSD: 5000, OnTimePct: 100}, {ExpectedCostUSD: 9000, OnTimePct: 99}, {ExpectedCostUSD: 2000, OnTimePct: 0}}
	out := planChart(rs, 0, 95, 60, 8, &st)
	lines := strings.Split(out, "\n")
	if len(lines) != 8 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	// at finds a point in the plot, right of the axis, by its label.
	at := func(label string) (row, col int) {
		for i, l := range lines[:7] {
			cells := []rune(l)
			for j := 6; j < len(cells); j++ {
				if string(cells[j]) == label {
					return i, j - 6
				}
			}
		}
		t.Fatalf("no %s:\n%s", label, out)
		return 0, 0
	}
	r1, c1 := at("1")
	r2, c2 := at("2")
	r3, c3 := at("3")
	if !(r2 < r1 && r1 < r3) || !(c3 < c2 && c2 < c1) || c1 != 53 || c3 != 0 {
		t.Errorf("rows %d %d %d, columns %d %d %d:\n%s", r1, r2, r3, c1, c2, c3, out)
	}
	if !strings.HasPrefix(lines[0], "$9000┤") || !strings.HasPrefix(lines[6], "$2000┤") ||
		!strings.Contains(lines[7], "0%") || !strings.Contains(lines[7], "95┊") || !strings.HasSuffix(lines[7], "100%") {
		t.Errorf("axes:\n%s", out)
	}
	for _, sz := range [][2]int{{0, 0}, {10, 3}, {17, 5}, {20, 5}} {
		if out := planChart(rs, 0, 95, sz[0], sz[1], &st); out != "" {
			for _, l := range strings.Split(out, "\n") {
				if ansi.StringWidth(l) > sz[0] {
					t.Errorf("%dx%d: line of %d cells", sz[0], sz[1], ansi.StringWidth(l))
				}
			}
		}
	}
}

// TestPlanNoColor: with NO_COLOR the Plan view, its chart and its
// confirmation carry no escape codes.
func TestPlanNoColor(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Plan")
	f.plan().runs = testRuns
	f.job16()
	press(f.m, "r")
	for _, keys := range [][]string{nil, {"e"}, {"esc", "b"}} {
		press(f.m, keys...)
		if out := f.m.View().Content; strings.Contains(out, "\x1b") {
			t.Errorf("after %v: escape codes under NO_COLOR", keys)
		}
	}
}

func TestGoldenPlan(t *testing.T) {
	goldenMoney(t, RoleBooker, "Plan", func(f *moneyFixture) { f.job16() }, "r", "down")
}

func TestGoldenPlanForm(t *testing.T) {
	goldenMoney(t, RoleBooker, "Plan", nil, "e", "down", "down", "down")
}

func TestGoldenPlanConfirm(t *testing.T) {
	goldenMoney(t, RoleBooker, "Plan", func(f *moneyFixture) { f.job16() }, "r", "b")
}

// BenchmarkPlanView is a plan as the view makes it: the offering
// searches through the booking service and 10,000 Monte Carlo runs of
// the brief's job on the fixture market.
func BenchmarkPlanView(b *testing.B) {
	f := newMoneyFixture(b, RoleBooker, ledger.Budget{})
	f.job16()
	terms, err := f.plan().form.parse(fixedNow)
	if err != nil {
		b.Fatal(err)
	}
	pools := planPools(fixtureSnapshot(), terms, nil)
	b.ResetTimer()
	for range b.N {
		if m := makePlan(context.Background(), planInput{terms: terms, pools: pools, svc: f.svc, runs: planRuns, now: fixedNow}); len(m.results) == 0 {
			b.Fatal(m.err)
		}
	}
}

// TestPlanSaysTheLedgerWasNotRead: a plan made while the user's fleets
// cannot be read is still made, from the market's risk, and says so.
func TestPlanSaysTheLedgerWasNotRead(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.job16()
	terms, err := f.plan().form.parse(fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	f.svc.Store().Close()
	m := makePlan(context.Background(), planInput{terms: terms, pools: planPools(fixtureSnapshot(), terms, nil), svc: f.svc, runs: 200, now: fixedNow})
	if len(m.results) == 0 {
		t.Fatalf("no plan: %v", m.err)
	}
	if err := m.failed["ledger"]; err == nil || !strings.Contains(err.Error(), "your fleets could not be read") || !strings.Contains(err.Error(), "risk from the market alone") {
		t.Errorf("ledger failure said as %v; want that the plan reads the market's risk alone", err)
	}
}

// TestWordwrapKeepsHyphens: a break after a hyphen stays within the
// width (ansi.Wordwrap hangs the hyphen a cell over, and the frame's clip
// cut it: "on-demand" read "on demand"), and a word longer than the line
// is broken rather than cut.
func TestWordwrapKeepsHyphens(t *testing.T) {
	for _, c := range []struct {
		s string
		w int
	}{{"aaaa bbbb to on-demand when", 15}, {"moving the job to on-demand (ND96isr_H100_v5 in eastus)", 20},
		{"spot in us-west-2,eastus,us-east-1 and more", 12}, {"offering cb-0123456789abcdef0123456789", 10}, {"x-y", 1}} {
		out := wordwrap(c.s, c.w)
		for _, l := range strings.Split(out, "\n") {
			if ansi.StringWidth(l) > c.w {
				t.Errorf("%q at %d: line %q of %d cells", c.s, c.w, l, ansi.StringWidth(l))
			}
		}
		if strings.Join(strings.Fields(out), "") != strings.Join(strings.Fields(c.s), "") {
			t.Errorf("%q at %d lost text: %q", c.s, c.w, out)
		}
	}
}

// TestConfirmationKeepsItsPromptWhenShort: on a terminal too short for
// the terms, the confirmation keeps the question and the prompt (the
// frame's clip used to drop the prompt), says how many lines of terms are
// below, scrolls them, and takes y only once every line has been on
// screen: at 80×14 y then enter used to schedule a fleet whose window,
// notes and dry run were cut off.
func TestConfirmationKeepsItsPromptWhenShort(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.plan().runs = testRuns
	f.show(t, "Plan")
	f.job16()
	press(f.m, "r")
	f.selectStrategy(t, planner.StrategyOnDemand)
	f.m.Update(tea.WindowSizeMsg{Width: 80, Height: 14})
	press(f.m, "b")
	scr := f.screen()
	if !strings.Contains(scr, "Schedule an on-demand fleet") || !strings.Contains(scr, "Read every term (↓) before you schedule") ||
		!strings.Contains(scr, "more lines of terms (↓ or pgdn scrolls") || strings.Contains(scr, "dry run:") {
		t.Fatalf("80x14 confirmation:\n%s", scr)
	}
	if l := strings.Split(scr, "\n"); len(l) != 14 {
		t.Fatalf("%d lines", len(l))
	}
	press(f.m, "y", "enter")
	if rows, _ := f.st.List(context.Background()); len(rows) != 0 || !f.plan().confirm.open {
		t.Fatalf("y then enter with terms unseen: %d ledger rows, box open %v\n%s", len(rows), f.plan().confirm.open, f.screen())
	}
	// Down to the end, one page at a time: the dry run comes on screen,
	// then the prompt asks for the yes.
	for i := 0; i < 10 && !strings.Contains(f.screen(), "Type y then enter to schedule"); i++ {
		press(f.m, "pgdown")
	}
	scr = f.screen()
	if !strings.Contains(scr, "dry run:") || !strings.Contains(scr, "more lines of terms above") ||
		!strings.Contains(scr, "Type y then enter to schedule") {
		t.Fatalf("scrolled to the end:\n%s", scr)
	}
	press(f.m, "up") // back up: what was seen stays seen
	press(f.m, "y", "enter")
	if rows, err := f.st.List(context.Background()); err != nil || len(rows) != 1 {
		t.Fatalf("after reading every term: %+v %v\n%s", rows, err, f.screen())
	}
}

// TestConfirmationAtTinySizeBuysNothingUnseen: at 20×5 the box has room
// for its question only; y then enter there bought a block whose dates
// and place were never on screen. A taller terminal shows the terms, and
// then the yes is taken.
func TestConfirmationAtTinySizeBuysNothingUnseen(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Blocks")
	f.m.Update(tea.WindowSizeMsg{Width: 20, Height: 5})
	press(f.m, "b", "y", "enter")
	if n := f.fake.Calls("Book"); n != 0 {
		t.Fatalf("%d purchases at 20x5:\n%s", n, f.screen())
	}
	if l := strings.Split(f.screen(), "\n"); len(l) != 5 {
		t.Fatalf("%d lines at 20x5", len(l))
	}
	f.m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	scr := f.screen()
	if !strings.Contains(scr, "start ") || !strings.Contains(scr, "Type y then enter to buy") || strings.Contains(scr, "[yes]") {
		t.Fatalf("80x24 after 20x5:\n%s", scr)
	}
	press(f.m, "y", "enter")
	if n := f.fake.Calls("Book"); n != 1 {
		t.Fatalf("%d purchases after the terms were shown", n)
	}
}

// TestPlanFleetHoldsOneRegionAndSize: the fleet a spot strategy implies
// is its first pool's provider and region, over the types and zones
// there with the same GPUs per instance, enough instances for the job;
// the rest are said to be left. On-demand takes any zone.
func TestPlanFleetHoldsOneRegionAndSize(t *testing.T) {
	pool := func(prov, region, zone, typ string, gpus float64) planner.Pool {
		return planner.Pool{Key: prov + "/" + region + "/" + zone + "/" + typ, Provider: prov, Region: region, Zone: zone, InstanceType: typ, GPUsPerInstance: gpus}
	}
	ps := []planner.Pool{
		pool("sim", "eastus", "3", "Standard_NC40ads_H100_v5", 1), pool("sim", "eastus", "1", "Standard_NC40ads_H100_v5", 1),
		pool("sim", "eastus", "2", "Standard_NC80adis_H100_v5", 2), pool("sim", "us-east-1", "us-east-1a", "p5.48xlarge", 8),
		pool("aws", "eastus", "1", "Standard_NC40ads_H100_v5", 1),
	}
	pools := map[string]planner.Pool{}
	var keys []string
	for _, p := range ps {
		pools[p.Key] = p
		keys = append(keys, p.Key)
	}
	job := planner.Job{GPUs: 12}
	spec, left, err := planFleet(planner.Result{Strategy: planner.StrategySafetyNet, Pools: keys}, pools, job)
	if err != nil || spec.Provider != "sim" || spec.Region != "eastus" || spec.TargetCapacity != 12 || spec.OnDemandBase != 0 ||
		strings.Join(spec.InstanceTypes, ",") != "Standard_NC40ads_H100_v5" || strings.Join(spec.Zones, ",") != "3,1" || len(left) != 3 {
		t.Fatalf("spot: %+v left %d %v", spec, len(left), err)
	}
	if err := ledger.CheckFleet(spec); err != nil {
		t.Fatal(err)
	}
	spec, _, err = planFleet(planner.Result{Strategy: planner.StrategyOnDemand, Pools: keys[3:4]}, pools, job)
	if err != nil || spec.TargetCapacity != 2 || spec.OnDemandBase != 2 || len(spec.Zones) != 0 || spec.InstanceTypes[0] != "p5.48xlarge" {
		t.Fatalf("on-demand: %+v %v", spec, err)
	}
	if _, _, err := planFleet(planner.Result{Strategy: planner.StrategySpotOne, Pools: []string{"sim/gone/x/y"}}, pools, job); err == nil ||
		!strings.Contains(err.Error(), "r runs the plan again") {
		t.Fatalf("a pool no longer known: %v", err)
	}
}

// TestFooterSaysTheKeysOfWhatHasThem: while a form or a confirmation
// has every key, the footer says its keys, not the view's: the Plan
// form's footer offered "b book/launch" while b typed a b, and an open
// confirmation's "e edit job".
func TestFooterSaysTheKeysOfWhatHasThem(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.plan().runs = testRuns
	f.show(t, "Plan")
	foot := func() string {
		l := strings.Split(f.screen(), "\n")
		return l[len(l)-1]
	}
	press(f.m, "e")
	if got := foot(); strings.Contains(got, "book") || !strings.Contains(got, "enter run the plan") || !strings.Contains(got, "esc back") {
		t.Fatalf("Plan form footer %q", got)
	}
	press(f.m, "esc")
	f.job16()
	press(f.m, "r", "b")
	if got := foot(); strings.Contains(got, "edit job") || !strings.Contains(got, "y then enter start the job") || !strings.Contains(got, "n/esc cancel") {
		t.Fatalf("confirmation footer %q", got)
	}
	press(f.m, "esc")
	if got := foot(); !strings.Contains(got, "b book/launch") {
		t.Fatalf("Plan footer after the box %q", got)
	}

	f.show(t, "Blocks")
	press(f.m, "e")
	if got := foot(); strings.Contains(got, "book") || !strings.Contains(got, "←/→ change") || !strings.Contains(got, "enter search") {
		t.Fatalf("Blocks form footer on GPU %q", got)
	}
	press(f.m, "tab") // How many: a text field, no ←/→
	if got := foot(); strings.Contains(got, "←/→") {
		t.Fatalf("Blocks form footer on a text field %q", got)
	}
	press(f.m, "esc")

	f.show(t, "Fleet")
	press(f.m, "e")
	if got := foot(); strings.Contains(got, "launch") || strings.Contains(got, "strategy") || !strings.Contains(got, "enter done") || !strings.Contains(got, "esc put back") {
		t.Fatalf("Fleet form footer on Target %q", got)
	}
	press(f.m, "tab", "tab") // Strategy
	if got := foot(); !strings.Contains(got, "←/→ strategy") {
		t.Fatalf("Fleet form footer on Strategy %q", got)
	}
}

// TestPlanSummarySaysWhenARelativeJobWasPlanned: a job typed "start now,
// deadline +3d" is planned for the times those meant when it ran; the
// line over the table says them, or "start now" under an hour-old table
// reads as a start that moves with the clock.
func TestPlanSummarySaysWhenARelativeJobWasPlanned(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.plan().runs = testRuns
	f.show(t, "Plan")
	f.setJob("16", "48", "", "+3d")
	press(f.m, "r")
	if scr := flat(f.screen()); !strings.Contains(scr, "start now (11-23 14:01) · deadline +3d (11-26 14:00)") {
		t.Fatalf("summary:\n%s", f.screen())
	}
	f.job16() // absolute times are said once
	press(f.m, "r")
	if scr := flat(f.screen()); !strings.Contains(scr, "start 2026-11-24 09:00 · deadline 2026-11-27 09:00 ·") {
		t.Fatalf("summary:\n%s", f.screen())
	}
}

// TestPlanAgainPlansWhatIsLeft: after b booked the plan's block, which
// holds the whole job, r offers no strategy again: it says which ledger
// row covers the job. Another job is planned whole.
func TestPlanAgainPlansWhatIsLeft(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Plan")
	p := f.plan()
	p.runs = testRuns
	f.job8()
	press(f.m, "r")
	f.selectStrategy(t, planner.StrategyBlock)
	press(f.m, "b")
	press(f.m, "y", "enter")
	rows, err := f.st.List(context.Background())
	if err != nil || len(rows) != 1 || f.fake.Calls("Book") != 1 {
		t.Fatalf("booking: %v %v", rows, err)
	}
	seq := p.seq
	press(f.m, "r")
	if p.seq != seq || p.running {
		t.Fatalf("r planned the covered job again (run %d → %d)", seq, p.seq)
	}
	if want := "this job is covered by ledger row " + short(rows[0].ID); !strings.Contains(f.m.notice.text, want) {
		t.Fatalf("footer %q, want %q", f.m.notice.text, want)
	}
	// Another job (more GPUs than the block holds) is planned whole.
	f.setJob("16", "24", "2026-11-24 09:00", "2026-11-26 14:00")
	press(f.m, "r")
	if p.seq == seq || len(p.res.results) == 0 || p.res.terms.job.GPUs != 16 || p.res.terms.job.Hours != 24 {
		t.Fatalf("another job: run %d, %d results, job %+v", p.seq, len(p.res.results), p.res.terms.job)
	}
}

// A row over a budget cap says so under the table, naming the key.
func TestPlanRowOverCapSaysSo(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{MaxBookingUSD: 1000})
	f.show(t, "Plan")
	p := f.plan()
	p.runs = testRuns
	f.job8()
	press(f.m, "r")
	r := f.selectStrategy(t, planner.StrategyBlock)
	if r.ExpectedCostUSD <= 1000 || !strings.Contains(flat(f.screen()), "over max_booking_usd: b would be refused (config budget.max_booking_usd)") {
		t.Fatalf("a $%.2f block under a $1000 cap:\n%s", r.ExpectedCostUSD, f.screen())
	}
}

// TestPlanJobHoldsWithinThePurchaseCap: a safety-net job holds its work on
// on-demand alone, or the purchase cap if that is less (never below p95),
// and is started, not refused, under such a cap.
func TestPlanJobHoldsWithinThePurchaseCap(t *testing.T) {
	start := func(budget ledger.Budget) ledger.Job {
		t.Helper()
		f := newMoneyFixture(t, RoleBooker, budget)
		f.show(t, "Plan")
		f.plan().runs = testRuns
		f.job16()
		press(f.m, "r")
		f.selectStrategy(t, planner.StrategySafetyNet)
		f.m.Update(tea.WindowSizeMsg{Width: 100, Height: 50})
		press(f.m, "b")
		for i := 0; i < 10 && !strings.Contains(f.screen(), "Type y then enter to start the job"); i++ {
			press(f.m, "pgdown")
		}
		press(f.m, "y", "enter")
		js, err := f.st.ListJobs(context.Background())
		if err != nil || len(js) != 1 {
			t.Fatalf("jobs %+v %v\n%s", js, err, f.screen())
		}
		return js[0]
	}
	free := start(ledger.Budget{})
	if free.HoldUSD <= free.Plan.P95USD {
		t.Fatalf("no cap: hold $%.2f, p95 $%.2f; want the work on on-demand alone, above the p95", free.HoldUSD, free.Plan.P95USD)
	}
	limit := math.Round((free.HoldUSD + free.Plan.P95USD) / 2)
	capped := start(ledger.Budget{MaxBookingUSD: limit})
	if math.Abs(capped.HoldUSD-limit) > 0.01 {
		t.Fatalf("under max_booking_usd $%.2f the job holds $%.2f; want the cap", limit, capped.HoldUSD)
	}
}
