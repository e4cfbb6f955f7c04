package tui

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
	"github.com/gpumarket/gpumarket/watch"
)

// planKeys are the Plan view's keys.
type planKeys struct {
	listKeys
	Run, Form, Carry, Alert key.Binding
}

// planView is `gpumarket plan` in the TUI: ranked strategies, their chart,
// and b to carry one out (docs/DESIGN.md, The TUI).
type planView struct {
	actingView
	svc    *ledger.Service
	speeds planner.Speeds
	keys   planKeys
	runs   int // Monte Carlo runs of a plan (planRuns; tests use fewer)

	form planForm
	ran  planForm // as last run: the summary over the table says it

	seq     int // of the latest run
	running bool
	res     planMsg
	cur     int
	acted   bool // a strategy was carried out: the plan's market has changed
	// pending is what b is carrying out; held what was carried out for
	// the job the form holds, by ledger row: r then plans what is left
	// (planner.Uncovered). leftNote says what that was.
	pending  *planner.Held
	held     []planner.Held
	leftNote string
}

func newPlanView(c *common, ctx context.Context, svc *ledger.Service, speeds planner.Speeds, gpus, regions []string) *planView {
	k := planKeys{
		Run:   key.NewBinding(key.WithKeys("r", "enter"), key.WithHelp("r", "run plan")),
		Form:  key.NewBinding(key.WithKeys("e", "/"), key.WithHelp("e", "edit job")),
		Carry: key.NewBinding(key.WithKeys("b"), key.WithHelp("b", "book/launch")),
		Alert: key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "alert rule")),
	}
	k.listKeys = newListKeys(&c.keys, false, []key.Binding{k.Carry, k.Run, k.Form}, []key.Binding{k.Run, k.Form, k.Carry, k.Alert})
	v := &planView{actingView: actingView{base: base{c: c, ctx: ctx}}, svc: svc, speeds: speeds, keys: k, runs: planRuns,
		form: newPlanForm(c.eff, gpus, regions, c.now())}
	v.ran = v.form
	v.confirm = v.confirmation(svc != nil)
	return v
}

func (v *planView) Title() string       { return "Plan" }
func (v *planView) KeyMap() help.KeyMap { return v.keyMap(v.keys, "yes/no", "run the plan", "back") }

func (v *planView) helpNote() string {
	return "A plan is the ways to get the job's GPUs for its hours of work by its deadline: capacity blocks and reservations (paid in full), " +
		"on-demand, spot in one pool or several, and spot with an on-demand safety net, each by " + present.Thousands(v.runs) + " Monte Carlo runs over " +
		"the pools' interruptions (as `gpumarket plan`). EXP $ is the expected cost of the job, P95 $ what 95 % of the runs stay under, " +
		"ON TIME how often it finishes by the deadline, $/GPU-h the expected $ per useful GPU-hour (the job's GPUs × its hours of work). " +
		"Rows on time at least the form's share come first, cheapest expected first. b books the block or launches the fleet the row implies, " +
		"after the usual confirmation; it says what the cloud will not do for you (a safety net's switch to on-demand, moving between regions). " +
		"a makes an alert rule for the job: the best plan on time that often gets cheaper than a figure (below the best now to start with)."
}

// openPlan opens the form on the terms p brought from another view.
func (v *planView) openPlan(s planSeed) {
	if v.confirm.open {
		return // the box shows what it was opened with
	}
	v.open(v.form.fields()) // esc puts back the form before the seed
	v.form = v.form.seeded(s, v.c.now())
	v.formErr = ""
}

// run plans the form's job in a task: the Monte Carlo takes a few hundred
// milliseconds, the offering searches as long as the clouds take.
func (v *planView) run() tea.Cmd {
	now := v.c.now()
	terms, err := v.form.parse(now)
	if err != nil {
		v.formErr = err.Error()
		return nil
	}
	if v.form != v.ran {
		v.held = nil // another job: nothing is held for it
	}
	v.leftNote = ""
	if len(v.held) > 0 {
		left, by := planner.Uncovered(terms.job, v.held, now, v.speeds)
		rows := shortRows(by)
		if left.Hours == 0 {
			return notifyHere("this job is covered by ledger row " + rows + ": nothing is left to plan (e edits the job)")
		}
		if err := left.Check(now, v.speeds); err != nil && len(by) > 0 {
			return notifyErrHere(fmt.Errorf("what ledger row %s leaves, %s h of work, cannot be planned: %w", rows, decimal(math.Round(left.Hours*10)/10), planFieldErr(err)))
		}
		if len(by) > 0 {
			terms.job = left
			loc := now.Location()
			v.leftNote = fmt.Sprintf("what ledger row %s leaves: %s h of work, %s to %s", rows, decimal(math.Round(left.Hours*10)/10),
				left.Start.In(loc).Format("01-02 15:04"), left.Deadline.In(loc).Format("01-02 15:04"))
		}
	}
	if v.snap == nil || len(v.snap.Pools) == 0 {
		v.formErr = "the market has not answered yet: run the plan once prices show in the Market view"
		return nil
	}
	v.formErr, v.ran = "", v.form
	v.seq++
	v.running = true
	in := planInput{seq: v.seq, terms: terms, pools: planPools(v.snap, terms, v.c.eff.Priors), svc: v.svc,
		speeds: v.speeds, runs: v.runs, now: v.c.now()}
	ctx := v.ctx
	return v.task(func() tea.Msg { return makePlan(ctx, in) })
}

