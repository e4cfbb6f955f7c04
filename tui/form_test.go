package tui

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/tui/widget/form"
)

// edit sends keys as a terminal does: named keys, ctrl+ and alt+ chords,
// else the text typed.
func edit(m *Model, keys ...string) {
	named := map[string]rune{"left": tea.KeyLeft, "right": tea.KeyRight, "home": tea.KeyHome, "end": tea.KeyEnd,
		"backspace": tea.KeyBackspace, "delete": tea.KeyDelete, "enter": tea.KeyEnter, "esc": tea.KeyEscape,
		"down": tea.KeyDown, "up": tea.KeyUp, "tab": tea.KeyTab}
	for _, k := range keys {
		msg := tea.KeyPressMsg{Code: named[k]}
		switch {
		case strings.HasPrefix(k, "ctrl+"):
			msg = tea.KeyPressMsg{Code: rune(k[5]), Mod: tea.ModCtrl}
		case msg.Code == 0:
			msg = tea.KeyPressMsg{Code: []rune(k)[0], Text: k}
		}
		_, cmd := m.Update(msg)
		run(m, cmd)
	}
}

// Every form edits a text field with the same keys, esc puts back what
// was there before the form opened, and typing stops at one length.
func TestEveryFormEditsTheSameWay(t *testing.T) {
	for _, c := range []struct {
		view string
		// open opens the form on a text field holding was; value reads it.
		open    []string
		was     string
		value   func(f *moneyFixture) string
		editing func(f *moneyFixture) bool
	}{
		{"Plan", []string{"e", "down", "down"}, "24",
			func(f *moneyFixture) string { return f.plan().form.hours }, func(f *moneyFixture) bool { return f.plan().editing }},
		{"Blocks", []string{"e", "down"}, "8",
			func(f *moneyFixture) string { return f.blocks().form.size }, func(f *moneyFixture) bool { return f.blocks().editing }},
		{"Fleet", []string{"e", "down", "down", "down", "down", "down", "down"}, "",
			func(f *moneyFixture) string { return f.fleet().form.template }, func(f *moneyFixture) bool { return f.fleet().editing }},
	} {
		t.Run(c.view, func(t *testing.T) {
			f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
			f.show(t, c.view)
			edit(f.m, c.open...)
			if got := c.value(f); got != c.was || !c.editing(f) {
				t.Fatalf("opened on %q, editing %v", got, c.editing(f))
			}
			for _, s := range []struct {
				keys  []string
				want  string
				shown string
			}{
				{[]string{"ctrl+u", "a", "b", " ", "c", "d"}, "ab cd", "ab cd▏"},
				{[]string{"ctrl+w"}, "ab ", "ab ▏"},
				{[]string{"home", "x"}, "xab ", "x▏ab"},
				{[]string{"end", "backspace", "left", "delete"}, "xa", "xa▏"},
				{[]string{"left", "left", "right", "9"}, "x9a", "x9▏a"},
			} {
				edit(f.m, s.keys...)
				if got := c.value(f); got != s.want {
					t.Fatalf("%v: %q, want %q", s.keys, got, s.want)
				}
				if scr := ansi.Strip(f.m.View().Content); !strings.Contains(scr, s.shown) {
					t.Fatalf("%v: %q not on the screen:\n%s", s.keys, s.shown, scr)
				}
			}
			edit(f.m, "esc")
			if got := c.value(f); got != c.was || c.editing(f) {
				t.Fatalf("esc: %q, editing %v; want %q put back", got, c.editing(f), c.was)
			}
			edit(f.m, c.open...)
			edit(f.m, "ctrl+u")
			f.m.Update(tea.PasteMsg{Content: strings.Repeat("p", form.MaxLen+10)})
			if got := c.value(f); len(got) != form.MaxLen {
				t.Fatalf("pasted %d runes, want the cap %d", len(got), form.MaxLen)
			}
			edit(f.m, "z")
			if got := c.value(f); len(got) != form.MaxLen || strings.Contains(got, "z") {
				t.Fatalf("typed past the cap: %d runes", len(got))
			}
			edit(f.m, "esc")
			if got := c.value(f); got != c.was {
				t.Fatalf("esc after the cap: %q", got)
			}
		})
	}
}

// The rule prompt's figure is a form field too: cursor, ctrl+u, ctrl+w,
// digits and points only; ←/→ keep saying below or above.
func TestRulePromptEditsLikeAForm(t *testing.T) {
	ev := newWatch(t)
	m := newTestModel(t, 120, 30, Options{Watch: ev})
	press(m, "a")
	p := &m.market.prompt
	if !p.open || p.value != "0.09" {
		t.Fatalf("prompt %+v", p)
	}
	edit(m, "ctrl+u", "1", "q", "2", ".", "5", "home", "9")
	if p.value != "912.5" || !strings.Contains(ansi.Strip(m.View().Content), "is below $9▏12.5/h") {
		t.Fatalf("typed %q:\n%s", p.value, ansi.Strip(m.View().Content))
	}
	edit(m, "end", "ctrl+w")
	if p.value != "" {
		t.Fatalf("ctrl+w: %q", p.value)
	}
	edit(m, "7", "right")
	if !p.above || p.value != "7" {
		t.Fatalf("→ in a prompt with a direction: above %v value %q", p.above, p.value)
	}
	edit(m, "esc")
	if p.open {
		t.Fatal("esc left the prompt open")
	}
}

