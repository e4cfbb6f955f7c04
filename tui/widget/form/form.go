// Package form is the one editor of the TUI's forms: the same keys, cap and
// esc in each (docs/DESIGN.md, The TUI).
package form

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// MaxLen is the most runes typed into a field: an AWS launch template name.
const MaxLen = 128

// Cursor is drawn where the next rune goes: it shows without colour.
const Cursor = "▏"

// Result says what a key did to the form.
type Result int

const (
	Editing Result = iota // the form stays open
	Submit                // enter: the host checks the values
	Cancel                // esc: every value is back as the form opened on it
)

// Field is one line of a form: a text, or a choice among options.
type Field struct {
	label, placeholder string
	accept             func(string) bool
	text               *string
	options            []string
	get                func() int
	set                func(int)
	keep               func() func() // returns what puts the value back
}

// Text is a text field editing *p.
func Text(label string, p *string) Field { return Field{label: label, text: p, keep: keep(p)} }

func keep[T any](p *T) func() func() {
	return func() func() {
		v := *p
		return func() { *p = v }
	}
}

// Empty is what the field shows when empty: what empty means.
func (f Field) Empty(placeholder string) Field {
	f.placeholder = placeholder
	return f
}

// Only keeps typed or pasted text that ok accepts, whole.
func (f Field) Only(ok func(string) bool) Field {
	f.accept = ok
	return f
}

// Choice is a field choosing options[*p].
func Choice(label string, options []string, p *int) Field {
	return Field{label: label, options: options, keep: keep(p),
		get: func() int { return *p }, set: func(i int) { *p = i }}
}

// Pick is a field choosing *p among options, an unknown one read as the first.
func Pick(label string, options []string, p *string) Field {
	return Field{label: label, options: options, keep: keep(p),
		get: func() int { return max(0, slices.Index(options, *p)) }, set: func(i int) { *p = options[i] }}
}

// Toggle is a field choosing between off and on.
func Toggle(label, off, on string, p *bool) Field {
	return Field{label: label, options: []string{off, on}, keep: keep(p),
		get: func() int {
			if *p {
				return 1
			}
			return 0
		},
		set: func(i int) { *p = i == 1 }}
}

func (f Field) choice() bool { return f.text == nil }

func (f Field) index() int {
	if len(f.options) == 0 {
		return 0
	}
	return ((f.get() % len(f.options)) + len(f.options)) % len(f.options)
}

// Model is an open form, editing its fields' values in place.
type Model struct {
	fields []Field
	focus  int
	saved  []func()
	input  textinput.Model // without ctrl+v: over SSH, the server's clipboard
}

// New opens a form on fields, remembering their values for esc.
func New(fields ...Field) Model {
	m := Model{fields: fields, input: textinput.New()}
	m.input.SetVirtualCursor(false)
	m.input.Focus()
	km := &m.input.KeyMap
	for _, b := range []*key.Binding{&km.Paste, &km.AcceptSuggestion, &km.NextSuggestion, &km.PrevSuggestion} {
		*b = key.NewBinding()
		b.SetEnabled(false)
	}
	for _, f := range fields {
		m.saved = append(m.saved, f.keep())
	}
	m.SetFocus(0)
	return m
}

// Focus is the index of the focused field.
func (m Model) Focus() int { return m.focus }

// SetFocus focuses field i, its cursor at the end.
func (m *Model) SetFocus(i int) {
	if len(m.fields) == 0 {
		return
	}
	m.focus = ((i % len(m.fields)) + len(m.fields)) % len(m.fields)
	if f := m.fields[m.focus]; !f.choice() {
		m.input.SetValue(*f.text)
		m.input.CursorEnd()
	}
}

// Len is the number of fields.
func (m Model) Len() int { return len(m.fields) }

// Label is field i's label.
func (m Model) Label(i int) string {
	if i < 0 || i >= len(m.fields) {
		return ""
	}
	return m.fields[i].label
}

// OnChoice says the focused field is a choice (←/→ change it).
func (m Model) OnChoice() bool { return len(m.fields) > 0 && m.fields[m.focus].choice() }

// load takes the focused value into the input: the host may have changed it.
func (m *Model) load() {
	if len(m.fields) == 0 || m.fields[m.focus].choice() {
		return
	}
	if v := *m.fields[m.focus].text; v != m.input.Value() {
		m.input.SetValue(v)
		m.input.CursorEnd()
	}
}

// Update takes a key or a paste.
func (m *Model) Update(msg tea.Msg) Result {
	if len(m.fields) == 0 {
		return Editing
	}
	m.load()
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		return m.key(msg)
	case tea.PasteMsg:
		if f := m.fields[m.focus]; !f.choice() {
			msg.Content = m.room(f, msg.Content)
			m.edit(msg)
		}
	}
	return Editing
}