func (v *planView) Update(msg tea.Msg) (view, tea.Cmd) {
	return v, v.update(msg, v.run, v.updateKey, func(msg tea.Msg) tea.Cmd {
		switch msg := msg.(type) {
		case planMsg:
			v.planned(msg)
		case bookedMsg:
			// A carried-out strategy's follow-up, whatever its answer.
			v.acted = true
			v.hold(msg.row)
		case fleetLaunchedMsg:
			v.acted = true
			if msg.err == nil {
				v.hold(msg.res.Row)
			}
		}
		return nil
	})
}

// hold records the row b made for the job, unless it holds nothing.
func (v *planView) hold(row ledger.Entry) {
	p := v.pending
	v.pending = nil
	if p == nil || row.ID == "" || row.State == ledger.StateFailed {
		return
	}
	h := *p
	h.Row = row.ID
	v.held = append(v.held, h)
}

func shortRows(ids []string) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = short(id)
	}
	return strings.Join(out, ", ")
}

// planned takes a plan's answer, unless a newer run was started since.
func (v *planView) planned(msg planMsg) {
	if msg.seq != v.seq {
		return
	}
	v.running = false
	v.res, v.cur, v.acted = msg, 0, false
	if msg.err != nil {
		v.formErr = msg.err.Error()
	}
}

func (v *planView) updateKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, v.keys.Alert):
		return v.prompt.offer(v.c, v.makePlanRule)
	case v.keys.move(msg, &v.cur, len(v.res.results)):
	case key.Matches(msg, v.keys.Form):
		v.open(v.form.fields())
	case key.Matches(msg, v.keys.Run):
		return v.run()
	case key.Matches(msg, v.keys.Carry):
		return v.confirm.offer(v.carryOut)
	}
	return nil
}

func (v *planView) View() string {
	if v.editing {
		hint := planHint(v.edit.Focus(), v.c.now())
		return clip(v.openForm.view(&v.c.styles, 17, v.w, hint, "tab/↑/↓ field · enter runs the plan · esc back"), v.w, v.h)
	}
	st := &v.c.styles
	var top []string
	wrap := func(s string) []string { return strings.Split(wordwrap(s, v.w), "\n") }
	top = append(top, wrap(v.summary(v.ran))...)
	status := v.status()
	switch {
	case v.prompt.open:
		// In place of the status, under the job whose terms it takes.
		top = append(top, v.prompt.lines(st, v.w)...)
	case v.formErr != "":
		for _, l := range wrap(v.formErr) {
			top = append(top, st.footerErr.Render(l))
		}
	default:
		top = append(top, st.dim.Render(fit(status, v.w, false)))
	}
	for _, name := range slices.Sorted(maps.Keys(v.res.failed)) {
		for _, l := range wrap(name + ": " + v.res.failed[name].Error()) {
			top = append(top, st.footerErr.Render(l))
		}
	}
	rs := v.res.results
	if len(rs) == 0 {
		return clip(strings.Join(top, "\n"), v.w, v.h)
	}
	cols := fitTable(present.PlanView, v.w-2)
	top = append(top, "  "+st.header.Render(tableHeader(cols)))

	detail := v.detail(rs[v.cur])
	below := 0
	for i, r := range rs {
		if r.OnTimePct < v.res.terms.onTime && (i == 0 || rs[i-1].OnTimePct >= v.res.terms.onTime) {
			below = i
		}
	}
	sep := min(below, 1) // the line over the rows late too often
	// The rows, then the chart in what is left (at least planChartMin lines; else the rows scroll).
	avail := v.h - len(top) - len(detail)
	chartH := 0
	if want := len(rs) + sep; avail-want >= planChartMin {
		chartH = min(avail-want, 12)
	} else if avail-min(len(rs), 4) >= planChartMin {
		chartH = planChartMin
	}
	rows := max(avail-chartH, 1)
	var lines []string
	first := max(0, v.cur-max(rows-sep, 1)+1)
	for i := first; i < len(rs) && len(lines) < rows; i++ {
		if i == below && below > 0 && i > first {
			lines = append(lines, st.dim.Render(fit(fmt.Sprintf("  on time less than %s%% of the runs:", present.GPUCount(v.res.terms.onTime)), v.w, false)))
			if len(lines) >= rows {
				break
			}
		}
		lines = append(lines, v.row(i, rs[i], cols))
	}
	out := append(top, lines...)
	out = append(out, detail...)
	if chartH > 0 {
		if ch := planChart(rs, v.cur, v.res.terms.onTime, v.w, chartH, st); ch != "" {
			out = append(out, ch)
		}
	}
	return clip(strings.Join(out, "\n"), v.w, v.h)
}

