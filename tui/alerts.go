package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/present"
	"github.com/gpumarket/gpumarket/watch"
)

// Each session subscribes to the process's one evaluator (docs/DESIGN.md).

type (
	// alertsMsg wakes the session: the evaluator has new alerts.
	alertsMsg struct{}
	// alertsClosedMsg says the subscription ended.
	alertsClosedMsg struct{}
	// newAlertsMsg gives the views the alerts the session was just told.
	newAlertsMsg struct{ alerts []watch.Alert }
	// alertsSeenMsg: the Alerts view was shown, so the badge clears.
	alertsSeenMsg struct{}
	// alertsLoad is the Alerts view's read.
	alertsLoad struct {
		recs  []watch.Record
		rules []watch.RuleStatus
	}
	// rulesChangedMsg follows a rule made or deleted (deleted) in this session.
	rulesChangedMsg struct{ deleted string }
)

// waitAlerts waits for the evaluator's next wake-up; the root re-arms it.
func waitAlerts(ch <-chan struct{}) tea.Cmd {
	return func() tea.Msg {
		if _, ok := <-ch; !ok {
			return alertsClosedMsg{}
		}
		return alertsMsg{}
	}
}

// initAlerts subscribes; alerts older than the session are not news.
func (m *Model) initAlerts() tea.Cmd {
	w := m.opt.Watch
	if w == nil || m.alertSub != nil {
		return nil
	}
	m.alertSeen = w.LastID()
	m.alertSub = w.Subscribe(m.opt.Context)
	return waitAlerts(m.alertSub)
}

// onAlerts takes the untold alerts: a bell where asked, the badge unless the
// Alerts view is on screen, and the news to the views.
func (m *Model) onAlerts() tea.Cmd {
	news := m.opt.Watch.Alerts(m.alertSeen)
	var cmds []tea.Cmd
	if m.alertSub != nil {
		cmds = append(cmds, waitAlerts(m.alertSub))
	}
	if len(news) == 0 {
		return tea.Batch(cmds...)
	}
	m.alertSeen = news[len(news)-1].ID
	_, looking := m.views[m.active].(*alertsView) // on screen, they are seen
	for _, a := range news {
		if !a.Tells(watch.TellTUI) {
			continue
		}
		cmds = append(cmds, tea.Raw(bell)) // the terminal bell: BEL, as a string
		if !looking {
			m.unseen++
		}
	}
	return tea.Batch(append(cmds, m.broadcast(newAlertsMsg{alerts: news}))...)
}

// tea.Raw prints with fmt.Sprint: the bell must be a string, not ansi.BEL.
const bell = "\a"

// alertBadge is the header's count of unseen alerts, "" when none.
func (m *Model) alertBadge(short bool) string {
	if m.unseen == 0 {
		return ""
	}
	st := &m.c.styles
	text := fmt.Sprintf(" %d new %s ", m.unseen, map[bool]string{true: "alert", false: "alerts"}[m.unseen == 1])
	if short {
		text = fmt.Sprintf(" ⚑%d ", m.unseen)
	}
	if st.noColor {
		return "[" + strings.TrimSpace(text) + "]"
	}
	return st.badgeErr.Render(text)
}

type alertsKeys struct {
	listKeys
	Rules, Delete key.Binding
}

// alertsView lists the alerts, newest first, with their deliveries; R shows
// the rules, where x deletes one made in the TUI.
type alertsView struct {
	base
	loader // reads overlap: the latest answers
	ev     *watch.Evaluator
	keys   alertsKeys

	recs      []watch.Record
	rules     []watch.RuleStatus
	rulesMode bool
	cur       int
}

func newAlertsView(c *common, ctx context.Context, ev *watch.Evaluator) *alertsView {
	k := alertsKeys{
		Rules:  key.NewBinding(key.WithKeys("R"), key.WithHelp("R", "alerts ↔ rules")),
		Delete: key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "delete rule")),
	}
	k.listKeys = newListKeys(&c.keys, true, []key.Binding{k.Rules, k.Delete}, nil)
	return &alertsView{base: base{c: c, ctx: ctx}, ev: ev, keys: k}
}

func (v *alertsView) Title() string       { return "Alerts" }
func (v *alertsView) KeyMap() help.KeyMap { return v.keys }
func (v *alertsView) slashFiltersMarket() {}

