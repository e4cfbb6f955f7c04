package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// ledgerReload is how often the Ledger view rereads the ledger when the
// market ticks: other sessions and processes write to it too.
const ledgerReload = 5 * time.Second

type (
	ledgerLoadedMsg struct {
		seq  int
		rows []ledger.Entry
		jobs []jobLine
		rep  *ledger.ReconcileReport
		err  error
		// asked is set for the reconciliation r asked for: its answer
		// is said in the footer.
		asked bool
	}
	// fleetDeletedMsg follows a delete, whatever its answer: the ledger
	// is read again.
	fleetDeletedMsg struct{}
	// fleetsNowMsg is what the providers said of the running fleets
	// (ledger.FleetsNow), asked after a load.
	fleetsNowMsg struct {
		seq    int
		fleets map[string]ledger.FleetNow
	}
)

// ledgerKeys are the Ledger view's keys.
type ledgerKeys struct {
	Up, Down, Delete, Reconcile key.Binding
	global                      *globalKeys
}

func newLedgerKeys(g *globalKeys) ledgerKeys {
	return ledgerKeys{
		Up:        upKey(),
		Down:      downKey(),
		Delete:    key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "delete fleet")),
		Reconcile: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reconcile")),
		global:    g,
	}
}

// ShortHelp is the view's part of the footer.
func (k ledgerKeys) ShortHelp() []key.Binding {
	return []key.Binding{k.Delete, k.Reconcile, k.Up, k.Down}
}

// FullHelp is the `?` screen.
func (k ledgerKeys) FullHelp() [][]key.Binding {
	return [][]key.Binding{{k.Up, k.Down}, {k.Delete, k.Reconcile}, {k.global.Back, k.global.Filter, k.global.NextView, k.global.PrevView, k.global.Help, k.global.Quit}}
}

// ledgerView lists what was booked or launched: current and upcoming
// reservations first with the time left (the workshop view), then the
// rest, newest first.
type ledgerView struct {
	owner
	c    *common
	ctx  context.Context
	svc  *ledger.Service
	keys ledgerKeys
	w, h int
	rows []ledger.Entry
	cur  int
	err  string
	note string // what the last reconciliation could not settle
	seq  int
	busy bool
	// asked is the seq of the load that r asked for (0: none).
	asked int
	last  time.Time
	ready bool // the first load (with reconciliation) is done
	// changes is the service's change count at the last load.
	changes uint64
	// fleets is what the providers last said of the running fleets, by
	// row id: instances running now of those asked. Asked after each load
	// (the service answers from its shared cache, one describe per fleet
	// per ledger.FleetsNowEvery), never per key.
	fleets      map[string]ledger.FleetNow
	fleetsSeq   int
	fleetsAsked bool
	// states is each row's state at the last load: a row that turns
	// failed since is told in the footer, whichever view is shown.
	states map[string]string
	// jobs are the ledger's jobs, newest first, with their rows' ids.
	jobs []jobLine

	confirm confirmation
}

func newLedgerView(c *common, ctx context.Context, svc *ledger.Service) *ledgerView {
	v := &ledgerView{c: c, ctx: ctx, svc: svc, keys: newLedgerKeys(&c.keys)}
	v.confirm = newConfirmation(c, ctx, &v.owner, svc != nil)
	return v
}

func (v *ledgerView) Title() string       { return "Ledger" }
func (v *ledgerView) KeyMap() help.KeyMap { return v.keys }
func (v *ledgerView) SetSize(w, h int)    { v.w, v.h = w, h }
func (v *ledgerView) box() *confirmation  { return &v.confirm }
func (v *ledgerView) escGoesHome()        {}
func (v *ledgerView) slashFiltersMarket() {}

// shown rereads the ledger if this session wrote to it while the view was
// hidden (a purchase in the Blocks view): the new row is there at once.
func (v *ledgerView) shown() tea.Cmd {
	if v.ready && v.svc != nil && v.svc.Changes() != v.changes {
		return v.load(false)
	}
	return nil
}

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
	return v.task(func() tea.Msg {
		var rep *ledger.ReconcileReport
		if reconcile {
			r, err := svc.Reconcile(ctx)
			if err != nil {
				return ledgerLoadedMsg{seq: seq, err: err}
			}
			rep = &r
		}
		rows, err := svc.Store().List(ctx)
		var jobs []jobLine
		if err == nil {
			jobs, err = loadJobs(ctx, svc.Store())
		}
		return ledgerLoadedMsg{seq: seq, rows: rows, jobs: jobs, rep: rep, err: err}
	})
}

