package tui

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/booking"
	"github.com/gpumarket/gpumarket/providers/store"
)

// addMoneyViews adds the Blocks, Fleet and Ledger views to a session whose
// booking service is svc (nil: the views say that nothing can be booked
// here). The root calls it in New, after the Market and Chart views:
//
//	m.addMoneyViews(opt.Context, opt.Booking)
//
// and should give mailNudge messages to every view (case mailNudge:
// return m, m.broadcast(msg)) so that a hidden view's results show at once.
func (m *Model) addMoneyViews(ctx context.Context, svc *booking.Service) {
	if ctx == nil {
		ctx = context.Background()
	}
	blocks := newBlocksView(m.c, ctx, svc)
	if len(m.opt.GPUs) > 0 {
		if g, ok := providers.NormalizeGPUModel(m.opt.GPUs[0]); ok {
			blocks.form.gpu = g
		}
	}
	mk := m.market
	fleet := newFleetView(m.c, ctx, svc, mk.chartKeys, func() bool { return mk.markedCount() == 0 })
	ledger := newLedgerView(m.c, ctx, svc)
	// Called again (tests, a session given a ledger later), it replaces
	// the money views rather than adding a second set.
	kept := m.views[:0]
	for _, v := range m.views {
		switch v.(type) {
		case *blocksView, *fleetView, *ledgerView:
			continue
		}
		kept = append(kept, v)
	}
	m.views = append(kept, blocks, fleet, ledger)
	m.active, m.prev = min(m.active, len(m.views)-1), min(m.prev, len(m.views)-1)
	m.resize()
}

// mailbox carries a view's command results back to that view. The root
// hands an ordinary message to the active view only, so a result that
// arrives after the user tabbed away would be lost; a command therefore
// posts its result here and returns a mailNudge, and the view drains the
// box on every Update — snapshots reach every view, so a hidden view
// catches up within a tick. The box holds results, never the model.
type mailbox struct {
	mu   sync.Mutex
	msgs []tea.Msg
}

// mailNudge tells a view that its mailbox has news.
type mailNudge struct{}

// cmd runs f as a command whose result goes to the mailbox.
func (b *mailbox) cmd(f func() tea.Msg) tea.Cmd {
	return func() tea.Msg {
		msg := f()
		b.mu.Lock()
		b.msgs = append(b.msgs, msg)
		b.mu.Unlock()
		return mailNudge{}
	}
}

func (b *mailbox) drain() []tea.Msg {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.msgs
	b.msgs = nil
	return out
}

// refuseSpend is the answer to b, L or d when this session may not spend
// (a viewer) or cannot (no ledger); nil when it may go on.
func refuseSpend(c *common, svc *booking.Service) tea.Cmd {
	var text string
	switch {
	case c.role == RoleViewer:
		text = "read-only session: booking, launching and deleting are disabled here; nothing was spent"
	case svc == nil:
		text = "booking is not available in this session (no ledger); nothing was spent"
	default:
		return nil
	}
	return func() tea.Msg { return noticeMsg{text: text, err: true} }
}

// confirmBox is the confirmation every money-spending action passes:
// the total first, the terms, the provider's dry-run answer, and an
// explicit "y" then enter. Anything else (n, esc) cancels; "no" is what
// happens unless the user types y.
type confirmBox struct {
	open  bool
	title string
	lines []string
	// busy is set while the terms or the dry run, or the action itself,
	// are being asked for.
	busy string
	// problem, when set, is why the action cannot go ahead (over budget,
	// the dry run refused): only esc is accepted.
	problem string
	dryRun  string
	typed   string
	verb    string // "buy", "launch", "delete"
	// sending is set once the action is sent: it can no longer be
	// cancelled, so every key is ignored until its answer.
	sending bool
}

// send marks the box as sending its action.
func (b *confirmBox) send(what string) {
	b.busy, b.sending, b.typed = what, true, ""
}

