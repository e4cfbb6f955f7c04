package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/tui/widget/form"
)

// openForm is a view's form: open or not, the widget, the error beside it.
type openForm struct {
	editing bool
	edit    form.Model
	formErr string
}

// footer is the open form's keys; ←/→ say what they change on a choice.
func (o *openForm) footer(choice, submit, back string) keyMap {
	change := key.NewBinding(key.WithKeys("left", "right"), key.WithHelp("←/→", choice))
	change.SetEnabled(o.edit.OnChoice())
	return keyList(key.NewBinding(key.WithKeys("tab", "up", "down"), key.WithHelp("tab/↑/↓", "field")), change,
		key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", submit)), key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", back)))
}

func (o *openForm) open(fields []form.Field) { o.editing, o.edit = true, form.New(fields...) }

// formKey runs a key of the open form; it stays open beside submit's formErr.
func (o *openForm) formKey(msg tea.KeyPressMsg, submit func() tea.Cmd) tea.Cmd {
	switch o.edit.Update(msg) {
	case form.Cancel:
		o.editing, o.formErr = false, ""
	case form.Submit:
		cmd := submit()
		o.editing = o.formErr != ""
		return cmd
	}
	return nil
}

func (o *openForm) paste(msg tea.PasteMsg) {
	if o.editing {
		o.edit.Update(msg)
	}
}

// formLine is field i: its label in lw cells, its value in the rest of w.
func formLine(f *form.Model, i, lw, w int) string {
	return fmt.Sprintf("%-*s %s", lw, f.Label(i), f.Show(i, w-lw-1))
}

// formRows are every formLine w wide, the focused one in the cursor style.

func formRows(f *form.Model, st *styles, lw, w int) string {
	var b strings.Builder
	for i := range f.Len() {
		line := fit(formLine(f, i, lw, w), w, false)
		if i == f.Focus() {
			line = st.cursor.Render(line)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// actingView is what Blocks and Plan share: a form, a rule prompt, a box.
type actingView struct {
	base
	openForm
	snap    *feed.Snapshot
	confirm confirmation
	prompt  rulePrompt
}

func (v *actingView) capturing() bool    { return v.editing || v.prompt.open }
func (v *actingView) box() *confirmation { return &v.confirm }

// keyMap is the prompt's keys, else the open form's, else keys.
func (v *actingView) keyMap(keys help.KeyMap, choice, submit, back string) help.KeyMap {
	switch {
	case v.prompt.open:
		return promptKeys(false)
	case v.editing:
		return v.footer(choice, submit, back)
	}
	return keys
}

// update: msg by the box; keys to the open form, the prompt or onKey.
func (v *actingView) update(msg tea.Msg, submit func() tea.Cmd, onKey func(tea.KeyPressMsg) tea.Cmd, other func(tea.Msg) tea.Cmd) tea.Cmd {
	msg, cmd := v.confirm.update(msg)
	switch msg := msg.(type) {
	case snapshotMsg:
		v.snap = msg.snap
	case tea.PasteMsg:
		v.paste(msg)
		v.prompt.paste(msg)
	case tea.KeyPressMsg:
		switch {
		case v.editing:
			return tea.Batch(cmd, v.formKey(msg, submit))
		case v.prompt.open:
			return tea.Batch(cmd, v.prompt.update(v.c, msg))
		}
		return tea.Batch(cmd, onKey(msg))
	default:
		return tea.Batch(cmd, other(msg))
	}
	return cmd
}
