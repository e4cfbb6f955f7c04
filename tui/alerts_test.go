package tui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"

	"github.com/gpumarket/gpumarket/watch"
)

// newWatch is an evaluator over the fixture market's clock with the
// rules given (checked as a config's are), its state and rules file in a
// temp dir.
func newWatch(t *testing.T, rules ...watch.Spec) *watch.Evaluator {
	t.Helper()
	if err := watch.ValidateSpecs(rules, "watch", config.Notify{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := watch.OpenState(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ev, err := watch.New(watch.Options{State: st, Rules: rules, RulesFile: filepath.Join(dir, watch.RulesFileName), Now: nowFn})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func below(name, it, region string, usd float64) watch.Spec {
	return watch.Spec{Name: name, Cond: &watch.SpotRule{InstanceType: it, Region: region, BelowUSDHour: &usd}}
}

// raise evaluates the rules once on the fixture market.
func raise(t *testing.T, ev *watch.Evaluator) {
	t.Helper()
	if _, err := ev.Once(context.Background(), fixtureSnapshot()); err != nil {
		t.Fatal(err)
	}
}

// bells counts the terminal bells among msgs.
func bells(msgs []tea.Msg) int {
	n := 0
	for _, msg := range msgs {
		if r, ok := msg.(tea.RawMsg); ok && fmt.Sprint(r.Msg) == "\a" {
			n++
		}
	}
	return n
}

func title(m *Model) string { return strings.SplitN(ansi.Strip(m.View().Content), "\n", 2)[0] }

// Every session that can see it — a booker's and a viewer's — rings the
// bell once per alert and counts it in the header until the Alerts view
// is shown; the evaluator raised it once.
func TestAlertsReachEverySession(t *testing.T) {
	ev := newWatch(t, below("cheap-p5", "p5.48xlarge", "us-west-2", 30), below("cheap-t4", "g4dn.xlarge", "us-east-2", 1))
	var sessions []*Model
	for i := range 50 {
		role := RoleViewer
		if i == 0 {
			role = RoleBooker
		}
		sessions = append(sessions, newTestModel(t, 120, 30, Options{Watch: ev, Role: role}))
	}
	wake := sessions[0].initAlerts()
	raise(t, ev)
	if msg := wake(); msg != (alertsMsg{}) {
		t.Fatalf("the subscription said %#v, want alertsMsg", msg)
	}
	// The re-armed wait would block run: this session's wakes are done.
	sessions[0].alertSub = nil
	if n := len(ev.Alerts(0)); n != 2 {
		t.Fatalf("the evaluator raised %d alerts for 50 sessions, want 2", n)
	}
	for i, m := range sessions {
		_, cmd := m.Update(alertsMsg{})
		if n := bells(run(m, cmd)); n != 2 {
			t.Fatalf("session %d rang %d bells, want one per alert (2)", i, n)
		}
		if !strings.Contains(title(m), "[2 new alerts]") {
			t.Fatalf("session %d header %q, want the badge", i, title(m))
		}
		// Told already: a second wake-up rings nothing.
		_, cmd = m.Update(alertsMsg{})
		if n := bells(run(m, cmd)); n != 0 {
			t.Fatalf("session %d rang again for alerts it was told", i)
		}
	}
	m := sessions[1]
	showView(t, m, "Alerts")
	screen := ansi.Strip(m.View().Content)
	if strings.Contains(title(m), "new alert") {
		t.Errorf("the badge stays with the Alerts view shown: %q", title(m))
	}
	for _, want := range []string{"cheap-p5", "spot p5.48xlarge in us-west-2b is $21.75/h, below $30.00/h", "told: tui ✓", "2 rules (2 in the config, 0 made here)"} {
		if !strings.Contains(screen, want) {
			t.Errorf("Alerts view lacks %q:\n%s", want, screen)
		}
	}
	// On the Alerts view a new alert rings, is seen at once and listed.
	if _, err := ev.AddRule(context.Background(), below("cheap-nd", "Standard_ND96isr_H100_v5", "eastus", 100)); err != nil {
		t.Fatal(err)
	}
	raise(t, ev)
	_, cmd := m.Update(alertsMsg{})
	if n := bells(run(m, cmd)); n != 1 || m.unseen != 0 {
		t.Errorf("on the Alerts view: %d bells, %d unseen; want 1 and 0", n, m.unseen)
	}
	if screen := ansi.Strip(m.View().Content); !strings.Contains(screen, "cheap-nd") || strings.Contains(title(m), "new alert") {
		t.Errorf("the new alert is not listed, or badged:\n%s", screen)
	}
}

// R shows the rules; x deletes one made in the TUI, not the config's.
func TestAlertsViewRules(t *testing.T) {
	ev := newWatch(t, below("cheap-p5", "p5.48xlarge", "us-west-2", 30))
	if _, err := ev.AddRule(context.Background(), below("made", "g4dn.xlarge", "us-east-2", 0.1)); err != nil {
		t.Fatal(err)
	}
	raise(t, ev)
	m := newTestModel(t, 120, 30, Options{Watch: ev})
	showView(t, m, "Alerts")
	press(m, "R")
	screen := ansi.Strip(m.View().Content)
	for _, want := range []string{"cheap-p5           config   spot p5.48xlarge in us-west-2 (any zone) below $30/h · holds now · last told Mon 14:00",
		"made               made     spot g4dn.xlarge in us-east-2"} {
		if !strings.Contains(screen, want) {
			t.Errorf("rules list lacks %q:\n%s", want, screen)
		}
	}
	msgs := press(m, "x") // the config's rule
	if !hasNotice(msgs, "is in the config file") {
		t.Errorf("x on a config rule: %v", msgs)
	}
	msgs = press(m, "down", "x")
	if rs := ev.Rules(); len(rs) != 1 || rs[0].Name != "cheap-p5" {
		t.Errorf("rules after x: %+v", rs)
	}
	if !hasNotice(msgs, "deleted rule made") { // it used to go without a word
		t.Errorf("x on a rule made here said nothing: %v", msgs)
	}
	viewer := newTestModel(t, 120, 30, Options{Watch: ev, Role: RoleViewer})
	showView(t, viewer, "Alerts")
	if msgs := press(viewer, "R", "x"); !hasNotice(msgs, "read-only") {
		t.Errorf("a viewer deleted a rule: %v", msgs)
	}
}

// pressAll is press with the prompt's keys too: backspace, left, right.
func pressAll(m *Model, keys ...string) []tea.Msg {
	var out []tea.Msg
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "backspace":
			msg = tea.KeyPressMsg{Code: tea.KeyBackspace}
		case "left":
			msg = tea.KeyPressMsg{Code: tea.KeyLeft}
		case "right":
			msg = tea.KeyPressMsg{Code: tea.KeyRight}
		default:
			out = append(out, press(m, k)...)
			continue
		}
		_, cmd := m.Update(msg)
		out = append(out, run(m, cmd)...)
	}
	return out
}

func hasNotice(msgs []tea.Msg, text string) bool {
	for _, msg := range msgs {
		if n, ok := msg.(noticeMsg); ok && strings.Contains(n.text, text) {
			return true
		}
	}
	return false
}

// a on a Market row makes a spot rule for that pool, saved where it
// survives a restart; only a booker may.
func TestMarketMakesASpotRule(t *testing.T) {
	ev := newWatch(t)
	m := newTestModel(t, 120, 30, Options{Watch: ev, Actor: "ssh:SHA256:abc alice"})
	press(m, "a")
	key := cursorKey(m)
	screen := ansi.Strip(m.View().Content)
	if !strings.Contains(screen, "alert when spot NC4as_T4_v3 in eastus/3 is below $0.09") || !strings.Contains(screen, "now $0.1050/h") {
		t.Fatalf("prompt:\n%s", screen)
	}
	// The keys are the prompt's: q types nothing and does not quit.
	for range 6 {
		pressAll(m, "backspace")
	}
	msgs := pressAll(m, "q", "0", ".", "1", "2", "right", "enter")
	if !hasNotice(msgs, "rule spot-") || !hasNotice(msgs, ev.RulesFile()) {
		t.Fatalf("save: %v", msgs)
	}
	rs := ev.Rules()
	if len(rs) != 1 {
		t.Fatalf("rules %+v", rs)
	}
	s := rs[0].Cond.(*watch.SpotRule)
	if s.AboveUSDHour == nil || *s.AboveUSDHour != 0.12 || s.BelowUSDHour != nil || s.Zone != "3" || s.Region != "eastus" ||
		s.InstanceType != "Standard_NC4as_T4_v3" || rs[0].MadeBy != "ssh:SHA256:abc alice" || !strings.HasPrefix(key, s.Provider+"/") {
		t.Errorf("rule %+v %+v", rs[0], s)
	}
	if data, err := os.ReadFile(ev.RulesFile()); err != nil || !strings.Contains(string(data), "above_usd_hour: 0.12") {
		t.Errorf("rules file %s %v", data, err)
	}
	// A bad figure keeps the prompt open with what is accepted.
	pressAll(m, "a", "backspace", "backspace", "backspace", "backspace", "backspace", "enter")
	if !m.market.prompt.open || !strings.Contains(ansi.Strip(m.View().Content), "want a price above 0") {
		t.Errorf("an empty figure was accepted")
	}
	press(m, "esc")
	if m.market.prompt.open {
		t.Error("esc left the prompt open")
	}
	viewer := newTestModel(t, 120, 30, Options{Watch: ev, Role: RoleViewer})
	if msgs := press(viewer, "a"); !hasNotice(msgs, "only a booker may make alert rules") || viewer.market.prompt.open {
		t.Errorf("a viewer opened a rule prompt: %v", msgs)
	}
	none := newTestModel(t, 120, 30, Options{})
	if msgs := press(none, "a"); !hasNotice(msgs, "cannot be made in this session") {
		t.Errorf("a session without a watch: %v", msgs)
	}
}

// a on a Blocks search makes a block rule for its terms.
func TestBlocksMakesABlockRule(t *testing.T) {
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fake := ledgertest.New("sim", ledgertest.Offering("sim", "cb-cheap", fixedNow.Add(24*time.Hour), 48, 1, 3000)).Simulated()
	svc := ledger.New(st, []domain.Provider{fake}, ledger.Options{Now: nowFn, Timeout: time.Second})
	ev := newWatch(t)
	m := newBare(Options{Now: nowFn, NoColor: true, Booking: svc, Watch: ev, Actor: "local:tester"})
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	run(m, m.broadcast(snapshotMsg{snap: fixtureSnapshot()}))
	showView(t, m, "Blocks")
	press(m, "e", "down", "down", "down", "down", "+", "1", "d", "enter") // earliest start +1d
	press(m, "a")
	screen := ansi.Strip(m.View().Content)
	if !strings.Contains(screen, "alert when a block of 8 H100 × 2d is at most $7.42▏/GPU-h (cheapest now $7.812)") {
		t.Fatalf("prompt:\n%s", screen)
	}
	msgs := press(m, "enter")
	if !hasNotice(msgs, "rule block-H100-8-2d saved") {
		t.Fatalf("save: %v", msgs)
	}
	b := ev.Rules()[0].Cond.(*watch.BlockRule)
	if b.GPU != "H100" || b.GPUs != 8 || b.Hours != 48 || *b.MaxUSDGPUHour != 7.42 || b.StartAfter != "2026-11-24T14:00:00Z" || b.StartBefore != "" {
		t.Errorf("block rule %+v", b)
	}
}

func TestGoldenAlerts(t *testing.T) {
	ev := newWatch(t, below("cheap-p5", "p5.48xlarge", "us-west-2", 30), below("cheap-t4", "g4dn.xlarge", "us-east-2", 1))
	raise(t, ev)
	for _, sz := range [][2]int{{80, 24}, {20, 5}} {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m := newTestModel(t, sz[0], sz[1], Options{Watch: ev})
			run(m, func() tea.Msg { return alertsMsg{} })
			showView(t, m, "Alerts")
			out := ansi.Strip(m.View().Content)
			for _, l := range strings.Split(out, "\n") {
				if cellWidth(l) > sz[0] {
					t.Errorf("line wider than %d: %q", sz[0], l)
				}
			}
			golden.RequireEqual(t, out)
		})
	}
	// The badge fits the 80-column title with the simulated badge.
	m := newTestModel(t, 80, 24, Options{Watch: ev})
	run(m, func() tea.Msg { return alertsMsg{} })
	if tl := title(m); !strings.Contains(tl, "⚑2") || !strings.Contains(tl, "SIM") || cellWidth(tl) > 80 {
		t.Errorf("title at 80 columns: %q", tl)
	}
}

