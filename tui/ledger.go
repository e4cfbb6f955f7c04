package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/job"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// ledgerReload: other sessions and processes write to the ledger too.
const ledgerReload = 5 * time.Second

type (
	// ledgerLoad is a read of the ledger, rep when it reconciled first.
	ledgerLoad struct {
		rows []ledger.Entry
		jobs []jobLine
		rep  *ledger.ReconcileReport
	}
	fleetDeletedMsg struct{}
)

type ledgerKeys struct {
	listKeys
	Delete, Reconcile key.Binding
}

// ledgerView lists the bookings, current and upcoming first, then newest first.
type ledgerView struct {
	base
	loader // ready: the first load (with reconciliation) is done
	svc    *ledger.Service
	keys   ledgerKeys
	rows   []ledger.Entry
	cur    int
	note   string // what the last reconciliation could not settle
	// asked is the seq of the load that r asked for (0: none).
	asked int
	// changes is the service's change count at the last load.
	changes uint64
	// fleets is the running fleets' state by row id, asked after each load.
	fleets     map[string]ledger.FleetNow
	fleetsRead loader
	// states at the last load, to tell a row that fails since.
	states map[string]string
	// jobs are the ledger's jobs, newest first, with their rows' ids.
	jobs []jobLine

	confirm confirmation
}

func newLedgerView(c *common, ctx context.Context, svc *ledger.Service) *ledgerView {
	k := ledgerKeys{
		Delete:    key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "delete fleet")),
		Reconcile: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reconcile")),
	}
	k.listKeys = newListKeys(&c.keys, true, []key.Binding{k.Delete, k.Reconcile}, nil)
	v := &ledgerView{base: base{c: c, ctx: ctx}, svc: svc, keys: k}
	v.confirm = v.confirmation(svc != nil)
	return v
}

func (v *ledgerView) Title() string       { return "Ledger" }
func (v *ledgerView) KeyMap() help.KeyMap { return v.keys }
func (v *ledgerView) box() *confirmation  { return &v.confirm }
func (v *ledgerView) slashFiltersMarket() {}

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

func (v *ledgerView) load(reconcile bool) tea.Cmd {
	if v.svc == nil || v.busy {
		return nil
	}
	v.changes = v.svc.Changes()
	svc := v.svc
	return load(&v.loader, &v.owner, v.ctx, func(ctx context.Context) (l ledgerLoad, err error) {
		if reconcile {
			r, err := svc.Reconcile(ctx)
			if err != nil {
				return l, err
			}
			l.rep = &r
		}
		if l.rows, err = svc.Store().List(ctx); err == nil {
			l.jobs, err = loadJobs(ctx, svc.Store())
		}
		return l, err
	})
}

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
	case loadedMsg[ledgerLoad]:
		cmds = append(cmds, v.loaded(msg))
	case loadedMsg[map[string]ledger.FleetNow]:
		if v.fleetsRead.took(msg.seq, nil, v.c.now()) {
			v.fleets = msg.val
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
	// Written to elsewhere by this session: reread now.
	if v.ready && v.svc != nil && v.svc.Changes() != v.changes {
		cmds = append(cmds, v.load(false))
	}
	return v, tea.Batch(cmds...)
}

func (v *ledgerView) loaded(msg loadedMsg[ledgerLoad]) tea.Cmd {
	if !v.took(msg.seq, msg.err, v.c.now()) {
		return nil
	}
	asked := v.asked == msg.seq
	v.asked = 0
	if msg.err != nil {
		return notifyErr(msg.err)
	}
	l := msg.val
	told := v.failures(l.rows)
	v.jobs = l.jobs
	v.rows = orderLedger(l.rows)
	v.cur = min(v.cur, max(len(v.rows)-1, 0))
	if l.rep != nil {
		var parts []string
		for _, u := range l.rep.Unsettled {
			parts = append(parts, fmt.Sprintf("%s: %s", short(u.Row.ID), u.Reason))
		}
		v.note = strings.Join(parts, "; ")
	}
	if asked {
		return tea.Batch(reconciled(l.rep), v.askFleets(), told)
	}
	return tea.Batch(v.askFleets(), told)
}

