package tui

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/tui/widget/form"
	"github.com/gpumarket/gpumarket/watch"
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

// view is the open form w wide: every formLine (the focused one in the
// cursor style, its hint under them), the form's keys and its error.
func (o *openForm) view(st *styles, lw, w int, hint, keys string) string {
	var b strings.Builder
	for i := range o.edit.Len() {
		line := fit(formLine(&o.edit, i, lw, w), w, false)
		if i == o.edit.Focus() {
			line = st.cursor.Render(line)
		}
		b.WriteString(line + "\n")
	}
	b.WriteString(st.cursor.Render(wordwrap(o.edit.Label(o.edit.Focus())+": "+hint, w)) + "\n")
	b.WriteString(st.dim.Render(wordwrap(keys, w)))
	if o.formErr != "" {
		b.WriteString("\n" + st.footerErr.Render(wordwrap(o.formErr, w)))
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

// rulePrompt asks the one figure a rule made with a needs.
type rulePrompt struct {
	open          bool
	what          string // the subject: "spot p5.48xlarge in us-west-2a"
	unit, now     string // "/h" after the figure; now the current value
	toggle, above bool   // toggle offers above as well as below
	value         string
	edit          form.Model
	err           string
	build         func(above bool, v float64) watch.Spec
}

// offer opens the prompt build makes, once the session may make rules; its
// figure takes digits and points only.
func (p *rulePrompt) offer(c *common, build func() (*rulePrompt, tea.Cmd)) tea.Cmd {
	if err := c.canMakeRules(); err != nil {
		return notifyErrHere(err)
	}
	q, why := build()
	if q == nil {
		return why
	}
	*p = *q
	p.open = true
	p.edit = form.New(form.Text("", &p.value).Only(func(t string) bool { return strings.Trim(t, "0123456789.") == "" }))
	return nil
}

func (p *rulePrompt) paste(msg tea.PasteMsg) {
	if p.open {
		p.edit.Update(msg)
	}
}

// promptKeys are the footer's while a rule's figure is typed.
func promptKeys(toggle bool) keyMap {
	below := key.NewBinding(key.WithKeys("left", "right"), key.WithHelp("←/→", "below/above"))
	below.SetEnabled(toggle)
	return keyList(key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "save rule")), below,
		key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")))
}

// update: enter saves; ←/→ and space pick below or above where both apply.
func (p *rulePrompt) update(c *common, msg tea.KeyPressMsg) tea.Cmd {
	if s := msg.String(); p.toggle && (s == "left" || s == "right" || s == "space") {
		p.above = !p.above
		return nil
	}
	switch p.edit.Update(msg) {
	case form.Cancel:
		*p = rulePrompt{}
	case form.Submit:
		v, err := strconv.ParseFloat(strings.TrimSpace(p.value), 64)
		switch {
		case p.unit == "%" && (err != nil || v < 0 || v >= 100):
			p.err = fmt.Sprintf("%q: want a percentage from 0 to 99 such as 40", p.value)
			return nil
		case p.unit != "%" && (err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v)):
			p.err = fmt.Sprintf("%q: want a price above 0 such as 18.50", p.value)
			return nil
		}
		w := p.build(p.above, v)
		w.MadeBy = c.actor
		*p = rulePrompt{}
		return saveRule(c.watch, w)
	}
	return nil
}

func (p *rulePrompt) view(st *styles, w int) string {
	if p.err != "" {
		return st.footerErr.Render(fit(p.err, w, false))
	}
	return st.cursor.Render(fit(p.text(), w, false))
}

// lines wraps the prompt: a plan rule's job takes words to say.
func (p *rulePrompt) lines(st *styles, w int) []string {
	style, text := st.cursor, p.text()
	if p.err != "" {
		style, text = st.footerErr, p.err
	}
	out := strings.Split(wordwrap(text, w), "\n")
	for i := range out {
		out[i] = style.Render(out[i])
	}
	return out
}

func (p *rulePrompt) text() string {
	dir := "below"
	if p.above {
		dir = "above"
	}
	if p.unit == "/GPU-h" {
		dir = "at most"
	}
	value := p.edit.Show(0, form.MaxLen)
	line := fmt.Sprintf("alert when %s is %s $%s%s", p.what, dir, value, p.unit)
	if p.unit == "%" {
		line = fmt.Sprintf("alert when %s is more than %s%% idle", p.what, value)
	}
	if p.now != "" {
		line += " (" + p.now + ")"
	}
	return line
}

// ruleName is a rule's name made from its parts: "spot-p5.48xlarge-us-west-2a".
func ruleName(parts ...string) string {
	s := strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, strings.Join(parts, "-")), "-._")
	if len(s) > 56 { // room for AddRule's "-2"
		s = s[:56]
	}
	return s
}