// TestAlertsHelpKeepsTheDataDirFromViewers: the Alerts help names the
// rules file to the operator; a workshop attendee is not told the
// server's paths (the Ledger view keeps its file from them too).
func TestAlertsHelpKeepsTheDataDirFromViewers(t *testing.T) {
	ev := newWatch(t)
	for _, role := range []Role{RoleBooker, RoleViewer} {
		m := newTestModel(t, 120, 40, Options{Watch: ev, Role: role})
		showView(t, m, "Alerts")
		press(m, "?")
		scr := ansi.Strip(m.View().Content)
		if has := strings.Contains(flat(scr), ev.RulesFile()); has != (role == RoleBooker) {
			t.Errorf("role %d: the help names %s: %v\n%s", role, ev.RulesFile(), has, scr)
		}
	}
}

// a on a running Usage row makes an idle rule for that row, at the
// budget's max_idle_pct to start with; an ended row cannot be idle from
// now on, and a viewer cannot make rules.
func TestUsageMakesAnIdleRule(t *testing.T) {
	ev := newWatch(t)
	m, _ := newUsageFixtureWith(t, Options{Watch: ev}, 120, 30)
	showView(t, m, "Usage")
	u := m.views[m.active].(*usageView)
	ended, running := -1, -1
	for i, r := range u.rep.Rows {
		switch {
		case r.ID == "01JURES":
			ended = i
		case r.ID == "01JUBLOCK":
			running = i
		}
	}
	if ended < 0 || running < 0 {
		t.Fatalf("rows %+v", u.rep.Rows)
	}
	u.cur = ended
	if msgs := press(m, "a"); !hasNotice(msgs, "is ended, not running") || u.prompt.open {
		t.Errorf("an ended row opened a prompt: %v", msgs)
	}
	u.cur = running
	press(m, "a")
	screen := ansi.Strip(m.View().Content)
	// The fixture's budget.max_idle_pct is 50; the block is 51 % idle.
	if !strings.Contains(screen, "alert when block …UBLOCK (16 GPU p5.48xlarge) is more than 50▏% idle (now 51%)") {
		t.Fatalf("prompt:\n%s", screen)
	}
	// The keys are the prompt's; a figure of 100 or more is refused.
	msgs := pressAll(m, "backspace", "backspace", "q", "1", "0", "0", "enter")
	if !u.prompt.open || !strings.Contains(ansi.Strip(m.View().Content), "want a percentage from 0 to 99") || hasNotice(msgs, "saved") {
		t.Fatalf("100 %% was accepted:\n%s", ansi.Strip(m.View().Content))
	}
	u.prompt.err = ""
	msgs = pressAll(m, "backspace", "backspace", "backspace", "3", "5", "enter")
	if !hasNotice(msgs, "rule idle-block-01JUBLOCK saved") {
		t.Fatalf("save: %v", msgs)
	}
	rs := ev.Rules()
	if len(rs) != 1 {
		t.Fatalf("rules %+v", rs)
	}
	if i, ok := rs[0].Cond.(*watch.IdleRule); !ok || i.AbovePct != 35 || i.ID != "01JUBLOCK" || rs[0].MadeBy != "local:tester" {
		t.Fatalf("rules %+v", rs)
	}
	if data, err := os.ReadFile(ev.RulesFile()); err != nil || !strings.Contains(string(data), "above_pct: 35") || !strings.Contains(string(data), "id: 01JUBLOCK") {
		t.Errorf("rules file %s %v", data, err)
	}
	viewer, _ := newUsageFixtureWith(t, Options{Watch: ev, Role: RoleViewer}, 120, 30)
	showView(t, viewer, "Usage")
	// A viewer's footer does not offer a, and a does nothing.
	if strings.Contains(ansi.Strip(viewer.View().Content), "idle alert rule") {
		t.Error("a viewer's footer offers the idle alert rule")
	}
	press(viewer, "a", "enter")
	if viewer.views[viewer.active].(*usageView).prompt.open || len(ev.Rules()) != 1 {
		t.Errorf("a viewer made an idle rule: %+v", ev.Rules())
	}
}

