package tui

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
)

// moneyFixture is a session with the money views over a fake provider
// named "sim" (the fixture market's pools are the sim's), a real ledger
// in a temp dir, and the fixture clock.
type moneyFixture struct {
	m    *Model
	fake *ledgertest.Fake
	svc  *ledger.Service
	st   *ledger.Store
}

func newMoneyFixture(t testing.TB, role Role, budget ledger.Budget) *moneyFixture {
	t.Helper()
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fake := ledgertest.New("sim",
		ledgertest.Offering("sim", "cb-cheap", fixedNow.Add(24*time.Hour), 48, 1, 3000),
		ledgertest.Offering("sim", "cb-dear", fixedNow.Add(48*time.Hour), 48, 1, 6000),
	).Simulated()
	fake.SpotUSDHour = 20
	svc := ledger.New(st, []domain.Provider{fake}, ledger.Options{Budget: budget, Now: nowFn, Timeout: time.Second, Actor: "tester"})
	m := newBare(Options{Now: nowFn, NoColor: true, Role: role, Actor: "local:tester", Booking: svc})
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	run(m, m.broadcast(snapshotMsg{snap: fixtureSnapshot()}))
	return &moneyFixture{m: m, fake: fake, svc: svc, st: st}
}

// show switches to the named view and delivers a market tick.
func (f *moneyFixture) show(t *testing.T, title string) {
	t.Helper()
	for i := 0; i < len(f.m.views) && f.m.views[f.m.active].Title() != title; i++ {
		press(f.m, "tab")
	}
	if f.m.views[f.m.active].Title() != title {
		t.Fatalf("no %s view", title)
	}
	f.tick()
}

// tick delivers a market snapshot to every view.
func (f *moneyFixture) tick() {
	_, cmd := f.m.Update(snapshotMsg{snap: fixtureSnapshot()})
	run(f.m, cmd)
}

func (f *moneyFixture) screen() string {
	return ansi.Strip(f.m.View().Content)
}

func (f *moneyFixture) blocks() *blocksView {
	for _, v := range f.m.views {
		if b, ok := v.(*blocksView); ok {
			return b
		}
	}
	return nil
}

func TestBlocksSelectBookConfirmLedgerRow(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Blocks")
	b := f.blocks()
	if len(b.offers) != 2 || b.offers[0].ID != "cb-cheap" {
		t.Fatalf("offers %+v", b.offers)
	}
	scr := f.screen()
	if !strings.Contains(scr, "SPOT ALT") || !strings.Contains(scr, "3000.00") {
		t.Fatalf("blocks screen:\n%s", scr)
	}
	// The spot alternative is the cheapest risk-adjusted H100 pool.
	if alt, ok := b.spotAlternative(b.offers[0]); !ok || alt.Pool.GPU.Model != "H100" || !(alt.Effective > 0) {
		t.Fatalf("spot alternative %+v %v", alt, ok)
	}

	press(f.m, "down") // select the dearer one, then back: selection follows the cursor
	press(f.m, "up")
	press(f.m, "b")
	scr = f.screen()
	total := strings.Index(scr, "Total upfront: $3000.00")
	if total < 0 || !strings.Contains(scr, "dry run: Request would have succeeded") || !strings.Contains(scr, "Type y then enter") ||
		!strings.Contains(scr, "14:00 UTC)") || !strings.Contains(scr, "per GPU-hour") {
		t.Fatalf("confirmation:\n%s", scr)
	}
	if f.fake.Calls("BookDryRun") != 1 || f.fake.Calls("Book") != 0 {
		t.Fatalf("before yes: %d dry runs, %d purchases", f.fake.Calls("BookDryRun"), f.fake.Calls("Book"))
	}
	// enter alone is "no"; q and tab do not leave the box.
	press(f.m, "enter", "tab")
	if f.fake.Calls("Book") != 0 || !b.confirm.open || f.m.views[f.m.active] != b {
		t.Fatal("enter without y bought, or the box let go")
	}
	press(f.m, "y", "enter")
	if n := f.fake.Calls("Book"); n != 1 {
		t.Fatalf("%d purchases, want 1", n)
	}
	if b.confirm.open {
		t.Fatal("the box is still open after the purchase")
	}
	if !strings.Contains(f.m.notice.text, "booked cr-cb-cheap") {
		t.Fatalf("footer %q", f.m.notice.text)
	}
	rows, err := f.st.List(context.Background())
	if err != nil || len(rows) != 1 || rows[0].State != ledger.StateScheduled || rows[0].IdemKey != "cb-cheap" || rows[0].Actor != "local:tester" {
		t.Fatalf("ledger %+v %v", rows, err)
	}
	// The booked offering is gone from the list; b again books the other
	// only after its own confirmation.
	if len(b.offers) != 1 || b.offers[0].ID != "cb-dear" {
		t.Fatalf("after booking: %+v", b.offers)
	}

	// The Ledger view shows the row with its countdown.
	f.show(t, "Ledger")
	scr = f.screen()
	if !strings.Contains(scr, "cr-cb-cheap") || !strings.Contains(scr, "starts in 1d 0h") || !strings.Contains(scr, "scheduled") {
		t.Fatalf("ledger screen:\n%s", scr)
	}
}