func (v *alertsView) helpNote() string {
	file := v.ev.RulesFile()
	if v.c.role == RoleViewer {
		// The data dir is the operator's business, not a workshop attendee's.
		file = "the server's data dir (watch-rules.yaml)"
	}
	return "Rules come from the config's watch: list and from a in the Market (a spot rule for the row), Blocks (a block rule for the search) and Plan (a plan rule for the job); " +
		"those made here are saved in " + file + ". Each rule tells at most one alert per cooldown, a price rule once per crossing. " +
		"`gpumarket watch` evaluates the same rules headless."
}

func (v *alertsView) shown() tea.Cmd {
	return tea.Batch(v.load(), func() tea.Msg { return alertsSeenMsg{} })
}

func (v *alertsView) load() tea.Cmd {
	ev := v.ev
	return load(&v.loader, &v.owner, v.ctx, func(ctx context.Context) (alertsLoad, error) {
		recs, err := ev.History(ctx, 200)
		return alertsLoad{recs: recs, rules: ev.Rules()}, err
	})
}

func (v *alertsView) Update(msg tea.Msg) (view, tea.Cmd) {
	switch msg := msg.(type) {
	case loadedMsg[alertsLoad]:
		if v.took(msg.seq, msg.err, v.c.now()) {
			v.recs, v.rules = msg.val.recs, msg.val.rules
			v.cur = min(v.cur, max(v.rows()-1, 0))
		}
	case rulesChangedMsg:
		if msg.deleted != "" {
			// x asks nothing first: say what went, and how to make it again.
			return v, tea.Batch(v.load(), notifyHere("deleted rule "+msg.deleted+" (its alerts stay listed); a in the Market, Blocks or Plan view makes one again"))
		}
		return v, v.load()
	case newAlertsMsg:
		return v, v.load()
	case tea.KeyPressMsg:
		return v, v.updateKey(msg)
	}
	return v, nil
}

func (v *alertsView) rows() int {
	if v.rulesMode {
		return len(v.rules)
	}
	return len(v.recs)
}

func (v *alertsView) updateKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case v.keys.move(msg, &v.cur, v.rows()):
	case key.Matches(msg, v.keys.Rules):
		v.rulesMode, v.cur = !v.rulesMode, 0
		return v.load()
	case key.Matches(msg, v.keys.Delete):
		if !v.rulesMode {
			return notifyHere("R shows the rules; x deletes the one under the cursor")
		}
		if v.c.role == RoleViewer {
			return notifyErrHere(errors.New("read-only session: only a booker may delete rules"))
		}
		if v.cur >= len(v.rules) {
			return nil
		}
		r, ev := v.rules[v.cur], v.ev
		if r.From == watch.FromConfig {
			return notifyErrHere(fmt.Errorf("rule %s is in the config file %s: edit it there", r.Name, r.File))
		}
		return v.task(func() tea.Msg {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := ev.RemoveRule(ctx, r.Name); err != nil {
				return noticeMsg{text: "rule not deleted: " + err.Error(), err: true}
			}
			return rulesChangedMsg{deleted: r.Name}
		})
	}
	return nil
}

func (v *alertsView) View() string {
	st := &v.c.styles
	var b strings.Builder
	fromFile := 0
	for _, r := range v.rules {
		if r.From == watch.FromRulesFile {
			fromFile++
		}
	}
	summary := fmt.Sprintf("%s (%d in the config, %d made here) · %s", plural(len(v.rules), "rule"), len(v.rules)-fromFile, fromFile, plural(len(v.recs), "alert"))
	if v.rulesMode {
		summary += " · showing the rules (R: alerts)"
	} else {
		summary += " · R: the rules"
	}
	b.WriteString(st.dim.Render(fit(summary, v.w, false)))
	if v.err != "" {
		b.WriteString("\n" + st.footerErr.Render(ansi.Wordwrap(v.err, v.w, "")))
	}
	if v.rulesMode {
		v.viewRules(&b)
	} else {
		v.viewAlerts(&b)
	}
	return b.String()
}