// key handles a key in the open box. It reports whether y then enter
// confirmed the action, and closes the box on a cancel.
func (b *confirmBox) key(msg tea.KeyPressMsg) (confirmed bool) {
	if b.sending {
		return false
	}
	switch msg.String() {
	case "esc", "n", "N", "q":
		*b = confirmBox{}
		return false
	case "y", "Y":
		if b.busy == "" && b.problem == "" {
			b.typed = "y"
		}
	case "backspace":
		b.typed = ""
	case "enter":
		if b.typed == "y" && b.busy == "" && b.problem == "" {
			return true
		}
	default:
		b.typed = ""
	}
	return false
}

// dryRunAnswer is a provider's dry-run message without its own "dry run:"
// lead, which the box already writes.
func dryRunAnswer(msg string) string {
	if len(msg) >= 8 && strings.EqualFold(msg[:8], "dry run:") {
		return strings.TrimSpace(msg[8:])
	}
	return msg
}

func (b *confirmBox) view(st *styles, w int) string {
	// Every line wraps rather than being cut: what is bought and on which
	// terms must be read whole before the yes.
	wrap := func(l string) string {
		return "  " + strings.ReplaceAll(ansi.Wordwrap(l, max(w-2, 1), ""), "\n", "\n  ")
	}
	var s strings.Builder
	s.WriteString(st.title.Render(ansi.Wordwrap(b.title, max(w, 1), "")))
	s.WriteString("\n")
	for _, l := range b.lines {
		s.WriteString(wrap(l) + "\n")
	}
	if b.dryRun != "" {
		s.WriteString(st.ok.Render(wrap("dry run: "+b.dryRun)) + "\n")
	}
	switch {
	case b.busy != "":
		s.WriteString("\n  " + st.dim.Render(b.busy+"…"))
	case b.problem != "":
		s.WriteString("\n" + st.footerErr.Render(wrap(b.problem)) + "\n  " + st.dim.Render("esc closes; nothing was spent"))
	default:
		answer := "[no]"
		if b.typed == "y" {
			answer = "[yes]"
		}
		s.WriteString(fmt.Sprintf("\n  Type y then enter to %s · n or esc cancels    %s", b.verb, answer))
	}
	return s.String()
}

// ledgerReload is how often the Ledger view rereads the ledger when the
// market ticks: other sessions and processes write to it too.
const ledgerReload = 5 * time.Second

type (
	ledgerLoadedMsg struct {
		seq  int
		rows []store.Row
		rep  *booking.Report
		err  error
	}
	fleetDeletedMsg struct {
		row store.Row
		err error
	}
)

// ledgerKeys are the Ledger view's keys.
type ledgerKeys struct {
	Up, Down, Delete, Reconcile key.Binding
	global                      *globalKeys
}

func newLedgerKeys(g *globalKeys) ledgerKeys {
	return ledgerKeys{
		Up:        key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:      key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		Delete:    key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "delete fleet")),
		Reconcile: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reconcile")),
		global:    g,
	}
}

// ShortHelp is the footer's one line.
func (k ledgerKeys) ShortHelp() []key.Binding {
	return []key.Binding{k.Delete, k.Reconcile, k.global.Help, k.global.Quit, k.global.NextView, k.Up, k.Down}
}

// FullHelp is the `?` screen.
func (k ledgerKeys) FullHelp() [][]key.Binding {
	return [][]key.Binding{{k.Up, k.Down}, {k.Delete, k.Reconcile}, {k.global.Back, k.global.Filter, k.global.NextView, k.global.PrevView, k.global.Help, k.global.Quit}}
}

// ledgerView lists what was booked or launched: current and upcoming
// reservations first with the time left (the workshop view), then the
// rest, newest first.
type ledgerView struct {
	c     *common
	ctx   context.Context
	svc   *booking.Service
	keys  ledgerKeys
	box   *mailbox
	w, h  int
	rows  []store.Row
	cur   int
	err   string
	note  string // what the last reconciliation could not settle
	seq   int
	busy  bool
	last  time.Time
	ready bool // the first load (with reconciliation) is done
	// changes is the service's change count at the last load.
	changes uint64

	confirm confirmBox
	target  store.Row
}

