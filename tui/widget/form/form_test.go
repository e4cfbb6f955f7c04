package form

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// k is a key as the terminal sends it: a name ("left", "ctrl+u") or text.
func k(name string) tea.KeyPressMsg {
	codes := map[string]rune{"left": tea.KeyLeft, "right": tea.KeyRight, "home": tea.KeyHome, "end": tea.KeyEnd,
		"backspace": tea.KeyBackspace, "delete": tea.KeyDelete, "enter": tea.KeyEnter, "esc": tea.KeyEscape,
		"tab": tea.KeyTab, "up": tea.KeyUp, "down": tea.KeyDown}
	if c, ok := codes[name]; ok {
		return tea.KeyPressMsg{Code: c}
	}
	switch {
	case name == "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case name == "shift+tab":
		return tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	case strings.HasPrefix(name, "ctrl+"):
		return tea.KeyPressMsg{Code: rune(name[5]), Mod: tea.ModCtrl}
	case strings.HasPrefix(name, "alt+"):
		return tea.KeyPressMsg{Code: codes[name[4:]], Mod: tea.ModAlt}
	}
	return tea.KeyPressMsg{Code: []rune(name)[0], Text: name}
}

func send(m *Model, keys ...string) Result {
	r := Editing
	for _, s := range keys {
		r = m.Update(k(s))
	}
	return r
}

func typeText(m *Model, s string) {
	for _, r := range s {
		m.Update(k(string(r)))
	}
}

// Every editing key, on one text field, with what it leaves and where the
// cursor is drawn.
func TestEditingKeys(t *testing.T) {
	for _, c := range []struct {
		start string
		keys  []string
		want  string
	}{
		{"abc", nil, "abc▏"},
		{"abc", []string{"left"}, "ab▏c"},
		{"abc", []string{"left", "left", "X"}, "aX▏bc"},
		{"abc", []string{"left", "left", "left", "left"}, "▏abc"},
		{"abc", []string{"right"}, "abc▏"},
		{"abc", []string{"home"}, "▏abc"},
		{"abc", []string{"home", "end"}, "abc▏"},
		{"abc", []string{"ctrl+a"}, "▏abc"},
		{"abc", []string{"ctrl+a", "ctrl+e"}, "abc▏"},
		{"abc", []string{"home", "right", "Z"}, "aZ▏bc"},
		{"abc", []string{"backspace"}, "ab▏"},
		{"abc", []string{"left", "backspace"}, "a▏c"},
		{"abc", []string{"home", "backspace"}, "▏abc"},
		{"abc", []string{"home", "delete"}, "▏bc"},
		{"abc", []string{"ctrl+h"}, "ab▏"},
		{"Thu 14:00", []string{"left", "left", "ctrl+u"}, "▏00"},
		{"Thu 14:00", []string{"home", "right", "ctrl+k"}, "T▏"},
		{"Thu 14:00", []string{"ctrl+w"}, "Thu ▏"},
		{"Thu 14:00", []string{"ctrl+w", "ctrl+w"}, "▏"},
		{"Thu 14:00", []string{"alt+backspace"}, "Thu ▏"},
		{"Thu 14:00", []string{"alt+left", "X"}, "Thu X▏14:00"},
		{"a", []string{"space", "b"}, "a b▏"},
		{"", []string{"+", "2", "h"}, "+2h▏"},
		{"abc", []string{"ctrl+v"}, "abc▏"}, // no clipboard: over SSH it is the server's
	} {
		v := c.start
		m := New(Text("F", &v))
		if r := send(&m, c.keys...); r != Editing {
			t.Errorf("%q %v: result %v", c.start, c.keys, r)
		}
		if got := m.Show(0, 80); got != c.want {
			t.Errorf("%q %v: shows %q, want %q", c.start, c.keys, got, c.want)
		}
		if want := strings.Replace(c.want, Cursor, "", 1); v != want {
			t.Errorf("%q %v: value %q, want %q", c.start, c.keys, v, want)
		}
	}
}

func TestFieldsAndSubmit(t *testing.T) {
	a, b, c := "1", "2", "3"
	m := New(Text("A", &a), Text("B", &b), Text("C", &c))
	for _, s := range []struct {
		key   string
		focus int
	}{{"tab", 1}, {"down", 2}, {"down", 0}, {"up", 2}, {"shift+tab", 1}} {
		send(&m, s.key)
		if m.Focus() != s.focus {
			t.Fatalf("%s: focus %d, want %d", s.key, m.Focus(), s.focus)
		}
	}
	send(&m, "9")
	if r := send(&m, "enter"); r != Submit || b != "29" {
		t.Errorf("enter: %v, b %q", r, b)
	}
	// The cursor of a field entered again is at its end.
	send(&m, "home", "down", "up", "x")
	if b != "29x" {
		t.Errorf("after moving away and back: %q", b)
	}
	if m.Len() != 3 || m.Label(1) != "B" {
		t.Errorf("Len %d Label %q", m.Len(), m.Label(1))
	}
}