func (v *alertsView) viewAlerts(b *strings.Builder) {
	st := &v.c.styles
	if len(v.recs) == 0 {
		hint := "No alerts yet."
		if len(v.rules) == 0 {
			hint = "No rules: a on a Market row watches its spot price, a in Blocks watches the search, a in Plan the job's best plan; or add a watch: list to the config (see the README's Watch section)."
		}
		if v.ready {
			b.WriteString("\n" + st.dim.Render(ansi.Wordwrap(hint, v.w, "")))
		}
		return
	}
	cols := fitTable(present.Alerts, v.w-2)
	b.WriteString("\n  " + st.header.Render(tableHeader(cols)))
	loc := v.c.now().Location()
	detail := v.detail()
	rows := max(v.h-2-len(detail)-strings.Count(b.String(), "\n"), 1)
	first, end := page(v.cur, len(v.recs), rows)
	for i, a := range v.recs[first:end] {
		line := tableLine(cols, &present.AlertLine{At: a.At.In(loc), Rule: a.Rule, Text: a.Text})
		b.WriteString(st.pointed("\n", line, first+i == v.cur))
	}
	for _, l := range detail {
		b.WriteString("\n" + l)
	}
}

func (v *alertsView) detail() []string {
	if v.cur >= len(v.recs) || v.h < 8 {
		return nil
	}
	st := &v.c.styles
	a := v.recs[v.cur]
	text := a.At.In(v.c.now().Location()).Format("Mon 2006-01-02 15:04 MST") + " · " + a.Rule + ": " + a.Text
	lines := strings.Split(ansi.Wordwrap(text, v.w, ""), "\n")
	out := []string{""}
	for _, l := range lines[:min(len(lines), 3)] {
		out = append(out, st.dim.Render(l))
	}
	var told []string
	if a.Tells(watch.TellTUI) {
		told = append(told, "tui ✓")
	}
	for _, d := range a.Deliveries {
		s := d.Channel + " " + map[string]string{watch.DeliveryDone: "✓", watch.DeliveryFailed: "✗ gave up", watch.DeliveryPending: "… owed", watch.DeliverySending: "… sending", watch.DeliveryUnconfirmed: "? sent, unconfirmed"}[d.State]
		if d.Error != "" && d.State != watch.DeliveryDone {
			s += " (" + d.Error + ")"
		}
		told = append(told, s)
	}
	if len(told) > 0 {
		out = append(out, st.dim.Render(fit("told: "+strings.Join(told, " · "), v.w, false)))
	}
	return out
}

func (v *alertsView) viewRules(b *strings.Builder) {
	st := &v.c.styles
	if len(v.rules) == 0 {
		b.WriteString("\n" + st.dim.Render(ansi.Wordwrap("No rules. a on a Market row, a Blocks search or a Plan makes one; the config's watch: list holds the rest.", v.w, "")))
		return
	}
	cols := fitTable(present.Rules, v.w-2)
	b.WriteString("\n  " + st.header.Render(tableHeader(cols)))
	loc := v.c.now().Location()
	rows := max(v.h-2-strings.Count(b.String(), "\n"), 1)
	first, end := page(v.cur, len(v.rules), rows)
	for i, r := range v.rules[first:end] {
		line := tableLine(cols, &present.RuleLine{Name: r.Name, Condition: r.Describe(), Note: r.Note,
			Made: r.From == watch.FromRulesFile, Active: r.Active, LastFired: r.LastFired.In(loc)})
		b.WriteString(st.pointed("\n", line, first+i == v.cur))
	}
}

// canMakeRules says why this session may not make rules (a viewer's, no watch).
func (c *common) canMakeRules() error {
	switch {
	case c.role == RoleViewer:
		return errors.New("read-only session: only a booker may make alert rules")
	case c.watch == nil || !c.watch.CanMakeRules():
		return errors.New("alert rules cannot be made in this session (no watch); add them to the config's watch: list")
	}
	return nil
}

// saveRule runs on its own clock: a leaving session leaves no half file.
func saveRule(ev *watch.Evaluator, w watch.Spec) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := ev.AddRule(ctx, w)
		if err != nil {
			return noticeMsg{text: "rule not saved: " + err.Error(), err: true}
		}
		return noticeMsg{text: fmt.Sprintf("rule %s saved in %s: %s — see the Alerts view", r.Name, ev.RulesFile(), r.Describe())}
	}
}