func newLedgerView(c *common, ctx context.Context, svc *booking.Service) *ledgerView {
	return &ledgerView{c: c, ctx: ctx, svc: svc, keys: newLedgerKeys(&c.keys), box: &mailbox{}}
}

func (v *ledgerView) Title() string       { return "Ledger" }
func (v *ledgerView) KeyMap() help.KeyMap { return v.keys }
func (v *ledgerView) SetSize(w, h int)    { v.w, v.h = w, h }
func (v *ledgerView) capturing() bool     { return v.confirm.open }

func (v *ledgerView) helpNote() string {
	return "Every purchase and launch is written here before it is sent. unknown: the answer was lost; it is looked up (r), never re-sent.\n" +
		"A fleet's cost is the estimate of its first hour: a fleet bills until deleted."
}

// load reads the ledger; with reconcile it first settles unknown rows.
func (v *ledgerView) load(reconcile bool) tea.Cmd {
	if v.svc == nil || v.busy {
		return nil
	}
	v.busy = true
	v.seq++
	v.changes = v.svc.Changes()
	seq, ctx, svc := v.seq, v.ctx, v.svc
	return v.box.cmd(func() tea.Msg {
		var rep *booking.Report
		if reconcile {
			r, err := svc.Reconcile(ctx)
			if err != nil {
				return ledgerLoadedMsg{seq: seq, err: err}
			}
			rep = &r
		}
		rows, err := svc.Store().List(ctx)
		return ledgerLoadedMsg{seq: seq, rows: rows, rep: rep, err: err}
	})
}

func (v *ledgerView) Update(msg tea.Msg) (view, tea.Cmd) {
	var cmds []tea.Cmd
	for _, r := range v.box.drain() {
		cmds = append(cmds, v.apply(r))
	}
	switch msg := msg.(type) {
	case snapshotMsg:
		now := v.c.now()
		if !v.ready {
			cmds = append(cmds, v.load(true))
		} else if now.Sub(v.last) >= ledgerReload {
			cmds = append(cmds, v.load(false))
		}
	case tea.KeyPressMsg:
		cmds = append(cmds, v.updateKey(msg))
	}
	// This session (another view, another SSH session) wrote to the
	// ledger: reread it now rather than at the next reload.
	if v.ready && v.svc != nil && v.svc.Changes() != v.changes {
		cmds = append(cmds, v.load(false))
	}
	return v, tea.Batch(cmds...)
}

func (v *ledgerView) apply(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case ledgerLoadedMsg:
		if msg.seq != v.seq {
			return nil
		}
		v.busy, v.ready, v.last = false, true, v.c.now()
		if msg.err != nil {
			v.err = msg.err.Error()
			return notifyErr(msg.err)
		}
		v.err = ""
		v.rows = orderLedger(msg.rows, v.c.now())
		v.cur = min(v.cur, max(len(v.rows)-1, 0))
		if msg.rep != nil {
			var parts []string
			for _, u := range msg.rep.Unsettled {
				parts = append(parts, fmt.Sprintf("%s: %s", short(u.Row.ID), u.Reason))
			}
			v.note = strings.Join(parts, "; ")
		}
	case fleetDeletedMsg:
		v.confirm = confirmBox{}
		if msg.err != nil {
			return tea.Batch(notifyErr(msg.err), v.load(false))
		}
		return tea.Batch(notify("deleted fleet "+msg.row.ProviderRef), v.load(false))
	}
	return nil
}

