package tui

import (
	"charm.land/bubbles/v2/help"
	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/feed"
)

// actingView is what Blocks and Plan share: a form, a rule prompt, a box.
type actingView struct {
	openForm
	c       *common
	w, h    int
	snap    *feed.Snapshot
	confirm confirmation
	prompt  rulePrompt
}

func (v *actingView) SetSize(w, h int)   { v.w, v.h = w, h }
func (v *actingView) capturing() bool    { return v.editing || v.prompt.open }
func (v *actingView) box() *confirmation { return &v.confirm }
func (v *actingView) escGoesHome()       {}

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
