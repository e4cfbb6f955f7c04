package tui

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
	"github.com/gpumarket/gpumarket/watch"
)

// usageReload: the process's one tracker answers from its cache until its
// TTL passes, so sessions do not multiply the clouds' metrics calls.
const usageReload = time.Minute

// usageView shows what was bought and how much was used, per row, per day
// and per actor. It only reads: read-only sessions see it too.
type usageView struct {
	base
	loader
	tr    *ledger.Tracker
	keys  listKeys
	alert key.Binding
	rep   ledger.UsageReport
	cur   int
	// prompt asks an idle rule's figure for the row under the cursor (a,
	// alerts.go).
	prompt rulePrompt
}

func newUsageView(c *common, ctx context.Context, tr *ledger.Tracker) *usageView {
	alert := key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "idle alert rule"))
	alert.SetEnabled(c.role != RoleViewer)
	keys := newListKeys(&c.keys, true, nil, nil)
	// ↑/↓ before a, unlike the other lists.
	keys.keyMap = keyMap{[]key.Binding{keys.Up, keys.Down, alert}, [][]key.Binding{{keys.Up, keys.Down, alert}, c.keys.row(true)}}
	return &usageView{base: base{c: c, ctx: ctx}, tr: tr, keys: keys, alert: alert}
}

func (v *usageView) Title() string { return "Usage" }
func (v *usageView) KeyMap() help.KeyMap {
	if v.prompt.open {
		return promptKeys(false)
	}
	return v.keys
}

// capturing: an open prompt has every key, q and tab too.
func (v *usageView) capturing() bool     { return v.prompt.open }
func (v *usageView) slashFiltersMarket() {}

func (v *usageView) helpNote() string {
	return "booked: the GPU-hours bought (a fleet's target); running: those instances ran in; busy: running × utilization from the cloud's metrics (\"no metrics\" when there are none, never 0 % busy).\n" +
		"idle $: what was paid for GPU-hours not running or not busy. Bars: █ busy ▓ running ▒ booked; an idle $ marked * leaves out rows without metrics. The five most idle rows come first."
}

// shown asks for a report: the tracker's cache answers unless the ledger
// changed, so a fleet just launched shows at once.
func (v *usageView) shown() tea.Cmd {
	if !v.ready {
		return nil // the first load is on its way with the market
	}
	return v.load()
}

func (v *usageView) load() tea.Cmd {
	if v.tr == nil || v.busy {
		return nil
	}
	return load(&v.loader, &v.owner, v.ctx, v.tr.Report)
}

func (v *usageView) Update(msg tea.Msg) (view, tea.Cmd) {
	switch msg := msg.(type) {
	case loadedMsg[ledger.UsageReport]:
		if v.took(msg.seq, msg.err, v.c.now()) && msg.err == nil {
			v.setReport(msg.val)
		}
	case snapshotMsg:
		// Loaded whether shown or not: the header's idle alert needs it.
		if !v.ready || v.c.now().Sub(v.last) >= usageReload {
			return v, v.load()
		}
	case tea.PasteMsg:
		v.prompt.paste(msg)
	case tea.KeyPressMsg:
		if v.prompt.open {
			return v, v.prompt.update(v.c, msg)
		}
		if !v.keys.move(msg, &v.cur, len(v.rep.Rows)) && key.Matches(msg, v.alert) {
			return v, v.prompt.offer(v.c, v.makeIdleRule)
		}
	}
	return v, nil
}

// setReport takes a report and tells the header of its alerts.
func (v *usageView) setReport(rep ledger.UsageReport) {
	v.rep = rep
	v.cur = min(v.cur, max(len(rep.Rows)-1, 0))
	v.c.idleAlerts = rep.Alerts
}