// esc puts back every field, choices too, as they were when the form
// opened, however many times enter was pressed in between.
func TestEscRestoresEveryField(t *testing.T) {
	a, n, on, g := "8", 1, false, "H100"
	m := New(Text("A", &a), Choice("N", []string{"x", "y", "z"}, &n), Toggle("On", "no", "yes", &on),
		Pick("GPU", []string{"H100", "H200"}, &g))
	send(&m, "ctrl+u", "1", "6", "enter", "down", "right", "down", "y", "down", "right")
	if a != "16" || n != 2 || !on || g != "H200" {
		t.Fatalf("edited: %q %d %v %q", a, n, on, g)
	}
	if r := send(&m, "esc"); r != Cancel || a != "8" || n != 1 || on || g != "H100" {
		t.Errorf("esc: %v %q %d %v %q", r, a, n, on, g)
	}
	if m.Show(3, 20) != "H100"+Cursor {
		t.Errorf("shown after esc: %q", m.Show(3, 20))
	}
}

// esc puts back a value no option names, and a cursor left inside one
// field is at the end of the next, even one holding the same text.
func TestEscKeepsAnUnknownChoiceAndFocusEndsTheCursor(t *testing.T) {
	g := "V100"
	a, b := "15m", "15m"
	m := New(Pick("GPU", []string{"A100", "H100"}, &g), Text("A", &a), Text("B", &b))
	send(&m, "right")
	if g != "H100" {
		t.Fatalf("right from an unknown: %q", g)
	}
	send(&m, "down", "home", "down", "x")
	if a != "15m" || b != "15mx" {
		t.Errorf("typed after moving: a %q b %q", a, b)
	}
	send(&m, "esc")
	if g != "V100" || b != "15m" {
		t.Errorf("esc: %q %q", g, b)
	}
}

func TestChoiceKeys(t *testing.T) {
	opts := []string{"price-capacity-optimized", "capacity-optimized", "lowest-price", "diversified"}
	i := 0
	m := New(Choice("Strategy", opts, &i))
	if !m.OnChoice() {
		t.Fatal("OnChoice on a choice")
	}
	for _, c := range []struct {
		key  string
		want int
	}{{"right", 1}, {"space", 2}, {"left", 1}, {"left", 0}, {"left", 3}, {"right", 0},
		{"l", 2}, {"d", 3}, {"c", 1}, {"P", 0}, {"q", 0}, {"backspace", 0}, {"ctrl+u", 0}} {
		send(&m, c.key)
		if i != c.want {
			t.Fatalf("%s: %d, want %d", c.key, i, c.want)
		}
	}
	// A typed letter steps through the options it starts.
	g := "H100"
	m = New(Pick("GPU", []string{"A100", "H100", "H200", "L40S"}, &g))
	send(&m, "h")
	if g != "H200" {
		t.Errorf("h from H100: %q", g)
	}
	send(&m, "h")
	if g != "H100" {
		t.Errorf("h from H200: %q", g)
	}
	unknown := "V100"
	m = New(Pick("GPU", []string{"A100", "H100"}, &unknown))
	if m.Show(0, 10) != "A100"+Cursor {
		t.Errorf("an unknown value shows %q", m.Show(0, 10))
	}
	on := true
	m = New(Toggle("Checkpointable", "no", "yes", &on))
	for _, c := range []struct {
		key  string
		want bool
	}{{"n", false}, {"n", false}, {"y", true}, {"space", false}, {"right", true}, {"left", false}} {
		send(&m, c.key)
		if on != c.want {
			t.Fatalf("%s: %v", c.key, on)
		}
	}
}

// One cap for every text field: typing and pasting stop at MaxLen, a
// longer value the host gave is kept and can still be cut.
func TestLengthCap(t *testing.T) {
	v := ""
	m := New(Text("Template", &v))
	typeText(&m, strings.Repeat("a", MaxLen+5))
	if len(v) != MaxLen {
		t.Fatalf("typed to %d runes, want %d", len(v), MaxLen)
	}
	send(&m, "backspace", "backspace")
	m.Update(tea.PasteMsg{Content: "xyz"})
	if len(v) != MaxLen || !strings.HasSuffix(v, "xy") {
		t.Errorf("paste into 2 free runes: %d %q", len(v), v[len(v)-4:])
	}
	long := strings.Repeat("r,", MaxLen)
	m = New(Text("Regions", &long))
	send(&m, "x")
	if len(long) != 2*MaxLen {
		t.Errorf("a typed rune grew an over-long value to %d", len(long))
	}
	send(&m, "backspace")
	if len(long) != 2*MaxLen-1 {
		t.Errorf("backspace on an over-long value: %d", len(long))
	}
	multi := ""
	m = New(Text("F", &multi))
	m.Update(tea.PasteMsg{Content: "a\tb\nc"})
	if multi != "a b c" {
		t.Errorf("pasted tabs and newlines: %q", multi)
	}
}