func (v *ledgerView) updateKey(msg tea.KeyPressMsg) tea.Cmd {
	if v.confirm.open {
		if v.confirm.key(msg) {
			v.confirm.send("deleting")
			svc, ctx, id, actor := v.svc, v.ctx, v.target.ID, v.c.actor
			return v.box.cmd(func() tea.Msg {
				r, err := svc.DeleteFleet(context.WithoutCancel(ctx), id, actor)
				return fleetDeletedMsg{row: r, err: err}
			})
		}
		return nil
	}
	switch {
	case key.Matches(msg, v.keys.Up):
		v.cur = max(v.cur-1, 0)
	case key.Matches(msg, v.keys.Down):
		v.cur = min(v.cur+1, max(len(v.rows)-1, 0))
	case key.Matches(msg, v.keys.Reconcile):
		return tea.Batch(notify("reconciling unknown outcomes…"), v.load(true))
	case key.Matches(msg, v.keys.Delete):
		if cmd := refuseSpend(v.c, v.svc); cmd != nil {
			return cmd
		}
		if v.cur >= len(v.rows) {
			return nil
		}
		r := v.rows[v.cur]
		if r.Kind != store.KindFleet {
			if r.Kind == store.KindReservation {
				return notify("d deletes fleets; a reservation is released when its window ends (a running gpumarket or `gpumarket ledger` does it)")
			}
			return notify("d deletes fleets; a capacity block cannot be cancelled (it is non-refundable)")
		}
		if r.State == store.StateDeleted || r.ProviderRef == "" {
			return notify(fmt.Sprintf("fleet row %s is %s: nothing to delete", short(r.ID), r.State))
		}
		v.target = r
		v.confirm = confirmBox{open: true, verb: "delete it", title: "Delete fleet " + r.ProviderRef + "?",
			lines: []string{
				fmt.Sprintf("%d × %s in %s (%s), state %s", r.InstanceCount, r.InstanceType, r.Region, r.Provider, r.State),
				"Its instances are terminated; work on them is lost.",
			}}
	}
	return nil
}

// orderLedger puts current and upcoming blocks first (active, then by
// start), then everything else newest first.
func orderLedger(rows []store.Row, now time.Time) []store.Row {
	out := append([]store.Row(nil), rows...)
	rank := func(r store.Row) int {
		switch {
		case r.State == store.StateActive:
			return 0
		case r.State == store.StateScheduled:
			return 1
		case r.State == store.StatePending || r.State == store.StateUnknown:
			return 2
		}
		return 3
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra < rb
		}
		if rank(a) <= 1 && !a.Start.Equal(b.Start) && store.Booked(a.Kind) && store.Booked(b.Kind) {
			return a.Start.Before(b.Start)
		}
		return a.ID > b.ID
	})
	return out
}

// timeLeft is a block's countdown: to its start, then to its end.
func timeLeft(r store.Row, now time.Time) string {
	if !store.Booked(r.Kind) || r.Start.IsZero() {
		return "-"
	}
	switch {
	case now.Before(r.Start):
		return "starts in " + span(r.Start.Sub(now))
	case now.Before(r.End):
		return "ends in " + span(r.End.Sub(now))
	case r.Kind == store.KindReservation && (r.State == store.StateActive || r.State == store.StateScheduled):
		// Azure bills a reservation until it is deleted: its window is
		// over, but it has not been released yet.
		return "over: billing until released"
	}
	return "ended"
}

// span prints a duration as people read a countdown: 2d 4h, 3h 20m, 45m.
func span(d time.Duration) string {
	d = d.Round(time.Minute)
	days := int(d / (24 * time.Hour))
	hours := int(d % (24 * time.Hour) / time.Hour)
	mins := int(d % time.Hour / time.Minute)
	switch {
	case days > 0:
		return fmt.Sprintf("%dd %dh", days, hours)
	case hours > 0:
		return fmt.Sprintf("%dh %dm", hours, mins)
	}
	return fmt.Sprintf("%dm", mins)
}

// short is the tail of a ledger id, enough to tell rows apart on screen.
func short(id string) string {
	if len(id) > 8 {
		return "…" + id[len(id)-6:]
	}
	return id
}