func TestBlocksCancelAndBudget(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{MaxBookingUSD: 4000})
	f.show(t, "Blocks")
	press(f.m, "b", "n")
	if f.blocks().confirm.open || f.fake.Calls("Book") != 0 {
		t.Fatal("n did not cancel")
	}
	press(f.m, "down", "b")
	scr := f.screen()
	if !strings.Contains(scr, "max_booking_usd $4000.00") || !strings.Contains(scr, "nothing was spent") {
		t.Fatalf("over budget:\n%s", scr)
	}
	press(f.m, "y", "enter")
	if f.fake.Calls("Book")+f.fake.Calls("BookDryRun") != 1 { // only the first offering's dry run
		t.Fatalf("calls over budget: book %d dry %d", f.fake.Calls("Book"), f.fake.Calls("BookDryRun"))
	}
	press(f.m, "esc")
	if f.blocks().confirm.open {
		t.Fatal("esc did not close")
	}
}

func TestReadOnlySessionSpendsNothing(t *testing.T) {
	f := newMoneyFixture(t, RoleViewer, ledger.Budget{})
	f.show(t, "Blocks")
	press(f.m, "b")
	if f.blocks().confirm.open || !strings.Contains(f.m.notice.text, "read-only session") || !strings.Contains(f.m.notice.text, "nothing was spent") {
		t.Fatalf("viewer b: box %v, footer %q", f.blocks().confirm.open, f.m.notice.text)
	}
	f.show(t, "Fleet")
	press(f.m, "L")
	f.show(t, "Ledger")
	press(f.m, "d")
	if !strings.Contains(f.m.notice.text, "read-only") {
		t.Fatalf("viewer d: %q", f.m.notice.text)
	}
	if out := f.m.views[f.m.active].View(); !strings.Contains(out, "rows") || strings.Contains(out, ".db") {
		t.Errorf("a viewer's Ledger view, loaded, without the ledger's path:\n%s", out)
	}
	if n := f.fake.Calls("Book") + f.fake.Calls("BookDryRun") + f.fake.Calls("LaunchFleet") + f.fake.Calls("LaunchFleetDryRun"); n != 0 {
		t.Fatalf("a viewer made %d money calls", n)
	}
}