// failures tells each row failed since the last load, whoever made it.
func (v *ledgerView) failures(rows []ledger.Entry) tea.Cmd {
	first := v.states == nil
	var lines []string
	next := make(map[string]string, len(rows))
	for _, r := range rows {
		next[r.ID] = r.State
		if was, seen := v.states[r.ID]; !first && r.State == ledger.StateFailed && was != ledger.StateFailed && (seen || r.Error != "") {
			lines = append(lines, fmt.Sprintf("ledger row %s (%s %d×%s) failed: %s", short(r.ID), r.Kind, r.InstanceCount,
				present.DisplayType(r.InstanceType), cmp.Or(r.Error, "see the Ledger view")))
		}
	}
	v.states = next
	if len(lines) == 0 {
		return nil
	}
	return notifyErr(errors.New(strings.Join(lines, "; ")))
}

func (v *ledgerView) askFleets() tea.Cmd {
	if v.svc == nil || v.fleetsRead.busy || !slices.ContainsFunc(v.rows, ledger.LiveFleet) {
		return nil
	}
	svc, rows := v.svc, slices.Clone(v.rows)
	return load(&v.fleetsRead, &v.owner, v.ctx, func(ctx context.Context) (map[string]ledger.FleetNow, error) {
		return svc.FleetsNow(ctx, rows), nil
	})
}

func (v *ledgerView) updateKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case v.keys.move(msg, &v.cur, len(v.rows)):
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

// deleteFleet is the money action behind d: nothing to quote.
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
	scheduled := r.State == ledger.StateScheduled && r.ProviderRef == ""
	if !scheduled && (r.State == ledger.StateDeleted || r.ProviderRef == "") {
		return nil, notifyHere(fmt.Sprintf("fleet row %s is %s: nothing to delete", short(r.ID), r.State))
	}
	a := &moneyAction{title: "Delete fleet " + r.ProviderRef + "?", verb: "delete it", sending: "deleting", lines: []string{
		fmt.Sprintf("%d × %s in %s (%s), state %s", r.InstanceCount, r.InstanceType, r.Region, r.Provider, r.State),
		"Its instances are terminated; work on them is lost.",
	}}
	done := func(row ledger.Entry) string { return "deleted fleet " + row.ProviderRef }
	if scheduled {
		a.title, a.verb, a.sending = "Cancel the scheduled fleet "+short(r.ID)+"?", "cancel it", "cancelling"
		a.lines = []string{
			fmt.Sprintf("%d × %s in %s (%s), %s", r.InstanceCount, r.InstanceType, r.Region, r.Provider, present.TimeLeft(r, v.c.now())),
			"Nothing was launched yet; nothing is spent. gpumarket will not launch it.",
		}
		done = func(row ledger.Entry) string { return "cancelled the scheduled fleet " + short(row.ID) }
	}
	a.send = func(ctx context.Context) outcome {
		row, err := svc.DeleteFleet(ctx, id, actor)
		return outcome{notice: done(row), err: err, then: fleetDeletedMsg{}}
	}
	return a, nil
}

// ledgerRank: current, upcoming, awaiting an answer; every other state after.
var ledgerRank = map[string]int{ledger.StateActive: 0, ledger.StateScheduled: 1, ledger.StatePending: 2, ledger.StateUnknown: 2}