func (v *ledgerView) View() string {
	if v.w <= 0 || v.h <= 0 {
		return ""
	}
	st := &v.c.styles
	if v.confirm.open {
		return v.confirm.view(st, v.w)
	}
	var b strings.Builder
	switch {
	case v.svc == nil:
		b.WriteString(st.dim.Render("No ledger in this session: nothing can be booked or launched here."))
		return b.String()
	case !v.ready:
		b.WriteString(st.dim.Render("reading the ledger and reconciling unknown outcomes…"))
		return b.String()
	}
	now := v.c.now()
	status := fmt.Sprintf("%d rows", len(v.rows))
	if len(v.rows) == 1 {
		status = "1 row"
	}
	if v.c.role != RoleViewer {
		// Where the ledger lives is the operator's business, not a
		// workshop attendee's.
		status += " · " + v.svc.Store().Path()
	}
	if v.err != "" {
		status = "ledger error: " + v.err
	}
	b.WriteString(st.dim.Render(fit(status, v.w, false)))
	used := 2 // the status line and the column header
	if v.note != "" {
		b.WriteString("\n" + st.stale.Render(fit("not settled yet: "+v.note, v.w, false)))
		used++
	}
	cols := fitTable(ledgerColumns, v.w-2)
	var hdr []string
	for _, c := range cols {
		hdr = append(hdr, fit(c.title, c.w, c.right))
	}
	b.WriteString("\n  " + st.header.Render(strings.Join(hdr, " ")))
	if len(v.rows) == 0 {
		b.WriteString("\n  " + st.dim.Render(fit("Nothing booked or launched yet. Blocks: b books an offering; Fleet: L launches.", max(v.w-2, 1), false)))
	}
	// Only the rows that fit, scrolled to keep the cursor (and its error
	// line) in sight: a workshop's ledger outgrows the screen.
	page := max(v.h-used-1, 1)
	first := max(0, min(v.cur-page+2, len(v.rows)-page))
	for i := first; i < len(v.rows) && i < first+page; i++ {
		r := v.rows[i]
		where := place(r.Region, r.Zone)
		start := "-"
		if !r.Start.IsZero() {
			start = r.Start.In(now.Location()).Format("01-02 15:04 MST")
		}
		cost := money(r.CostUSD)
		switch {
		case booking.CostUnknown(r):
			cost = "-" // recorded as 0, but no price was known
		case r.CostNote != "":
			cost += "/h"
		}
		cells := map[string]string{"STATE": r.State, "KIND": r.Kind, "WHAT": fmt.Sprintf("%d×%s", r.InstanceCount, displayType(r.InstanceType)),
			"WHERE": where, "START (local)": start, "TIME LEFT": timeLeft(r, now), "COST $": cost, "PROVIDER ID": orDash(r.ProviderRef),
			"BY": r.Actor, "LEDGER ID": r.ID}
		var line []string
		for _, c := range cols {
			line = append(line, fit(cells[c.title], c.w, c.right))
		}
		text := strings.Join(line, " ")
		prefix := "  "
		if i == v.cur {
			prefix = "› "
			text = st.cursor.Render(text)
		} else if r.State == store.StateUnknown || r.State == store.StateFailed {
			text = st.stale.Render(text)
		}
		b.WriteString("\n" + prefix + text)
		if i == v.cur && r.Error != "" {
			b.WriteString("\n    " + st.footerErr.Render(fit(r.Error, max(v.w-4, 1), false)))
		}
	}
	return b.String()
}

// tableColumn is one column of the Ledger or Blocks table.
type tableColumn struct {
	title string
	w     int
	right bool
	prio  int // lower stays longer as the terminal narrows
}

// ledgerColumns in display order. What a workshop attendee needs (what,
// where, when, how long left) stays at 80 columns; the ids and who booked
// go first.
var ledgerColumns = []tableColumn{
	{"STATE", 9, false, 0}, {"KIND", 5, false, 7}, {"WHAT", 18, false, 1}, {"WHERE", 14, false, 2},
	{"START (local)", 15, false, 3}, {"TIME LEFT", 17, false, 4}, {"COST $", 10, true, 5},
	{"PROVIDER ID", 22, false, 6}, {"BY", 14, false, 8}, {"LEDGER ID", 26, false, 9},
}

// fitTable keeps the columns that fit in w cells (one space between
// them), by priority, in display order.
func fitTable(cols []tableColumn, w int) []tableColumn {
	keep := make([]bool, len(cols))
	used := 0
	for p := range len(cols) {
		for i, c := range cols {
			if c.prio == p && used+c.w+1 <= w+1 {
				keep[i] = true
				used += c.w + 1
			}
		}
	}
	var out []tableColumn
	for i, c := range cols {
		if keep[i] {
			out = append(out, c)
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