func TestBlocksForm(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.show(t, "Blocks")
	b := f.blocks()
	press(f.m, "e")
	if !b.capturing() {
		t.Fatal("the form does not capture keys")
	}
	// size field: 8 → 16; unit → instances; duration 2d → 3d
	press(f.m, "down", "6", "down", "right", "down", "backspace", "backspace", "3", "d", "enter")
	// Terms that do not parse keep the form open beside their error.
	if !b.editing || b.form.size != "86" || !b.form.instances || b.form.duration != "3d" {
		t.Fatalf("form %+v editing %v", b.form, b.editing)
	}
	if !strings.Contains(b.formErr, "at most 64 instances") {
		t.Fatalf("form error %q", b.formErr)
	}
	// esc leaves them: the form goes back to the terms the table shows,
	// and the summary above the table says those.
	press(f.m, "esc")
	if b.editing || b.formErr != "" || b.form != b.terms || b.form.size != "8" {
		t.Fatalf("after esc: form %+v terms %+v editing %v err %q", b.form, b.terms, b.editing, b.formErr)
	}
	if out := b.View(); !strings.Contains(out, "8 × H100 GPUs for 2d") {
		t.Fatalf("summary after esc:\n%s", out)
	}
	// A start of day and hour, typed with its space, in the session's zone;
	// an 8-hour duration is expressible (Azure reservations take any hours).
	press(f.m, "e", "down", "backspace", "1", "6", "down", "down", "backspace", "backspace", "8", "h", "down")
	for _, r := range "2026-11-24 09:00" {
		press(f.m, string(r))
	}
	press(f.m, "enter")
	if b.editing || b.formErr != "" || b.terms.after != "2026-11-24 09:00" || b.terms.duration != "8h" || b.terms.size != "16" {
		t.Fatalf("start typed with a space: form %+v editing %v err %q", b.form, b.editing, b.formErr)
	}
	if out := b.View(); !strings.Contains(out, "16 × H100 GPUs for 8h, starting 2026-11-24 09:00") {
		t.Fatalf("summary:\n%s", out)
	}
	east := time.FixedZone("EST", -5*3600)
	at, err := domain.ParseWhen("2026-11-24 09:00", fixedNow.In(east))
	if err != nil || !at.Equal(time.Date(2026, 11, 24, 14, 0, 0, 0, time.UTC)) {
		t.Fatalf("local start: %v %v", at, err)
	}
	if q, err := (blocksForm{gpu: "H100", size: "8", duration: "26w"}).parse(fixedNow); err != nil || q.Duration != 182*24*time.Hour {
		t.Fatalf("a 26-week block: %+v %v", q, err)
	}
	q, err := blocksForm{gpu: "A100", size: "16", duration: "48h", after: "+1d", before: "2026-12-20"}.parse(fixedNow)
	if err != nil || q.GPUs != 16 || q.Instances != 0 || q.Duration != 48*time.Hour || !q.StartAfter.Equal(fixedNow.Add(24*time.Hour)) {
		t.Fatalf("parse: %+v %v", q, err)
	}
	for _, bad := range []blocksForm{{gpu: "H100", size: "x", duration: "2d"}, {gpu: "H100", size: "8", duration: "90m"},
		{gpu: "H100", size: "8", duration: "2d", after: "soon"}, {gpu: "H100", size: "8", duration: "2d", after: "+3d", before: "+1d"}} {
		if _, err := bad.parse(fixedNow); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func FuzzBlocksForm(f *testing.F) {
	f.Add("8", "2d", "+1d", "2026-12-20", "")
	f.Add("0", "90m", "x", "", "20h")
	f.Add("8", "1d", "", "", "1d")
	f.Fuzz(func(t *testing.T, size, dur, after, before, flex string) {
		q, err := blocksForm{gpu: "H100", size: size, duration: dur, after: after, before: before, flex: flex}.parse(fixedNow)
		if err != nil {
			return
		}
		if q.Duration <= 0 || q.Duration%time.Hour != 0 || (q.GPUs < 1 && q.Instances < 1) || q.FlexDuration < 0 || q.FlexDuration >= q.Duration {
			t.Fatalf("accepted %+v", q)
		}
	})
}

// TestProgramBookThroughConfirmation drives the whole program (the real
// hub, teatest): tab to Blocks, select, b, the confirmation with the
// total and the dry run, y enter, then the row in the Ledger view.
func TestProgramBookThroughConfirmation(t *testing.T) {
	h := startHub(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fake := ledgertest.New("sim", ledgertest.Offering("sim", "cb-cheap", fixedNow.Add(24*time.Hour), 48, 1, 3000)).Simulated()
	svc := ledger.New(st, []domain.Provider{fake}, ledger.Options{Now: nowFn, Timeout: 5 * time.Second})
	m := New(Options{Hub: h, Now: nowFn, NoColor: true, Context: ctx, Actor: "local:tester", Booking: svc})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(160, 40))

	// A row's text, not the status line's "9/9 pools": the renderer
	// rewrites only the cells of "0/0" that change.
	waitFor(t, tm, "market", func(s string) bool { return strings.Contains(s, "ap-northeast-1a") })
	tm.Send(tea.KeyPressMsg{Code: tea.KeyTab})
	tm.Send(tea.KeyPressMsg{Code: tea.KeyTab})
	tm.Type("j")
	waitFor(t, tm, "offerings", func(s string) bool { return strings.Contains(s, "3000.00") && strings.Contains(s, "SPOT ALT") })
	tm.Type("b")
	waitFor(t, tm, "confirmation", func(s string) bool {
		return strings.Contains(s, "Total upfront: $3000.00") && strings.Contains(s, "dry run:") && strings.Contains(s, "Type y then enter to buy")
	})
	tm.Type("y")
	tm.Send(tea.KeyPressMsg{Code: tea.KeyEnter})
	// Not "booked cr-…": the renderer sends only the cells that change,
	// and the footer's "b book" left the notice's first "b" in place, so
	// the stream often reads "ooked cr-…" (a flake, 3 runs in 20).
	waitFor(t, tm, "booked", func(s string) bool { return strings.Contains(s, "cr-cb-cheap: scheduled") })
	// Blocks → Plan → Fleet → Ledger.
	tm.Send(tea.KeyPressMsg{Code: tea.KeyTab})
	tm.Send(tea.KeyPressMsg{Code: tea.KeyTab})
	tm.Send(tea.KeyPressMsg{Code: tea.KeyTab})
	tm.Type("j")
	waitFor(t, tm, "ledger row", func(s string) bool {
		return strings.Contains(s, "starts in 1d 0h") && strings.Contains(s, "cr-cb-cheap")
	})
	tm.Type("q")
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))

	rows, err := st.List(context.Background())
	if err != nil || len(rows) != 1 || rows[0].State != ledger.StateScheduled || rows[0].Actor != "local:tester" {
		t.Fatalf("ledger %+v %v", rows, err)
	}
	if fake.Calls("Book") != 1 || fake.Calls("BookDryRun") != 1 {
		t.Fatalf("calls: book %d dry %d", fake.Calls("Book"), fake.Calls("BookDryRun"))
	}
}