// reconciled says what the reconciliation r asked for did.
func reconciled(rep *ledger.ReconcileReport) tea.Cmd {
	switch {
	case rep == nil:
		return nil
	case len(rep.Settled) == 0 && len(rep.Unsettled) == 0:
		return notifyHere("reconciled: nothing was waiting on an answer")
	case len(rep.Unsettled) == 0:
		return notifyHere(fmt.Sprintf("reconciled: %s settled", plural(len(rep.Settled), "row")))
	}
	return notifyHere(fmt.Sprintf("reconciled: %s settled, %d not yet (see the line over the rows)", plural(len(rep.Settled), "row"), len(rep.Unsettled)))
}

func (v *ledgerView) Update(msg tea.Msg) (view, tea.Cmd) {
	msg, cmd := v.confirm.update(msg)
	cmds := []tea.Cmd{cmd}
	switch msg := msg.(type) {
	case ledgerLoadedMsg:
		cmds = append(cmds, v.loaded(msg))
	case fleetsNowMsg:
		if msg.seq == v.fleetsSeq {
			v.fleets, v.fleetsAsked = msg.fleets, false
		}
	case fleetDeletedMsg:
		cmds = append(cmds, v.load(false))
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
	// ledger: reread it at the next message that reaches this view (a
	// market tick, its own answers, a key) rather than at the next reload.
	if v.ready && v.svc != nil && v.svc.Changes() != v.changes {
		cmds = append(cmds, v.load(false))
	}
	return v, tea.Batch(cmds...)
}

func (v *ledgerView) loaded(msg ledgerLoadedMsg) tea.Cmd {
	if msg.seq != v.seq {
		return nil
	}
	v.busy, v.ready, v.last = false, true, v.c.now()
	asked := v.asked == msg.seq
	v.asked = 0
	if msg.err != nil {
		v.err = msg.err.Error()
		return notifyErr(msg.err)
	}
	v.err = ""
	told := v.failures(msg.rows)
	v.jobs = msg.jobs
	v.rows = orderLedger(msg.rows, v.c.now())
	v.cur = min(v.cur, max(len(v.rows)-1, 0))
	if msg.rep != nil {
		var parts []string
		for _, u := range msg.rep.Unsettled {
			parts = append(parts, fmt.Sprintf("%s: %s", short(u.Row.ID), u.Reason))
		}
		v.note = strings.Join(parts, "; ")
	}
	if asked {
		return tea.Batch(reconciled(msg.rep), v.askFleets(), told)
	}
	return tea.Batch(v.askFleets(), told)
}

// failures records the rows' states and says, in the footer, each row
// that failed since the last load (a fleet that launched nothing, a
// scheduled fleet refused at its start): the session may be on another
// view, or another session may have made it.
func (v *ledgerView) failures(rows []ledger.Entry) tea.Cmd {
	first := v.states == nil
	var lines []string
	next := make(map[string]string, len(rows))
	for _, r := range rows {
		next[r.ID] = r.State
		if was, seen := v.states[r.ID]; !first && r.State == ledger.StateFailed && was != ledger.StateFailed && (seen || r.Error != "") {
			lines = append(lines, fmt.Sprintf("ledger row %s (%s %d×%s) failed: %s", short(r.ID), r.Kind, r.InstanceCount,
				present.DisplayType(r.InstanceType), orDefault(r.Error, "see the Ledger view")))
		}
	}
	v.states = next
	if len(lines) == 0 {
		return nil
	}
	return notifyErr(errors.New(strings.Join(lines, "; ")))
}

// askFleets asks the providers how many instances of each running fleet
// run now, unless it is being asked already.
func (v *ledgerView) askFleets() tea.Cmd {
	if v.svc == nil || v.fleetsAsked || !slices.ContainsFunc(v.rows, ledger.LiveFleet) {
		return nil
	}
	v.fleetsAsked = true
	v.fleetsSeq++
	seq, ctx, svc, rows := v.fleetsSeq, v.ctx, v.svc, append([]ledger.Entry(nil), v.rows...)
	return v.task(func() tea.Msg { return fleetsNowMsg{seq: seq, fleets: svc.FleetsNow(ctx, rows)} })
}

func (v *ledgerView) updateKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, v.keys.Up):
		v.cur = max(v.cur-1, 0)
	case key.Matches(msg, v.keys.Down):
		v.cur = min(v.cur+1, max(len(v.rows)-1, 0))
	case key.Matches(msg, v.keys.Reconcile):
		switch {
		case v.svc == nil:
			return nil
		case v.busy:
			return notifyHere("the ledger is being read; r again in a moment")
		}
		cmd := v.load(true)
		v.asked = v.seq
		return tea.Batch(notifyHere("reconciling unknown outcomes…"), cmd)
	case key.Matches(msg, v.keys.Delete):
		return v.confirm.offer(v.deleteFleet)
	}
	return nil
}