func TestOnly(t *testing.T) {
	v := "0.09"
	m := New(Text("Price", &v).Only(func(s string) bool { return strings.Trim(s, "0123456789.") == "" }))
	send(&m, "q", "x", "space", "5")
	if v != "0.095" {
		t.Errorf("typed into a figure: %q", v)
	}
	m.Update(tea.PasteMsg{Content: "12a"})
	m.Update(tea.PasteMsg{Content: "1"})
	if v != "0.0951" {
		t.Errorf("pasted into a figure: %q", v)
	}
}

// The host may change a bound value while the form is open (a seed from
// another view): the next key edits the new value.
func TestHostChangesAreSeen(t *testing.T) {
	v := "H100"
	m := New(Text("Models", &v))
	send(&m, "left")
	v = "H200,A100"
	if got := m.Show(0, 40); got != "H200,A100"+Cursor {
		t.Errorf("shown after the host's change: %q", got)
	}
	send(&m, "x")
	if v != "H200,A100x" {
		t.Errorf("typed after the host's change: %q", v)
	}
	short := strings.Repeat("s", MaxLen-1)
	m = New(Text("T", &short))
	short = "s"
	m.Update(tea.PasteMsg{Content: "abc"})
	if short != "sabc" {
		t.Errorf("a paste measured against the value before the host's change: %q", short)
	}
}

func TestShowPlaceholder(t *testing.T) {
	start, end := "", "  "
	m := New(Text("Start", &start).Empty("now"), Text("End", &end).Empty("never"))
	if got := m.Show(0, 20); got != Cursor+"now" {
		t.Errorf("focused empty: %q", got)
	}
	if got := m.Show(1, 20); got != "never" {
		t.Errorf("blank, not focused: %q", got)
	}
	send(&m, "down")
	if got := m.Show(1, 20); got != "  "+Cursor {
		t.Errorf("blank, focused: %q", got)
	}
	if got := m.Show(0, 20); got != "now" {
		t.Errorf("empty, not focused: %q", got)
	}
}

// A text wider than its room is cut around the cursor, which is always
// drawn, and never overflows the room.
func TestShowKeepsTheCursorInSight(t *testing.T) {
	text := "us-east-1,us-west-2,eastus,westus2,北京,europe-west4"
	n := len([]rune(text))
	for width := 0; width <= 60; width++ {
		for pos := 0; pos <= n; pos++ {
			v := text
			m := New(Text("R", &v))
			send(&m, "home")
			for range pos {
				send(&m, "right")
			}
			got := m.Show(0, width)
			if w := ansi.StringWidth(got); w > max(width, 2) {
				t.Fatalf("width %d pos %d: %q is %d wide", width, pos, got, w)
			}
			if strings.Count(got, Cursor) != 1 {
				t.Fatalf("width %d pos %d: %q", width, pos, got)
			}
			if pos == 0 && !strings.HasPrefix(got, Cursor) {
				t.Fatalf("width %d: the cursor at the start shows %q", width, got)
			}
			before := strings.TrimPrefix(strings.Split(got, Cursor)[0], "…")
			if r := []rune(text); !strings.HasSuffix(string(r[:pos]), before) {
				t.Fatalf("width %d pos %d: %q does not end where the cursor is", width, pos, got)
			}
			if after := strings.TrimSuffix(strings.Split(got, Cursor)[1], "…"); width >= 12 && pos < n-3 && after == "" {
				t.Fatalf("width %d pos %d: %q hides what follows the cursor", width, pos, got)
			}
		}
	}
	v := strings.Repeat("x", 30)
	m := New(Text("R", &v))
	if got := m.Show(0, 10); got != "…"+strings.Repeat("x", 7)+Cursor {
		t.Errorf("cursor at the end of a long text: %q", got)
	}
}

func TestEmptyForm(t *testing.T) {
	m := New()
	if r := send(&m, "x", "enter", "esc"); r != Editing || m.OnChoice() {
		t.Errorf("an empty form: %v", r)
	}
	m.SetFocus(3)
	if m.Show(0, 9) != "" || m.Value(0) != "" || m.Label(0) != "" {
		t.Error("an empty form shows a field")
	}
}