// Each form fits a narrow screen and draws its cursor without colour.
func TestFormsAtTwentyByFive(t *testing.T) {
	for _, view := range []string{"Plan", "Blocks", "Fleet"} {
		f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
		f.m.Update(tea.WindowSizeMsg{Width: 20, Height: 5})
		f.show(t, view)
		edit(f.m, "e", "down", "ctrl+u")
		f.m.Update(tea.PasteMsg{Content: strings.Repeat("long text ", 8)})
		for _, l := range strings.Split(ansi.Strip(f.m.View().Content), "\n") {
			if ansi.StringWidth(l) > 20 {
				t.Errorf("%s: a line of %d cells at 20 columns: %q", view, ansi.StringWidth(l), l)
			}
		}
		edit(f.m, "home", "esc")
	}
}

// ctrl+v would read the clipboard of the machine running gpumarket (over
// SSH, the server's) into a field on screen: no field takes it.
func TestNoFieldReadsTheServersClipboard(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	for _, open := range []struct{ view, key string }{{"Market", "/"}, {"Plan", "e"}, {"Blocks", "e"}, {"Fleet", "e"}} {
		f.show(t, open.view)
		press(f.m, open.key)
		_, cmd := f.m.Update(tea.KeyPressMsg{Code: 'v', Mod: tea.ModCtrl})
		for _, msg := range run(f.m, cmd) {
			if strings.Contains(strings.ToLower(fmt.Sprintf("%T", msg)), "paste") {
				t.Errorf("%s: ctrl+v read the clipboard (%T)", open.view, msg)
			}
		}
		press(f.m, "esc")
	}
}

// Every form's footer says what ←/→ change on a choice, and only there.
func TestFormFootersSayTheChoiceKeys(t *testing.T) {
	f := newMoneyFixture(t, RoleBooker, ledger.Budget{})
	foot := func() string {
		l := strings.Split(f.screen(), "\n")
		return l[len(l)-1]
	}
	for _, c := range []struct {
		view   string
		toText []string
		choice []string
		says   string
	}{
		{"Plan", nil, []string{"up", "up", "up", "up", "up"}, "←/→ yes/no"},
		{"Blocks", []string{"down"}, []string{"up"}, "←/→ change"},
		{"Fleet", nil, []string{"down", "down"}, "←/→ strategy"},
	} {
		f.show(t, c.view)
		edit(f.m, "e")
		edit(f.m, c.toText...)
		if got := foot(); strings.Contains(got, "←/→") {
			t.Errorf("%s on a text field: %q", c.view, got)
		}
		edit(f.m, c.choice...)
		if got := foot(); !strings.Contains(got, c.says) {
			t.Errorf("%s on a choice: %q, want %q", c.view, got, c.says)
		}
		edit(f.m, "esc")
	}
}

// A paste reaches the rule prompt's figure and the Market filter, which
// filters by it at once.
func TestPasteReachesThePromptAndTheFilter(t *testing.T) {
	ev := newWatch(t)
	m := newTestModel(t, 120, 30, Options{Watch: ev})
	press(m, "a")
	edit(m, "ctrl+u")
	m.Update(tea.PasteMsg{Content: "0.5"})
	m.Update(tea.PasteMsg{Content: "x1"})
	if p := m.market.prompt; p.value != "0.5" {
		t.Errorf("prompt after pastes: %q", p.value)
	}
	edit(m, "esc")
	all := len(shownKeys(m))
	press(m, "/")
	m.Update(tea.PasteMsg{Content: "westeurope"})
	if got := shownKeys(m); len(got) == 0 || len(got) == all || !strings.Contains(got[0], "westeurope") {
		t.Errorf("filter after a paste: %d of %d rows, first %v", len(got), all, got[:min(len(got), 1)])
	}
}

// The keys arrive as a terminal sends them (bytes through bubbletea's
// input parser): home, end, ←, ctrl+w and ctrl+u edit the Plan form.
func TestFormKeysFromTerminalBytes(t *testing.T) {
	h := startHub(t)
	keys := "\t\t\t" + "e" + "\x1b[B\x1b[B" + // Plan, its form, Hours of work (24)
		"\x1b[D\x15" + "1" + "\x1b[F 5\x17" + "7" + "\x1b[H2" + "\x03" // ← ctrl+u 1, end " 5" ctrl+w 7, home 2
	in := &slowReader{data: []byte(keys), after: 200 * time.Millisecond}
	p := tea.NewProgram(New(Options{Hub: h, Now: nowFn, NoColor: true}),
		tea.WithInput(in), tea.WithOutput(io.Discard), tea.WithWindowSize(80, 24), tea.WithoutSignals())
	final, err := p.Run()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, v := range final.(*Model).views {
		if pv, ok := v.(*planView); ok {
			if !pv.editing || pv.form.hours != "214 7" {
				t.Errorf("hours %q, editing %v; want \"214 7\" in an open form", pv.form.hours, pv.editing)
			}
			return
		}
	}
	t.Fatal("no Plan view")
}

// A rule's name keeps letters, digits, '.', '-' and '_'; anything else is a
// dash, the parts are joined by one, and the ends are trimmed.
func TestRuleNameKeepsSafeRunes(t *testing.T) {
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"spot", "p5.48xlarge", "us-west-2 (b)", "below"}, "spot-p5.48xlarge-us-west-2--b--below"},
		{[]string{"plan", "H100/H200", "8", "48h"}, "plan-H100-H200-8-48h"},
		{[]string{"_idle", "fleet", "01J"}, "idle-fleet-01J"},
		{[]string{"block", strings.Repeat("x", 80)}, "block-" + strings.Repeat("x", 50)},
	} {
		if got := ruleName(c.parts...); got != c.want {
			t.Errorf("ruleName(%q) = %q, want %q", c.parts, got, c.want)
		}
	}
}