// deleteFleet is the money action behind d, for the fleet of the selected
// row: nothing to quote, the fleet deleted through the ledger on y.
func (v *ledgerView) deleteFleet() (*moneyAction, tea.Cmd) {
	if v.cur >= len(v.rows) {
		return nil, nil
	}
	r := v.rows[v.cur]
	if r.Kind != ledger.KindFleet {
		if r.Kind == ledger.KindReservation {
			return nil, notifyHere("d deletes fleets; a reservation is released when its window ends (a running gpumarket or `gpumarket ledger` does it)")
		}
		return nil, notifyHere("d deletes fleets; a capacity block cannot be cancelled (it is non-refundable)")
	}
	svc, id, actor := v.svc, r.ID, v.c.actor
	if r.State == ledger.StateScheduled && r.ProviderRef == "" {
		// Kept by gpumarket and not launched yet: nothing to call.
		return &moneyAction{
			title: "Cancel the scheduled fleet " + short(r.ID) + "?", verb: "cancel it", sending: "cancelling",
			lines: []string{
				fmt.Sprintf("%d × %s in %s (%s), %s", r.InstanceCount, r.InstanceType, r.Region, r.Provider, timeLeft(r, v.c.now())),
				"Nothing was launched yet; nothing is spent. gpumarket will not launch it.",
			},
			send: func(ctx context.Context) outcome {
				row, err := svc.DeleteFleet(ctx, id, actor)
				return outcome{notice: "cancelled the scheduled fleet " + short(row.ID), err: err, then: fleetDeletedMsg{}}
			},
		}, nil
	}
	if r.State == ledger.StateDeleted || r.ProviderRef == "" {
		return nil, notifyHere(fmt.Sprintf("fleet row %s is %s: nothing to delete", short(r.ID), r.State))
	}
	return &moneyAction{
		title: "Delete fleet " + r.ProviderRef + "?", verb: "delete it", sending: "deleting",
		lines: []string{
			fmt.Sprintf("%d × %s in %s (%s), state %s", r.InstanceCount, r.InstanceType, r.Region, r.Provider, r.State),
			"Its instances are terminated; work on them is lost.",
		},
		send: func(ctx context.Context) outcome {
			row, err := svc.DeleteFleet(ctx, id, actor)
			return outcome{notice: "deleted fleet " + row.ProviderRef, err: err, then: fleetDeletedMsg{}}
		},
	}, nil
}

// orderLedger puts current and upcoming blocks first (active, then by
// start), then everything else newest first.
func orderLedger(rows []ledger.Entry, now time.Time) []ledger.Entry {
	out := append([]ledger.Entry(nil), rows...)
	rank := func(r ledger.Entry) int {
		switch {
		case r.State == ledger.StateActive:
			return 0
		case r.State == ledger.StateScheduled:
			return 1
		case r.State == ledger.StatePending || r.State == ledger.StateUnknown:
			return 2
		}
		return 3
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra < rb
		}
		if rank(a) <= 1 && !a.Start.Equal(b.Start) && dated(a) && dated(b) {
			return a.Start.Before(b.Start)
		}
		return a.ID > b.ID
	})
	return out
}

// dated reports whether a row has a window to order it by: a block, a
// reservation, a fleet with a start.
func dated(r ledger.Entry) bool { return ledger.Booked(r.Kind) || !r.Start.IsZero() }

