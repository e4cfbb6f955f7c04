package tui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/ledger"
)

// lines is the screen's lines, ANSI stripped.
func lines(m *Model) []string {
	return strings.Split(ansi.Strip(m.View().Content), "\n")
}

// TestHeaderFitsAt80: at 80 columns a viewer of the simulated market
// reads the header whole: the tabs, the badge, read-only and the time of
// the data (it was cut to "updated 14:0", or "read-only  upda").
func TestHeaderFitsAt80(t *testing.T) {
	for _, role := range []Role{RoleBooker, RoleViewer} {
		m := newTestModel(t, 80, 24, Options{Role: role})
		head := lines(m)[0]
		for _, want := range []string{"Market", "Chart", "Blocks", "Plan", "Fleet", "Ledger", "Usage", "SIMULATED", "14:00:00"} {
			if !strings.Contains(head, want) {
				t.Errorf("role %d: header %q lacks %q", role, head, want)
			}
		}
		if role == RoleViewer && !strings.Contains(head, "read-only") {
			t.Errorf("viewer's header %q lacks read-only", head)
		}
		if w := ansi.StringWidth(head); w > 80 {
			t.Errorf("header %d wide", w)
		}
	}
	// With room, it says it in full.
	m := newTestModel(t, 120, 40, Options{Role: RoleViewer})
	if head := lines(m)[0]; !strings.Contains(head, "SIMULATED MARKET") || !strings.Contains(head, "updated 14:00:00") {
		t.Errorf("120 columns: header %q", head)
	}
}

// TestFooterSaysHowToSwitchViewsAt80: in every view at 80 columns the
// footer ends with tab, help and quit, whatever the view's own keys.
func TestFooterSaysHowToSwitchViewsAt80(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	f.m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	for _, title := range []string{"Market", "Chart", "Blocks", "Plan", "Fleet", "Ledger", "Usage"} {
		f.show(t, title)
		f.m.Update(noticeExpiredMsg{id: f.m.noticeN})
		l := lines(f.m)
		foot := l[len(l)-1]
		if !strings.HasSuffix(foot, "tab next view • ? help • q quit") || ansi.StringWidth(foot) > 80 {
			t.Errorf("%s footer at 80: %q", title, foot)
		}
	}
}

// TestRefusalReadWholeAt80: a refusal longer than the line wraps in the
// footer (it was cut to "nothing w…"), and the view gives up the rows.
func TestRefusalReadWholeAt80(t *testing.T) {
	f := newMoneyFixture(t, RoleViewer, ledger.Budget{})
	f.m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	f.show(t, "Blocks")
	press(f.m, "b")
	l := lines(f.m)
	if len(l) != 24 {
		t.Fatalf("%d lines at 80x24", len(l))
	}
	foot := strings.Join(strings.Fields(strings.Join(l[len(l)-2:], " ")), " ")
	if !strings.Contains(foot, "read-only session: booking, launching and deleting are disabled here; nothing was spent") {
		t.Errorf("refusal cut:\n%s", strings.Join(l, "\n"))
	}
	f.m.Update(noticeExpiredMsg{id: f.m.noticeN})
	if l := lines(f.m); len(l) != 24 || !strings.Contains(l[len(l)-1], "q quit") {
		t.Errorf("after the notice: %d lines, footer %q", len(l), l[len(l)-1])
	}
}

// TestWrappedNoticeAtTinySizes: a long notice on a tiny terminal never
// draws past it.
func TestWrappedNoticeAtTinySizes(t *testing.T) {
	for _, sz := range [][2]int{{20, 5}, {10, 3}, {80, 4}, {1, 1}} {
		m := newTestModel(t, 120, 40, Options{})
		m.Update(noticeMsg{text: strings.Repeat("a refusal that says what is accepted ", 6), err: true})
		m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		out := m.View().Content
		ls := strings.Split(out, "\n")
		if len(ls) > sz[1] {
			t.Errorf("%dx%d: %d lines", sz[0], sz[1], len(ls))
		}
		for _, l := range ls {
			if w := ansi.StringWidth(l); w > sz[0] {
				t.Errorf("%dx%d: line of %d cells", sz[0], sz[1], w)
			}
		}
	}
}

// TestRegionNoticeStaysWithTheMarket: "region: …" is news about the
// Market's filter; on another view it is stale, so showing one clears it.
// A purchase's answer is not: it stays when the Ledger is shown.
func TestRegionNoticeStaysWithTheMarket(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	press(f.m, "r")
	if !strings.Contains(f.m.notice.text, "region: ") {
		t.Fatalf("no region notice: %q", f.m.notice.text)
	}
	press(f.m, "tab")
	if strings.Contains(f.screen(), "region: ") {
		t.Errorf("the Market's region notice is still in the footer on the %s view", f.m.views[f.m.active].Title())
	}
	f.show(t, "Blocks")
	press(f.m, "b", "y", "enter")
	f.show(t, "Ledger")
	if !strings.Contains(f.screen(), "booked cr-cb-cheap") {
		t.Errorf("the purchase's answer went with the view:\n%s", f.screen())
	}
}