// orderLedger puts current and upcoming blocks first, then newest first.
func orderLedger(rows []ledger.Entry) []ledger.Entry {
	rank := func(r ledger.Entry) int {
		if n, ok := ledgerRank[r.State]; ok {
			return n
		}
		return 3
	}
	out := slices.Clone(rows)
	slices.SortStableFunc(out, func(a, b ledger.Entry) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		if rank(a) <= 1 && dated(a) && dated(b) && !a.Start.Equal(b.Start) {
			return a.Start.Compare(b.Start)
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out
}

// dated: a block, a reservation or a fleet with a start.
func dated(r ledger.Entry) bool { return ledger.Booked(r.Kind) || !r.Start.IsZero() }

func short(id string) string {
	if len(id) > 8 {
		return "…" + id[len(id)-6:]
	}
	return id
}

func (v *ledgerView) View() string {
	st := &v.c.styles
	var b strings.Builder
	now := v.c.now()
	switch {
	case v.svc == nil:
		return st.dim.Render("No ledger in this session: nothing can be booked or launched here.")
	case !v.ready:
		return st.dim.Render("reading the ledger and reconciling unknown outcomes…")
	}
	status := plural(len(v.rows), "row")
	if v.c.role != RoleViewer {
		// The ledger's path is the operator's business, not an attendee's.
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
	cols := fitTable(present.LedgerView, v.w-2)
	b.WriteString("\n  " + st.header.Render(tableHeader(cols)))
	if len(v.rows) == 0 {
		b.WriteString("\n" + st.dim.Render(wrapIndent("  Nothing booked or launched yet. Blocks: b books an offering; Fleet: L launches.", v.w)))
		return b.String()
	}
	var detail []string
	cur := v.rows[min(v.cur, len(v.rows)-1)]
	if cur.Error != "" {
		detail = append(detail, st.footerErr.Render(fit(cur.Error, max(v.w-4, 1), false)))
	}
	if id := v.jobOf(cur.ID); id != "" {
		detail = append(detail, st.dim.Render(fit("a launch of job "+id, max(v.w-4, 1), false)))
	}
	if d := hiddenCells(present.LedgerView, cols, v.ledgerRow(cur, now)); d != "" {
		for _, l := range strings.Split(wordwrap(d, max(v.w-4, 1)), "\n") {
			detail = append(detail, st.dim.Render(fit(l, max(v.w-4, 1), false)))
		}
	}
	detail = detail[:min(len(detail), max(v.h-used-1, 0), 3)]
	first, end := page(v.cur, len(v.rows), max(v.h-used-len(detail), 1))
	for i := first; i < end; i++ {
		r := v.rows[i]
		text := tableLine(cols, v.ledgerRow(r, now))
		if i != v.cur && (r.State == ledger.StateUnknown || r.State == ledger.StateFailed) {
			text = st.stale.Render(text)
		}
		b.WriteString(st.pointed("\n", text, i == v.cur))
		if i == v.cur {
			for _, l := range detail {
				b.WriteString("\n    " + l)
			}
		}
	}
	return b.String()
}

func (v *ledgerView) ledgerRow(r ledger.Entry, now time.Time) *present.LedgerRow {
	lr := present.NewLedgerRow(r, now)
	if f, ok := v.fleets[r.ID]; ok {
		lr.Fleet = &f
	}
	lr.Desc = v.svc.Describe(r.Provider)
	return &lr
}

// jobLine is a job as the Ledger view lists it, with its rows.
type jobLine struct {
	job  ledger.Job
	rows []ledger.Entry
}

// shownJobs bounds the jobs the Ledger view lists over its rows.
const shownJobs = 3

// loadJobs reads the newest jobs and their rows' ids.
func loadJobs(ctx context.Context, st *ledger.Store) ([]jobLine, error) {
	js, err := st.ListJobs(ctx)
	if err != nil {
		return nil, err
	}
	var out []jobLine
	for _, j := range js[:min(len(js), shownJobs)] {
		rows, err := st.JobRows(ctx, j.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, jobLine{job: j, rows: rows})
	}
	return out, nil
}

// viewJobs writes the jobs part over the rows: each job's progress, spent
// against its plan, and its rows; it returns the lines it used.
func (v *ledgerView) viewJobs(b *strings.Builder, now time.Time) int {
	if len(v.jobs) == 0 || v.h < 12 {
		return 0
	}
	st := &v.c.styles
	used := 0
	for _, l := range v.jobs {
		j := l.job
		odds := ""
		if pct, ok := job.OnTimePct(j); ok && ledger.JobActive(j.State) {
			odds = fmt.Sprintf(" · on time %.0f%% (plan %.0f%%)", pct, j.Plan.OnTimePct)
		}
		line := fmt.Sprintf("job %s %s %s · %.1f h of %g%s · $%.2f of plan $%.2f · %s", short(j.ID), j.State, j.Strategy,
			j.WorkDone, j.Terms.Hours, odds, ledger.JobSpent(l.rows, now), j.Plan.ExpectedUSD, plural(len(l.rows), "row"))
		if j.Reason != "" && !ledger.JobActive(j.State) {
			line += " · " + j.Reason
		} else if j.Outlook != "" {
			line += " · " + j.Outlook
		}
		b.WriteString("\n" + st.dim.Render(fit(line, v.w, false)))
		used++
	}
	return used
}

// jobOf is the short id of the listed job a row is a launch of, or "".
func (v *ledgerView) jobOf(rowID string) string {
	for _, l := range v.jobs {
		if slices.ContainsFunc(l.rows, func(r ledger.Entry) bool { return r.ID == rowID }) {
			return short(l.job.ID)
		}
	}
	return ""
}
