package tui

import (
	"cmp"
	"context"
	"errors"
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
	"github.com/gpumarket/gpumarket/job"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
	"github.com/gpumarket/gpumarket/tui/widget/form"
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
	switch {
	case v.prompt.open:
		// In place of the status, under the job whose terms it takes.
		top = append(top, v.prompt.lines(st, v.w)...)
	case v.formErr != "":
		for _, l := range wrap(v.formErr) {
			top = append(top, st.footerErr.Render(l))
		}
	default:
		top = append(top, st.dim.Render(fit(v.status(), v.w, false)))
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
		line := tableLine(cols, &present.PlanRow{Result: rs[i], Label: rowLabel(i)})
		lines = append(lines, st.pointed("", line, i == v.cur))
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

// detail is the selected strategy with its assumptions, wrapped in four lines
// on a 24-line terminal, eight on a taller one, then cut with an ellipsis.
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

// planForm is the job as typed; parse reads it as `gpumarket plan` reads
// its flags. An empty start is now, empty regions every region shown.
type planForm struct {
	gpus, models, hours    string
	start, deadline        string
	checkpointable         bool
	checkpoint, changeover string
	regions                string // a comma list
	onTime                 string
}

// planTerms is a parsed form; onTime is the share ranked first.
type planTerms struct {
	job     planner.Job
	regions []string
	onTime  float64
}

// newPlanForm is config plan.*'s job on the session's GPUs and regions.
func newPlanForm(basis planner.Basis, gpus, regions []string, now time.Time) planForm {
	f := planForm{
		gpus: strconv.Itoa(basis.GPUs), models: "H100", hours: decimal(basis.Hours),
		checkpointable: basis.Checkpoint > 0, checkpoint: domain.FormatDuration(basis.Checkpoint), changeover: domain.FormatDuration(basis.Changeover),
		regions: strings.Join(regions, ","), onTime: "95",
	}
	if basis.Checkpoint <= 0 {
		f.checkpoint = "15m"
	}
	if ms := normalModels(gpus); len(ms) > 0 {
		f.models = strings.Join(ms, ",")
	}
	f.deadline = defaultDeadline(now, basis.Hours, now)
	return f
}

// normalModels keeps the GPU models the planner knows, in canonical case.
func normalModels(gpus []string) []string {
	var out []string
	for _, g := range gpus {
		if m, ok := domain.CanonicalGPU(g); ok && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// defaultDeadline gives a job of hours from start half as long again, on
// the hour: a deadline the user sees, never one left implied.
func defaultDeadline(start time.Time, hours float64, now time.Time) string {
	if math.IsNaN(hours) || hours <= 0 || hours > planner.MaxSpan.Hours() {
		hours = 24
	}
	d := start.Add(time.Duration(hours * 1.5 * float64(time.Hour)))
	if t := d.Truncate(time.Hour); t.Before(d) {
		d = t.Add(time.Hour)
	}
	return d.In(now.Location()).Format("2006-01-02 15:04")
}

// decimal is x in the fewest digits: 48, 18.5.
func decimal(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// planStart is the form's start; empty is the next minute, as in the command.
func planStart(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "now") {
		return now.Truncate(time.Minute).Add(time.Minute), nil
	}
	return domain.ParseWhen(s, now)
}

// parse reads the form, naming the field that is wrong and what it accepts.
func (f planForm) parse(now time.Time) (planTerms, error) {
	var t planTerms
	j := &t.job
	var err error
	if j.GPUs, err = strconv.Atoi(strings.TrimSpace(f.gpus)); err != nil || j.GPUs < 1 || j.GPUs > planner.MaxGPUs {
		return t, fmt.Errorf("GPUs %q: want a whole number of GPUs from 1 to %d", f.gpus, planner.MaxGPUs)
	}
	for _, g := range strings.Split(f.models, ",") {
		g = strings.TrimSpace(g)
		if g == "" {
			continue
		}
		m, ok := domain.CanonicalGPU(g)
		if !ok {
			return t, fmt.Errorf("GPU models: unknown GPU %q; want one or more of %s, such as H100 or H100,H200", g, strings.Join(domain.GPUModels, ", "))
		}
		if slices.Contains(j.Models, m) {
			return t, fmt.Errorf("GPU models: %s is named twice", m)
		}
		j.Models = append(j.Models, m)
	}
	if len(j.Models) == 0 {
		return t, fmt.Errorf("GPU models: none; want one or more of %s, such as H100 or H100,H200", strings.Join(domain.GPUModels, ", "))
	}
	j.Hours, err = strconv.ParseFloat(strings.TrimSpace(f.hours), 64)
	if err != nil || math.IsNaN(j.Hours) || j.Hours <= 0 || j.Hours > planner.MaxSpan.Hours() {
		return t, fmt.Errorf("hours of work %q: want a number of hours above 0, at most %.0f (26 weeks), such as 48", f.hours, planner.MaxSpan.Hours())
	}
	if j.Start, err = planStart(f.start, now); err != nil {
		return t, fmt.Errorf("earliest start %q: want %s, or empty for now", strings.TrimSpace(f.start), domain.WhenForm)
	}
	d := strings.TrimSpace(f.deadline)
	if d == "" {
		return t, fmt.Errorf("deadline: missing; want %s (+3d is from now)", domain.WhenForm)
	}
	if j.Deadline, err = domain.ParseWhen(d, now); err != nil {
		return t, fmt.Errorf("deadline %q: want %s (+3d is from now)", d, domain.WhenForm)
	}
	j.Checkpointable = f.checkpointable
	if f.checkpointable {
		if j.Checkpoint, err = time.ParseDuration(strings.TrimSpace(f.checkpoint)); err != nil || j.Checkpoint <= 0 {
			return t, fmt.Errorf("checkpoint every %q: want a positive duration such as 15m or 1h (or Checkpointable: no)", f.checkpoint)
		}
	}
	if j.Changeover, err = time.ParseDuration(strings.TrimSpace(f.changeover)); err != nil {
		return t, fmt.Errorf("changeover %q: want a duration from 0s to 24h such as 12m", f.changeover)
	}
	for _, r := range strings.Split(f.regions, ",") {
		if r = strings.TrimSpace(r); r != "" && !slices.Contains(t.regions, r) {
			t.regions = append(t.regions, r)
		}
	}
	t.onTime, err = strconv.ParseFloat(strings.TrimSpace(f.onTime), 64)
	if err != nil || math.IsNaN(t.onTime) || t.onTime < 0 || t.onTime > 100 {
		return t, fmt.Errorf("on time %q: want a percentage from 0 to 100, such as 95", f.onTime)
	}
	if err := j.Check(now, nil); err != nil {
		return t, planFieldErr(err)
	}
	return t, nil
}

// planFieldLabels name the planner's fields as the form does.
var planFieldLabels = map[string]string{
	"gpus": "GPUs", "gpu": "GPU models", "hours": "hours of work", "start": "earliest start",
	"deadline": "deadline", "checkpoint": "checkpoint every", "changeover": "changeover",
}

// planFieldErr words a planner refusal with the form's name of its field.
func planFieldErr(err error) error {
	if fe, ok := errors.AsType[*planner.FieldError](err); ok {
		return fmt.Errorf("%s: %s", cmp.Or(planFieldLabels[fe.Field], fe.Field), fe.Msg)
	}
	return err
}

// planSeed is what p in the Market or Blocks view brings to the form; empty
// fields leave the form's. latest is the Blocks form's latest start.
type planSeed struct {
	models     []string
	regions    []string
	setRegions bool // regions replace the form's, none meaning all
	gpus       string
	hours      float64
	start      string
	latest     string
}

// seeded is the form with the seed's terms; a deadline too early for the
// hours is made again.
func (f planForm) seeded(s planSeed, now time.Time) planForm {
	if ms := normalModels(s.models); len(ms) > 0 {
		f.models = strings.Join(ms, ",")
	}
	if s.setRegions {
		f.regions = strings.Join(s.regions, ",")
	}
	if s.gpus != "" {
		f.gpus = s.gpus
	}
	if s.hours > 0 {
		f.hours = decimal(s.hours)
	}
	if s.start != "" {
		f.start = s.start
	}
	start, err := planStart(f.start, now)
	if err != nil {
		return f // the form says so when it runs
	}
	hours, err := strconv.ParseFloat(strings.TrimSpace(f.hours), 64)
	if err != nil {
		return f
	}
	if s.latest != "" {
		if l, err := domain.ParseWhen(strings.TrimSpace(s.latest), now); err == nil {
			f.deadline = l.Add(time.Duration(hours * float64(time.Hour))).In(now.Location()).Format("2006-01-02 15:04")
			return f
		}
	}
	d, err := domain.ParseWhen(strings.TrimSpace(f.deadline), now)
	if err != nil || d.Before(start.Add(time.Duration(hours*float64(time.Hour)))) {
		f.deadline = defaultDeadline(start, hours, now)
	}
	return f
}

// fields are the form's fields, bound to f.
func (f *planForm) fields() []form.Field {
	return []form.Field{form.Text("GPUs", &f.gpus), form.Text("GPU models", &f.models), form.Text("Hours of work", &f.hours),
		form.Text("Earliest start", &f.start).Empty("now"), form.Text("Deadline", &f.deadline),
		form.Toggle("Checkpointable", "no", "yes", &f.checkpointable), form.Text("Checkpoint every", &f.checkpoint),
		form.Text("Changeover", &f.changeover), form.Text("Regions", &f.regions).Empty("all"), form.Text("On time ≥ %", &f.onTime)}
}

// planHint says what field i takes; the start's examples are dated from now.
func planHint(i int, now time.Time) string {
	if planHints[i] == "" {
		return domain.WhenExample(now) + " or tomorrow 09:00 (local), +6h, +2d; empty: now"
	}
	return planHints[i]
}

// planHints say, beside each field of fields, what it takes.
var planHints = []string{
	"the GPUs the job needs at once, 1-512",
	"H100, or H100,H200: the hours are measured on the first; the others run at their relative speed (config plan.speed)",
	"hours of work on the first model, such as 48",
	"", // planHint
	"the same forms; +3d is 3 days from now, not from the start",
	"←/→ yes or no: a job that cannot checkpoint starts over when interrupted (a workshop, a load test)",
	"time between checkpoints, such as 15m or 1h",
	"wall time a start or a switch costs: provisioning, image, restore (0.2-0.3 h measured), such as 12m",
	"a comma list such as us-east-1,eastus; empty: every region the market shows",
	"strategies on time at least this often come first, cheapest expected first",
}

// carryOut is the money action behind b: a strategy's offering is booked, other
// strategies launch their fleet; notes say what is not automated.
func (v *planView) carryOut() (*moneyAction, tea.Cmd) {
	if len(v.res.results) == 0 || v.cur >= len(v.res.results) {
		return nil, notifyHere("no plan to carry out: r runs the plan")
	}
	r := v.res.results[v.cur]
	now := v.c.now()
	if r.OfferingID != "" {
		o, ok := v.res.offers[r.OfferingID]
		if !ok {
			return nil, notifyErrHere(fmt.Errorf("offering %s is no longer among the plan's: r runs the plan again", r.OfferingID))
		}
		v.pending = &planner.Held{Kind: o.Terms().Kind, Model: o.GPU.Model, GPUs: o.GPUCount(), Start: o.Start, End: o.End}
		a := buyAction(v.svc, v.c.actor, o, now, nil, 0)
		// Notes, not terms: they survive renewed terms.
		a.notes = append(v.planLines(r), bookNotes(r, o, v.res.terms.job, v.res.pools, now)...)
		return a, nil
	}
	if slices.Contains(planner.CarriedOut, r.Strategy) && r.Strategy != planner.StrategyOnDemand {
		a := v.jobAction(r)
		a.notes = v.planLines(r)
		return a, nil
	}
	spec, left, err := planFleet(r, v.res.pools, v.res.terms.job)
	if err != nil {
		return nil, notifyErrHere(err)
	}
	// Scheduled over the plan's window, by the cloud or gpumarket's reconcile loop.
	job := v.res.terms.job
	if job.Start.After(now) {
		spec.Start = job.Start
	}
	if job.Deadline.After(now) {
		spec.End = job.Deadline
	}
	p0 := v.res.pools[r.Pools[0]]
	v.pending = &planner.Held{Kind: domain.KindFleet, Model: p0.GPUModel, GPUs: float64(spec.TargetCapacity) * p0.GPUsPerInstance,
		Start: domain.Later(spec.Start, now), End: spec.End}
	desc := v.svc.Describe(spec.Provider)
	a := launchAction(v.svc, v.c.actor, spec, now, "for", nil)
	a.notes = append(v.planLines(r), fleetNotes(r, spec, left, v.res.pools, now, desc)...)
	return a, nil
}

// planLines say which plan the action carries out and what it expects.
func (v *planView) planLines(r planner.Result) []string {
	loc := v.c.now().Location()
	return []string{fmt.Sprintf("Plan #%s (%s) %s: expected $%.2f, p95 $%.2f, on time in %.1f %% of %s runs — a model, not a quote.",
		rowLabel(v.cur), v.res.at.In(loc).Format("15:04"), r.Strategy, r.ExpectedCostUSD, r.P95CostUSD, r.OnTimePct, present.Thousands(v.runs))}
}

// bookNotes say what booking a strategy's offering does not do.
func bookNotes(r planner.Result, o domain.Offering, job planner.Job, pools map[string]planner.Pool, now time.Time) []string {
	var out []string
	if o.StartsOnPurchase && job.Start.After(now.Add(time.Hour)) {
		out = append(out, fmt.Sprintf("It starts when bought, now, %s before the job's start (%s), and bills from now.",
			roundDur(job.Start.Sub(now)), job.Start.In(now.Location()).Format("Mon 01-02 15:04")))
	}
	undone := []string{"running your job on it"}
	if r.Strategy == planner.StrategyBlockSpot {
		spot := "the spot part of the plan"
		if len(r.Pools) > 0 {
			p := pools[r.Pools[0]]
			spot = fmt.Sprintf("the spot part of the plan (%s in %s first, %s)", present.DisplayType(p.InstanceType), present.Place(p.Region, p.Zone), plural(len(r.Pools), "pool"))
		}
		undone = []string{spot + " and its on-demand safety net: this books the block only", "running your job"}
	}
	return append(out, "Not automated: "+strings.Join(undone, "; ")+".")
}

// planFleet is a strategy's fleet: its first pool's provider, region and GPUs
// per instance, enough for the job; left are the pools it does not hold.
func planFleet(r planner.Result, pools map[string]planner.Pool, job planner.Job) (domain.FleetSpec, []planner.Pool, error) {
	var spec domain.FleetSpec
	if len(r.Pools) == 0 {
		return spec, nil, fmt.Errorf("%s names no pool to launch: r runs the plan again", r.Strategy)
	}
	p0, ok := pools[r.Pools[0]]
	if !ok || p0.GPUsPerInstance <= 0 {
		return spec, nil, fmt.Errorf("the plan's pool %s is no longer known: r runs the plan again", r.Pools[0])
	}
	var left []planner.Pool
	spec = domain.FleetSpec{Provider: p0.Provider, Region: p0.Region, Strategy: domain.StrategyPriceCapacityOptimized,
		TargetCapacity: int(math.Ceil(float64(job.GPUs)/p0.GPUsPerInstance - 1e-9))}
	for _, k := range r.Pools {
		p, ok := pools[k]
		if !ok {
			continue
		}
		if p.Provider != p0.Provider || p.Region != p0.Region || p.GPUsPerInstance != p0.GPUsPerInstance {
			left = append(left, p)
			continue
		}
		if !slices.Contains(spec.InstanceTypes, p.InstanceType) {
			spec.InstanceTypes = append(spec.InstanceTypes, p.InstanceType)
		}
		if p.Zone != "" && !slices.Contains(spec.Zones, p.Zone) {
			spec.Zones = append(spec.Zones, p.Zone)
		}
	}
	if r.Strategy == planner.StrategyOnDemand {
		// On-demand costs the same in every zone.
		spec.OnDemandBase, spec.Zones = spec.TargetCapacity, nil
	}
	if spec.TargetCapacity < 1 {
		return spec, nil, errors.New("the plan needs no instances")
	}
	return spec, left, nil
}

// fleetNotes are short so that at 80×24 the box shows them whole.
func fleetNotes(r planner.Result, spec domain.FleetSpec, left []planner.Pool, pools map[string]planner.Pool, now time.Time, desc domain.Descriptor) []string {
	when := func(t time.Time) string {
		return fmt.Sprintf("%s (%s UTC)", t.In(now.Location()).Format("Mon 01-02 15:04"), t.UTC().Format("15:04"))
	}
	var out []string
	switch keeper := ledger.KeeperOf(desc); {
	case keeper == ledger.KeptByCloud && spec.Start.After(now):
		out = append(out, fmt.Sprintf("The cloud launches it at %s and ends it at the deadline, %s, whether or not gpumarket runs then.", when(spec.Start), when(spec.End)))
	case keeper == ledger.KeptByCloud && !spec.End.IsZero():
		out = append(out, fmt.Sprintf("The cloud ends it at the deadline, %s, whether or not gpumarket runs then.", when(spec.End)))
	case spec.Start.After(now):
		out = append(out, fmt.Sprintf("gpumarket launches it at %s and deletes it at the deadline, %s: a gpumarket TUI or `serve` must be running then.", when(spec.Start), when(spec.End)))
	case !spec.End.IsZero():
		out = append(out, fmt.Sprintf("gpumarket deletes it at the deadline, %s: a gpumarket TUI or `serve` must be running then.", when(spec.End)))
	default:
		out = append(out, "It bills until deleted (Ledger view, d); nothing ends it at the deadline.")
	}
	if r.Strategy == planner.StrategyOnDemand {
		return append(out, "On-demand capacity is not reserved: the cloud may have none (InsufficientInstanceCapacity).",
			"Not automated: running your job on it.")
	}
	var undone []string
	if len(left) > 0 {
		// Named by region, or by type where only the GPUs per instance differ.
		var where []string
		for _, p := range left {
			w := p.Provider + " " + p.Region
			if p.Provider == spec.Provider && p.Region == spec.Region {
				w = present.DisplayType(p.InstanceType) + " in " + p.Region
			}
			if !slices.Contains(where, w) {
				where = append(where, w)
			}
		}
		undone = append(undone, fmt.Sprintf("the plan's other pools (%s): a fleet is one provider's, in one region, of one size of instance", strings.Join(where, ", ")))
	}
	if r.OnDemandPool != "" {
		od := "on-demand"
		if p, ok := pools[r.OnDemandPool]; ok {
			od = fmt.Sprintf("on-demand (%s in %s)", present.DisplayType(p.InstanceType), p.Region)
		}
		undone = append(undone, "the safety net: moving the job to "+od+" when spot falls behind")
	} else {
		undone = append(undone, "finishing on on-demand what spot leaves at the deadline (the plan's cost counts it)")
	}
	undone = append(undone, "replacing interrupted instances", "restarting your job from its checkpoint")
	return append(out, "Not automated: "+strings.Join(undone, "; ")+".")
}

// roundDur says a duration as people do: 19h, 2d 3h, 40m.
func roundDur(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		d = d.Round(time.Hour)
		return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
	case d >= time.Hour:
		return fmt.Sprintf("%dh", int(d.Round(time.Hour).Hours()))
	}
	return fmt.Sprintf("%dm", int(d.Round(time.Minute).Minutes()))
}

// jobAction is b on a strategy a driver carries out: the plan becomes a job
// any running gpumarket drives; its whole hold is checked against the caps.
func (v *planView) jobAction(r planner.Result) *moneyAction {
	pools := slices.SortedFunc(maps.Values(v.res.pools), func(a, b planner.Pool) int { return strings.Compare(a.Key, b.Key) })
	req := job.Request{Job: v.res.terms.job, Market: planner.Market{Pools: pools}, Strategy: r.Strategy, Actor: v.c.actor,
		Options: planner.Options{Runs: v.runs, Seed: 1, Speeds: v.speeds}}
	svc := v.svc
	req.PurchaseCap = svc.Budget().MaxBookingUSD
	return &moneyAction{
		title: fmt.Sprintf("Start a job carrying out %s?%s", r.Strategy, simLaunch(svc, r.Provider)), verb: "start the job",
		checking: "planning the job again and checking its hold against the budget", sending: "recording the job",
		quote: func(ctx context.Context) quoteAnswer {
			p, err := job.Propose(req)
			if err != nil {
				return quoteAnswer{err: err}
			}
			ans := quoteAnswer{lines: jobLines(req, p, svc)}
			if b := svc.Budget(); b.MaxBookingUSD > 0 && p.HoldUSD > b.MaxBookingUSD {
				ans.err = &ledger.BudgetError{Cap: "max_booking_usd", CapUSD: b.MaxBookingUSD, CostUSD: p.HoldUSD}
				return ans
			}
			ans.send = func(ctx context.Context) outcome {
				j, err := job.Start(ctx, svc, req, p)
				if err != nil {
					return outcome{err: err}
				}
				return outcome{notice: fmt.Sprintf("job %s recorded: this gpumarket carries it out (Ledger view: Jobs)", short(j.ID))}
			}
			return ans
		},
	}
}

// jobLines are the job's terms, the hold first.
func jobLines(req job.Request, p job.Proposal, svc *ledger.Service) []string {
	return []string{
		fmt.Sprintf("Hold: $%.2f against the budget caps, counted with every other purchase of the day. It is the job's limit: its work on on-demand alone within budget.max_booking_usd, or the plan's p95 if larger (job start --max-usd sets another).", p.HoldUSD),
		fmt.Sprintf("Plan: expected $%.2f, p95 $%.2f, on time in %.0f %% of the runs.", p.Result.ExpectedCostUSD, p.Result.P95CostUSD, p.Result.OnTimePct),
		fmt.Sprintf("%s, moving after an interruption, on-demand in time for the deadline where the strategy has it; everything ends when the work is done.",
			plural(len(p.Live.Lanes), "spot pool")),
		job.Unattended(job.Every),
	}
}

// planChartMin is four rows of points and the axis.
const planChartMin = 5

// rowLabel marks the i-th strategy: 1-9, then a-z.
func rowLabel(i int) string {
	switch {
	case i < 9:
		return string(rune('1' + i))
	case i < 9+26:
		return string(rune('a' + i - 9))
	}
	return "+"
}

// maxNines: late in at most one run in 10,000 counts as always on time.
const maxNines = 4

// nines places an on-time share by its nines (90 % at 1, 99 % at 2): linear,
// 99 % and 100 % would share a cell, yet that is what a deadline is about.
func nines(onTimePct float64) float64 {
	late := 1 - onTimePct/100
	if late <= math.Pow(10, -maxNines) {
		return maxNines
	}
	return math.Min(math.Max(-math.Log10(late), 0), maxNines)
}

// planChart scatters the strategies by expected cost against on-time nines,
// labelled, the better-ranked and the selected on top; "" when too small.
func planChart(rs []planner.Result, sel int, onTime float64, w, h int, st *styles) string {
	if len(rs) == 0 || h < planChartMin {
		return ""
	}
	ymin, ymax := math.Inf(1), math.Inf(-1)
	xmin := nines(onTime)
	for _, r := range rs {
		ymin, ymax = math.Min(ymin, r.ExpectedCostUSD), math.Max(ymax, r.ExpectedCostUSD)
		xmin = math.Min(xmin, nines(r.OnTimePct))
	}
	if math.IsNaN(ymin) || math.IsInf(ymin, 0) || math.IsNaN(ymax) || math.IsInf(ymax, 0) {
		return ""
	}
	if ymax-ymin < 0.01 {
		ymin, ymax = ymin*0.95, ymax*1.05+0.01
	}
	lo := math.Min(math.Floor(xmin), maxNines-1)
	top, bottom := "$"+present.Money(ymax), "$"+present.Money(ymin)
	lw := max(cellWidth(top), cellWidth(bottom))
	pw, ph := w-lw-1, h-1
	if pw < 16 {
		return ""
	}
	col := func(pct float64) int {
		return min(max(int(math.Round((nines(pct)-lo)/(maxNines-lo)*float64(pw-1))), 0), pw-1)
	}
	row := func(y float64) int {
		return min(max(int(math.Round((ymax-y)/(ymax-ymin)*float64(ph-1))), 0), ph-1)
	}
	grid := make([][]string, ph)
	for i := range grid {
		grid[i] = slices.Repeat([]string{" "}, pw)
	}
	tc := -1
	if nines(onTime) > lo && onTime < 100 {
		tc = col(onTime)
		for i := range grid {
			grid[i][tc] = st.dim.Render("┊")
		}
	}
	// Worst-ranked first, so the better end on top; the selected last.
	for i := len(rs) - 1; i >= 0; i-- {
		if i != sel {
			grid[row(rs[i].ExpectedCostUSD)][col(rs[i].OnTimePct)] = rowLabel(i)
		}
	}
	if sel >= 0 && sel < len(rs) {
		grid[row(rs[sel].ExpectedCostUSD)][col(rs[sel].OnTimePct)] = st.cursor.Render(rowLabel(sel))
	}
	var b strings.Builder
	for i, cells := range grid {
		label, axis := "", "│"
		switch i {
		case 0:
			label, axis = top, "┤"
		case ph - 1:
			label, axis = bottom, "┤"
		}
		b.WriteString(fit(label, lw, true) + st.dim.Render(axis) + strings.Join(cells, "") + "\n")
	}
	b.WriteString(strings.Repeat(" ", lw) + st.dim.Render("└"+xAxis(pw, lo, onTime, tc, col)))
	return b.String()
}

// xAxis is the bottom line: the nines' labels that fit and the threshold.
func xAxis(pw int, lo, onTime float64, tc int, col func(float64) int) string {
	line := []rune(strings.Repeat("─", pw))
	free := slices.Repeat([]bool{true}, pw)
	// put writes s at at only if it and gap cells around are free.
	put := func(at int, s string, gap int) bool {
		r := []rune(s)
		if at < 0 || at+len(r) > pw {
			return false
		}
		for i := max(at-gap, 0); i < min(at+len(r)+gap, pw); i++ {
			if !free[i] {
				return false
			}
		}
		for i, c := range r {
			line[at+i], free[at+i] = c, false
		}
		return true
	}
	put(pw-4, "100%", 0)
	if tc >= 0 {
		th := present.GPUCount(onTime) + "┊"
		put(tc-len([]rune(th))+1, th, 0)
	}
	for _, pct := range []float64{0, 90, 99, 99.9} {
		if n := nines(pct); n >= lo {
			label := decimal(pct) + "%"
			at := col(pct)
			if at > 0 {
				at -= len(label) / 2
			}
			put(at, label, 1)
		}
	}
	for _, caption := range []string{" expected $ ↑ against on time % → ", " $ ↑ on time → ", " on time → "} {
		// Between the ticks, where the longest run of axis is.
		best, run, at := 0, 0, 0
		for i := range pw {
			if free[i] {
				run++
				if run > best {
					best, at = run, i-run+1
				}
			} else {
				run = 0
			}
		}
		if n := len([]rune(caption)); n+2 <= best && put(at+(best-n)/2, caption, 1) {
			break
		}
	}
	return string(line)
}
