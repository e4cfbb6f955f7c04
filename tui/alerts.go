package tui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/present"
	"github.com/gpumarket/gpumarket/tui/widget/form"
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
	// historyMsg is the Alerts view's load.
	historyMsg struct {
		seq   int
		recs  []watch.Record
		rules []watch.RuleStatus
		err   error
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
	_, looking := m.views[m.active].(alertLister)
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

// alertLister is the view that lists alerts: on screen, they are seen.
type alertLister interface{ listsAlerts() }

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
	ev   *watch.Evaluator
	keys alertsKeys

	recs      []watch.Record
	rules     []watch.RuleStatus
	err       string
	seq       int
	loaded    bool
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
func (v *alertsView) listsAlerts()        {}

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
	v.seq++
	seq, ctx, ev := v.seq, v.ctx, v.ev
	return v.task(func() tea.Msg {
		recs, err := ev.History(ctx, 200)
		return historyMsg{seq: seq, recs: recs, rules: ev.Rules(), err: err}
	})
}

func (v *alertsView) Update(msg tea.Msg) (view, tea.Cmd) {
	switch msg := msg.(type) {
	case historyMsg:
		if msg.seq != v.seq {
			return v, nil
		}
		v.loaded = true
		v.recs, v.rules = msg.recs, msg.rules
		v.err = ""
		if msg.err != nil {
			v.err = msg.err.Error()
		}
		v.cur = min(v.cur, max(v.rows()-1, 0))
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
	if v.w <= 0 || v.h <= 0 {
		return ""
	}
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
		if v.loaded {
			b.WriteString("\n" + st.dim.Render(ansi.Wordwrap(hint, v.w, "")))
		}
		return
	}
	b.WriteString("\n  " + st.header.Render(fit(fmt.Sprintf("%-10s %-18s %s", "WHEN", "RULE", "ALERT"), max(v.w-2, 1), false)))
	loc := v.c.now().Location()
	detail := v.detail()
	rows := max(v.h-2-len(detail)-strings.Count(b.String(), "\n"), 1)
	first, end := page(v.cur, len(v.recs), rows)
	for i, a := range v.recs[first:end] {
		line := fit(fmt.Sprintf("%-10s %-18s %s", a.At.In(loc).Format("Mon 15:04"), fit(a.Rule, 18, false), a.Text), max(v.w-2, 1), false)
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
	b.WriteString("\n  " + st.header.Render(fit(fmt.Sprintf("%-18s %-8s %s", "RULE", "FROM", "CONDITION · STATE"), max(v.w-2, 1), false)))
	loc := v.c.now().Location()
	rows := max(v.h-2-strings.Count(b.String(), "\n"), 1)
	first, end := page(v.cur, len(v.rules), rows)
	for i, r := range v.rules[first:end] {
		from := "config"
		if r.From == watch.FromRulesFile {
			from = "made"
		}
		state := "waiting"
		switch {
		case r.Note != "":
			state = r.Note
		case r.Active:
			state = "holds now"
		}
		if !r.LastFired.IsZero() {
			state += " · last told " + r.LastFired.In(loc).Format("Mon 15:04")
		}
		line := fit(fmt.Sprintf("%-18s %-8s %s · %s", fit(r.Name, 18, false), from, r.Describe(), state), max(v.w-2, 1), false)
		b.WriteString(st.pointed("\n", line, first+i == v.cur))
	}
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

// begin opens q in p: digits and points only.
func (p *rulePrompt) begin(q rulePrompt) {
	*p = q
	p.edit = form.New(form.Text("", &p.value).Only(func(t string) bool { return strings.Trim(t, "0123456789.") == "" }))
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

// ruleName is a rule's name made from its parts: "spot-p5.48xlarge-us-west-2a".
func ruleName(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		for _, r := range p {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
				b.WriteRune(r)
			default:
				b.WriteRune('-')
			}
		}
		b.WriteRune('-')
	}
	s := strings.Trim(b.String(), "-._")
	if len(s) > 56 { // room for AddRule's "-2"
		s = s[:56]
	}
	return s
}

// makeSpotRule: a spot rule on the row under the cursor, at 90 % of its price.
func (m *marketView) makeSpotRule() tea.Cmd {
	if err := m.c.canMakeRules(); err != nil {
		return notifyErrHere(err)
	}
	if m.cursor >= len(m.list) {
		return notifyHere("no pool under the cursor to watch")
	}
	pv := m.rs.snap.Pools[m.list[m.cursor]] // the pool as the snapshot has it now
	p := rulePrompt{open: true, toggle: true, unit: "/h",
		what: fmt.Sprintf("spot %s in %s", present.DisplayType(pv.InstanceType), present.Place(pv.Region, pv.Zone))}
	if _, usd, ok := pv.History.Last(); ok {
		p.now = "now $" + present.Money(usd) + "/h"
		p.value = strconv.FormatFloat(math.Round(usd*90)/100, 'f', -1, 64)
	}
	p.build = func(above bool, v float64) watch.Spec {
		s := &watch.SpotRule{InstanceType: pv.InstanceType, Region: pv.Region, Zone: pv.Zone, Provider: pv.Provider}
		dir := "below"
		if above {
			s.AboveUSDHour, dir = &v, "above"
		} else {
			s.BelowUSDHour = &v
		}
		return watch.Spec{Name: ruleName("spot", pv.InstanceType, present.Place(pv.Region, pv.Zone), dir), Cond: s}
	}
	m.prompt.begin(p)
	return nil
}

// makeIdleRule: an idle rule on the Usage row, at max_idle_pct (else 40 %).
func (v *usageView) makeIdleRule() tea.Cmd {
	if err := v.c.canMakeRules(); err != nil {
		return notifyErrHere(err)
	}
	if !v.ready || len(v.rep.Rows) == 0 {
		return notifyHere("no ledger row under the cursor to watch")
	}
	r := v.rep.Rows[min(v.cur, len(v.rep.Rows)-1)]
	if !r.Active {
		return notifyHere(fmt.Sprintf("%s %s is %s, not running: nothing of it can be idle from now on", r.Kind, short(r.ID), r.State))
	}
	p := rulePrompt{open: true, unit: "%", what: fmt.Sprintf("%s %s (%s GPU %s)", r.Kind, short(r.ID), present.GPUCount(r.GPUs), present.DisplayType(r.InstanceType)), value: "40"}
	if b := v.tr.MaxIdlePct(); b > 0 {
		p.value = strconv.FormatFloat(b, 'f', -1, 64)
	}
	if s := r.IdleShare(); !math.IsNaN(s) {
		p.now = fmt.Sprintf("now %.0f%%", s*100)
	} else {
		p.now = "no metrics yet"
	}
	id := r.ID
	p.build = func(_ bool, pct float64) watch.Spec {
		return watch.Spec{Name: ruleName("idle", r.Kind, id), Cond: &watch.IdleRule{AbovePct: pct, ID: id}}
	}
	v.prompt.begin(p)
	return nil
}

// makeBlockRule: a block rule on the Blocks search, under its cheapest block.

func (v *blocksView) makeBlockRule() tea.Cmd {
	if err := v.c.canMakeRules(); err != nil {
		return notifyErrHere(err)
	}
	f := v.shownTerms()
	now := v.c.now()
	q, err := f.parse(now)
	if err != nil {
		return notifyErrHere(fmt.Errorf("the search's terms: %w; e edits them", err))
	}
	b := &watch.BlockRule{GPU: q.GPU, GPUs: q.GPUs, Instances: q.Instances, Hours: q.Duration.Hours()}
	// "+2d" means from now: the rule keeps the time it names, in UTC.
	if !q.StartAfter.IsZero() {
		b.StartAfter = q.StartAfter.UTC().Format(time.RFC3339)
	}
	if !q.StartBefore.IsZero() {
		b.StartBefore = q.StartBefore.UTC().Format(time.RFC3339)
	}
	size := fmt.Sprintf("%d %s", q.GPUs, q.GPU)
	if q.Instances > 0 {
		size = fmt.Sprintf("%d instances of %s", q.Instances, q.GPU)
	}
	p := rulePrompt{open: true, unit: "/GPU-h", what: fmt.Sprintf("a block of %s × %s", size, f.duration)}
	if len(v.offers) > 0 {
		if c := v.offers[0].USDPerGPUHour(); !math.IsNaN(c) {
			p.now = "cheapest now $" + present.Money(c)
			p.value = strconv.FormatFloat(math.Round(c*95)/100, 'f', -1, 64)
		}
	}
	p.build = func(_ bool, most float64) watch.Spec {
		bb := *b
		bb.MaxUSDGPUHour = &most
		n := q.GPUs
		if q.Instances > 0 {
			n = q.Instances
		}
		return watch.Spec{Name: ruleName("block", q.GPU, strconv.Itoa(n), domain.FormatWindow(q.Duration)), Cond: &bb}
	}
	v.prompt.begin(p)
	return nil
}

// makePlanRule prompts for a plan rule on the job the table shows (one edited
// since is taken as typed); the watch prices it as `gpumarket plan` does.
func (v *planView) makePlanRule() tea.Cmd {
	if err := v.c.canMakeRules(); err != nil {
		return notifyErrHere(err)
	}
	shown := len(v.res.results) > 0 && v.form == v.ran && !v.running
	t := v.res.terms
	if !shown {
		var err error
		if t, err = v.form.parse(v.c.now()); err != nil {
			return notifyErrHere(fmt.Errorf("the job: %w; e edits it", err))
		}
	}
	job := t.job
	ck := config.Duration(0)
	if job.Checkpointable {
		ck = config.Duration(job.Checkpoint)
	}
	onTime := t.onTime
	pr := &watch.PlanRule{GPU: strings.Join(job.Models, ","), GPUs: job.GPUs, Hours: job.Hours,
		Deadline: job.Deadline.UTC().Format(time.RFC3339), Checkpoint: &ck, OnTimePct: &onTime}
	if job.Start.After(v.c.now()) { // a start come already is "now"
		pr.Start = job.Start.UTC().Format(time.RFC3339)
	}
	loc := v.c.now().Location()
	what := fmt.Sprintf("the best plan for %d %s × %gh by %s, on time ≥%s%%,", job.GPUs, strings.Join(job.Models, "/"), job.Hours,
		job.Deadline.In(loc).Format("01-02 15:04"), present.GPUCount(onTime))
	if len(t.regions) > 0 {
		what += " in every region (a plan rule has no region filter),"
	}
	p := rulePrompt{open: true, what: what}
	if shown {
		for _, r := range v.res.results {
			if r.OnTimePct >= onTime && !math.IsNaN(r.ExpectedCostUSD) {
				p.now = fmt.Sprintf("best now $%.2f, %s", r.ExpectedCostUSD, r.Strategy)
				p.value = strconv.FormatFloat(math.Floor(r.ExpectedCostUSD*95)/100, 'f', -1, 64)
				break
			}
		}
		if p.now == "" {
			p.now = fmt.Sprintf("no plan is on time ≥%s%% now", present.GPUCount(onTime))
		}
	} else {
		p.now = "r runs the plan: its best is a figure to start from"
	}
	p.build = func(_ bool, below float64) watch.Spec {
		rule := *pr
		rule.BelowUSD = &below
		return watch.Spec{Name: ruleName("plan", strings.Join(job.Models, "-"), strconv.Itoa(job.GPUs), trimHours(job.Hours)+"h"), Cond: &rule}
	}
	v.prompt.begin(p)
	return nil
}