func (v *usageView) View() string {
	st := &v.c.styles
	switch {
	case v.tr == nil:
		return st.dim.Render("No ledger in this session: nothing to report usage of.")
	case !v.ready:
		return st.dim.Render("reading the ledger and asking the clouds what ran…")
	}
	rep := v.rep
	var lines []string
	status := fmt.Sprintf("last %s · %s · idle %s of %s", windowLabel(v.tr.Since()), plural(len(rep.Rows), "row"),
		present.Dollars(rep.All.IdleUSD), present.Dollars(rep.All.CostUSD))
	if rep.All.NoMetrics > 0 {
		status += fmt.Sprintf(" · %d without metrics", rep.All.NoMetrics)
	}
	if v.err != "" {
		status = "usage error: " + v.err
	}
	if v.prompt.open {
		lines = append(lines, v.prompt.view(st, v.w))
	} else {
		lines = append(lines, st.dim.Render(fit(status, v.w, false)))
	}
	if len(rep.Rows) == 0 {
		lines = append(lines, st.dim.Render(wrapIndent("  Nothing in the ledger ran in the last "+windowLabel(v.tr.Since())+". Blocks: b books an offering; Fleet: L launches.", v.w)))
		return strings.Join(lines, "\n")
	}

	// The days (a week) and actors (three) first; the rows, at least 3.
	days := rep.Days[max(len(rep.Days)-7, 0):]
	actors := rep.Actors[:min(len(rep.Actors), 3)]
	below := 1 + len(days) + 1 + len(actors)
	room := v.h - 1 - 2 - 1 - below // status, header, detail, the rest
	if room < 3 {
		below = max(v.h-1-2-1-3, 0)
		room = 3
	}

	cols := fitTable(present.UsageView, v.w-2)
	lines = append(lines, "  "+st.header.Render(tableHeader(cols)))
	first, end := page(v.cur, len(rep.Rows), room)
	for i := first; i < end; i++ {
		r := &rep.Rows[i]
		text := tableLine(cols, r)
		if i != v.cur && r.NoMetrics() {
			text = st.stale.Render(text)
		}
		lines = append(lines, st.pointed("", text, i == v.cur))
	}
	// Under the rows: what the cursor's row rests on.
	cur := rep.Rows[min(v.cur, len(rep.Rows)-1)]
	detail := "  " + cur.ID
	if cur.MetricsSource != "" {
		detail += " · " + cur.MetricsSource
	}
	if cur.Note != "" {
		detail += " · " + cur.Note
	}
	lines = append(lines, st.dim.Render(fit(detail, v.w, false)))

	// Then the days, each with a bar, and the actors.
	dcols := fitTable(present.Days, v.w-2)
	low := []string{"  " + st.header.Render(tableHeader(dcols))}
	for _, d := range present.DayRows(days, shownWidth(dcols, present.DayBar)) {
		low = append(low, "  "+tableLine(dcols, &d))
	}
	if len(actors) > 0 {
		acols := fitTable(present.Actors, v.w-2)
		low = append(low, "  "+st.header.Render(tableHeader(acols)))
		for _, a := range actors {
			low = append(low, "  "+tableLine(acols, &present.ActorTotal{Total: a}))
		}
	}
	lines = append(lines, low[:min(len(low), below)]...)
	return strings.Join(lines, "\n")
}

// makeIdleRule: an idle rule on the Usage row, at max_idle_pct (else 40 %).
func (v *usageView) makeIdleRule() (*rulePrompt, tea.Cmd) {
	if !v.ready || len(v.rep.Rows) == 0 {
		return nil, notifyHere("no ledger row under the cursor to watch")
	}
	r := v.rep.Rows[min(v.cur, len(v.rep.Rows)-1)]
	if !r.Active {
		return nil, notifyHere(fmt.Sprintf("%s %s is %s, not running: nothing of it can be idle from now on", r.Kind, short(r.ID), r.State))
	}
	p := rulePrompt{unit: "%", what: fmt.Sprintf("%s %s (%s GPU %s)", r.Kind, short(r.ID), present.GPUCount(r.GPUs), present.DisplayType(r.InstanceType)), value: "40"}
	if b := v.tr.MaxIdlePct(); b > 0 {
		p.value = decimal(b)
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
	return &p, nil
}