func (m *Model) key(msg tea.KeyPressMsg) Result {
	f := m.fields[m.focus]
	switch s := msg.String(); s {
	case "esc":
		for _, put := range m.saved {
			put()
		}
		m.load()
		return Cancel
	case "enter":
		return Submit
	case "tab", "down":
		m.SetFocus(m.focus + 1)
	case "shift+tab", "up":
		m.SetFocus(m.focus - 1)
	default:
		if f.choice() {
			m.choose(f, s, msg.Text)
			return Editing
		}
		if m.typed(msg) {
			if msg.Text = m.room(f, msg.Text); msg.Text == "" {
				return Editing
			}
		}
		m.edit(msg)
	}
	return Editing
}

// choose steps a choice, or goes to the next option starting with a letter.
func (m *Model) choose(f Field, s, text string) {
	n, i := len(f.options), f.index()
	switch {
	case n == 0:
	case s == "left":
		f.set((i + n - 1) % n)
	case s == "right" || s == "space":
		f.set((i + 1) % n)
	case len([]rune(text)) == 1:
		r := unicode.ToLower([]rune(text)[0])
		for k := 1; k <= n; k++ {
			if o := []rune(f.options[(i+k)%n]); len(o) > 0 && unicode.ToLower(o[0]) == r {
				f.set((i + k) % n)
				return
			}
		}
	}
}

// typed says the key inserts its text rather than edit or move.
func (m *Model) typed(msg tea.KeyPressMsg) bool {
	km := m.input.KeyMap
	for _, b := range []key.Binding{km.CharacterForward, km.CharacterBackward, km.WordForward, km.WordBackward,
		km.DeleteWordBackward, km.DeleteWordForward, km.DeleteAfterCursor, km.DeleteBeforeCursor,
		km.DeleteCharacterBackward, km.DeleteCharacterForward, km.LineStart, km.LineEnd} {
		if key.Matches(msg, b) {
			return false
		}
	}
	return msg.Text != ""
}

// room is what of text the field takes, to MaxLen; a longer value is not grown.
func (m *Model) room(f Field, text string) string {
	if f.accept != nil && !f.accept(text) {
		return ""
	}
	r := []rune(text)
	return string(r[:min(len(r), max(0, MaxLen-len([]rune(m.input.Value()))))])
}

func (m *Model) edit(msg tea.Msg) {
	m.input, _ = m.input.Update(msg)
	if f := m.fields[m.focus]; *f.text != m.input.Value() {
		*f.text = m.input.Value()
	}
}

// Value is field i shown without the cursor; an empty text shows Empty's.
func (m Model) Value(i int) string {
	if i < 0 || i >= len(m.fields) {
		return ""
	}
	f := m.fields[i]
	switch {
	case !f.choice() && strings.TrimSpace(*f.text) == "" && f.placeholder != "":
		return f.placeholder
	case !f.choice():
		return *f.text
	case len(f.options) > 0:
		return f.options[f.index()]
	}
	return ""
}

// Show is Value with the cursor on the focused field, in sight in width cells.
func (m Model) Show(i, width int) string {
	if i < 0 || i >= len(m.fields) {
		return ""
	}
	f := m.fields[i]
	switch {
	case i != m.focus:
		return m.Value(i)
	case f.choice():
		return m.Value(i) + Cursor
	}
	m.load()
	r, pos := []rune(m.input.Value()), m.input.Position()
	if len(r) == 0 {
		return Cursor + f.placeholder
	}
	return window(r, pos, width)
}

// window cuts r around the cursor, a third of the room kept for what follows.
func window(r []rune, pos, width int) string {
	head, tail := string(r[:pos]), string(r[pos:])
	if ansi.StringWidth(head)+ansi.StringWidth(tail)+1 <= width {
		return head + Cursor + tail
	}
	if width < 4 && pos == 0 {
		return Cursor + "…"
	} else if width < 4 {
		return "…" + Cursor
	}
	room := width - 3 // the cursor and an ellipsis each side
	h, keep := head, room-ansi.StringWidth(ansi.Truncate(tail, room/3, ""))
	for ansi.StringWidth(h) > keep {
		_, size := utf8.DecodeRuneInString(h)
		h = h[size:]
	}
	t := ansi.Truncate(tail, room-ansi.StringWidth(h), "")
	if h != head {
		h = "…" + h
	}
	if t != tail {
		t += "…"
	}
	return h + Cursor + t
}