// timeLeft is a block's countdown: to its start, then to its end; a
// fleet's too when it is scheduled (the workshop's countdown), else its
// time running (it bills until deleted).
func timeLeft(r ledger.Entry, now time.Time) string {
	if r.Kind == ledger.KindFleet {
		sched, scheduled := ledger.ScheduleOf(r)
		switch {
		case scheduled && r.State == ledger.StateScheduled && now.Before(sched.Start):
			return "starts in " + span(sched.Start.Sub(now))
		case scheduled && r.State == ledger.StateScheduled:
			return "start due"
		case scheduled && r.State == ledger.StateActive && !sched.End.IsZero() && now.Before(sched.End):
			return "ends in " + span(sched.End.Sub(now))
		case scheduled && r.State == ledger.StateActive && !sched.End.IsZero():
			return "end due"
		case r.ProviderRef == "":
			return "-" // never launched
		}
		start, end := ledger.Span(r)
		switch {
		case start.IsZero():
			return "-"
		case end.IsZero():
			return "running " + span(now.Sub(start))
		}
		return "ran " + span(end.Sub(start))
	}
	if !ledger.Booked(r.Kind) || r.Start.IsZero() {
		return "-"
	}
	switch {
	case now.Before(r.Start):
		return "starts in " + span(r.Start.Sub(now))
	case now.Before(r.End):
		return "ends in " + span(r.End.Sub(now))
	case r.Kind == ledger.KindReservation && (r.State == ledger.StateActive || r.State == ledger.StateScheduled):
		// Azure bills a reservation until it is deleted: its window is
		// over, but it has not been released yet.
		return "over: billing until released"
	}
	return "ended"
}

// span prints a duration as people read a countdown: 2d 4h, 3h 20m, 45m.
func span(d time.Duration) string {
	if d > 0 && d < 30*time.Second {
		return "<1m" // "starts in 0m" read as started
	}
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
	used += v.viewJobs(&b, now)
	cols := fitTable(ledgerColumns, v.w-2)
	var hdr []string
	for _, c := range cols {
		hdr = append(hdr, fit(c.title, c.w, c.right))
	}
	b.WriteString("\n  " + st.header.Render(strings.Join(hdr, " ")))
	if len(v.rows) == 0 {
		b.WriteString("\n" + st.dim.Render(wrapIndent("  Nothing booked or launched yet. Blocks: b books an offering; Fleet: L launches.", v.w)))
		return b.String()
	}
	// Under the cursor's row: its error, and what the columns that did
	// not fit say (at 80 columns: where, who, the ids).
	var detail []string
	cur := v.rows[min(v.cur, len(v.rows)-1)]
	if cur.Error != "" {
		detail = append(detail, st.footerErr.Render(fit(cur.Error, max(v.w-4, 1), false)))
	}
	if id := v.jobOf(cur.ID); id != "" {
		detail = append(detail, st.dim.Render(fit("a launch of job "+id, max(v.w-4, 1), false)))
	}
	if d := hiddenCells(ledgerCells(cur, now, v.fleets, v.svc.Describe), cols); d != "" {
		for _, l := range strings.Split(wordwrap(d, max(v.w-4, 1)), "\n") {
			detail = append(detail, st.dim.Render(fit(l, max(v.w-4, 1), false)))
		}
	}
	detail = detail[:min(len(detail), max(v.h-used-1, 0), 3)]
	// Only the rows that fit, scrolled to keep the cursor and its lines
	// in sight: a workshop's ledger outgrows the screen.
	page := max(v.h-used-len(detail), 1)
	first := max(0, min(v.cur-page+1, len(v.rows)-page))
	for i := first; i < len(v.rows) && i < first+page; i++ {
		r := v.rows[i]
		cells := ledgerCells(r, now, v.fleets, v.svc.Describe)
		var line []string
		for _, c := range cols {
			line = append(line, fit(cells[c.title], c.w, c.right))
		}
		text := strings.Join(line, " ")
		prefix := "  "
		if i == v.cur {
			prefix = "› "
			text = st.cursor.Render(text)
		} else if r.State == ledger.StateUnknown || r.State == ledger.StateFailed {
			text = st.stale.Render(text)
		}
		b.WriteString("\n" + prefix + text)
		if i == v.cur {
			for _, l := range detail {
				b.WriteString("\n    " + l)
			}
		}
	}
	return b.String()
}

// ledgerColumns in display order. What decides and tracks a booking (what,
// when, how long, what it costs) stays at 80 columns; where, who and the
// running cost of a fleet come next, then the ids. What does not fit is
// said under the cursor's row.
//
// RUN is a fleet's instances running now of those asked (its provider's
// describe, through ledger.FleetsNow); KEPT BY who starts and ends a
// scheduled fleet; NOTE what happened that is not an error.
var ledgerColumns = []tableColumn{
	{title: "STATE", w: 9, prio: 0}, {title: "KIND", w: 5, prio: 9}, {title: "WHAT", w: 18, prio: 1},
	{title: "WHERE", w: 14, prio: 5, max: 18}, {title: "START (local)", w: 15, prio: 2}, {title: "END (local)", w: 15, prio: 8},
	{title: "TIME LEFT", w: 16, prio: 3}, {title: "RUN", w: 5, right: true, prio: 4}, {title: "COST $", w: 10, right: true, prio: 4},
	{title: "SO FAR $", w: 9, right: true, prio: 7}, {title: "BY", w: 14, prio: 6}, {title: "KEPT BY", w: 30, prio: 12},
	{title: "PROVIDER ID", w: 22, prio: 10}, {title: "LEDGER ID", w: 26, prio: 11}, {title: "NOTE", w: 40, prio: 13},
}