// row is the i-th strategy's line of the table.
func (v *planView) row(i int, r planner.Result, cols []shownCol[*present.PlanRow]) string {
	return v.c.styles.pointed("", tableLine(cols, &present.PlanRow{Result: r, Label: rowLabel(i)}), i == v.cur)
}

// detail is the selected strategy said whole: what it holds, where, and
// its assumptions, wrapped (at most four lines on a 24-line terminal,
// eight on a taller one; the rest is cut with an ellipsis).
func (v *planView) detail(r planner.Result) []string {
	st := &v.c.styles
	loc := v.c.now().Location()
	head := fmt.Sprintf("#%s %s: %d × %s in %s (%s) · %.1f interruptions expected · %s → %s",
		rowLabel(v.cur), r.Strategy, r.Instances, present.DisplayTypes(r.InstanceType), strings.Join(r.Regions, ","), r.Provider,
		r.ExpectedInterruptions, r.Start.In(loc).Format("01-02 15:04"), r.End.In(loc).Format("01-02 15:04"))
	if v.svc != nil {
		b := v.svc.Budget()
		if key := planner.OverCap(r.ExpectedCostUSD, b.MaxBookingUSD, b.MaxDailyUSD); key != "" {
			head = "over " + key + ": b would be refused (config budget." + key + ") · " + head
		}
	}
	lines := strings.Split(wordwrap(head+". "+r.Assumptions, v.w), "\n")
	most := 4
	if v.h >= 30 {
		most = 8
	}
	if len(lines) > most {
		lines = lines[:most]
		lines[most-1] = ansi.Truncate(lines[most-1]+" …", v.w, "…")
	}
	for i := range lines {
		lines[i] = st.dim.Render(lines[i])
	}
	return lines
}

// summary says the job as last run in one line; a relative start or deadline
// ("now", "+4d") also says the time the plan was made for, which b carries out.
func (v *planView) summary(f planForm) string {
	ck := "no checkpoints"
	if f.checkpointable {
		ck = "checkpoint " + f.checkpoint
	}
	start, deadline := cmp.Or(f.start, "now"), f.deadline
	if !v.res.at.IsZero() && f == v.ran {
		loc := v.c.now().Location()
		at := func(typed string, t time.Time) string {
			if s := t.In(loc).Format("2006-01-02 15:04"); s != strings.TrimSpace(typed) && !t.IsZero() {
				return typed + " (" + t.In(loc).Format("01-02 15:04") + ")"
			}
			return typed
		}
		start, deadline = at(start, v.res.terms.job.Start), at(deadline, v.res.terms.job.Deadline)
	}
	return fmt.Sprintf("%s × %s for %s h · start %s · deadline %s · %s · changeover %s · regions %s   (e edits)",
		f.gpus, f.models, f.hours, start, deadline, ck, f.changeover, cmp.Or(f.regions, "all"))
}

// status says where the plan is: running, made (when, how), or not yet.
func (v *planView) status() string {
	switch {
	case v.running:
		return "planning: searching the offerings and running " + present.Thousands(v.runs) + " Monte Carlo runs…"
	case v.seq == 0:
		return "r runs the plan (an offering search and " + present.Thousands(v.runs) + " Monte Carlo runs); e edits the job"
	}
	loc := v.c.now().Location()
	s := fmt.Sprintf("%d ways at %s · %s runs · on time ≥ %s%% first, cheapest first",
		len(v.res.results), v.res.at.In(loc).Format("15:04"), present.Thousands(v.runs), present.GPUCount(v.res.terms.onTime))
	switch {
	case v.form != v.ran:
		s = "the job was edited: r runs it · " + s
	case v.acted:
		s = "carried out since: r plans again on what is left · " + s
	case v.leftNote != "":
		s = v.leftNote + " · " + s
	}
	return s
}

// planRuns is `gpumarket plan`'s default.
const planRuns = 10000

// planSearchTimeout: a silent cloud must not leave the view planning for ever.
const planSearchTimeout = time.Minute