// TestBlocksAt80: on a laptop's 80 columns the offerings keep what
// decides a booking: price, total, GPUs, start, length and place, and the
// spot alternative with its total beside them; the footnote is read whole.
func TestBlocksAt80(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	f.show(t, "Blocks")
	scr := f.screen()
	for _, want := range []string{"$/GPU-h", "UPFRONT $", "GPUs", "START (local)", "HOURS", "WHERE", "SPOT ALT*", "ALT TOTAL", "3000.00", "11-24 14:00 UTC"} {
		if !strings.Contains(scr, want) {
			t.Errorf("80 columns: no %q in\n%s", want, scr)
		}
	}
	if flat := strings.Join(strings.Fields(scr), " "); !strings.Contains(flat, "ALT TOTAL for them") || !strings.Contains(flat, "(e edits)") {
		t.Errorf("80 columns: the summary or the footnote is cut:\n%s", scr)
	}
	// The confirmation's terms wrap whole at 80 columns.
	press(f.m, "b")
	scr = strings.Join(strings.Fields(f.screen()), " ")
	for _, want := range []string{"Total upfront: $3000.00", "(SIMULATED MARKET: nothing real is bought)", "Type y then enter to buy"} {
		if !strings.Contains(scr, want) {
			t.Errorf("80-column confirmation: no %q in\n%s", want, f.screen())
		}
	}
}

// TestBlocksSearchWhenFirstShown: a session that never opens the Blocks
// view asks no cloud for offerings (a search asks every region; thirty
// workshop attendees would ask thirty times); opening it searches once.
// (A read-only session searches only when asked:
// TestBlocksViewerSearchesWhenAsked.)
func TestBlocksSearchWhenFirstShown(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.tick()
	f.tick()
	if n := f.fake.Calls("FindOfferings"); n != 0 {
		t.Fatalf("%d searches before the Blocks view was shown", n)
	}
	f.show(t, "Blocks")
	f.show(t, "Market")
	f.show(t, "Blocks")
	if n := f.fake.Calls("FindOfferings"); n != 1 {
		t.Fatalf("%d searches after showing Blocks twice, want 1", n)
	}
	if !strings.Contains(f.screen(), "3000.00") {
		t.Errorf("no offerings:\n%s", f.screen())
	}
}

// TestSearchAnswerReachesHiddenView: the user opens Blocks, whose first
// search starts, and tabs on before it answers: the answer goes to the
// Blocks view all the same (routed by its id, not to the view on screen),
// and showing it again shows the offerings without asking again.
func TestSearchAnswerReachesHiddenView(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	b := f.blocks()
	search := f.m.switchTo(f.m.indexOf(b)) // the first search, not yet run
	if search == nil || !b.searching {
		t.Fatal("showing Blocks started no search")
	}
	press(f.m, "tab") // on to Fleet
	run(f.m, search)
	if f.m.views[f.m.active] == b {
		t.Fatal("the answer switched views")
	}
	if b.searching || len(b.offers) != 2 {
		t.Fatalf("the hidden Blocks view did not get its answer: searching %v, %d offers", b.searching, len(b.offers))
	}
	press(f.m, "shift+tab")
	if !strings.Contains(f.screen(), "3000.00") || f.fake.Calls("FindOfferings") != 1 {
		t.Errorf("%d searches; screen:\n%s", f.fake.Calls("FindOfferings"), f.screen())
	}
}

// TestBlocksViewerSearchesWhenAsked: a read-only session does not search
// when the Blocks view is shown (thirty attendees tabbing past it to the
// Ledger sent thirty searches of every region of every cloud); it says r
// searches, and r does. A booker's first showing still searches.
func TestBlocksViewerSearchesWhenAsked(t *testing.T) {
	f := newMoneyFixture(t, RoleViewer, ledger.Budget{})
	f.show(t, "Blocks")
	if n := f.fake.Calls("FindOfferings"); n != 0 {
		t.Fatalf("a viewer's Blocks view searched %d times when shown", n)
	}
	if scr := flat(f.screen()); !strings.Contains(scr, "r searches with these terms") {
		t.Fatalf("the view does not say how to search:\n%s", f.screen())
	}
	press(f.m, "r")
	if n := f.fake.Calls("FindOfferings"); n != 1 || len(f.blocks().offers) != 2 {
		t.Fatalf("r: %d searches, %d offerings", n, len(f.blocks().offers))
	}
	g := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	g.show(t, "Blocks")
	if n := g.fake.Calls("FindOfferings"); n != 1 {
		t.Fatalf("a booker's first showing searched %d times", n)
	}
}