// ledgerCells are a row's cells by column title; fleets holds what the
// providers said of running fleets (nil: nothing yet), d names a
// provider's descriptor.
func ledgerCells(r ledger.Entry, now time.Time, fleets map[string]ledger.FleetNow, d func(string) domain.Descriptor) map[string]string {
	loc := now.Location()
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.In(loc).Format("01-02 15:04 MST")
	}
	f := ledger.FiguresOf(r, now)
	start, end := f.Start, f.End
	if start.IsZero() {
		start, end = r.Start, r.End // not run (yet): the window asked for
	}
	cost := present.Money(r.CostUSD)
	if r.Kind == ledger.KindFleet {
		cost = present.Money(r.USDHour) + "/h"
		if ledger.CostUnknown(r) {
			cost = "-" // no price was known at launch
		}
	}
	kept := "-"
	if sched, ok := ledger.ScheduleOf(r); ok {
		kept = keptBy(sched.Keeper, d(r.Provider), r.Cloud)
	}
	return map[string]string{"STATE": r.State, "KIND": r.Kind, "WHAT": fmt.Sprintf("%d×%s", r.InstanceCount, present.DisplayType(r.InstanceType)),
		"WHERE": present.Place(r.Region, r.Zone), "START (local)": when(start), "END (local)": when(end), "TIME LEFT": timeLeft(r, now),
		"RUN": running(r, fleets), "COST $": cost, "SO FAR $": present.Money(f.SoFar), "PROVIDER ID": orDash(r.ProviderRef),
		"BY": actorName(r.Actor), "KEPT BY": kept, "LEDGER ID": r.ID, "NOTE": orDash(r.Note)}
}

// running is a fleet's instances running now of those asked, as its
// provider last said: "28/30"; "?" when it could not say and never did;
// "-" for what is not a running fleet or was not asked yet.
func running(r ledger.Entry, fleets map[string]ledger.FleetNow) string {
	f, ok := fleets[r.ID]
	switch {
	case !ledger.LiveFleet(r) || !ok:
		return "-"
	case f.At.IsZero() || (f.Err != nil && f.Fleet.ID == "" && f.Fleet.Target == 0):
		return "?"
	}
	return fmt.Sprintf("%d/%d", f.Fleet.Instances, max(f.Fleet.Target, r.InstanceCount))
}

// keptBy says who starts and ends a scheduled fleet, in a cell: the
// cloud, named by the provider's descriptor or else the row's cloud.
func keptBy(k ledger.Keeper, d domain.Descriptor, cloud string) string {
	if k == "" {
		k = ledger.KeeperOf(d)
	}
	if k == ledger.KeptByCloud {
		who := orDefault(d.CloudName(), orDefault(cloud, d.Name))
		return who + ", at the cloud (on time)"
	}
	return "gpumarket: a TUI or serve must run"
}

// hiddenCells says what the columns that are not shown hold, and the
// cells cut to their column, for the lines under the cursor: "WHERE
// us-east-1a · BY alice · …". Unknown cells are left out.
func hiddenCells(cells map[string]string, shown []tableColumn) string {
	width := map[string]int{}
	for _, c := range shown {
		width[c.title] = c.w
	}
	var parts []string
	for _, c := range ledgerColumns {
		v := cells[c.title]
		if w, on := width[c.title]; (on && cellWidth(v) <= w) || v == "" || v == "-" {
			continue
		}
		parts = append(parts, c.title+" "+v)
	}
	return strings.Join(parts, " · ")
}

// actorName is who booked, as a column has room for: the local user, or
// an SSH key's comment (else its fingerprint).
func actorName(actor string) string {
	if a, ok := strings.CutPrefix(actor, "local:"); ok {
		return a
	}
	if a, ok := strings.CutPrefix(actor, "ssh:"); ok {
		if _, comment, ok := strings.Cut(a, " "); ok && comment != "" {
			return comment
		}
		return a
	}
	return orDash(actor)
}