// The idle rule prompt at 20×5 and with NO_COLOR: nothing crashes, the
// prompt still has its keys, and the rule is saved.
func TestUsageIdlePromptAtTinySize(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	ev := newWatch(t)
	m, _ := newUsageFixtureWith(t, Options{Watch: ev}, 20, 5)
	showView(t, m, "Usage")
	u := m.views[m.active].(*usageView)
	for i, r := range u.rep.Rows {
		if r.ID == "01JUFLEET" {
			u.cur = i
		}
	}
	press(m, "a")
	if !u.prompt.open {
		t.Fatalf("no prompt at 20×5:\n%s", ansi.Strip(m.View().Content))
	}
	for _, line := range strings.Split(ansi.Strip(m.View().Content), "\n") {
		if w := ansi.StringWidth(line); w > 20 {
			t.Errorf("line %q is %d wide at 20 columns", line, w)
		}
	}
	if msgs := pressAll(m, "backspace", "backspace", "6", "0", "enter"); !hasNotice(msgs, "rule idle-fleet-01JUFLEET saved") {
		t.Fatalf("save: %v", msgs)
	}
	if rs := ev.Rules(); len(rs) != 1 || rs[0].Cond.(*watch.IdleRule).AbovePct != 60 || rs[0].Cond.(*watch.IdleRule).ID != "01JUFLEET" {
		t.Errorf("rules %+v", rs)
	}
}