// planMsg is a plan's answer with what it was made of, to carry out as shown.
type planMsg struct {
	seq   int
	terms planTerms
	// results are ranked: on time enough first, then cheapest expected.
	results []planner.Result
	// pools and offers are the market the plan was made on.
	pools  map[string]planner.Pool
	offers map[string]domain.Offering
	// failed are the sources the plan was made without (offering searches,
	// the ledger), each error saying so.
	failed map[string]error
	err    error
	at     time.Time
}

// planInput is copied off the model before the task runs.
type planInput struct {
	seq    int
	terms  planTerms
	pools  []planner.Pool
	svc    *ledger.Service
	speeds planner.Speeds
	runs   int
	now    time.Time
}

// planPools are read as `gpumarket plan` does (present.PlanPools).
func planPools(snap *feed.Snapshot, t planTerms, priors planner.Priors) []planner.Pool {
	return present.PlanPools(snap, t.job.Models, func(p domain.Pool) bool {
		return len(t.regions) == 0 || slices.Contains(t.regions, p.Region)
	}, priors)
}

// makePlan searches offerings through the booking service (bookable by id)
// and plans the job on them and the pools.
func makePlan(ctx context.Context, in planInput) planMsg {
	out := planMsg{seq: in.seq, terms: in.terms, at: in.now, failed: map[string]error{},
		pools: map[string]planner.Pool{}, offers: map[string]domain.Offering{}}
	for _, p := range in.pools {
		out.pools[p.Key] = p
	}
	var offs []domain.Offering
	if in.svc != nil && in.svc.CanBook() {
		sctx, cancel := context.WithTimeout(ctx, planSearchTimeout)
		for _, q := range planner.BlockQueries(in.terms.job, in.now, in.speeds) {
			q.Regions = in.terms.regions
			res, err := in.svc.FindOfferings(sctx, q)
			// A source that did not answer: planned without it, and said.
			for _, w := range res.Warnings {
				name := strings.TrimSpace(w.Provider + " " + w.Region)
				if _, seen := out.failed[name]; !seen {
					out.failed[name] = fmt.Errorf("offerings of %s for %s: %w%s", q.GPU, domain.FormatWindow(q.Duration), w.Err, withoutOfferings)
				}
			}
			if err != nil && len(res.Warnings) == 0 {
				out.failed["offerings"] = fmt.Errorf("%w%s", err, withoutOfferings)
			}
			for _, o := range res.Offerings {
				if _, seen := out.offers[o.ID]; !seen {
					out.offers[o.ID] = o
					offs = append(offs, o)
				}
			}
		}
		cancel()
	}
	own, err := ownFleets(ctx, in.svc, in.now)
	if err != nil && ctx.Err() == nil {
		out.failed["ledger"] = fmt.Errorf("your fleets could not be read: %w (risk from the market alone)", err)
	}
	results, err := planner.Plan(in.terms.job, planner.Market{Pools: planner.WithOwn(in.pools, own), Offerings: offs},
		planner.Options{Runs: in.runs, Seed: 1, Speeds: in.speeds})
	if err != nil {
		out.err = planFieldErr(err)
		return out
	}
	planner.Rank(results, in.terms.onTime)
	out.results = results
	return out
}

// ownFleets is what the user's spot fleets met per pool, as `plan` reads it.
func ownFleets(ctx context.Context, svc *ledger.Service, now time.Time) (planner.Own, error) {
	if svc == nil || svc.Store() == nil {
		return nil, nil
	}
	fs, err := svc.Store().FleetUsages(ctx)
	if err != nil {
		return nil, err
	}
	return planner.OwnFrom(fs, now), nil
}

const withoutOfferings = " (the plan is made without its offerings)"

// makePlanRule prompts for a plan rule on the job the table shows (one edited
// since is taken as typed); the watch prices it as `gpumarket plan` does.
func (v *planView) makePlanRule() (*rulePrompt, tea.Cmd) {
	shown := len(v.res.results) > 0 && v.form == v.ran && !v.running
	t := v.res.terms
	if !shown {
		var err error
		if t, err = v.form.parse(v.c.now()); err != nil {
			return nil, notifyErrHere(fmt.Errorf("the job: %w; e edits it", err))
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
	p := rulePrompt{what: what}
	if shown {
		for _, r := range v.res.results {
			if r.OnTimePct >= onTime && !math.IsNaN(r.ExpectedCostUSD) {
				p.now = fmt.Sprintf("best now $%.2f, %s", r.ExpectedCostUSD, r.Strategy)
				p.value = decimal(math.Floor(r.ExpectedCostUSD*95) / 100)
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
		return watch.Spec{Name: ruleName("plan", strings.Join(job.Models, "-"), strconv.Itoa(job.GPUs), decimal(job.Hours)+"h"), Cond: &rule}
	}
	return &p, nil
}
